package parse

import (
	"fmt"
	"regexp"
	"strings"
)

// Statement is a parsed CQL statement. String renders it back as CQL that
// parses to an equal statement.
type Statement interface {
	String() string
	statement()
}

// TermKind is the kind of a term: a literal, a bind marker or a map.
type TermKind int

// The term kinds.
const (
	TermString TermKind = iota + 1
	TermInt             // Text is the decimal text, with a leading '-' when negative
	TermFloat           // Text is the source text, with a leading '-' when negative
	TermBool            // Text is "true" or "false"
	TermUUID            // Text is the UUID in lower case
	TermBlob            // Text is "0x" and the hex digits in lower case
	TermNull
	TermMarker // a bind marker: ? or :name
	TermMap    // a map literal {k: v, ...}; {} is an empty map (or set)
	TermList   // a list literal [a, b]; its values in Elems
	TermSet    // a set literal {a, b}; its values in Elems
	TermTuple  // a tuple literal (a, b); its values in Elems
)

// Term is a value in a statement: a literal, a bind marker or a map literal.
type Term struct {
	Kind TermKind
	Text string // the literal's value (unescaped for strings)
	// Marker is a bind marker's position among the statement's markers
	// (0-based, in order of appearance); Name is a named marker's name ("" for ?).
	Marker int
	Name   string
	Map    []MapEntry
	Elems  []Term // a list's, set's or tuple's values
}

// MapEntry is one entry of a map literal.
type MapEntry struct{ Key, Value Term }

// String renders the term as CQL.
func (t Term) String() string {
	switch t.Kind {
	case TermString:
		return "'" + strings.ReplaceAll(t.Text, "'", "''") + "'"
	case TermNull:
		return "NULL"
	case TermMarker:
		if t.Name != "" {
			return ":" + Ident(t.Name)
		}
		return "?"
	case TermMap:
		parts := make([]string, len(t.Map))
		for i, e := range t.Map {
			parts[i] = e.Key.String() + ": " + e.Value.String()
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case TermList, TermSet, TermTuple:
		parts := make([]string, len(t.Elems))
		for i, e := range t.Elems {
			parts[i] = e.String()
		}
		open, end := "[", "]"
		if t.Kind == TermSet {
			open, end = "{", "}"
		} else if t.Kind == TermTuple {
			open, end = "(", ")"
		}
		return open + strings.Join(parts, ", ") + end
	}
	return t.Text
}

// keywords are the words the parser gives a meaning to; Ident quotes them
// so that a rendered statement reads back the same.
var keywords = map[string]bool{}

// reserved are Cassandra's reserved keywords: never an unquoted identifier.
var reserved = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`add allow alter and apply asc authorize batch begin by
		columnfamily create delete desc describe drop entries execute from full grant if in index
		infinity insert into is keyspace limit materialized modify nan norecursive not null of on or
		order primary rename replace revoke schema select set table to token truncate unlogged
		update use using view where with`) {
		reserved[w] = true
		keywords[w] = true
	}
	for _, w := range strings.Fields(`true false key counter count ttl timestamp exists filtering
		as values static compact storage clustering distinct json`) {
		keywords[w] = true
	}
}

var plainIdent = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Ident renders a name as a CQL identifier: bare when it reads back as
// itself, "double-quoted" otherwise.
func Ident(name string) string {
	if plainIdent.MatchString(name) && !keywords[name] {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// TableName is a table's optional keyspace and name.
type TableName struct{ Keyspace, Name string }

func (n TableName) String() string {
	if n.Keyspace != "" {
		return Ident(n.Keyspace) + "." + Ident(n.Name)
	}
	return Ident(n.Name)
}

// Property is one `name = value` of a WITH clause.
type Property struct {
	Name  string
	Value Term
}

func renderProps(ps []Property) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = Ident(p.Name) + " = " + p.Value.String()
	}
	return strings.Join(parts, " AND ")
}

// CreateKeyspace is CREATE KEYSPACE.
type CreateKeyspace struct {
	IfNotExists bool
	Name        string
	Properties  []Property // replication, durable_writes, ...
}

// DropKeyspace is DROP KEYSPACE.
type DropKeyspace struct {
	IfExists bool
	Name     string
}

// Type is a CQL type as written: a name and, for collections and frozen,
// its parameters.
type Type struct {
	Name   string // lower case: "text", "counter", "map", ...
	Params []Type
}

func (t Type) String() string {
	if len(t.Params) == 0 {
		return Ident(t.Name)
	}
	parts := make([]string, len(t.Params))
	for i, p := range t.Params {
		parts[i] = p.String()
	}
	return Ident(t.Name) + "<" + strings.Join(parts, ", ") + ">"
}

// ColumnDef is a column of CREATE TABLE.
type ColumnDef struct {
	Name   string
	Type   Type
	Static bool
}

