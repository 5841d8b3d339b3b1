package exec

import (
	"strings"
	"testing"

	"github.com/idemkv/idemkv/coltype/handoffcol"
	"github.com/idemkv/idemkv/counters/handoff"
	"github.com/idemkv/idemkv/cql/frame"
)

// TestHandoffCounterColumn: a client's exchange through the payload, a
// plain update through the coordinator's participant, SELECT, and the
// statements refused.
func TestHandoffCounterColumn(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.h (k text PRIMARY KEY, c handoff_counter, v counter)`)
	cl := handoff.NewCounter(handoff.ID{7}, 1)
	cl.Add(5)
	for i := 0; !cl.Handed(); i++ {
		if i > 4 {
			t.Fatal("client not handed off")
		}
		view, _ := cl.View(handoff.ID{}, 0).MarshalBinary()
		out, err := h.e.Query(ctx, h.sess, `UPDATE ks.h SET c = c + ? WHERE k = ?`, params(big(1000), text_("a")),
			map[string][]byte{handoffcol.PayloadKey: view})
		if err != nil {
			t.Fatal(err)
		}
		reply, ok := out.Payload[handoffcol.PayloadKey]
		if !ok {
			t.Fatal("no handoff payload in the response")
		}
		r := handoff.NewCounter(handoff.ID{}, 0)
		if err := r.UnmarshalBinary(reply); err != nil {
			t.Fatal(err)
		}
		cl.Merge(r)
	}
	if v, _ := h.value("ks.h", "c", text_("a")); v != 5 {
		t.Fatalf("after the client's handoff: %d, want 5 (the statement's delta is ignored)", v)
	}
	h.query(`UPDATE ks.h SET c = c + 3, v = v + 1 WHERE k = ?`, text_("a"))
	if v, _ := h.value("ks.h", "c", text_("a")); v != 8 {
		t.Fatalf("after a plain update: %d, want 8", v)
	}
	if v, _ := h.value("ks.h", "v", text_("a")); v != 1 {
		t.Fatalf("the vanilla column of the same table: %d, want 1", v)
	}
	if len(h.f.coordinatedWrites) != 1 || h.f.coordinatedWrites[0] != 3 {
		t.Fatalf("coordinator increments %v, want [3]", h.f.coordinatedWrites)
	}
	view, _ := cl.View(handoff.ID{}, 0).MarshalBinary()
	for _, c := range []struct {
		q       string
		payload map[string][]byte
		want    string
	}{
		{`UPDATE ks.h SET c = c - 1 WHERE k = 'a'`, nil, "can only be incremented"},
		{`UPDATE ks.h SET c = c + -1 WHERE k = 'a'`, nil, "can only be incremented"},
		{`DELETE FROM ks.h WHERE k = 'a'`, nil, "cannot be deleted"},
		{`DELETE c FROM ks.h WHERE k = 'a'`, nil, "cannot be deleted"},
		{`UPDATE ks.h SET v = v + 1 WHERE k = 'a'`, map[string][]byte{handoffcol.PayloadKey: view}, "exactly one handoff_counter update"},
		{`UPDATE ks.h SET c = c + 1, v = v + 1 WHERE k = 'a'`, map[string][]byte{handoffcol.PayloadKey: view}, "exactly one handoff_counter update"},
		{`UPDATE ks.h SET c = c + 1 WHERE k = 'a'`, map[string][]byte{handoffcol.PayloadKey: []byte("junk")}, "handoff"},
	} {
		_, err := h.e.Query(ctx, h.sess, c.q, params(), c.payload)
		fe, ok := err.(*frame.Error)
		if !ok || !strings.Contains(fe.Message, c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.q, err, c.want)
		}
	}
	h.query(`DELETE v FROM ks.h WHERE k = 'a'`)
	if v, _ := h.value("ks.h", "c", text_("a")); v != 8 {
		t.Fatalf("after deleting the other column: %d, want 8", v)
	}
}

// TestHandoffCounterClustering: handoff counters in a table with
// clustering columns count per row, through a client's exchanges and
// plain updates.
func TestHandoffCounterClustering(t *testing.T) {
	h := newHarness(t)
	h.setup()
	h.query(`CREATE TABLE ks.hc (k text, d int, c handoff_counter, PRIMARY KEY (k, d))`)
	for _, d := range []int32{1, 2} {
		cl := handoff.NewCounter(handoff.ID{byte(7 + d)}, 1)
		cl.Add(uint64(5 * d))
		for i := 0; !cl.Handed(); i++ {
			if i > 4 {
				t.Fatal("client not handed off")
			}
			view, _ := cl.View(handoff.ID{}, 0).MarshalBinary()
			out, err := h.e.Query(ctx, h.sess, `UPDATE ks.hc SET c = c + 1 WHERE k = 'a' AND d = ?`, params(int_(d)),
				map[string][]byte{handoffcol.PayloadKey: view})
			if err != nil {
				t.Fatal(err)
			}
			r := handoff.NewCounter(handoff.ID{}, 0)
			if err := r.UnmarshalBinary(out.Payload[handoffcol.PayloadKey]); err != nil {
				t.Fatal(err)
			}
			cl.Merge(r)
		}
	}
	h.query(`UPDATE ks.hc SET c = c + 3 WHERE k = 'a' AND d = 2`)
	r := h.rows(`SELECT d, c FROM ks.hc WHERE k = 'a'`)
	if len(r.Rows) != 2 || decodeBig(t, r.Rows[0][1]) != 5 || decodeBig(t, r.Rows[1][1]) != 13 {
		t.Fatalf("rows %v, want d=1: 5, d=2: 13", r.Rows)
	}
}
