package compat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/node"
	"github.com/idemkv/idemkv/row"
)

// This file is the column-type contract's must-show test (issue 12): a
// counter design defined here, outside the engine's packages, registered
// by name, and driven end to end by the unmodified gocql driver on a
// three-node ring — with no edit to replica, coordinator, cql or node.
//
// The design, epoch_counter, is a toy: a G-counter of one entry per
// replica (the leader's counter id) inside an epoch. DELETE starts a new,
// empty epoch on the leader, so that — unlike Cassandra's counter, whose
// tombstone is final — the counter reads 0 after a DELETE and keeps
// counting. Two states merge by the higher epoch, and within one epoch by
// the larger count of each entry: a join-semilattice, so read repair and
// merging replica answers are sound (the default ReadMerge). An increment
// concurrent with a DELETE on another replica is lost (the reset wins): a
// toy, not the observed-reset counter of issue 13.

const epochCounterType = "epoch_counter"

// epochCounter implements coltype.ColumnType and the capabilities Leading,
// Deleter, CQL and Replayer.
type epochCounter struct{}

func init() { coltype.MustRegister(epochCounter{}) }

// epochState is a cell: its epoch and each replica's count in it.
type epochState struct {
	epoch  uint64
	counts map[counters.ID]uint64
}

const epochVersion = 1

// encode: version byte, epoch (uint64), entry count (uint32), then the
// entries sorted by id: id (16 bytes), count (uint64); big-endian.
func (s epochState) encode() []byte {
	b := []byte{epochVersion}
	b = binary.BigEndian.AppendUint64(b, s.epoch)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.counts)))
	ids := slices.SortedFunc(maps.Keys(s.counts), func(a, b counters.ID) int { return a.Compare(b) })
	for _, id := range ids {
		b = append(b, id[:]...)
		b = binary.BigEndian.AppendUint64(b, s.counts[id])
	}
	return b
}

func decodeEpoch(b []byte) (epochState, error) {
	if len(b) < 13 || b[0] != epochVersion {
		return epochState{}, errors.New("epoch_counter: bad cell header")
	}
	s := epochState{epoch: binary.BigEndian.Uint64(b[1:]), counts: map[counters.ID]uint64{}}
	n := binary.BigEndian.Uint32(b[9:])
	rest := b[13:]
	if uint64(len(rest)) != uint64(n)*24 {
		return epochState{}, fmt.Errorf("epoch_counter: %d entries in %d bytes", n, len(rest))
	}
	for i := uint32(0); i < n; i++ {
		var id counters.ID
		copy(id[:], rest[:16])
		s.counts[id] = binary.BigEndian.Uint64(rest[16:24])
		rest = rest[24:]
	}
	return s, nil
}

func (s epochState) value() int64 {
	var v uint64
	for _, c := range s.counts {
		v += c
	}
	return int64(v)
}

func (epochCounter) Name() string { return epochCounterType }

func (epochCounter) Merge(a, b row.Cell) (row.Cell, error) {
	ts := max(a.Timestamp, b.Timestamp)
	switch {
	case a.Tombstone && b.Tombstone:
		return row.Cell{Column: a.Column, Timestamp: ts, Tombstone: true}, nil
	case a.Tombstone:
		return b, nil
	case b.Tombstone:
		return a, nil
	}
	sa, err := decodeEpoch(a.Value)
	if err != nil {
		return row.Cell{}, err
	}
	sb, err := decodeEpoch(b.Value)
	if err != nil {
		return row.Cell{}, err
	}
	out := sa
	switch {
	case sb.epoch > sa.epoch:
		out = sb
	case sb.epoch == sa.epoch:
		for id, c := range sb.counts {
			out.counts[id] = max(out.counts[id], c)
		}
	}
	return row.Cell{Column: a.Column, Value: out.encode(), Timestamp: ts}, nil
}

func (epochCounter) Value(c row.Cell) (int64, error) {
	s, err := decodeEpoch(c.Value)
	return s.value(), err
}

