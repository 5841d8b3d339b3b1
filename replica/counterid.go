package replica

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/vfs"
)

// Files of the counter identity (see the package documentation).
const (
	counterIDFile     = "counter_id"
	cleanShutdownFile = "clean_shutdown"
)

// counterIdentity is this node's counter ids: the one its leader shards
// are written under now, and the ones it wrote under before (newest
// first). A node takes a fresh counter id after every unclean start,
// because its own shard may have gone back: a periodic-mode commit log
// loses its last period at a power cut, a disk fault can cut a segment.
// Writing on under the old id would reuse clocks that the other replicas
// already hold with other counts, and the merge (higher clock wins) would
// drop the increments written under them. Under a new id the old shard is
// frozen: every replica's copy merges to the highest one, which holds every
// increment any replica acknowledged, and new increments count in the new
// shard. Cassandra ≤ 2.0 offered the same cure by hand (renewing the
// counter id after data loss); the cost is one more shard in each cell the
// node leads after each unclean start.
type counterIdentity struct {
	current counters.ID
	past    []counters.ID
}

// owns reports whether id is one of this node's counter ids, current or past.
func (ci counterIdentity) owns(id counters.ID) bool {
	if id == ci.current {
		return true
	}
	for _, p := range ci.past {
		if p == id {
			return true
		}
	}
	return false
}

// loadCounterIdentity reads the counter ids, renewing the current one when
// the last run did not end with a clean shutdown, and removes the
// clean-shutdown marker so that a crash of this run is seen as unclean by
// the next. fresh is true for a data directory this Open created: its
// counter id is the host id.
func loadCounterIdentity(fsys vfs.FS, ids io.Reader, dir string, hostID counters.ID, fresh bool) (ci counterIdentity, renewed bool, err error) {
	fsys = vfs.Or(fsys)
	p := filepath.Join(dir, counterIDFile)
	b, err := fsys.ReadFile(p)
	haveFile := err == nil
	switch {
	case haveFile:
		ids, perr := parseCounterIDs(b)
		if perr != nil {
			return ci, false, fmt.Errorf("replica: %s: %w", p, perr)
		}
		ci = counterIdentity{current: ids[0], past: ids[1:]}
	case errors.Is(err, fs.ErrNotExist):
		ci = counterIdentity{current: hostID}
	default:
		return ci, false, fmt.Errorf("replica: read %s: %w", p, err)
	}
	marker := filepath.Join(dir, cleanShutdownFile)
	_, err = fsys.Stat(marker)
	clean := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ci, false, fmt.Errorf("replica: stat %s: %w", marker, err)
	}
	if !clean && !fresh {
		var id counters.ID
		if _, err := io.ReadFull(ids, id[:]); err != nil {
			return ci, false, fmt.Errorf("replica: generate counter id: %w", err)
		}
		ci = counterIdentity{current: id, past: append([]counters.ID{ci.current}, ci.past...)}
		renewed = true
	}
	if renewed || !haveFile {
		if err := vfs.WriteFileAtomic(fsys, dir, counterIDFile, formatCounterIDs(ci)); err != nil {
			return ci, false, fmt.Errorf("replica: write %s: %w", p, err)
		}
	}
	if clean {
		if err := fsys.Remove(marker); err != nil {
			return ci, false, fmt.Errorf("replica: remove %s: %w", marker, err)
		}
		if err := fsys.SyncDir(dir); err != nil {
			return ci, false, fmt.Errorf("replica: sync %s: %w", dir, err)
		}
	}
	return ci, renewed, nil
}

// markCleanShutdown records that everything this run wrote is durable in
// the commit log and the SSTables, so that the next Open keeps the counter id.
func markCleanShutdown(fsys vfs.FS, dir string) error {
	if err := vfs.WriteFileAtomic(fsys, dir, cleanShutdownFile, []byte("clean\n")); err != nil {
		return fmt.Errorf("replica: write %s: %w", cleanShutdownFile, err)
	}
	return nil
}

// formatCounterIDs writes the ids one per line in hex, current first.
func formatCounterIDs(ci counterIdentity) []byte {
	var b strings.Builder
	b.WriteString(hex.EncodeToString(ci.current[:]))
	b.WriteByte('\n')
	for _, p := range ci.past {
		b.WriteString(hex.EncodeToString(p[:]))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// parseCounterIDs reads formatCounterIDs' output: at least one id, each a
// 32-digit hex line, no id twice.
func parseCounterIDs(b []byte) ([]counters.ID, error) {
	var ids []counters.ID
	seen := map[counters.ID]bool{}
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		raw, err := hex.DecodeString(strings.TrimSpace(line))
		if err != nil || len(raw) != counters.IDLen {
			return nil, fmt.Errorf("line %d is not a 16-byte hex counter id", i+1)
		}
		var id counters.ID
		copy(id[:], raw)
		if seen[id] {
			return nil, fmt.Errorf("line %d repeats counter id %s", i+1, id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, errors.New("no counter id")
	}
	return ids, nil
}
