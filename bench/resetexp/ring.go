// Package resetexp measures the observed-reset counter (reset_counter,
// coltype/resetcol) against the vanilla counter and the designs a reset
// is usually given (reset-wins, reset-ignored): `idemkv experiment reset`
// and the `reset` mode of `idemkv bench`.
//
// Ring is the harness: n real replicas (package replica: commit log,
// memtables, the column types' own code) of one table in one process,
// with the coordinator's message flows — a leader's mutation to each
// other replica, the anti-entropy exchange of a cell — done by the
// harness, so that a message can be held, lost, duplicated or delivered
// out of order, and counted with the bytes it takes on the wire
// (coordinator.EncodeMutation; a sync exchange's two payloads).
package resetexp

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/resetcol"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/coordinator"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/replica"

	// The designs compared.
	_ "github.com/idemkv/idemkv/coltype/builtin"
)

// TableID is the id of the harness's table, ks.t (k, c).
const TableID = 1

// Msg is a leader's mutation on its way to one replica.
type Msg struct {
	To int
	M  coltype.Mutation
}

// Traffic counts messages and their bytes.
type Traffic struct {
	Mutations, MutationBytes uint64 // leader → replica
	Syncs, SyncBytes         uint64 // anti-entropy requests and answers
	Held                     uint64 // mutations not acknowledged: held beyond a gap
	Dismissed                uint64 // retries a leader recognised by their op id
}

// Ring is n replicas of the table ks.t (k text, c <type>) in one process.
type Ring struct {
	dir  string
	typ  string
	seed uint64
	sync commitlog.SyncMode
	now  func() time.Time // the replicas' clock; nil: time.Now
	Reps []*replica.Replica
	IDs  []counters.ID
	Traffic
}

// seededIDs is a reader of deterministic bytes (host and counter ids).
type seededIDs struct{ r *rand.Rand }

func (s seededIDs) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(s.r.Uint32())
	}
	return len(p), nil
}

// Open starts n replicas in dir with a table whose column c has the type
// typ ("reset_counter", "counter"), their commit logs synced in batch mode
// (a write returns once durable).
func Open(dir string, n int, typ string, seed uint64) (*Ring, error) {
	return OpenSync(dir, n, typ, seed, commitlog.SyncBatch)
}

// OpenSync is Open with the commit logs' sync mode (SyncPeriodic for the
// experiments' large runs, where no replica crashes).
func OpenSync(dir string, n int, typ string, seed uint64, sync commitlog.SyncMode) (*Ring, error) {
	return OpenClock(dir, n, typ, seed, sync, nil)
}

// OpenClock is OpenSync with the replicas' clock (nil: time.Now), e.g. a
// fake one that a measure moves past the op window.
func OpenClock(dir string, n int, typ string, seed uint64, sync commitlog.SyncMode, now func() time.Time) (*Ring, error) {
	r := &Ring{dir: dir, typ: typ, seed: seed, sync: sync, now: now}
	for i := range n {
		rep, err := r.open(i)
		if err != nil {
			return nil, errors.Join(err, r.Close())
		}
		def := coltype.TableDef{ID: TableID, Keyspace: "ks", Name: "t", Columns: []coltype.ColumnDef{{Name: "c", Type: typ}}}
		if err := rep.CreateTable(def); err != nil {
			return nil, errors.Join(err, rep.Close(), r.Close())
		}
		r.Reps = append(r.Reps, rep)
		r.IDs = append(r.IDs, rep.HostID())
	}
	return r, nil
}

