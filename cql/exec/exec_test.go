package exec

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/internal/testseed"
)

func wantErr(t *testing.T, fe *frame.Error, code frame.ErrorCode, contains string) {
	t.Helper()
	if fe.Code != code || !strings.Contains(fe.Message, contains) {
		t.Errorf("error 0x%04x %q, want 0x%04x containing %q", int32(fe.Code), fe.Message, int32(code), contains)
	}
}

func TestDDL(t *testing.T) {
	h := newHarness(t)
	r := h.query(`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3} AND durable_writes = false`)
	if want := (frame.SchemaChangeResult{Change: "CREATED", Target: "KEYSPACE", Keyspace: "ks"}); r != want {
		t.Fatalf("CREATE KEYSPACE = %#v, want %#v", r, want)
	}
	if h.f.waits != 1 {
		t.Errorf("schema agreement waited %d times, want 1", h.f.waits)
	}
	k := h.f.sch.Visible().Keyspaces["ks"]
	if k.Class != "org.apache.cassandra.locator.SimpleStrategy" || k.Options["replication_factor"] != "3" || k.DurableWrites {
		t.Errorf("stored keyspace %+v", k)
	}
	fe := h.queryErr(`CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	wantErr(t, fe, frame.ErrAlreadyExists, `Cannot add existing keyspace "ks"`)
	if fe.Keyspace != "ks" || fe.Table != "" {
		t.Errorf("AlreadyExists extra body %q %q", fe.Keyspace, fe.Table)
	}
	if r := h.query(`CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`); r != (frame.VoidResult{}) {
		t.Errorf("IF NOT EXISTS on an existing keyspace = %#v, want Void", r)
	}
	h.query(`CREATE KEYSPACE nts WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': '1'}`)
	wantErr(t, h.queryErr(`CREATE KEYSPACE bad WITH replication = {'class': 'SimpleStrategy'}`), frame.ErrConfig, "replication_factor")
	wantErr(t, h.queryErr(`CREATE KEYSPACE bad WITH replication = {'class': 'LocalStrategy'}`), frame.ErrConfig, "not supported")
	wantErr(t, h.queryErr(`CREATE KEYSPACE bad WITH durable_writes = true`), frame.ErrConfig, "Missing mandatory replication strategy class")
	wantErr(t, h.queryErr(`CREATE KEYSPACE bad WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND foo = 1`), frame.ErrSyntax, "Unknown property 'foo'")
	wantErr(t, h.queryErr(`CREATE KEYSPACE system WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`), frame.ErrUnauthorized, "not user-modifiable")

	r = h.query(`CREATE TABLE ks.t (k text PRIMARY KEY, c counter)`)
	if want := (frame.SchemaChangeResult{Change: "CREATED", Target: "TABLE", Keyspace: "ks", Name: "t"}); r != want {
		t.Fatalf("CREATE TABLE = %#v, want %#v", r, want)
	}
	def, ok := h.f.sch.Table("ks", "t")
	if !ok || def.ID != 101 || len(def.PartitionKey) != 1 || def.PartitionKey[0].Type != "text" || def.Columns[0].Type != "counter" {
		t.Errorf("stored table %+v", def)
	}
	fe = h.queryErr(`CREATE TABLE ks.t (k text PRIMARY KEY, c counter)`)
	wantErr(t, fe, frame.ErrAlreadyExists, `Cannot add already existing table "t" to keyspace "ks"`)
	if fe.Keyspace != "ks" || fe.Table != "t" {
		t.Errorf("AlreadyExists extra body %q %q", fe.Keyspace, fe.Table)
	}
	if r := h.query(`CREATE TABLE IF NOT EXISTS ks.t (k text PRIMARY KEY, c counter)`); r != (frame.VoidResult{}) {
		t.Errorf("IF NOT EXISTS on an existing table = %#v, want Void", r)
	}
	wantErr(t, h.queryErr(`CREATE TABLE t2 (k text PRIMARY KEY, c counter)`), frame.ErrInvalid, "No keyspace has been specified")
	wantErr(t, h.queryErr(`CREATE TABLE nope.t2 (k text PRIMARY KEY, c counter)`), frame.ErrInvalid, "Keyspace nope does not exist")

	if r := h.query(`DROP TABLE ks.t`); r != (frame.SchemaChangeResult{Change: "DROPPED", Target: "TABLE", Keyspace: "ks", Name: "t"}) {
		t.Errorf("DROP TABLE = %#v", r)
	}
	wantErr(t, h.queryErr(`DROP TABLE ks.t`), frame.ErrConfig, "Cannot drop non existing table 't' in keyspace 'ks'.")
	if r := h.query(`DROP TABLE IF EXISTS ks.t`); r != (frame.VoidResult{}) {
		t.Errorf("DROP TABLE IF EXISTS = %#v", r)
	}
	if r := h.query(`DROP KEYSPACE ks`); r != (frame.SchemaChangeResult{Change: "DROPPED", Target: "KEYSPACE", Keyspace: "ks"}) {
		t.Errorf("DROP KEYSPACE = %#v", r)
	}
	wantErr(t, h.queryErr(`DROP KEYSPACE ks`), frame.ErrConfig, "Cannot drop non existing keyspace 'ks'.")
	if r := h.query(`DROP KEYSPACE IF EXISTS ks`); r != (frame.VoidResult{}) {
		t.Errorf("DROP KEYSPACE IF EXISTS = %#v", r)
	}
	wantErr(t, h.queryErr(`SELEC * FROM x`), frame.ErrSyntax, "line 1:0 no viable alternative at input 'SELEC'")
}

func TestCounterRules(t *testing.T) {
	h := newHarness(t)
	h.setup()
	for _, c := range []struct {
		q        string
		code     frame.ErrorCode
		contains string
	}{
		{`CREATE TABLE ks.x (k text PRIMARY KEY, c counter, v int)`, frame.ErrInvalid, "Cannot mix counter and non counter columns in the same table"},
		{`CREATE TABLE ks.x (k counter PRIMARY KEY, c counter)`, frame.ErrInvalid, "counter type is not supported for PRIMARY KEY part k"},
		{`CREATE TABLE ks.x (k text PRIMARY KEY, c counter) WITH default_time_to_live = 10`, frame.ErrInvalid, "Cannot set default_time_to_live on a table with counters"},
		{`CREATE TABLE ks.x (k text, x int static, v int, PRIMARY KEY (k, x))`, frame.ErrInvalid, "Static column x cannot be part of the PRIMARY KEY"},
		{`CREATE TABLE ks.x (k handoff_counter PRIMARY KEY, c counter)`, frame.ErrInvalid, "counter type is not supported for PRIMARY KEY part k"},
		{`CREATE TABLE ks.x (k text PRIMARY KEY, c handoff_counter, v int)`, frame.ErrInvalid, "Cannot mix counter and non counter columns"},
		{`CREATE TABLE ks.x (k frozen<list<int>> PRIMARY KEY, c counter)`, frame.ErrInvalid, "partition keys of type frozen<list<int>>"},
		{`CREATE TABLE ks.x (k text PRIMARY KEY, v duration)`, frame.ErrInvalid, "idemkv does not support the duration type"},
		{`CREATE TABLE ks.x (k text PRIMARY KEY, c counter) WITH foo = 1`, frame.ErrSyntax, "Unknown property 'foo'"},
		{`CREATE TABLE ks.x (k text PRIMARY KEY, c counter) WITH idempotence = {'class': 'bloom'}`, frame.ErrConfig, "Unknown idempotence class 'bloom'"},
		{`CREATE TABLE ks.x (k text PRIMARY KEY, c counter, c counter)`, frame.ErrInvalid, "Multiple definition of identifier c"},
		{`CREATE TABLE ks.x (k text, c counter, PRIMARY KEY (z))`, frame.ErrInvalid, "Unknown definition z referenced in PRIMARY KEY"},
		{`UPDATE ks.t USING TIMESTAMP 5 SET c = c + 1 WHERE k = 'a'`, frame.ErrInvalid, "Cannot provide custom timestamp for counter updates"},
		{`UPDATE ks.t USING TTL 5 SET c = c + 1 WHERE k = 'a'`, frame.ErrInvalid, "Cannot provide custom TTL for counter updates"},
		{`UPDATE ks.t SET c = c + 1 WHERE k = 'a' IF EXISTS`, frame.ErrInvalid, "Conditional updates are not supported on counter tables"},
		{`UPDATE ks.t SET c = c + 1 WHERE k = 'a' IF c = 3`, frame.ErrInvalid, "Conditional updates are not supported on counter tables"},
		{`UPDATE ks.t SET c = 5 WHERE k = 'a'`, frame.ErrInvalid, "Cannot set the value of counter column c"},
		{`UPDATE ks.t SET c = c - -9223372036854775808 WHERE k = 'a'`, frame.ErrInvalid, "The negation of -9223372036854775808 overflows supported counter precision (signed 8 bytes integer)"},
		{`UPDATE ks.t SET c = d + 1 WHERE k = 'a'`, frame.ErrSyntax, "Only expressions of the form X = X +<value> are supported."},
		{`CREATE TABLE ks.nopk (k text, c counter)`, frame.ErrInvalid, "No PRIMARY KEY specifed for table 'ks.nopk' (exactly one required)"},
		{`UPDATE ks.t SET k = k + 1 WHERE k = 'a'`, frame.ErrInvalid, "PRIMARY KEY part k found in SET part"},
		{`UPDATE ks.t SET z = z + 1 WHERE k = 'a'`, frame.ErrInvalid, "Undefined column name z"},
		{`UPDATE ks.t SET c = c + 1 WHERE c = 1`, frame.ErrInvalid, "Non PRIMARY KEY columns found in where clause: c"},
		{`UPDATE ks.t SET c = c + 1 WHERE k > 'a'`, frame.ErrInvalid, "Only EQ and IN relation are supported on the partition key"},
		{`UPDATE ks.t SET c = c + 'x' WHERE k = 'a'`, frame.ErrInvalid, `Invalid STRING constant (x) for "c" of type counter`},
		{`UPDATE ks.t SET c = c + 1 WHERE k = 5`, frame.ErrInvalid, `Invalid INTEGER constant (5) for "k" of type text`},
		{`UPDATE ks.t SET c = c + 1 WHERE k = null`, frame.ErrInvalid, "Invalid null value in condition for column k"},
		{`UPDATE ks.nope SET c = c + 1 WHERE k = 'a'`, frame.ErrInvalid, "unconfigured table nope"},
		{`UPDATE system.local SET c = c + 1 WHERE key = 'a'`, frame.ErrUnauthorized, "system keyspace is not user-modifiable."},
		{`INSERT INTO ks.t (k, c) VALUES ('a', 1)`, frame.ErrInvalid, "INSERT statements are not allowed on counter tables, use UPDATE instead"},
		{`BEGIN BATCH UPDATE ks.t SET c = c + 1 WHERE k = 'a' APPLY BATCH`, frame.ErrInvalid, "Cannot include a counter statement in a logged batch"},
		{`BEGIN COUNTER BATCH USING TIMESTAMP 3 UPDATE ks.t SET c = c + 1 WHERE k = 'a' APPLY BATCH`, frame.ErrInvalid, "Cannot provide custom timestamp for counter updates"},
		{`DELETE k FROM ks.t WHERE k = 'a'`, frame.ErrInvalid, "Invalid identifier k for deletion (should not be a PRIMARY KEY part)"},
		{`DELETE FROM ks.t USING TIMESTAMP 4 WHERE k = 'a'`, frame.ErrInvalid, "Cannot provide custom timestamp for counter updates"},
		{`SELECT * FROM ks.t WHERE c = 1`, frame.ErrInvalid, "use ALLOW FILTERING"},
		{`SELECT * FROM ks.t LIMIT 0`, frame.ErrInvalid, "LIMIT must be strictly positive"},
		{`SELECT z FROM ks.t`, frame.ErrInvalid, "Undefined column name z"},
		{`SELECT * FROM t`, frame.ErrInvalid, "No keyspace has been specified"},
		{`SELECT * FROM nope.t`, frame.ErrInvalid, "Keyspace nope does not exist"},
		{`SELECT * FROM system.peers_v2`, frame.ErrInvalid, "unconfigured table peers_v2"},
	} {
		_, err := h.e.Query(ctx, h.sess, c.q, params(), nil)
		fe, ok := err.(*frame.Error)
		if !ok {
			t.Errorf("%s: error %v, want a *frame.Error", c.q, err)
			continue
		}
		if fe.Code != c.code || !strings.Contains(fe.Message, c.contains) {
			t.Errorf("%s:\n got 0x%04x %q\nwant 0x%04x containing %q", c.q, int32(fe.Code), fe.Message, int32(c.code), c.contains)
		}
	}
	if len(h.f.updates) != 0 || len(h.f.deletes) != 0 {
		t.Errorf("refused statements wrote: %d updates, %d deletes", len(h.f.updates), len(h.f.deletes))
	}
	// Counter writes refuse ANY and SERIAL, as Cassandra does.
	for cl, msg := range map[coordinator.ConsistencyLevel]string{
		coordinator.Any:    "Consistency level ANY is not yet supported for counter table",
		coordinator.Serial: "Counter operations are inherently non-serializable",
	} {
		p := params()
		p.Consistency = frame.Consistency(cl)
		_, err := h.e.Query(ctx, h.sess, `UPDATE ks.t SET c = c + 1 WHERE k = 'a'`, p, nil)
		if fe, ok := err.(*frame.Error); !ok || fe.Code != frame.ErrInvalid || fe.Message != msg {
			t.Errorf("CL %s: %v, want Invalid %q", cl, err, msg)
		}
	}
}

func TestUse(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE KEYSPACE "MyKs" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`)
	if r := h.query(`USE ks`); r != (frame.SetKeyspaceResult{Keyspace: "ks"}) || h.sess.Keyspace != "ks" {
		t.Fatalf("USE ks = %#v, session %q", r, h.sess.Keyspace)
	}
	h.query(`UPDATE t SET c = c + 2 WHERE k = 'a'`)
	if v, _ := h.value("t", "c", text_("a")); v != 2 {
		t.Errorf("unqualified table in the session's keyspace: %d, want 2", v)
	}
	if r := h.query(`USE "MyKs"`); r != (frame.SetKeyspaceResult{Keyspace: "MyKs"}) || h.sess.Keyspace != "MyKs" {
		t.Errorf(`USE "MyKs" = %#v, session %q`, r, h.sess.Keyspace)
	}
	wantErr(t, h.queryErr(`USE MyKs`), frame.ErrInvalid, "Keyspace 'myks' does not exist")
	if h.sess.Keyspace != "MyKs" {
		t.Errorf("a failed USE changed the session's keyspace to %q", h.sess.Keyspace)
	}
	h.query(`USE system`)
}

