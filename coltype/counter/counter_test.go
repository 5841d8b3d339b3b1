package counter

import (
	"testing"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/row"
)

func TestRegistered(t *testing.T) {
	for _, name := range []string{"counter", "legacy_counter"} {
		if _, ok := coltype.Lookup(name); !ok {
			t.Errorf("%s is not registered", name)
		}
	}
	if _, ok := coltype.LookupOption(IdempotenceOption); !ok {
		t.Errorf("the %s option is not registered", IdempotenceOption)
	}
}

func TestIdempotenceOption(t *testing.T) {
	o := idempotence{}
	if _, err := o.ParseCQL(map[string]string{}); err == nil {
		t.Error("no class: no error")
	}
	if _, err := o.ParseCQL(map[string]string{"class": "bloom"}); err == nil {
		t.Error("class bloom: no error")
	}
	v, err := o.ParseCQL(map[string]string{"class": "fbf", "leader": "random"})
	if err != nil {
		t.Fatal(err)
	}
	if rule, src := o.LeaderRule(v); rule != coltype.LeaderRandom || src != coltype.RuleTableOption {
		t.Errorf("leader rule %v from %v", rule, src)
	}
	if rule, src := o.LeaderRule(`{"class": "fbf"}`); rule != coltype.LeaderFirst || src != coltype.RuleDesignDefault {
		t.Errorf("default leader rule %v from %v", rule, src)
	}
	if !o.Deduplicates(v) {
		t.Error("an FBF table does not deduplicate")
	}
}

// FuzzCounterCell feeds arbitrary bytes to the counter cell decoder as the
// column types use it: Check, Value and Merge agree on what decodes, and a
// cell merged with itself is itself.
func FuzzCounterCell(f *testing.F) {
	v, err := counters.NewGlobal(counters.ID{1}, 3, 7).MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v)
	l, err := counters.NewLegacyDelta(counters.ID{2}, -4).MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(l)
	f.Add([]byte{})
	f.Add([]byte{0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		cell := row.Cell{Column: "c", Value: b, Timestamp: 1}
		cerr := Vanilla{}.Check(b)
		_, verr := Vanilla{}.Value(cell)
		m, merr := Vanilla{}.Merge(cell, cell)
		if (cerr == nil) != (verr == nil) || (cerr == nil) != (merr == nil) {
			t.Fatalf("Check %v, Value %v, Merge %v disagree", cerr, verr, merr)
		}
		if cerr != nil {
			return
		}
		got, err := Vanilla{}.Value(m)
		if err != nil {
			t.Fatalf("merged cell does not decode: %v", err)
		}
		if want, _ := (Vanilla{}).Value(cell); got != want && !hasLocal(b) {
			t.Fatalf("a cell merged with itself reads %d, not %d", got, want)
		}
	})
}

// hasLocal reports whether a context holds local (legacy) shards, which
// sum when merged: a legacy cell merged with itself doubles them.
func hasLocal(b []byte) bool {
	ctx, err := counters.Decode(b)
	if err != nil {
		return false
	}
	m := ctx.Merge(ctx)
	return m.Value() != ctx.Value()
}
