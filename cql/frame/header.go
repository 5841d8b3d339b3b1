package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Header sizes: protocol v3 and later use 9 bytes (a 2-byte stream id),
// v1 and v2 use 8 (a 1-byte stream id).
const (
	HeaderSize       = 9
	LegacyHeaderSize = 8
)

// DefaultMaxBody is the default limit on a frame body, as Cassandra's
// native_transport_max_frame_size_in_mb of Cassandra 3 (256 MiB); the CQL
// server applies its own, smaller limits (cql.DefaultMaxFrame).
const DefaultMaxBody = 256 << 20

// Protocol versions and the direction bit of the version byte.
const (
	Version3     byte = 3
	Version4     byte = 4
	ResponseBit  byte = 0x80
	MinVersion        = Version3 // the lowest version this package serves
	MaxVersion        = Version4 // the greatest
	versionMask  byte = 0x7f
	maxOpcodeVal      = OpAuthSuccess
)

// Header flags.
const (
	FlagCompression   byte = 0x01 // the body is compressed (compress.go)
	FlagTracing       byte = 0x02
	FlagCustomPayload byte = 0x04
	FlagWarning       byte = 0x08
	FlagBeta          byte = 0x10 // v5 only
)

// Header is a frame header as it is on the wire.
type Header struct {
	Version byte // the version byte, direction bit included (0x04 request, 0x84 response)
	Flags   byte
	Stream  int16
	Op      Opcode
	Length  int32 // body length
}

// ProtoVersion is the protocol version without the direction bit.
func (h Header) ProtoVersion() byte { return h.Version & versionMask }

// AnswerVersion is the version to answer a frame with header h in: its
// own, except that a version above MaxVersion is answered in MaxVersion,
// as Cassandra answers a version above its own in its greatest (5.0.9
// answers v6 and v127 in v5). The header layout is the same from v3 on;
// a version below MinVersion is answered in its own layout.
func (h Header) AnswerVersion() byte { return min(h.ProtoVersion(), MaxVersion) }

// IsResponse reports whether the direction bit says response.
func (h Header) IsResponse() bool { return h.Version&ResponseBit != 0 }

// Size is the size of this header on the wire: 8 bytes for v1 and v2, 9
// for the others.
func (h Header) Size() int { return headerSize(h.ProtoVersion()) }

func headerSize(v byte) int {
	if v == 1 || v == 2 {
		return LegacyHeaderSize
	}
	return HeaderSize
}

// AppendHeader appends h in the layout of its version (the 8-byte layout for
// v1 and v2, whose stream id is one byte).
func AppendHeader(dst []byte, h Header) []byte {
	if h.Size() == LegacyHeaderSize {
		dst = append(dst, h.Version, h.Flags, byte(h.Stream), byte(h.Op))
	} else {
		dst = append(dst, h.Version, h.Flags, byte(uint16(h.Stream)>>8), byte(h.Stream), byte(h.Op))
	}
	return binary.BigEndian.AppendUint32(dst, uint32(h.Length))
}

// ParseHeader reads a header from b, which must hold at least the header's
// size for its version byte (b[0]).
func ParseHeader(b []byte) (Header, error) {
	if len(b) < 1 {
		return Header{}, fmt.Errorf("%w: empty header", ErrMalformed)
	}
	n := headerSize(b[0] & versionMask)
	if len(b) < n {
		return Header{}, fmt.Errorf("%w: header of %d bytes, need %d", ErrMalformed, len(b), n)
	}
	h := Header{Version: b[0], Flags: b[1]}
	if n == LegacyHeaderSize {
		h.Stream = int16(int8(b[2]))
		h.Op = Opcode(b[3])
		h.Length = int32(binary.BigEndian.Uint32(b[4:8]))
	} else {
		h.Stream = int16(binary.BigEndian.Uint16(b[2:4]))
		h.Op = Opcode(b[4])
		h.Length = int32(binary.BigEndian.Uint32(b[5:9]))
	}
	return h, nil
}

// VersionError is returned by Reader.Read for a frame whose protocol version
// this package does not serve. The body has not been read. Cassandra answers
// it with a protocol error in the request's version and closes the
// connection; ProtocolError builds that answer.
type VersionError struct{ Header Header }

func (e *VersionError) Error() string { return VersionMessage(e.Header.ProtoVersion()) }

// VersionMessage is Cassandra 3.11's message for an unsupported protocol
// version (Frame.Decoder); drivers parse the greatest version out of it
// (gocql: `the lowest supported version is \d+ and the greatest is (\d+)$`).
func VersionMessage(v byte) string {
	return fmt.Sprintf("Invalid or unsupported protocol version (%d); the lowest supported version is %d and the greatest is %d",
		v, MinVersion, MaxVersion)
}

// TooLargeError is returned by Reader.Read for a frame whose body length is
// negative or over the reader's limit. The body has not been read.
type TooLargeError struct {
	Header Header
	Max    int
}

func (e *TooLargeError) Error() string {
	if e.Header.Length < 0 {
		return fmt.Sprintf("Invalid frame body length %d", e.Header.Length)
	}
	// Cassandra's wording (Frame.Decoder.fail), which counts the header.
	return fmt.Sprintf("Request is too big: length %d exceeds maximum allowed length %d.",
		int64(e.Header.Length)+int64(e.Header.Size()), int64(e.Max)+int64(e.Header.Size()))
}

