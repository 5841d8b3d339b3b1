package frame

import (
	"bytes"
	"testing"
)

// BenchmarkDecodeQuery reads and decodes a gocql-shaped EXECUTE of a
// counter update with an op id payload (the hot request of the workload)
// and a QUERY; one op is one frame.
func BenchmarkDecodeQuery(b *testing.B) {
	for _, c := range []struct {
		name string
		f    *Frame
	}{
		{"QUERY", &Frame{Version: 4, Stream: 3, Message: &Query{Query: "UPDATE ks.t SET c = c + 1 WHERE k = 'key-000001'",
			Params: QueryParams{Consistency: 4, PageSize: 5000, Timestamp: 1, HasTimestamp: true}}}},
		{"EXECUTE+payload", &Frame{Version: 4, Stream: 3, Payload: map[string][]byte{"idemkv-op": make([]byte, 16)},
			Message: &Execute{ID: make([]byte, 16), Params: QueryParams{Consistency: 4,
				Values:       []Value{Bytes(EncodeBigint(1)), Bytes(EncodeText("key-000001"))},
				SkipMetadata: true, PageSize: 5000, Timestamp: 1, HasTimestamp: true}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			one, err := AppendFrame(nil, c.f)
			if err != nil {
				b.Fatal(err)
			}
			stream := bytes.Repeat(one, 1024)
			br := bytes.NewReader(stream)
			r := NewReader(br, 0)
			b.SetBytes(int64(len(one)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%1024 == 0 {
					br.Reset(stream)
				}
				h, body, err := r.Read()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := DecodeFrame(h, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeRows encodes RESULT Rows frames into a reused buffer: one
// counter row with full metadata (a SELECT of one partition) and a page of
// 100 rows.
func BenchmarkEncodeRows(b *testing.B) {
	cols := []ColumnSpec{{"ks", "t", "k", Text}, {"ks", "t", "c", Counter}}
	row := []Value{Bytes(EncodeText("key-000001")), Bytes(EncodeBigint(42))}
	page := make([][]Value, 100)
	for i := range page {
		page[i] = row
	}
	for _, c := range []struct {
		name string
		r    *RowsResult
	}{
		{"1row", &RowsResult{Columns: cols, Rows: [][]Value{row}}},
		{"100rows", &RowsResult{Columns: cols, Rows: page, PagingState: []byte("next")}},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := &Frame{Version: 4, Stream: 7, Message: c.r}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				buf, err = AppendFrame(buf[:0], f)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
