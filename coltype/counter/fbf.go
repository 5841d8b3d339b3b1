package counter

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/cellcache"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/fbf"
	"github.com/idemkv/idemkv/row"
)

// IdempotenceOption is the coltype.TableDef.Options key of the FBF setting: a JSON
// object of strings, as CQL's `WITH idempotence = {'class': 'fbf', ...}`
// gives it.
const IdempotenceOption = "idempotence"

// FBFOptions configure the Forgetful Bloom Filter of each counter column of
// a table. Zero values take the defaults, derived from the counter write
// timeout: a client that retries up to RetryAttempts times, each after the
// timeout, is covered by a window of RetryAttempts × timeout.
type FBFOptions struct {
	TargetFPP     float64       // target_fpp: the adaptation's target; 0 disables adaptation (adaptive=false)
	RetryHorizon  time.Duration // retry_horizon: ids are remembered at least this long
	Bits          uint          // bits: m, bits per constituent filter
	Hashes        uint          // hashes: k
	Filters       int           // filters: N, past filters (N+2 filters in all)
	RefreshPeriod time.Duration // refresh_period: t
	Adaptive      bool          // adaptive: change N and t to meet TargetFPP
	// Filter is the structure of the column's op ids: FilterFBF (the
	// default, the paper's N+2 Bloom filters) or FilterAging (a cuckoo
	// filter of epoch-tagged fingerprints, for long windows: see aging.go).
	Filter string        // filter
	Window time.Duration // window: FilterAging's guaranteed window
	Rate   float64       // rate: FilterAging's sized rate of fresh op ids per second
	// Leader is the counter leader rule the table sets: "first" (a retry
	// meets the same filter while the leader lives) or "random"
	// (Cassandra's rule); "" when the option is absent: the node's
	// counter_leader if the operator set one, else "first" (see
	// coltype.RuleSource).
	Leader string
}

// Bounds of the FBF options: what one FBF counter column may make a node
// allocate. A column holds N+2 filters of m bits in steady state, N+2 more
// for a window after an ALTER TABLE that changes its filter (the retired
// filter), and its adaptation grows N up to MaxFBFFilters only while the
// filters fit in MaxFBFColumnMemory. docs/fbf.md explains the choice.
const (
	MinFBFBits          = 64
	MaxFBFBits          = 1 << 28 // 32 MiB per filter
	MaxFBFHashes        = 32
	MaxFBFFilters       = 64 // the adaptation's default maximum N
	MinFBFRefreshPeriod = 10 * time.Millisecond
	MaxFBFRefreshPeriod = 24 * time.Hour
	MaxFBFRetryHorizon  = 24 * time.Hour
	MinFBFTargetFPP     = 1e-9
	MaxFBFTargetFPP     = 0.5
	// MaxFBFColumnMemory bounds (N+2)·m/8 bytes, the filters of a column.
	MaxFBFColumnMemory int64 = 256 << 20
)

// ErrFBFOptionOutOfRange is wrapped by the errors of an FBF option out of
// its bounds.
var ErrFBFOptionOutOfRange = errors.New("out of range")

// Defaults of the FBF options.
const (
	DefaultFBFTargetFPP     = 1e-4
	DefaultFBFBits          = 1 << 24 // 2 MiB per filter: 600k ids at 1e-4 with k = 7
	DefaultFBFHashes        = 7
	DefaultFBFFilters       = 2
	DefaultFBFRetryAttempts = 4 // gocql's default policy: one try and three retries
)

// ParseFBFOptions reads the idempotence option map, refusing a value out
// of its bounds (see the Max/Min constants and docs/fbf.md). timeout is the
// counter write timeout the defaults derive from. It allocates no filter.
func ParseFBFOptions(m map[string]string, timeout time.Duration) (FBFOptions, error) {
	o, _, err := parseFBF(m, timeout, false)
	return o, err
}

