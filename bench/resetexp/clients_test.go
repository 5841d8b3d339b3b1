package resetexp

import (
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestClientState: a replica's op ids grow with the distinct clients within
// the op window (one per client at every replica, kept in memory beside the
// cell) and are gone once the window passed (only the last increment's is
// left); the stored cell does not grow with them (it holds the op ids of
// its last write only), and the counter entries stay bounded by the
// replicas whatever the clients; every replica reads what was issued
// (checked by ClientState).
func TestClientState(t *testing.T) {
	seed := testseed.Seed(t)
	for _, keys := range []int{1, 4} {
		rows, err := ClientState(t.TempDir(), keys, []int{1, 10, 100}, seed)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			t.Logf("%s keys %d clients %d: %.0f B within the window (%.0f op ids), %.0f B after (%.0f), %.1f entries",
				r.Type, r.Keys, r.Clients, r.Within, r.RecentWithin, r.After, r.RecentAfter, r.Entries)
			if r.RecentWithin != float64(r.Clients) || r.RecentAfter != 1 {
				t.Errorf("%d clients: %.1f op ids within the window, %.1f after; want %d and 1", r.Clients, r.RecentWithin, r.RecentAfter, r.Clients)
			}
			if r.Entries > float64(3*keys) {
				t.Errorf("%d clients: %.1f counter entries, more than 3 replicas × %d keys", r.Clients, r.Entries, keys)
			}
		}
		// The stored cell is the entries and clocks of the replicas that
		// led, within the window as after it: per entry, 100 clients leave
		// no more than 10 do. (Compared whole, the test failed whenever 10
		// clients happened to be led by fewer replicas than 100: seed
		// 1795774678246825182, 4 entries against 12.) When the cell held
		// every op id of the window it grew by about 25 bytes per client.
		for _, within := range []bool{true, false} {
			perEntry := func(r ClientStateRow) float64 {
				if within {
					return r.Within / r.Entries
				}
				return r.After / r.Entries
			}
			if perEntry(rows[2]) > perEntry(rows[1])*3/2 {
				t.Errorf("bytes per entry (within the window: %v): %.0f with 100 clients, %.0f with 10; want about the same: %+v",
					within, perEntry(rows[2]), perEntry(rows[1]), rows)
			}
		}
	}
}
