package exec

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql/frame"
)

// A counter delta is a bigint: a 4-byte int bound to `c = c + ?` is
// refused with Cassandra's message (LongSerializer).
func TestDeltaMustBeABigint(t *testing.T) {
	h := newHarness(t)
	h.setup()
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + ? WHERE k = ?`, int_(5), text_("a")), frame.ErrInvalid, "Expected 8 or 0 byte long (4)")
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c - ? WHERE k = ?`, int_(5), text_("a")), frame.ErrInvalid, "Expected 8 or 0 byte long (4)")
	if len(h.f.updates) != 0 {
		t.Fatalf("a refused delta wrote %d updates", len(h.f.updates))
	}
	h.query(`UPDATE ks.t SET c = c + ? WHERE k = ?`, big(5), text_("a"))
	h.query(`UPDATE ks.t SET c = c + 7 WHERE k = 'a'`) // a literal is a bigint
	if v, _ := h.value("ks.t", "c", text_("a")); v != 12 {
		t.Fatalf("c = %d, want 12", v)
	}
}

// Partition keys are at most 65,535 bytes, refused beyond with
// Cassandra's message, in writes and reads.
func TestKeyLength(t *testing.T) {
	h := newHarness(t)
	h.setup()
	long := text_(strings.Repeat("k", MaxKeyLength+1))
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + 1 WHERE k = ?`, long), frame.ErrInvalid, "Key length of 65536 is longer than maximum of 65535")
	wantErr(t, h.queryErr(`SELECT c FROM ks.t WHERE k = ?`, long), frame.ErrInvalid, "Key length of 65536 is longer than maximum of 65535")
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + 1 WHERE k = ?`, text_(strings.Repeat("k", 16<<20))), frame.ErrInvalid, "Key length of 16777216")
	h.query(`CREATE TABLE ks.two (a text, b text, c counter, PRIMARY KEY ((a, b)))`)
	// Composite keys: each component with its 2-byte length and end byte.
	half := text_(strings.Repeat("x", MaxKeyLength/2))
	wantErr(t, h.queryErr(`UPDATE ks.two SET c = c + 1 WHERE a = ? AND b = ?`, half, half), frame.ErrInvalid, "is longer than maximum of 65535")
	if len(h.f.updates) != 0 {
		t.Fatalf("a refused key wrote %d updates", len(h.f.updates))
	}
	max := text_(strings.Repeat("k", MaxKeyLength))
	h.query(`UPDATE ks.t SET c = c + 1 WHERE k = ?`, max)
	if v, ok := h.value("ks.t", "c", max); !ok || v != 1 {
		t.Fatalf("a 65,535-byte key: c = %d, %v", v, ok)
	}
}

