package linearize

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

func add(p int, d, call, ret int64) Op {
	return Op{Kind: Add, Delta: d, Call: call, Return: ret, Process: p}
}
func read(p int, v, call, ret int64) Op {
	return Op{Kind: Read, Value: v, Call: call, Return: ret, Process: p}
}

func TestHandMadeHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    []Op
		want bool
	}{
		{"empty", nil, true},
		{"sequential", []Op{add(0, 1, 0, 1), read(0, 1, 2, 3), add(0, 2, 4, 5), read(0, 3, 6, 7)}, true},
		{"read of the initial state", []Op{read(0, 0, 0, 1)}, true},
		{"read of a value never written", []Op{read(0, 1, 0, 1)}, false},
		{"concurrent add seen", []Op{add(0, 1, 0, 10), read(1, 1, 2, 3)}, true},
		{"concurrent add not seen", []Op{add(0, 1, 0, 10), read(1, 0, 2, 3)}, true},
		{"completed add not seen", []Op{add(0, 1, 0, 1), read(1, 0, 2, 3)}, false},
		{"future add seen", []Op{read(1, 1, 0, 1), add(0, 1, 2, 3)}, false},
		// The lecture's Figure 11.1 remark: a read after a read of 1 that
		// returns 0 is not linearizable, even with the add still pending.
		{"reads go backwards", []Op{add(0, 1, 0, 10), read(1, 1, 1, 2), read(1, 0, 3, 4)}, false},
		{"reads go forwards", []Op{add(0, 1, 0, 10), read(1, 0, 1, 2), read(1, 1, 3, 4)}, true},
		{"concurrent reads disagree", []Op{add(0, 1, 0, 10), read(1, 1, 1, 5), read(2, 0, 2, 6)}, true},
		{"touching times are concurrent", []Op{add(0, 1, 0, 5), read(1, 0, 5, 6)}, true},
		{"partial sum of concurrent adds", []Op{add(0, 1, 0, 10), add(1, 2, 0, 10), add(2, 4, 0, 10), read(3, 5, 1, 2)}, true},
		{"impossible sum of concurrent adds", []Op{add(0, 1, 0, 10), add(1, 2, 0, 10), add(2, 4, 0, 10), read(3, 8, 1, 2)}, false},
		// Each read alone is explainable and the reads do not go backwards,
		// yet the first read's 1 must be the long add (the short one is not
		// invoked yet), and the second read must then see both adds: Quick
		// passes it, Check does not.
		{"bounds hold but no order", []Op{add(0, 1, 0, 100), read(1, 1, 10, 20), add(2, 1, 25, 27), read(1, 1, 30, 40)}, false},
		{"negative deltas", []Op{add(0, 5, 0, 1), add(1, -3, 2, 6), read(2, 5, 3, 4), read(2, 2, 7, 8)}, true},
		{"negative deltas, lost", []Op{add(0, 5, 0, 1), add(1, -3, 2, 3), read(2, 5, 4, 5)}, false},
		{"lost update", []Op{add(0, 1, 0, 4), add(1, 1, 1, 5), read(2, 1, 6, 7)}, false},
		{"quiescent windows", []Op{add(0, 1, 0, 1), read(1, 1, 2, 3), add(0, 1, 4, 6), read(1, 1, 5, 7), read(1, 2, 8, 9)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Check(tc.h)
			if err != nil {
				t.Fatal(err)
			}
			if res.Linearizable != tc.want {
				t.Fatalf("Check: linearizable=%v, want %v\n%s", res.Linearizable, tc.want, res.Explain(tc.h))
			}
			if res.Linearizable {
				if err := verifyOrder(tc.h, res.Order, 0); err != nil {
					t.Fatalf("witness: %v", err)
				}
			}
			if v, bad, err := Quick(tc.h); err != nil || (bad && tc.want) {
				t.Fatalf("Quick reports %v (%v) on a linearizable history", v, err)
			}
		})
	}
}

