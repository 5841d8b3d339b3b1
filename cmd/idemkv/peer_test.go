package main

import (
	"bytes"
	"strings"
	"testing"
)

// Without a ring, stop does nothing and status says there is none; neither
// starts a JVM.
func TestPeerWithoutRing(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := run([]string{"peer", "cassandra", "stop", "--dir", dir}, &out, &errOut); code != 0 {
		t.Errorf("stop of no ring: status %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"peer", "cassandra", "status", "--dir", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no peer ring in") {
		t.Errorf("status of no ring: status %d, stderr %q", code, errOut.String())
	}
}

func TestPeerUsage(t *testing.T) {
	for _, args := range [][]string{{"peer"}, {"peer", "scylla", "up"}, {"peer", "cassandra", "restart"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "usage: idemkv peer cassandra up") {
			t.Errorf("%v: status %d, stderr %q", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"peer", "cassandra", "up", "-n", "0", "--dir", t.TempDir()}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "0 nodes") {
		t.Errorf("up -n 0: status %d, stderr %q", code, errOut.String())
	}
}
