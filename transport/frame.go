package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ErrProtocol marks a violation of the wire protocol by the other end of a
// TCP connection: bad magic, unsupported version, a malformed, oversized or
// corrupt frame. The connection is closed when it happens.
var ErrProtocol = errors.New("transport: protocol error")

// ProtocolVersion is the version of the TCP wire protocol this package speaks.
const ProtocolVersion uint16 = 1

// DefaultMaxFrame is the default limit on a frame's body, in bytes.
const DefaultMaxFrame = 64 << 20

const (
	magic = "IDKV"

	// preambleFixed is magic, version, reserved flags and the address length.
	preambleFixed = 4 + 2 + 2 + 2
	// maxAddrLen bounds the address carried by a preamble.
	maxAddrLen = 1024

	// headerLen is length(4) | flags(1) | request id(8) | type(2).
	headerLen = 4 + 1 + 8 + 2
	crcLen    = 4
)

// Frame kinds, the low two bits of the flags byte. The other six bits are
// reserved and must be zero.
const (
	kindRequest  byte = 0
	kindResponse byte = 1
	kindError    byte = 2
	kindOneWay   byte = 3
	kindMask     byte = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameBuf is readFrame's scratch space: a header and a checksum.
type frameBuf [headerLen + crcLen]byte

// frame is one decoded frame.
type frame struct {
	kind byte
	id   uint64
	typ  Type
	body []byte
}

func kindName(k byte) string {
	switch k {
	case kindRequest:
		return "request"
	case kindResponse:
		return "response"
	case kindError:
		return "error"
	case kindOneWay:
		return "one-way"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// appendFrame appends the encoding of a frame to dst.
func appendFrame(dst []byte, kind byte, id uint64, typ Type, body []byte) []byte {
	start := len(dst)
	dst = appendHeader(dst, kind, id, typ, len(body))
	dst = append(dst, body...)
	crc := crc32.Checksum(dst[start:], castagnoli)
	return binary.BigEndian.AppendUint32(dst, crc)
}

func appendHeader(dst []byte, kind byte, id uint64, typ Type, n int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, kind)
	dst = binary.BigEndian.AppendUint64(dst, id)
	return binary.BigEndian.AppendUint16(dst, uint16(typ))
}

// writeFrame writes one frame to w without allocating: the header and the
// trailer are built in w's own buffer.
func writeFrame(w *bufio.Writer, kind byte, id uint64, typ Type, body []byte) error {
	if w.Available() < headerLen {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	hdr := appendHeader(w.AvailableBuffer(), kind, id, typ, len(body))
	crc := crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, body)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	if w.Available() < crcLen {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	_, err := w.Write(binary.BigEndian.AppendUint32(w.AvailableBuffer(), crc))
	return err
}

// readFrame reads and checks one frame. It returns io.EOF only when r ends
// cleanly between frames; every other failure of the peer to follow the
// protocol wraps ErrProtocol. A body longer than maxBody is refused before
// anything is allocated for it.
func readFrame(r io.Reader, maxBody uint32, hdr *frameBuf) (frame, error) {
	if _, err := io.ReadFull(r, hdr[:headerLen]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return frame{}, fmt.Errorf("%w: truncated frame header: %w", ErrProtocol, err)
		}
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	flags := hdr[4]
	f := frame{
		kind: flags & kindMask,
		id:   binary.BigEndian.Uint64(hdr[5:13]),
		typ:  Type(binary.BigEndian.Uint16(hdr[13:15])),
	}
	if n > maxBody {
		return frame{}, fmt.Errorf("%w: frame body of %d bytes exceeds the limit of %d", ErrProtocol, n, maxBody)
	}
	if flags&^kindMask != 0 {
		return frame{}, fmt.Errorf("%w: reserved flag bits set (flags %#02x)", ErrProtocol, flags)
	}
	// Body and checksum in one read, into the body's own allocation (or
	// the caller's buffer when there is no body).
	tr := hdr[headerLen:]
	if n > 0 {
		buf := make([]byte, int(n)+crcLen)
		if _, err := io.ReadFull(r, buf); err != nil {
			return frame{}, fmt.Errorf("%w: truncated frame body (%d bytes announced): %w", ErrProtocol, n, unexpected(err))
		}
		f.body, tr = buf[:n:n], buf[n:]
	} else if _, err := io.ReadFull(r, tr); err != nil {
		return frame{}, fmt.Errorf("%w: truncated frame checksum: %w", ErrProtocol, unexpected(err))
	}
	want := binary.BigEndian.Uint32(tr)
	if got := crc32.Update(crc32.Checksum(hdr[:headerLen], castagnoli), castagnoli, f.body); got != want {
		return frame{}, fmt.Errorf("%w: frame checksum mismatch (computed %#08x, frame says %#08x)", ErrProtocol, got, want)
	}
	switch {
	case f.kind == kindOneWay && f.id != 0:
		return frame{}, fmt.Errorf("%w: one-way frame with request id %d", ErrProtocol, f.id)
	case f.kind != kindOneWay && f.id == 0:
		return frame{}, fmt.Errorf("%w: %s frame with request id 0", ErrProtocol, kindName(f.kind))
	}
	return f, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// appendPreamble appends a connection preamble announcing version and the
// sender's listen address.
func appendPreamble(dst []byte, version uint16, addr Addr) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, version)
	dst = binary.BigEndian.AppendUint16(dst, 0) // reserved flags
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(addr)))
	dst = append(dst, addr...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// versionError reports a peer speaking another protocol version.
type versionError struct{ version uint16 }

func (e *versionError) Error() string {
	return fmt.Sprintf("%v: peer speaks protocol version %d, this node speaks version %d", ErrProtocol, e.version, ProtocolVersion)
}

func (e *versionError) Unwrap() error { return ErrProtocol }

// readPreamble reads a connection preamble. Magic and version come first and
// will stay where they are in every version; the rest is read only when the
// version is ours, otherwise a *versionError is returned.
func readPreamble(r io.Reader) (Addr, error) {
	var fixed [preambleFixed]byte
	if _, err := io.ReadFull(r, fixed[:6]); err != nil {
		return "", fmt.Errorf("%w: reading preamble: %w", ErrProtocol, err)
	}
	if string(fixed[:4]) != magic {
		return "", fmt.Errorf("%w: bad magic %q in preamble (want %q)", ErrProtocol, fixed[:4], magic)
	}
	if v := binary.BigEndian.Uint16(fixed[4:6]); v != ProtocolVersion {
		return "", &versionError{version: v}
	}
	if _, err := io.ReadFull(r, fixed[6:]); err != nil {
		return "", fmt.Errorf("%w: reading preamble: %w", ErrProtocol, unexpected(err))
	}
	if flags := binary.BigEndian.Uint16(fixed[6:8]); flags != 0 {
		return "", fmt.Errorf("%w: reserved preamble flags %#04x", ErrProtocol, flags)
	}
	n := binary.BigEndian.Uint16(fixed[8:10])
	if n > maxAddrLen {
		return "", fmt.Errorf("%w: preamble address of %d bytes (limit %d)", ErrProtocol, n, maxAddrLen)
	}
	rest := make([]byte, int(n)+crcLen)
	if _, err := io.ReadFull(r, rest); err != nil {
		return "", fmt.Errorf("%w: reading preamble address: %w", ErrProtocol, unexpected(err))
	}
	want := binary.BigEndian.Uint32(rest[n:])
	if got := crc32.Update(crc32.Checksum(fixed[:], castagnoli), castagnoli, rest[:n]); got != want {
		return "", fmt.Errorf("%w: preamble checksum mismatch", ErrProtocol)
	}
	return Addr(rest[:n]), nil
}