func TestMalformedHistory(t *testing.T) {
	for _, h := range [][]Op{{add(0, 1, 5, 4)}, {{Kind: 9, Call: 0, Return: 1}}} {
		if _, err := Check(h); err == nil {
			t.Errorf("Check accepted %v", h)
		}
		if _, _, err := Quick(h); err == nil {
			t.Errorf("Quick accepted %v", h)
		}
	}
}

func TestBudget(t *testing.T) {
	// Many concurrent adds of distinct powers of two and a read nobody can
	// explain: every subset is a configuration.
	var h []Op
	for i := range 20 {
		h = append(h, add(i, 1<<i, 0, 100))
	}
	h = append(h, read(99, -1, 0, 100))
	_, err := CheckBudget(h, 1000)
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("err %v, want ErrBudget", err)
	}
}

// verifyOrder checks that order is a linearization of h from init.
func verifyOrder(h []Op, order []int, init int64) error {
	if len(order) != len(h) {
		return errors.New("order does not hold every op once")
	}
	pos := make([]int, len(h))
	seen := make([]bool, len(h))
	for k, i := range order {
		if seen[i] {
			return errors.New("order holds an op twice")
		}
		seen[i], pos[i] = true, k
	}
	for a := range h {
		for b := range h {
			if h[a].Return < h[b].Call && pos[a] > pos[b] {
				return errors.New("order breaks real time")
			}
		}
	}
	s := init
	for _, i := range order {
		switch h[i].Kind {
		case Add:
			s += h[i].Delta
		case Read:
			if h[i].Value != s {
				return errors.New("a read does not return the sum before it")
			}
		}
	}
	return nil
}

// bruteForce tries every permutation (small histories only).
func bruteForce(h []Op) bool {
	idx := make([]int, len(h))
	for i := range idx {
		idx[i] = i
	}
	var rec func(k int) bool
	rec = func(k int) bool {
		if k == len(idx) {
			return verifyOrder(h, idx, 0) == nil
		}
		for j := k; j < len(idx); j++ {
			idx[k], idx[j] = idx[j], idx[k]
			if rec(k + 1) {
				return true
			}
			idx[k], idx[j] = idx[j], idx[k]
		}
		return false
	}
	return rec(0)
}

// genHistory simulates procs processes on an atomic counter: each
// operation takes effect at a random point of its interval, so the history
// is linearizable. Then, with probability corrupt, one read is changed.
func genHistory(rng *rand.Rand, procs, opsPerProc int, negative bool, corrupt float64) []Op {
	type pending struct {
		op    Op
		point int64
	}
	var all []pending
	for p := range procs {
		t := int64(rng.IntN(5))
		for range opsPerProc {
			call := t + int64(rng.IntN(3))
			ret := call + 1 + int64(rng.IntN(12))
			o := Op{Call: call, Return: ret, Process: p}
			if rng.IntN(2) == 0 {
				o.Kind, o.Delta = Add, int64(1+rng.IntN(3))
				if negative && rng.IntN(3) == 0 {
					o.Delta = -o.Delta
				}
			} else {
				o.Kind = Read
			}
			all = append(all, pending{o, call*1000 + int64(rng.IntN(int(ret-call)*1000+1))})
			t = ret + 1
		}
	}
	slices.SortStableFunc(all, func(a, b pending) int { return cmp64(a.point, b.point) })
	var s int64
	h := make([]Op, len(all))
	for i, p := range all {
		switch p.op.Kind {
		case Add:
			s += p.op.Delta
		case Read:
			p.op.Value = s
		}
		h[i] = p.op
	}
	rng.Shuffle(len(h), func(i, j int) { h[i], h[j] = h[j], h[i] })
	if rng.Float64() < corrupt {
		for i := range h {
			if h[i].Kind == Read {
				h[i].Value += int64(rng.IntN(5)) - 2
				break
			}
		}
	}
	return h
}

