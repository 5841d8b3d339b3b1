package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkv/idemkv/vfs"
)

// crashSeed returns IDEMKV_SEED if set, else a fixed default, and logs it so
// that a failing run can be replayed.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(20261123)
	if s := os.Getenv("IDEMKV_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("bad IDEMKV_SEED %q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with IDEMKV_SEED=%d)", seed, seed)
	return seed
}

const crashDir = "/db/commitlog"

// crashKey identifies a test record: writer and sequence number.
type crashKey struct{ w, seq uint32 }

func crashRecord(rng *rand.Rand, k crashKey) Record {
	key := binary.BigEndian.AppendUint32(nil, k.w)
	key = binary.BigEndian.AppendUint32(key, k.seq)
	r := Record{Table: 7, Key: key, Column: "c", Kind: PayloadShard,
		Payload: randBytes(rng, rng.IntN(80)), Timestamp: int64(k.seq)}
	if k.seq%2 == 0 {
		r.HasOp, r.OpID, r.OpTime = true, [16]byte{byte(k.w), byte(k.seq)}, int64(k.seq)
	}
	return r
}

func keyOf(r Record) (crashKey, bool) {
	if len(r.Key) != 8 {
		return crashKey{}, false
	}
	return crashKey{binary.BigEndian.Uint32(r.Key), binary.BigEndian.Uint32(r.Key[4:])}, true
}

// crashOutcome is what one crash run produced.
type crashOutcome struct {
	mode      SyncMode
	attempted map[crashKey]Record   // every record handed to Append
	acked     map[crashKey]Position // Append returned nil before the crash
	durable   Position              // Durable() just before the crash
	replayed  []logged              // what Open on the crashed FS replayed
	openErr   error
}

// crashRun runs `writers` concurrent appenders on a MemFS (prepared by
// setup, if not nil), crashes it once at least `after` appends are
// acknowledged, and reopens the log on what survived.
func crashRun(t *testing.T, mode SyncMode, access AccessMode, seed uint64, after int, tear string, setup func(*vfs.MemFS), reopen Options) crashOutcome {
	t.Helper()
	mem := vfs.NewMem()
	if setup != nil {
		setup(mem)
	}
	segSize := int64(1024)
	if tear == "pages" {
		segSize = 8 * vfs.PageSize // several pages a crash may keep out of order
	}
	opts := Options{Dir: crashDir, FS: mem, SegmentSize: segSize, Sync: mode, Access: access,
		SyncPeriod: time.Millisecond, GroupWindow: 100 * time.Microsecond, Logger: quietLogger()}
	l, err := Open(opts, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	out := crashOutcome{mode: mode, attempted: map[crashKey]Record{}}
	acked := map[crashKey]Position{} // guarded by mu
	var mu sync.Mutex
	nacked := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const writers = 4
	for w := uint32(0); w < writers; w++ {
		wg.Add(1)
		go func(w uint32) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for seq := uint32(0); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				k := crashKey{w, seq}
				rec := crashRecord(rng, k)
				mu.Lock()
				out.attempted[k] = rec
				mu.Unlock()
				pos, err := l.Append(&rec)
				if err != nil {
					return
				}
				mu.Lock()
				acked[k] = pos
				nacked++
				mu.Unlock()
			}
		}(w)
	}
	var crashed *vfs.MemFS
	for crashed == nil {
		mu.Lock()
		// In periodic mode wait for a periodic sync too, so that something
		// is guaranteed.
		if nacked >= after && (mode != SyncPeriodic || (Position{1, HeaderSize}).Less(l.Durable())) {
			out.acked = cloneAcked(acked)
			out.durable = l.Durable()
			crashed = mem.CrashClone(vfs.CrashOptions{Seed: seed, TearUnsynced: tear == "prefix", TearPages: tear == "pages"})
		}
		mu.Unlock()
		if crashed == nil {
			time.Sleep(50 * time.Microsecond)
		}
	}
	close(stop)
	l.Close() // the old log runs on the old FS; its result does not matter
	wg.Wait()
	// Records attempted after the crash cannot be on the crashed FS, but
	// including them only makes "invented" harder to prove: keep them all.
	reopen.Dir, reopen.FS = crashDir, crashed
	if reopen.Logger == nil {
		reopen.Logger = quietLogger()
	}
	var c collector
	l2, err := Open(reopen, c.replay)
	out.replayed = c.got
	out.openErr = err
	if err == nil {
		if err := l2.Close(); err != nil {
			t.Fatalf("Close after reopen: %v", err)
		}
	}
	return out
}

