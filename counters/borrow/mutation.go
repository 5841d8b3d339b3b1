package borrow

// mutation names a deliberate break of one rule. The randomized checker's
// TestRandomCatchesBrokenRules sets mut to show that the checker catches each
// break; it is always mutNone outside that test.
type mutation int

const (
	mutNone                 mutation = iota
	mutUnrestrictedTransfer          // Transfer takes frozen dots of any creator (the paper's formula)
	mutJoinIgnoresContext            // Join keeps every dot of either side (a plain union)
	mutTransferActive                // Transfer also takes active dots
	mutCreateNotIdempotent           // Create makes a new dot on a repeated request
)

var mut mutation