// Counters wrap on overflow, as Cassandra's (long arithmetic); subtracting
// the smallest bigint is refused with Cassandra's message.
func TestCounterOverflow(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`UPDATE ks.t SET c = c + ? WHERE k = 'a'`, big(math.MaxInt64))
	h.query(`UPDATE ks.t SET c = c + 1 WHERE k = 'a'`)
	if v, _ := h.value("ks.t", "c", text_("a")); v != math.MinInt64 {
		t.Fatalf("MaxInt64 + 1 = %d, want it to wrap to %d as Cassandra's", v, int64(math.MinInt64))
	}
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c - ? WHERE k = 'a'`, big(math.MinInt64)), frame.ErrInvalid,
		"The negation of -9223372036854775808 overflows supported counter precision (signed 8 bytes integer)")
	h.query(`UPDATE ks.t SET c = c + ? WHERE k = 'a'`, big(math.MinInt64)) // adding it is fine
}

// Batches spanning several partitions are warned about over
// batch_size_warn_threshold (a response warning and a log line) and refused
// over batch_size_fail_threshold, with Cassandra's messages; a batch on one
// partition is not checked, as in Cassandra.
func TestBatchSizeThresholds(t *testing.T) {
	h := newHarness(t)
	var logs bytes.Buffer
	h.e.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h.setup()
	batch := func(n int, sameKey bool) frame.Batch {
		b := frame.Batch{Type: frame.BatchCounter, Consistency: frame.Consistency(coordinator.One)}
		for i := range n {
			k := fmt.Sprint("k", i)
			if sameKey {
				k = "same"
			}
			b.Statements = append(b.Statements, frame.BatchStatement{Query: `UPDATE ks.t SET c = c + 1 WHERE k = ?`, Values: []frame.Value{text_(k)}})
		}
		return b
	}
	// 24 bytes a counter cell: 213 are 5112 bytes, 214 are 5136 > 5 KiB.
	out, err := h.e.Batch(ctx, h.sess, batch(213, false), nil)
	if err != nil || len(out.Warnings) != 0 {
		t.Fatalf("213 updates: %v, warnings %q", err, out.Warnings)
	}
	out, err = h.e.Batch(ctx, h.sess, batch(214, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Batch for [ks.t] is of size 5136, exceeding specified threshold of 5120 by 16."; len(out.Warnings) != 1 || out.Warnings[0] != want {
		t.Fatalf("warnings %q, want %q", out.Warnings, want)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "exceeding specified threshold of 5.000KiB") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
	// 2134 × 24 = 51216 > 50 KiB: refused, nothing written.
	h.f.updates = nil
	_, err = h.e.Batch(ctx, h.sess, batch(2134, false), nil)
	if fe, ok := err.(*frame.Error); !ok || fe.Code != frame.ErrInvalid || fe.Message != "Batch too large" {
		t.Fatalf("2134 updates: %v, want Invalid \"Batch too large\"", err)
	}
	if len(h.f.updates) != 0 {
		t.Fatalf("a refused batch wrote %d updates", len(h.f.updates))
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "(see batch_size_fail_threshold)") {
		t.Errorf("no error logged:\n%s", logs.String())
	}
	// The same as a CQL BATCH statement in a QUERY.
	var q strings.Builder
	q.WriteString("BEGIN COUNTER BATCH ")
	for i := range 2134 {
		fmt.Fprintf(&q, "UPDATE ks.t SET c = c + 1 WHERE k = 'q%d'; ", i)
	}
	q.WriteString("APPLY BATCH")
	wantErr(t, h.queryErr(q.String()), frame.ErrInvalid, "Batch too large")
	// One partition: not checked.
	if out, err := h.e.Batch(ctx, h.sess, batch(3000, true), nil); err != nil || len(out.Warnings) != 0 {
		t.Fatalf("3000 updates of one partition: %v, warnings %q", err, out.Warnings)
	}
	// Thresholds from the options; negative: none.
	e := New(h.f, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return time.Unix(1700000000, 0) },
		BatchSizeWarnThreshold: -1, BatchSizeFailThreshold: 48})
	if _, err := e.Batch(ctx, h.sess, batch(2, false), nil); err != nil {
		t.Fatalf("48 bytes with a threshold of 48: %v", err)
	}
	if _, err := e.Batch(ctx, h.sess, batch(3, false), nil); err == nil || !strings.Contains(err.Error(), "Batch too large") {
		t.Fatalf("72 bytes with a threshold of 48: %v", err)
	}
}

// A SELECT of a system table checks its consistency level as any other
// SELECT: an unknown code is a protocol error, ANY is invalid for reads.
func TestSystemSelectConsistency(t *testing.T) {
	h := newHarness(t)
	p := params()
	p.Consistency = 0x77
	_, err := h.e.Query(ctx, h.sess, `SELECT * FROM system.local`, p, nil)
	if fe, ok := err.(*frame.Error); !ok || fe.Code != frame.ErrProtocol || !strings.Contains(fe.Message, "Unknown code 119 for a consistency level") {
		t.Fatalf("code 0x77: %v, want a protocol error", err)
	}
	p.Consistency = frame.Consistency(coordinator.Any)
	_, err = h.e.Query(ctx, h.sess, `SELECT * FROM system.local`, p, nil)
	if fe, ok := err.(*frame.Error); !ok || fe.Code != frame.ErrInvalid || !strings.Contains(fe.Message, "ANY ConsistencyLevel is only supported for writes") {
		t.Fatalf("ANY: %v", err)
	}
	p.Consistency = frame.Consistency(coordinator.One)
	if _, err := h.e.Query(ctx, h.sess, `SELECT * FROM system.local`, p, nil); err != nil {
		t.Fatal(err)
	}
}

// The FBF options of all tables together are bounded by
// Options.TableOptionMemory (fbf_max_memory_in_mb): a CREATE or ALTER TABLE
// over it is refused, naming the table and the key.
func TestTableOptionMemory(t *testing.T) {
	h := newHarness(t)
	h.e = New(h.f, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return time.Unix(1700000000, 0) },
		SchemaAgreementTimeout: time.Second, TableOptionMemory: 300 << 20})
	h.setup()
	// 132 MiB each: 66 filters of 2 MiB at the adaptation's largest N.
	h.query(`CREATE TABLE ks.f1 (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}`)
	h.query(`CREATE TABLE ks.f2 (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}`)
	wantErr(t, h.queryErr(`CREATE TABLE ks.f3 (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}`), frame.ErrConfig,
		"The options of table ks.f3 may take 132 MiB on each node; with the other tables' (396 MiB in all), more than fbf_max_memory_in_mb = 300 MiB")
	if _, ok := h.f.sch.Table("ks", "f3"); ok {
		t.Fatal("the refused table was created")
	}
	// Smaller filters fit, and an ALTER counts the table once.
	h.query(`CREATE TABLE ks.f3 (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf', 'adaptive': 'false'}`)
	h.query(`ALTER TABLE ks.f2 WITH idempotence = {'class': 'fbf', 'filters': '4'}`)
	wantErr(t, h.queryErr(`ALTER TABLE ks.f3 WITH idempotence = {'class': 'fbf'}`), frame.ErrConfig, "fbf_max_memory_in_mb")
	// Vanilla counter tables take nothing.
	h.query(`CREATE TABLE ks.v (k text PRIMARY KEY, c counter)`)
}

