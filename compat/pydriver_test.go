package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/compat/cqlshpy"
	"github.com/idemkv/idemkv/internal/testseed"
)

// The DataStax Python driver (cassandra-driver, the one cqlsh runs on) is
// the one compat/cqlshpy installs with cqlsh into its venv: these tests
// run compat/testdata/pydriver.py with that venv's python, failing when
// it cannot be provisioned unless IDEMKV_SKIP_CQLSH=1 (as the cqlsh
// tests do).

// pyQuery is one query of a pydriver.py request.
type pyQuery struct {
	Name        string `json:"name"`
	Q           string `json:"q"`
	FetchSize   int    `json:"fetch_size,omitempty"`
	ManualPages int    `json:"manual_pages,omitempty"`
}

// pyResult is pydriver.py's answer to one query; rows are JSON values
// re-encoded compactly by encoding/json (see canonical).
type pyResult struct {
	Rows     []json.RawMessage   `json:"rows"`
	Pages    []int               `json:"pages"`
	Manual   [][]json.RawMessage `json:"manual"`
	Replayed []json.RawMessage   `json:"replayed"`
}

// driverRun runs a driver script's request against node 1 of the ring.
type driverRun func(t *testing.T, r *ring, queries []pyQuery) map[string]pyResult

// runPyDriver runs pydriver.py with the cqlsh venv's python.
func runPyDriver(t *testing.T, r *ring, queries []pyQuery) map[string]pyResult {
	t.Helper()
	python := filepath.Join(filepath.Dir(realCqlsh(t)), "python")
	return runDriverScript(t, r, queries, cqlshpy.DriverVersion, nil, python, "pydriver.py")
}

// runDriverScript runs interpreter testdata/script with the request on
// its standard input and decodes its answer, checking the driver's
// version.
func runDriverScript(t *testing.T, r *ring, queries []pyQuery, version string, env []string, interpreter, script string) map[string]pyResult {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	req, err := json.Marshal(map[string]any{"host": "127.0.0.1", "port": r.port + 1, "queries": queries})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, interpreter, path)
	cmd.Stdin = bytes.NewReader(req)
	cmd.Env = append(append(os.Environ(), "PYTHONIOENCODING=utf-8"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n--- stderr:\n%s", script, err, stderr.String())
	}
	var out struct {
		Driver  string              `json:"driver"`
		Results map[string]pyResult `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%s's answer: %v\n%s\n--- stderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	if out.Driver != version {
		t.Errorf("%s ran driver %s, want %s", script, out.Driver, version)
	}
	return out.Results
}

// canonical re-encodes a JSON value compactly, numbers verbatim.
func canonical(t *testing.T, raw []byte) string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("JSON %s: %v", raw, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func canonicalRows(t *testing.T, rows []json.RawMessage) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = canonical(t, r)
	}
	return out
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return canonical(t, b)
}

// driverPaging: a driver script reads the big partitions of
// TestPagingBigPartition with a fetch size of 333 — every row once, in
// order, each page 333 rows but the last — and its first three pages by
// hand with their paging states, the second page's state replayed.
func driverPaging(t *testing.T, run driverRun, r *ring, seed uint64, counterRows, regularRows []pagedRow) {
	rev := slices.Clone(regularRows)
	slices.Reverse(rev)
	cases := map[string][]pagedRow{"counter": counterRows, "regular": regularRows, "regular ASC": rev}
	res := run(t, r, []pyQuery{
		{Name: "counter", Q: `SELECT n, v FROM ks.cp WHERE k = 'p'`, FetchSize: pageSize, ManualPages: 3},
		{Name: "regular", Q: `SELECT n, v FROM ks.rp WHERE k = 'p'`, FetchSize: pageSize, ManualPages: 3},
		{Name: "regular ASC", Q: `SELECT n, v FROM ks.rp WHERE k = 'p' ORDER BY n ASC`, FetchSize: pageSize, ManualPages: 3},
	})
	for name, want := range cases {
		wantRows := make([]string, len(want))
		for i, rw := range want {
			wantRows[i] = jsonOf(t, []any{rw.N, rw.V})
		}
		got, ok := res[name]
		if !ok {
			t.Fatalf("no answer for %s", name)
		}
		rows := canonicalRows(t, got.Rows)
		if len(rows) != len(wantRows) {
			t.Errorf("seed %d: %s: the driver read %d rows, want %d", seed, name, len(rows), len(wantRows))
		}
		for i := range min(len(rows), len(wantRows)) {
			if rows[i] != wantRows[i] {
				t.Fatalf("seed %d: %s: the driver's row %d = %s, want %s", seed, name, i, rows[i], wantRows[i])
			}
		}
		for i, n := range got.Pages {
			if n != pageSize && (i != len(got.Pages)-1 || n > pageSize) {
				t.Errorf("seed %d: %s: pages of %v rows, want %d but the last", seed, name, got.Pages, pageSize)
				break
			}
		}
		if len(got.Manual) != 3 {
			t.Fatalf("seed %d: %s: %d pages by paging_state, want 3", seed, name, len(got.Manual))
		}
		for p, page := range got.Manual {
			if g, w := canonicalRows(t, page), wantRows[p*pageSize:(p+1)*pageSize]; !slices.Equal(g, w) {
				t.Errorf("seed %d: %s: page %d by paging_state: %d rows from %v, want %d from %v", seed, name, p, len(g), g[:min(1, len(g))], len(w), w[0])
			}
		}
		if g := canonicalRows(t, got.Replayed); !slices.Equal(g, canonicalRows(t, got.Manual[1])) {
			t.Errorf("seed %d: %s: page 2 replayed from its paging_state: %d rows from %v", seed, name, len(g), g[:min(1, len(g))])
		}
	}
}

// TestDriverCollections: rows of non-frozen map, set and list columns
// written element by element through gocql (collectionOps), and frozen
// collections, a nested frozen map and a tuple, read through the Python
// and Node.js drivers in small pages across partitions: each row as the
// model has it — a map's entries in key order, a set sorted, a list in
// order, an empty collection null, a row whose collections are all empty
// gone.
func TestDriverCollections(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	r := startRing(t, 3, nil)
	s := r.session(r.cluster())
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.c (k int, n int, m map<text, int>, st set<int>, l list<text>, PRIMARY KEY (k, n))`)
	rows := map[[2]int]*collModel{}
	collectionOps(t, s, rng, rows, 200)
	exec(t, s, `CREATE TABLE ks.f (k text PRIMARY KEY, fl frozen<list<int>>, tu tuple<int, text, bigint>, fm frozen<map<int, text>>, nest frozen<map<text, frozen<list<int>>>>, fs frozen<set<int>>)`)
	want := map[string]string{}
	for i := range 6 {
		k := fmt.Sprintf("f%d", i)
		fl := []int{rng.IntN(5), rng.IntN(5), -rng.IntN(5)}
		a, b := rng.IntN(100)-50, rng.IntN(100)+50 // a < b: written in key order
		big := rng.Int64()
		// Written in Cassandra's order (keys, elements sorted) so that this
		// test does not meet the bug TestGocqlFrozenNormalized shows.
		exec(t, s, fmt.Sprintf(`INSERT INTO ks.f (k, fl, tu, fm, nest, fs) VALUES (?, ?, (%d, 'é%d', %d), {%d: 'a', %d: 'b'}, {'x': [%d], 'y': []}, {%d, %d})`, i, i, big, a, b, i, a, b), k, fl)
		want[k] = jsonOf(t, []any{k, fl, []any{i, fmt.Sprintf("é%d", i), big}, [][]any{{a, "a"}, {b, "b"}}, [][]any{{"x", []int{i}}, {"y", []int{}}}, []int{a, b}})
	}
	exec(t, s, `INSERT INTO ks.f (k) VALUES ('empty')`)
	want["empty"] = jsonOf(t, []any{"empty", nil, nil, nil, nil, nil})

	for _, d := range []struct {
		name string
		run  driverRun
	}{{"python", runPyDriver}, {"node", runNodeDriver}} {
		t.Run(d.name, func(t *testing.T) { driverCollectionsRead(t, d.run, r, seed, rows, want) })
	}
}

