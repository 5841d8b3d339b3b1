package counter

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idemkv/idemkv/coltype"
)

// checkTimeout is the counter write timeout options are checked with
// (Cassandra's default counter_write_request_timeout); it only sets
// defaults.
const checkTimeout = 5 * time.Second

// idempotence is the FBF's table option, `WITH idempotence = {'class':
// 'fbf', ...}`: it makes the table's `counter` columns FBF counters.
type idempotence struct{}

// Name implements coltype.TableOption.
func (idempotence) Name() string { return IdempotenceOption }

// ParseCQL implements coltype.TableOption: the class must be fbf and the
// sub-options valid.
func (idempotence) ParseCQL(m map[string]string) (string, error) {
	class, ok := m["class"]
	switch {
	case !ok:
		return "", cqlError(fmt.Sprintf("Missing sub-option 'class' for the '%s' option", IdempotenceOption))
	case !strings.EqualFold(class, "fbf"):
		return "", cqlError(fmt.Sprintf("Unknown idempotence class '%s' (fbf)", class))
	}
	if _, err := ParseFBFOptions(m, checkTimeout); err != nil {
		return "", err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("idempotence: %w", err)
	}
	return string(b), nil
}

// Check implements coltype.TableOption. A stored definition whose values
// are out of their bounds passes: it is loaded with them clamped (see
// TableFBF); ParseCQL refuses them in a statement.
func (idempotence) Check(d coltype.TableDef, _ string) error {
	_, _, _, err := tableFBF(d, checkTimeout)
	return err
}

// LeaderRule implements coltype.TableOption: an FBF table leads with the
// first live replica, so that a retry meets the same filter, unless its
// leader sub-option says otherwise.
func (idempotence) LeaderRule(value string) (coltype.LeaderRule, coltype.RuleSource) {
	o, on, _, err := tableFBF(coltype.TableDef{Options: map[string]string{IdempotenceOption: value}}, checkTimeout)
	if err != nil || !on {
		return 0, coltype.RuleNone
	}
	if o.Leader != "" {
		if rule, err := coltype.ParseLeaderRule(o.Leader); err == nil {
			return rule, coltype.RuleTableOption
		}
	}
	return coltype.LeaderFirst, coltype.RuleDesignDefault
}

// Deduplicates implements coltype.TableOption.
func (idempotence) Deduplicates(value string) bool {
	_, on, _, err := tableFBF(coltype.TableDef{Options: map[string]string{IdempotenceOption: value}}, checkTimeout)
	return on && err == nil
}

// cqlError is an error worded as Cassandra words its CQL errors.
type cqlError string

func (e cqlError) Error() string { return string(e) }

// MaxMemory is the most memory, in bytes, the option value makes one node
// allocate for table d: the filters of each of its counter columns at the
// largest N the adaptation may reach ((MaxPast+2)·m/8 each; see
// MaxFBFColumnMemory), or with 'filter': 'aging' the tables grown to their
// bound, with stored values out of bounds clamped. 0 when the
// value turns no filter on or is invalid.
func (idempotence) MaxMemory(d coltype.TableDef, value string) int64 {
	d.Options = map[string]string{IdempotenceOption: value}
	o, on, _, err := tableFBF(d, checkTimeout)
	if err != nil || !on {
		return 0
	}
	perColumn := o.maxBytes()
	var n int64
	for _, col := range d.Columns {
		if col.Type == (Vanilla{}).Name() {
			n++
		}
	}
	return n * perColumn
}

// CheckNew refuses a new definition (CREATE or ALTER, from CQL or another
// client) whose values are out of their bounds, as ParseCQL does; Check
// lets a stored one pass, to be loaded clamped.
func (idempotence) CheckNew(_ coltype.TableDef, value string) error {
	var m map[string]string
	if err := json.Unmarshal([]byte(value), &m); err != nil {
		return fmt.Errorf("idempotence option is not a JSON object of strings: %w", err)
	}
	_, err := ParseFBFOptions(m, checkTimeout)
	return err
}
