// Package parse is idemkv's CQL subset: a hand-written lexer and a
// recursive-descent parser following Cassandra's lexical rules and grammar
// (Cql.g of Cassandra 3.11) for the statements idemkv serves:
//
//	CREATE KEYSPACE [IF NOT EXISTS] ks WITH replication = {...} [AND durable_writes = bool]
//	DROP KEYSPACE [IF EXISTS] ks
//	CREATE TABLE [IF NOT EXISTS] [ks.]t (col type [STATIC] [PRIMARY KEY], ...,
//	    [PRIMARY KEY (pk | (pk1, pk2, ...) [, clustering...])]) [WITH prop = value AND ...]
//	DROP TABLE [IF EXISTS] [ks.]t
//	ALTER TABLE [ks.]t WITH prop = value [AND ...] | ADD col type | ADD (col type, ...) | DROP col | DROP (col, ...)
//	USE ks
//	TRUNCATE [TABLE] [ks.]t
//	UPDATE [ks.]t [USING TTL n | TIMESTAMP n [AND ...]] SET c = c + term, d = d - term, e = term
//	    WHERE k = term [AND ...] [IF EXISTS | IF cond [AND ...]]
//	DELETE [col, ...] FROM [ks.]t [USING TIMESTAMP n] WHERE ... [IF ...]
//	INSERT INTO [ks.]t (cols) VALUES (terms) [IF NOT EXISTS] [USING ...]
//	SELECT [JSON] [DISTINCT] * | sel [AS alias], ... | COUNT(*) FROM [ks.]t [WHERE rel AND ...] [ORDER BY col [ASC|DESC], ...]
//	    [LIMIT n] [ALLOW FILTERING]
//	    (sel a column or token(k, ...); rel `col op term`, `col IN ...` or `token(k, ...) op term`)
//	BEGIN [UNLOGGED | COUNTER] BATCH [USING TIMESTAMP n] stmt; ... APPLY BATCH
//
// Lexical rules are Cassandra's: keywords are case-insensitive, unquoted
// identifiers fold to lower case, "quoted" identifiers keep their case with
// "" as an escaped quote, 'strings' use ” as an escaped quote; integers,
// floats, UUIDs, 0x blobs, true/false, NULL, ? and :name bind markers
// (numbered in order of appearance), -- and // line comments, /* */ block
// comments and an optional trailing semicolon. The package is pure: no I/O,
// and semantics (types, schema) are the executor's.
package parse

import (
	"fmt"
	"regexp"
	"strings"
)

// Parse parses one statement.
func Parse(query string) (Statement, error) {
	if m := unsupportedRE.FindStringSubmatch(query); m != nil {
		words := strings.Fields(strings.ToUpper(m[0]))
		return &Unsupported{Feature: unsupportedFeatures[strings.Join(strings.Fields(strings.ToLower(m[3])), " ")], Statement: strings.Join(words, " ")}, nil
	}
	toks, err := lex(query)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	st, err := p.statement(true)
	if err != nil {
		return nil, err
	}
	if p.isPunct(";") {
		p.pos++
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.mismatch(t, "EOF")
	}
	return st, nil
}

// unsupportedRE matches the statements of features idemkv does not serve,
// before lexing (a function's body does not lex as CQL).
var unsupportedRE = regexp.MustCompile(`(?is)^\s*(create|drop|alter)\s+(or\s+replace\s+|custom\s+)?(index|type|function|aggregate|materialized\s+view|trigger|role|user)\b`)

// unsupportedFeatures names the features of unsupportedRE's statements.
var unsupportedFeatures = map[string]string{
	"index": "secondary indexes", "type": "user-defined types", "function": "user-defined functions",
	"aggregate": "user-defined aggregates", "materialized view": "materialized views", "trigger": "triggers", "role": "roles", "user": "users",
}

// Markers returns the number of bind markers of a parsed statement.
func Markers(s Statement) int {
	n := 0
	walkTerms(s, func(t Term) {
		if t.Kind == TermMarker && t.Marker+1 > n {
			n = t.Marker + 1
		}
	})
	return n
}