// CREATE and ALTER TABLE refuse an FBF option out of its bounds, naming the
// option and the limit (issue 20: 'bits': '4294967295' took a node from
// 17 MB to 2.1 GB).
func TestFBFOptionOutOfRangeRefused(t *testing.T) {
	h := newHarness(t)
	h.setup()
	wantErr(t, h.queryErr(`CREATE TABLE ks.f (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf', 'bits': '4294967295'}`),
		frame.ErrConfig, `idempotence option bits = "4294967295": out of range: must be at most 268435456 (32 MiB per filter)`)
	if _, ok := h.f.sch.Table("ks", "f"); ok {
		t.Fatal("the refused table was created")
	}
	h.query(`CREATE TABLE ks.f (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}`)
	wantErr(t, h.queryErr(`ALTER TABLE ks.f WITH idempotence = {'class': 'fbf', 'filters': '1000'}`),
		frame.ErrConfig, `idempotence option filters = "1000": out of range: must be at most 64`)
	wantErr(t, h.queryErr(`ALTER TABLE ks.f WITH idempotence = {'class': 'fbf', 'bits': '268435456', 'filters': '7'}`),
		frame.ErrConfig, "(filters + 2) × bits = 9 × 268435456 bits = 288 MiB, more than the 256 MiB a column may take")
}

// The numeric table parameters idemkv keeps as text are parsed and
// bounded as Cassandra's, with its messages (TableParams.validate).
func TestTableParams(t *testing.T) {
	h := newHarness(t)
	h.setup()
	for _, c := range []struct {
		with, contains string
		code           frame.ErrorCode
	}{
		{"gc_grace_seconds = 'abc'", "Invalid integer value abc for 'gc_grace_seconds'", frame.ErrSyntax},
		{"gc_grace_seconds = -5", "gc_grace_seconds must be greater than or equal to 0 (got -5)", frame.ErrConfig},
		{"gc_grace_seconds = 99999999999", "Invalid integer value 99999999999 for 'gc_grace_seconds'", frame.ErrSyntax},
		{"crc_check_chance = 'x'", "Invalid double value x for 'crc_check_chance'", frame.ErrSyntax},
		{"crc_check_chance = 2", "crc_check_chance must be larger than or equal to 0 and smaller than or equal to 1.0 (got 2.0)", frame.ErrConfig},
		{"read_repair_chance = -0.5", "read_repair_chance must be larger than or equal to 0 and smaller than or equal to 1.0 (got -0.5)", frame.ErrConfig},
		{"bloom_filter_fp_chance = 1.23", "bloom_filter_fp_chance must be larger than 6.71E-5 and less than or equal to 1.0 (got 1.23)", frame.ErrConfig},
		{"bloom_filter_fp_chance = 0.0000001", "bloom_filter_fp_chance must be larger than 6.71E-5 and less than or equal to 1.0 (got 1.0E-7)", frame.ErrConfig},
		{"min_index_interval = 0", "min_index_interval must be greater than or equal to 1 (got 0)", frame.ErrConfig},
		{"max_index_interval = 5", "max_index_interval must be greater than or equal to min_index_interval (128) (got 5)", frame.ErrConfig},
		{"memtable_flush_period_in_ms = -1", "memtable_flush_period_in_ms must be greater than or equal to 0 (got -1)", frame.ErrConfig},
	} {
		wantErr(t, h.queryErr(`CREATE TABLE ks.p (k text PRIMARY KEY, c counter) WITH `+c.with), c.code, c.contains)
		wantErr(t, h.queryErr(`ALTER TABLE ks.t WITH `+c.with), c.code, c.contains)
	}
	h.query(`CREATE TABLE ks.p (k text PRIMARY KEY, c counter) WITH gc_grace_seconds = 0 AND bloom_filter_fp_chance = 1 AND crc_check_chance = 0 AND min_index_interval = 64 AND max_index_interval = 64`)
	for f, want := range map[float64]string{2: "2.0", 0.5: "0.5", 1e-7: "1.0E-7", 6.71e-05: "6.71E-5", 1e7: "1.0E7", 1.23: "1.23", 0: "0.0"} {
		if got := javaDouble(f); got != want {
			t.Errorf("javaDouble(%v) = %q, want %q", f, got, want)
		}
	}
}
