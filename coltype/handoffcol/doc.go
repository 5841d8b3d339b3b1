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
// Type is also coltype.Coordinated (coordinate.go): the coordinator that
// receives a client's exchange hands it to CoordinateExchange, which sets
// the servers of a retirement notice to the key's natural replicas and
// tries first the replicas the client holds tokens for; a plain driver
// update (`c = c + n` without the payload) goes to CoordinateWrite, which
// acts as a temporary tier-1 participant for the request and retires it
// in the background (a retirement notice) if it may have left a slot or a
// token behind.
//
// Importing the package registers the type (init).
package handoffcol