// parseFBF reads the idempotence option map. With clamp, a value out of its
// bounds is replaced by the nearest bound and described in clamped, instead
// of being an error (a stored table definition: see TableFBF).
func parseFBF(m map[string]string, timeout time.Duration, clamp bool) (o FBFOptions, clamped []string, err error) {
	o = FBFOptions{Adaptive: true, TargetFPP: DefaultFBFTargetFPP, Bits: DefaultFBFBits, Hashes: DefaultFBFHashes, Filters: DefaultFBFFilters, Filter: FilterFBF}
	if c := m["class"]; !strings.EqualFold(c, "fbf") {
		return o, nil, fmt.Errorf("idempotence class %q: the only class is 'fbf'", c)
	}
	// out handles a value out of its bounds: an error naming the option,
	// its value and the limit, or with clamp the bound and a note.
	out := func(k, v string, limit string, set func()) error {
		if !clamp {
			return fmt.Errorf("%w: %s", ErrFBFOptionOutOfRange, limit)
		}
		set()
		clamped = append(clamped, fmt.Sprintf("%s = %q (%s)", k, v, limit))
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		var err error
		switch k {
		case "class":
		case "target_fpp":
			o.TargetFPP, err = strconv.ParseFloat(v, 64)
			switch {
			case err != nil:
			case math.IsNaN(o.TargetFPP) || o.TargetFPP <= 0 || o.TargetFPP >= 1:
				err = fmt.Errorf("must be in (0, 1)")
			case o.TargetFPP < MinFBFTargetFPP:
				err = out(k, v, fmt.Sprintf("must be at least %g", MinFBFTargetFPP), func() { o.TargetFPP = MinFBFTargetFPP })
			case o.TargetFPP > MaxFBFTargetFPP:
				err = out(k, v, fmt.Sprintf("must be at most %g", MaxFBFTargetFPP), func() { o.TargetFPP = MaxFBFTargetFPP })
			}
		case "retry_horizon":
			o.RetryHorizon, err = time.ParseDuration(v)
			switch {
			case err != nil:
			case o.RetryHorizon < 0:
				err = fmt.Errorf("must not be negative")
			case o.RetryHorizon > MaxFBFRetryHorizon:
				err = out(k, v, fmt.Sprintf("must be at most %v", MaxFBFRetryHorizon), func() { o.RetryHorizon = MaxFBFRetryHorizon })
			}
		case "refresh_period":
			o.RefreshPeriod, err = time.ParseDuration(v)
			switch {
			case err != nil:
			case o.RefreshPeriod < 0:
				err = fmt.Errorf("must not be negative")
			case o.RefreshPeriod > 0 && o.RefreshPeriod < MinFBFRefreshPeriod:
				err = out(k, v, fmt.Sprintf("must be at least %v", MinFBFRefreshPeriod), func() { o.RefreshPeriod = MinFBFRefreshPeriod })
			case o.RefreshPeriod > MaxFBFRefreshPeriod:
				err = out(k, v, fmt.Sprintf("must be at most %v", MaxFBFRefreshPeriod), func() { o.RefreshPeriod = MaxFBFRefreshPeriod })
			}
		case "bits":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 64)
			o.Bits = uint(min(n, MaxFBFBits+1))
			switch {
			case err != nil && errors.Is(err, strconv.ErrRange):
				err = out(k, v, fmt.Sprintf("must be at most %d (%d MiB per filter)", MaxFBFBits, MaxFBFBits>>23), func() { o.Bits = MaxFBFBits })
			case err != nil:
			case n < MinFBFBits:
				err = out(k, v, fmt.Sprintf("must be at least %d", MinFBFBits), func() { o.Bits = MinFBFBits })
			case n > MaxFBFBits:
				err = out(k, v, fmt.Sprintf("must be at most %d (%d MiB per filter)", MaxFBFBits, MaxFBFBits>>23), func() { o.Bits = MaxFBFBits })
			}
		case "hashes":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 64)
			o.Hashes = uint(min(n, MaxFBFHashes+1))
			switch {
			case err != nil && errors.Is(err, strconv.ErrRange):
				err = out(k, v, fmt.Sprintf("must be at most %d", MaxFBFHashes), func() { o.Hashes = MaxFBFHashes })
			case err != nil:
			case n < 1:
				err = out(k, v, "must be at least 1", func() { o.Hashes = 1 })
			case n > MaxFBFHashes:
				err = out(k, v, fmt.Sprintf("must be at most %d", MaxFBFHashes), func() { o.Hashes = MaxFBFHashes })
			}
		case "filters":
			o.Filters, err = strconv.Atoi(v)
			switch {
			case err != nil && errors.Is(err, strconv.ErrRange):
				err = out(k, v, fmt.Sprintf("must be at most %d", MaxFBFFilters), func() { o.Filters = MaxFBFFilters })
			case err != nil:
			case o.Filters < 1:
				err = fmt.Errorf("must be at least 1")
			case o.Filters > MaxFBFFilters:
				err = out(k, v, fmt.Sprintf("must be at most %d", MaxFBFFilters), func() { o.Filters = MaxFBFFilters })
			}
		case "adaptive":
			o.Adaptive, err = strconv.ParseBool(v)
		case "leader":
			o.Leader = strings.ToLower(v)
			if o.Leader != "first" && o.Leader != "random" {
				err = fmt.Errorf("must be first or random")
			}
		case "filter", "window", "rate":
			err = parseAgingOption(&o, k, v, out)
		default:
			err = fmt.Errorf("unknown option (have: class, filter, target_fpp, retry_horizon, refresh_period, bits, hashes, filters, adaptive, window, rate, leader)")
		}
		if err != nil {
			return o, nil, fmt.Errorf("idempotence option %s = %q: %w", k, v, err)
		}
	}
	if o.Filter == FilterAging {
		return finishAging(o, m, timeout, clamp, clamped)
	}
	for _, k := range agingOnly {
		if v, ok := m[k]; ok {
			return o, nil, fmt.Errorf("idempotence option %s = %q: %w", k, v, errAgingOnly)
		}
	}
	// The filters of a column: N+2 of m bits in steady state.
	if mem := o.filterConfig(fbf.SystemClock{}).MemoryBytes(o.Filters + 2); mem > MaxFBFColumnMemory {
		limit := fmt.Sprintf("(filters + 2) × bits = %d × %d bits = %d MiB, more than the %d MiB a column may take",
			o.Filters+2, o.Bits, mem>>20, MaxFBFColumnMemory>>20)
		if !clamp {
			return o, nil, fmt.Errorf("idempotence options bits = %d and filters = %d: %w: %s", o.Bits, o.Filters, ErrFBFOptionOutOfRange, limit)
		}
		was := o.Bits
		o.Bits = uint(MaxFBFColumnMemory * 8 / int64(o.Filters+2) &^ 63)
		clamped = append(clamped, fmt.Sprintf("bits = %d (%s)", was, limit))
	}
	if o.RetryHorizon <= 0 {
		o.RetryHorizon = DefaultFBFRetryAttempts * timeout
	}
	if o.RefreshPeriod <= 0 {
		// (N+1)·t ≥ H: the window covers the horizon from the start.
		o.RefreshPeriod = (o.RetryHorizon + time.Duration(o.Filters)) / time.Duration(o.Filters+1)
	}
	if err := o.filterConfig(fbf.SystemClock{}).Validate(); err != nil {
		return o, nil, fmt.Errorf("idempotence: %w", err)
	}
	return o, clamped, nil
}

