package coltype

import "fmt"

// LeaderRule chooses the leader of a counter write among the live replicas.
type LeaderRule int

const (
	// LeaderRandom is Cassandra's rule: a uniformly random live replica in
	// the coordinator's data center (else the first live replica).
	LeaderRandom LeaderRule = iota
	// LeaderFirst is the deterministic rule: the first live replica in ring
	// order, so that a retry meets the same leader while it lives.
	LeaderFirst
)

// String is the rule as ParseLeaderRule reads it.
func (r LeaderRule) String() string {
	if r == LeaderFirst {
		return "first"
	}
	return "random"
}

// ParseLeaderRule reads "random" or "first".
func ParseLeaderRule(s string) (LeaderRule, error) {
	switch s {
	case "random", "cassandra":
		return LeaderRandom, nil
	case "first", "deterministic":
		return LeaderFirst, nil
	}
	return 0, fmt.Errorf("unknown leader rule %q (want random or first)", s)
}

// RuleSource says where a table's leader rule comes from. The rule that
// applies is, in order: the table's own option (RuleTableOption); the
// node's rule when the operator set one (Config.LeaderRuleSet: the
// counter_leader key, or --counter-leader); the counter design's default
// (RuleDesignDefault: FBF tables lead with LeaderFirst, so that a retry
// meets the same filter); the node's default, LeaderRandom.
type RuleSource int

const (
	// RuleNone: the table has no rule of its own.
	RuleNone RuleSource = iota
	// RuleDesignDefault: the rule is its counter design's default.
	RuleDesignDefault
	// RuleTableOption: the table's options set the rule.
	RuleTableOption
)