func opPayload(client, seq uint64) map[string][]byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, client)
	binary.BigEndian.PutUint64(b[8:], seq)
	return map[string][]byte{OpPayloadKey: b}
}

func TestUpdatesAndOpIDs(t *testing.T) {
	h := newHarness(t)
	h.setup()
	// Literals, markers (bigint and int deltas), several SET clauses.
	h.query(`UPDATE ks.t SET c = c + 5, d = d - 3 WHERE k = 'a'`)
	h.query(`UPDATE ks.t SET c = c + ? WHERE k = ?`, big(10), text_("a"))
	h.query(`UPDATE ks.t SET c = c - ? WHERE k = ?`, big(-2), text_("a"))
	h.query(`UPDATE ks.t SET c = c + ?, d = d + ? WHERE k = ?`, frame.Unset, big(1), text_("a"))
	if v, _ := h.value("ks.t", "c", text_("a")); v != 17 {
		t.Errorf("c = %d, want 17", v)
	}
	if v, _ := h.value("ks.t", "d", text_("a")); v != -2 {
		t.Errorf("d = %d, want -2", v)
	}
	if n := len(h.f.updates); n != 5 {
		t.Fatalf("%d updates, want 5 (an unset delta is no update)", n)
	}
	for _, u := range h.f.updates {
		if u.HasOp {
			t.Errorf("update without payload has an op id: %+v", u)
		}
	}
	if h.f.cls[0] != coordinator.Quorum {
		t.Errorf("consistency %v, want the request's QUORUM", h.f.cls[0])
	}
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + ? WHERE k = ?`, frame.Null, text_("a")), frame.ErrInvalid, "Invalid null value for counter increment")
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + ? WHERE k = ?`, frame.Bytes([]byte{1, 2, 3}), text_("a")), frame.ErrInvalid, "Expected 8 or 0 byte long")
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + ? WHERE k = ?`, big(1)), frame.ErrInvalid, "There were 2 markers(?) in CQL but 1 bound variables")
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + ? WHERE k = ?`, big(1), frame.Bytes([]byte{0xff})), frame.ErrInvalid, "String didn't validate.")
	wantErr(t, h.queryErr(`UPDATE ks.t SET c = c + 1 WHERE k = ''`), frame.ErrInvalid, "Key may not be empty")

	// Op ids: statement i uses sequence + i; SET clauses of one statement share it.
	h.f.updates = nil
	_, err := h.e.Query(ctx, h.sess, `UPDATE ks.t SET c = c + 1, d = d + 1 WHERE k = 'b'`, params(), opPayload(7, 100))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range h.f.updates {
		if !u.HasOp || binary.BigEndian.Uint64(u.OpID[:8]) != 7 || binary.BigEndian.Uint64(u.OpID[8:]) != 100 || u.OpTime != 1700000000e9 {
			t.Errorf("update %+v, want op (7, 100) at the executor's clock", u)
		}
	}
	// A malformed op id is an error and writes nothing.
	h.f.updates = nil
	for _, n := range []int{0, 15, 17} {
		_, err := h.e.Query(ctx, h.sess, `UPDATE ks.t SET c = c + 1 WHERE k = 'b'`, params(), map[string][]byte{OpPayloadKey: make([]byte, n)})
		if fe, ok := err.(*frame.Error); !ok || fe.Code != frame.ErrInvalid || !strings.Contains(fe.Message, "must be 16 bytes") {
			t.Errorf("op id of %d bytes: %v, want Invalid", n, err)
		}
	}
	if len(h.f.updates) != 0 {
		t.Errorf("malformed op ids wrote %d updates", len(h.f.updates))
	}
	// Other payload keys are ignored.
	if _, err := h.e.Query(ctx, h.sess, `UPDATE ks.t SET c = c + 1 WHERE k = 'b'`, params(), map[string][]byte{"other": {1}}); err != nil {
		t.Fatal(err)
	}
}