// Ordering is one column of CLUSTERING ORDER BY.
type Ordering struct {
	Column string
	Desc   bool
}

// CreateTable is CREATE TABLE. The primary key, whether declared inline or
// in a PRIMARY KEY clause, is in PartitionKey and Clustering.
type CreateTable struct {
	IfNotExists     bool
	Table           TableName
	Columns         []ColumnDef
	PartitionKey    []string
	Clustering      []string
	Properties      []Property
	ClusteringOrder []Ordering
	CompactStorage  bool
}

// AlterTable is ALTER TABLE: WITH properties, ADD columns or DROP
// columns (exactly one of Properties, Add and Drop is set).
type AlterTable struct {
	Table      TableName
	Properties []Property
	Add        []ColumnDef
	Drop       []string
}

// DropTable is DROP TABLE.
type DropTable struct {
	IfExists bool
	Table    TableName
}

// Truncate is TRUNCATE [TABLE] [ks.]t.
type Truncate struct{ Table TableName }

// Use is USE.
type Use struct{ Keyspace string }

// UsingOption is one of USING TTL n / TIMESTAMP n.
type UsingOption struct {
	TTL   bool // false: TIMESTAMP
	Value Term
}

func renderUsing(us []UsingOption) string {
	if len(us) == 0 {
		return ""
	}
	parts := make([]string, len(us))
	for i, u := range us {
		if u.TTL {
			parts[i] = "TTL " + u.Value.String()
		} else {
			parts[i] = "TIMESTAMP " + u.Value.String()
		}
	}
	return " USING " + strings.Join(parts, " AND ")
}

// SetClause is one assignment of UPDATE: `c = term` (Op '='), or
// `c = Other + term` / `c = Other - term` (Op '+', '-').
//
// `c[e] = term` sets one element of a collection (Element); `c = term + c`
// prepends to a list (Op '+', Prepend).
type SetClause struct {
	Column  string
	Op      byte
	Other   string
	Value   Term
	Element *Term
	Prepend bool
}

func (s SetClause) String() string {
	switch {
	case s.Element != nil:
		return Ident(s.Column) + "[" + s.Element.String() + "] = " + s.Value.String()
	case s.Op == '=':
		return Ident(s.Column) + " = " + s.Value.String()
	case s.Prepend:
		return Ident(s.Column) + " = " + s.Value.String() + " + " + Ident(s.Other)
	}
	return Ident(s.Column) + " = " + Ident(s.Other) + " " + string(s.Op) + " " + s.Value.String()
}

// Relation is one `column op term` of a WHERE or IF clause; for IN, the
// values are In (a list) or, for `IN ?`, the single marker Value. A
// relation on `token(a, b) op term` has the token's columns in Token and
// no Column.
type Relation struct {
	Column string
	Token  []string
	Op     string // =, <, >, <=, >=, !=, IN, CONTAINS, CONTAINS KEY
	Value  Term
	In     []Term
	InList bool // IN (...) rather than IN ?
}

func (r Relation) String() string {
	if r.Op == "IN" && r.InList {
		parts := make([]string, len(r.In))
		for i, t := range r.In {
			parts[i] = t.String()
		}
		return Ident(r.Column) + " IN (" + strings.Join(parts, ", ") + ")"
	}
	if len(r.Token) > 0 {
		return "token(" + identList(r.Token) + ") " + r.Op + " " + r.Value.String()
	}
	return Ident(r.Column) + " " + r.Op + " " + r.Value.String()
}