// load reads this replica's state of a cell; an absent cell is epoch 0.
func loadEpoch(l coltype.Leader, key row.Key, column string) (epochState, error) {
	c, found, err := l.Cell(key, column)
	if err != nil {
		return epochState{}, err
	}
	if !found || c.Tombstone {
		return epochState{counts: map[counters.ID]uint64{}}, nil
	}
	return decodeEpoch(c.Value)
}

// Lead adds the delta to the leader's own entry under the cell's lock.
func (epochCounter) Lead(l coltype.Leader, u coltype.Update) (coltype.Mutation, error) {
	key := u.RowKey()
	unlock := l.Lock(key, u.Column)
	defer unlock()
	s, err := loadEpoch(l, key, u.Column)
	if err != nil {
		return coltype.Mutation{}, err
	}
	s.counts[l.CounterID()] += uint64(u.Delta)
	m := u.Mutation(s.encode())
	return m, l.Write(key, m, commitlog.PayloadShard)
}

func (epochCounter) CheckDelete(string) error { return nil }

// Delete starts a new, empty epoch.
func (epochCounter) Delete(l coltype.Leader, d coltype.Deletion) (coltype.Mutation, error) {
	key := d.RowKey()
	unlock := l.Lock(key, d.Column)
	defer unlock()
	s, err := loadEpoch(l, key, d.Column)
	if err != nil {
		return coltype.Mutation{}, err
	}
	next := epochState{epoch: s.epoch + 1, counts: map[counters.ID]uint64{}}
	m := coltype.Mutation{Table: d.Table, Key: d.Key, Cell: row.Cell{Column: d.Column, Value: next.encode(), Timestamp: d.Timestamp}}
	return m, l.Write(key, m, commitlog.PayloadShard)
}

func (epochCounter) CQLType() string { return "counter" }

func (epochCounter) CheckDelta(d int64) error {
	if d < 0 {
		return fmt.Errorf("%s columns only grow (got %d)", epochCounterType, d)
	}
	return nil
}

func (epochCounter) Check(payload []byte) error { _, err := decodeEpoch(payload); return err }

func (epochCounter) Replayed(commitlog.Record) error { return nil }

func TestEpochCounterCellEncoding(t *testing.T) {
	s := epochState{epoch: 3, counts: map[counters.ID]uint64{{1}: 5, {2}: 7}}
	got, err := decodeEpoch(s.encode())
	if err != nil || got.epoch != 3 || got.value() != 12 {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {2}, append(s.encode(), 0)} {
		if _, err := decodeEpoch(bad); err == nil {
			t.Errorf("decode %x: no error", bad)
		}
	}
}

