// Package coltype is the contract between counter designs and the rest of
// idemkv, and the vocabulary they share.
//
// The vocabulary — TableDef, ColumnDef, Update, Mutation, LeaderRule — is
// what the coordinator, the CQL layer, the schema and the storage engine
// (package replica) exchange; it lives here, below all of them, so that
// none imports the storage engine for its types.
//
// The contract is ColumnType, a small core (name, merge, value), and a set
// of optional capability interfaces that a design implements when it needs
// them (Leading, Configurable, Observer, Replicated, Deleter, ReadPolicy,
// Replayer, Deduplicator, CQL, Exchanger, DirectExchanger, Coordinated,
// ReadContext, Channel, AntiEntropy), detected by type assertion in the manner of
// hashicorp/raft's optional transport capabilities (WithPreVote,
// WithClose). A design registers its type by
// name (Register) from an init function; the replica builds its columns,
// and the CQL layer validates CREATE TABLE and answers DESCRIBE and
// system_schema, from the registry.
//
// The FBF is not a type of its own: it is the `counter` type configured by
// a table option (`WITH idempotence = {'class': 'fbf', ...}`), a
// Configurable type that returns an op-id-deduplicating column instance
// (a Deduplicator) when the option is set. The in-doubt protocol of the
// replica and the coordinator works on any Deduplicator.
//
// The package imports only pure packages (counters, ring, row) and
// commitlog for its payload kinds; it holds no I/O.
package coltype
