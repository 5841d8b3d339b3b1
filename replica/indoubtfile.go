package replica

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/counters"
	"github.com/idemkv/idemkv/vfs"
)

// inDoubtFile is the name, in the data directory, of the file that keeps
// the updates in doubt this node has not settled (see indoubt.go).
//
// Without it the doubt lived in the commit log alone: an update led within
// the filter window before an unclean stop was put back in doubt at each
// start from its led record. That record goes once its segment is released
// (a window after the op), so a node that started more than a window after
// an update it could not settle (a replica of its cell down, the node
// killed again and again) counted it unsettled, though another leader may
// have counted its retry; and since keeping an update is not logged, every
// start put the last updates of every earlier run back in doubt, settled or
// not, a backlog that grew with each crash.
//
// The file holds the updates in doubt and, per counter id (one run of the
// node, or several runs started cleanly), the highest clock of its led
// updates that the file accounts for: at a start, an update of a run up to
// that clock is in doubt if and only if the file lists it and the log holds
// no compensation for it, and only the updates past it are judged by the
// log (the span of the run's last updates after an unclean stop). Since
// version 2 it also keeps the updates this node settled, each with its
// decision, for settleEvidenceLifetime: another leader that holds the same
// op in doubt may ask after this node restarted, and must hear "kept" or
// "taken back", not "not led" (the op's led record is forgotten after one
// filter window). Open rewrites the file before the node serves anything,
// the coordinator after each round of settlements (SaveInDoubt), and a
// clean Close.
//
// The package documentation gives its bytes.
const inDoubtFile = "in_doubt"

// inDoubtMagic is the file's magic and version. The earlier versions are
// still read: version 1 without the settled updates, version 2 without the
// other leaders that counted an update in doubt (coltype.InDoubtOp's
// CountedBy).
const (
	inDoubtMagic   = "IDKVDBT3"
	inDoubtMagicV2 = "IDKVDBT2"
	inDoubtMagicV1 = "IDKVDBT1"
)

var inDoubtCRC = crc32.MakeTable(crc32.Castagnoli)

// inDoubtState is the content of the in_doubt file.
type inDoubtState struct {
	covered map[counters.ID]int64
	ops     []coltype.InDoubtOp
	settled []settledOp
}

// settledOp is an update this node settled, its decision, and until when
// it answers with it.
type settledOp struct {
	op    coltype.InDoubtOp
	kept  bool
	until int64 // unix nanoseconds
}

func encodeInDoubt(s inDoubtState) []byte {
	b := []byte(inDoubtMagic)
	ids := slices.SortedFunc(maps.Keys(s.covered), func(a, b counters.ID) int { return a.Compare(b) })
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = append(b, id[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(s.covered[id]))
	}
	type encoded struct {
		op coltype.InDoubtOp
		b  []byte
	}
	ops := make([]encoded, len(s.ops))
	for i, op := range s.ops {
		e := appendInDoubtOp(nil, op)
		e = binary.AppendUvarint(e, uint64(len(op.CountedBy)))
		for _, id := range op.CountedBy {
			e = append(e, id[:]...)
		}
		ops[i] = encoded{op, e}
	}
	slices.SortFunc(ops, func(a, b encoded) int {
		if c := cmp.Compare(a.op.OpTime, b.op.OpTime); c != 0 {
			return c
		}
		if c := bytes.Compare(a.op.OpID[:], b.op.OpID[:]); c != 0 {
			return c
		}
		return bytes.Compare(a.b, b.b) // a total order: the same state, the same bytes
	})
	b = binary.AppendUvarint(b, uint64(len(ops)))
	for _, op := range ops {
		b = append(b, op.b...)
	}
	settled := make([]encoded, len(s.settled))
	for i, o := range s.settled {
		e := appendInDoubtOp(nil, o.op)
		var kept byte
		if o.kept {
			kept = 1
		}
		e = append(e, kept)
		settled[i] = encoded{o.op, binary.BigEndian.AppendUint64(e, uint64(o.until))}
	}
	slices.SortFunc(settled, func(a, b encoded) int {
		if c := cmp.Compare(a.op.OpTime, b.op.OpTime); c != 0 {
			return c
		}
		return bytes.Compare(a.b, b.b)
	})
	b = binary.AppendUvarint(b, uint64(len(settled)))
	for _, o := range settled {
		b = append(b, o.b...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, inDoubtCRC))
}

func appendInDoubtOp(b []byte, op coltype.InDoubtOp) []byte {
	b = binary.BigEndian.AppendUint64(b, op.Table)
	b = binary.AppendUvarint(b, uint64(len(op.Key)))
	b = append(b, op.Key...)
	b = binary.AppendUvarint(b, uint64(len(op.Column)))
	b = append(b, op.Column...)
	b = append(b, op.OpID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(op.OpTime))
	b = append(b, op.CounterID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(op.Clock))
	return binary.BigEndian.AppendUint64(b, uint64(op.Delta))
}

