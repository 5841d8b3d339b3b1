package counter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
)

// TestAgingOptions: 'filter': 'aging' and its options parse with their
// defaults, each is bounded with an error naming it, the options of one
// structure are refused with the other, and the default stays fbf.
func TestAgingOptions(t *testing.T) {
	o, err := ParseFBFOptions(map[string]string{"class": "fbf"}, 5*time.Second)
	if err != nil || o.Filter != FilterFBF || o.Window != 0 || o.Rate != 0 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o, err = ParseFBFOptions(map[string]string{"class": "fbf", "filter": "aging"}, 5*time.Second)
	if err != nil || o.Filter != FilterAging || o.Window != DefaultFBFWindow || o.Rate != DefaultFBFRate ||
		o.RetryHorizon != 20*time.Second || o.TargetFPP != DefaultFBFTargetFPP || o.Bits != 0 {
		t.Fatalf("aging defaults: %+v, %v", o, err)
	}
	o, err = ParseFBFOptions(map[string]string{"class": "fbf", "filter": "AGING", "window": "1h", "rate": "500", "target_fpp": "0.001", "retry_horizon": "30s"}, 5*time.Second)
	if err != nil || o.Window != time.Hour || o.Rate != 500 || o.TargetFPP != 0.001 || o.RetryHorizon != 30*time.Second {
		t.Fatalf("aging options: %+v, %v", o, err)
	}
	for _, c := range []struct {
		m    map[string]string
		want string
	}{
		{map[string]string{"filter": "cuckoo"}, "filter = \"cuckoo\": must be fbf or aging"},
		{map[string]string{"filter": "aging", "window": "500ms"}, "window = \"500ms\": out of range: must be at least 1s"},
		{map[string]string{"filter": "aging", "window": "25h"}, "window = \"25h\": out of range: must be at most 24h0m0s"},
		{map[string]string{"filter": "aging", "window": "-1m"}, "must be positive"},
		{map[string]string{"filter": "aging", "window": "10"}, "window = \"10\""},
		{map[string]string{"filter": "aging", "rate": "0.5"}, "rate = \"0.5\": out of range: must be at least 1"},
		{map[string]string{"filter": "aging", "rate": "2e7"}, "rate = \"2e7\": out of range: must be at most 10000000"},
		{map[string]string{"filter": "aging", "rate": "1e999"}, "rate = \"1e999\": out of range: must be at most 10000000"},
		{map[string]string{"filter": "aging", "rate": "NaN"}, "rate = \"NaN\": must be positive"},
		{map[string]string{"filter": "aging", "rate": "-3"}, "must be positive"},
		{map[string]string{"filter": "aging", "window": "10s", "retry_horizon": "20s"}, "window = \"10s\": out of range: must be at least retry_horizon (20s)"},
		{map[string]string{"filter": "aging", "window": "24h", "rate": "10000000"}, "rate = 1e+07 and window = 24h0m0s: out of range"},
		{map[string]string{"filter": "aging", "bits": "1024"}, "bits = \"1024\": applies to 'filter': 'fbf'"},
		{map[string]string{"filter": "aging", "adaptive": "false"}, "adaptive = \"false\": applies to 'filter': 'fbf'"},
		{map[string]string{"window": "10m"}, "window = \"10m\": applies to 'filter': 'aging' only"},
		{map[string]string{"filter": "fbf", "rate": "10"}, "rate = \"10\": applies to 'filter': 'aging' only"},
	} {
		c.m["class"] = "fbf"
		_, err := idempotence{}.ParseCQL(c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.m, err, c.want)
		}
	}
	// The bounds themselves are accepted, and the memory bound holds.
	for _, m := range []map[string]string{
		{"class": "fbf", "filter": "aging", "window": "1s", "rate": "1", "retry_horizon": "1s"},
		{"class": "fbf", "filter": "aging", "window": "24h", "rate": "1000", "target_fpp": "0.5"},
		{"class": "fbf", "filter": "aging", "window": "10m", "rate": "50000", "target_fpp": "1e-9"},
	} {
		if _, err := (idempotence{}).ParseCQL(m); err != nil {
			t.Errorf("%v: %v", m, err)
		}
	}
}

// TestAgingOptionsClamped: a stored definition out of the bounds loads
// with its values clamped, within the column's memory bound.
func TestAgingOptionsClamped(t *testing.T) {
	d := coltype.TableDef{ID: 7, Keyspace: "ks", Name: "t",
		Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
		Options: map[string]string{IdempotenceOption: `{"class": "fbf", "filter": "aging", "window": "48h", "rate": "1e12", "retry_horizon": "1m"}`}}
	if err := d.Validate(); err != nil {
		t.Fatalf("a stored definition out of the bounds: %v", err)
	}
	clamped := strings.Join(FBFClamped(d), "; ")
	for _, w := range []string{`window = "48h"`, `rate = "1e12"`, "256 MiB"} {
		if !strings.Contains(clamped, w) {
			t.Errorf("FBFClamped %q lacks %q", clamped, w)
		}
	}
	o, on, err := TableFBF(d, 5*time.Second)
	if err != nil || !on || o.Window != MaxFBFWindow || o.agingConfig(nil).MaxBytes > MaxFBFColumnMemory {
		t.Fatalf("clamped: %+v, %v", o, err)
	}
	if s, _ := o.agingSizing(); s.InitialBytes > MaxFBFColumnMemory {
		t.Fatalf("clamped tables take %d bytes", s.InitialBytes)
	}
	if got := (idempotence{}).MaxMemory(d, d.Options[IdempotenceOption]); got > MaxFBFColumnMemory {
		t.Fatalf("MaxMemory %d", got)
	}
}