// walkTerms calls fn on every term of s in order of appearance (map
// literals' entries included).
func walkTerms(s Statement, fn func(Term)) {
	var term func(Term)
	term = func(t Term) {
		fn(t)
		for _, e := range t.Map {
			term(e.Key)
			term(e.Value)
		}
		for _, e := range t.Elems {
			term(e)
		}
	}
	rels := func(rs []Relation) {
		for _, r := range rs {
			if r.Op == "IN" && r.InList {
				for _, t := range r.In {
					term(t)
				}
			} else {
				term(r.Value)
			}
		}
	}
	using := func(us []UsingOption) {
		for _, u := range us {
			term(u.Value)
		}
	}
	switch s := s.(type) {
	case *CreateKeyspace:
		for _, p := range s.Properties {
			term(p.Value)
		}
	case *CreateTable:
		for _, p := range s.Properties {
			term(p.Value)
		}
	case *Update:
		using(s.Using)
		for _, c := range s.Set {
			if c.Element != nil {
				term(*c.Element)
			}
			term(c.Value)
		}
		rels(s.Where)
		rels(s.Conditions)
	case *Delete:
		for _, e := range s.Elements {
			if e != nil {
				term(*e)
			}
		}
		using(s.Using)
		rels(s.Where)
		rels(s.Conditions)
	case *Insert:
		if s.JSON != nil {
			term(*s.JSON)
		}
		for _, v := range s.Values {
			term(v)
		}
		using(s.Using)
	case *Select:
		for _, sel := range s.Selectors {
			if sel.Element != nil {
				term(*sel.Element)
			}
		}
		rels(s.Where)
		if s.PerPartitionLimit != nil {
			term(*s.PerPartitionLimit)
		}
		if s.Limit != nil {
			term(*s.Limit)
		}
	case *Batch:
		using(s.Using)
		for _, st := range s.Statements {
			walkTerms(st, fn)
		}
	}
}