// inDoubtDecoder reads the file's fields, remembering the first error.
type inDoubtDecoder struct {
	b   []byte
	off int
	err error
}

func (d *inDoubtDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("offset %d: %s", d.off, fmt.Sprintf(format, args...))
	}
}

func (d *inDoubtDecoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.fail("%d bytes wanted, %d left", n, len(d.b)-d.off)
		return nil
	}
	v := d.b[d.off : d.off+n]
	d.off += n
	return v
}

func (d *inDoubtDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad length")
		return 0
	}
	d.off += n
	return v
}

func (d *inDoubtDecoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// count reads a count of items of at least min bytes each, refusing one
// the rest of the file cannot hold.
func (d *inDoubtDecoder) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)-d.off)/uint64(min) {
		d.fail("%d items cannot fit in %d bytes", n, len(d.b)-d.off)
		return 0
	}
	return int(n)
}

func (d *inDoubtDecoder) bytes() []byte {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)-d.off) {
		d.fail("length %d past the end", n)
		return nil
	}
	return slices.Clone(d.take(int(n)))
}

func decodeInDoubt(b []byte) (inDoubtState, error) {
	var s inDoubtState
	if len(b) < len(inDoubtMagic)+4 {
		return s, errors.New("not an in_doubt file (magic)")
	}
	var version int
	switch string(b[:len(inDoubtMagic)]) {
	case inDoubtMagicV1:
		version = 1
	case inDoubtMagicV2:
		version = 2
	case inDoubtMagic:
		version = 3
	default:
		return s, errors.New("not an in_doubt file (magic)")
	}
	body := b[:len(b)-4]
	if want, got := binary.BigEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, inDoubtCRC); want != got {
		return s, fmt.Errorf("checksum %08x, the file says %08x", got, want)
	}
	d := &inDoubtDecoder{b: body, off: len(inDoubtMagic)}
	n := d.count(counters.IDLen + 8)
	s.covered = make(map[counters.ID]int64, n)
	for range n {
		var id counters.ID
		copy(id[:], d.take(counters.IDLen))
		clock := int64(d.u64())
		if _, dup := s.covered[id]; dup && d.err == nil {
			d.fail("counter id %s twice", id)
		}
		s.covered[id] = clock
	}
	const opMin = 8 + 1 + 1 + 16 + 8 + counters.IDLen + 8 + 8
	m := d.count(opMin)
	for range m {
		op := d.inDoubtOp()
		if version >= 3 {
			n := d.count(counters.IDLen)
			for range n {
				var id counters.ID
				copy(id[:], d.take(counters.IDLen))
				op.CountedBy = append(op.CountedBy, id)
			}
		}
		s.ops = append(s.ops, op)
	}
	if version >= 2 {
		m := d.count(opMin + 1 + 8)
		for range m {
			o := settledOp{op: d.inDoubtOp()}
			switch k := d.take(1); {
			case k == nil:
			case k[0] <= 1:
				o.kept = k[0] == 1
			default:
				d.fail("decision %d of a settled update", k[0])
			}
			o.until = int64(d.u64())
			s.settled = append(s.settled, o)
		}
	}
	if d.err == nil && d.off != len(body) {
		d.fail("%d bytes after the last update", len(body)-d.off)
	}
	if d.err != nil {
		return inDoubtState{}, d.err
	}
	return s, nil
}

// inDoubtOp reads one update of the file.
func (d *inDoubtDecoder) inDoubtOp() coltype.InDoubtOp {
	var op coltype.InDoubtOp
	op.Table = d.u64()
	op.Key = d.bytes()
	op.Column = string(d.bytes())
	copy(op.OpID[:], d.take(16))
	op.OpTime = int64(d.u64())
	copy(op.CounterID[:], d.take(counters.IDLen))
	op.Clock = int64(d.u64())
	op.Delta = int64(d.u64())
	return op
}

// loadInDoubt reads the in_doubt file; found is false when there is none.
func loadInDoubt(fsys vfs.FS, dir string) (s inDoubtState, found bool, err error) {
	p := filepath.Join(dir, inDoubtFile)
	b, err := vfs.Or(fsys).ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return inDoubtState{}, false, nil
	}
	if err != nil {
		return inDoubtState{}, false, fmt.Errorf("replica: read %s: %w", p, err)
	}
	if s, err = decodeInDoubt(b); err != nil {
		return inDoubtState{}, false, fmt.Errorf("replica: %s: %w (it lists the updates this node led and has not settled: "+
			"without it they would be counted unsettled; restore it, or remove it to start anyway)", p, err)
	}
	return s, true, nil
}
