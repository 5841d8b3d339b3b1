// Package clusterexp reproduces the FBF paper's cluster experiments on
// idemkv: Figures 6/7 (the four-step scenario), and the figures that run a
// load against a ring.
package clusterexp

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/coltype/counter"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/replica"
)

// Fig6Row is the counter's value on both replicas after one step.
type Fig6Row struct {
	Step       string
	Mode       string // vanilla, fbf, legacy
	A, B       int64  // the value each replica reads
	PaperValue int64  // what the paper's figure shows at this step (-1: not shown)
}

// Fig6 runs the paper's four-step scenario (Figs. 6 and 7) on two real
// replicas A and B of a counter with RF 2, in a fresh directory under dir:
//
//  1. A leads +1 and replicates its shard to B;
//  2. B leads +2 and replicates its shard to A;
//  3. both flush their memtables to SSTables;
//  4. A leads +3 and replicates it; the ack to the client is lost and the
//     client retries the same operation at A.
//
// The vanilla counter reads 9 (the paper's Fig. 6), the FBF counter 6
// (Fig. 7): the retry carries the op id A already holds. A third mode shows
// the 2.0 legacy counter, whose commit log holds deltas: a restart that
// replays the log over the flushed data (as before CASSANDRA-2419) counts
// the replayed deltas again.
func Fig6(dir string) ([]Fig6Row, error) {
	var out []Fig6Row
	for _, mode := range []string{"vanilla", "fbf", "legacy"} {
		rows, err := fig6Mode(filepath.Join(dir, mode), mode)
		if err != nil {
			return nil, fmt.Errorf("fig6 %s: %w", mode, err)
		}
		out = append(out, rows...)
	}
	return out, nil
}

func fig6Mode(dir, mode string) ([]Fig6Row, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := func(name string) replica.Config {
		c := replica.Config{Dir: filepath.Join(dir, name), Logger: quiet, CommitLog: commitlog.Options{Sync: commitlog.SyncBatch}}
		if mode == "legacy" {
			// Keep the flushed segments and replay them all on restart:
			// the 2.0 behaviour before CASSANDRA-2419.
			c.CommitLog.Retain = func(commitlog.SegmentInfo) bool { return true }
			c.ReplayAll = true
		}
		return c
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	a, err := replica.Open(cfg("A"))
	if err != nil {
		return nil, err
	}
	b, err := replica.Open(cfg("B"))
	if err != nil {
		a.Close()
		return nil, err
	}
	defer func() { a.Close(); b.Close() }()
	def := coltype.TableDef{ID: 6, Keyspace: "ks", Name: "c1", Columns: []coltype.ColumnDef{{Name: "c", Type: "counter"}}}
	switch mode {
	case "fbf":
		def.Options = map[string]string{counter.IdempotenceOption: `{"class": "fbf"}`}
	case "legacy":
		def.Columns[0].Type = "legacy_counter"
	}
	for _, r := range []*replica.Replica{a, b} {
		if err := r.CreateTable(def); err != nil {
			return nil, err
		}
	}
	key := []byte("c1")
	update := func(leader, other *replica.Replica, delta int64, seq uint64) error {
		u := coltype.Update{Table: def.ID, Key: key, Column: "c", Delta: delta, HasOp: true, OpTime: time.Now().UnixNano()}
		binary.BigEndian.PutUint64(u.OpID[:], 1) // client cl1
		binary.BigEndian.PutUint64(u.OpID[8:], seq)
		m, err := leader.Apply(u)
		if err != nil || m.Dismissed {
			return err
		}
		if mode == "legacy" {
			// 2.0 replicated the leader's whole context, read back from its
			// storage; the receiver stores its local shards as remote ones.
			c, found, err := leader.Read(def.ID, key, "c")
			if err != nil || !found {
				return err
			}
			ctx, err := counters.Decode(c.Value)
			if err != nil {
				return err
			}
			v, err := ctx.ClearLocal().MarshalBinary()
			if err != nil {
				return err
			}
			c.Value = v
			m = coltype.Mutation{Table: def.ID, Key: key, Cell: c}
		}
		return other.ApplyMutation(m)
	}
	var rows []Fig6Row
	read := func(step string, paper int64) error {
		va, _, err := a.Value(def.ID, key, "c")
		if err != nil {
			return err
		}
		vb, _, err := b.Value(def.ID, key, "c")
		if err != nil {
			return err
		}
		rows = append(rows, Fig6Row{Step: step, Mode: mode, A: va, B: vb, PaperValue: paper})
		return nil
	}
	fbfPaper := func(vanilla, fbf int64) int64 {
		if mode == "fbf" {
			return fbf
		}
		if mode == "legacy" {
			return -1
		}
		return vanilla
	}
	steps := []func() error{
		func() error { return update(a, b, 1, 1) },
		func() error { return update(b, a, 2, 2) },
		func() error { return errorsJoin(a.FlushAll(), b.FlushAll()) },
		func() error {
			if err := update(a, b, 3, 3); err != nil {
				return err
			}
			// The ack is lost; the client retries the same operation.
			return update(a, b, 3, 3)
		},
	}
	names := []string{"1: A leads +1", "2: B leads +2", "3: flush A and B", "4: A leads +3, ack lost, retried"}
	papers := []int64{1, 3, 3, fbfPaper(9, 6)}
	for i, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
		if mode == "legacy" {
			if err := read(names[i], -1); err != nil {
				return nil, err
			}
			continue
		}
		if err := read(names[i], papers[i]); err != nil {
			return nil, err
		}
	}
	if mode == "legacy" {
		// Restart A: its commit log is replayed over its SSTables.
		if err := a.Close(); err != nil {
			return nil, err
		}
		if a, err = replica.Open(cfg("A")); err != nil {
			return nil, err
		}
		if err := read("5: restart A, replay its log (legacy 2.0)", -1); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// WriteFig6 writes the rows as CSV and a bar chart of each mode's value
// after every step, beside the paper's, into dir.
func WriteFig6(dir string, rows []Fig6Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "fig6.csv"))
	if err != nil {
		return err
	}
	fmt.Fprintln(f, "mode,step,replica_a,replica_b,paper")
	for _, r := range rows {
		fmt.Fprintf(f, "%s,%q,%d,%d,%d\n", r.Mode, r.Step, r.A, r.B, r.PaperValue)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return plotFig6(filepath.Join(dir, "fig6.png"), rows)
}
