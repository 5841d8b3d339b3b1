package replica

import (
	"bytes"
	"testing"

	"github.com/idemkv/idemkv/commitlog"
)

// FuzzDecodePosition feeds arbitrary bytes to the decoder of the replay
// position an SSTable's user metadata holds.
func FuzzDecodePosition(f *testing.F) {
	f.Add(encodePosition(commitlog.Position{Segment: 3, Offset: 4096}))
	f.Add([]byte{})
	f.Add(make([]byte, 17))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePosition(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodePosition(p), b) {
			t.Fatalf("position %+v re-encodes as %x, not %x", p, encodePosition(p), b)
		}
	})
}
