package compat

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/client"
	"github.com/idemkv/idemkv/cql"
	cqlexec "github.com/idemkv/idemkv/cql/exec"
	"github.com/idemkv/idemkv/cql/frame"
)

// lostAck wraps every node's executor: the first counter update it sees is
// applied, then answered with a COUNTER write timeout, as if the answer had
// been lost; every attempt's op id is recorded.
type lostAck struct {
	mu    sync.Mutex
	armed bool
	opIDs [][]byte
}

type lostAckExec struct {
	l     *lostAck
	inner cql.Executor
}

func (l *lostAck) wrap(i int) func(cql.Executor) cql.Executor {
	return func(e cql.Executor) cql.Executor { return &lostAckExec{l: l, inner: e} }
}

func (e *lostAckExec) intercept(isUpdate bool, payload map[string][]byte, run func() (cql.Outcome, error)) (cql.Outcome, error) {
	if !isUpdate {
		return run()
	}
	e.l.mu.Lock()
	e.l.opIDs = append(e.l.opIDs, bytes.Clone(payload[client.PayloadKey]))
	lose := e.l.armed
	e.l.armed = false
	e.l.mu.Unlock()
	out, err := run()
	if lose && err == nil {
		return cql.Outcome{}, &frame.Error{Code: frame.ErrWriteTimeout, Message: "Operation timed out - received only 0 responses.",
			Consistency: frame.Consistency(gocql.Quorum), BlockFor: 2, WriteType: "COUNTER"}
	}
	return out, err
}

func (e *lostAckExec) Query(ctx context.Context, s *cql.Session, q string, p frame.QueryParams, payload map[string][]byte) (cql.Outcome, error) {
	return e.intercept(strings.HasPrefix(q, "UPDATE"), payload, func() (cql.Outcome, error) { return e.inner.Query(ctx, s, q, p, payload) })
}

func (e *lostAckExec) Prepare(ctx context.Context, s *cql.Session, q string, payload map[string][]byte) (cql.Outcome, error) {
	return e.inner.Prepare(ctx, s, q, payload)
}

func (e *lostAckExec) Execute(ctx context.Context, s *cql.Session, id []byte, p frame.QueryParams, payload map[string][]byte) (cql.Outcome, error) {
	_, isOp := payload[client.PayloadKey]
	return e.intercept(isOp, payload, func() (cql.Outcome, error) { return e.inner.Execute(ctx, s, id, p, payload) })
}

func (e *lostAckExec) Batch(ctx context.Context, s *cql.Session, b frame.Batch, payload map[string][]byte) (cql.Outcome, error) {
	return e.intercept(true, payload, func() (cql.Outcome, error) { return e.inner.Batch(ctx, s, b, payload) })
}