func TestCompositeKeyRouting(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.comp (a text, b int, u uuid, c counter, PRIMARY KEY ((a, b, u)))`)
	uuid := "123e4567-e89b-12d3-a456-426614174000"
	h.query(`UPDATE ks.comp SET c = c + 1 WHERE b = 7 AND a = 'xy' AND u = ` + uuid)
	u := h.f.updates[len(h.f.updates)-1]
	// gocql's routing key (session.go): per component [u16 len][bytes][0x00].
	want := []byte{0, 2, 'x', 'y', 0, 0, 4, 0, 0, 0, 7, 0, 0, 16,
		0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00, 0}
	if !bytes.Equal(u.Key, want) {
		t.Fatalf("composite key\n got %x\nwant %x", u.Key, want)
	}
	// A single-column key is the value's bytes.
	h.query(`UPDATE ks.t SET c = c + 1 WHERE k = 'xy'`)
	if u := h.f.updates[len(h.f.updates)-1]; !bytes.Equal(u.Key, []byte("xy")) {
		t.Errorf("single key %x, want 7879", u.Key)
	}
	// Prepared: the pk indexes name each key part's marker in key order.
	out, err := h.e.Prepare(ctx, h.sess, `UPDATE ks.comp SET c = c + ? WHERE u = ? AND b = ? AND a = ?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr := out.Result.(frame.PreparedResult)
	if !reflect.DeepEqual(pr.PKIndexes, []uint16{3, 2, 1}) {
		t.Errorf("PKIndexes %v, want [3 2 1]", pr.PKIndexes)
	}
	wantTypes := []frame.DataType{frame.Counter, frame.UUID, frame.Int, frame.Text}
	for i, p := range pr.Params {
		if !reflect.DeepEqual(p.Type, wantTypes[i]) || p.Keyspace != "ks" || p.Table != "comp" {
			t.Errorf("param %d = %+v, want type %v of ks.comp", i, p, wantTypes[i])
		}
	}
	// Read back: the key columns are decoded from the serialized key.
	r := h.rows(`SELECT * FROM ks.comp WHERE a = 'xy' AND b = 7 AND u = ` + uuid)
	if len(r.Rows) != 1 {
		t.Fatalf("%d rows", len(r.Rows))
	}
	var names []string
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "a,b,u,c" {
		t.Errorf("columns %v, want a,b,u,c", names)
	}
	row := r.Rows[0]
	if string(row[0].Bytes) != "xy" || !bytes.Equal(row[1].Bytes, []byte{0, 0, 0, 7}) || len(row[2].Bytes) != 16 || !bytes.Equal(row[3].Bytes, frame.EncodeBigint(1)) {
		t.Errorf("row %v", row)
	}
	wantErr(t, h.queryErr(`SELECT * FROM ks.comp WHERE a = 'xy'`), frame.ErrInvalid, "Partition key parts: b, u must be restricted as other parts are")
	wantErr(t, h.queryErr(`UPDATE ks.comp SET c = c + 1 WHERE a = 'xy' AND b = 1`), frame.ErrInvalid, "Some partition key parts are missing: u")
	wantErr(t, h.queryErr(`UPDATE ks.comp SET c = c + 1 WHERE a = 'x' AND b = ? AND u = `+uuid, frame.Bytes([]byte{1})), frame.ErrInvalid, "Expected 4 or 0 byte int")
}