func (o FBFOptions) filterConfig(clock fbf.Clock) fbf.Config {
	c := fbf.Config{Bits: o.Bits, Hashes: o.Hashes, Past: o.Filters, Period: o.RefreshPeriod,
		Clock: clock, AutoAdvance: true, RetryHorizon: o.RetryHorizon}
	if o.Adaptive {
		c.TargetFPP = o.TargetFPP
		// The adaptation may grow N up to 64 (fbf's default), but never
		// beyond the column's memory bound.
		perFilter := c.MemoryBytes(1)
		c.MaxPast = max(o.Filters, min(MaxFBFFilters, int(MaxFBFColumnMemory/max(perFilter, 1))-2))
	}
	return c
}

// TableFBF reads a table definition's FBF options (with the defaults of a
// counter write timeout of timeout); ok is false when the table does not
// turn the FBF on. A stored definition may hold values out of the bounds
// ParseFBFOptions refuses (written by a version without them, or edited by
// hand): they are clamped to their bounds, so that loading it never
// allocates more than the bounds allow; FBFClamped says which.
func TableFBF(d coltype.TableDef, timeout time.Duration) (o FBFOptions, ok bool, err error) {
	o, ok, _, err = tableFBF(d, timeout)
	return o, ok, err
}

// FBFClamped describes the FBF options of a stored table definition that
// are out of their bounds and clamped when it is loaded (see TableFBF):
// one "option = value (limit)" each, none when all are within bounds.
func FBFClamped(d coltype.TableDef) []string {
	_, _, clamped, _ := tableFBF(d, checkTimeout)
	return clamped
}

