package cellcache

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/idemkv/idemkv/internal/testseed"
)

type val struct{ k string }

func acquire(c *Cache, ns uint64, k string) (Handle, bool) {
	return c.Acquire(ns, k, func() any { return &val{k} })
}

// TestLenNeverExceedsBound runs random acquires and releases on a cache of
// a few entries: with nothing pinned the cache never holds more than its
// bound, and while some are pinned, never more than the bound plus them.
func TestLenNeverExceedsBound(t *testing.T) {
	rng := testseed.Rand(t)
	for _, bound := range []int{1, 2, 5} {
		c := NewEntries(bound)
		ns := NewNamespace()
		var held []Handle
		for i := range 5000 {
			switch {
			case len(held) > 0 && rng.IntN(2) == 0:
				j := rng.IntN(len(held))
				held[j].Release()
				held = append(held[:j], held[j+1:]...)
			default:
				k := fmt.Sprint(rng.IntN(20))
				h, _ := acquire(c, ns, k)
				if got := h.Value().(*val).k; got != k {
					t.Fatalf("op %d: key %s has the value of %s", i, k, got)
				}
				if rng.IntN(3) == 0 {
					h.Release()
				} else {
					held = append(held, h)
				}
			}
			pinned := map[*entry]bool{}
			for _, h := range held {
				pinned[h.e] = true
			}
			if n := c.Len(); n > bound+len(pinned) {
				t.Fatalf("op %d: %d entries, bound %d with %d pinned", i, n, bound, len(pinned))
			}
			if len(held) == 0 && c.Len() > bound {
				t.Fatalf("op %d: %d entries, bound %d", i, c.Len(), bound)
			}
		}
		for _, h := range held {
			h.Release()
		}
		if n := c.Len(); n > bound {
			t.Fatalf("bound %d: %d entries after every release", bound, n)
		}
	}
}

// TestPinnedIsShared: a pinned entry is never evicted, and every Acquire
// of its key gets the same value until it is released and evicted.
func TestPinnedIsShared(t *testing.T) {
	c := NewEntries(1)
	ns := NewNamespace()
	a, created := acquire(c, ns, "a")
	if !created {
		t.Fatal("first acquire not a miss")
	}
	for i := range 10 {
		h, _ := acquire(c, ns, fmt.Sprint(i))
		h.Release()
	}
	a2, created := acquire(c, ns, "a")
	if created || a2.Value() != a.Value() {
		t.Fatal("a pinned entry was evicted")
	}
	a.Release()
	a2.Release()
	h, _ := acquire(c, ns, "b")
	h.Release()
	a3, created := acquire(c, ns, "a")
	if !created || a3.Value() == a.Value() {
		t.Fatal("an unpinned entry over the bound was kept")
	}
	a3.Release()
	if st := c.Stats(); st.Evictions == 0 || st.Entries != 1 || st.Pinned != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLRUOrder: the least recently used (pinned) entry goes first.
func TestLRUOrder(t *testing.T) {
	c := NewEntries(2)
	ns := NewNamespace()
	for _, k := range []string{"a", "b", "a", "c"} {
		h, _ := acquire(c, ns, k)
		h.Release()
	}
	if _, ok := c.Peek(ns, "b"); ok {
		t.Fatal("b, the least recently used, is still cached")
	}
	for _, k := range []string{"a", "c"} {
		h, ok := c.Peek(ns, k)
		if !ok {
			t.Fatalf("%s was evicted", k)
		}
		h.Release()
	}
}

// TestNamespacesAndRemove: namespaces keep keys apart; Remove makes the
// next Acquire create a new value while holders keep theirs.
func TestNamespacesAndRemove(t *testing.T) {
	c := New(0)
	n1, n2 := NewNamespace(), NewNamespace()
	a, _ := acquire(c, n1, "k")
	b, created := acquire(c, n2, "k")
	if !created || a.Value() == b.Value() {
		t.Fatal("two namespaces share an entry")
	}
	b.Release()
	c.Remove(n1, "k")
	a2, created := acquire(c, n1, "k")
	if !created || a2.Value() == a.Value() {
		t.Fatal("Remove kept the entry")
	}
	a.Release() // a detached entry: not linked back
	a2.Release()
	if n := c.Len(); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
	if got := len(c.Values(n1)); got != 1 {
		t.Fatalf("%d values in n1, want 1", got)
	}
}

// TestByteBound: a cache bounded by bytes evicts by the entries' sizes.
func TestByteBound(t *testing.T) {
	c := New(10 * (EntryOverhead + 1 + 100))
	ns := NewNamespace()
	for i := range 100 {
		h, _ := acquire(c, ns, fmt.Sprint(i%10))
		h.SetSize(100)
		h.Release()
		if st := c.Stats(); st.Cost > c.Bound() {
			t.Fatalf("cost %d over bound %d", st.Cost, c.Bound())
		}
	}
	h, _ := acquire(c, ns, "big")
	h.SetSize(5 * (EntryOverhead + 100))
	h.Release()
	if st := c.Stats(); st.Cost > c.Bound() || st.Entries > 5 {
		t.Fatalf("stats %+v over bound %d", st, c.Bound())
	}
}

func TestConcurrent(t *testing.T) {
	c := NewEntries(4)
	ns := NewNamespace()
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := fmt.Sprint((i + g) % 8)
				h, _ := c.Acquire(ns, k, func() any { return new(int) })
				mu.Lock()
				*h.Value().(*int)++
				counts[k]++
				mu.Unlock()
				h.Release()
			}
		}()
	}
	wg.Wait()
	if n := c.Len(); n > 4 {
		t.Fatalf("%d entries, bound 4", n)
	}
}

