package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/node"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		out := stdout.String()
		for _, want := range []string{"idemkv", "revision", runtime.Version(), "release_version " + node.ReleaseVersion, "native protocol v3"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
}

func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "commands:"},
		{[]string{"help"}, 0, "commands:"},
		{[]string{}, 2, "commands:"},
		{[]string{"help", "ring"}, 0, "verbs:"},
		{[]string{"help", "version"}, 0, "usage: idemkv version"},
		{[]string{"version", "-h"}, 0, "usage: idemkv version"},
		{[]string{"version", "x"}, 1, `unexpected argument "x"`},
		{[]string{"help", "nope"}, 2, `unknown command "nope"`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