// tableFBF reads a table definition's FBF options, clamping values out of
// their bounds; ok is false when the table does not turn the FBF on.
func tableFBF(d coltype.TableDef, timeout time.Duration) (FBFOptions, bool, []string, error) {
	raw, ok := d.Options[IdempotenceOption]
	if !ok || raw == "" {
		return FBFOptions{}, false, nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return FBFOptions{}, false, nil, fmt.Errorf("idempotence option is not a JSON object of strings: %w", err)
	}
	o, clamped, err := parseFBF(m, timeout, true)
	return o, err == nil, clamped, err
}

// clockFunc adapts the replica's clock to the filter's.
type clockFunc func() time.Time

func (c clockFunc) Now() time.Time { return c() }

// fbfCounter is the counter column of a table with the FBF on: one filter
// of recent operation ids and the leader's own shard of each cell kept in
// memory, updated by compare-and-swap.
type fbfCounter struct {
	env    coltype.Env
	table  uint64
	column string
	opts   FBFOptions
	filter opFilter
	// retired is the filter of the column's previous options (ALTER
	// TABLE), consulted until retiredUntil so that no id of the window is
	// forgotten when the options change.
	retired      opFilter
	retiredUntil int64 // unix nanoseconds

	// shards are the leader's own shards of the column's cells, in the
	// replica's bounded cell cache (namespace ns, partition key →
	// *fbfCell): an evicted shard is read again from storage.
	shards *cellcache.Cache
	ns     uint64

	dismissed, applied, noOp atomic.Uint64
}

// fbfCell is the leader's shard of one cell: loaded once from storage, then
// changed only by compare-and-swap. It is pinned in the cell cache from
// the load of the shard until the write of the new shard is in the
// memtable (Lead, Compensate), so that an evicted shard reloads a clock
// no lower than any given out.
type fbfCell struct {
	load sync.Once
	err  error
	v    atomic.Pointer[shardState]
}

// shardState is one value of a leader's shard of a cell, and the update
// that made it.
//
// An update adds itself to the shard with a compare-and-swap and logs the
// new state afterwards, holding no lock, so a later update of the cell can
// be logged first: its record's shard then holds the earlier update's delta
// while no record names the earlier op. If the node stops before the
// earlier record is written, its op id would be lost with its delta
// counted, and a retry of it counted again. So a state made while the one
// before it was not logged yet keeps that one (prev), and an update's
// record carries the ops of the unlogged states before its own
// (commitlog.Record.Carried): whatever record of the shard survives a stop
// names every op whose delta it holds. The chain ends at the first logged
// state, whose own record carried what was unlogged before it and was
// written before this one.
type shardState struct {
	clock, count int64
	// The update that made the state (hasOp: one with an op id, which a
	// later record carries while this one is not logged).
	op                  [16]byte
	opTime, delta       int64
	hasOp, compensation bool
	// logged: the update's record is written, or the state needs none
	// (loaded from storage, or a replicated copy of the shard).
	logged atomic.Bool
	prev   *shardState // the state before, when it was not logged yet
}

// settledState returns a state that needs no record.
func settledState(clock, count int64) *shardState {
	s := &shardState{clock: clock, count: count}
	s.logged.Store(true)
	return s
}

// after returns the state an update of delta makes from old.
func (old *shardState) after(delta int64, u coltype.Update, compensation bool) *shardState {
	next := &shardState{clock: old.clock + 1, count: old.count + delta, op: u.OpID, opTime: u.OpTime,
		delta: u.Delta, hasOp: u.HasOp, compensation: compensation}
	if !old.logged.Load() {
		next.prev = old
	}
	return next
}

