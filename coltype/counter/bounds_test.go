package counter

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
)

// TestFBFOptionBounds: every FBF option out of its bounds is refused at
// CREATE/ALTER TABLE (ParseCQL) with an error naming the option and the
// limit, and without allocating the filter.
func TestFBFOptionBounds(t *testing.T) {
	for _, c := range []struct {
		opt, val, want string
	}{
		{"bits", "4294967295", "at most 268435456"},
		{"bits", "99999999999999999999999", "at most 268435456"},
		{"bits", "8", "at least 64"},
		{"hashes", "33", "at most 32"},
		{"hashes", "0", "at least 1"},
		{"filters", "65", "at most 64"},
		{"refresh_period", "1ns", "at least 10ms"},
		{"refresh_period", "25h", "at most 24h0m0s"},
		{"retry_horizon", "25h", "at most 24h0m0s"},
		{"retry_horizon", "-1s", "negative"},
		{"target_fpp", "1e-12", "at least 1e-09"},
		{"target_fpp", "0.6", "at most 0.5"},
		{"target_fpp", "NaN", "(0, 1)"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := idempotence{}.ParseCQL(map[string]string{"class": "fbf", c.opt: c.val})
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), c.opt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %s: err %v, want one naming the option and %q", c.opt, c.val, err, c.want)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("%s = %s: checking it allocated %d bytes", c.opt, c.val, grew)
		}
	}
	// Within each bound, but (N+2)·m over the column's memory.
	_, err := idempotence{}.ParseCQL(map[string]string{"class": "fbf", "bits": "268435456", "filters": "8"})
	if !errors.Is(err, ErrFBFOptionOutOfRange) || !strings.Contains(err.Error(), "256 MiB") {
		t.Errorf("10 filters of 32 MiB: err %v", err)
	}
	// The bounds themselves are accepted.
	for _, m := range []map[string]string{
		{"class": "fbf", "bits": "268435456", "filters": "6"},
		{"class": "fbf", "hashes": "32", "filters": "64", "target_fpp": "1e-9"},
		{"class": "fbf", "retry_horizon": "24h", "refresh_period": "24h"},
		{"class": "fbf", "bits": "64", "target_fpp": "0.5", "refresh_period": "10ms", "retry_horizon": "10ms"},
	} {
		if _, err := (idempotence{}).ParseCQL(m); err != nil {
			t.Errorf("%v: %v", m, err)
		}
	}
}

// TestFBFAdaptationBoundedByMemory: the adaptation may grow N only while
// the column's filters fit in MaxFBFColumnMemory.
func TestFBFAdaptationBoundedByMemory(t *testing.T) {
	o, err := ParseFBFOptions(map[string]string{"class": "fbf", "bits": "268435456"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := o.filterConfig(nil)
	if c.MaxPast != 6 || c.MemoryBytes(c.MaxPast+2) > MaxFBFColumnMemory {
		t.Fatalf("MaxPast %d: the adaptation may take %d bytes", c.MaxPast, c.MemoryBytes(c.MaxPast+2))
	}
	o, _ = ParseFBFOptions(map[string]string{"class": "fbf"}, 5*time.Second)
	if c := o.filterConfig(nil); c.MaxPast != 64 {
		t.Fatalf("defaults: MaxPast %d, want fbf's 64", c.MaxPast)
	}
}

type testEnv struct{}

func (testEnv) Now() time.Time                     { return time.Unix(1e9, 0) }
func (testEnv) CounterID() counters.ID             { return counters.ID{1} }
func (testEnv) CounterWriteTimeout() time.Duration { return 5 * time.Second }
func (testEnv) HostID() counters.ID                { return counters.ID{1} }
func (testEnv) Setting(string) string              { return "" }

// TestStoredFBFOptionsClamped: a stored definition out of the bounds (an
// older version's, or edited by hand) passes Validate and is loaded with
// the values clamped: the filter never takes more than the bounds.
func TestStoredFBFOptionsClamped(t *testing.T) {
	d := coltype.TableDef{ID: 7, Keyspace: "ks", Name: "t",
		Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}},
		Options: map[string]string{IdempotenceOption: `{"class": "fbf", "bits": "4294967295", "filters": "1000", "hashes": "255"}`}}
	if err := d.Validate(); err != nil {
		t.Fatalf("a stored definition out of the bounds: %v", err)
	}
	clamped := strings.Join(FBFClamped(d), "; ")
	for _, w := range []string{`bits = "4294967295"`, `filters = "1000"`, `hashes = "255"`, "256 MiB"} {
		if !strings.Contains(clamped, w) {
			t.Errorf("FBFClamped %q lacks %q", clamped, w)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ct, err := Vanilla{}.Configure(testEnv{}, d, "c", nil)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	f := ct.(*fbfCounter)
	cfg := f.filter.(bloomOps).Config()
	if cfg.Past != MaxFBFFilters || cfg.Hashes != MaxFBFHashes || cfg.MemoryBytes(cfg.MaxPast+2) > MaxFBFColumnMemory {
		t.Fatalf("clamped filter %+v", cfg)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("loading the clamped column allocated %d bytes", grew)
	}
}

func TestFBFMaxMemory(t *testing.T) {
	d := coltype.TableDef{Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}, {Name: "d", Type: "counter"}}}
	if got, want := (idempotence{}).MaxMemory(d, `{"class":"fbf"}`), int64(2*66*(DefaultFBFBits/8)); got != want {
		t.Errorf("defaults, two columns: %d, want %d", got, want)
	}
	if got := (idempotence{}).MaxMemory(d, `{"class":"fbf","bits":"268435456","adaptive":"false"}`); got != 2*4*(1<<25) {
		t.Errorf("2^28 bits, not adaptive: %d", got)
	}
	if got := (idempotence{}).MaxMemory(d, `nope`); got != 0 {
		t.Errorf("invalid: %d", got)
	}
}