// TestGocqlRetryAfterLostAck: the coordinator applies an update and its
// answer is lost (a COUNTER write timeout); gocql's retry policy resends
// it. Both attempts carry the same op id to the coordinator; the vanilla
// counter counts the update twice, the FBF counter once.
func TestGocqlRetryAfterLostAck(t *testing.T) {
	l := &lostAck{}
	r := startRing(t, 3, l.wrap)
	c := r.cluster()
	c.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 2}
	s := r.session(c)
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.plain (k text PRIMARY KEY, c counter)`)
	exec(t, s, `CREATE TABLE ks.idem (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}`)
	cl := client.New(s, client.Options{ClientID: 42})
	for _, tc := range []struct {
		table string
		want  int64
	}{{"plain", 14}, {"idem", 7}} {
		l.mu.Lock()
		l.armed, l.opIDs = true, nil
		l.mu.Unlock()
		q, op := cl.Query("UPDATE ks."+tc.table+" SET c = c + ? WHERE k = ?", int64(7), "k")
		if err := q.Consistency(gocql.Quorum).Exec(); err != nil {
			t.Fatalf("%s: update with gocql's retries: %v", tc.table, err)
		}
		l.mu.Lock()
		ids := l.opIDs
		l.mu.Unlock()
		if len(ids) != 2 {
			t.Fatalf("%s: the coordinators saw %d attempts, want the first and one retry", tc.table, len(ids))
		}
		for i, id := range ids {
			if !bytes.Equal(id, op.Bytes()) {
				t.Fatalf("%s: attempt %d carried op id %x, the client sent %x", tc.table, i+1, id, op.Bytes())
			}
		}
		if got := counter(t, s, tc.table, "k"); got != tc.want {
			t.Errorf("%s counter after a lost ack and gocql's retry = %d, want %d", tc.table, got, tc.want)
		}
	}
	// A batch of 50 increments, retried the same way: the FBF counter is
	// exact; statement i of the batch carries sequence + i.
	l.mu.Lock()
	l.armed = true
	l.mu.Unlock()
	b := cl.NewBatch()
	for i := 0; i < 50; i++ {
		b.Query("UPDATE ks.idem SET c = c + 1 WHERE k = ?", "batch")
	}
	if _, err := b.Exec(context.Background()); err != nil {
		t.Fatalf("batch with a lost ack: %v", err)
	}
	if got := counter(t, s, "idem", "batch"); got != 50 {
		t.Errorf("FBF counter after a batch of 50, its lost ack and a retry = %d, want 50", got)
	}

	// ALTER TABLE turns the FBF on for the vanilla table: from then on a
	// retry after a lost ack counts once; the option shows in system_schema.
	exec(t, s, `ALTER TABLE ks.plain WITH idempotence = {'class': 'fbf', 'target_fpp': '0.001'}`)
	var ext map[string][]byte
	if err := s.Query(`SELECT extensions FROM system_schema.tables WHERE keyspace_name = 'ks' AND table_name = 'plain'`).Scan(&ext); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ext["idemkv.idempotence"]), "0.001") {
		t.Errorf("system_schema.tables extensions after ALTER: %q", ext)
	}
	l.mu.Lock()
	l.armed = true
	l.mu.Unlock()
	q, _ := cl.Query("UPDATE ks.plain SET c = c + ? WHERE k = ?", int64(100), "k")
	if err := q.Consistency(gocql.Quorum).Exec(); err != nil {
		t.Fatal(err)
	}
	if got := counter(t, s, "plain", "k"); got != 114 {
		t.Errorf("after ALTER to FBF, a lost ack and a retry: %d, want 114", got)
	}
}

// TestGocqlDismissedPayload: a response tells the client how many of its
// updates leaders dismissed as retries (`idemkv-dismissed`), which gocql
// reads from the iterator: none for a first attempt or a vanilla table, one
// for a resent FBF update.
func TestGocqlDismissedPayload(t *testing.T) {
	r := startRing(t, 3, nil)
	s := r.session(r.cluster())
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.plain (k text PRIMARY KEY, c counter)`)
	exec(t, s, `CREATE TABLE ks.idem (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}`)
	send := func(table string, op client.OpID) uint32 {
		t.Helper()
		q := s.Query("UPDATE ks." + table + " SET c = c + 1 WHERE k = 'k'").Consistency(gocql.Quorum)
		q.CustomPayload(map[string][]byte{client.PayloadKey: op.Bytes()})
		iter := q.Iter()
		p := iter.GetCustomPayload()
		if err := iter.Close(); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if _, ok := p[client.DismissedPayloadKey]; ok && len(p[client.DismissedPayloadKey]) != 4 {
			t.Fatalf("%s: %s is %d bytes, want 4", table, client.DismissedPayloadKey, len(p[client.DismissedPayloadKey]))
		}
		return uint32(client.Dismissed(p))
	}
	if client.DismissedPayloadKey != cqlexec.DismissedPayloadKey {
		t.Fatalf("client reads %q, the executor writes %q", client.DismissedPayloadKey, cqlexec.DismissedPayloadKey)
	}
	for _, tc := range []struct {
		table        string
		first, again uint32
	}{{"plain", 0, 0}, {"idem", 0, 1}} {
		op := client.OpID{Client: 9, Sequence: 1}
		if got := send(tc.table, op); got != tc.first {
			t.Errorf("%s: first attempt reports %d dismissed, want %d", tc.table, got, tc.first)
		}
		if got := send(tc.table, op); got != tc.again {
			t.Errorf("%s: the same op id again reports %d dismissed, want %d", tc.table, got, tc.again)
		}
	}
}
