package compat

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/internal/testseed"
)

// expiryWait bounds every wait for a TTL to expire: far above the TTLs
// the tests use, so only a cell that never expires fails it.
const expiryWait = 30 * time.Second

// TestGocqlRegularTTL: rows and cells written through gocql with USING
// TTL (literal and bound) and a table's default_time_to_live: ttl()
// reads at most the TTL while they live, and they disappear once it has
// passed — the row of an INSERT with its TTL, only the cell of an UPDATE
// with one (the row stays with its other columns), a map element written
// with one. A cell that reads must be younger than its TTL, and one
// that is gone must be older: no timing is assumed beyond an upper bound
// on the wait.
func TestGocqlRegularTTL(t *testing.T) {
	r := startRing(t, 3, nil)
	s := r.session(r.cluster())
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.sess (id text PRIMARY KEY, owner text, tok text, attrs map<text, text>)`)
	exec(t, s, `CREATE TABLE ks.short (id text PRIMARY KEY, v int) WITH default_time_to_live = 3`)

	start := time.Now()
	exec(t, s, `INSERT INTO ks.sess (id, owner, tok) VALUES ('a', 'ann', 't-a') USING TTL 3`)
	exec(t, s, `INSERT INTO ks.sess (id, owner, tok) VALUES (?, ?, ?) USING TTL ?`, "b", "bob", "t-b", 4)
	exec(t, s, `INSERT INTO ks.sess (id, owner, tok, attrs) VALUES ('c', 'cy', 't-c', {'lang': 'fr'})`)
	exec(t, s, `UPDATE ks.sess USING TTL 3 SET tok = 't-c2' WHERE id = 'c'`)
	exec(t, s, `UPDATE ks.sess USING TTL 3 SET attrs['tmp'] = 'x' WHERE id = 'c'`)
	exec(t, s, `INSERT INTO ks.short (id, v) VALUES ('d', 1)`)
	exec(t, s, `INSERT INTO ks.short (id, v) VALUES ('e', 2) USING TTL 0`) // no expiry despite the default

	// live checks a row while its TTL may still run: present with ttl() in
	// 1..ttl, or absent only once ttl-1 seconds have passed (a cell
	// expires at the whole second now+ttl, as in Cassandra, so up to a
	// second early).
	live := func(q string, ttl int, id string) bool {
		t.Helper()
		var left *int
		err := s.Query(q, id).Consistency(gocql.Quorum).Scan(&left)
		switch {
		case err == gocql.ErrNotFound || (err == nil && left == nil):
			if el := time.Since(start); el < time.Duration(ttl-1)*time.Second {
				t.Fatalf("%s [%s]: gone after %v, its TTL is %d s", q, id, el, ttl)
			}
			return false
		case err != nil:
			t.Fatalf("%s [%s]: %v", q, id, err)
		case *left < 1 || *left > ttl:
			t.Fatalf("%s [%s]: ttl() = %d, want 1..%d", q, id, *left, ttl)
		}
		return true
	}
	live(`SELECT ttl(owner) FROM ks.sess WHERE id = ?`, 3, "a")
	live(`SELECT ttl(tok) FROM ks.sess WHERE id = ?`, 4, "b")
	live(`SELECT ttl(tok) FROM ks.sess WHERE id = ?`, 3, "c")
	live(`SELECT ttl(v) FROM ks.short WHERE id = ?`, 3, "d")
	var before map[string]string
	if err := s.Query(`SELECT attrs FROM ks.sess WHERE id = 'c'`).Scan(&before); err != nil {
		t.Fatalf("c's attrs: %v", err)
	}
	if el := time.Since(start); (before["tmp"] != "x" && el < 2*time.Second) || before["lang"] != "fr" {
		t.Fatalf("c's attrs after %v: %v, want lang: fr and tmp: x (TTL 3 s)", el, before)
	}
	var owner string
	var noTTL *int
	if err := s.Query(`SELECT owner, ttl(owner) FROM ks.sess WHERE id = 'c'`).Scan(&owner, &noTTL); err != nil || owner != "cy" || noTTL != nil {
		t.Fatalf("c's owner without a TTL: %q ttl %v (%v)", owner, noTTL, err)
	}

	deadline := time.Now().Add(expiryWait)
	for live(`SELECT ttl(owner) FROM ks.sess WHERE id = ?`, 3, "a") ||
		live(`SELECT ttl(tok) FROM ks.sess WHERE id = ?`, 4, "b") ||
		live(`SELECT ttl(tok) FROM ks.sess WHERE id = ?`, 3, "c") ||
		live(`SELECT ttl(v) FROM ks.short WHERE id = ?`, 3, "d") {
		if time.Now().After(deadline) {
			t.Fatalf("cells with TTLs of 3 and 4 s still live after %v", expiryWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range []string{"a", "b"} {
		if n := s.Query(`SELECT * FROM ks.sess WHERE id = ?`, id).Iter().NumRows(); n != 0 {
			t.Errorf("row %s inserted with a TTL: %d rows after it expired", id, n)
		}
	}
	var tok *string
	var attrs map[string]string
	if err := s.Query(`SELECT owner, tok, attrs FROM ks.sess WHERE id = 'c'`).Scan(&owner, &tok, &attrs); err != nil {
		t.Fatalf("row c after its tok expired: %v", err)
	}
	if owner != "cy" || tok != nil || !maps.Equal(attrs, map[string]string{"lang": "fr"}) {
		t.Errorf("row c after the expiry: owner %q tok %v attrs %v, want cy, null, {lang: fr}", owner, tok, attrs)
	}
	if n := s.Query(`SELECT * FROM ks.short WHERE id = 'd'`).Iter().NumRows(); n != 0 {
		t.Errorf("row d of a table with default_time_to_live = 3: %d rows after it expired", n)
	}
	var v int
	if err := s.Query(`SELECT v, ttl(v) FROM ks.short WHERE id = 'e'`).Scan(&v, &noTTL); err != nil || v != 2 || noTTL != nil {
		t.Errorf("row e written USING TTL 0: v %d ttl %v (%v), want 2 and no TTL", v, noTTL, err)
	}
}

// TestGocqlRegularCollections: non-frozen map, set and list columns
// updated element by element through gocql (m[k] = v, m + {}, m - {},
// DELETE m[k]; s + {}, s - {}; l + [], [] + l, l[i] = v, DELETE l[i],
// l - []; whole overwrites), by seeded random operations against a model,
// read back after each round as gocql's unmarshalled Go values; then
// frozen collections and a tuple, bound and literal, and their reads.
func TestGocqlRegularCollections(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	r := startRing(t, 3, nil)
	s := r.session(r.cluster())
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.c (k int, n int, m map<text, int>, st set<int>, l list<text>, PRIMARY KEY (k, n))`)

	rows := map[[2]int]*collModel{}
	for round := 0; round < 6; round++ {
		collectionOps(t, s, rng, rows, 40)
		for id, md := range rows {
			var m map[string]int
			var st []int
			var l []string
			err := s.Query(`SELECT m, st, l FROM ks.c WHERE k = ? AND n = ?`, id[0], id[1]).Scan(&m, &st, &l)
			if err == gocql.ErrNotFound && len(md.m)+len(md.st)+len(md.l) == 0 {
				continue // a row made by UPDATEs goes with its last cell
			}
			if err != nil {
				t.Fatalf("seed %d: round %d: row %v: %v", seed, round, id, err)
			}
			wantSet := slices.Sorted(maps.Keys(md.st))
			if !maps.Equal(m, md.m) || !slices.Equal(st, wantSet) || !slices.Equal(l, md.l) {
				t.Fatalf("seed %d: round %d: row %v:\n got m %v st %v l %q\nwant m %v st %v l %q", seed, round, id, m, st, l, md.m, wantSet, md.l)
			}
		}
	}

	// Frozen collections and a tuple: whole values, bound and literal.
	exec(t, s, `CREATE TABLE ks.f (k text PRIMARY KEY, fm frozen<map<int, text>>, fs frozen<set<text>>, fl frozen<list<int>>, tu tuple<int, text, bigint>, nest frozen<map<text, frozen<list<int>>>>)`)
	type tup struct {
		A int
		B string
		C int64
	}
	want := map[string]struct {
		fm   map[int]string
		fs   []string
		fl   []int
		tu   tup
		nest map[string][]int
	}{}
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		fm := map[int]string{rng.IntN(50) - 25: "x", rng.IntN(50): "y"}
		fs := []string{fmt.Sprintf("s%d", rng.IntN(9)), "a"}
		fl := []int{rng.IntN(9), rng.IntN(9), rng.IntN(9)} // duplicates stay in a list
		tu := tup{rng.IntN(1000), fmt.Sprintf("t%d", i), rng.Int64()}
		nest := map[string][]int{"p": {1, 2}, k: {i}}
		// The tuple is a literal: gocql v1.7.0 cannot bind a tuple marker
		// (it counts the tuple's elements as values, then marshals the
		// first into the tuple's type — with Cassandra too).
		exec(t, s, fmt.Sprintf(`INSERT INTO ks.f (k, fm, fs, fl, tu, nest) VALUES (?, ?, ?, ?, (%d, '%s', %d), ?)`, tu.A, tu.B, tu.C), k, fm, fs, fl, nest)
		fs = slices.Compact(slices.Sorted(slices.Values(fs)))
		want[k] = struct {
			fm   map[int]string
			fs   []string
			fl   []int
			tu   tup
			nest map[string][]int
		}{fm, fs, fl, tu, nest}
	}
	// Literals as Cassandra reads them: sets sorted and deduplicated, map
	// keys sorted.
	exec(t, s, `INSERT INTO ks.f (k, fm, fs, fl, tu, nest) VALUES ('lit', {3: 'c', -1: 'a'}, {'z', 'b', 'z'}, [3, 1, 3], (7, 'seven', -7), {'q': [9, 8]})`)
	want["lit"] = struct {
		fm   map[int]string
		fs   []string
		fl   []int
		tu   tup
		nest map[string][]int
	}{map[int]string{3: "c", -1: "a"}, []string{"b", "z"}, []int{3, 1, 3}, tup{7, "seven", -7}, map[string][]int{"q": {9, 8}}}
	for k, w := range want {
		var fm map[int]string
		var fs []string
		var fl []int
		var tu tup
		var nest map[string][]int
		if err := s.Query(`SELECT fm, fs, fl, tu, nest FROM ks.f WHERE k = ?`, k).Scan(&fm, &fs, &fl, &tu.A, &tu.B, &tu.C, &nest); err != nil {
			t.Fatalf("frozen row %s: %v", k, err)
		}
		// As a set, whatever its order and repeats: TestGocqlFrozenNormalized
		// checks those.
		fs = slices.Compact(slices.Sorted(slices.Values(fs)))
		if !maps.Equal(fm, w.fm) || !slices.Equal(fs, w.fs) || !slices.Equal(fl, w.fl) || tu != w.tu || !reflect.DeepEqual(nest, w.nest) {
			t.Errorf("seed %d: frozen row %s:\n got %v %q %v %+v %v\nwant %v %q %v %+v %v", seed, k, fm, fs, fl, tu, nest, w.fm, w.fs, w.fl, w.tu, w.nest)
		}
	}
	if err := s.Query(`UPDATE ks.f SET fl = fl + [1] WHERE k = 'lit'`).Exec(); requestCode(err) != 0x2200 {
		t.Errorf("appending to a frozen list: %v, want Invalid", err)
	}
}

