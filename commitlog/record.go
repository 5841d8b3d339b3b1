package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// PayloadKind says what a record's Payload holds and therefore whether
// re-applying it on replay is safe.
type PayloadKind uint8

const (
	// PayloadShard is a counter context holding global shards; merging it
	// again is harmless, so replaying it is idempotent.
	PayloadShard PayloadKind = 1
	// PayloadDelta is a legacy (Cassandra 2.0 style) local delta; replaying
	// it twice counts twice. Kept to demonstrate why 2.0 replay was unsafe.
	PayloadDelta PayloadKind = 2
	// PayloadTombstone is a deleted cell.
	PayloadTombstone PayloadKind = 3
)

// String returns the kind's name, or "PayloadKind(n)" for unknown values.
func (k PayloadKind) String() string {
	switch k {
	case PayloadShard:
		return "shard"
	case PayloadDelta:
		return "delta"
	case PayloadTombstone:
		return "tombstone"
	}
	return fmt.Sprintf("PayloadKind(%d)", uint8(k))
}

// Valid reports whether k is one of the known payload kinds.
func (k PayloadKind) Valid() bool { return k >= PayloadShard && k <= PayloadTombstone }

// RecordVersion is the version byte that starts every encoded Record.
const RecordVersion = 1

const (
	flagHasOp        = 1 << 0
	flagLed          = 1 << 1
	flagCompensation = 1 << 2
	flagCarries      = 1 << 3
	knownFlags       = flagHasOp | flagLed | flagCompensation | flagCarries

	// recordFixedSize is version, kind, flags, table, timestamp and the
	// three length words.
	recordFixedSize = 1 + 1 + 1 + 8 + 8 + 4 + 4 + 4
	// recordOpSize is the op id and op time present when HasOp is set.
	recordOpSize = 16 + 8
	// recordDeltaSize is the delta present when Led is set.
	recordDeltaSize = 8
	// carriedSize is one CarriedOp: op id, op time, delta, clock, flags.
	carriedSize = 16 + 8 + 8 + 8 + 1
)

// CarriedOp is an update a leader had added to its shard, but not yet
// logged, when it wrote a later update's record of the same shard: the
// later record's shard holds its delta, so the record names it (see
// Record.Carried).
type CarriedOp struct {
	OpID   [16]byte
	OpTime int64 // unix nanoseconds
	Delta  int64
	Clock  int64 // the shard's clock that the update gave it
	// Compensation: the update took Delta back (see Record.Compensation).
	Compensation bool
}

// Record is one logged cell write.
type Record struct {
	Table     uint64      // table id
	Key       []byte      // serialized partition key
	Column    string      // column name
	Kind      PayloadKind // what Payload holds
	Payload   []byte      // encoded by the caller (counter context bytes etc.)
	Timestamp int64       // cell write time, microseconds
	HasOp     bool        // an operation id is present
	OpID      [16]byte    // client id (uint64 BE) then sequence (uint64 BE)
	OpTime    int64       // when the op id was first seen, unix nanoseconds
	// Led marks a record this node wrote as the op's leader (only with
	// HasOp): Delta is the client's delta that the payload's shard added,
	// so that a restart can undo it if another leader counted the same op.
	Led   bool
	Delta int64
	// Compensation marks a leader's record that takes back Delta of an op
	// it had applied because another leader counted the op too (only with
	// Led).
	Compensation bool
	// Carried are the updates of the same shard, with op ids, whose deltas
	// the payload's shard holds although their own records were not
	// written yet when this one was (only with Led): if the node stops
	// before their records, this record still names them.
	Carried []CarriedOp
}

// ErrInvalidRecord is wrapped by every DecodeRecord and Validate error.
var ErrInvalidRecord = errors.New("commitlog: invalid record")

// EncodedSize returns the length of r's encoding.
func (r *Record) EncodedSize() int {
	n := recordFixedSize + len(r.Key) + len(r.Column) + len(r.Payload)
	if r.HasOp {
		n += recordOpSize
		if r.Led {
			n += recordDeltaSize
			if len(r.Carried) > 0 {
				n += 4 + carriedSize*len(r.Carried)
			}
		}
	}
	return n
}

