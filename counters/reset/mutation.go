package reset

// mutation names a deliberate break of one rule of Algorithm 1. The
// randomized checker's own test sets mut to show that it catches each
// break; it is always mutNone outside that test.
type mutation int

const (
	mutNone              mutation = iota
	mutNoGenerationFix            // the inc effector always stores (p, 0, c): no start, no missing-entry case (§3 step 3 left out)
	mutNoAbsentFix                // only a start increment gets n = p − w; one arriving after its entry was deleted gets n = 0
	mutNoStartFix                 // a start increment arriving where the entry exists gets n = 0
	mutDeleteEager                // entries are deleted on p = n without waiting for c ≤ C[j] (§3 step 4 left out)
	mutLiteralI                   // the inc effector's last lines read with i: M.remove(i), C[i] ← c
	mutResetDropsPending          // a reset for a missing entry is dropped even when c > C[j]
	mutResetKeepsAll              // a reset for a missing entry is kept even when c ≤ C[j]
)

var mut mutation
