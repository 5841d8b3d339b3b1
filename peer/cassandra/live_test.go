package cassandra

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// TestLiveOneNode starts a 1-node peer ring (resolving the release into the
// cache on first use), creates a counter table through gocql, increments,
// reads back and stops. It runs only with IDEMKV_CASSANDRA=1: it needs
// Maven Central once, a JDK 17, about 1.5 GiB of memory and half a minute.
func TestLiveOneNode(t *testing.T) {
	if os.Getenv("IDEMKV_CASSANDRA") != "1" {
		t.Skip("set IDEMKV_CASSANDRA=1 to start a real Cassandra node")
	}
	r := Ring{Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if err := r.Stop(30 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if err := r.Up(ctx, UpOptions{Nodes: 1, Heap: "512M", Log: testWriter{t}}); err != nil {
		t.Fatal(err)
	}
	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || !st[0].Running || !st[0].CQL || st[0].Normal != 1 || !st[0].Reaches {
		t.Fatalf("status %+v", st)
	}
	s, err := Session(Address(1), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS peer_test WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS peer_test.counters (k text PRIMARY KEY, c counter)",
	} {
		if err := s.Query(q).WithContext(ctx).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, d := range []int64{1, 2, 39} {
		if err := s.Query("UPDATE peer_test.counters SET c = c + ? WHERE k = ?", d, "a").Consistency(gocql.One).WithContext(ctx).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	var v int64
	if err := s.Query("SELECT c FROM peer_test.counters WHERE k = ?", "a").Consistency(gocql.All).WithContext(ctx).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != 42 {
		t.Errorf("counter = %d, want 42", v)
	}
	if err := r.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Status(ctx); err != nil || st[0].Running {
		t.Errorf("after stop: %+v, %v", st, err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