// Validate reports whether r can be encoded and decoded again: its kind must
// be known and each variable-length field must fit a uint32 length.
func (r *Record) Validate() error {
	if !r.Kind.Valid() {
		return fmt.Errorf("%w: unknown payload kind %d", ErrInvalidRecord, uint8(r.Kind))
	}
	if r.Led && !r.HasOp || r.Compensation && !r.Led || len(r.Carried) > 0 && !r.Led {
		return fmt.Errorf("%w: Led needs HasOp, and Compensation and Carried need Led", ErrInvalidRecord)
	}
	if uint64(len(r.Carried)) > math.MaxUint32 {
		return fmt.Errorf("%w: %d carried ops exceed 2^32-1", ErrInvalidRecord, len(r.Carried))
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"key", len(r.Key)}, {"column", len(r.Column)}, {"payload", len(r.Payload)}} {
		if uint64(f.n) > math.MaxUint32 {
			return fmt.Errorf("%w: %s length %d exceeds 2^32-1", ErrInvalidRecord, f.name, f.n)
		}
	}
	return nil
}

// AppendBinary appends r's encoding (see the package documentation) to dst
// and returns the extended slice. It does not validate r: call Validate
// first if r may hold an unknown Kind, or DecodeRecord will reject the bytes.
// When HasOp is false, OpID, OpTime, Led, Delta, Compensation and Carried
// are not encoded; when Led is false, Delta, Compensation and Carried are
// not.
func (r *Record) AppendBinary(dst []byte) []byte {
	var flags byte
	if r.HasOp {
		flags |= flagHasOp
		if r.Led {
			flags |= flagLed
			if r.Compensation {
				flags |= flagCompensation
			}
			if len(r.Carried) > 0 {
				flags |= flagCarries
			}
		}
	}
	dst = append(dst, RecordVersion, byte(r.Kind), flags)
	dst = binary.BigEndian.AppendUint64(dst, r.Table)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Timestamp))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Column)))
	dst = append(dst, r.Column...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Payload)))
	dst = append(dst, r.Payload...)
	if r.HasOp {
		dst = append(dst, r.OpID[:]...)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.OpTime))
		if r.Led {
			dst = binary.BigEndian.AppendUint64(dst, uint64(r.Delta))
			if len(r.Carried) > 0 {
				dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Carried)))
				for _, c := range r.Carried {
					dst = append(dst, c.OpID[:]...)
					dst = binary.BigEndian.AppendUint64(dst, uint64(c.OpTime))
					dst = binary.BigEndian.AppendUint64(dst, uint64(c.Delta))
					dst = binary.BigEndian.AppendUint64(dst, uint64(c.Clock))
					var f byte
					if c.Compensation {
						f = 1
					}
					dst = append(dst, f)
				}
			}
		}
	}
	return dst
}

// MarshalBinary returns r's encoding. It implements encoding.BinaryMarshaler
// and fails only if r does not Validate.
func (r *Record) MarshalBinary() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r.AppendBinary(make([]byte, 0, r.EncodedSize())), nil
}

// UnmarshalBinary decodes b into r; see DecodeRecord.
func (r *Record) UnmarshalBinary(b []byte) error {
	rec, err := DecodeRecord(b)
	if err != nil {
		return err
	}
	*r = rec
	return nil
}

