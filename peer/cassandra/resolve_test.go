package cassandra

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A stand-in for Maven: it records its arguments and creates the output
// directory with a cassandra-all jar, printing colour resets as Maven 3.8
// does.
const fakeMaven = `#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
for a in "$@"; do
  case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";; esac
done
mkdir -p "$out" && touch "$out/cassandra-all-5.0.9.jar" "$out/jamm-0.4.0.jar"
printf '\033[0m\033[0mdone\n'
`

func TestResolveOnceIntoCache(t *testing.T) {
	bin := t.TempDir()
	mvn := filepath.Join(bin, "mvn")
	if err := os.WriteFile(mvn, []byte(fakeMaven), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MAVEN", mvn)
	cache := t.TempDir()
	var log strings.Builder
	for range 2 {
		rel, err := Resolve(context.Background(), cache, "5.0.9", &log)
		if err != nil {
			t.Fatal(err)
		}
		if !rel.Resolved() || rel.Lib() != filepath.Join(cache, "cassandra-5.0.9", "lib") {
			t.Fatalf("release %+v", rel)
		}
		if _, err := os.Stat(filepath.Join(rel.Lib(), "cassandra-all-5.0.9.jar")); err != nil {
			t.Fatal(err)
		}
	}
	calls, err := os.ReadFile(filepath.Join(bin, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(calls), "\n"); n != 1 {
		t.Errorf("Maven ran %d times, want once:\n%s", n, calls)
	}
	for _, want := range []string{"dependency:copy-dependencies", "-DincludeScope=runtime", "-f " + filepath.Join(cache, "cassandra-5.0.9", "pom.xml")} {
		if !strings.Contains(string(calls), want) {
			t.Errorf("Maven's arguments %q lack %q", calls, want)
		}
	}
	if log.String() != "done\n" {
		t.Errorf("log %q: colour codes left in", log.String())
	}
	if _, err := os.Stat(filepath.Join(cache, "cassandra-5.0.9", "lib.partial")); !os.IsNotExist(err) {
		t.Errorf("lib.partial left behind: %v", err)
	}
}

func TestResolveMavenFails(t *testing.T) {
	bin := t.TempDir()
	mvn := filepath.Join(bin, "mvn")
	if err := os.WriteFile(mvn, []byte("#!/bin/sh\necho 'Could not resolve dependencies' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MAVEN", mvn)
	cache := t.TempDir()
	rel, err := Resolve(context.Background(), cache, "5.0.9", &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "Could not resolve dependencies") {
		t.Fatalf("error %v", err)
	}
	if rel.Resolved() {
		t.Error("a failed resolution counts as resolved")
	}
}
