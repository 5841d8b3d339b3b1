package exec

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/cql"
	"github.com/idemkv/idemkv/cql/frame"
)

// MaxKeyLength is the longest serialized partition key, as Cassandra's
// (FBUtilities.MAX_UNSIGNED_SHORT: keys are written with a 2-byte length).
const MaxKeyLength = math.MaxUint16

// Defaults of the batch size thresholds (cassandra.yaml's
// batch_size_warn_threshold and batch_size_fail_threshold).
const (
	DefaultBatchSizeWarnThreshold = 5 << 10
	DefaultBatchSizeFailThreshold = 50 << 10
)

// Sizes of the batch size estimate, those of Cassandra's
// PartitionUpdate.dataSize: a cell is its timestamp (8 bytes), TTL (4),
// local deletion time (4) and value (a counter delta: 8); a deletion is its
// timestamp and local deletion time. Partition keys are not counted, as in
// Cassandra (MaxKeyLength bounds them).
const (
	counterCellSize = 8 + 4 + 4 + 8
	deletionSize    = 8 + 4
)

// DefaultTableOptionMemory is the default of Options.TableOptionMemory
// (fbf_max_memory_in_mb): 2 GiB, the filters of 15 FBF columns of the
// default options at the adaptation's largest N (132 MiB each), or of 8
// columns at the per-column bound (256 MiB).
const DefaultTableOptionMemory = 2 << 30

// optionMemory is the capability of table options that allocate memory on
// every node for a table (the FBF's idempotence option).
type optionMemory interface {
	MaxMemory(d coltype.TableDef, value string) int64
}

// tableOptionMemory is the most the options of table d make a node allocate.
func tableOptionMemory(d coltype.TableDef) int64 {
	var n int64
	for name, v := range d.Options {
		if o, ok := coltype.LookupOption(name); ok {
			if m, ok := o.(optionMemory); ok && v != "" {
				n += m.MaxMemory(d, v)
			}
		}
	}
	return n
}

// checkOptionMemory refuses a CREATE or ALTER TABLE giving table d options
// that would make the tables of the schema, together, allocate more than
// Options.TableOptionMemory on each node (every node holds every table's
// filters).
func (e *Executor) checkOptionMemory(d coltype.TableDef) error {
	limit := e.opts.TableOptionMemory
	if limit == 0 {
		limit = DefaultTableOptionMemory
	}
	need := tableOptionMemory(d)
	if limit < 0 || need == 0 {
		return nil
	}
	total := need
	for id, t := range e.b.Schema().Visible().Tables {
		if id != d.ID {
			total += tableOptionMemory(t)
		}
	}
	if total > limit {
		return frame.Errorf(frame.ErrConfig, "The options of table %s.%s may take %d MiB on each node; with the other tables' (%d MiB in all), "+
			"more than fbf_max_memory_in_mb = %d MiB allows (fewer or smaller filters: bits, filters, adaptive; docs/fbf.md)",
			d.Keyspace, d.Name, need>>20, total>>20, limit>>20)
	}
	return nil
}

// checkKeyLength refuses a partition key longer than MaxKeyLength, with
// Cassandra's message.
func checkKeyLength(k []byte) error {
	if len(k) > MaxKeyLength {
		return invalid("Key length of %d is longer than maximum of %d", len(k), MaxKeyLength)
	}
	return nil
}

// checkDeltaNegation refuses `c = c - v` with v the smallest int64, whose
// negation overflows, as Cassandra does (Operation.Substracter). Other
// overflows wrap, as Cassandra's long arithmetic does (docs/limits.md).
func checkDeltaNegation(d int64) error {
	if d == math.MinInt64 {
		return invalid("The negation of %d overflows supported counter precision (signed 8 bytes integer)", d)
	}
	return nil
}

// batchThresholds returns the batch size thresholds in force (negative:
// none).
func (e *Executor) batchThresholds() (warn, fail int64) {
	warn, fail = e.opts.BatchSizeWarnThreshold, e.opts.BatchSizeFailThreshold
	if warn == 0 {
		warn = DefaultBatchSizeWarnThreshold
	}
	if fail == 0 {
		fail = DefaultBatchSizeFailThreshold
	}
	return warn, fail
}

// checkBatchSize applies Cassandra's batch size thresholds
// (BatchStatement.verifyBatchSize) to the writes of a request that span
// more than one partition: over the fail threshold it is refused ("Batch
// too large") and logged; over the warn threshold it is logged and the
// client warned (a warning of the response, protocol v4 and later).
func (e *Executor) checkBatchSize(ctx context.Context, writes []write, tables map[uint64]string) error {
	partitions := map[string]bool{}
	var size int64
	for _, w := range writes {
		switch {
		case w.delete:
			partitions[fmt.Sprint(w.table, "/", string(w.key))] = true
			size += deletionSize
		case w.update != nil:
			partitions[fmt.Sprint(w.update.Table, "/", string(w.update.Key))] = true
			size += counterCellSize
		}
	}
	// Cassandra warns only for batches spanning several partitions
	// (CASSANDRA-10876).
	if len(partitions) <= 1 {
		return nil
	}
	warn, fail := e.batchThresholds()
	if warn < 0 || size <= warn {
		if fail < 0 || size <= fail {
			return nil
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for _, n := range tables {
			if !yield(n) {
				return
			}
		}
	})
	tableList := "[" + strings.Join(names, ", ") + "]"
	if fail >= 0 && size > fail {
		e.opts.Logger.Error(fmt.Sprintf("Batch for %s is of size %s, exceeding specified threshold of %s by %s. (see batch_size_fail_threshold)",
			tableList, prettyBytes(size), prettyBytes(fail), prettyBytes(size-fail)))
		return invalid("Batch too large")
	}
	e.opts.Logger.Warn(fmt.Sprintf("Batch for %s is of size %s, exceeding specified threshold of %s by %s.",
		tableList, prettyBytes(size), prettyBytes(warn), prettyBytes(size-warn)))
	addWarning(ctx, fmt.Sprintf("Batch for %s is of size %d, exceeding specified threshold of %d by %d.", tableList, size, warn, size-warn))
	return nil
}