// TestGocqlNewColumnType drives epoch_counter through gocql on a 3-node
// ring: CREATE TABLE, system_schema, updates at several levels, reads at
// QUORUM and ALL, replication to every replica, a node restart that
// replays its commit log, and DELETE as the type defines it.
func TestGocqlNewColumnType(t *testing.T) {
	r := startRing(t, 3, nil)
	c := r.cluster()
	c.Consistency = gocql.All
	s := r.session(c)
	exec(t, s, `CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, s, `CREATE TABLE ks.e (k text PRIMARY KEY, c epoch_counter)`)

	md, err := s.KeyspaceMetadata("ks")
	if err != nil {
		t.Fatalf("keyspace metadata: %v", err)
	}
	if tm, ok := md.Tables["e"]; !ok || tm.Columns["c"] == nil || tm.Columns["c"].Validator != epochCounterType {
		t.Fatalf("system_schema does not show c as %s: %+v", epochCounterType, tm)
	}

	read := func(key string, cl gocql.Consistency) int64 {
		t.Helper()
		var v int64
		var err error
		for range 50 { // a restarted node may take a moment to be seen up
			if err = s.Query(`SELECT c FROM ks.e WHERE k = ?`, key).Consistency(cl).Scan(&v); err == nil || errors.Is(err, gocql.ErrNotFound) {
				return v
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("read %s at %v: %v", key, cl, err)
		return 0
	}
	want := int64(0)
	for i, cl := range []gocql.Consistency{gocql.One, gocql.Quorum, gocql.All} {
		if err := s.Query(fmt.Sprintf(`UPDATE ks.e SET c = c + %d WHERE k = 'a'`, i+1)).Consistency(cl).Exec(); err != nil {
			t.Fatalf("literal update at %v: %v", cl, err)
		}
		if err := s.Query(`UPDATE ks.e SET c = c + ? WHERE k = ?`, int64(10), "a").Consistency(cl).Exec(); err != nil {
			t.Fatalf("prepared update at %v: %v", cl, err)
		}
		want += int64(i+1) + 10
	}
	for _, cl := range []gocql.Consistency{gocql.Quorum, gocql.All} {
		if got := read("a", cl); got != want {
			t.Fatalf("read at %v = %d, want %d", cl, got, want)
		}
	}
	// The type refuses what its CQL capability refuses.
	if err := s.Query(`UPDATE ks.e SET c = c - 1 WHERE k = 'a'`).Exec(); requestCode(err) != 0x2200 {
		t.Errorf("decrement: %v, want Invalid", err)
	}

	// Replication: every replica holds the whole count.
	id := tableID(t, r, "e")
	local := func(i int) int64 {
		t.Helper()
		v, _, err := r.nodes[i].Replica().Value(id, []byte("a"), "c")
		if err != nil {
			t.Fatalf("node %d: local read: %v", i+1, err)
		}
		return v
	}
	waitFor(t, "every replica holds the count", func() bool {
		return local(0) == want && local(1) == want && local(2) == want
	})

	// A restart replays the commit log (nothing was flushed).
	if err := r.nodes[1].Stop(); err != nil {
		t.Fatalf("stop node 2: %v", err)
	}
	nd, err := node.Start(r.cfgs[1], r.opts[1])
	if err != nil {
		t.Fatalf("restart node 2: %v", err)
	}
	r.nodes[1] = nd
	if st := nd.Replica().Stats(); st.ReplayedRecords == 0 {
		t.Errorf("node 2 replayed no commit log record: %+v", st)
	}
	if got := local(1); got != want {
		t.Errorf("node 2 after replay: %d, want %d", got, want)
	}
	waitFor(t, "every node sees node 2 up again", func() bool {
		for _, nd := range r.nodes {
			up := 0
			for _, p := range nd.Gossip().Nodes() {
				if p.Up {
					up++
				}
			}
			if up != 3 {
				return false
			}
		}
		return true
	})
	exec(t, s, `UPDATE ks.e SET c = c + 100 WHERE k = 'a'`)
	want += 100
	if got := read("a", gocql.All); got != want {
		t.Fatalf("after restart, read at ALL = %d, want %d", got, want)
	}

	// DELETE is the type's: a new epoch; the counter reads 0 and counts on.
	exec(t, s, `DELETE c FROM ks.e WHERE k = 'a'`)
	if got := read("a", gocql.All); got != 0 {
		t.Fatalf("after DELETE, read at ALL = %d, want 0", got)
	}
	exec(t, s, `UPDATE ks.e SET c = c + 5 WHERE k = 'a'`)
	for _, cl := range []gocql.Consistency{gocql.Quorum, gocql.All} {
		if got := read("a", cl); got != 5 {
			t.Fatalf("counting after DELETE, read at %v = %d, want 5", cl, got)
		}
	}
	exec(t, s, `DELETE FROM ks.e WHERE k = 'a'`)
	exec(t, s, `UPDATE ks.e SET c = c + 2 WHERE k = 'a'`)
	if got := read("a", gocql.All); got != 2 {
		t.Fatalf("after a row DELETE and +2, read at ALL = %d, want 2", got)
	}
	waitFor(t, "every replica holds the new epoch", func() bool {
		return local(0) == 2 && local(1) == 2 && local(2) == 2
	})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FuzzDecodeEpoch feeds arbitrary bytes to the toy design's cell decoder:
// it fails cleanly or round-trips.
func FuzzDecodeEpoch(f *testing.F) {
	f.Add(epochState{epoch: 2, counts: map[counters.ID]uint64{{1}: 5}}.encode())
	f.Add([]byte{})
	f.Add([]byte{epochVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeEpoch(b)
		if err != nil {
			return
		}
		if _, err := decodeEpoch(s.encode()); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
