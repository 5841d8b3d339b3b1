package node

import (
	"bytes"
	"io"
	"testing"
)

func TestSeededReaderReplaysAndRestartsDiffer(t *testing.T) {
	read := func(seed, start uint64) []byte {
		b := make([]byte, 64)
		if _, err := io.ReadFull(newSeededReader(seed, start), b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(read(7, 100), read(7, 100)) {
		t.Fatal("one seed and start gave two streams")
	}
	if bytes.Equal(read(7, 100), read(7, 101)) {
		t.Fatal("a restart (a later start) repeats the previous run's ids")
	}
	if bytes.Equal(read(7, 100), read(8, 100)) {
		t.Fatal("two seeds gave one stream")
	}
}