func cloneAcked(m map[crashKey]Position) map[crashKey]Position {
	c := make(map[crashKey]Position, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// check returns every violation of the log's crash guarantees in o: records
// lost that were guaranteed (all acknowledged ones in batch and group mode,
// those before the pre-crash Durable position in periodic mode), records
// replayed twice, out of order per writer, with a gap per writer, at another
// position than acknowledged, or never written.
func (o crashOutcome) check() []string {
	var probs []string
	if o.openErr != nil {
		return []string{fmt.Sprintf("Open after crash: %v", o.openErr)}
	}
	seen := map[crashKey]bool{}
	last := map[uint32]int64{}
	for _, g := range o.replayed {
		k, ok := keyOf(g.rec)
		want, written := o.attempted[k]
		if !ok || !written || !recordsEqual(want, g.rec) {
			probs = append(probs, fmt.Sprintf("invented record at %v: %+v", g.pos, g.rec))
			continue
		}
		if seen[k] {
			probs = append(probs, fmt.Sprintf("writer %d seq %d replayed twice (again at %v)", k.w, k.seq, g.pos))
		}
		seen[k] = true
		prev, any := last[k.w]
		if !any {
			prev = -1
		}
		if int64(k.seq) <= prev {
			probs = append(probs, fmt.Sprintf("writer %d: seq %d replayed after seq %d", k.w, k.seq, prev))
		} else if int64(k.seq) != prev+1 {
			probs = append(probs, fmt.Sprintf("writer %d: seq %d replayed but seq %d is missing", k.w, k.seq, prev+1))
		}
		last[k.w] = int64(k.seq)
		if p, ok := o.acked[k]; ok && p != g.pos {
			probs = append(probs, fmt.Sprintf("writer %d seq %d acknowledged at %v, replayed at %v", k.w, k.seq, p, g.pos))
		}
	}
	lost := 0
	for k, p := range o.acked {
		guaranteed := o.mode != SyncPeriodic || p.Less(o.durable)
		if guaranteed && !seen[k] {
			if lost < 5 {
				probs = append(probs, fmt.Sprintf("lost acknowledged record: writer %d seq %d at %v (durable %v)", k.w, k.seq, p, o.durable))
			}
			lost++
		}
	}
	if lost > 5 {
		probs = append(probs, fmt.Sprintf("lost acknowledged record: %d in all", lost))
	}
	return probs
}

func TestCrashRecovery(t *testing.T) {
	seed := crashSeed(t)
	for _, mode := range allModes {
		for _, access := range []AccessMode{AccessStandard, AccessMmap} {
			for _, tear := range []string{"none", "prefix", "pages"} {
				t.Run(fmt.Sprintf("%v/%v/tear=%s", mode, access, tear), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, uint64(mode)<<8|uint64(access)))
					for trial := 0; trial < 8; trial++ {
						after := 1 + rng.IntN(300)
						s := rng.Uint64()
						o := crashRun(t, mode, access, s, after, tear, nil, Options{Sync: mode, Access: access})
						if probs := o.check(); len(probs) > 0 {
							t.Fatalf("trial %d (crash after %d acks, run seed %d): %d acked, %d replayed:\n%s",
								trial, after, s, len(o.acked), len(o.replayed), strings.Join(probs, "\n"))
						}
						t.Logf("trial %d: crash after %d acks: %d attempted, %d acked, %d replayed, durable %v",
							trial, after, len(o.attempted), len(o.acked), len(o.replayed), o.durable)
						if mode != SyncPeriodic && len(o.replayed) < len(o.acked) {
							t.Fatalf("replayed %d < acked %d but no problem reported", len(o.replayed), len(o.acked))
						}
					}
				})
			}
		}
	}
}

// TestCrashCheckerDetectsLoss runs batch mode on a disk whose fsync of the
// segment files is a no-op: acknowledged records are lost at the crash, and
// the checker must say so.
func TestCrashCheckerDetectsLoss(t *testing.T) {
	seed := crashSeed(t)
	lying := func(mem *vfs.MemFS) {
		mem.FailSync(func(name string) bool { return strings.HasPrefix(filepath.Base(name), "CommitLog-1-") }, nil)
	}
	o := crashRun(t, SyncBatch, AccessAuto, seed, 50, "none", lying, Options{Sync: SyncBatch, SkipCorrupt: true})
	if o.openErr != nil {
		t.Fatalf("Open with SkipCorrupt: %v", o.openErr)
	}
	probs := o.check()
	found := false
	for _, p := range probs {
		found = found || strings.HasPrefix(p, "lost acknowledged record")
	}
	if !found {
		t.Fatalf("checker missed the loss of acknowledged records on a disk that ignores fsync (%d acked, %d replayed): %v",
			len(o.acked), len(o.replayed), probs)
	}
	// And the checker notices invented, duplicated and reordered records.
	var k crashKey
	var rec Record
	for k, rec = range o.attempted {
		break
	}
	bad := crashOutcome{mode: SyncPeriodic, attempted: o.attempted, acked: map[crashKey]Position{},
		replayed: []logged{{Position{1, 20}, rec}, {Position{1, 30}, rec}}}
	if probs := bad.check(); len(probs) == 0 {
		t.Fatalf("checker accepted writer %d seq %d replayed twice", k.w, k.seq)
	}
	forged := rec
	forged.Payload = append([]byte{1}, rec.Payload...)
	bad.replayed = []logged{{Position{1, 20}, forged}}
	if probs := bad.check(); len(probs) == 0 {
		t.Fatal("checker accepted a record that was never written")
	}
}

