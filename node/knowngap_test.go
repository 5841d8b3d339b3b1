package node

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestFBFSettlementPastWindow runs testdata/scenarios/known_gaps/
// fbf_settlement_past_window.txt, a known gap (docs/fbf.md, "in doubt"):
// an FBF update in doubt at its restarted leader that cannot be settled
// for longer than the filter window (a natural replica of its cell down)
// is kept when it finally is, although another leader counted its retry:
// that leader's filter and its record of the ops it led have forgotten
// the op, and the answers show no other leader. The read at ALL returns
// 21 where 11 were added. Seen in SIGKILL runs of bench overcount, a node
// killed again and again before it could settle. It fails, and is run only
// with IDEMKV_KNOWN_BUGS=1.
func TestFBFSettlementPastWindow(t *testing.T) {
	if os.Getenv("IDEMKV_KNOWN_BUGS") == "" {
		t.Skip("known gap: an update in doubt settled more than a filter window after it finds the other leader's evidence (filter, led ops) forgotten and is kept; IDEMKV_KNOWN_BUGS=1 runs it")
	}
	f := filepath.Join("testdata", "scenarios", "known_gaps", "fbf_settlement_past_window.txt")
	runScript(t, f, newScenario(t, testseed.Seed(t)).do)
}
