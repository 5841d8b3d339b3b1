package coltype

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

var (
	regMu sync.RWMutex
	types = map[string]ColumnType{}
	// exchangeKeys maps an Exchanger's payload key to its type's name.
	exchangeKeys = map[string]string{}
	options      = map[string]TableOption{}
)

// Register adds a column type under its name, for the init functions of
// the packages that bring counter designs. Registering a name twice is an
// error.
func Register(t ColumnType) error {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := types[t.Name()]; dup {
		return fmt.Errorf("coltype: column type %q registered twice", t.Name())
	}
	types[t.Name()] = t
	if x, ok := t.(Exchanger); ok {
		if cur, taken := exchangeKeys[x.PayloadKey()]; !taken || t.Name() < cur {
			exchangeKeys[x.PayloadKey()] = t.Name()
		}
	}
	return nil
}

// ExchangeKeyType reports whether key is the custom payload key of a
// registered Exchanger, and names the type (the first by name when types
// share a key). It is read on every write, where Names and Lookup would sort
// and lock for each type.
func ExchangeKeyType(key string) (typeName string, ok bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	typeName, ok = exchangeKeys[key]
	return typeName, ok
}

// MustRegister is Register for init functions: it panics on a duplicate
// name, a programming error found at start-up.
func MustRegister(t ColumnType) {
	if err := Register(t); err != nil {
		panic(err)
	}
}

// Lookup returns the registered column type of a name.
func Lookup(name string) (ColumnType, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	t, ok := types[name]
	return t, ok
}

// Names lists the registered column types, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return slices.Sorted(maps.Keys(types))
}

// TableOption is a table option a design reads, set in CQL as
// `WITH name = {'class': ..., ...}` (the FBF's idempotence option). It is
// kept in TableDef.Options under its name, as the JSON object ParseCQL
// returns.
type TableOption interface {
	// Name is the option's CQL name.
	Name() string
	// ParseCQL checks the option's CQL map and returns the value a
	// TableDef keeps; its error is what CQL reports (a configuration
	// error).
	ParseCQL(m map[string]string) (string, error)
	// Check validates a kept value of a table (TableDef.Validate).
	Check(d TableDef, value string) error
	// LeaderRule is the counter leader rule a table setting the option
	// asks for, and where it comes from (RuleNone: none).
	LeaderRule(value string) (LeaderRule, RuleSource)
	// Deduplicates reports whether a table setting the option
	// deduplicates counter updates by op id (the coordinator's catch-up
	// and in-doubt paths serve such tables).
	Deduplicates(value string) bool
}

// RegisterOption adds a table option, for the init functions of designs.
func RegisterOption(o TableOption) error {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := options[o.Name()]; dup {
		return fmt.Errorf("coltype: table option %q registered twice", o.Name())
	}
	options[o.Name()] = o
	return nil
}

// LookupOption returns a registered table option.
func LookupOption(name string) (TableOption, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	o, ok := options[name]
	return o, ok
}

// OptionNames lists the registered table options, sorted.
func OptionNames() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return slices.Sorted(maps.Keys(options))
}

func registeredOptions() map[string]TableOption {
	regMu.RLock()
	defer regMu.RUnlock()
	return maps.Clone(options)
}

// TableLeaderRule is the leader rule a table's options ask for (RuleNone:
// none) and whether the table deduplicates op ids.
func TableLeaderRule(d TableDef) (rule LeaderRule, src RuleSource, dedup bool) {
	for _, name := range OptionNames() {
		v, ok := d.Options[name]
		if !ok || v == "" {
			continue
		}
		o, _ := LookupOption(name)
		if o.Deduplicates(v) {
			dedup = true
		}
		if r, s := o.LeaderRule(v); s > src {
			rule, src = r, s
		}
	}
	return rule, src, dedup
}

// CQLTypeOf is the CQL type drivers see for a column type: its CQL
// capability's, else "counter".
func CQLTypeOf(t ColumnType) string {
	if c, ok := t.(CQL); ok {
		return c.CQLType()
	}
	return "counter"
}

// ReadRuleOf is a type's ReadPolicy, else ReadMerge.
func ReadRuleOf(t ColumnType) ReadRule {
	if p, ok := t.(ReadPolicy); ok {
		return p.ReadRule()
	}
	return ReadMerge
}
