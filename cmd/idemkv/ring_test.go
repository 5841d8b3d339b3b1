package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRingUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args     []string
		code     int
		want     []string // in stderr
		dontWant []string
	}{
		{[]string{"ring", "-h"}, 0, []string{"verbs:", "restart [I]", "kill I"}, nil},
		{[]string{"ring", "help"}, 0, []string{"verbs:"}, nil},
		{[]string{"ring"}, 1, []string{"verbs:", "which verb"}, nil},
		{[]string{"ring", "bogus"}, 1, []string{`unknown verb "bogus"`}, nil},
		{[]string{"ring", "status", "-h"}, 0, []string{"ring status", "-dir"}, []string{"-n int", "-num-tokens", "-wait"}},
		{[]string{"ring", "up", "-h"}, 0, []string{"-num-tokens", "-wait"}, []string{"-grace"}},
		{[]string{"ring", "stop", "-h"}, 0, []string{"-grace"}, []string{"-num-tokens"}},
		{[]string{"ring", "restart", "-h"}, 0, []string{"-grace", "-wait"}, nil},
		{[]string{"ring", "kill", "--dir", dir}, 1, []string{"which node?"}, nil},
		{[]string{"ring", "kill", "x", "--dir", dir}, 1, []string{`"x" is not a node number`}, nil},
		{[]string{"ring", "status", "3", "--dir", dir}, 1, []string{`unexpected argument "3"`}, nil},
		{[]string{"ring", "stop", "--dir", dir}, 1, []string{"no nodes in"}, nil},
		{[]string{"ring", "start", "2", "--dir", dir}, 1, []string{"no nodes in"}, nil},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		name := strings.Join(tc.args, " ")
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s", name, code, tc.code, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr lacks %q:\n%s", name, w, stderr.String())
			}
		}
		for _, w := range tc.dontWant {
			if strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr shows %q:\n%s", name, w, stderr.String())
			}
		}
	}
}

// TestBenchRingBadFlags: bench ring refuses a profile it cannot write and a
// negative coalescing wait before it starts a ring (nothing on stdout).
func TestBenchRingBadFlags(t *testing.T) {
	missing := t.TempDir() + "/no/such/dir/p.prof"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "ring", "--mutexprofile", missing}, "--mutexprofile"},
		{[]string{"bench", "ring", "--blockprofile", missing}, "--blockprofile"},
		{[]string{"bench", "ring", "--memprofile", missing}, "--memprofile"},
		{[]string{"bench", "ring", "--gocql-coalesce", "-1ms"}, "--gocql-coalesce"},
		{[]string{"bench", "ring", "--profile-dir", t.TempDir()}, "--profile-dir"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		name := strings.Join(tc.args, " ")
		if code == 0 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q: want a failure naming %s before any run", name, code, stdout.String(), stderr.String(), tc.want)
		}
	}
}
