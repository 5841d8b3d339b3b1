package trace

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestTraceTimeUUID(t *testing.T) {
	now := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	a, b := NewTimeUUID(now), NewTimeUUID(now)
	if a == b || a[6]>>4 != 1 || a[8]&0xc0 != 0x80 {
		t.Fatalf("uuids %x %x", a, b)
	}
	if !UUIDTime(a).Equal(now) || !UUIDTime(b).After(UUIDTime(a)) {
		t.Fatalf("times %v %v, want %v then later", UUIDTime(a), UUIDTime(b), now)
	}
}

func TestTraceStoreBounds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := &Store{MaxSessions: 3, MaxEvents: 4, TTL: time.Hour, Now: func() time.Time { return now }}
	ip := net.IPv4(127, 0, 0, 1)
	var ids [][16]byte
	for range 5 {
		s := st.Start(ip, ip, 9042, "QUERY", "Execute CQL3 query", nil)
		ids = append(ids, s.ID)
	}
	if _, ok := st.Get(ids[1]); ok {
		t.Error("the 2nd of 5 sessions is kept with MaxSessions 3")
	}
	if _, ok := st.Get(ids[2]); !ok || len(st.All()) != 3 {
		t.Errorf("kept %d sessions, want the last 3", len(st.All()))
	}

	s := st.Start(ip, ip, 9042, "QUERY", "Execute CQL3 query", nil)
	ctx := With(context.Background(), s)
	if snap, _ := st.Get(s.ID); snap.Duration != -1 {
		t.Errorf("duration %d before Finish", snap.Duration)
	}
	for i := range 6 {
		now = now.Add(time.Millisecond)
		Eventf(ctx, ThreadRequest, "step %d", i)
	}
	Eventf(context.Background(), ThreadRequest, "untraced") // nothing happens
	s.Finish()
	snap, _ := st.Get(s.ID)
	if len(snap.Events) != 4 || snap.Events[0].Activity != "step 0" || snap.Events[1].Elapsed != 2000 || snap.Duration != 6000 {
		t.Errorf("events %+v duration %d", snap.Events, snap.Duration)
	}
	for i := 1; i < len(snap.Events); i++ {
		if !UUIDTime(snap.Events[i-1].ID).Before(UUIDTime(snap.Events[i].ID)) {
			t.Errorf("event ids out of order: %+v", snap.Events)
		}
	}

	now = now.Add(time.Hour)
	if len(st.All()) != 0 {
		t.Errorf("%d sessions past the TTL", len(st.All()))
	}
}
