package coordinator

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/idemkv/idemkv/coltype"
	"github.com/idemkv/idemkv/commitlog"
	"github.com/idemkv/idemkv/row"
	"github.com/idemkv/idemkv/transport"
)

// Message types of the coordinator, in transport's 16–47 range.
const (
	// TypeCounterWrite carries a client's counter update from a coordinator
	// to the leader it chose: consistency level, coordinator's DC, update.
	TypeCounterWrite transport.Type = 16
	// TypeMutation carries replicated state (a leader's shard, a hint, a
	// read repair) to a replica. Body: table (uint64), key (length-
	// prefixed), the cell, the op (flag, id, time), then, only on a leader's
	// replication of an update with an op id it counted (an FBF leader's
	// own shard alone), the byte 1 and the op's delta (int64): the replica
	// checks it against the ops it led itself (conflict.go). The answer's
	// body is empty, or the byte 1: the replica counts the same op under a
	// lower counter id, and the sender takes its own application back.
	TypeMutation transport.Type = 17
	// TypeRead asks a replica for its version of a partition.
	TypeRead transport.Type = 18
)

// IsCoordinatorType reports whether a message type belongs to this package.
func IsCoordinatorType(t transport.Type) bool { return t >= 16 && t <= 31 }

// wireVersion prefixes every body so that a later format can be told apart.
const wireVersion = 1

// errWire is wrapped by every decoding error.
var errWire = errors.New("coordinator: malformed message")

type enc struct{ b []byte }

