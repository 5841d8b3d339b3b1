package frame

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReadFrame feeds arbitrary bytes to the stream reader and decodes
// every frame it returns: nothing may panic, every body must be as long as
// its header says, and a frame that decodes must encode again.
func FuzzReadFrame(f *testing.F) {
	var all []byte
	for _, fr := range gocqlFrames() {
		b, err := AppendFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	// A traced request, and a traced answer with warnings and a payload.
	for _, fr := range []*Frame{
		{Version: 4, Stream: 3, Tracing: true, Message: &Query{Query: "SELECT c FROM ks.t", Params: QueryParams{Consistency: 1}}},
		{Version: 4, Stream: 3, TracingID: make([]byte, 16), Warnings: []string{"w"}, Payload: map[string][]byte{"k": nil}, Message: VoidResult{}},
	} {
		b, err := AppendFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x05, 0, 0, 1, 5, 0, 0, 0, 0})
	f.Add([]byte{0x02, 0, 1, 5, 0, 0, 0, 0})
	f.Add([]byte{0x04, 0, 0, 1, 7, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 1<<16)
		for {
			h, body, err := r.Read()
			if err != nil {
				var ve *VersionError
				var tl *TooLargeError
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &ve) && !errors.As(err, &tl) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(body) != int(h.Length) {
				t.Fatalf("body of %d bytes, header says %d", len(body), h.Length)
			}
			fr, err := DecodeFrame(h, body)
			if err != nil {
				continue
			}
			if _, err := AppendFrame(nil, fr); err != nil {
				t.Fatalf("decoded %v frame does not encode: %v", h.Op, err)
			}
		}
	})
}

// FuzzDecodeRequest decodes an arbitrary body under every request opcode
// and flag combination. A body that decodes must re-encode to a body that
// decodes to the same message.
func FuzzDecodeRequest(f *testing.F) {
	for _, fr := range gocqlFrames() {
		if !fr.Message.Opcode().IsRequest() {
			continue
		}
		b, err := AppendFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		h, _ := ParseHeader(b)
		f.Add(byte(h.Op), h.Flags, b[HeaderSize:])
	}
	f.Fuzz(func(t *testing.T, op byte, flags byte, body []byte) {
		ops := []Opcode{OpStartup, OpOptions, OpQuery, OpPrepare, OpExecute, OpRegister, OpBatch, OpAuthResponse}
		h := Header{Version: Version4, Flags: flags &^ FlagCompression, Op: ops[int(op)%len(ops)], Length: int32(len(body))}
		fr, err := DecodeFrame(h, body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		b, err := AppendFrame(nil, fr)
		if err != nil {
			t.Fatalf("decoded %v does not encode: %v", h.Op, err)
		}
		h2, _ := ParseHeader(b)
		fr2, err := DecodeFrame(h2, b[HeaderSize:])
		if err != nil {
			t.Fatalf("re-encoded %v does not decode: %v", h.Op, err)
		}
		b2, _ := AppendFrame(nil, fr2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("%v: encoding not stable:\n%x\n%x", h.Op, b, b2)
		}
	})
}

// FuzzDecompress decompresses arbitrary bytes as an lz4 and as a snappy
// frame body, seeded with the compressed bodies of real frames: nothing may
// panic, every error is a *DecompressError, nothing longer than the limit
// comes out, and what comes out compresses and decompresses back to itself.
// A body that decompresses is then decoded as every request.
func FuzzDecompress(f *testing.F) {
	for _, fr := range gocqlFrames() {
		b, err := AppendFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		for _, c := range []Compression{LZ4, Snappy} {
			z, err := Compress(c, nil, b[HeaderSize:])
			if err != nil {
				f.Fatal(err)
			}
			f.Add(byte(c), z)
		}
	}
	f.Add(byte(LZ4), []byte{0x7f, 0xff, 0xff, 0xff, 0x10, 'a'})
	f.Add(byte(Snappy), []byte{0xff, 0xff, 0xff, 0xff, 0x07})
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, alg byte, body []byte) {
		c := []Compression{LZ4, Snappy}[int(alg)%2]
		out, err := Decompress(c, body, limit)
		if err != nil {
			var de *DecompressError
			if !errors.As(err, &de) {
				t.Fatalf("%v: error %T %v is not a *DecompressError", c, err, err)
			}
			return
		}
		if len(out) > limit {
			t.Fatalf("%v: %d bytes out, over the limit", c, len(out))
		}
		z, err := Compress(c, nil, out)
		if err != nil {
			t.Fatalf("%v: %d bytes do not compress: %v", c, len(out), err)
		}
		back, err := Decompress(c, z, limit)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("%v: round trip of %d bytes: %v", c, len(out), err)
		}
		for _, op := range []Opcode{OpStartup, OpQuery, OpExecute, OpBatch, OpRegister} {
			DecodeFrame(Header{Version: Version4, Op: op, Length: int32(len(out))}, out)
		}
	})
}