// TestGocqlRegularBatch: gocql batches of regular rows, unlogged and
// logged, over several partitions of a clustered table — INSERTs (some
// with a TTL), UPDATEs adding to a set, DELETEs of rows earlier batches
// wrote; a batch's statements share its timestamp, so each touches a row
// of its own — read back whole, in clustering order, after every batch.
func TestGocqlRegularBatch(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	r := startRing(t, 3, nil)
	s := r.session(r.cluster())
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.ev (src text, seq int, body text, tags set<text>, PRIMARY KEY (src, seq)) WITH CLUSTERING ORDER BY (seq DESC)`)
	type ev struct {
		seq  int
		body string
		tags []string
		ttl  bool // body was last written with a TTL
	}
	model := map[string]map[int]ev{}
	srcs := []string{"s0", "s1", "s2"}
	for bi, kind := range []gocql.BatchType{gocql.UnloggedBatch, gocql.LoggedBatch, gocql.UnloggedBatch, gocql.LoggedBatch, gocql.LoggedBatch} {
		b := s.NewBatch(kind)
		touched := map[[2]any]bool{}
		for range 25 {
			src, seq := srcs[rng.IntN(len(srcs))], rng.IntN(30)
			if touched[[2]any{src, seq}] {
				continue
			}
			touched[[2]any{src, seq}] = true
			body := fmt.Sprintf("b%d-%d", bi, rng.IntN(1000))
			if model[src] == nil {
				model[src] = map[int]ev{}
			}
			old, exists := model[src][seq]
			switch rng.IntN(5) {
			case 0, 1:
				b.Query(`INSERT INTO ks.ev (src, seq, body, tags) VALUES (?, ?, ?, {'t'})`, src, seq, body)
				model[src][seq] = ev{seq, body, []string{"t"}, false}
			case 2: // an INSERT leaves the columns it does not name
				b.Query(`INSERT INTO ks.ev (src, seq, body) VALUES (?, ?, ?) USING TTL 3600`, src, seq, body)
				model[src][seq] = ev{seq, body, old.tags, true}
			case 3:
				b.Query(`UPDATE ks.ev SET body = ?, tags = tags + {'u'} WHERE src = ? AND seq = ?`, body, src, seq)
				tags := []string{"u"}
				if exists {
					tags = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(old.tags), "u"))))
				}
				model[src][seq] = ev{seq, body, tags, false}
			case 4:
				b.Query(`DELETE FROM ks.ev WHERE src = ? AND seq = ?`, src, seq)
				delete(model[src], seq)
			}
		}
		if err := s.ExecuteBatch(b); err != nil {
			t.Fatalf("seed %d: batch %d (%v): %v", seed, bi, kind, err)
		}
		for _, src := range srcs {
			want := slices.SortedFunc(maps.Values(model[src]), func(a, b ev) int { return b.seq - a.seq })
			iter := s.Query(`SELECT seq, body, tags FROM ks.ev WHERE src = ?`, src).PageSize(4).Iter()
			var got []ev
			var e ev
			for iter.Scan(&e.seq, &e.body, &e.tags) {
				if len(e.tags) == 0 {
					e.tags = nil
				}
				got = append(got, e)
				e = ev{}
			}
			for i := range want {
				want[i].ttl = false
			}
			if err := iter.Close(); err != nil {
				t.Fatalf("seed %d: read %s: %v", seed, src, err)
			}
			if !slices.EqualFunc(got, want, func(a, b ev) bool { return reflect.DeepEqual(a, b) }) {
				t.Fatalf("seed %d: after batch %d (%v), partition %s:\n got %v\nwant %v", seed, bi, kind, src, got, want)
			}
		}
	}
	var left *int
	for src, rows := range model {
		for seq, e := range rows {
			if !e.ttl {
				continue
			}
			if err := s.Query(`SELECT ttl(body) FROM ks.ev WHERE src = ? AND seq = ?`, src, seq).Scan(&left); err != nil || left == nil || *left < 1 || *left > 3600 {
				t.Errorf("seed %d: ttl(body) of %s/%d written USING TTL 3600 in a batch: %v (%v)", seed, src, seq, left, err)
			}
		}
	}
}

// collModel is the model of a row of ks.c (k int, n int, m map<text,
// int>, st set<int>, l list<text>, PRIMARY KEY (k, n)).
type collModel struct {
	m  map[string]int
	st map[int]bool
	l  []string
}

// collectionOps applies n seeded random element operations to rows of
// ks.c through gocql, and to their models.
func collectionOps(t *testing.T, s *gocql.Session, rng *rand.Rand, rows map[[2]int]*collModel, n int) {
	t.Helper()
	keys := []string{"a", "b", "c", "d", "é"}
	for range n {
		id := [2]int{rng.IntN(2), rng.IntN(3)}
		md := rows[id]
		if md == nil {
			md = &collModel{m: map[string]int{}, st: map[int]bool{}}
			rows[id] = md
		}
		where := " WHERE k = ? AND n = ?"
		up := func(set string, vals ...any) {
			t.Helper()
			exec(t, s, "UPDATE ks.c SET "+set+where, append(vals, id[0], id[1])...)
		}
		key, val, num := keys[rng.IntN(len(keys))], rng.IntN(100), rng.IntN(10)-3
		word := fmt.Sprintf("w%d", rng.IntN(6))
		switch op := rng.IntN(14); op {
		case 0:
			up("m[?] = ?", key, val)
			md.m[key] = val
		case 1:
			up("m = m + ?", map[string]int{key: val, "z": num})
			md.m[key], md.m["z"] = val, num
		case 2:
			up("m = m - ?", []string{key})
			delete(md.m, key)
		case 3:
			exec(t, s, "DELETE m[?] FROM ks.c"+where, key, id[0], id[1])
			delete(md.m, key)
		case 4:
			up("st = st + ?", []int{num, val})
			md.st[num], md.st[val] = true, true
		case 5:
			up("st = st - {" + fmt.Sprint(num) + "}")
			delete(md.st, num)
		case 6, 7:
			up("l = l + ?", []string{word, "x"})
			md.l = append(md.l, word, "x")
		case 8:
			up("l = ? + l", []string{word})
			md.l = append([]string{word}, md.l...)
		case 9:
			if len(md.l) == 0 {
				continue
			}
			i := rng.IntN(len(md.l))
			up("l[?] = ?", i, word)
			md.l[i] = word
		case 10:
			if len(md.l) == 0 {
				continue
			}
			i := rng.IntN(len(md.l))
			exec(t, s, "DELETE l[?] FROM ks.c"+where, i, id[0], id[1])
			md.l = slices.Delete(md.l, i, i+1)
		case 11:
			up("l = l - ?", []string{word})
			md.l = slices.DeleteFunc(md.l, func(e string) bool { return e == word })
		case 12:
			up("m = {'only': ?}, st = {?}, l = ['one']", val, num)
			md.m, md.st, md.l = map[string]int{"only": val}, map[int]bool{num: true}, []string{"one"}
		case 13:
			exec(t, s, "DELETE st FROM ks.c"+where, id[0], id[1])
			md.st = map[int]bool{}
		}
	}
}

// rawCQL is a column's value as the server sent it.
type rawCQL []byte

func (r *rawCQL) UnmarshalCQL(_ gocql.TypeInfo, data []byte) error {
	*r = append((*r)[:0], data...)
	return nil
}

// TestGocqlFrozenNormalized: a frozen set or map is stored as Cassandra
// serializes it, whatever order the client wrote it in: a set's elements
// sorted by the element type's order with repeats removed, a map's
// entries sorted by key with a repeated key written once (the last
// value). gocql returns a set as a slice in the server's order, and the
// raw bytes show the map's.
func TestGocqlFrozenNormalized(t *testing.T) {
	r := startRing(t, 3, nil)
	s := r.session(r.cluster())
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.f (k text PRIMARY KEY, fs frozen<set<text>>, fm frozen<map<int, text>>, fi frozen<set<int>>)`)
	exec(t, s, `INSERT INTO ks.f (k, fs, fm, fi) VALUES ('lit', {'z', 'b', 'z'}, {3: 'c', -1: 'a', 3: 'C'}, {5, -2, 5, 0})`)
	exec(t, s, `INSERT INTO ks.f (k, fs, fm, fi) VALUES (?, ?, ?, ?)`, "bound", []string{"s3", "a", "s3"}, map[int]string{3: "c", -1: "a"}, []int{5, -2, 0})
	sortedMap := rawCQL{0, 0, 0, 2, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 'a', 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 1, 'C'}
	for _, c := range []struct {
		k      string
		fs     []string
		fmLast string
	}{{"lit", []string{"b", "z"}, "C"}, {"bound", []string{"a", "s3"}, "c"}} {
		var fs []string
		var fi []int
		var fm rawCQL
		if err := s.Query(`SELECT fs, fm, fi FROM ks.f WHERE k = ?`, c.k).Scan(&fs, &fm, &fi); err != nil {
			t.Fatalf("%s: %v", c.k, err)
		}
		want := slices.Clone(sortedMap)
		want[len(want)-1] = c.fmLast[0]
		if !slices.Equal(fs, c.fs) || !slices.Equal(fi, []int{-2, 0, 5}) || !slices.Equal(fm, want) {
			t.Errorf("%s: fs %q fi %v fm %x, want %q [-2 0 5] %x", c.k, fs, fi, []byte(fm), c.fs, []byte(want))
		}
	}
}