// TestStickyInjectedErrors: a failed fsync or write of a segment (injected
// on MemFS) fails the append it covers and every later one, and nothing
// after the failure is acknowledged as durable.
func TestStickyInjectedErrors(t *testing.T) {
	boom := errors.New("injected")
	isSeg := func(name string) bool { return strings.HasPrefix(filepath.Base(name), "CommitLog-1-") }
	for _, mode := range allModes {
		for _, access := range []AccessMode{AccessStandard, AccessMmap} {
			for _, fault := range []string{"sync", "write"} {
				if fault == "write" && access == AccessMmap {
					// A store into a mapping reports no error: the disk's
					// error surfaces at the fsync (the "sync" case).
					continue
				}
				t.Run(mode.String()+"/"+access.String()+"/"+fault, func(t *testing.T) {
					mem := vfs.NewMem()
					l := mustOpen(t, Options{Dir: crashDir, FS: mem, Sync: mode, Access: access, SyncPeriod: time.Hour}, nil)
					rec := Record{Kind: PayloadShard, Payload: []byte("x")}
					if _, err := l.Append(&rec); err != nil {
						t.Fatal(err)
					}
					if err := l.Sync(); err != nil {
						t.Fatal(err)
					}
					durable := l.Durable()
					if fault == "sync" {
						mem.FailSync(isSeg, boom)
					} else {
						mem.FailWrite(isSeg, boom)
					}
					_, err1 := l.Append(&rec)
					err2 := l.Sync()
					mem.FailSync(nil, nil)
					mem.FailWrite(nil, nil)
					_, err3 := l.Append(&rec)
					errs := []error{err2, err3}
					if mode != SyncPeriodic || fault == "write" {
						errs = append(errs, err1)
					}
					for i, err := range errs {
						if !errors.Is(err, boom) {
							t.Errorf("error %d after the injected %s failure = %v, want it to wrap the injected error", i, fault, err)
						}
					}
					if got := l.Durable(); got != durable {
						t.Errorf("Durable moved from %v to %v after a failed %s", durable, got, fault)
					}
					if err := l.Close(); !errors.Is(err, boom) {
						t.Errorf("Close = %v, want the injected error", err)
					}
				})
			}
		}
	}
}

// TestStickyPreallocateError fails the preallocation of a mapped segment
// (fallocate(2) on a full disk) at a roll: the append that needs the new
// segment fails, and so does everything after it, while the records before
// stay in the log.
func TestStickyPreallocateError(t *testing.T) {
	boom := errors.New("no space left on device")
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			l := mustOpen(t, Options{Dir: crashDir, FS: mem, Sync: mode, Access: AccessMmap, SegmentSize: 512, SyncPeriod: time.Hour}, nil)
			rec := Record{Kind: PayloadShard, Payload: make([]byte, 100)}
			var kept int
			for l.Position().Offset+frameSize(&rec) <= 512 {
				if _, err := l.Append(&rec); err != nil {
					t.Fatal(err)
				}
				kept++
			}
			mem.FailWrite(func(name string) bool { return strings.HasSuffix(name, SegmentName(2)) }, boom)
			_, err1 := l.Append(&rec) // rolls to segment 2
			err2 := l.Sync()
			mem.FailWrite(nil, nil)
			_, err3 := l.Append(&rec)
			for i, err := range []error{err1, err2, err3, l.Close()} {
				if !errors.Is(err, boom) || !strings.Contains(err.Error(), "preallocate") {
					t.Errorf("error %d after the failed preallocation = %v, want it to name the preallocation and wrap the injected error", i, err)
				}
			}
			var got int
			mustOpen(t, Options{Dir: crashDir, FS: mem.CrashClone(vfs.CrashOptions{})}, func(p Position, r Record) error {
				if p.Segment == 1 {
					got++
				}
				return nil
			}).Close()
			if got != kept {
				t.Errorf("segment 1 replays %d records after the failure, want the %d appended before the roll", got, kept)
			}
		})
	}
}