// carried lists the ops of the states before s that were not logged when
// its record is written (see shardState), newest first.
func (s *shardState) carried() []commitlog.CarriedOp {
	var out []commitlog.CarriedOp
	for p := s.prev; p != nil && !p.logged.Load(); p = p.prev {
		if p.hasOp {
			out = append(out, commitlog.CarriedOp{OpID: p.op, OpTime: p.opTime, Delta: p.delta, Clock: p.clock, Compensation: p.compensation})
		}
	}
	return out
}

// logWith sets m to carry what s's record carries and to mark s logged
// once the record has its place in the commit log (LeaderLog.Placed): from
// then on a later record follows it in the log. A state whose record
// cannot carry what came before it (an update without an op id writes no
// led record) stays unlogged, so that the next record walks through it to
// them.
func (s *shardState) logWith(m *coltype.Mutation, led bool) {
	carried := s.carried()
	if led {
		m.Log.Carried = carried
	}
	if led || len(carried) == 0 {
		m.Log.Placed = &s.logged
	}
}

func newFBFCounter(env coltype.Env, table uint64, column string, o FBFOptions) (*fbfCounter, error) {
	f, err := o.newFilter(clockFunc(env.Now))
	if err != nil {
		return nil, err
	}
	return &fbfCounter{env: env, table: table, column: column, opts: o, filter: f, shards: cellcache.Of(env), ns: cellcache.NewNamespace()}, nil
}

// fbfCellBytes is the estimated bytes of a cached shard besides the cache's
// own overhead (cellcache.EntryOverhead): the fbfCell and its shardState
// (states kept for a later record to carry are short-lived and not counted).
const fbfCellBytes = 112

// retire takes over an FBF column of the previous options: its shards, and
// its filter as a read-only memory of the ids of its window.
func (c *fbfCounter) retire(old *fbfCounter) {
	c.shards, c.ns = old.shards, old.ns // the cells carry on
	c.retired = old.filter
	c.retiredUntil = c.env.Now().Add(old.window()).UnixNano()
	c.dismissed.Store(old.dismissed.Load())
	c.applied.Store(old.applied.Load())
	c.noOp.Store(old.noOp.Load())
}

// seen is the atomic test-and-add, consulting the retired filter too.
func (c *fbfCounter) seen(h fbf.Hash) bool {
	present := c.filter.TestAndAddHash(h)
	if !present && c.retired != nil && c.env.Now().UnixNano() < c.retiredUntil {
		present = c.retired.ContainsHash(h)
	}
	return present
}

func (*fbfCounter) Name() string { return "counter" }

// opHash names an operation on one cell: the op id, the table, the column
// and the partition key, hashed once for every constituent filter. The
// bytes hashed are built in a pooled buffer: murmur3 makes its argument
// escape, so a buffer of its own would be an allocation per update.
func (c *fbfCounter) opHash(opID [16]byte, key []byte) fbf.Hash {
	bp := opHashBufs.Get().(*[]byte)
	b := append((*bp)[:0], opID[:]...)
	b = binary.BigEndian.AppendUint64(b, c.table)
	b = append(b, c.column...)
	b = append(b, 0)
	b = append(b, key...)
	h := fbf.HashID(b)
	if cap(b) <= maxPooledOpHashBuf {
		*bp = b
		opHashBufs.Put(bp)
	}
	return h
}

// opHashBufs are opHash's buffers; one longer than maxPooledOpHashBuf (a
// long partition key) is left to the collector.
var opHashBufs = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

const maxPooledOpHashBuf = 4096