func renderRelations(kw string, rs []Relation) string {
	if len(rs) == 0 {
		return ""
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return " " + kw + " " + strings.Join(parts, " AND ")
}

func renderIf(ifExists bool, conds []Relation) string {
	if ifExists {
		return " IF EXISTS"
	}
	return renderRelations("IF", conds)
}

// Update is UPDATE.
type Update struct {
	Table      TableName
	Using      []UsingOption
	Set        []SetClause
	Where      []Relation
	IfExists   bool
	Conditions []Relation
}

// Delete is DELETE.
type Delete struct {
	Columns []string // empty: the whole row
	// Elements are the map keys of `DELETE m['a']`: Elements[i], when not
	// nil, is the key of Columns[i]'s element removed. Nil when no column
	// names an element.
	Elements   []*Term
	Table      TableName
	Using      []UsingOption
	Where      []Relation
	IfExists   bool
	Conditions []Relation
}

// Insert is INSERT (parsed so that counter tables can refuse it with
// Cassandra's message).
type Insert struct {
	Table       TableName
	Columns     []string
	Values      []Term
	IfNotExists bool
	Using       []UsingOption
	// JSON is the document of INSERT ... JSON (a string or a marker), nil
	// for INSERT ... VALUES; DefaultUnset is its DEFAULT UNSET (columns
	// the document omits keep their values; by default they are nulled).
	JSON         *Term
	DefaultUnset bool
}

// Selector is one item of a SELECT list: a column, COUNT(*) (Count),
// token(a, b) of the named columns (Token), or writetime(col) / ttl(col)
// (Func "writetime" or "ttl", of Column).
type Selector struct {
	Column string
	// Element is the key of `m['a']`: one element of a map column.
	Element *Term
	Count   bool
	Token   []string
	Func    string
	Alias   string
}

func (s Selector) String() string {
	out := Ident(s.Column)
	if s.Element != nil {
		out += "[" + s.Element.String() + "]"
	}
	switch {
	case s.Count:
		out = "COUNT(*)"
	case len(s.Token) > 0:
		out = "token(" + identList(s.Token) + ")"
	case s.Func != "":
		out = s.Func + "(" + Ident(s.Column) + ")"
	}
	if s.Alias != "" {
		out += " AS " + Ident(s.Alias)
	}
	return out
}

// Select is SELECT. Star is `SELECT *`; otherwise Selectors lists the
// items. Distinct is SELECT DISTINCT, JSON is SELECT JSON.
type Select struct {
	JSON      bool
	Distinct  bool
	Star      bool
	Selectors []Selector
	Table     TableName
	Where     []Relation
	OrderBy   []Ordering
	// PerPartitionLimit is PER PARTITION LIMIT's term; nil without.
	PerPartitionLimit *Term
	Limit             *Term
	AllowFiltering    bool
}

// BatchType is a BATCH's kind.
type BatchType int

// The batch kinds.
const (
	Logged BatchType = iota
	Unlogged
	CounterBatch
)

// Batch is BEGIN ... BATCH ... APPLY BATCH; its statements are *Update,
// *Delete or *Insert.
type Batch struct {
	Type       BatchType
	Using      []UsingOption
	Statements []Statement
}

func (*CreateKeyspace) statement() {}
func (*DropKeyspace) statement()   {}
func (*CreateTable) statement()    {}
func (*DropTable) statement()      {}
func (*AlterTable) statement()     {}
func (*Use) statement()            {}
func (*Truncate) statement()       {}
func (*Update) statement()         {}
func (*Delete) statement()         {}
func (*Insert) statement()         {}
func (*Select) statement()         {}
func (*Batch) statement()          {}
func (*Unsupported) statement()    {}

// Unsupported is a statement of a feature idemkv does not serve (secondary
// indexes, user-defined types, functions and aggregates, materialized
// views, triggers, roles): the executor refuses it naming the feature.
type Unsupported struct {
	Feature   string // "secondary indexes"
	Statement string // its first words: "CREATE INDEX"
}

// String renders the statement's first words.
func (s *Unsupported) String() string { return s.Statement + " ..." }

func ifNotExists(b bool) string {
	if b {
		return "IF NOT EXISTS "
	}
	return ""
}

func ifExists(b bool) string {
	if b {
		return "IF EXISTS "
	}
	return ""
}

func (s *CreateKeyspace) String() string {
	out := "CREATE KEYSPACE " + ifNotExists(s.IfNotExists) + Ident(s.Name)
	if len(s.Properties) > 0 {
		out += " WITH " + renderProps(s.Properties)
	}
	return out
}

func (s *DropKeyspace) String() string {
	return "DROP KEYSPACE " + ifExists(s.IfExists) + Ident(s.Name)
}

func identList(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = Ident(n)
	}
	return strings.Join(parts, ", ")
}

func (s *CreateTable) String() string {
	var parts []string
	for _, c := range s.Columns {
		d := Ident(c.Name) + " " + c.Type.String()
		if c.Static {
			d += " STATIC"
		}
		parts = append(parts, d)
	}
	if len(s.PartitionKey) > 0 {
		pk := "(" + identList(s.PartitionKey) + ")"
		if len(s.Clustering) > 0 {
			pk += ", " + identList(s.Clustering)
		}
		parts = append(parts, "PRIMARY KEY ("+pk+")")
	}
	out := "CREATE TABLE " + ifNotExists(s.IfNotExists) + s.Table.String() + " (" + strings.Join(parts, ", ") + ")"
	var with []string
	if s.CompactStorage {
		with = append(with, "COMPACT STORAGE")
	}
	if len(s.ClusteringOrder) > 0 {
		os := make([]string, len(s.ClusteringOrder))
		for i, o := range s.ClusteringOrder {
			os[i] = Ident(o.Column) + " ASC"
			if o.Desc {
				os[i] = Ident(o.Column) + " DESC"
			}
		}
		with = append(with, "CLUSTERING ORDER BY ("+strings.Join(os, ", ")+")")
	}
	if len(s.Properties) > 0 {
		with = append(with, renderProps(s.Properties))
	}
	if len(with) > 0 {
		out += " WITH " + strings.Join(with, " AND ")
	}
	return out
}

