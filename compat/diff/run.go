package diff

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"gopkg.in/inf.v0"
)

// Answer is one entry's normalized answer: what a driver saw, with the
// host-specific values masked, so that two servers' answers compare with
// ==-like equality (see Equal).
type Answer struct {
	// Kind is "rows" (a result with column metadata), "void" (a result
	// without: an update, a schema change, an empty-metadata result),
	// "error" (the server refused: Code and Message) or "driver" (gocql
	// refused or failed before or after the server: Message).
	Kind string `json:"kind"`
	// Columns are the result's columns, "name type" in gocql's spelling
	// of the type (varchar, counter, list<varchar>, ...).
	Columns []string `json:"columns,omitempty"`
	// Rows are the rows, each value formatted by formatValue; "null" for
	// a null, "<masked>" for a masked one.
	Rows [][]string `json:"rows,omitempty"`
	// Pages are a manually paged query's pages, each page its rows.
	Pages [][][]string `json:"pages,omitempty"`
	// Code is the server's error code (gocql's RequestError Code()), in hex.
	Code string `json:"code,omitempty"`
	// Message is the error's message.
	Message string `json:"message,omitempty"`
	// Detail is the error's own fields, for the errors that have some
	// (Unavailable, timeouts, AlreadyExists), e.g. "consistency=TWO
	// required=2 alive=1".
	Detail string `json:"detail,omitempty"`
	// Args, Result and PKey are a prepared statement's metadata: its bind
	// markers ("keyspace.table.name type"), its result columns, and the
	// indexes of the bind markers that make up the partition key.
	Args   []string `json:"args,omitempty"`
	Result []string `json:"result,omitempty"`
	PKey   []int    `json:"pkey,omitempty"`
}

// Equal says whether a and b are the same answer; sameButWording says
// whether they differ in the error message only.
func Equal(a, b Answer) (equal, sameButWording bool) {
	a, b = canonical(a), canonical(b)
	if reflect.DeepEqual(a, b) {
		return true, false
	}
	am, bm := a, b
	am.Message, bm.Message = "", ""
	return false, a.Kind == "error" && reflect.DeepEqual(am, bm)
}

// canonical is a as it reads back from a golden file: empty lists are
// absent.
func canonical(a Answer) Answer {
	b, err := json.Marshal(a)
	if err != nil {
		return a
	}
	var c Answer
	if err := json.Unmarshal(b, &c); err != nil {
		return a
	}
	return c
}

// String renders an answer compactly for failure messages and docs.
func (a Answer) String() string {
	var b strings.Builder
	b.WriteString(a.Kind)
	if a.Code != "" {
		fmt.Fprintf(&b, " %s", a.Code)
	}
	if a.Message != "" {
		fmt.Fprintf(&b, " %q", a.Message)
	}
	if a.Detail != "" {
		fmt.Fprintf(&b, " (%s)", a.Detail)
	}
	if len(a.Args) > 0 || len(a.Result) > 0 || a.PKey != nil {
		fmt.Fprintf(&b, " args=%v result=%v pkey=%v", a.Args, a.Result, a.PKey)
	}
	if len(a.Columns) > 0 {
		fmt.Fprintf(&b, " columns=%v", a.Columns)
	}
	if a.Rows != nil {
		fmt.Fprintf(&b, " rows=%v", a.Rows)
	}
	if a.Pages != nil {
		fmt.Fprintf(&b, " pages=%v", a.Pages)
	}
	return b.String()
}

// maskedColumns are the columns whose values are host-specific in every
// result: addresses, host ids, schema versions, ring tokens, release
// and cluster names, table ids, and times.
var maskedColumns = map[string]bool{
	"host_id": true, "schema_version": true, "tokens": true, "peer": true,
	"preferred_ip": true, "preferred_port": true, "rpc_address": true, "broadcast_address": true,
	"listen_address": true, "native_address": true, "release_version": true,
	"cluster_name": true, "gossip_generation": true, "id": true, "truncated_at": true,
	"native_port": true, "broadcast_port": true, "listen_port": true, "peer_port": true,
	"rpc_port": true, "thrift_version": true, "jmx_port": true,
}

// masked says whether column name's values are host-specific: listed,
// or a write time (the server's clock).
func masked(name string, e Entry) bool {
	return maskedColumns[name] || slices.Contains(e.Mask, name) || strings.HasPrefix(name, "writetime(")
}

// Run runs every entry of the corpus in order on one session and returns
// their answers, in corpus order.
func Run(s *gocql.Session, corpus []Entry) []Answer {
	out := make([]Answer, len(corpus))
	for i, e := range corpus {
		out[i] = runEntry(s, e)
	}
	return out
}

func consistency(e Entry) gocql.Consistency {
	switch e.CL {
	case "":
		return gocql.One
	case "SERIAL":
		return gocql.Consistency(gocql.Serial)
	case "LOCAL_SERIAL":
		return gocql.Consistency(gocql.LocalSerial)
	}
	return gocql.ParseConsistency(e.CL)
}