// Lead is the FBF leader path: one atomic test-and-add of the op id; a
// retry is dismissed; a fresh operation adds its delta to the leader's shard
// with a compare-and-swap (no cell lock), logs the new shard with the op id,
// and returns it for replication with the op id.
func (c *fbfCounter) Lead(l coltype.Leader, u coltype.Update) (coltype.Mutation, error) {
	if u.HasOp {
		if c.seen(c.opHash(u.OpID, u.Key)) {
			c.dismissed.Add(1)
			return coltype.Mutation{Table: u.Table, Key: u.Key, Dismissed: true, HasOp: true, OpID: u.OpID, OpTime: u.OpTime}, nil
		}
	} else {
		c.noOp.Add(1) // applied like a vanilla update, without dedup
	}
	key := u.RowKey()
	cell, release, err := c.cell(l, key, u.Column)
	if err != nil {
		return coltype.Mutation{}, err
	}
	defer release()
	var next *shardState
	for {
		old := cell.v.Load()
		next = old.after(u.Delta, u, false)
		if cell.v.CompareAndSwap(old, next) {
			break
		}
	}
	v, err := counters.NewGlobal(l.CounterID(), next.clock, next.count).MarshalBinary()
	if err != nil {
		return coltype.Mutation{}, err
	}
	m := u.Mutation(v)
	m.Log.Led, m.Log.Delta = u.HasOp, u.Delta // a restart may need to take it back
	next.logWith(&m, u.HasOp)
	if err := l.Write(key, m, commitlog.PayloadShard); err != nil {
		return coltype.Mutation{}, err
	}
	m.Log.Carried, m.Log.Placed = nil, nil // the leader's record alone carries them
	c.applied.Add(1)
	return m, nil
}

// Compensate implements coltype.Deduplicator: it takes back an update
// this node led that another leader counted too (see Decide): its delta
// comes off this node's current shard, and the record says so, so that a
// later restart does not take it back again.
func (c *fbfCounter) Compensate(l coltype.Leader, u coltype.Update) error {
	key := u.RowKey()
	cell, release, err := c.cell(l, key, u.Column)
	if err != nil {
		return err
	}
	defer release()
	var next *shardState
	for {
		old := cell.v.Load()
		next = old.after(-u.Delta, u, true)
		if cell.v.CompareAndSwap(old, next) {
			break
		}
	}
	v, err := counters.NewGlobal(l.CounterID(), next.clock, next.count).MarshalBinary()
	if err != nil {
		return err
	}
	m := u.Mutation(v)
	m.Log = coltype.LeaderLog{Led: true, Delta: u.Delta, Compensation: true}
	next.logWith(&m, u.HasOp)
	return l.Write(key, m, commitlog.PayloadShard)
}

// shardKey names a cell in the column's namespace of the cache: its
// partition, and for a cell of a table with clustering columns (whose name
// is not the column's) the length of the partition, the partition and the
// cell name.
//
// For a cell named by its column the key is a view of partition's bytes,
// not a copy (an allocation per update saved): the cell cache copies a key
// it stores, and partition is not changed while the key is in use.
func (c *fbfCounter) shardKey(partition []byte, name string) string {
	if name == c.column || name == "" {
		return unsafe.String(unsafe.SliceData(partition), len(partition))
	}
	return coltype.CellKey(partition, name, c.column)
}

// cell returns the leader's shard of a cell (name: the cell's name, the
// column's or a composite one), loaded from storage on first use (or after
// an eviction), pinned in the cache until release.
func (c *fbfCounter) cell(l coltype.Leader, key row.Key, name string) (*fbfCell, func(), error) {
	h, _ := c.shards.Acquire(c.ns, c.shardKey(key.Partition, name), func() any { return &fbfCell{} })
	cell := h.Value().(*fbfCell)
	cell.load.Do(func() {
		clock, count, err := c.storedShard(l, key, name)
		cell.err = err
		cell.v.Store(settledState(clock, count))
		h.SetSize(fbfCellBytes)
	})
	if cell.err != nil {
		h.Remove()
		h.Release()
		return nil, nil, cell.err
	}
	return cell, h.Release, nil
}

// storedShard reads this node's (clock, count) of a cell from storage
// (memtables and SSTables; (0, 0) if none), as a cold start does. It does
// not read the replica's cached vanilla shards, which FBF writes do not
// update.
func (c *fbfCounter) storedShard(l coltype.Leader, key row.Key, name string) (clock, count int64, err error) {
	if name == "" {
		name = c.column
	}
	stored, found, err := l.Cell(key, name)
	if err != nil || !found || stored.Tombstone {
		return 0, 0, err
	}
	ctx, err := counters.Decode(stored.Value)
	if err != nil {
		return 0, 0, err
	}
	clock, count = ctx.ClockAndCount(l.CounterID())
	return clock, count, nil
}

