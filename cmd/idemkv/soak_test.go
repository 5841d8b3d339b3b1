package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// asNodeEnv makes the test binary run the idemkv command its arguments
// name: the soak's node process in TestBenchSoakTiny.
const asNodeEnv = "IDEMKV_TEST_BINARY_IS_IDEMKV"

func TestMain(m *testing.M) {
	if os.Getenv(asNodeEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchSoakTiny runs 'idemkv bench soak' end to end on 2,000 counters
// of vanilla and FBF: a node process (this test binary, as idemkv), the
// writes, the samples, the flush and the read-back.
func TestBenchSoakTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two node processes")
	}
	t.Setenv(asNodeEnv, "1")
	var out, errs strings.Builder
	dir := t.TempDir()
	err := runBench([]string{"soak", "--designs", "vanilla,fbf", "--counters", "2000", "--sample-every", "1000",
		"--after", "0,1s", "--writers", "4", "--seed", "7", "--binary", os.Args[0], "--quiet",
		"--dir", dir, "--heap-profiles"}, &out, &errs)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errs.String())
	}
	got := out.String()
	for _, d := range []string{"vanilla", "fbf"} {
		if !strings.Contains(got, "design "+d+": 2000 counters written") {
			t.Errorf("no %s result in\n%s", d, got)
		}
	}
	for _, want := range []string{"read back 3, 0 wrong", "\n1000 ", "\n2000 ", "\n+0s ", "\n+1s ", "\nflushed "} {
		if c := strings.Count(got, want); c != 2 {
			t.Errorf("%q %d times, want 2, in\n%s", want, c, got)
		}
	}
	if strings.Contains(got, "PARTIAL") {
		t.Errorf("partial run:\n%s", got)
	}
	// --heap-profiles: one gzipped profile per sample of each design.
	for _, d := range []string{"vanilla", "fbf"} {
		for _, label := range []string{"1000", "2000", "+0s", "+1s", "flushed"} {
			b, err := os.ReadFile(filepath.Join(dir, d, "heap-"+label+".pb.gz"))
			if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
				t.Errorf("%s: heap profile at %s: %d bytes, %v; want a gzipped profile", d, label, len(b), err)
			}
		}
	}
}