func (s *AlterTable) String() string {
	out := "ALTER TABLE " + s.Table.String()
	switch {
	case len(s.Add) > 0:
		parts := make([]string, len(s.Add))
		for i, c := range s.Add {
			parts[i] = Ident(c.Name) + " " + c.Type.String()
			if c.Static {
				parts[i] += " STATIC"
			}
		}
		return out + " ADD (" + strings.Join(parts, ", ") + ")"
	case len(s.Drop) > 0:
		return out + " DROP (" + identList(s.Drop) + ")"
	}
	return out + " WITH " + renderProps(s.Properties)
}

func (s *DropTable) String() string {
	return "DROP TABLE " + ifExists(s.IfExists) + s.Table.String()
}

func (s *Use) String() string { return "USE " + Ident(s.Keyspace) }

func (s *Truncate) String() string { return "TRUNCATE TABLE " + s.Table.String() }

func (s *Update) String() string {
	parts := make([]string, len(s.Set))
	for i, c := range s.Set {
		parts[i] = c.String()
	}
	return "UPDATE " + s.Table.String() + renderUsing(s.Using) + " SET " + strings.Join(parts, ", ") +
		renderRelations("WHERE", s.Where) + renderIf(s.IfExists, s.Conditions)
}

func (s *Delete) String() string {
	out := "DELETE "
	if len(s.Columns) > 0 {
		parts := make([]string, len(s.Columns))
		for i, c := range s.Columns {
			parts[i] = Ident(c)
			if i < len(s.Elements) && s.Elements[i] != nil {
				parts[i] += "[" + s.Elements[i].String() + "]"
			}
		}
		out += strings.Join(parts, ", ") + " "
	}
	return out + "FROM " + s.Table.String() + renderUsing(s.Using) + renderRelations("WHERE", s.Where) +
		renderIf(s.IfExists, s.Conditions)
}

func (s *Insert) String() string {
	vals := make([]string, len(s.Values))
	for i, v := range s.Values {
		vals[i] = v.String()
	}
	out := "INSERT INTO " + s.Table.String() + " (" + identList(s.Columns) + ") VALUES (" + strings.Join(vals, ", ") + ")"
	if s.JSON != nil {
		out = "INSERT INTO " + s.Table.String() + " JSON " + s.JSON.String()
		if s.DefaultUnset {
			out += " DEFAULT UNSET"
		}
	}
	if s.IfNotExists {
		out += " IF NOT EXISTS"
	}
	return out + renderUsing(s.Using)
}

func (s *Select) String() string {
	sel := "*"
	if !s.Star {
		parts := make([]string, len(s.Selectors))
		for i, x := range s.Selectors {
			parts[i] = x.String()
		}
		sel = strings.Join(parts, ", ")
	}
	if s.Distinct {
		sel = "DISTINCT " + sel
	}
	if s.JSON {
		sel = "JSON " + sel
	}
	out := "SELECT " + sel + " FROM " + s.Table.String() + renderRelations("WHERE", s.Where)
	if len(s.OrderBy) > 0 {
		os := make([]string, len(s.OrderBy))
		for i, o := range s.OrderBy {
			os[i] = Ident(o.Column) + " ASC"
			if o.Desc {
				os[i] = Ident(o.Column) + " DESC"
			}
		}
		out += " ORDER BY " + strings.Join(os, ", ")
	}
	if s.PerPartitionLimit != nil {
		out += " PER PARTITION LIMIT " + s.PerPartitionLimit.String()
	}
	if s.Limit != nil {
		out += " LIMIT " + s.Limit.String()
	}
	if s.AllowFiltering {
		out += " ALLOW FILTERING"
	}
	return out
}

func (s *Batch) String() string {
	kind := ""
	switch s.Type {
	case Unlogged:
		kind = "UNLOGGED "
	case CounterBatch:
		kind = "COUNTER "
	}
	out := "BEGIN " + kind + "BATCH" + renderUsing(s.Using)
	for _, st := range s.Statements {
		out += " " + st.String() + ";"
	}
	return out + " APPLY BATCH"
}

// Error is a syntax error at a position of the query: Line and Column are
// 1-based (Column counts characters). Error() renders Cassandra's text,
// `line L:C message`, where C is ANTLR's 0-based character position, so
// that messages read exactly as Cassandra's do. An error Cassandra's
// grammar raises from its own checks rather than from ANTLR (Unplaced)
// renders as the message alone, as Cassandra's does.
type Error struct {
	Line, Column int
	Text         string
	Unplaced     bool
}

func (e *Error) Error() string {
	if e.Unplaced {
		return e.Text
	}
	return fmt.Sprintf("line %d:%d %s", e.Line, e.Column-1, e.Text)
}
