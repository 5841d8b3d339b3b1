package fbf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// Snapshot format, version 1, little-endian:
//
//	magic "IFBF" | version u8 | 3 zero bytes
//	m u64 | k u32 | N u32 | t i64 (ns)
//	now i64 | periodStart i64 | nextRefresh i64 | nextAdapt i64 (unix ns)
//	pad u32 | real filters u32
//	per real filter, future first: flags u8 (1 = future, 2 = never was the
//	    future) | closedAt i64 |
//	    ids i64 | ⌈m/64⌉ words u64
//	CRC-32C of everything before it, u32
const (
	snapshotMagic   = "IFBF"
	snapshotVersion = 1
	headerLen       = 4 + 4 + 8 + 4 + 4 + 8 + 4*8 + 4 + 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrSnapshot is wrapped by every snapshot decoding error.
var ErrSnapshot = errors.New("fbf: bad snapshot")

func snapErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrSnapshot, fmt.Sprintf(format, a...))
}

// MarshalBinary encodes the filter's state (bits, id counts, N, t and the
// refresh schedule) with a version and a CRC-32C checksum.
func (f *Filter) MarshalBinary() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.gen.Load()
	b := make([]byte, 0, headerLen+len(g.slots)*(17+8*f.nwords)+4)
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, f.m)
	b = binary.LittleEndian.AppendUint32(b, uint32(f.k))
	b = binary.LittleEndian.AppendUint32(b, uint32(f.past))
	b = binary.LittleEndian.AppendUint64(b, uint64(f.period))
	for _, v := range []int64{f.now, f.periodStart, f.nextRefresh, f.nextAdapt} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(g.pad))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(g.slots)))
	for _, s := range g.slots {
		var fl byte
		if s.open {
			fl = 1
		}
		if s.noFuture {
			fl |= 2
		}
		b = append(b, fl)
		b = binary.LittleEndian.AppendUint64(b, uint64(s.closedAt))
		b = binary.LittleEndian.AppendUint64(b, uint64(s.ids.Load()))
		for i := range s.words {
			b = binary.LittleEndian.AppendUint64(b, loadWord(&s.words[i]))
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable)), nil
}

// UnmarshalBinary replaces the filter's state with a snapshot made by
// MarshalBinary. The snapshot's m and k must equal the filter's. N and t are
// taken from the snapshot, then clamped to the configured bounds, and t is
// raised if needed so that (N+1)·t covers RetryHorizon. A truncated, corrupt
// or incompatible snapshot is an error and leaves the filter unchanged.
func (f *Filter) UnmarshalBinary(data []byte) error {
	if len(data) < headerLen+4 {
		return snapErr("%d bytes, shorter than the header", len(data))
	}
	if string(data[:4]) != snapshotMagic {
		return snapErr("magic %q, want %q", data[:4], snapshotMagic)
	}
	if data[4] != snapshotVersion {
		return snapErr("version %d, want %d", data[4], snapshotVersion)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, crcTable); got != sum {
		return snapErr("checksum %08x, want %08x", got, sum)
	}
	if data[5]|data[6]|data[7] != 0 {
		return snapErr("reserved bytes not zero")
	}
	le := binary.LittleEndian
	p := 8
	u64 := func() uint64 { v := le.Uint64(data[p:]); p += 8; return v }
	u32 := func() uint32 { v := le.Uint32(data[p:]); p += 4; return v }
	m, k, past := u64(), u32(), u32()
	period := time.Duration(u64())
	now, periodStart, nextRefresh, nextAdapt := int64(u64()), int64(u64()), int64(u64()), int64(u64())
	pad, n := u32(), u32()
	if m != f.m || uint64(k) != f.k {
		return snapErr("filter of m=%d k=%d, want m=%d k=%d", m, k, f.m, f.k)
	}
	if past < 1 || past > maxPastLimit || period <= 0 {
		return snapErr("N=%d t=%v out of range", past, period)
	}
	if n < 2 || n > maxPastLimit+2 || pad > maxPastLimit {
		return snapErr("%d filters and %d placeholders out of range", n, pad)
	}
	slotLen := 1 + 8 + 8 + 8*f.nwords
	if want := headerLen + int(n)*slotLen; len(body) != want {
		return snapErr("%d bytes for %d filters, want %d", len(body), n, want)
	}
	if now <= 0 || periodStart <= 0 || nextRefresh <= periodStart || nextAdapt <= 0 || periodStart > now || nextRefresh-periodStart > int64(maxPeriodLimit) {
		return snapErr("inconsistent times")
	}
	slots := make([]*slot, n)
	tail := uint64(0)
	if r := f.m % 64; r != 0 {
		tail = ^uint64(0) << r
	}
	for i := range slots {
		fl := data[p]
		p++
		closedAt, ids := int64(u64()), int64(u64())
		if fl > 2 || (fl == 1) != (i == 0) {
			return snapErr("filter %d: flags %d", i, fl)
		}
		if ids < 0 || (fl != 1 && closedAt <= 0) || (fl == 1 && closedAt != 0) || closedAt > now {
			return snapErr("filter %d: ids %d closed at %d", i, ids, closedAt)
		}
		s := f.newSlot()
		s.open = fl == 1
		s.noFuture = fl == 2
		s.closedAt = closedAt
		s.ids.Store(ids)
		for w := range s.words {
			s.words[w] = u64()
		}
		if s.words[len(s.words)-1]&tail != 0 {
			return snapErr("filter %d: bits set beyond m", i)
		}
		slots[i] = s
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.cfg
	f.past = min(max(int(past), c.MinPast), c.MaxPast)
	f.period = min(max(period, c.MinPeriod), c.MaxPeriod)
	if window(f.past, f.period) < c.RetryHorizon {
		f.period = max(f.period, ceilDiv(c.RetryHorizon, f.past+1))
	}
	f.now, f.periodStart, f.nextRefresh, f.nextAdapt = now, periodStart, nextRefresh, nextAdapt
	f.counters = Counters{}
	f.gen.Store(&generation{slots: slots, pad: int(pad)})
	f.publishDeadline()
	return nil
}

// maxPeriodLimit bounds a snapshot's refresh period.
const maxPeriodLimit = 100 * 365 * 24 * time.Hour
