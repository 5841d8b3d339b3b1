package resetexp

import (
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestClientState: a cell's op ids grow with the distinct clients within
// the op window (one per client at every replica) and are gone once the
// window passed (only the last increment's is left); the counter entries
// stay bounded by the replicas whatever the clients; every replica reads
// what was issued (checked by ClientState).
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
		// Within the window: at least the 16-byte op id per client. After
		// it: what stays is the entries and clocks of the replicas that
		// led, not the clients: per entry, 100 clients leave no more than
		// 10 do. (Compared whole, the test failed whenever 10 clients
		// happened to be led by fewer replicas than 100: seed
		// 1795774678246825182, 4 entries against 12.)
		perEntry := func(r ClientStateRow) float64 { return r.After / r.Entries }
		if rows[2].Within < rows[1].Within+90*16 || perEntry(rows[2]) > perEntry(rows[1])*3/2 || rows[2].After > rows[2].Within/5 {
			t.Errorf("bytes: %+v; want growth of at least 16 B per client within the window, little after", rows)
		}
	}
}
