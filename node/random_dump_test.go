package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/vfs"
)

// dumpKeys logs, for every key whose value breaks the ledger's bounds,
// what a post-mortem needs: the key's updates with each attempt, the
// schedule's timeline, and each node's copy of the cell and the commit log
// records of the key it still holds (records of segments released since,
// or lost at a power cut, are not there).
func (c *rtCluster) dumpKeys(ups []rtUpdate, got map[rtKey]int64) {
	bounds := ledgerBounds(ups)
	for k, b := range bounds {
		if v := got[k]; v <= b.hi && v >= b.lo {
			continue
		}
		var out strings.Builder
		fmt.Fprintf(&out, "post-mortem of table %d key %s (read %d, bounds %d..%d):\n", k.table, k.key, got[k], b.lo, b.hi)
		out.WriteString("  updates:\n")
		for _, u := range ups {
			if u.rtKey != k {
				continue
			}
			fmt.Fprintf(&out, "    op %s delta %d acked %v maybe %d\n", opName(u.opID), u.delta, u.acked, u.maybe)
			for _, a := range u.attempts {
				res := map[int]string{rtAcked: "acked", rtFailed: "failed", rtUncertain: "uncertain"}[a.res]
				fmt.Fprintf(&out, "      %8.3fs..%8.3fs via node %d at %v: %s %s\n", a.sent.Seconds(), a.end.Seconds(), a.node+1, a.cl, res, a.err)
			}
		}
		out.WriteString("  timeline:\n")
		c.eventsMu.Lock()
		for _, e := range c.events {
			fmt.Fprintf(&out, "    %s\n", e)
		}
		c.eventsMu.Unlock()
		out.WriteString("  node log lines about its ops:\n")
		for _, line := range c.opLogs.lines() {
			for _, u := range ups {
				if u.rtKey == k && u.opID != ([16]byte{}) && strings.Contains(line, fmt.Sprintf("%x", u.opID)) {
					fmt.Fprintf(&out, "    %s\n", line)
					break
				}
			}
		}
		for i, r := range c.nodes {
			fmt.Fprintf(&out, "  node %d:\n", i+1)
			if r.nd == nil {
				out.WriteString("    down\n")
				continue
			}
			rep := r.nd.Replica()
			fmt.Fprintf(&out, "    counter id now %s\n", rep.CounterID())
			if cell, found, err := rep.Read(k.table, []byte(k.key), "c"); err != nil || !found {
				fmt.Fprintf(&out, "    cell: found %v, %v\n", found, err)
			} else {
				fmt.Fprintf(&out, "    cell: %s\n", shardsString(cell.Value))
			}
			for _, line := range c.logRecords(i, k) {
				fmt.Fprintf(&out, "    %s\n", line)
			}
		}
		c.t.Log(out.String())
	}
}

// logRecords lists node i's commit log records of key k, from a copy of
// its disk taken after syncing the log.
func (c *rtCluster) logRecords(i int, k rtKey) []string {
	r := c.nodes[i]
	if err := r.nd.Replica().CommitLog().Sync(); err != nil {
		return []string{fmt.Sprintf("log sync: %v", err)}
	}
	clone := r.fs.CrashClone(vfs.CrashOptions{})
	var out []string
	l, err := commitlog.Open(commitlog.Options{Dir: filepath.Join(r.cfg.DataDirectory, "commitlog"), FS: clone},
		func(pos commitlog.Position, rec commitlog.Record) error {
			if rec.Table != k.table || !bytes.Equal(rec.Key, []byte(k.key)) {
				return nil
			}
			line := fmt.Sprintf("log %d:%d", pos.Segment, pos.Offset)
			if rec.HasOp {
				line += " op " + opName(rec.OpID)
			}
			if rec.Led {
				line += fmt.Sprintf(" led delta %d", rec.Delta)
			}
			if rec.Compensation {
				line += " compensation"
			}
			for _, o := range rec.Carried {
				line += fmt.Sprintf(" carries(op %s clock %d delta %d comp %v)", opName(o.OpID), o.Clock, o.Delta, o.Compensation)
			}
			line += " " + shardsString(rec.Payload)
			out = append(out, line)
			return nil
		})
	if err != nil {
		return append(out, fmt.Sprintf("log open: %v", err))
	}
	l.Close()
	return out
}

// opName is an op id as client/sequence.
func opName(id [16]byte) string {
	return fmt.Sprintf("%d/%d", binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:]))
}

// shardsString lists a counter context's shards as id:clock=count.
func shardsString(b []byte) string {
	ctx, err := counters.Decode(b)
	if err != nil {
		return fmt.Sprintf("(%d bytes: %v)", len(b), err)
	}
	var parts []string
	for _, s := range ctx.Shards() {
		parts = append(parts, fmt.Sprintf("%s:%d=%d", s.ID.String()[:8], s.Clock, s.Count))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// opLog keeps the log lines of the nodes that name an op (attribute
// "op"), for a failure's post-mortem: settlements of updates in doubt,
// and updates two leaders counted.
type opLog struct {
	mu  sync.Mutex
	buf []string
}

func (o *opLog) lines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.buf...)
}

// logger returns a logger of node i whose records naming an op are kept.
func (o *opLog) logger(node int, since func() float64) *slog.Logger {
	return slog.New(opLogHandler{o: o, node: node, since: since})
}

type opLogHandler struct {
	o     *opLog
	node  int
	since func() float64
	attrs []slog.Attr
}

func (h opLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h opLogHandler) Handle(_ context.Context, r slog.Record) error {
	op := false
	r.Attrs(func(a slog.Attr) bool {
		op = op || a.Key == "op"
		return !op
	})
	if !op {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%8.3fs node %d: %s", h.since(), h.node+1, r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.o.mu.Lock()
	h.o.buf = append(h.o.buf, b.String())
	h.o.mu.Unlock()
	return nil
}

func (h opLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}

func (h opLogHandler) WithGroup(string) slog.Handler { return h }
