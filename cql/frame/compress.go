package frame

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

// Compression is a frame body compression algorithm of protocol v4, chosen
// per connection by the STARTUP option COMPRESSION. The byte formats are in
// the package comment (types.go).
type Compression byte

// The algorithms: none, lz4 and snappy.
const (
	NoCompression Compression = iota
	LZ4
	Snappy
)

// ParseCompression maps a STARTUP COMPRESSION value to its algorithm; the
// name is matched without regard to case, as Cassandra lower-cases it. An
// empty name is no compression.
func ParseCompression(name string) (Compression, bool) {
	switch {
	case name == "":
		return NoCompression, true
	case equalFold(name, "lz4"):
		return LZ4, true
	case equalFold(name, "snappy"):
		return Snappy, true
	}
	return NoCompression, false
}

func equalFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// String is the algorithm's name in the protocol ("" for none).
func (c Compression) String() string {
	switch c {
	case LZ4:
		return "lz4"
	case Snappy:
		return "snappy"
	case NoCompression:
		return ""
	}
	return fmt.Sprintf("Compression(%d)", byte(c))
}

// DecompressError is returned by Decompress for a body that is not in the
// algorithm's format, or whose decompressed length is over the limit. The
// frame around it was read whole, so the stream is still in step: the
// server answers it with a protocol error on the frame's stream.
type DecompressError struct {
	Alg      Compression
	Msg      string
	TooLarge bool // the claimed length is over the limit
}

func (e *DecompressError) Error() string { return e.Msg }

var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// Compress appends the compressed form of body to dst in c's format (see
// the package comment). NoCompression appends body as is.
func Compress(c Compression, dst, body []byte) ([]byte, error) {
	switch c {
	case NoCompression:
		return append(dst, body...), nil
	case Snappy:
		n := snappy.MaxEncodedLen(len(body))
		if n < 0 {
			return dst, fmt.Errorf("frame: body of %d bytes is too large for snappy", len(body))
		}
		start := len(dst)
		dst = grow(dst, n)
		out := snappy.Encode(dst[start:start+n], body)
		return dst[:start+len(out)], nil
	case LZ4:
		if len(body) > maxInt32 {
			return dst, fmt.Errorf("frame: body of %d bytes is too large for lz4", len(body))
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
		if len(body) == 0 {
			// The empty block: one token, no literals, no match.
			return append(dst, 0), nil
		}
		bound := lz4.CompressBlockBound(len(body))
		start := len(dst)
		dst = grow(dst, bound)
		lc := lz4Compressors.Get().(*lz4.Compressor)
		n, err := lc.CompressBlock(body, dst[start:start+bound])
		lz4Compressors.Put(lc)
		if err != nil {
			return dst[:start-4], fmt.Errorf("frame: lz4: %w", err)
		}
		if n == 0 { // not expected with a destination of the bound's size
			return dst[:start-4], fmt.Errorf("frame: lz4 did not compress a body of %d bytes", len(body))
		}
		return dst[:start+n], nil
	}
	return dst, fmt.Errorf("frame: unknown compression %v", c)
}

// grow extends dst by n bytes of room, returning it with length len(dst)+n.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	return dst[:len(dst)+n]
}

// DecompressedLen is the decompressed length a body in c's format claims
// (lz4's prefix, snappy's leading uvarint), read without decompressing it.
// Every error is a *DecompressError.
func DecompressedLen(c Compression, body []byte) (int, error) {
	switch c {
	case Snappy:
		n, err := snappy.DecodedLen(body)
		if err != nil {
			// Cassandra's message (Compressor.SnappyCompressor).
			return 0, &DecompressError{Alg: c, Msg: "Provided frame does not appear to be Snappy compressed"}
		}
		return n, nil
	case LZ4:
		if len(body) < 4 {
			return 0, &DecompressError{Alg: c, Msg: fmt.Sprintf(
				"Error decompressing lz4 frame body: %d bytes, shorter than its 4-byte length", len(body))}
		}
		n := binary.BigEndian.Uint32(body)
		if n > maxInt32 {
			return 0, &DecompressError{Alg: c, Msg: fmt.Sprintf(
				"Error decompressing lz4 frame body: negative decompressed length %d", int32(n))}
		}
		return int(n), nil
	}
	return 0, &DecompressError{Alg: c, Msg: fmt.Sprintf("Unknown compression %v", c)}
}

// Decompress decompresses a frame body in c's format into a new slice. A
// decompressed length over maxLen is refused from the length the body
// claims, before anything of that size is allocated. Every error is a
// *DecompressError.
func Decompress(c Compression, body []byte, maxLen int) ([]byte, error) {
	fail := func(tooLarge bool, format string, args ...any) error {
		return &DecompressError{Alg: c, TooLarge: tooLarge, Msg: fmt.Sprintf(format, args...)}
	}
	n, err := DecompressedLen(c, body)
	if err != nil {
		return nil, err
	}
	if n > maxLen {
		return nil, fail(true, "Decompressed frame body of %d bytes exceeds maximum allowed length %d", n, maxLen)
	}
	switch c {
	case Snappy:
		out, err := snappy.Decode(make([]byte, n), body)
		if err != nil || len(out) != n {
			return nil, fail(false, "Provided frame does not appear to be Snappy compressed")
		}
		return out, nil
	case LZ4:
		if n == 0 {
			return []byte{}, nil
		}
		out := make([]byte, n)
		got, err := lz4.UncompressBlock(body[4:], out)
		if err != nil {
			return nil, fail(false, "Error decompressing lz4 frame body: %v", err)
		}
		if got != n {
			return nil, fail(false, "Error decompressing lz4 frame body: %d bytes, the body says %d", got, n)
		}
		return out, nil
	}
	return nil, fail(false, "Unknown compression %v", c)
}

// CompressFrame compresses the body of the encoded frame fr (header and
// body, as AppendFrame makes it) in c's format and sets the header's
// compression flag, returning a new frame. NoCompression returns fr.
func CompressFrame(c Compression, fr []byte) ([]byte, error) {
	if c == NoCompression {
		return fr, nil
	}
	h, err := ParseHeader(fr)
	if err != nil {
		return fr, err
	}
	hs := h.Size()
	out := make([]byte, hs, hs+len(fr)/2+16)
	out, err = Compress(c, out, fr[hs:])
	if err != nil {
		return fr, err
	}
	n := len(out) - hs
	if n > maxInt32 {
		return fr, fmt.Errorf("frame: compressed body of %d bytes", n)
	}
	h.Flags |= FlagCompression
	h.Length = int32(n)
	AppendHeader(out[:0], h)
	return out, nil
}
