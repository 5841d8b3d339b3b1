package resetcol

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/idemkv/idemkv/counters/reset"
	"github.com/idemkv/idemkv/internal/testseed"
)

// replicas is three replicas' blobs of one map cell and a channel helper
// that delivers every op at once, in order, and acknowledges it.
type replicas struct {
	t   *testing.T
	ids []reset.ID
	bs  []*Blob
}

func newReplicas(t *testing.T) *replicas {
	r := &replicas{t: t, ids: []reset.ID{id(1), id(2), id(3)}}
	for _, self := range r.ids {
		b := &Blob{State: reset.NewMap(self), Out: map[reset.ID]*reset.Outbox{}, In: map[reset.ID]*reset.Inbox{}}
		for _, p := range r.ids {
			if p != self {
				b.Out[p], b.In[p] = &reset.Outbox{}, &reset.Inbox{}
			}
		}
		r.bs = append(r.bs, b)
	}
	return r
}

// send delivers an op replica i generated (and applied) to the others,
// and acknowledges it, as a healed ring does.
func (r *replicas) send(i int, op reset.Op) {
	r.t.Helper()
	p, err := op.MarshalBinary()
	if err != nil {
		r.t.Fatal(err)
	}
	r.bs[i].Gen++
	r.bs[i].Version++
	for j, b := range r.bs {
		if j == i {
			continue
		}
		e := r.bs[i].Out[r.ids[j]].Push(EncodeChannelOp(p, nil))
		in := b.In[r.ids[i]]
		in.Receive(e)
		for {
			q, ok := in.Next()
			if !ok {
				break
			}
			o, _, err := DecodeChannelOp(q)
			if err != nil {
				r.t.Fatal(err)
			}
			if err := b.State.Apply(o); err != nil {
				r.t.Fatal(err)
			}
		}
		b.Version++
		r.bs[i].Out[r.ids[j]].Ack(in.Delivered())
	}
}

// sizes returns the bytes of each replica's stored cell.
func (r *replicas) sizes() []int {
	r.t.Helper()
	var out []int
	for _, b := range r.bs {
		enc, err := EncodeCell(b)
		if err != nil {
			r.t.Fatal(err)
		}
		if b.Pending() != 0 {
			r.t.Fatalf("ops pending after delivery")
		}
		out = append(out, len(enc))
	}
	return out
}

// TestMapCellForgetsResetKeys: a map cell of n keys, each incremented by
// every replica (weights 1–5, random leaders), then every key reset (one
// DELETE m['key'] per key, or one DELETE m, led by random replicas) and
// every op delivered: no replica's cell holds a key, and its bytes do not
// depend on n (what is left is C and the channel state). IDEMKV_RESETMAP_KEYS
// sets n (default 1,000; the figure in docs/reset-counter.md is 10,000).
func TestMapCellForgetsResetKeys(t *testing.T) {
	rng := testseed.Rand(t)
	n := 1000
	if v := os.Getenv("IDEMKV_RESETMAP_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("IDEMKV_RESETMAP_KEYS=%q", v)
		}
	}
	var small []int
	for _, perKey := range []bool{false, true} {
		r := newReplicas(t)
		for k := range n {
			key := fmt.Sprintf("k%05d", k)
			for i := range r.bs {
				op, err := r.bs[i].State.Inc(key, int64(1+rng.IntN(5)))
				if err != nil {
					t.Fatal(err)
				}
				r.send(i, op)
			}
		}
		before := r.sizes()
		if perKey {
			for k := range n {
				i := rng.IntN(3)
				op, err := r.bs[i].State.ResetKey(fmt.Sprintf("k%05d", k))
				if err != nil {
					t.Fatal(err)
				}
				r.send(i, op)
			}
		} else {
			i := rng.IntN(3)
			op, err := r.bs[i].State.ResetAll()
			if err != nil {
				t.Fatal(err)
			}
			p, err := op.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the DELETE m op of %d keys: %d bytes", n, len(p))
			r.send(i, op)
		}
		after := r.sizes()
		for i, b := range r.bs {
			if k := b.State.Keys(); len(k) != 0 {
				t.Fatalf("replica %d still holds %d keys after every key was reset and delivered", i+1, len(k))
			}
		}
		how := "one DELETE m"
		if perKey {
			how = fmt.Sprintf("%d DELETE m['key']", n)
		}
		t.Logf("%d keys × 3 replicas: cell bytes per replica %v; after %s, delivered: %v", n, before, how, after)
		small = append(small, after...)
	}
	for _, s := range small {
		if s > 200 {
			t.Errorf("a fully reset map cell keeps %d bytes (want ≤ 200, independent of the keys)", s)
		}
	}
}