type parser struct {
	toks    []token
	pos     int
	markers int
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) peekAt(i int) token {
	if p.pos+i < len(p.toks) {
		return p.toks[p.pos+i]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) isKw(kw string) bool {
	t := p.peek()
	return t.kind == tIdent && t.val == kw
}

func (p *parser) isPunct(s string) bool {
	t := p.peek()
	return t.kind == tPunct && t.text == s
}

// acceptKw consumes the keyword if it is next.
func (p *parser) acceptKw(kw string) bool {
	if p.isKw(kw) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) acceptPunct(s string) bool {
	if p.isPunct(s) {
		p.pos++
		return true
	}
	return false
}

func errAt(t token, format string, args ...any) *Error {
	return &Error{Line: t.line, Column: t.col, Text: fmt.Sprintf(format, args...)}
}

// mismatch is ANTLR's "mismatched input" error.
func (p *parser) mismatch(t token, expecting string) error {
	return errAt(t, "mismatched input '%s' expecting %s", t.describe(), expecting)
}

// noViable is ANTLR's "no viable alternative" error.
func (p *parser) noViable(t token) error {
	return errAt(t, "no viable alternative at input '%s'", t.describe())
}

func (p *parser) expectKw(kw string) error {
	if p.acceptKw(kw) {
		return nil
	}
	return p.mismatch(p.peek(), "K_"+strings.ToUpper(kw))
}

func (p *parser) expectPunct(s string) error {
	if p.acceptPunct(s) {
		return nil
	}
	return p.mismatch(p.peek(), "'"+s+"'")
}

// ident reads an identifier: unquoted (not a reserved keyword) or quoted.
func (p *parser) ident() (string, error) {
	t := p.peek()
	switch {
	case t.kind == tQIdent:
		p.pos++
		return t.val, nil
	case t.kind == tIdent && !reserved[t.val]:
		p.pos++
		return t.val, nil
	}
	return "", p.noViable(t)
}

func (p *parser) isIdent() bool {
	t := p.peek()
	return t.kind == tQIdent || t.kind == tIdent && !reserved[t.val]
}

func (p *parser) tableName() (TableName, error) {
	a, err := p.ident()
	if err != nil {
		return TableName{}, err
	}
	if p.acceptPunct(".") {
		b, err := p.ident()
		if err != nil {
			return TableName{}, err
		}
		return TableName{Keyspace: a, Name: b}, nil
	}
	return TableName{Name: a}, nil
}

// statement parses one statement; top allows the statements that cannot
// appear inside a batch.
func (p *parser) statement(top bool) (Statement, error) {
	t := p.peek()
	if t.kind == tIdent {
		switch t.val {
		case "select":
			if top {
				return p.selectStmt()
			}
		case "update":
			return p.update()
		case "delete":
			return p.delete()
		case "insert":
			return p.insert()
		case "create":
			if top {
				return p.create()
			}
		case "drop":
			if top {
				return p.drop()
			}
		case "alter":
			if top {
				return p.alter()
			}
		case "truncate":
			if top {
				p.pos++
				if !p.acceptKw("table") {
					p.acceptKw("columnfamily")
				}
				tn, err := p.tableName()
				if err != nil {
					return nil, err
				}
				return &Truncate{Table: tn}, nil
			}
		case "use":
			if top {
				p.pos++
				ks, err := p.ident()
				if err != nil {
					return nil, err
				}
				return &Use{Keyspace: ks}, nil
			}
		case "begin":
			if top {
				return p.batch()
			}
		}
	}
	return nil, p.noViable(t)
}

func (p *parser) create() (Statement, error) {
	p.pos++ // CREATE
	switch {
	case p.acceptKw("keyspace"), p.acceptKw("schema"):
		s := &CreateKeyspace{}
		var err error
		if s.IfNotExists, err = p.ifNotExists(); err != nil {
			return nil, err
		}
		if s.Name, err = p.ident(); err != nil {
			return nil, err
		}
		if err := p.expectKw("with"); err != nil {
			return nil, err
		}
		s.Properties, err = p.properties(nil)
		return s, err
	case p.acceptKw("table"), p.acceptKw("columnfamily"):
		return p.createTable()
	}
	return nil, p.noViable(p.peek())
}

func (p *parser) drop() (Statement, error) {
	p.pos++ // DROP
	keyspace := false
	switch {
	case p.acceptKw("keyspace"), p.acceptKw("schema"):
		keyspace = true
	case p.acceptKw("table"), p.acceptKw("columnfamily"):
	default:
		return nil, p.noViable(p.peek())
	}
	ifExists := false
	if p.acceptKw("if") {
		if err := p.expectKw("exists"); err != nil {
			return nil, err
		}
		ifExists = true
	}
	if keyspace {
		name, err := p.ident()
		if err != nil {
			return nil, err
		}
		return &DropKeyspace{IfExists: ifExists, Name: name}, nil
	}
	tn, err := p.tableName()
	if err != nil {
		return nil, err
	}
	return &DropTable{IfExists: ifExists, Table: tn}, nil
}

// alter parses ALTER TABLE t WITH properties, ADD col type | ADD (col
// type, ...), DROP col | DROP (col, ...); other ALTER forms (keyspaces,
// RENAME, column types) are not part of idemkv's subset.
func (p *parser) alter() (Statement, error) {
	p.pos++ // ALTER
	if !p.acceptKw("table") && !p.acceptKw("columnfamily") {
		return nil, p.noViable(p.peek())
	}
	tn, err := p.tableName()
	if err != nil {
		return nil, err
	}
	colDef := func() (ColumnDef, error) {
		var c ColumnDef
		var err error
		if c.Name, err = p.ident(); err != nil {
			return c, err
		}
		if c.Type, err = p.typ(); err != nil {
			return c, err
		}
		c.Static = p.acceptKw("static")
		return c, nil
	}
	switch {
	case p.acceptKw("add"):
		s := &AlterTable{Table: tn}
		if p.acceptPunct("(") {
			if s.Add, err = commaList(p, colDef); err != nil {
				return nil, err
			}
			return s, p.expectPunct(")")
		}
		c, err := colDef()
		if err != nil {
			return nil, err
		}
		s.Add = []ColumnDef{c}
		return s, nil
	case p.acceptKw("drop"):
		s := &AlterTable{Table: tn}
		if p.acceptPunct("(") {
			if s.Drop, err = commaList(p, p.ident); err != nil {
				return nil, err
			}
			return s, p.expectPunct(")")
		}
		c, err := p.ident()
		if err != nil {
			return nil, err
		}
		s.Drop = []string{c}
		return s, nil
	}
	if err := p.expectKw("with"); err != nil {
		return nil, err
	}
	props, err := p.properties(nil)
	if err != nil {
		return nil, err
	}
	return &AlterTable{Table: tn, Properties: props}, nil
}

// properties parses `name = value (AND name = value)*`; extra, when
// non-nil, may consume a non-property item (CLUSTERING ORDER, COMPACT
// STORAGE) and reports whether it did.
func (p *parser) properties(extra func() (bool, error)) ([]Property, error) {
	var out []Property
	for {
		if extra != nil {
			ok, err := extra()
			if err != nil {
				return nil, err
			}
			if ok {
				if !p.acceptKw("and") {
					return out, nil
				}
				continue
			}
		}
		name, err := p.ident()
		if err != nil {
			return nil, err
		}
		if err := p.expectPunct("="); err != nil {
			return nil, err
		}
		v, err := p.term()
		if err != nil {
			return nil, err
		}
		out = append(out, Property{Name: name, Value: v})
		if !p.acceptKw("and") {
			return out, nil
		}
	}
}

func (p *parser) createTable() (Statement, error) {
	s := &CreateTable{}
	var err error
	if s.IfNotExists, err = p.ifNotExists(); err != nil {
		return nil, err
	}
	if s.Table, err = p.tableName(); err != nil {
		return nil, err
	}
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	pkSeen := false
	for {
		if p.isKw("primary") {
			pkStart := p.peek()
			p.pos++
			if err := p.expectKw("key"); err != nil {
				return nil, err
			}
			if pkSeen {
				return nil, errAt(pkStart, "Multiple PRIMARY KEYs specifed (exactly one required)")
			}
			pkSeen = true
			if err := p.expectPunct("("); err != nil {
				return nil, err
			}
			if p.acceptPunct("(") {
				if s.PartitionKey, err = commaList(p, p.ident); err != nil {
					return nil, err
				}
				if err := p.expectPunct(")"); err != nil {
					return nil, err
				}
			} else {
				n, err := p.ident()
				if err != nil {
					return nil, err
				}
				s.PartitionKey = []string{n}
			}
			for p.acceptPunct(",") {
				n, err := p.ident()
				if err != nil {
					return nil, err
				}
				s.Clustering = append(s.Clustering, n)
			}
			if err := p.expectPunct(")"); err != nil {
				return nil, err
			}
		} else {
			var c ColumnDef
			if c.Name, err = p.ident(); err != nil {
				return nil, err
			}
			if c.Type, err = p.typ(); err != nil {
				return nil, err
			}
			if p.acceptKw("static") {
				c.Static = true
			}
			if p.isKw("primary") {
				t := p.next()
				if err := p.expectKw("key"); err != nil {
					return nil, err
				}
				if pkSeen {
					return nil, errAt(t, "Multiple PRIMARY KEYs specifed (exactly one required)")
				}
				pkSeen = true
				s.PartitionKey = []string{c.Name}
			}
			s.Columns = append(s.Columns, c)
		}
		if !p.acceptPunct(",") {
			break
		}
		if p.isPunct(")") { // a trailing comma, as Cassandra allows
			break
		}
	}
	if err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	// No PRIMARY KEY is the executor's error (Invalid), as in Cassandra.
	if p.acceptKw("with") {
		s.Properties, err = p.properties(func() (bool, error) {
			switch {
			case p.isKw("compact") && p.peekAt(1).kind == tIdent && p.peekAt(1).val == "storage":
				p.pos += 2
				s.CompactStorage = true
				return true, nil
			case p.isKw("clustering") && p.peekAt(1).kind == tIdent && p.peekAt(1).val == "order":
				p.pos += 2
				if err := p.expectKw("by"); err != nil {
					return false, err
				}
				if err := p.expectPunct("("); err != nil {
					return false, err
				}
				for {
					n, err := p.ident()
					if err != nil {
						return false, err
					}
					o := Ordering{Column: n}
					switch {
					case p.acceptKw("asc"):
					case p.acceptKw("desc"):
						o.Desc = true
					default:
						return false, p.mismatch(p.peek(), "K_ASC")
					}
					s.ClusteringOrder = append(s.ClusteringOrder, o)
					if !p.acceptPunct(",") {
						break
					}
				}
				return true, p.expectPunct(")")
			}
			return false, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// typ parses a type: a name, with <parameters> for collections and frozen.
func (p *parser) typ() (Type, error) {
	t := p.peek()
	var name string
	switch {
	case t.kind == tIdent:
		p.pos++
		name = t.val
	case t.kind == tQIdent:
		p.pos++
		name = t.val
	case t.kind == tString && t.val != "": // a custom type's class name
		p.pos++
		name = t.val
	default:
		return Type{}, p.noViable(t)
	}
	ty := Type{Name: name}
	if p.acceptPunct("<") {
		var err error
		if ty.Params, err = commaList(p, p.typ); err != nil {
			return Type{}, err
		}
		if err := p.expectPunct(">"); err != nil {
			return Type{}, err
		}
	}
	return ty, nil
}

// term parses a literal, a bind marker or a map literal.
func (p *parser) term() (Term, error) {
	t := p.peek()
	switch t.kind {
	case tString:
		p.pos++
		return Term{Kind: TermString, Text: t.val}, nil
	case tInt:
		p.pos++
		return Term{Kind: TermInt, Text: t.val}, nil
	case tFloat:
		p.pos++
		return Term{Kind: TermFloat, Text: t.val}, nil
	case tUUID:
		p.pos++
		return Term{Kind: TermUUID, Text: t.val}, nil
	case tBlob:
		p.pos++
		return Term{Kind: TermBlob, Text: t.val}, nil
	case tQMark:
		p.pos++
		p.markers++
		return Term{Kind: TermMarker, Marker: p.markers - 1}, nil
	case tIdent:
		switch t.val {
		case "true", "false":
			p.pos++
			return Term{Kind: TermBool, Text: t.val}, nil
		case "null":
			p.pos++
			return Term{Kind: TermNull}, nil
		}
	case tPunct:
		switch t.text {
		case "-":
			n := p.peekAt(1)
			if n.kind == tInt || n.kind == tFloat {
				p.pos += 2
				k := TermInt
				if n.kind == tFloat {
					k = TermFloat
				}
				return Term{Kind: k, Text: "-" + n.val}, nil
			}
			return Term{}, p.noViable(n)
		case ":":
			p.pos++
			name, err := p.ident()
			if err != nil {
				return Term{}, err
			}
			p.markers++
			return Term{Kind: TermMarker, Marker: p.markers - 1, Name: name}, nil
		case "[", "(":
			p.pos++
			kind, end := TermList, "]"
			if t.text == "(" {
				kind, end = TermTuple, ")"
			}
			l := Term{Kind: kind}
			if kind == TermList && p.acceptPunct(end) {
				return l, nil
			}
			for {
				e, err := p.term()
				if err != nil {
					return Term{}, err
				}
				l.Elems = append(l.Elems, e)
				if !p.acceptPunct(",") {
					break
				}
			}
			return l, p.expectPunct(end)
		case "{":
			p.pos++
			m := Term{Kind: TermMap}
			if p.acceptPunct("}") {
				return m, nil
			}
			for {
				k, err := p.term()
				if err != nil {
					return Term{}, err
				}
				if len(m.Map) == 0 && (m.Elems != nil || !p.isPunct(":")) {
					// A set literal.
					m.Kind = TermSet
					m.Elems = append(m.Elems, k)
					if !p.acceptPunct(",") {
						break
					}
					continue
				}
				if err := p.expectPunct(":"); err != nil {
					return Term{}, err
				}
				v, err := p.term()
				if err != nil {
					return Term{}, err
				}
				m.Map = append(m.Map, MapEntry{Key: k, Value: v})
				if !p.acceptPunct(",") {
					break
				}
			}
			return m, p.expectPunct("}")
		}
	}
	return Term{}, p.noViable(t)
}

func (p *parser) using() ([]UsingOption, error) {
	var out []UsingOption
	if !p.acceptKw("using") {
		return nil, nil
	}
	for {
		var u UsingOption
		switch {
		case p.acceptKw("ttl"):
			u.TTL = true
		case p.acceptKw("timestamp"):
		default:
			return nil, p.mismatch(p.peek(), "K_TIMESTAMP")
		}
		v, err := p.term()
		if err != nil {
			return nil, err
		}
		u.Value = v
		out = append(out, u)
		if !p.acceptKw("and") {
			return out, nil
		}
	}
}

var relOps = map[string]bool{"=": true, "<": true, ">": true, "<=": true, ">=": true, "!=": true}

// tokenCall parses `token(a, b, ...)` if it is next (ok false otherwise).
func (p *parser) tokenCall() (cols []string, ok bool, err error) {
	if !p.isKw("token") || p.peekAt(1).kind != tPunct || p.peekAt(1).text != "(" {
		return nil, false, nil
	}
	p.pos += 2
	if cols, err = commaList(p, p.ident); err != nil {
		return nil, true, err
	}
	return cols, true, p.expectPunct(")")
}

func (p *parser) relation() (Relation, error) {
	tcols, isToken, err := p.tokenCall()
	if err != nil {
		return Relation{}, err
	}
	if isToken {
		r := Relation{Token: tcols}
		t := p.peek()
		if t.kind != tPunct || !relOps[t.text] || t.text == "!=" {
			return Relation{}, p.noViable(t)
		}
		p.pos++
		r.Op = t.text
		r.Value, err = p.term()
		return r, err
	}
	col, err := p.ident()
	if err != nil {
		return Relation{}, err
	}
	r := Relation{Column: col}
	t := p.peek()
	switch {
	case t.kind == tPunct && relOps[t.text]:
		p.pos++
		r.Op = t.text
		r.Value, err = p.term()
		return r, err
	case t.kind == tIdent && t.val == "in":
		p.pos++
		r.Op = "IN"
		if p.acceptPunct("(") {
			r.InList = true
			if p.acceptPunct(")") {
				return r, nil
			}
			var err error
			if r.In, err = commaList(p, p.term); err != nil {
				return Relation{}, err
			}
			return r, p.expectPunct(")")
		}
		if n := p.peek(); n.kind != tQMark && !(n.kind == tPunct && n.text == ":") {
			return Relation{}, p.noViable(n)
		}
		r.Value, err = p.term()
		return r, err
	case t.kind == tIdent && t.val == "contains":
		// c CONTAINS v, c CONTAINS KEY k (collections, ALLOW FILTERING)
		p.pos++
		r.Op = "CONTAINS"
		if p.acceptKw("key") {
			r.Op = "CONTAINS KEY"
		}
		r.Value, err = p.term()
		return r, err
	}
	return Relation{}, p.noViable(t)
}

func (p *parser) relations() ([]Relation, error) {
	var out []Relation
	for {
		r, err := p.relation()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if !p.acceptKw("and") {
			return out, nil
		}
	}
}

// conditions parses an optional IF EXISTS / IF cond AND ...; notExists
// accepts IF NOT EXISTS (INSERT) instead.
func (p *parser) conditions() (bool, []Relation, error) {
	if !p.acceptKw("if") {
		return false, nil, nil
	}
	if p.acceptKw("exists") {
		return true, nil, nil
	}
	rs, err := p.relations()
	return false, rs, err
}

func (p *parser) where() ([]Relation, error) {
	if err := p.expectKw("where"); err != nil {
		return nil, err
	}
	return p.relations()
}

func (p *parser) update() (Statement, error) {
	p.pos++ // UPDATE
	s := &Update{}
	var err error
	if s.Table, err = p.tableName(); err != nil {
		return nil, err
	}
	if s.Using, err = p.using(); err != nil {
		return nil, err
	}
	if err := p.expectKw("set"); err != nil {
		return nil, err
	}
	for {
		var c SetClause
		if c.Column, err = p.ident(); err != nil {
			return nil, err
		}
		if c.Element, err = p.element(); err != nil {
			return nil, err
		}
		if err := p.expectPunct("="); err != nil {
			return nil, err
		}
		if c.Element != nil {
			c.Op = '='
			if c.Value, err = p.term(); err != nil {
				return nil, err
			}
			s.Set = append(s.Set, c)
			if !p.acceptPunct(",") {
				break
			}
			continue
		}
		if p.isIdent() && !(p.peek().kind == tIdent && (p.peek().val == "true" || p.peek().val == "false" || p.peek().val == "null")) {
			if c.Other, err = p.ident(); err != nil {
				return nil, err
			}
			opTok := p.peek()
			switch {
			case p.acceptPunct("+"):
				c.Op = '+'
			case p.acceptPunct("-"):
				c.Op = '-'
			default:
				return nil, p.mismatch(p.peek(), "'+'")
			}
			if c.Other != c.Column {
				// Cassandra's grammar checks this itself, a syntax error
				// without a position.
				e := errAt(opTok, "Only expressions of the form X = X %c<value> are supported.", c.Op)
				e.Unplaced = true
				return nil, e
			}
		} else {
			c.Op = '='
		}
		if c.Value, err = p.term(); err != nil {
			return nil, err
		}
		if c.Op == '=' && p.acceptPunct("+") {
			// c = term + c: a list prepend.
			if c.Other, err = p.ident(); err != nil {
				return nil, err
			}
			c.Op, c.Prepend = '+', true
		}
		s.Set = append(s.Set, c)
		if !p.acceptPunct(",") {
			break
		}
	}
	if s.Where, err = p.where(); err != nil {
		return nil, err
	}
	s.IfExists, s.Conditions, err = p.conditions()
	return s, err
}

func (p *parser) delete() (Statement, error) {
	p.pos++ // DELETE
	s := &Delete{}
	var err error
	if !p.isKw("from") {
		for {
			c, err := p.ident()
			if err != nil {
				return nil, err
			}
			el, err := p.element()
			if err != nil {
				return nil, err
			}
			if el != nil && s.Elements == nil {
				s.Elements = make([]*Term, len(s.Columns))
			}
			s.Columns = append(s.Columns, c)
			if s.Elements != nil {
				s.Elements = append(s.Elements, el)
			}
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if err := p.expectKw("from"); err != nil {
		return nil, err
	}
	if s.Table, err = p.tableName(); err != nil {
		return nil, err
	}
	if s.Using, err = p.using(); err != nil {
		return nil, err
	}
	if s.Where, err = p.where(); err != nil {
		return nil, err
	}
	s.IfExists, s.Conditions, err = p.conditions()
	return s, err
}

// element parses the optional `[term]` after a column name (a map
// element); nil when there is none.
func (p *parser) element() (*Term, error) {
	if !p.acceptPunct("[") {
		return nil, nil
	}
	t, err := p.term()
	if err != nil {
		return nil, err
	}
	if err := p.expectPunct("]"); err != nil {
		return nil, err
	}
	return &t, nil
}

func (p *parser) insert() (Statement, error) {
	p.pos++ // INSERT
	if err := p.expectKw("into"); err != nil {
		return nil, err
	}
	s := &Insert{}
	var err error
	if s.Table, err = p.tableName(); err != nil {
		return nil, err
	}
	if p.acceptKw("json") {
		// INSERT INTO t JSON 'doc' | ? [DEFAULT NULL | DEFAULT UNSET]
		t := p.peek()
		if t.kind != tString && t.kind != tQMark && !(t.kind == tPunct && t.text == ":") {
			return nil, p.noViable(t)
		}
		v, err := p.term()
		if err != nil {
			return nil, err
		}
		s.JSON = &v
		if p.acceptKw("default") {
			switch {
			case p.acceptKw("unset"):
				s.DefaultUnset = true
			case p.acceptKw("null"):
			default:
				return nil, p.noViable(p.peek())
			}
		}
		if s.IfNotExists, err = p.ifNotExists(); err != nil {
			return nil, err
		}
		s.Using, err = p.using()
		return s, err
	}
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	if s.Columns, err = commaList(p, p.ident); err != nil {
		return nil, err
	}
	if err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	if err := p.expectKw("values"); err != nil {
		return nil, err
	}
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	if s.Values, err = commaList(p, p.term); err != nil {
		return nil, err
	}
	if err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	if s.IfNotExists, err = p.ifNotExists(); err != nil {
		return nil, err
	}
	s.Using, err = p.using()
	return s, err
}

// limitTerm parses the value of a LIMIT: an integer or a bind marker.
func (p *parser) limitTerm() (Term, error) {
	t := p.peek()
	if t.kind != tInt && t.kind != tQMark && !(t.kind == tPunct && t.text == ":") {
		return Term{}, p.noViable(t)
	}
	return p.term()
}

func (p *parser) selectStmt() (Statement, error) {
	p.pos++ // SELECT
	s := &Select{}
	var err error
	// JSON and DISTINCT are unreserved keywords: `SELECT distinct FROM t`
	// selects a column named distinct.
	if p.isKw("json") {
		if n := p.peekAt(1); !(n.kind == tIdent && (n.val == "from" || n.val == "as")) && !(n.kind == tPunct && n.text == ",") {
			p.pos++
			s.JSON = true
		}
	}
	if p.isKw("distinct") {
		if n := p.peekAt(1); !(n.kind == tIdent && (n.val == "from" || n.val == "as")) && !(n.kind == tPunct && n.text == ",") {
			p.pos++
			s.Distinct = true
		}
	}
	if p.acceptPunct("*") {
		s.Star = true
	} else {
		for {
			var sel Selector
			if p.isKw("count") && p.peekAt(1).kind == tPunct && p.peekAt(1).text == "(" {
				p.pos += 2
				if !p.acceptPunct("*") {
					if t := p.peek(); t.kind == tInt && t.val == "1" {
						p.pos++
					} else {
						return nil, p.noViable(t)
					}
				}
				if err := p.expectPunct(")"); err != nil {
					return nil, err
				}
				sel.Count = true
			} else if (p.isKw("writetime") || p.isKw("ttl")) && p.peekAt(1).kind == tPunct && p.peekAt(1).text == "(" {
				sel.Func = p.next().val
				p.pos++ // (
				if sel.Column, err = p.ident(); err != nil {
					return nil, err
				}
				if err := p.expectPunct(")"); err != nil {
					return nil, err
				}
			} else if cols, ok, err := p.tokenCall(); err != nil {
				return nil, err
			} else if ok {
				sel.Token = cols
			} else if sel.Column, err = p.ident(); err != nil {
				return nil, err
			} else if sel.Element, err = p.element(); err != nil {
				return nil, err
			}
			if p.acceptKw("as") {
				if sel.Alias, err = p.ident(); err != nil {
					return nil, err
				}
			}
			s.Selectors = append(s.Selectors, sel)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if err := p.expectKw("from"); err != nil {
		return nil, err
	}
	if s.Table, err = p.tableName(); err != nil {
		return nil, err
	}
	if p.acceptKw("where") {
		if s.Where, err = p.relations(); err != nil {
			return nil, err
		}
	}
	if p.acceptKw("order") {
		if err := p.expectKw("by"); err != nil {
			return nil, err
		}
		for {
			var o Ordering
			if o.Column, err = p.ident(); err != nil {
				return nil, err
			}
			switch {
			case p.acceptKw("asc"):
			case p.acceptKw("desc"):
				o.Desc = true
			}
			s.OrderBy = append(s.OrderBy, o)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if p.isKw("per") && p.peekAt(1).kind == tIdent && p.peekAt(1).val == "partition" {
		p.pos += 2
		if err := p.expectKw("limit"); err != nil {
			return nil, err
		}
		v, err := p.limitTerm()
		if err != nil {
			return nil, err
		}
		s.PerPartitionLimit = &v
	}
	if p.acceptKw("limit") {
		v, err := p.limitTerm()
		if err != nil {
			return nil, err
		}
		s.Limit = &v
	}
	if p.acceptKw("allow") {
		if err := p.expectKw("filtering"); err != nil {
			return nil, err
		}
		s.AllowFiltering = true
	}
	return s, nil
}

func (p *parser) batch() (Statement, error) {
	p.pos++ // BEGIN
	s := &Batch{}
	switch {
	case p.acceptKw("unlogged"):
		s.Type = Unlogged
	case p.acceptKw("counter"):
		s.Type = CounterBatch
	}
	if err := p.expectKw("batch"); err != nil {
		return nil, err
	}
	var err error
	if s.Using, err = p.using(); err != nil {
		return nil, err
	}
	for !p.isKw("apply") {
		t := p.peek()
		if t.kind == tEOF {
			return nil, p.mismatch(t, "K_APPLY")
		}
		st, err := p.statement(false)
		if err != nil {
			return nil, err
		}
		s.Statements = append(s.Statements, st)
		p.acceptPunct(";")
	}
	p.pos++ // APPLY
	if err := p.expectKw("batch"); err != nil {
		return nil, err
	}
	return s, nil
}

// commaList parses `item (, item)*`.
func commaList[T any](p *parser, item func() (T, error)) ([]T, error) {
	var out []T
	for {
		v, err := item()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if !p.acceptPunct(",") {
			return out, nil
		}
	}
}

// ifNotExists parses an optional IF NOT EXISTS.
func (p *parser) ifNotExists() (bool, error) {
	if !p.acceptKw("if") {
		return false, nil
	}
	if err := p.expectKw("not"); err != nil {
		return false, err
	}
	return true, p.expectKw("exists")
}