func TestSplitKeyInvertsSerializeKey(t *testing.T) {
	r := testseed.Rand(t)
	for i := 0; i < 500; i++ {
		n := 1 + r.IntN(4)
		parts := make([][]byte, n)
		for j := range parts {
			parts[j] = make([]byte, r.IntN(20))
			for k := range parts[j] {
				parts[j][k] = byte(r.IntN(256))
			}
		}
		k, err := SerializeKey(parts)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := SplitKey(k, n)
		if !ok || len(got) != n {
			t.Fatalf("SplitKey(%x, %d) failed", k, n)
		}
		for j := range parts {
			if !bytes.Equal(got[j], parts[j]) {
				t.Fatalf("component %d: %x, want %x", j, got[j], parts[j])
			}
		}
	}
	if _, ok := SplitKey([]byte{0, 5, 1}, 2); ok {
		t.Error("a truncated composite key split")
	}
}

func TestSelectAndPagedScan(t *testing.T) {
	h := newHarness(t)
	h.setup()
	r := testseed.Rand(t)
	n := 20 + r.IntN(60)
	want := map[string]int64{}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key-%d-%d", i, r.IntN(1000))
		v := int64(r.IntN(1000)) - 500
		want[k] += v
		h.query(`UPDATE ks.t SET c = c + ? WHERE k = ?`, big(v), text_(k))
	}
	// A row whose only counter is deleted is not shown; one of two deleted shows null.
	h.query(`UPDATE ks.t SET c = c + 1 WHERE k = 'gone'`)
	h.query(`DELETE FROM ks.t WHERE k = 'gone'`)
	h.query(`UPDATE ks.t SET c = c + 1, d = d + 1 WHERE k = 'half'`)
	h.query(`DELETE d FROM ks.t WHERE k = 'half'`)
	want["half"] = 1
	if _, ok := h.value("ks.t", "c", text_("gone")); ok {
		t.Error("a deleted row is still read")
	}
	if _, ok := h.value("ks.t", "d", text_("half")); ok {
		t.Error("a deleted cell is not null")
	}
	if v, ok := h.value("ks.t", "c", text_("half")); !ok || v != 1 {
		t.Errorf("half.c = %d %v, want 1", v, ok)
	}
	// An absent key gives no row.
	if res := h.rows(`SELECT c FROM ks.t WHERE k = 'absent'`); len(res.Rows) != 0 {
		t.Errorf("absent key: %d rows", len(res.Rows))
	}
	// IN lists read several partitions.
	if res := h.rows(`SELECT k FROM ks.t WHERE k IN ('half', 'absent', 'half')`); len(res.Rows) != 1 {
		t.Errorf("IN: %d rows, want 1", len(res.Rows))
	}

	pageSize := 1 + r.IntN(7)
	seen := map[string]int64{}
	p := params()
	p.PageSize = int32(pageSize)
	pages := 0
	for {
		out, err := h.e.Query(ctx, h.sess, `SELECT * FROM ks.t`, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := out.Result.(frame.RowsResult)
		if len(res.Rows) > pageSize {
			t.Fatalf("page of %d rows, page size %d", len(res.Rows), pageSize)
		}
		for _, row := range res.Rows {
			k := string(row[0].Bytes)
			if _, dup := seen[k]; dup {
				t.Fatalf("row %q seen twice", k)
			}
			v, _ := frame.DecodeBigint(row[1].Bytes)
			seen[k] = v
		}
		pages++
		if res.PagingState == nil {
			break
		}
		p.PagingState = res.PagingState
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("scan saw %d rows, want %d (page size %d)", len(seen), len(want), pageSize)
	}
	// LIMIT across pages.
	limit := 1 + r.IntN(len(want))
	p = params()
	p.PageSize = int32(pageSize)
	got := 0
	for {
		out, err := h.e.Query(ctx, h.sess, fmt.Sprintf(`SELECT k FROM ks.t LIMIT %d`, limit), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := out.Result.(frame.RowsResult)
		got += len(res.Rows)
		if res.PagingState == nil {
			break
		}
		p.PagingState = res.PagingState
	}
	if got != limit {
		t.Errorf("LIMIT %d over pages of %d gave %d rows", limit, pageSize, got)
	}
	// COUNT(*).
	res := h.rows(`SELECT COUNT(*) FROM ks.t`)
	if c, _ := frame.DecodeBigint(res.Rows[0][0].Bytes); c != int64(len(want)) || res.Columns[0].Name != "count" || res.Columns[0].Type.ID != frame.TypeBigint {
		t.Errorf("COUNT(*) = %d (%+v), want %d", c, res.Columns[0], len(want))
	}
	// Damaged and foreign paging states are refused.
	p = params()
	p.PageSize = 1
	out, _ := h.e.Query(ctx, h.sess, `SELECT * FROM ks.t`, p, nil)
	state := out.Result.(frame.RowsResult).PagingState
	h.query(`CREATE TABLE ks.other (k text PRIMARY KEY, c counter)`)
	for name, q := range map[string]string{"damaged": `SELECT * FROM ks.t`, "foreign": `SELECT * FROM ks.other`} {
		p.PagingState = append([]byte(nil), state...)
		if name == "damaged" {
			p.PagingState[len(p.PagingState)/2] ^= 1
		}
		_, err := h.e.Query(ctx, h.sess, q, p, nil)
		if fe, ok := err.(*frame.Error); !ok || fe.Code != frame.ErrProtocol {
			t.Errorf("%s paging state: %v, want a protocol error", name, err)
		}
	}
	// Result metadata: counters typed counter, skipped on request.
	res = h.rows(`SELECT c, k AS key FROM ks.t WHERE k = 'half'`)
	if res.Columns[0].Type.ID != frame.TypeCounter || res.Columns[1].Name != "key" || res.Columns[1].Type.ID != frame.TypeVarchar {
		t.Errorf("columns %+v", res.Columns)
	}
	p = params()
	p.SkipMetadata = true
	out, _ = h.e.Query(ctx, h.sess, `SELECT c FROM ks.t WHERE k = 'half'`, p, nil)
	if !out.Result.(frame.RowsResult).NoMetadata {
		t.Error("skip_metadata not honoured")
	}
}

func TestPrepareExecute(t *testing.T) {
	h := newHarness(t)
	h.setup()
	q := `UPDATE ks.t SET c = c + ? WHERE k = ?`
	out, err := h.e.Prepare(ctx, h.sess, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr := out.Result.(frame.PreparedResult)
	sum := md5.Sum([]byte(q))
	if !bytes.Equal(pr.ID, sum[:]) {
		t.Errorf("id %x, want MD5 of the query %x", pr.ID, sum)
	}
	want := []frame.ColumnSpec{
		{Keyspace: "ks", Table: "t", Name: "c", Type: frame.Counter},
		{Keyspace: "ks", Table: "t", Name: "k", Type: frame.Text},
	}
	if !reflect.DeepEqual(pr.Params, want) || !reflect.DeepEqual(pr.PKIndexes, []uint16{1}) || pr.ResultColumns != nil {
		t.Errorf("prepared %+v", pr)
	}
	if _, err := h.e.Execute(ctx, h.sess, pr.ID, params(big(4), text_("p")), opPayload(1, 2)); err != nil {
		t.Fatal(err)
	}
	if v, _ := h.value("ks.t", "c", text_("p")); v != 4 {
		t.Errorf("c = %d, want 4", v)
	}
	// Named values are matched to the bind variables' names.
	p := params(text_("p"), big(3))
	p.Names = []string{"k", "c"}
	if _, err := h.e.Execute(ctx, h.sess, pr.ID, p, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := h.value("ks.t", "c", text_("p")); v != 7 {
		t.Errorf("c = %d after named values, want 7", v)
	}
	// Named values in a plain QUERY too.
	p = params(text_("p"), big(1))
	p.Names = []string{"k", "c"}
	if _, err := h.e.Query(ctx, h.sess, q, p, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := h.value("ks.t", "c", text_("p")); v != 8 {
		t.Errorf("c = %d after a query with named values, want 8", v)
	}
	p.Names = []string{"k", "zz"}
	if _, err := h.e.Query(ctx, h.sess, q, p, nil); err == nil {
		t.Error("a value for an unknown name was accepted")
	}
	// The same text in another keyspace is another statement.
	h.sess.Keyspace = "ks"
	out, err = h.e.Prepare(ctx, h.sess, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id2 := out.Result.(frame.PreparedResult).ID; bytes.Equal(id2, pr.ID) {
		t.Error("the id does not depend on the keyspace")
	}
	// SELECT: result metadata, named markers, LIMIT marker.
	out, err = h.e.Prepare(ctx, h.sess, `SELECT k, c FROM t WHERE k = :key LIMIT ?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := out.Result.(frame.PreparedResult)
	if sp.Params[0].Name != "key" || sp.Params[1].Name != "[limit]" || sp.Params[1].Type.ID != frame.TypeInt ||
		len(sp.ResultColumns) != 2 || sp.ResultColumns[1].Type.ID != frame.TypeCounter || !reflect.DeepEqual(sp.PKIndexes, []uint16{0}) {
		t.Errorf("prepared select %+v", sp)
	}
	res, err := h.e.Execute(ctx, h.sess, sp.ID, params(text_("p"), int_(1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rows := res.Result.(frame.RowsResult).Rows; len(rows) != 1 {
		t.Errorf("%d rows", len(rows))
	}
	// Preparing checks the statement.
	if _, err := h.e.Prepare(ctx, h.sess, `UPDATE ks.t USING TTL 3 SET c = c + ? WHERE k = ?`, nil); err == nil {
		t.Error("a counter update with TTL was prepared")
	}
	// Unknown ids, and forgotten ones, are Unprepared with the id.
	for _, id := range [][]byte{{1, 2, 3}, pr.ID} {
		if bytes.Equal(id, pr.ID) {
			h.e.Forget()
		}
		_, err := h.e.Execute(ctx, h.sess, id, params(big(1), text_("p")), nil)
		fe, ok := err.(*frame.Error)
		if !ok || fe.Code != frame.ErrUnprepared || !bytes.Equal(fe.UnknownID, id) {
			t.Errorf("execute of unknown id %x: %v", id, err)
		}
	}
	// The cache is bounded.
	small := New(h.f, Options{PreparedCacheSize: 2})
	var ids [][]byte
	for i := 0; i < 3; i++ {
		out, err := small.Prepare(ctx, &cql.Session{}, fmt.Sprintf(`SELECT c FROM ks.t WHERE k = '%d'`, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Result.(frame.PreparedResult).ID)
	}
	if _, err := small.Execute(ctx, &cql.Session{}, ids[0], params(), nil); err == nil {
		t.Error("the least recently used statement was not evicted")
	}
	if _, err := small.Execute(ctx, &cql.Session{}, ids[2], params(), nil); err != nil {
		t.Errorf("the newest statement: %v", err)
	}
}

func TestBatches(t *testing.T) {
	h := newHarness(t)
	h.setup()
	out, err := h.e.Prepare(ctx, h.sess, `UPDATE ks.t SET c = c + ? WHERE k = ?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := out.Result.(frame.PreparedResult).ID
	b := frame.Batch{Type: frame.BatchCounter, Consistency: frame.Consistency(coordinator.One), Statements: []frame.BatchStatement{
		{PreparedID: id, Values: []frame.Value{big(1), text_("x")}},
		{Query: `UPDATE ks.t SET c = c + 10, d = d + 1 WHERE k = 'y'`},
		{Query: `DELETE d FROM ks.t WHERE k = 'z'`},
		{PreparedID: id, Values: []frame.Value{big(2), text_("x")}},
	}}
	res, err := h.e.Batch(ctx, h.sess, b, opPayload(9, 50))
	if err != nil || res.Result != (frame.VoidResult{}) {
		t.Fatalf("batch: %v %v", res.Result, err)
	}
	var seqs []uint64
	for _, u := range h.f.updates {
		seqs = append(seqs, binary.BigEndian.Uint64(u.OpID[8:]))
		if binary.BigEndian.Uint64(u.OpID[:8]) != 9 || !u.HasOp {
			t.Errorf("update %+v without the batch's client id", u)
		}
	}
	if !reflect.DeepEqual(seqs, []uint64{50, 51, 51, 53}) {
		t.Errorf("sequences %v, want statement i at 50+i: [50 51 51 53]", seqs)
	}
	if v, _ := h.value("ks.t", "c", text_("x")); v != 3 {
		t.Errorf("x = %d, want 3", v)
	}
	if h.f.cls[0] != coordinator.One {
		t.Errorf("batch consistency %v, want ONE", h.f.cls[0])
	}
	// UNLOGGED batches of counters are allowed (CASSANDRA-7351); LOGGED are not.
	b.Type = frame.BatchUnlogged
	if _, err := h.e.Batch(ctx, h.sess, b, nil); err != nil {
		t.Errorf("unlogged counter batch: %v", err)
	}
	h.f.updates = nil
	b.Type = frame.BatchLogged
	_, err = h.e.Batch(ctx, h.sess, b, nil)
	if fe, ok := err.(*frame.Error); !ok || fe.Message != "Cannot include a counter statement in a logged batch" {
		t.Errorf("logged counter batch: %v", err)
	}
	// A bad statement anywhere refuses the whole batch before any write.
	b.Type = frame.BatchCounter
	b.Statements = append(b.Statements, frame.BatchStatement{Query: `UPDATE ks.t SET c = 1 WHERE k = 'x'`})
	if _, err := h.e.Batch(ctx, h.sess, b, nil); err == nil {
		t.Error("a batch with a bad statement succeeded")
	}
	b.Statements = []frame.BatchStatement{{PreparedID: []byte("nope")}}
	if _, err := h.e.Batch(ctx, h.sess, b, nil); err == nil || err.(*frame.Error).Code != frame.ErrUnprepared {
		t.Errorf("batch with an unknown id: %v", err)
	}
	if len(h.f.updates) != 0 {
		t.Errorf("refused batches wrote %d updates", len(h.f.updates))
	}
	// A batch as a query string, markers numbered across its statements.
	_, err = h.e.Query(ctx, h.sess, `BEGIN COUNTER BATCH UPDATE ks.t SET c = c + ? WHERE k = ?; UPDATE ks.t SET c = c + ? WHERE k = ? APPLY BATCH`,
		params(big(5), text_("q"), big(6), text_("q")), opPayload(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := h.value("ks.t", "c", text_("q")); v != 11 {
		t.Errorf("q = %d, want 11", v)
	}
	if s := binary.BigEndian.Uint64(h.f.updates[1].OpID[8:]); s != 1 {
		t.Errorf("second statement's sequence %d, want 1", s)
	}
}

func TestErrorMapping(t *testing.T) {
	h := newHarness(t)
	h.setup()
	for _, c := range []struct {
		err  error
		want frame.Error
	}{
		{&coordinator.UnavailableError{CL: coordinator.Quorum, Required: 2, Alive: 1},
			frame.Error{Code: frame.ErrUnavailable, Consistency: 4, Required: 2, Alive: 1}},
		{fmt.Errorf("wrapped: %w", &coordinator.WriteTimeoutError{CL: coordinator.All, Received: 1, BlockFor: 3, WriteType: coordinator.WriteTypeCounter}),
			frame.Error{Code: frame.ErrWriteTimeout, Consistency: 5, Received: 1, BlockFor: 3, WriteType: "COUNTER"}},
		{&coordinator.InvalidError{Msg: "bad"}, frame.Error{Code: frame.ErrInvalid, Message: "bad"}},
		{errors.New("disk on fire"), frame.Error{Code: frame.ErrServer, Message: "disk on fire"}},
	} {
		h.f.writeErr = c.err
		fe := h.queryErr(`UPDATE ks.t SET c = c + 1 WHERE k = 'a'`)
		got := *fe
		if c.want.Message == "" {
			got.Message = ""
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v:\n got %+v\nwant %+v", c.err, got, c.want)
		}
	}
	h.f.writeErr = nil
	h.f.readErr = &coordinator.ReadTimeoutError{CL: coordinator.Quorum, Received: 1, BlockFor: 2, DataPresent: true}
	fe := h.queryErr(`SELECT * FROM ks.t WHERE k = 'a'`)
	if fe.Code != frame.ErrReadTimeout || fe.Received != 1 || fe.BlockFor != 2 || !fe.DataPresent || fe.Consistency != 4 {
		t.Errorf("read timeout mapped to %+v", fe)
	}
	fe = h.queryErr(`SELECT * FROM ks.t`)
	if fe.Code != frame.ErrReadTimeout {
		t.Errorf("scan read timeout mapped to %+v", fe)
	}
	h.f.readErr = &coordinator.ReadFailureError{CL: coordinator.All, Received: 2, BlockFor: 3, Failures: 1, DataPresent: true}
	fe = h.queryErr(`SELECT * FROM ks.t WHERE k = 'a'`)
	if fe.Code != frame.ErrReadFailure || fe.Received != 2 || fe.BlockFor != 3 || fe.NumFailures != 1 || !fe.DataPresent {
		t.Errorf("read failure mapped to %+v", fe)
	}
}

func specTypes(cols []frame.ColumnSpec) map[string]frame.DataType {
	out := map[string]frame.DataType{}
	for _, c := range cols {
		out[c.Name] = c.Type
	}
	return out
}

func TestSystemTables(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.f (k bigint PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf', 'target_fpp': '0.0001', 'filters': 4} AND comment = 'fbf table'`)
	local := h.rows(`SELECT * FROM system.local WHERE key='local'`)
	if len(local.Rows) != 1 {
		t.Fatalf("system.local: %d rows", len(local.Rows))
	}
	types := specTypes(local.Columns)
	for name, want := range map[string]frame.DataType{
		"key": frame.Text, "host_id": frame.UUID, "data_center": frame.Text, "rack": frame.Text,
		"release_version": frame.Text, "partitioner": frame.Text, "rpc_address": frame.Inet,
		"broadcast_address": frame.Inet, "listen_address": frame.Inet, "cluster_name": frame.Text,
		"tokens": frame.SetOf(frame.Text), "schema_version": frame.UUID, "cql_version": frame.Text,
		"native_protocol_version": frame.Text,
	} {
		if !reflect.DeepEqual(types[name], want) {
			t.Errorf("system.local.%s has type %+v, want %+v", name, types[name], want)
		}
	}
	val := map[string]frame.Value{}
	for i, c := range local.Columns {
		val[c.Name] = local.Rows[0][i]
		if c.Keyspace != "system" || c.Table != "local" {
			t.Errorf("column %s of %s.%s", c.Name, c.Keyspace, c.Table)
		}
	}
	if string(val["partitioner"].Bytes) != "org.apache.cassandra.dht.Murmur3Partitioner" || string(val["release_version"].Bytes) != "3.11.16" ||
		!bytes.Equal(val["rpc_address"].Bytes, []byte{127, 0, 0, 1}) || string(val["cluster_name"].Bytes) != "mini" {
		t.Errorf("system.local values %v", val)
	}
	toks, err := frame.DecodeSet(val["tokens"].Bytes)
	if err != nil || len(toks) != 3 || string(toks[0]) != "-100" {
		t.Errorf("tokens %q %v", toks, err)
	}
	if sv, _ := frame.DecodeUUID(val["schema_version"].Bytes); sv != parseUUID(h.f.sch.Version()) {
		t.Errorf("schema_version %x, want the schema's version %s", sv, h.f.sch.Version())
	}
	// gocql's schema agreement query: one column, projected.
	sv := h.rows(`SELECT schema_version FROM system.local WHERE key='local'`)
	if len(sv.Columns) != 1 || sv.Columns[0].Type.ID != frame.TypeUUID || len(sv.Rows) != 1 || len(sv.Rows[0]) != 1 {
		t.Errorf("schema_version query: %+v", sv)
	}
	if r := h.rows(`SELECT * FROM system.local WHERE key='other'`); len(r.Rows) != 0 {
		t.Errorf("key='other': %d rows", len(r.Rows))
	}
	if r := h.rows(`SELECT * FROM system.local`); len(r.Rows) != 1 {
		t.Errorf("plain system.local: %d rows", len(r.Rows))
	}
	peers := h.rows(`SELECT * FROM system.peers`)
	pt := specTypes(peers.Columns)
	for name, want := range map[string]frame.DataType{"peer": frame.Inet, "rpc_address": frame.Inet, "host_id": frame.UUID,
		"tokens": frame.SetOf(frame.Text), "schema_version": frame.UUID, "data_center": frame.Text} {
		if !reflect.DeepEqual(pt[name], want) {
			t.Errorf("system.peers.%s has type %+v, want %+v", name, pt[name], want)
		}
	}
	if len(peers.Rows) != 1 || !bytes.Equal(peers.Rows[0][0].Bytes, []byte{127, 0, 0, 2}) {
		t.Errorf("peers rows %v", peers.Rows)
	}

	// gocql's metadata queries, prepared with the keyspace bound.
	prep := func(q string, vals ...frame.Value) frame.RowsResult {
		t.Helper()
		out, err := h.e.Prepare(ctx, h.sess, q, nil)
		if err != nil {
			t.Fatalf("prepare %s: %v", q, err)
		}
		pr := out.Result.(frame.PreparedResult)
		res, err := h.e.Execute(ctx, h.sess, pr.ID, params(vals...), nil)
		if err != nil {
			t.Fatalf("execute %s: %v", q, err)
		}
		rr := res.Result.(frame.RowsResult)
		if !reflect.DeepEqual(rr.Columns, pr.ResultColumns) {
			t.Errorf("%s: rows' columns differ from the prepared result columns", q)
		}
		return rr
	}
	ksr := prep("\n\t\tSELECT durable_writes, replication\n\t\tFROM system_schema.keyspaces\n\t\tWHERE keyspace_name = ?", text_("ks"))
	if len(ksr.Rows) != 1 || ksr.Columns[0].Type.ID != frame.TypeBoolean || !reflect.DeepEqual(ksr.Columns[1].Type, frame.MapOf(frame.Text, frame.Text)) {
		t.Fatalf("keyspaces: %+v", ksr)
	}
	mk, mv, _ := frame.DecodeMap(ksr.Rows[0][1].Bytes)
	repl := map[string]string{}
	for i := range mk {
		repl[string(mk[i])] = string(mv[i])
	}
	if !reflect.DeepEqual(repl, map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "1"}) {
		t.Errorf("replication %v", repl)
	}
	tables := prep(`SELECT * FROM system_schema.tables WHERE keyspace_name = ?`, text_("ks"))
	if len(tables.Rows) != 2 {
		t.Fatalf("tables of ks: %d rows", len(tables.Rows))
	}
	tt := specTypes(tables.Columns)
	if !reflect.DeepEqual(tt["extensions"], frame.MapOf(frame.Text, frame.Blob)) || tt["id"].ID != frame.TypeUUID || tt["default_time_to_live"].ID != frame.TypeInt {
		t.Errorf("system_schema.tables types %+v", tt)
	}
	var fRow []frame.Value
	for _, r := range tables.Rows {
		if string(r[1].Bytes) == "f" {
			fRow = r
		}
	}
	ek, ev, _ := frame.DecodeMap(fRow[11].Bytes)
	if len(ek) != 1 || string(ek[0]) != ExtensionPrefix+counter.IdempotenceOption {
		t.Fatalf("extensions keys %q", ek)
	}
	var opt map[string]string
	if err := json.Unmarshal(ev[0], &opt); err != nil || opt["class"] != "fbf" || opt["target_fpp"] != "0.0001" || opt["filters"] != "4" {
		t.Errorf("idempotence extension %s: %v", ev[0], err)
	}
	if string(fRow[5].Bytes) != "fbf table" {
		t.Errorf("comment %q", fRow[5].Bytes)
	}
	cols := prep("SELECT table_name, column_name, clustering_order, type, kind, position FROM system_schema.columns WHERE keyspace_name = ?", text_("ks"))
	var got []string
	for _, r := range cols.Rows {
		pos, _ := frame.DecodeInt(r[5].Bytes)
		got = append(got, fmt.Sprintf("%s.%s %s %s %s %d", r[0].Bytes, r[1].Bytes, r[2].Bytes, r[3].Bytes, r[4].Bytes, pos))
	}
	sort.Strings(got)
	wantCols := []string{"f.c none counter regular -1", "f.k none bigint partition_key 0",
		"t.c none counter regular -1", "t.d none counter regular -1", "t.k none text partition_key 0"}
	if !reflect.DeepEqual(got, wantCols) {
		t.Errorf("columns\n got %q\nwant %q", got, wantCols)
	}
	if ct := specTypes(cols.Columns); ct["kind"].ID != frame.TypeVarchar || ct["position"].ID != frame.TypeInt {
		t.Errorf("columns types %+v", ct)
	}
	for _, q := range []string{
		"SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?",
		"SELECT view_name FROM system_schema.views WHERE keyspace_name = ?",
		"SELECT type_name, field_names, field_types FROM system_schema.types WHERE keyspace_name = ?",
		"SELECT function_name, argument_types, argument_names, body, called_on_null_input, language, return_type FROM system_schema.functions WHERE keyspace_name = ?",
		"SELECT aggregate_name, argument_types, final_func, initcond, return_type, state_func, state_type FROM system_schema.aggregates WHERE keyspace_name = ?",
		"SELECT * FROM system_schema.triggers WHERE keyspace_name = ?",
		"SELECT * FROM system_schema.indexes WHERE keyspace_name = ?",
		"SELECT view_name, base_table_id, base_table_name, bloom_filter_fp_chance, caching, comment, compaction, compression, crc_check_chance, dclocal_read_repair_chance, default_time_to_live, extensions, gc_grace_seconds, id, include_all_columns, max_index_interval, memtable_flush_period_in_ms, min_index_interval, read_repair_chance, speculative_retry FROM system_schema.views WHERE keyspace_name = ?",
	} {
		prep(q, text_("ks"))
	}
	if r := prep(`SELECT COUNT(*) FROM system_schema.keyspaces`); len(r.Rows) != 1 {
		t.Errorf("count of keyspaces: %v", r.Rows)
	}
}

// TestNoPanics runs mutated statements with random values: every answer is
// a result or a *frame.Error.
func TestNoPanics(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.comp (a text, b int, c counter, PRIMARY KEY ((a, b)))`)
	r := testseed.Rand(t)
	base := []string{
		`UPDATE ks.t SET c = c + ? WHERE k = ?`, `UPDATE ks.comp SET c = c - ? WHERE a = ? AND b = ?`,
		`SELECT * FROM ks.t WHERE k IN (?, ?) LIMIT ?`, `SELECT * FROM ks.comp`, `DELETE c FROM ks.t WHERE k = ?`,
		`SELECT * FROM system.local WHERE key = ?`, `SELECT * FROM system_schema.columns WHERE keyspace_name IN ?`,
		`BEGIN COUNTER BATCH UPDATE ks.t SET c = c + ? WHERE k = ? APPLY BATCH`, `USE ks`,
		`CREATE TABLE ks.n (k int PRIMARY KEY, c counter) WITH idempotence = {'class': 'fbf'}`,
	}
	for i := 0; i < 3000; i++ {
		q := []byte(base[r.IntN(len(base))])
		for j := r.IntN(3); j > 0; j-- {
			q[r.IntN(len(q))] = " ?,()'=+-.0aK;"[r.IntN(14)]
		}
		vals := make([]frame.Value, r.IntN(5))
		for j := range vals {
			switch r.IntN(4) {
			case 0:
				vals[j] = frame.Null
			case 1:
				vals[j] = frame.Unset
			default:
				b := make([]byte, r.IntN(10))
				for k := range b {
					b[k] = byte(r.IntN(256))
				}
				vals[j] = frame.Bytes(b)
			}
		}
		p := params(vals...)
		p.PageSize = int32(r.IntN(4))
		if r.IntN(4) == 0 {
			p.PagingState = []byte("IP\x01garbage-state-bytes")
		}
		p.Consistency = frame.Consistency(r.IntN(12))
		out, err := h.e.Query(ctx, h.sess, string(q), p, nil)
		if err != nil {
			if _, ok := err.(*frame.Error); !ok {
				t.Fatalf("%s: error %T %v", q, err, err)
			}
			if fe := err.(*frame.Error); fe.Code == frame.ErrServer {
				t.Errorf("%s: server error %v", q, fe)
			}
			continue
		}
		if out.Result == nil {
			t.Fatalf("%s: no result and no error", q)
		}
	}
}