// TestCrossCheck compares Check with brute force on small random histories,
// and Check with Quick on larger ones: a generated-linearizable history must
// pass both, Check's witness must be valid, and a violation Quick reports
// must be one for Check.
func TestCrossCheck(t *testing.T) {
	rng := testseed.Rand(t)
	var agreeBad, quickCaught int
	for iter := range 3000 {
		small := iter%2 == 0
		procs, per := 2+rng.IntN(3), 1+rng.IntN(3)
		if !small {
			procs, per = 2+rng.IntN(6), 5+rng.IntN(40)
		}
		h := genHistory(rng, procs, per, iter%3 == 0, 0.5)
		res, err := Check(h)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if res.Linearizable {
			if err := verifyOrder(h, res.Order, 0); err != nil {
				t.Fatalf("iter %d: witness invalid: %v\n%v", iter, err, h)
			}
		}
		if small && len(h) <= 8 {
			if bf := bruteForce(h); bf != res.Linearizable {
				t.Fatalf("iter %d: Check says %v, brute force %v\n%v", iter, res.Linearizable, bf, h)
			}
		}
		v, bad, err := Quick(h)
		if err != nil {
			t.Fatal(err)
		}
		if bad && res.Linearizable {
			t.Fatalf("iter %d: Quick reports %v on a history Check linearizes\n%v", iter, v, h)
		}
		if !res.Linearizable {
			agreeBad++
			if bad {
				quickCaught++
			}
		}
	}
	if agreeBad == 0 {
		t.Fatal("no corrupted history was non-linearizable: the generator does not exercise violations")
	}
	t.Logf("%d non-linearizable histories, %d of them caught by Quick", agreeBad, quickCaught)
}

// TestLinearizableGenerated: uncorrupted generated histories are always
// linearizable, including long ones that need windows.
func TestLinearizableGenerated(t *testing.T) {
	rng := testseed.Rand(t)
	for iter := range 200 {
		h := genHistory(rng, 2+rng.IntN(7), 20+rng.IntN(60), iter%2 == 0, 0)
		res, err := Check(h)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if !res.Linearizable {
			t.Fatalf("iter %d: a generated linearizable history was rejected:\n%s", iter, res.Explain(h))
		}
		if _, bad, _ := Quick(h); bad {
			t.Fatalf("iter %d: Quick rejects a linearizable history", iter)
		}
	}
}

func TestWindowsCutAtQuiescence(t *testing.T) {
	h := []Op{add(0, 1, 0, 3), read(1, 0, 1, 2), add(0, 1, 4, 6), read(1, 2, 5, 7), read(1, 2, 8, 9)}
	w := windows(h)
	if len(w) != 3 || len(w[0]) != 2 || len(w[1]) != 2 || len(w[2]) != 1 {
		t.Fatalf("windows %v, want [[0 1] [2 3] [4]]", w)
	}
	res, err := Check(append(h, read(2, 1, 10, 11)))
	if err != nil || res.Linearizable {
		t.Fatalf("res %+v, %v: want a violation", res, err)
	}
	if len(res.Window) != 1 || res.Window[0] != 5 || res.Initial != 2 {
		t.Fatalf("violation window %v from %d, want the last read alone from 2", res.Window, res.Initial)
	}
}

func FuzzCheckAgreesWithBruteForce(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h []Op
		for i := 0; i+2 < len(b) && len(h) < 7; i += 3 {
			call := int64(b[i] % 16)
			o := Op{Call: call, Return: call + int64(b[i+1]%8)}
			if b[i+2]&1 == 0 {
				o.Kind, o.Delta = Add, int64(b[i+2]>>1%4)-1
			} else {
				o.Kind, o.Value = Read, int64(b[i+2]>>1%6)-1
			}
			h = append(h, o)
		}
		res, err := Check(h)
		if err != nil {
			t.Fatal(err)
		}
		if bf := bruteForce(h); bf != res.Linearizable {
			t.Fatalf("Check %v, brute force %v: %v", res.Linearizable, bf, h)
		}
		if _, bad, _ := Quick(h); bad && res.Linearizable {
			t.Fatalf("Quick rejects a linearizable history %v", h)
		}
	})
}
