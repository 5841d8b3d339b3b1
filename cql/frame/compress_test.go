package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/golang/snappy"
)

func TestCompressRoundTrip(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 70000)
	for i := range random {
		random[i] = byte(rnd.UintN(256))
	}
	bodies := [][]byte{nil, {}, {1}, []byte("hello"), bytes.Repeat([]byte("counter "), 5000), random, random[:17]}
	for _, c := range []Compression{LZ4, Snappy} {
		for _, b := range bodies {
			z, err := Compress(c, []byte("prefix"), b)
			if err != nil {
				t.Fatalf("%v: compress %d bytes: %v", c, len(b), err)
			}
			if !bytes.HasPrefix(z, []byte("prefix")) {
				t.Fatalf("%v: prefix lost", c)
			}
			got, err := Decompress(c, z[len("prefix"):], len(b))
			if err != nil {
				t.Fatalf("%v: decompress %d bytes: %v", c, len(b), err)
			}
			if !bytes.Equal(got, b) {
				t.Fatalf("%v: round trip of %d bytes gives %d bytes", c, len(b), len(got))
			}
			if len(b) > 0 {
				if _, err := Decompress(c, z[len("prefix"):], len(b)-1); !isTooLarge(err) {
					t.Fatalf("%v: %d bytes under a limit of %d: %v", c, len(b), len(b)-1, err)
				}
			}
		}
	}
}

func isTooLarge(err error) bool {
	var de *DecompressError
	return errors.As(err, &de) && de.TooLarge
}

// The lz4 format is Cassandra's: a 4-byte big-endian length, then the block.
func TestLZ4Layout(t *testing.T) {
	b := bytes.Repeat([]byte("ab"), 100)
	z, err := Compress(LZ4, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(z); got != 200 {
		t.Fatalf("length prefix %d, want 200", got)
	}
	// Snappy is the plain block format, which the reference decoder reads.
	s, _ := Compress(Snappy, nil, b)
	if d, err := snappy.Decode(nil, s); err != nil || !bytes.Equal(d, b) {
		t.Fatalf("snappy block: %v", err)
	}
}

func TestDecompressBadInput(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, 1<<30)
	cases := []struct {
		name     string
		c        Compression
		body     []byte
		tooLarge bool
	}{
		{"lz4 empty", LZ4, nil, false},
		{"lz4 short length", LZ4, []byte{0, 0, 1}, false},
		{"lz4 negative length", LZ4, []byte{0xff, 0xff, 0xff, 0xff, 0}, false},
		{"lz4 claims 1 GiB", LZ4, append(huge, 0x10, 'a'), true},
		{"lz4 garbage block", LZ4, []byte{0, 0, 0, 10, 0xff, 0xff, 0xff}, false},
		{"lz4 block shorter than its length", LZ4, []byte{0, 0, 0, 10, 0x30, 'a', 'b', 'c'}, false},
		{"lz4 block longer than its length", LZ4, []byte{0, 0, 0, 2, 0x30, 'a', 'b', 'c'}, false},
		{"snappy empty", Snappy, nil, false},
		{"snappy bad varint", Snappy, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false},
		{"snappy claims 1 GiB", Snappy, []byte{0x80, 0x80, 0x80, 0x80, 0x04, 0}, true},
		{"snappy garbage", Snappy, []byte{10, 0xff, 0xff, 0xff}, false},
		{"snappy truncated literal", Snappy, []byte{5, 4 << 2, 'a'}, false},
		{"unknown algorithm", Compression(9), []byte{1}, false},
	}
	for _, tc := range cases {
		out, err := Decompress(tc.c, tc.body, 1<<20)
		var de *DecompressError
		if !errors.As(err, &de) {
			t.Errorf("%s: got %q, %v; want a *DecompressError", tc.name, out, err)
			continue
		}
		if de.TooLarge != tc.tooLarge {
			t.Errorf("%s: TooLarge %v, want %v (%v)", tc.name, de.TooLarge, tc.tooLarge, err)
		}
	}
}

func TestParseCompression(t *testing.T) {
	for name, want := range map[string]Compression{"": NoCompression, "lz4": LZ4, "LZ4": LZ4, "snappy": Snappy, "Snappy": Snappy} {
		if c, ok := ParseCompression(name); !ok || c != want {
			t.Errorf("%q: %v %v", name, c, ok)
		}
	}
	for _, name := range []string{"zstd", "deflate", "lz4 ", "snapp"} {
		if _, ok := ParseCompression(name); ok {
			t.Errorf("%q accepted", name)
		}
	}
}

func TestCompressFrame(t *testing.T) {
	for _, fr := range gocqlFrames() {
		b, err := AppendFrame(nil, fr)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []Compression{LZ4, Snappy} {
			z, err := CompressFrame(c, b)
			if err != nil {
				t.Fatal(err)
			}
			h, err := ParseHeader(z)
			if err != nil {
				t.Fatal(err)
			}
			if h.Flags&FlagCompression == 0 || int(h.Length) != len(z)-HeaderSize {
				t.Fatalf("%v %v: header %+v for %d bytes", c, h.Op, h, len(z))
			}
			if _, err := DecodeFrame(h, z[HeaderSize:]); err == nil {
				t.Fatalf("%v %v: a compressed body decoded as is", c, h.Op)
			}
			body, err := Decompress(c, z[HeaderSize:], DefaultMaxBody)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, b[HeaderSize:]) {
				t.Fatalf("%v %v: body changed", c, h.Op)
			}
			want, _ := ParseHeader(b)
			h.Flags &^= FlagCompression
			h.Length = want.Length
			if h != want {
				t.Fatalf("%v: header %+v, want %+v", c, h, want)
			}
		}
	}
}
