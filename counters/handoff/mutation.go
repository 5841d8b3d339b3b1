package handoff

// mutation names a deliberate break of one rule of the algorithm. The
// randomized checker's own test sets mut to show that it catches each break;
// it is always mutNone outside that test.
type mutation int

const (
	mutNone                mutation = iota
	mutSkipDiscardSlot              // merge skips discardslot
	mutFillKeepsSlot                // fillslots acquires a token but keeps its slot
	mutSlotTwice                    // createslot does not bump dck
	mutTokenTwice                   // createtoken does not bump sck
	mutSumVectors                   // mergevectors adds instead of taking the max
	mutDiscardTokensEarly           // discardtokens drops a token whose slot is still there
	mutAggregateAddsPeer            // aggregate adds a different-tier peer's vals_j(j)
	mutPaperSameTierSum             // aggregate as Figure 5: adds a same-tier peer's vals_j(j)
	mutCollectWithoutFill           // Collect drops a slot without acquiring the notice's token for it
	mutNoticeWithoutTokens          // a retirement notice carries no tokens
	mutSkipCollect                  // notices are kept but never applied
)

var mut mutation
