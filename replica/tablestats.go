package replica

import (
	"reflect"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/memtable"
)

// TableStats describe one table's storage on this replica, for operators
// (nodetool tablestats).
type TableStats struct {
	SSTables      int     // SSTables live now
	SSTableBytes  []int64 // the Data component's bytes of each SSTable, newest first
	SSTableRows   uint64  // partitions over all SSTables (a partition in several counts in each)
	MemtableBytes int64   // the active memtable's bytes, and the one being flushed
	MemtableRows  int     // partitions in the active memtable and the one being flushed
	// Columns are the table's column instances' statistics, by column name.
	Columns map[string]ColumnStats
}

// ColumnStats are one column's statistics: its design (the column type's
// registered name), its deduplication counts when it is a
// coltype.Deduplicator, and the numeric fields of the struct its type's
// Stats method returns, when it has one (a design's own counts, e.g. the
// slots and notices handoff columns hold).
type ColumnStats struct {
	Type   string
	Dedup  *coltype.DedupStats
	Design map[string]float64
}

// TableStats returns a table's storage statistics.
func (r *Replica) TableStats(tableID uint64) (TableStats, error) {
	t, err := r.table(tableID)
	if err != nil {
		return TableStats{}, err
	}
	var out TableStats
	t.mu.RLock()
	for _, s := range t.view.sstables {
		m := s.Meta()
		out.SSTableBytes = append(out.SSTableBytes, m.DataSize)
		out.SSTableRows += m.Rows
	}
	out.SSTables = len(t.view.sstables)
	for _, m := range []*memtable.Memtable{t.view.active, t.view.flushing} {
		if m != nil {
			out.MemtableBytes += m.Size()
			out.MemtableRows += m.Len()
		}
	}
	t.mu.RUnlock()
	out.Columns = map[string]ColumnStats{}
	for name, col := range t.colset.Load().cols {
		cs := ColumnStats{Type: col.Name()}
		if d, ok := col.(coltype.Deduplicator); ok {
			st := d.DedupStats()
			cs.Dedup = &st
		}
		cs.Design = designStats(col)
		out.Columns[name] = cs
	}
	return out, nil
}

// TableDir is the directory of a table's SSTables.
func (r *Replica) TableDir(tableID uint64) (string, error) {
	t, err := r.table(tableID)
	if err != nil {
		return "", err
	}
	return t.dir, nil
}

// CacheSize is the number of entries the counter cache (the cell cache:
// vanilla shards and the other designs' cell state) holds now.
func (r *Replica) CacheSize() int {
	return r.cfg.CellCache.Len()
}

// designStats reads, by reflection, the numeric fields of the struct a
// column type's Stats() method returns: a design's own counts reach the
// operator without the engine naming the design. A design whose Stats
// scans its cells in memory may offer MetricsStats(), the same struct with
// the scan's sums recomputed less often, which designStats then calls
// instead (a metrics scrape or a nodetool tablestats comes every few
// seconds and must not cost a scan of the cache each).
func designStats(col coltype.ColumnType) map[string]float64 {
	m := reflect.ValueOf(col).MethodByName("MetricsStats")
	if !m.IsValid() {
		m = reflect.ValueOf(col).MethodByName("Stats")
	}
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return nil
	}
	v := m.Call(nil)[0]
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]float64{}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		switch fv := v.Field(i); fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[f.Name] = float64(fv.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[f.Name] = float64(fv.Uint())
		case reflect.Float32, reflect.Float64:
			out[f.Name] = fv.Float()
		}
	}
	return out
}

// ColumnTypeName is the registered name of a column's type (its design),
// without copying the schema: false when the table or column is unknown.
func (r *Replica) ColumnTypeName(tableID uint64, column string) (string, bool) {
	t, err := r.table(tableID)
	if err != nil {
		return "", false
	}
	col, ok := t.col(column)
	if !ok {
		return "", false
	}
	return col.Name(), true
}