// Reader reads frames from a byte stream: several frames may come in one
// read and a frame may span many.
type Reader struct {
	br      *bufio.Reader
	maxBody int
	hdr     [HeaderSize]byte

	// Pooled readers only (NewPooledReader): br is nil while nothing is
	// buffered, and the first read after that goes to small.
	src    io.Reader
	pooled bool
	small  [512]byte
	pre    prefixReader
}

// prefixReader reads pre, then src.
type prefixReader struct {
	pre []byte
	src io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.src.Read(b)
}

// readBufSize is the size of a Reader's buffer.
const readBufSize = 32 << 10

var readBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

// NewPooledReader is NewReader for a server's connections, which mostly
// wait between frames: it holds a read buffer (32 KiB) only while a frame
// is arriving or more bytes are buffered, taking it from a pool shared by
// all pooled readers and putting it back once everything that arrived is
// read, so an idle connection holds none. Release puts it back for good.
func NewPooledReader(r io.Reader, maxBody int) *Reader {
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	rd := &Reader{src: r, pooled: true, maxBody: maxBody}
	rd.pre.src = r
	return rd
}

// Release returns a pooled reader's buffer to the pool; the reader must
// not be used after. It does nothing for other readers.
func (r *Reader) Release() {
	if r.pooled && r.br != nil {
		r.br.Reset(nil)
		readBufs.Put(r.br)
		r.br = nil
	}
}

// NewReader reads frames from r, refusing bodies over maxBody bytes
// (≤ 0: DefaultMaxBody). If r is already a *bufio.Reader it is used as is.
func NewReader(r io.Reader, maxBody int) *Reader {
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 32<<10)
	}
	return &Reader{br: br, maxBody: maxBody}
}

// Read reads one frame: its header and a freshly allocated body that the
// caller owns. It returns io.EOF at a clean end of stream, and
// io.ErrUnexpectedEOF when the stream ends inside a frame. A frame of an
// unsupported version gives a *VersionError and one over the size limit a
// *TooLargeError, both with the header read and the body left unread; the
// stream is then out of step and should be closed once the error is answered.
func (r *Reader) Read() (Header, []byte, error) {
	h, err := r.ReadHeader()
	if err != nil {
		return h, nil, err
	}
	body, err := r.ReadBody(h)
	return h, body, err
}

// ReadHeader reads the header of the next frame and checks its version and
// body length against the reader's limit, with Read's errors; the body is
// left unread, for ReadBody. Splitting the two lets a server account for a
// frame (and wait) before it reads or allocates the body.
func (r *Reader) ReadHeader() (Header, error) {
	if err := r.ReadFirstByte(); err != nil {
		return Header{}, err
	}
	return r.ReadHeaderRest()
}

// ReadFirstByte reads the first byte of the next frame's header, so that a
// server can tell a connection idle between frames (this call blocks) from
// one stalled inside a frame (ReadHeaderRest or ReadBody blocks). It returns
// io.EOF at a clean end of stream.
func (r *Reader) ReadFirstByte() error {
	if r.pooled {
		if r.br != nil && r.br.Buffered() == 0 && len(r.pre.pre) == 0 {
			r.Release()
		}
		if r.br == nil {
			// Wait for the next bytes without a buffer; then take one.
			n, err := r.src.Read(r.small[:])
			if n == 0 {
				if err == nil {
					err = io.ErrNoProgress
				}
				return err
			}
			r.pre.pre = r.small[:n]
			r.br = readBufs.Get().(*bufio.Reader)
			r.br.Reset(&r.pre)
		}
	}
	_, err := io.ReadFull(r.br, r.hdr[:1])
	return err
}

// ReadHeaderRest reads the rest of the header whose first byte
// ReadFirstByte read, as ReadHeader.
func (r *Reader) ReadHeaderRest() (Header, error) {
	n := headerSize(r.hdr[0] & versionMask)
	if _, err := io.ReadFull(r.br, r.hdr[1:n]); err != nil {
		return Header{}, unexpected(err)
	}
	h, _ := ParseHeader(r.hdr[:n])
	if v := h.ProtoVersion(); v < MinVersion || v > MaxVersion {
		return h, &VersionError{Header: h}
	}
	if h.Length < 0 || int64(h.Length) > int64(r.maxBody) {
		return h, &TooLargeError{Header: h, Max: r.maxBody}
	}
	return h, nil
}

// ReadBody reads the body of the frame whose header ReadHeader returned,
// into a freshly allocated slice the caller owns.
func (r *Reader) ReadBody(h Header) ([]byte, error) {
	body := make([]byte, h.Length)
	if _, err := io.ReadFull(r.br, body); err != nil {
		return nil, unexpected(err)
	}
	return body, nil
}

// SetMaxBody changes the limit on frame bodies for the frames read from now
// on (≤ 0: DefaultMaxBody); a server raises it once a connection's
// handshake is done.
func (r *Reader) SetMaxBody(n int) {
	if n <= 0 {
		n = DefaultMaxBody
	}
	r.maxBody = n
}

// MaxBody is the reader's current limit on frame bodies.
func (r *Reader) MaxBody() int { return r.maxBody }

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
