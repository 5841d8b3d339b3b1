package main

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
)

// A node that cannot be reached is one error line and status 1.
func TestCQLUnreachableHostIsOneError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	var out, errOut bytes.Buffer
	code := run([]string{"cql", "--port", strconv.Itoa(port), "-e", "SELECT * FROM system.local"}, &out, &errOut)
	if code != 1 {
		t.Errorf("status %d, want 1", code)
	}
	msg := errOut.String()
	if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "idemkv cql: connect to 127.0.0.1:"+strconv.Itoa(port)) {
		t.Errorf("stderr %q", msg)
	}
}

func TestCQLHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"cql", "-h"}, &out, &errOut); code != 0 {
		t.Errorf("status %d", code)
	}
	if !strings.Contains(errOut.String(), "usage: idemkv cql [flags] [host [port]]") {
		t.Errorf("help %q", errOut.String())
	}
}