func newEnc() *enc            { return &enc{b: append(make([]byte, 0, 256), wireVersion)} } // most messages fit: no regrowth
func (e *enc) u8(v uint8)     { e.b = append(e.b, v) }
func (e *enc) u16(v uint16)   { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *enc) u32(v uint32)   { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64)   { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) i64(v int64)    { e.u64(uint64(v)) }
func (e *enc) bytes(v []byte) { e.u32(uint32(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)   { e.u32(uint32(len(v))); e.b = append(e.b, v...) }
func (e *enc) boolean(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

type dec struct {
	b   []byte
	err error
}

// newDec returns a decoder of b, checking its version. It is a value, which
// its caller keeps on its stack.
func newDec(b []byte) dec {
	d := dec{b: b}
	if v := d.u8(); d.err == nil && v != wireVersion {
		d.fail("version %d, want %d", v, wireVersion)
	}
	return d
}

func (d *dec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{errWire}, args...)...)
	}
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("need %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}
func (d *dec) u16() uint16 {
	if v := d.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}
func (d *dec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}
func (d *dec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}
func (d *dec) i64() int64    { return int64(d.u64()) }
func (d *dec) bytes() []byte { return d.take(int(d.u32())) }
func (d *dec) str() string   { return string(d.bytes()) }
func (d *dec) boolean() bool {
	v := d.u8()
	if v > 1 {
		d.fail("boolean byte %d", v)
	}
	return v == 1
}

// end checks that the body was consumed exactly.
func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func (e *enc) update(u coltype.Update) {
	e.u64(u.Table)
	e.bytes(u.Key)
	e.str(u.Column)
	e.i64(u.Delta)
	e.i64(u.Timestamp)
	e.op(u.HasOp, u.OpID, u.OpTime)
	e.boolean(u.Delete)
	if u.Delete {
		e.bytes(u.Context)
	}
	e.str(u.Element)
}

func (d *dec) update() coltype.Update {
	u := coltype.Update{Table: d.u64(), Key: d.bytes(), Column: d.str(), Delta: d.i64(), Timestamp: d.i64()}
	u.HasOp, u.OpID, u.OpTime = d.op()
	if u.Delete = d.boolean(); u.Delete {
		u.Context = d.bytes()
	}
	u.Element = d.str()
	return u
}

func (e *enc) op(has bool, id [16]byte, t int64) {
	e.boolean(has)
	if has {
		e.b = append(e.b, id[:]...)
		e.i64(t)
	}
}

func (d *dec) op() (has bool, id [16]byte, t int64) {
	if has = d.boolean(); has {
		copy(id[:], d.take(16))
		t = d.i64()
	}
	return
}

func (e *enc) cell(c row.Cell) {
	e.str(c.Column)
	e.boolean(c.Tombstone)
	e.i64(c.Timestamp)
	e.bytes(c.Value)
}

func (d *dec) cell() row.Cell {
	return row.Cell{Column: d.str(), Tombstone: d.boolean(), Timestamp: d.i64(), Value: d.bytes()}
}

func (e *enc) mutation(m coltype.Mutation) {
	e.u64(m.Table)
	e.bytes(m.Key)
	e.cell(m.Cell)
	e.op(m.HasOp, m.OpID, m.OpTime)
	if counted(m) {
		e.u8(1)
		e.i64(m.Log.Delta)
	}
}

// mutation decodes a mutation that ends the body (its counted mark is
// optional).
func (d *dec) mutation() coltype.Mutation {
	m := coltype.Mutation{Table: d.u64(), Key: d.bytes(), Cell: d.cell()}
	m.HasOp, m.OpID, m.OpTime = d.op()
	if d.err == nil && len(d.b) > 0 {
		if v := d.u8(); v != 1 || !m.HasOp {
			d.fail("mutation mark %d (op %v)", v, m.HasOp)
		}
		m.Log.Led, m.Log.Delta = true, d.i64()
	}
	return m
}

// counted reports whether a mutation is a leader's replication of an
// update with an op id it counted: it then carries the op's delta, so that
// a replica that counted the same op as leader can tell (conflict.go).
func counted(m coltype.Mutation) bool { return m.HasOp && m.Log.Led && !m.Log.Compensation }

// EncodeMutation is the body of a TypeMutation message.
func EncodeMutation(m coltype.Mutation) []byte {
	e := newEnc()
	e.mutation(m)
	return e.b
}

// DecodeMutation parses a TypeMutation body.
func DecodeMutation(b []byte) (coltype.Mutation, error) {
	d := newDec(b)
	m := d.mutation()
	return m, d.end()
}

// Counter write request and its answer.

type counterWrite struct {
	cl      ConsistencyLevel
	localDC string
	u       coltype.Update
}

func encodeCounterWrite(w counterWrite) []byte {
	e := newEnc()
	e.u16(uint16(w.cl))
	e.str(w.localDC)
	e.update(w.u)
	return e.b
}

func decodeCounterWrite(b []byte) (counterWrite, error) {
	d := newDec(b)
	w := counterWrite{cl: ConsistencyLevel(d.u16()), localDC: d.str(), u: d.update()}
	return w, d.end()
}

// Answer status codes.
const (
	statusOK           = 0
	statusUnavailable  = 1
	statusWriteTimeout = 2
	statusInvalid      = 3
	statusError        = 4
	statusInDoubt      = 5 // nothing applied: the cell holds an update in doubt
	// statusDismissed is statusOK for a retry the leader's filter
	// recognised: nothing applied now, the first attempt's copy is on
	// as many replicas as the level asks.
	statusDismissed = 6
	// statusWriteFailure: the leader refused the update (RefuseWrites).
	statusWriteFailure = 7
)

// encodeResult turns a leader's outcome into an answer body; the typed
// errors survive the trip.
func encodeResult(dismissed bool, err error) []byte {
	e := newEnc()
	var un *UnavailableError
	var wt *WriteTimeoutError
	var inv *InvalidError
	var wf *WriteFailureError
	switch {
	case err == nil && dismissed:
		e.u8(statusDismissed)
	case err == nil:
		e.u8(statusOK)
	case errors.Is(err, errLeaderInDoubt):
		e.u8(statusInDoubt)
	case errors.As(err, &un):
		e.u8(statusUnavailable)
		e.u16(uint16(un.CL))
		e.u32(uint32(un.Required))
		e.u32(uint32(un.Alive))
	case errors.As(err, &wt):
		e.u8(statusWriteTimeout)
		e.u16(uint16(wt.CL))
		e.u32(uint32(wt.Received))
		e.u32(uint32(wt.BlockFor))
		e.str(string(wt.WriteType))
	case errors.As(err, &wf):
		e.u8(statusWriteFailure)
		e.u16(uint16(wf.CL))
		e.u32(uint32(wf.Received))
		e.u32(uint32(wf.BlockFor))
		e.u32(uint32(wf.Failures))
		e.str(string(wf.WriteType))
		e.u32(uint32(len(wf.FailedReplicas)))
		for _, r := range wf.FailedReplicas {
			e.str(r)
		}
	case errors.As(err, &inv):
		e.u8(statusInvalid)
		e.str(inv.Msg)
	default:
		e.u8(statusError)
		e.str(err.Error())
	}
	return e.b
}

func decodeResult(b []byte) (dismissed bool, err error) {
	d := newDec(b)
	var out error
	switch s := d.u8(); s {
	case statusOK:
	case statusDismissed:
		dismissed = true
	case statusUnavailable:
		out = &UnavailableError{CL: ConsistencyLevel(d.u16()), Required: int(d.u32()), Alive: int(d.u32())}
	case statusWriteTimeout:
		out = &WriteTimeoutError{CL: ConsistencyLevel(d.u16()), Received: int(d.u32()), BlockFor: int(d.u32()), WriteType: WriteType(d.str())}
	case statusWriteFailure:
		wf := &WriteFailureError{CL: ConsistencyLevel(d.u16()), Received: int(d.u32()), BlockFor: int(d.u32()), Failures: int(d.u32()), WriteType: WriteType(d.str())}
		for n := d.u32(); n > 0 && d.err == nil; n-- {
			wf.FailedReplicas = append(wf.FailedReplicas, d.str())
		}
		out = wf
	case statusInvalid:
		out = &InvalidError{Msg: d.str()}
	case statusError:
		out = errors.New(d.str())
	case statusInDoubt:
		out = errLeaderInDoubt
	default:
		d.fail("status %d", s)
	}
	if err := d.end(); err != nil {
		return false, err
	}
	return dismissed, out
}

// Reads.

func encodeRead(table uint64, key []byte) []byte {
	e := newEnc()
	e.u64(table)
	e.bytes(key)
	return e.b
}

func decodeRead(b []byte) (uint64, []byte, error) {
	d := newDec(b)
	t, k := d.u64(), d.bytes()
	return t, k, d.end()
}

func encodeRow(r row.Row, found bool) []byte {
	e := newEnc()
	e.boolean(found)
	if found {
		e.u32(uint32(len(r.Cells)))
		for _, c := range r.Cells {
			e.cell(c)
		}
	}
	return e.b
}

// maxCells bounds a decoded row so that a corrupt count cannot allocate much.
const maxCells = 1 << 16

func decodeRow(key row.Key, b []byte) (row.Row, bool, error) {
	d := newDec(b)
	found := d.boolean()
	r := row.Row{Key: key}
	if found {
		n := d.u32()
		if n > maxCells {
			d.fail("%d cells", n)
		}
		for i := uint32(0); i < n && d.err == nil; i++ {
			c := d.cell()
			if len(r.Cells) > 0 && r.Cells[len(r.Cells)-1].Column >= c.Column {
				d.fail("cells not sorted by column")
			}
			r.Cells = append(r.Cells, c)
		}
	}
	return r, found, d.end()
}

func replicaCell(r commitlog.Record) row.Cell {
	return row.Cell{Column: r.Column, Value: r.Payload, Timestamp: r.Timestamp, Tombstone: r.Kind == commitlog.PayloadTombstone}
}

// Client requests: what a client library sends a node to have it coordinate
// a counter write or a read (until the CQL server carries them).

// EncodeWriteRequest is the body of a client's counter write request.
func EncodeWriteRequest(cl ConsistencyLevel, u coltype.Update) []byte {
	e := newEnc()
	e.u16(uint16(cl))
	e.update(u)
	return e.b
}

// DecodeWriteRequest parses a client's counter write request.
func DecodeWriteRequest(b []byte) (ConsistencyLevel, coltype.Update, error) {
	d := newDec(b)
	cl, u := ConsistencyLevel(d.u16()), d.update()
	return cl, u, d.end()
}

// EncodeResult encodes an outcome so that the typed errors
// (*UnavailableError, *WriteTimeoutError, *InvalidError) survive the trip.
func EncodeResult(err error) []byte { return encodeResult(false, err) }

// DecodeResult is EncodeResult's inverse: nil for success, else the error.
func DecodeResult(b []byte) error { _, err := decodeResult(b); return err }

// EncodeReadRequest is the body of a client's read request.
func EncodeReadRequest(cl ConsistencyLevel, table uint64, key []byte) []byte {
	e := newEnc()
	e.u16(uint16(cl))
	e.u64(table)
	e.bytes(key)
	return e.b
}

// DecodeReadRequest parses a client's read request.
func DecodeReadRequest(b []byte) (ConsistencyLevel, uint64, []byte, error) {
	d := newDec(b)
	cl, t, k := ConsistencyLevel(d.u16()), d.u64(), d.bytes()
	return cl, t, k, d.end()
}

// EncodeReadResult is the answer to a client's read: an outcome, then the
// row when the outcome is success.
func EncodeReadResult(r row.Row, found bool, err error) []byte {
	out := encodeResult(false, err)
	if err == nil {
		out = append(out, encodeRow(r, found)...)
	}
	return out
}

// DecodeReadResult parses the answer to a client's read.
func DecodeReadResult(key row.Key, b []byte) (row.Row, bool, error) {
	d := newDec(b)
	if s := d.u8(); d.err != nil || s != statusOK {
		_, err := decodeResult(b)
		return row.Row{}, false, err
	}
	return decodeRow(key, d.b)
}
