package replica

import "github.com/idemkv/idemkv/coltype"

// FBFStats are the running counts of a replica's op-id-deduplicating
// columns (the FBF counters), summed.
type FBFStats = coltype.DedupStats
