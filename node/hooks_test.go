package node

import (
	"errors"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/cql"
)

// hookRing starts n TCP nodes with CQL on, tweak applied to each, and a
// gocql session on node 1 (no host discovery: the nodes share an address).
func hookRing(t *testing.T, n int, tweak func(*Config)) (*tcpRing, *gocql.Session) {
	t.Helper()
	on := true
	r := newTCPRingWith(t, n, func(c *Config) {
		c.StartNativeTransport = &on
		c.NativeTransportPort = freePort(t)
		if tweak != nil {
			tweak(c)
		}
	})
	cl := gocql.NewCluster("127.0.0.1")
	cl.Port = r.node(1).Config().NativeTransportPort
	cl.ProtoVersion = 4
	cl.DisableInitialHostLookup = true
	cl.Events.DisableNodeStatusEvents = true
	cl.Events.DisableTopologyEvents = true
	cl.Timeout = 20 * time.Second
	cl.ConnectTimeout = 20 * time.Second
	cl.NumConns = 1
	cl.MaxWaitSchemaAgreement = 20 * time.Second
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	t.Cleanup(s.Close)
	return r, s
}

func mustExec(t *testing.T, s *gocql.Session, q string) {
	t.Helper()
	if err := s.Query(q).Exec(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestMirroringQueryHandler: with custom_query_handler_class set to
// Cassandra's CustomPayloadMirroringQueryHandler a gocql client gets its
// custom payload back from QUERY, PREPARE/EXECUTE and BATCH (null values
// and an absent payload included, as gocql's TestCustomPayloadValues
// checks); without it, no payload comes back.
func TestMirroringQueryHandler(t *testing.T) {
	for _, mirroring := range []bool{true, false} {
		t.Run("mirror="+strconv.FormatBool(mirroring), func(t *testing.T) {
			_, s := hookRing(t, 1, func(c *Config) {
				if mirroring {
					c.CustomQueryHandlerClass = "mirror"
				}
			})
			mustExec(t, s, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
			mustExec(t, s, "CREATE TABLE ks.t (id int PRIMARY KEY, value int)")
			for _, sent := range []map[string][]byte{
				{"a": {10, 20}, "b": {20, 30}},
				nil,
				{"a": {10, 20}, "b": nil},
			} {
				want := sent
				if !mirroring {
					want = nil
				}
				check := func(what string, got map[string][]byte) {
					t.Helper()
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s with payload %v: got %v, want %v", what, sent, got, want)
					}
				}
				iter := s.Query("SELECT id FROM ks.t WHERE id = 42").CustomPayload(sent).Iter() // QUERY
				check("query", iter.GetCustomPayload())
				if err := iter.Close(); err != nil {
					t.Fatal(err)
				}
				iter = s.Query("SELECT id FROM ks.t WHERE id = ?", 42).CustomPayload(sent).Iter() // PREPARE, EXECUTE
				check("execute", iter.GetCustomPayload())
				if err := iter.Close(); err != nil {
					t.Fatal(err)
				}
				iter = s.Query("INSERT INTO ks.t (id, value) VALUES (1, 1)").Consistency(gocql.One).CustomPayload(sent).Iter()
				check("insert", iter.GetCustomPayload())
				if err := iter.Close(); err != nil {
					t.Fatal(err)
				}
				b := s.NewBatch(gocql.LoggedBatch)
				b.CustomPayload = sent
				b.Query("INSERT INTO ks.t (id, value) VALUES (2, 2)")
				if err := s.ExecuteBatch(b); err != nil {
					t.Fatalf("batch: %v", err)
				}
			}
		})
	}
}

// TestMirrorKeepsOwnKeys: idemkv's own reply keys win over the request's.
func TestMirrorKeepsOwnKeys(t *testing.T) {
	out, err := mirror(cql.Outcome{Payload: map[string][]byte{"own": {1}}}, nil, map[string][]byte{"own": {2}, "x": {3}})
	if err != nil || !maps.EqualFunc(out.Payload, map[string][]byte{"own": {1}, "x": {3}}, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("got %v, %v", out.Payload, err)
	}
	out, _ = mirror(cql.Outcome{}, errors.New("boom"), map[string][]byte{"x": {3}})
	if out.Payload != nil {
		t.Fatalf("an error got payload %v", out.Payload)
	}
}

// TestCustomQueryHandlerClassRefused: another handler class is a start-up
// error naming the one idemkv has.
func TestCustomQueryHandlerClassRefused(t *testing.T) {
	_, err := Config{DataDirectory: t.TempDir(), CustomQueryHandlerClass: "com.example.MyHandler"}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), "custom_query_handler_class") || !strings.Contains(err.Error(), MirroringQueryHandler) {
		t.Fatalf("got %v", err)
	}
	for _, v := range []string{"mirror", MirroringQueryHandler, "CustomPayloadMirroringQueryHandler"} {
		c, err := Config{DataDirectory: t.TempDir(), CustomQueryHandlerClass: v}.withDefaults()
		if err != nil || c.CustomQueryHandlerClass != MirroringQueryHandler {
			t.Fatalf("%s: got %q, %v", v, c.CustomQueryHandlerClass, err)
		}
	}
}