// DecodeRecord decodes one encoded Record. It never panics. It rejects an
// unknown version, kind or flag bit, a length that runs past the input, and
// trailing bytes, so that a successful decode re-encodes to exactly b.
// Key and Payload are fresh copies (nil when empty): they do not alias b.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if len(b) < recordFixedSize {
		return r, fmt.Errorf("%w: %d bytes, shorter than the %d-byte fixed part", ErrInvalidRecord, len(b), recordFixedSize)
	}
	if b[0] != RecordVersion {
		return r, fmt.Errorf("%w: unknown record version %d", ErrInvalidRecord, b[0])
	}
	r.Kind = PayloadKind(b[1])
	if !r.Kind.Valid() {
		return r, fmt.Errorf("%w: unknown payload kind %d", ErrInvalidRecord, b[1])
	}
	flags := b[2]
	if flags&^knownFlags != 0 {
		return r, fmt.Errorf("%w: unknown flag bits %#02x", ErrInvalidRecord, flags&^knownFlags)
	}
	r.HasOp = flags&flagHasOp != 0
	r.Led = flags&flagLed != 0
	r.Compensation = flags&flagCompensation != 0
	carries := flags&flagCarries != 0
	if r.Led && !r.HasOp || (r.Compensation || carries) && !r.Led {
		return r, fmt.Errorf("%w: flags %#02x: led needs an op id, and compensation and carried ops need led", ErrInvalidRecord, flags)
	}
	r.Table = binary.BigEndian.Uint64(b[3:])
	r.Timestamp = int64(binary.BigEndian.Uint64(b[11:]))
	off := 19
	field := func(name string) ([]byte, error) {
		if len(b)-off < 4 {
			return nil, fmt.Errorf("%w: %s length at byte %d truncated", ErrInvalidRecord, name, off)
		}
		n := uint64(binary.BigEndian.Uint32(b[off:]))
		off += 4
		if n > uint64(len(b)-off) {
			return nil, fmt.Errorf("%w: %s length %d at byte %d exceeds the %d bytes left", ErrInvalidRecord, name, n, off-4, len(b)-off)
		}
		v := b[off : off+int(n)]
		off += int(n)
		return v, nil
	}
	key, err := field("key")
	if err != nil {
		return Record{}, err
	}
	col, err := field("column")
	if err != nil {
		return Record{}, err
	}
	payload, err := field("payload")
	if err != nil {
		return Record{}, err
	}
	if r.HasOp {
		if len(b)-off < recordOpSize {
			return Record{}, fmt.Errorf("%w: op id at byte %d truncated", ErrInvalidRecord, off)
		}
		copy(r.OpID[:], b[off:])
		r.OpTime = int64(binary.BigEndian.Uint64(b[off+16:]))
		off += recordOpSize
		if r.Led {
			if len(b)-off < recordDeltaSize {
				return Record{}, fmt.Errorf("%w: delta at byte %d truncated", ErrInvalidRecord, off)
			}
			r.Delta = int64(binary.BigEndian.Uint64(b[off:]))
			off += recordDeltaSize
			if carries {
				if r.Carried, err = decodeCarried(b, &off); err != nil {
					return Record{}, err
				}
			}
		}
	}
	if off != len(b) {
		return Record{}, fmt.Errorf("%w: %d trailing bytes after byte %d", ErrInvalidRecord, len(b)-off, off)
	}
	if len(key)+len(payload) > 0 {
		buf := make([]byte, len(key)+len(payload))
		copy(buf, key)
		copy(buf[len(key):], payload)
		if len(key) > 0 {
			r.Key = buf[:len(key):len(key)]
		}
		if len(payload) > 0 {
			r.Payload = buf[len(key):]
		}
	}
	r.Column = string(col)
	return r, nil
}

// decodeCarried decodes the carried ops at b[*off:] (a count, then the ops)
// and advances *off past them.
func decodeCarried(b []byte, off *int) ([]CarriedOp, error) {
	if len(b)-*off < 4 {
		return nil, fmt.Errorf("%w: carried op count at byte %d truncated", ErrInvalidRecord, *off)
	}
	n := uint64(binary.BigEndian.Uint32(b[*off:]))
	if n == 0 {
		return nil, fmt.Errorf("%w: carried op count 0 at byte %d (the flag says there are some)", ErrInvalidRecord, *off)
	}
	*off += 4
	if n*carriedSize > uint64(len(b)-*off) {
		return nil, fmt.Errorf("%w: %d carried ops at byte %d exceed the %d bytes left", ErrInvalidRecord, n, *off-4, len(b)-*off)
	}
	out := make([]CarriedOp, n)
	for i := range out {
		c := &out[i]
		p := b[*off:]
		copy(c.OpID[:], p)
		c.OpTime = int64(binary.BigEndian.Uint64(p[16:]))
		c.Delta = int64(binary.BigEndian.Uint64(p[24:]))
		c.Clock = int64(binary.BigEndian.Uint64(p[32:]))
		switch p[40] {
		case 0:
		case 1:
			c.Compensation = true
		default:
			return nil, fmt.Errorf("%w: carried op %d at byte %d: unknown flags %#02x", ErrInvalidRecord, i, *off, p[40])
		}
		*off += carriedSize
	}
	return out, nil
}
