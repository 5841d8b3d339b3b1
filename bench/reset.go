package bench

import "github.com/idemkv/idemkv/coltype/borrowcol"

// ModeReset is bench.reset (c reset_counter, the observed-reset counter of
// coltype/resetcol): updated like vanilla (`c = c + ?`, no op id, so a
// client's retry after a timeout may count twice, as for vanilla); the
// mode shows what the design's per-op channel costs in latency and
// throughput. DELETE and the reset experiments are `idemkv experiment
// reset` (bench/resetexp).
const ModeReset = "reset"

// modeColumnTypes are the column types of the modes whose table is not a
// plain counter column, beyond handoff's.
var modeColumnTypes = map[string]string{ModeReset: "reset_counter", ModeBorrow: borrowcol.TypeName}
