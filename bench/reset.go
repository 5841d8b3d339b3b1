package bench

import "github.com/idemkv/idemkv/coltype/borrowcol"

// ModeReset is bench.reset (c reset_counter, the observed-reset counter of
// coltype/resetcol): updated like vanilla (`c = c + ?`), with the op id
// every mode's clients send (package client): a retry after a lost answer
// is dismissed by a leader that applied the first attempt (the cell keeps
// op ids for reset_op_window). Config.ResetSampler adds a sampler that
// reads keys with their reset contexts and DELETEs them with those
// contexts during the run (resetsample.go); the other reset experiments
// are `idemkv experiment reset` (bench/resetexp).
const ModeReset = "reset"

// modeColumnTypes are the column types of the modes whose table is not a
// plain counter column, beyond handoff's.
var modeColumnTypes = map[string]string{ModeReset: "reset_counter", ModeBorrow: borrowcol.TypeName}