// driverCollectionsRead is TestDriverCollections's check of one driver.
func driverCollectionsRead(t *testing.T, run driverRun, r *ring, seed uint64, rows map[[2]int]*collModel, want map[string]string) {
	res := run(t, r, []pyQuery{
		{Name: "c", Q: `SELECT k, n, m, st, l FROM ks.c`, FetchSize: 4},
		{Name: "f", Q: `SELECT k, fl, tu, fm, nest, fs FROM ks.f`, FetchSize: 3},
	})
	wantC := map[string]bool{}
	for id, md := range rows {
		if len(md.m)+len(md.st)+len(md.l) == 0 {
			continue
		}
		var m, st, l any
		if len(md.m) > 0 {
			var pairs [][]any
			for _, k := range slices.Sorted(maps.Keys(md.m)) {
				pairs = append(pairs, []any{k, md.m[k]})
			}
			m = pairs
		}
		if len(md.st) > 0 {
			st = slices.Sorted(maps.Keys(md.st))
		}
		if len(md.l) > 0 {
			l = md.l
		}
		wantC[jsonOf(t, []any{id[0], id[1], m, st, l})] = true
	}
	gotC := map[string]bool{}
	for _, row := range canonicalRows(t, res["c"].Rows) {
		if gotC[row] {
			t.Errorf("seed %d: ks.c: row %s read twice", seed, row)
		}
		gotC[row] = true
	}
	if !maps.Equal(gotC, wantC) {
		t.Errorf("seed %d: ks.c through the driver:\n got %s\nwant %s", seed, sortedKeys(gotC), sortedKeys(wantC))
	}
	gotF := map[string]string{}
	for _, row := range canonicalRows(t, res["f"].Rows) {
		var k []any
		if err := json.Unmarshal([]byte(row), &k); err != nil || len(k) == 0 {
			t.Fatalf("row %s: %v", row, err)
		}
		gotF[fmt.Sprint(k[0])] = row
	}
	for k, w := range want {
		if gotF[k] != w {
			t.Errorf("seed %d: ks.f row %s through the driver:\n got %s\nwant %s", seed, k, gotF[k], w)
		}
	}
	if len(gotF) != len(want) {
		t.Errorf("seed %d: ks.f: %d rows, want %d", seed, len(gotF), len(want))
	}
}

func sortedKeys(m map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), "\n     ")
}
