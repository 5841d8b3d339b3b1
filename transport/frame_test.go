package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

func TestFrameRoundTrip(t *testing.T) {
	rng := testseed.Rand(t)
	var stream, viaWriter bytes.Buffer
	bw := bufio.NewWriterSize(&viaWriter, 64) // small: exercises the flushes
	type want struct {
		kind byte
		id   uint64
		typ  Type
		body []byte
	}
	var wants []want
	for i := range 200 {
		w := want{kind: byte(rng.IntN(4)), id: rng.Uint64() | 1, typ: Type(rng.Uint32()), body: make([]byte, rng.IntN(300))}
		if w.kind == kindOneWay {
			w.id = 0
		}
		for j := range w.body {
			w.body[j] = byte(rng.Uint32())
		}
		if i%10 == 0 {
			w.body = nil
		}
		wants = append(wants, w)
		stream.Write(appendFrame(nil, w.kind, w.id, w.typ, w.body))
		if err := writeFrame(bw, w.kind, w.id, w.typ, w.body); err != nil {
			t.Fatal(err)
		}
	}
	bw.Flush()
	if !bytes.Equal(stream.Bytes(), viaWriter.Bytes()) {
		t.Fatal("writeFrame and appendFrame disagree")
	}
	var hdr frameBuf
	r := bufio.NewReader(&stream)
	for i, w := range wants {
		f, err := readFrame(r, 1<<20, &hdr)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.kind != w.kind || f.id != w.id || f.typ != w.typ || !bytes.Equal(f.body, w.body) {
			t.Fatalf("frame %d: got %+v, want %+v", i, f, w)
		}
	}
	if _, err := readFrame(r, 1<<20, &hdr); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

// TestFrameBitFlips: every single-bit error in a frame is refused.
func TestFrameBitFlips(t *testing.T) {
	rng := testseed.Rand(t)
	body := make([]byte, 40)
	for i := range body {
		body[i] = byte(rng.Uint32())
	}
	good := appendFrame(nil, kindResponse, 12345, 17, body)
	var hdr frameBuf
	for bit := range len(good) * 8 {
		b := bytes.Clone(good)
		b[bit/8] ^= 1 << (bit % 8)
		f, err := readFrame(bytes.NewReader(b), 1<<20, &hdr)
		if err == nil {
			t.Fatalf("bit %d flipped, frame accepted: %+v", bit, f)
		}
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("bit %d: %v does not wrap ErrProtocol", bit, err)
		}
	}
}

func TestPreambleRoundTrip(t *testing.T) {
	for _, a := range []Addr{"", "127.0.0.1:7000", "[::1]:7000"} {
		b := appendPreamble(nil, ProtocolVersion, a)
		got, err := readPreamble(bytes.NewReader(b))
		if err != nil || got != a {
			t.Fatalf("%q: got %q, %v", a, got, err)
		}
		for bit := range len(b) * 8 {
			c := bytes.Clone(b)
			c[bit/8] ^= 1 << (bit % 8)
			if got, err := readPreamble(bytes.NewReader(c)); err == nil {
				t.Fatalf("%q: bit %d flipped, preamble accepted as %q", a, bit, got)
			}
		}
	}
}

// FuzzFrameDecode feeds arbitrary bytes to the frame decoder: it must never
// panic, and every frame it accepts must carry a correct checksum and
// re-encode to exactly the bytes it was read from.
func FuzzFrameDecode(f *testing.F) {
	f.Add(appendFrame(nil, kindRequest, 1, 16, []byte("hello")))
	f.Add(appendFrame(appendFrame(nil, kindResponse, 1, 16, nil), kindError, 2, 17, []byte("boom")))
	f.Add(appendFrame(nil, kindOneWay, 0, 3, bytes.Repeat([]byte{0xAB}, 100)))
	f.Add(appendFrame(nil, kindRequest|0x80, 1, 1, nil))
	f.Add(binary.BigEndian.AppendUint32(make([]byte, 0, 32), 0xFFFFFFFF))
	bad := appendFrame(nil, kindRequest, 9, 9, []byte("x"))
	bad[len(bad)-1] ^= 1
	f.Add(bad)
	f.Add([]byte{})
	const max = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var hdr frameBuf
		for {
			start := len(data) - r.Len()
			fr, err := readFrame(r, max, &hdr)
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrProtocol) {
					t.Fatalf("error %v wraps neither io.EOF nor ErrProtocol", err)
				}
				return
			}
			raw := data[start : len(data)-r.Len()]
			if len(fr.body) > max {
				t.Fatalf("accepted a body of %d bytes", len(fr.body))
			}
			n := len(raw) - crcLen
			if crc32.Checksum(raw[:n], castagnoli) != binary.BigEndian.Uint32(raw[n:]) {
				t.Fatalf("accepted a frame with a bad checksum: %x", raw)
			}
			if again := appendFrame(nil, fr.kind, fr.id, fr.typ, fr.body); !bytes.Equal(again, raw) {
				t.Fatalf("decoded %+v from %x, which encodes as %x", fr, raw, again)
			}
		}
	})
}
