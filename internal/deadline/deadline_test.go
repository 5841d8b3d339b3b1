package deadline

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

type key string

// fakeClock is a Timeouts' clock that tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newFake(d time.Duration) (*Timeouts, *fakeClock) {
	clk := &fakeClock{t: time.Now()}
	t := New(d)
	t.now = clk.now
	return t, clk
}

// TestDeadlineRoundedUp checks, at random clock readings, that a
// context's deadline is never before the timeout and late by one grain at
// most, and that contexts of one grain share their Done channel while
// those of the next grain do not.
func TestDeadlineRoundedUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 1))
	const d = 5 * time.Second
	ts, clk := newFake(d)
	grain := time.Duration(ts.grain)
	if grain != d>>grainShift {
		t.Fatalf("grain %v, want %v", grain, d>>grainShift)
	}
	base := clk.t
	for i := range 1000 {
		clk.t = base.Add(time.Duration(i) * time.Hour).Add(time.Duration(rng.Int64N(int64(time.Minute))))
		ctx := ts.Detached(context.Background())
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		want := clk.t.Add(d)
		if dl.Before(want) || dl.Sub(want) > grain {
			t.Fatalf("now %v: deadline %v, want in [%v, %v]", clk.t, dl, want, want.Add(grain))
		}
		// The same grain shares the context's channel...
		clk.t = time.Unix(0, dl.UnixNano()-int64(d)-1)
		if same := ts.Detached(context.Background()); same.Done() != ctx.Done() {
			t.Fatalf("a deadline in the same grain got its own context")
		}
		// ... the next does not.
		clk.t = time.Unix(0, dl.UnixNano()-int64(d)+1)
		next := ts.Detached(context.Background())
		if next.Done() == ctx.Done() {
			t.Fatalf("a deadline in the next grain shares the previous one's context")
		}
		if ndl, _ := next.Deadline(); ndl.Sub(dl) != grain {
			t.Fatalf("next grain's deadline %v, want %v", ndl, dl.Add(grain))
		}
	}
}

// TestEndsAtDeadline checks that a context ends with DeadlineExceeded once
// its deadline passes, with the cause context.Cause reports.
func TestEndsAtDeadline(t *testing.T) {
	ts := New(time.Millisecond)
	ctx, ok := ts.Context(context.WithValue(context.Background(), key("k"), "v"))
	if !ok {
		t.Fatal("a parent that cannot be cancelled was refused")
	}
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("Err %v, Cause %v; want DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
	if ctx.Value(key("k")) != "v" {
		t.Fatal("the parent's value is lost")
	}
}

// TestRootCancellation checks that the contexts below a root end when it is
// cancelled, theirs and their own children's, with the request's values,
// and that contexts below a different cancellation are refused.
func TestRootCancellation(t *testing.T) {
	ts := New(time.Hour)
	conn, cancel := context.WithCancel(context.Background())
	r := Root(conn)
	req := context.WithValue(r, key("req"), 1)
	ctx, ok := ts.Context(req)
	if !ok {
		t.Fatal("a context below a root was refused")
	}
	other, ok := ts.Context(context.WithValue(r, key("req"), 2))
	if !ok || other.Done() != ctx.Done() {
		t.Fatal("two requests of one root and one grain do not share their context")
	}
	if ctx.Value(key("req")) != 1 || other.Value(key("req")) != 2 {
		t.Fatal("a request's values are not its own")
	}
	if _, ok := ts.Context(context.Background()); !ok {
		t.Fatal("Background refused")
	}
	if bg := ts.Detached(req); bg.Done() == ctx.Done() {
		t.Fatal("a detached context follows the root's cancellation")
	}
	own, ownCancel := context.WithCancel(req)
	defer ownCancel()
	if _, ok := ts.Context(own); ok {
		t.Fatal("a context with a cancellation of its own below the root was accepted")
	}
	if _, ok := ts.Context(conn); ok {
		t.Fatal("a cancellable context without a root was accepted")
	}
	child, childCancel := context.WithCancel(ctx)
	defer childCancel()
	if ctx.Err() != nil {
		t.Fatal("ended early")
	}
	cancel()
	<-ctx.Done()
	<-child.Done()
	if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("Err %v and child's %v, want Canceled", ctx.Err(), child.Err())
	}
}

// TestDetachedIgnoresParent checks that a detached context outlives its
// parent's cancellation and ignores its deadline, keeping its values.
func TestDetachedIgnoresParent(t *testing.T) {
	ts := New(time.Hour)
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), key("k"), "v"), time.Nanosecond)
	cancel()
	ctx := ts.Detached(parent)
	if ctx.Err() != nil {
		t.Fatalf("detached context ended with its parent: %v", ctx.Err())
	}
	if dl, _ := ctx.Deadline(); time.Until(dl) < 59*time.Minute {
		t.Fatalf("deadline %v is the parent's, not an hour away", dl)
	}
	if ctx.Value(key("k")) != "v" {
		t.Fatal("the parent's value is lost")
	}
}

// BenchmarkContext compares a shared deadline context below a root with
// the context.WithTimeout it replaces.
func BenchmarkContext(b *testing.B) {
	conn, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := Root(conn)
	b.Run("shared", func(b *testing.B) {
		ts := New(5 * time.Second)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctx, _ := ts.Context(r)
				_ = ctx.Done()
			}
		})
	})
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctx, cancel := context.WithTimeout(r, 5*time.Second)
				_ = ctx.Done()
				cancel()
			}
		})
	})
}
