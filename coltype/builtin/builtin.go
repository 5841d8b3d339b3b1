// Package builtin registers the counter designs idemkv ships: importing it
// (as package node does) brings the vanilla, legacy and FBF counters
// (coltype/counter), handoff counters (coltype/handoffcol), observed-reset
// counters (coltype/resetcol) and Borrow-Counters (coltype/borrowcol). The
// storage engine, the coordinator and the CQL layer import no design: they
// learn the types from the coltype registry.
package builtin

import (
	// The counter-context designs: counter, legacy_counter, the FBF.
	_ "github.com/idemkv/idemkv/coltype/counter"
	// Borrow-Counters.
	_ "github.com/idemkv/idemkv/coltype/borrowcol"
	// Handoff counters.
	_ "github.com/idemkv/idemkv/coltype/handoffcol"
	// Observed-reset counters.
	_ "github.com/idemkv/idemkv/coltype/resetcol"
)
