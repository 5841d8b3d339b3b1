// Package builtin registers the counter designs idemkv ships: importing it
// (as package node does) brings the vanilla, legacy and FBF counters
// (coltype/counter) and handoff counters (coltype/handoffcol). The storage
// engine, the coordinator and the CQL layer import no design: they learn
// the types from the coltype registry.
package builtin

import (
	// The counter-context designs: counter, legacy_counter, the FBF.
	_ "github.com/idemkv/idemkv/coltype/counter"
	// Handoff counters.
	_ "github.com/idemkv/idemkv/coltype/handoffcol"
)