// prettyBytes prints a size as Cassandra 4's FBUtilities.prettyPrintMemory.
func prettyBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.3fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.3fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.3fKiB", float64(n)/(1<<10))
}

// warnings collects the client warnings of one request.
type warnings struct {
	mu   sync.Mutex
	list []string
}

type warningsKey struct{}

// warningsCtx is a request's context with its warnings, in one
// allocation.
type warningsCtx struct {
	context.Context
	w warnings
}

func (c *warningsCtx) Value(key any) any {
	if key == (warningsKey{}) {
		return &c.w
	}
	return c.Context.Value(key)
}

// withWarnings returns a context that collects the client warnings of a
// request, and the collection.
func withWarnings(ctx context.Context) (context.Context, *warnings) {
	c := &warningsCtx{Context: ctx}
	return c, &c.w
}

// addWarning adds a client warning to the request of ctx, if it collects
// them.
func addWarning(ctx context.Context, msg string) {
	if w, ok := ctx.Value(warningsKey{}).(*warnings); ok {
		w.mu.Lock()
		w.list = append(w.list, msg)
		w.mu.Unlock()
	}
}

// attach puts the collected warnings in an outcome's Warnings.
func (w *warnings) attach(out *cql.Outcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.list) > 0 {
		out.Warnings = append(out.Warnings, w.list...)
	}
}

// The numeric table parameters Cassandra parses and bounds
// (TableAttributes, TableParams.validate); idemkv keeps them as text, so
// it checks them as Cassandra does, with its messages.
var (
	intTableParams = map[string]bool{"gc_grace_seconds": true, "min_index_interval": true, "max_index_interval": true,
		"memtable_flush_period_in_ms": true, "default_time_to_live": true}
	doubleTableParams = map[string]bool{"bloom_filter_fp_chance": true, "crc_check_chance": true,
		"read_repair_chance": true, "dclocal_read_repair_chance": true}
)

// minBloomFilterFPChance is Cassandra's
// BloomCalculations.minSupportedBloomFilterFpChance().
const minBloomFilterFPChance = 6.71e-05

// checkTableParams parses and bounds the numeric parameters of a CREATE or
// ALTER TABLE: a value that does not parse is a syntax error, one out of
// its range a configuration error, with Cassandra's messages.
func checkTableParams(opts map[string]string) error {
	ints := map[string]int64{"min_index_interval": 128, "max_index_interval": 2048} // Cassandra's defaults
	for name, v := range opts {
		switch {
		case intTableParams[name]:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return frame.Errorf(frame.ErrSyntax, "Invalid integer value %s for '%s'", v, name)
			}
			ints[name] = n
		case doubleTableParams[name]:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return frame.Errorf(frame.ErrSyntax, "Invalid double value %s for '%s'", v, name)
			}
			switch {
			case name == "bloom_filter_fp_chance" && (f <= minBloomFilterFPChance || f > 1 || math.IsNaN(f)):
				return frame.Errorf(frame.ErrConfig, "%s must be larger than %s and less than or equal to 1.0 (got %s)",
					name, javaDouble(minBloomFilterFPChance), javaDouble(f))
			case name != "bloom_filter_fp_chance" && (f < 0 || f > 1 || math.IsNaN(f)):
				return frame.Errorf(frame.ErrConfig, "%s must be larger than or equal to 0 and smaller than or equal to 1.0 (got %s)", name, javaDouble(f))
			}
		}
	}
	for _, name := range []string{"gc_grace_seconds", "memtable_flush_period_in_ms"} {
		if n, ok := ints[name]; ok && n < 0 {
			return frame.Errorf(frame.ErrConfig, "%s must be greater than or equal to 0 (got %d)", name, n)
		}
	}
	if n := ints["min_index_interval"]; n < 1 {
		return frame.Errorf(frame.ErrConfig, "min_index_interval must be greater than or equal to 1 (got %d)", n)
	}
	if lo, hi := ints["min_index_interval"], ints["max_index_interval"]; hi < lo {
		return frame.Errorf(frame.ErrConfig, "max_index_interval must be greater than or equal to min_index_interval (%d) (got %d)", lo, hi)
	}
	return nil
}

// javaDouble formats f as Java's Double.toString does (for Cassandra's
// messages): 2.0, 0.5, 1.0E-7, 6.71E-5.
func javaDouble(f float64) string {
	if a := math.Abs(f); f == 0 || a >= 1e-3 && a < 1e7 || math.IsNaN(f) || math.IsInf(f, 0) {
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "Infinity"
		case math.IsInf(f, -1):
			return "-Infinity"
		}
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, 64) // 6.71E-05, 1E-07
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(exp, "+-0")
	if neg {
		exp = "-" + exp
	}
	return mant + "E" + exp
}
