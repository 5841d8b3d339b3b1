package exec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/idemkv/idemkv/cql/frame"
)

// SELECT JSON: each row is one text value, a JSON object of the selected
// columns (by result name) in selection order, in the column named
// "[json]", as Cassandra answers it: `{"k": "a", "c": 4}`. Numbers are JSON
// numbers, text, UUIDs and blobs ("0x...") strings, null null; a name that
// is not a plain lower-case identifier is double-quoted inside the key.

// jsonColumn is the one result column of SELECT JSON.
func jsonColumn(cols []frame.ColumnSpec) frame.ColumnSpec {
	c := frame.ColumnSpec{Name: "[json]", Type: frame.Text}
	if len(cols) > 0 {
		c.Keyspace, c.Table = cols[0].Keyspace, cols[0].Table
	}
	return c
}

var plainName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// jsonRows turns a SELECT's rows into SELECT JSON's.
func jsonRows(r frame.Result) (frame.Result, error) {
	rows, ok := r.(frame.RowsResult)
	if !ok {
		return r, nil
	}
	out := rows
	out.Columns = []frame.ColumnSpec{jsonColumn(rows.Columns)}
	out.Rows = make([][]frame.Value, len(rows.Rows))
	for i, row := range rows.Rows {
		var b strings.Builder
		b.WriteByte('{')
		for j, v := range row {
			if j > 0 {
				b.WriteString(", ")
			}
			name := rows.Columns[j].Name
			if !plainName.MatchString(name) {
				name = `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
			}
			b.WriteString(jsonString(name))
			b.WriteString(": ")
			s, err := jsonValue(rows.Columns[j].Type, v)
			if err != nil {
				return nil, err
			}
			b.WriteString(s)
		}
		b.WriteByte('}')
		out.Rows[i] = []frame.Value{frame.Bytes([]byte(b.String()))}
	}
	return out, nil
}

func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return `""`
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// jsonValue renders one value of a type idemkv's user tables have.
func jsonValue(t frame.DataType, v frame.Value) (string, error) {
	if v.Null || v.Bytes == nil {
		return "null", nil
	}
	switch t.ID {
	case frame.TypeInt:
		n, err := frame.DecodeInt(v.Bytes)
		if err != nil {
			return "", fmt.Errorf("json: %w", err)
		}
		return strconv.Itoa(int(n)), nil
	case frame.TypeBigint, frame.TypeCounter:
		n, err := frame.DecodeBigint(v.Bytes)
		if err != nil {
			return "", fmt.Errorf("json: %w", err)
		}
		return strconv.FormatInt(n, 10), nil
	case frame.TypeUUID, frame.TypeTimeUUID:
		u, err := frame.DecodeUUID(v.Bytes)
		if err != nil {
			return "", fmt.Errorf("json: %w", err)
		}
		return fmt.Sprintf(`"%x-%x-%x-%x-%x"`, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
	case frame.TypeBlob:
		return `"0x` + hex.EncodeToString(v.Bytes) + `"`, nil
	case frame.TypeMap:
		s, err := jsonMap(v.Bytes)
		if err != nil {
			return "", fmt.Errorf("json: %w", err)
		}
		return s, nil
	}
	return jsonString(string(v.Bytes)), nil
}