func runEntry(s *gocql.Session, e Entry) Answer {
	switch e.Op {
	case OpQuery:
		q := s.Query(e.Stmt, e.Values...).Consistency(consistency(e))
		if e.Serial != "" {
			q = q.SerialConsistency(serial(e.Serial))
		}
		return readAll(q.Iter(), e)
	case OpPrepare:
		var info *gocql.QueryInfo
		q := s.Bind(e.Stmt, func(qi *gocql.QueryInfo) ([]any, error) {
			info = qi
			return e.Values, nil
		}).Consistency(consistency(e))
		a := readAll(q.Iter(), e)
		if info == nil {
			return a
		}
		a.Args = columnInfos(info.Args, true)
		a.Result = columnInfos(info.Rval, true)
		a.PKey = append([]int{}, info.PKeyColumns...)
		return a
	case OpBatch:
		b := s.NewBatch(e.Batch)
		b.SetConsistency(consistency(e))
		for _, st := range e.Stmts {
			b.Query(st.Stmt, st.Values...)
		}
		if err := s.ExecuteBatch(b); err != nil {
			return errorAnswer(err)
		}
		return Answer{Kind: "void"}
	case OpPage:
		var pages [][][]string
		var state []byte
		var cols []string
		for len(pages) < 100 {
			it := s.Query(e.Stmt, e.Values...).Consistency(consistency(e)).PageSize(e.PageSize).PageState(state).Iter()
			a := readAll(it, e)
			if a.Kind == "error" || a.Kind == "driver" {
				return a
			}
			cols = a.Columns
			pages = append(pages, nonNil(a.Rows))
			state = it.PageState()
			if len(state) == 0 {
				break
			}
		}
		return Answer{Kind: "rows", Columns: cols, Pages: pages}
	}
	return Answer{Kind: "driver", Message: fmt.Sprintf("unknown op %d", e.Op)}
}

func nonNil(rows [][]string) [][]string {
	if rows == nil {
		return [][]string{}
	}
	return rows
}

func serial(s string) gocql.SerialConsistency {
	if s == "LOCAL_SERIAL" {
		return gocql.LocalSerial
	}
	return gocql.Serial
}

func columnInfos(cols []gocql.ColumnInfo, qualified bool) []string {
	out := make([]string, 0, len(cols))
	for _, c := range cols {
		name := c.Name
		if qualified {
			name = c.Keyspace + "." + c.Table + "." + c.Name
		}
		out = append(out, name+" "+typeName(c.TypeInfo))
	}
	return out
}

func typeName(t gocql.TypeInfo) string {
	if t == nil {
		return "?"
	}
	switch t := t.(type) {
	case gocql.CollectionType:
		if t.Type() == gocql.TypeMap {
			return fmt.Sprintf("map<%s,%s>", typeName(t.Key), typeName(t.Elem))
		}
		return fmt.Sprintf("%s<%s>", t.Type(), typeName(t.Elem))
	case gocql.NativeType:
		if t.Type() == gocql.TypeCustom {
			return "custom(" + t.Custom() + ")"
		}
	}
	return t.Type().String()
}

func errorAnswer(err error) Answer {
	var re gocql.RequestError
	if errors.As(err, &re) {
		return Answer{Kind: "error", Code: fmt.Sprintf("0x%04x", re.Code()), Message: re.Message(), Detail: errorDetail(err)}
	}
	return Answer{Kind: "driver", Message: err.Error()}
}

// errorDetail formats the fields of the errors that have some.
func errorDetail(err error) string {
	var (
		un *gocql.RequestErrUnavailable
		wt *gocql.RequestErrWriteTimeout
		rt *gocql.RequestErrReadTimeout
		ae *gocql.RequestErrAlreadyExists
	)
	switch {
	case errors.As(err, &un):
		return fmt.Sprintf("consistency=%v required=%d alive=%d", un.Consistency, un.Required, un.Alive)
	case errors.As(err, &wt):
		return fmt.Sprintf("consistency=%v received=%d blockfor=%d writetype=%s", wt.Consistency, wt.Received, wt.BlockFor, wt.WriteType)
	case errors.As(err, &rt):
		return fmt.Sprintf("consistency=%v received=%d blockfor=%d", rt.Consistency, rt.Received, rt.BlockFor)
	case errors.As(err, &ae):
		return fmt.Sprintf("keyspace=%q table=%q", ae.Keyspace, ae.Table)
	}
	return ""
}

// readAll reads every row of it (following pages unless the query turned
// automatic paging off) and closes it.
func readAll(it *gocql.Iter, e Entry) Answer {
	cols := it.Columns()
	var rows [][]string
	if len(cols) > 0 {
		dest := make([]any, len(cols))
		for i, c := range cols {
			v, err := c.TypeInfo.NewWithError()
			if err != nil {
				_ = it.Close()
				return Answer{Kind: "driver", Message: fmt.Sprintf("column %s: %v", c.Name, err)}
			}
			// A pointer to gocql's pointer: a null scans as a nil pointer.
			dest[i] = reflect.New(reflect.TypeOf(v)).Interface()
		}
		for it.Scan(dest...) {
			row := make([]string, len(cols))
			for i, c := range cols {
				if masked(c.Name, e) {
					row[i] = "<masked>"
					continue
				}
				row[i] = formatValue(reflect.ValueOf(dest[i]).Elem())
			}
			rows = append(rows, row)
		}
	}
	if err := it.Close(); err != nil {
		return errorAnswer(err)
	}
	if len(cols) == 0 {
		return Answer{Kind: "void"}
	}
	if e.Unordered {
		sort.Slice(rows, func(i, j int) bool { return slices.Compare(rows[i], rows[j]) < 0 })
	}
	a := Answer{Kind: "rows", Columns: columnInfos(cols, false), Rows: nonNil(rows)}
	if e.ColumnsOnly {
		a.Rows = nil
		a.Columns = slices.Sorted(slices.Values(a.Columns))
	}
	return a
}

// formatValue formats a scanned value: v is a pointer (nil for a null)
// to the Go value gocql unmarshalled.
func formatValue(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "null"
		}
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case []byte:
		return fmt.Sprintf("0x%x", x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case net.IP:
		return x.String()
	case *inf.Dec:
		return x.String()
	case gocql.UUID:
		return x.String()
	}
	switch v.Kind() {
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = formatValue(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		parts := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			parts = append(parts, formatValue(k)+": "+formatValue(v.MapIndex(k)))
		}
		sort.Strings(parts)
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}
