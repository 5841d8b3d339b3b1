package exec

import (
	"testing"

	"github.com/idemkv/idemkv/cql/frame"
	"github.com/idemkv/idemkv/cql/parse"
)

// FuzzValidateValue: any bytes, for any regular column type, are checked
// without panicking, and a value that passes normalizes without panicking
// into a value that passes too.
func FuzzValidateValue(f *testing.F) {
	types := []string{"int", "text", "list<int>", "set<text>", "map<int, text>", "frozen<map<text, frozen<set<int>>>>", "tuple<int, text>", "decimal", "timeuuid", "time"}
	var dts []frame.DataType
	for _, s := range types {
		st, err := parse.Parse("CREATE TABLE t (c " + s + " PRIMARY KEY)")
		if err != nil {
			f.Fatal(err)
		}
		dt, _, _, err := regularType("ks", st.(*parse.CreateTable).Columns[0].Type)
		if err != nil {
			f.Fatal(err)
		}
		dts = append(dts, dt)
	}
	f.Add(uint8(3), frame.EncodeSet([][]byte{[]byte("b"), []byte("a"), []byte("b")}))
	f.Add(uint8(4), frame.EncodeMap([][]byte{frame.EncodeInt(2), frame.EncodeInt(-1)}, [][]byte{[]byte("x"), []byte("y")}))
	f.Add(uint8(6), []byte{0, 0, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(2), []byte{0, 0, 0, 1, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		dt := dts[int(which)%len(dts)]
		if validateValue(dt, b, "c") != nil {
			return
		}
		n := normalizeValue(dt, b)
		if err := validateValue(dt, n, "c"); err != nil {
			t.Fatalf("%x normalized to %x, which does not validate: %v", b, n, err)
		}
	})
}

// FuzzQuery: statements and bound values from the fuzzer, against tables
// of every kind, answer a result or a CQL error, never a panic or another
// error type.
func FuzzQuery(f *testing.F) {
	h := newHarness(f)
	h.setup()
	for _, q := range []string{
		`CREATE TABLE ks.c (k int, a int, b text, n counter, PRIMARY KEY ((k), a, b)) WITH CLUSTERING ORDER BY (a DESC)`,
		`CREATE TABLE ks.r (k text, c int, v text, m map<text, int>, l list<int>, s set<text>, tu tuple<int, text>, fm frozen<map<int, text>>, PRIMARY KEY (k, c))`,
	} {
		h.query(q)
	}
	for _, q := range []string{
		`UPDATE ks.c SET n = n + ? WHERE k = ? AND a = ? AND b = ?`,
		`SELECT * FROM ks.c WHERE k = ? AND a >= ? ORDER BY a ASC LIMIT 3`,
		`DELETE FROM ks.c WHERE k = 1 AND a < ?`,
		`INSERT INTO ks.r (k, c, v, m, l, s, tu, fm) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL 10`,
		`UPDATE ks.r SET l[?] = ?, m = m + ?, s = s - ? WHERE k = ? AND c = ?`,
		`INSERT INTO ks.r JSON ?`,
		`SELECT k, m['a'], ttl(v) FROM ks.r WHERE v = ? ALLOW FILTERING`,
		`SELECT * FROM ks.r PER PARTITION LIMIT ?`,
	} {
		f.Add(q, []byte{0, 0, 0, 1}, []byte("x"), []byte{0, 0, 0, 0, 0, 0, 0, 2})
	}
	f.Fuzz(func(t *testing.T, q string, v1, v2, v3 []byte) {
		var vals []frame.Value
		if st, err := parse.Parse(q); err == nil {
			raw := [][]byte{v1, v2, v3}
			for i := range parse.Markers(st) {
				vals = append(vals, frame.Bytes(raw[i%3]))
			}
		}
		_, err := h.e.Query(ctx, h.sess, q, frame.QueryParams{Consistency: frame.Consistency(4), Values: vals, PageSize: 2}, nil)
		if err == nil {
			return
		}
		if _, ok := err.(*frame.Error); !ok {
			t.Fatalf("%q: error %T %v is not a CQL error", q, err, err)
		}
	})
}