func (r *Ring) open(i int) (*replica.Replica, error) {
	return replica.Open(replica.Config{
		Dir:       filepath.Join(r.dir, fmt.Sprintf("r%d", i)),
		CommitLog: commitlog.Options{Sync: r.sync},
		IDs:       seededIDs{rand.New(rand.NewPCG(r.seed, uint64(i)))},
		Now:       r.now,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// Close closes every replica.
func (r *Ring) Close() error {
	var err error
	for _, rep := range r.Reps {
		if rep != nil {
			err = errors.Join(err, rep.Close())
		}
	}
	r.Reps = nil
	return err
}

// Restart stops replica i (crash: no clean close) and opens it again from
// its directory (commit log replay).
func (r *Ring) Restart(i int, crash bool) error {
	var err error
	if crash {
		err = r.Reps[i].Crash()
	} else {
		err = r.Reps[i].Close()
	}
	if err != nil {
		return err
	}
	rep, err := r.open(i)
	if err != nil {
		return err
	}
	r.Reps[i] = rep
	return nil
}

// lead applies an update on replica i as the coordinator's leader does
// (with the key's replicas) and returns the mutations to the others.
func (r *Ring) lead(i int, u coltype.Update) ([]Msg, error) {
	u.Table, u.Column = TableID, "c"
	u.Replicas = r.IDs
	m, err := r.Reps[i].Apply(u)
	if err != nil {
		return nil, err
	}
	if m.Dismissed {
		r.Dismissed++
	}
	var out []Msg
	for j := range r.Reps {
		if j != i {
			out = append(out, Msg{To: j, M: m})
		}
	}
	return out, nil
}

// Inc leads c = c + d on key at replica i; the mutations are returned,
// not delivered.
func (r *Ring) Inc(i int, key string, d int64) ([]Msg, error) {
	return r.lead(i, coltype.Update{Key: []byte(key), Delta: d})
}

// IncOp leads c = c + d with a client op id at replica i, as a client's
// attempt (or retry) does; the mutations are returned, not delivered. A
// retry the leader recognises returns its re-sent cell as the mutations.
func (r *Ring) IncOp(i int, key string, d int64, opID [16]byte, opTime int64) ([]Msg, error) {
	return r.lead(i, coltype.Update{Key: []byte(key), Delta: d, HasOp: true, OpID: opID, OpTime: opTime})
}

// IncElemOp is IncOp on key elem of a map column (m = m + {elem: d}).
func (r *Ring) IncElemOp(i int, key, elem string, d int64, opID [16]byte, opTime int64) ([]Msg, error) {
	return r.lead(i, coltype.Update{Key: []byte(key), Element: elem, Delta: d, HasOp: true, OpID: opID, OpTime: opTime})
}

// Delete leads DELETE c at replica i, with the client's reset context (nil:
// what replica i observes); the mutations are returned, not delivered.
func (r *Ring) Delete(i int, key string, ctx []byte) ([]Msg, error) {
	return r.lead(i, coltype.Update{Key: []byte(key), Delete: true, Context: ctx})
}

// Deliver applies mutations at their replicas, counting them. A
// reset_counter op held beyond a gap (resetcol.ErrHeld: not acknowledged,
// the coordinator would hint it) is counted in Held, not an error.
func (r *Ring) Deliver(ms ...Msg) error {
	for _, m := range ms {
		r.Mutations++
		r.MutationBytes += uint64(len(coordinator.EncodeMutation(m.M)))
		err := r.Reps[m.To].ApplyMutation(m.M)
		if errors.Is(err, resetcol.ErrHeld) {
			r.Held++
			continue
		}
		if err != nil {
			return fmt.Errorf("deliver to replica %d: %w", m.To, err)
		}
	}
	return nil
}

// Sync runs one anti-entropy round at every replica, as the coordinator's
// round does (Sweep, then every dirty cell exchanged with every other
// replica: this replica's view out, the peer's answer back and taken in).
// down[j] replicas are skipped (their cells stay dirty). It returns the
// exchanges made.
func (r *Ring) Sync(down ...int) (int, error) {
	isDown := map[int]bool{}
	for _, d := range down {
		isDown[d] = true
	}
	n := 0
	for i, rep := range r.Reps {
		if isDown[i] {
			continue
		}
		if _, err := rep.Sweep(); err != nil {
			return n, err
		}
		for _, cell := range rep.TakeDirty() {
			failed := false
			for j, peer := range r.Reps {
				if j == i {
					continue
				}
				if isDown[j] {
					failed = true
					continue
				}
				view, err := rep.SyncView(cell.Table, cell.Key, cell.Column, r.IDs[j])
				if err != nil {
					return n, err
				}
				reply, err := peer.Exchange(cell.Table, cell.Key, cell.Column, view)
				if err != nil {
					return n, err
				}
				if _, err := rep.Exchange(cell.Table, cell.Key, cell.Column, reply); err != nil {
					return n, err
				}
				r.Syncs += 2
				r.SyncBytes += uint64(len(view) + len(reply))
				n++
			}
			if failed {
				rep.MarkDirty(cell)
			}
		}
	}
	return n, nil
}

// Heal runs anti-entropy rounds until one makes no exchange (at most
// rounds); false if it did not settle.
func (r *Ring) Heal(rounds int) (bool, error) {
	for range rounds {
		n, err := r.Sync()
		if err != nil || n == 0 {
			return err == nil, err
		}
	}
	return false, nil
}

// Value reads key's counter on replica i (0 when absent or deleted).
func (r *Ring) Value(i int, key string) (int64, error) {
	v, _, err := r.Reps[i].Value(TableID, []byte(key), "c")
	return v, err
}

// Values reads key on every replica.
func (r *Ring) Values(key string) ([]int64, error) {
	out := make([]int64, len(r.Reps))
	for i := range r.Reps {
		v, err := r.Value(i, key)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
