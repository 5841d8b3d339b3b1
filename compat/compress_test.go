package compat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gocql/gocql"
	"github.com/pierrec/lz4/v4"
)

// lz4Compressor is gocql's lz4 compressor (module github.com/gocql/gocql/lz4,
// which the module proxy does not serve to this build) written out on the
// same library: a 4-byte big-endian decompressed length, then an LZ4 block.
type lz4Compressor struct{}

func (lz4Compressor) Name() string { return "lz4" }

func (lz4Compressor) Encode(data []byte) ([]byte, error) {
	buf := make([]byte, 4+lz4.CompressBlockBound(len(data)))
	binary.BigEndian.PutUint32(buf, uint32(len(data)))
	var c lz4.Compressor
	n, err := c.CompressBlock(data, buf[4:])
	if err != nil {
		return nil, err
	}
	if n == 0 && len(data) > 0 {
		return nil, errors.New("lz4: incompressible")
	}
	return buf[:4+n], nil
}

func (lz4Compressor) Decode(data []byte) ([]byte, error) {
	if len(data) < 4 {
		return nil, errors.New("lz4: short body")
	}
	n := binary.BigEndian.Uint32(data)
	out := make([]byte, n)
	if n == 0 {
		return out, nil
	}
	got, err := lz4.UncompressBlock(data[4:], out)
	if err != nil {
		return nil, err
	}
	return out[:got], nil
}

// countingCompressor counts the frames gocql compresses and decompresses,
// to tell compression in use from gocql's silent fallback to none when the
// server does not list the algorithm.
type countingCompressor struct {
	gocql.Compressor
	enc, dec *atomic.Int64
}

func (c countingCompressor) Encode(data []byte) ([]byte, error) {
	c.enc.Add(1)
	return c.Compressor.Encode(data)
}

func (c countingCompressor) Decode(data []byte) ([]byte, error) {
	c.dec.Add(1)
	return c.Compressor.Decode(data)
}

// TestGocqlCompression runs counter updates (literal, prepared, batched)
// and reads, a single-partition read and a paged range read, through gocql
// with cluster.Compressor set to its SnappyCompressor and to lz4.
func TestGocqlCompression(t *testing.T) {
	r := startRing(t, 3, nil)
	setup := r.session(r.cluster())
	exec(t, setup, `CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}`)
	exec(t, setup, `CREATE TABLE IF NOT EXISTS ks.z (k text PRIMARY KEY, c counter)`)
	for _, comp := range []gocql.Compressor{gocql.SnappyCompressor{}, lz4Compressor{}} {
		t.Run(comp.Name(), func(t *testing.T) {
			var enc, dec atomic.Int64
			c := r.cluster()
			c.Compressor = countingCompressor{Compressor: comp, enc: &enc, dec: &dec}
			s := r.session(c)
			const keys = 300
			for i := 0; i < keys; i++ {
				key := fmt.Sprintf("%s-%d", comp.Name(), i)
				if err := s.Query(fmt.Sprintf("UPDATE ks.z SET c = c + %d WHERE k = '%s'", i, key)).Consistency(gocql.Quorum).Exec(); err != nil {
					t.Fatalf("literal update: %v", err)
				}
				if err := s.Query("UPDATE ks.z SET c = c + ? WHERE k = ?", int64(1000), key).Consistency(gocql.All).Exec(); err != nil {
					t.Fatalf("prepared update: %v", err)
				}
			}
			b := s.NewBatch(gocql.CounterBatch)
			for i := 0; i < 100; i++ {
				b.Query("UPDATE ks.z SET c = c + 1 WHERE k = ?", comp.Name()+"-0")
			}
			if err := s.ExecuteBatch(b); err != nil {
				t.Fatalf("counter batch: %v", err)
			}
			if got := counter(t, s, "z", comp.Name()+"-0"); got != 1100 {
				t.Errorf("batched counter = %d, want 1100", got)
			}
			if got := counter(t, s, "z", comp.Name()+"-7"); got != 1007 {
				t.Errorf("counter = %d, want 1007", got)
			}
			// A paged range read of every row, both tests' keys included.
			iter := s.Query("SELECT k, c FROM ks.z").PageSize(64).Consistency(gocql.All).Iter()
			var k string
			var v int64
			seen := 0
			for iter.Scan(&k, &v) {
				var i int
				if n, _ := fmt.Sscanf(k, comp.Name()+"-%d", &i); n == 1 {
					want := int64(i) + 1000
					if i == 0 {
						want += 100
					}
					if v != want {
						t.Errorf("%s = %d, want %d", k, v, want)
					}
					seen++
				}
			}
			if err := iter.Close(); err != nil {
				t.Fatalf("range read: %v", err)
			}
			if seen != keys {
				t.Errorf("range read saw %d of %d keys", seen, keys)
			}
			if enc.Load() < keys || dec.Load() < keys {
				t.Errorf("gocql compressed %d frames and decompressed %d: compression not in use", enc.Load(), dec.Load())
			}
		})
	}
}