// Observe implements coltype.Observer: the counter's own check (see
// Vanilla.Observe), then the FBF's.
func (c *fbfCounter) Observe(l coltype.Leader, m coltype.Mutation) error {
	_, err := c.ObserveSeen(l, m)
	return err
}

// ObserveSeen implements coltype.SeenObserver: Observe, reporting whether
// the op id was in the filter before.
func (c *fbfCounter) ObserveSeen(l coltype.Leader, m coltype.Mutation) (bool, error) {
	if err := (Vanilla{}).Observe(l, m); err != nil {
		return false, err
	}
	return c.observe(m), nil
}

// observe is the replica side: an op id that arrives with replicated state
// joins the filter, and a copy of this node's own shard that is newer than
// the in-memory one (a hint, a repair) raises it. It reports whether the
// op id was in the filter already.
func (c *fbfCounter) observe(m coltype.Mutation) (seen bool) {
	if m.HasOp {
		seen = c.filter.TestAndAddHash(c.opHash(m.OpID, m.Key))
	}
	if m.Cell.Tombstone {
		c.shards.Remove(c.ns, c.shardKey(m.Key, m.Cell.Column))
		return
	}
	// A shard not in memory is read from storage on its next use, which
	// this mutation joins once the replica writes it.
	h, ok := c.shards.Peek(c.ns, c.shardKey(m.Key, m.Cell.Column))
	if !ok {
		return
	}
	defer h.Release()
	s, ok, err := counters.EncodedShard(m.Cell.Value, c.env.CounterID())
	if err != nil || !ok {
		return
	}
	cell := h.Value().(*fbfCell)
	for {
		old := cell.v.Load()
		if old == nil || old.clock >= s.Clock {
			return
		}
		if cell.v.CompareAndSwap(old, settledState(s.Clock, s.Count)) {
			return
		}
	}
}

func (*fbfCounter) Merge(a, b row.Cell) (row.Cell, error) { return MergeCells(a, b) }
func (*fbfCounter) Value(c row.Cell) (int64, error)       { return CellValue(c) }

// Window implements coltype.Deduplicator: see window.
func (c *fbfCounter) Window() time.Duration { return c.window() }

// OpSeen implements coltype.Deduplicator: whether the filter (or the
// retired one, within its window) holds an op id, without adding it.
func (c *fbfCounter) OpSeen(key []byte, opID [16]byte) bool {
	h := c.opHash(opID, key)
	return c.filter.ContainsHash(h) || c.retired != nil && c.env.Now().UnixNano() < c.retiredUntil && c.retired.ContainsHash(h)
}

// DedupStats implements coltype.Deduplicator.
func (c *fbfCounter) DedupStats() coltype.DedupStats {
	return coltype.DedupStats{Dismissed: c.dismissed.Load(), Applied: c.applied.Load(), NoOpID: c.noOp.Load(),
		EstimatedFPP: c.filter.EstimatedFPP(), BitsInUse: c.filter.BitsInUse()}
}

// Check implements coltype.Replayer: see Vanilla.Check.
func (c *fbfCounter) Check(payload []byte) error { return (Vanilla{}).Check(payload) }

// Replayed implements coltype.Replayer: an op id in the log younger than
// the window joins the filter again (the aging filter remembers it from its
// op time, see fbf.AgingFilter.TestAndAddHashAt).
func (c *fbfCounter) Replayed(rec commitlog.Record) error {
	if rec.HasOp && c.env.Now().Sub(time.Unix(0, rec.OpTime)) < c.window() {
		c.filter.replay(c.opHash(rec.OpID, rec.Key), time.Unix(0, rec.OpTime))
	}
	for _, o := range rec.Carried {
		if c.env.Now().Sub(time.Unix(0, o.OpTime)) < c.window() {
			c.filter.replay(c.opHash(o.OpID, rec.Key), time.Unix(0, o.OpTime))
		}
	}
	return nil
}

// window is how long the filter remembers an id at most: ids older than it
// need not be restored after a restart (see opFilter.maxWindow).
func (c *fbfCounter) window() time.Duration { return c.filter.maxWindow() }