// TestFailWritesKeyspace: with test_fail_writes_keyspace every replica
// refuses the writes of that keyspace's tables, and the coordinator
// answers WRITE_FAILURE (gocql's *RequestErrWriteFailure) at ONE, QUORUM
// and ALL at once, not after the write timeout; counter updates fail too;
// other keyspaces are written as usual, and the keyspace can be dropped.
func TestFailWritesKeyspace(t *testing.T) {
	r, s := hookRing(t, 3, func(c *Config) { c.TestFailWritesKeyspace = "test" })
	for _, ks := range []string{"test", "other"} {
		mustExec(t, s, "CREATE KEYSPACE "+ks+" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
		mustExec(t, s, "CREATE TABLE "+ks+".t (id int PRIMARY KEY, value int)")
		mustExec(t, s, "CREATE TABLE "+ks+".c (id int PRIMARY KEY, n counter)")
	}
	r.waitFor("the tables on every node", func() bool {
		for i := 1; i <= 3; i++ {
			if _, ok := r.node(i).schema.Table("other", "c"); !ok {
				return false
			}
		}
		return true
	})
	timeout := time.Duration(r.cfgs[0].ReadTimeoutMS) * time.Millisecond
	for _, cl := range []gocql.Consistency{gocql.One, gocql.Quorum, gocql.All} {
		for _, q := range []string{
			"INSERT INTO %s.t (id, value) VALUES (1, 1)",
			"DELETE value FROM %s.t WHERE id = 1",
			"UPDATE %s.c SET n = n + 1 WHERE id = 1",
		} {
			start := time.Now()
			err := s.Query(strings.ReplaceAll(q, "%s", "test")).Consistency(cl).Exec()
			var wf *gocql.RequestErrWriteFailure
			if !errors.As(err, &wf) {
				t.Fatalf("%v %s: got %v (%T), want a write failure", cl, q, err, err)
			}
			if took := time.Since(start); took >= timeout {
				t.Errorf("%v %s: the failure took %v, the write timeout is %v", cl, q, took, timeout)
			}
			if wf.Consistency != cl || wf.NumFailures < 1 || wf.Received != 0 || len(wf.ErrorMap) != 0 {
				t.Errorf("%v %s: %+v", cl, q, wf)
			}
			if strings.HasPrefix(q, "UPDATE") {
				if wf.WriteType != "COUNTER" {
					t.Errorf("%v %s: write type %q", cl, q, wf.WriteType)
				}
			} else if wf.WriteType != "SIMPLE" {
				t.Errorf("%v %s: write type %q", cl, q, wf.WriteType)
			}
			if err := s.Query(strings.ReplaceAll(q, "%s", "other")).Consistency(cl).Exec(); err != nil {
				t.Fatalf("%v %s in keyspace other: %v", cl, q, err)
			}
		}
	}
	var v int
	if err := s.Query("SELECT value FROM test.t WHERE id = 1").Consistency(gocql.All).Scan(&v); !errors.Is(err, gocql.ErrNotFound) {
		t.Errorf("a refused write is readable: %v, %v", v, err)
	}
	mustExec(t, s, "DROP KEYSPACE test")
}

// TestFailWritesOneReplica: when only node 2 refuses the keyspace's writes,
// ONE and QUORUM are met by the others, while ALL fails at once with one
// failure.
func TestFailWritesOneReplica(t *testing.T) {
	i := 0
	r, s := hookRing(t, 3, func(c *Config) {
		if i++; i == 2 {
			c.TestFailWritesKeyspace = "test"
		}
	})
	mustExec(t, s, "CREATE KEYSPACE test WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
	mustExec(t, s, "CREATE TABLE test.t (id int PRIMARY KEY, value int)")
	r.waitFor("the table on every node", func() bool {
		for i := 1; i <= 3; i++ {
			if _, ok := r.node(i).schema.Table("test", "t"); !ok {
				return false
			}
		}
		return true
	})
	for _, cl := range []gocql.Consistency{gocql.One, gocql.Quorum} {
		if err := s.Query("INSERT INTO test.t (id, value) VALUES (1, 1)").Consistency(cl).Exec(); err != nil {
			t.Fatalf("%v: %v", cl, err)
		}
	}
	start := time.Now()
	err := s.Query("INSERT INTO test.t (id, value) VALUES (1, 1)").Consistency(gocql.All).Exec()
	var wf *gocql.RequestErrWriteFailure
	if !errors.As(err, &wf) || wf.NumFailures != 1 || wf.BlockFor != 3 || wf.Received > 2 {
		t.Fatalf("ALL: got %v (%+v), want a write failure with 1 failure", err, wf)
	}
	if took := time.Since(start); took >= time.Duration(r.cfgs[0].ReadTimeoutMS)*time.Millisecond {
		t.Errorf("ALL failed after %v, not at once", took)
	}
}