func TestParseSize(t *testing.T) {
	for v, want := range map[string]int64{"": DefaultBytes(), "0": DefaultBytes(), "-1": 0, "3": 3 << 20} {
		got, err := ParseSize(v)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	if _, err := ParseSize("x"); err == nil {
		t.Error("ParseSize(x): no error")
	}
}

// TestGetPut: unpinned values set by Put are found by Get (hits and misses
// counted), replace each other, are evicted least recently used first
// (Get marks an entry used), count their size against a byte bound, and
// go with DropNamespace, which leaves other namespaces and pinned values.
func TestGetPut(t *testing.T) {
	c := NewEntries(2)
	a, b := NewNamespace(), NewNamespace()
	if _, ok := c.Get(a, "x"); ok {
		t.Fatal("Get of an empty cache found a value")
	}
	c.Put(a, "x", 1, 0)
	c.Put(a, "x", 2, 0)
	c.Put(b, "x", 3, 0)
	if v, ok := c.Get(a, "x"); !ok || v != 2 {
		t.Fatalf("Get(a, x) = %v, %v; want 2", v, ok)
	}
	c.Put(a, "y", 4, 0) // evicts (b, x), the least recently used
	if _, ok := c.Get(b, "x"); ok {
		t.Fatal("the least recently used entry was not evicted")
	}
	if st := c.Stats(); st.Entries != 2 || st.Hits != 1 || st.Misses != 2 || st.Evictions != 1 {
		t.Fatalf("stats %+v: want 2 entries, 1 hit, 2 misses, 1 eviction", st)
	}
	h, _ := acquire(c, a, "z") // pinned: evicts (a, x)
	c.Put(b, "w", 5, 0)
	c.DropNamespace(a)
	if _, ok := c.Get(a, "y"); ok {
		t.Fatal("DropNamespace left an entry of its namespace")
	}
	if v, ok := c.Get(b, "w"); !ok || v != 5 {
		t.Fatalf("DropNamespace removed another namespace's entry: %v, %v", v, ok)
	}
	if h.Value().(*val).k != "z" {
		t.Fatal("a pinned value changed")
	}
	h.Release()
	if c.Len() != 1 {
		t.Fatalf("%d entries after DropNamespace and the release; want 1", c.Len())
	}

	by := New(1 << 20)
	by.Put(a, "k", 1, 1000)
	by.Put(a, "k", 1, 10)
	if st := by.Stats(); st.Cost != EntryOverhead+1+10 {
		t.Fatalf("cost %d after a Put that replaced a value; want %d", st.Cost, EntryOverhead+1+10)
	}
}

// TestKeysCopiedWhenStored: a key that aliases a buffer its caller reuses
// (a view of a request's bytes) is copied when Acquire or Put stores a new
// entry, so changing the buffer afterwards changes neither entry's key.
func TestKeysCopiedWhenStored(t *testing.T) {
	c := New(1 << 20)
	buf := []byte("key-a")
	view := func() string { return unsafe.String(unsafe.SliceData(buf), len(buf)) }
	h, created := c.Acquire(1, view(), func() any { return "a" })
	h.Release()
	copy(buf, "key-b")
	c.Put(1, view(), "b", 0)
	copy(buf, "key-c")
	for k, want := range map[string]string{"key-a": "a", "key-b": "b"} {
		if v, ok := c.Get(1, k); !created || !ok || v != want {
			t.Errorf("Get(%q) = %v %v, want %q", k, v, ok, want)
		}
	}
	if c.Len() != 2 {
		t.Errorf("%d entries, want 2", c.Len())
	}
}
