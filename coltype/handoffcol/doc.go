// Package handoffcol is the handoff counter column type, `handoff_counter`
// (counters/handoff): the replicas of a key are the counter's tier-0
// nodes, clients (and coordinators acting for plain driver updates) are
// tier 1. The cell format, the merge and the retirement notices are
// documented on TypeName.
//
// Type is the registered, stateless value; Configure gives each table
// column a *Column holding this replica's states of its cells, which the
// replica reaches through the coltype capabilities Exchanger (client
// exchanges and anti-entropy answers), AntiEntropy (the coordinator's
// sync rounds), Replicated (a read repair or hint is merged by exchange,
// never stored as this replica's state), Deleter (refused), ReadPolicy (no
// read repair), CQL (increments only) and Replayer.
//
// Importing the package registers the type (init).
package handoffcol
