package frame

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestPooledReader reads frames of every size through a pooled reader,
// from sources that give a byte at a time, half of what is asked, or all:
// the frames come out as they went in, and the buffer is held only while
// bytes are buffered.
func TestPooledReader(t *testing.T) {
	var stream []byte
	var want []string
	for i, n := range []int{0, 1, 100, 511, 512, 513, 40 << 10, 3} {
		q := strings.Repeat("x", n)
		want = append(want, q)
		var err error
		stream, err = AppendFrame(stream, &Frame{Version: 4, Stream: int16(i), Message: &Query{Query: q}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, src := range map[string]func() io.Reader{
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		"all":      func() io.Reader { return bytes.NewReader(stream) },
	} {
		r := NewPooledReader(src(), 0)
		for i, q := range want {
			h, body, err := r.Read()
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			f, err := DecodeFrame(h, body)
			if err != nil || h.Stream != int16(i) || f.Message.(*Query).Query != q {
				t.Fatalf("%s: frame %d: %+v %v", name, i, h, err)
			}
		}
		if _, _, err := r.Read(); err != io.EOF {
			t.Fatalf("%s: at the end: %v", name, err)
		}
		if r.br != nil {
			t.Errorf("%s: buffer held at the end of the stream", name)
		}
		r.Release()
	}
}