// TestAgingMaxMemory: the memory a table of the aging filter may take on a
// node is its tables grown to their bound, twice the sized tables.
func TestAgingMaxMemory(t *testing.T) {
	d := coltype.TableDef{Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}, {Name: "d", Type: "counter"}}}
	o, err := ParseFBFOptions(map[string]string{"class": "fbf", "filter": "aging"}, checkTimeout)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := o.agingSizing()
	got := (idempotence{}).MaxMemory(d, `{"class":"fbf","filter":"aging"}`)
	if got != 2*2*s.InitialBytes || got > 2*MaxFBFColumnMemory {
		t.Fatalf("MaxMemory %d, want twice the tables of two columns (%d)", got, 4*s.InitialBytes)
	}
}

// agingEnv is testEnv with a clock the test moves.
type agingEnv struct {
	testEnv
	now *time.Time
}

func (e agingEnv) Now() time.Time { return *e.now }

// TestAgingColumn: an FBF column with the aging filter dismisses a retry
// through its window (10 minutes) and forgets it after; its op ids come
// back from the commit log at a restart, remembered from their op time;
// an ALTER TABLE from the default filter to the aging one (and back)
// keeps consulting the retired filter through its window.
func TestAgingColumn(t *testing.T) {
	now := time.Unix(1e9, 0)
	env := agingEnv{now: &now}
	def := func(opts string) coltype.TableDef {
		return coltype.TableDef{ID: 7, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
			Options: map[string]string{IdempotenceOption: opts}}
	}
	aging := def(`{"class": "fbf", "filter": "aging", "window": "10m", "rate": "1000"}`)
	ct, err := Vanilla{}.Configure(env, aging, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := ct.(*fbfCounter)
	if _, ok := c.filter.(agingOps); !ok {
		t.Fatalf("filter %T", c.filter)
	}
	if w := c.Window(); w < 10*time.Minute || w > 10*time.Minute+10*time.Minute/7+time.Second {
		t.Fatalf("window %v", w)
	}
	op := [16]byte{1}
	key := []byte("k")
	h := c.opHash(op, key)
	if c.seen(h) {
		t.Fatal("fresh op seen")
	}
	now = now.Add(10 * time.Minute)
	if !c.seen(h) || !c.OpSeen(key, op) {
		t.Fatal("retry after 10 minutes not dismissed")
	}
	now = now.Add(10*time.Minute/7 + time.Second)
	if c.OpSeen(key, op) {
		t.Fatal("op remembered past the window and one epoch")
	}
	if st := c.DedupStats(); st.BitsInUse == 0 || st.EstimatedFPP != 0 {
		t.Fatalf("stats %+v", st)
	}

	// A restart: the log's op ids within the window come back, from
	// their op time.
	restart := func() *fbfCounter {
		ct, err := Vanilla{}.Configure(env, aging, "c", nil)
		if err != nil {
			t.Fatal(err)
		}
		return ct.(*fbfCounter)
	}
	r := restart()
	old, recent := [16]byte{2}, [16]byte{3}
	for _, rec := range []commitlog.Record{
		{HasOp: true, OpID: old, Key: key, OpTime: now.Add(-12 * time.Minute).UnixNano()},
		{HasOp: true, OpID: recent, Key: key, OpTime: now.Add(-9 * time.Minute).UnixNano()},
	} {
		if err := r.Replayed(rec); err != nil {
			t.Fatal(err)
		}
	}
	if r.OpSeen(key, old) || !r.OpSeen(key, recent) {
		t.Fatalf("replayed: old %v, recent %v", r.OpSeen(key, old), r.OpSeen(key, recent))
	}
	now = now.Add(2*time.Minute + 10*time.Minute/7)
	if r.OpSeen(key, recent) {
		t.Fatal("a replayed op id is remembered from the restart, not from its op time")
	}

	// ALTER TABLE: default → aging → default; each new column consults
	// the retired filter.
	bloom := def(`{"class": "fbf"}`)
	ct, err = Vanilla{}.Configure(env, bloom, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := ct.(*fbfCounter)
	op2 := [16]byte{4}
	b.seen(b.opHash(op2, key))
	ct, err = Vanilla{}.Configure(env, aging, "c", b)
	if err != nil {
		t.Fatal(err)
	}
	a := ct.(*fbfCounter)
	if a == b || !a.seen(a.opHash(op2, key)) {
		t.Fatal("after ALTER to aging: the retired filter's op id is not seen")
	}
	op3 := [16]byte{5}
	a.seen(a.opHash(op3, key))
	ct, err = Vanilla{}.Configure(env, bloom, "c", a)
	if err != nil {
		t.Fatal(err)
	}
	back := ct.(*fbfCounter)
	if !back.OpSeen(key, op3) || back.retiredUntil < now.Add(10*time.Minute).UnixNano() {
		t.Fatal("after ALTER back: the aging filter is not consulted through its window")
	}
	now = now.Add(12 * time.Minute)
	if back.OpSeen(key, op3) {
		t.Fatal("the retired aging filter is consulted past its window")
	}
}

func TestAgingRegistered(t *testing.T) {
	_, err := idempotence{}.ParseCQL(map[string]string{"class": "fbf", "filter": "aging", "bits": "64"})
	if !errors.Is(err, errFBFOnly) {
		t.Fatalf("err %v", err)
	}
}
