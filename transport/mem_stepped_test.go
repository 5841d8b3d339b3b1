package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkv/idemkv/internal/testseed"
)

// waitQueue waits until the stepped network holds want messages; the
// bound is a safety net, never an assertion about timing.
func waitQueue(t *testing.T, n *MemNetwork, want int) []Queued {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if q := n.Queue(); len(q) == want {
			return q
		}
	}
	t.Fatalf("queue never held %d messages: %v", want, n.Queue())
	return nil
}

func TestSteppedDeliversOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := NewSteppedNetwork(testseed.Seed(t), start, 5*time.Second)
	nodes := memNodes(t, n, tA, tB)
	done := make(chan error, 1)
	go func() {
		resp, err := nodes[0].Request(context.Background(), tB, Message{Type: typX, Body: []byte("hi")})
		if err == nil && string(resp.Body) != "hi" {
			err = errors.New("wrong body " + string(resp.Body))
		}
		done <- err
	}()
	q := waitQueue(t, n, 1)
	if q[0].From != tA || q[0].To != tB || q[0].Kind != KindRequest || q[0].Type != typX {
		t.Fatalf("queued %+v, want a request from A to B", q[0])
	}
	if p := n.PendingRequests(); len(p) != 1 || !p[0].Deadline.Equal(start.Add(5*time.Second)) {
		t.Fatalf("pending %+v, want one request due at start+5s", p)
	}
	if nodes[1].count(typX) != 0 {
		t.Fatal("the handler ran before delivery")
	}
	if !n.Deliver(q[0].Seq) {
		t.Fatal("Deliver: not queued")
	}
	q = waitQueue(t, n, 1)
	if q[0].Kind != KindResponse || q[0].From != tB || q[0].Type != typX {
		t.Fatalf("queued %+v, want B's response", q[0])
	}
	select {
	case err := <-done:
		t.Fatalf("request returned before its response was delivered: %v", err)
	default:
	}
	n.Deliver(q[0].Seq)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSteppedVirtualTimeout(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := NewSteppedNetwork(testseed.Seed(t), start, 5*time.Second)
	nodes := memNodes(t, n, tA, tB)
	done := make(chan error, 1)
	go func() {
		_, err := nodes[0].Request(context.Background(), tB, Message{Type: typX})
		done <- err
	}()
	q := waitQueue(t, n, 1)
	if !n.Drop(q[0].Seq) || len(n.Queue()) != 0 {
		t.Fatal("Drop did not remove the message")
	}
	n.Advance(4 * time.Second)
	if p, ok := n.ExpireNext(); ok {
		t.Fatalf("expired %+v before its deadline", p)
	}
	n.Advance(time.Second)
	if _, ok := n.ExpireNext(); !ok {
		t.Fatal("nothing expired at the deadline")
	}
	err := <-done
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want ErrTimeout wrapping DeadlineExceeded", err)
	}
	if !n.Now().Equal(start.Add(5 * time.Second)) {
		t.Fatalf("Now %v", n.Now())
	}
}

func TestSteppedDuplicate(t *testing.T) {
	n := NewSteppedNetwork(testseed.Seed(t), time.Unix(0, 0), 0)
	nodes := memNodes(t, n, tA, tB)
	if err := nodes[0].Send(context.Background(), tB, Message{Type: typY}); err != nil {
		t.Fatal(err)
	}
	q := waitQueue(t, n, 1)
	if n.Duplicate(q[0].Seq) == 0 {
		t.Fatal("Duplicate failed")
	}
	for _, m := range waitQueue(t, n, 2) {
		n.Deliver(m.Seq)
	}
	for deadline := time.Now().Add(10 * time.Second); nodes[1].count(typY) != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("handler ran %d times, want 2", nodes[1].count(typY))
		}
	}
}

func TestSteppedTimeouts(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := NewSteppedNetwork(testseed.Seed(t), start, 0)
	withTimeout := n.Timeouts(tA)
	ctx, cancel := withTimeout(context.Background(), 5*time.Second)
	defer cancel()
	other, cancelOther := withTimeout(context.Background(), time.Second)
	cancelOther() // a cancelled timer leaves the list
	if other.Err() == nil {
		t.Fatal("cancel did not end the context")
	}
	if p := n.PendingRequests(); len(p) != 1 || p[0].Timer != 5*time.Second || p[0].From != tA {
		t.Fatalf("pending %+v, want the 5 s timer", p)
	}
	n.Advance(4 * time.Second)
	if _, ok := n.ExpireNext(); ok || ctx.Err() != nil {
		t.Fatal("the timer fired before its virtual deadline")
	}
	n.Advance(time.Second)
	if p, ok := n.ExpireNext(); !ok || p.Timer != 5*time.Second {
		t.Fatalf("ExpireNext = %+v, %v; want the timer", p, ok)
	}
	if ctx.Err() == nil || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("ctx %v, cause %v; want ended by DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
	if len(n.PendingRequests()) != 0 {
		t.Fatal("a fired timer is still listed")
	}
}
