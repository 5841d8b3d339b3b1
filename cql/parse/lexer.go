package parse

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// tokKind is a lexical token's kind.
type tokKind int

const (
	tEOF    tokKind = iota
	tIdent          // unquoted identifier or keyword; val is folded to lower case
	tQIdent         // "quoted" identifier; val is unescaped, case preserved
	tString         // 'string'; val is unescaped
	tInt            // DIGIT+ (the sign is a separate '-' token)
	tFloat          // DIGIT+ '.' DIGIT* exponent? | DIGIT+ exponent
	tUUID           // 8-4-4-4-12 hex digits
	tBlob           // 0x followed by hex digits
	tQMark          // ?
	tPunct          // one of ( ) , ; . = + - * { } : [ ] < > <= >= !=
)

// token is one lexical token with its position (1-based line, 1-based
// column counted in characters, as ANTLR counts them).
type token struct {
	kind tokKind
	text string // the source text
	val  string // the value: folded identifier, unescaped string, ...
	line int
	col  int
}

// describe renders the token the way ANTLR names input in its messages.
func (t token) describe() string {
	if t.kind == tEOF {
		return "<EOF>"
	}
	return t.text
}

// lexer splits a query into tokens.
type lexer struct {
	src  string
	off  int
	line int
	col  int // 1-based column of src[off]
}

// lex returns every token of src, ending with tEOF, or the first lexical
// error.
func lex(src string) ([]token, error) {
	l := &lexer{src: src, line: 1, col: 1}
	var out []token
	for {
		t, err := l.next()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if t.kind == tEOF {
			return out, nil
		}
	}
}

func (l *lexer) errorf(line, col int, format string, args ...any) error {
	return &Error{Line: line, Column: col, Text: fmt.Sprintf(format, args...)}
}

// advance moves past n bytes, keeping line and column.
func (l *lexer) advance(n int) {
	end := l.off + n
	for l.off < end {
		r, size := utf8.DecodeRuneInString(l.src[l.off:])
		l.off += size
		if r == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
	}
}

func (l *lexer) peekByte(i int) byte {
	if l.off+i < len(l.src) {
		return l.src[l.off+i]
	}
	return 0
}

// skipSpace skips white space and comments.
func (l *lexer) skipSpace() error {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			l.advance(1)
		case c == '-' && l.peekByte(1) == '-', c == '/' && l.peekByte(1) == '/':
			i := strings.IndexByte(l.src[l.off:], '\n')
			if i < 0 {
				i = len(l.src) - l.off
			}
			l.advance(i)
		case c == '/' && l.peekByte(1) == '*':
			i := strings.Index(l.src[l.off+2:], "*/")
			if i < 0 {
				l.advance(len(l.src) - l.off)
				return l.errorf(l.line, l.col, "mismatched character '<EOF>' expecting '*'")
			}
			l.advance(i + 4)
		default:
			return nil
		}
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isHex(c byte) bool    { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isIdentChar(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '_'
}

// uuidLen returns 36 when a UUID literal starts at s, else 0.
func uuidLen(s string) int {
	if len(s) < 36 {
		return 0
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return 0
			}
		default:
			if !isHex(s[i]) {
				return 0
			}
		}
	}
	if len(s) > 36 && isIdentChar(s[36]) {
		return 0
	}
	return 36
}

func (l *lexer) next() (token, error) {
	if err := l.skipSpace(); err != nil {
		return token{}, err
	}
	line, col, start := l.line, l.col, l.off
	mk := func(k tokKind, n int, val string) token {
		l.advance(n)
		return token{kind: k, text: l.src[start:l.off], val: val, line: line, col: col}
	}
	if l.off >= len(l.src) {
		return token{kind: tEOF, line: line, col: col}, nil
	}
	rest := l.src[l.off:]
	c := rest[0]
	switch {
	case isHex(c) && uuidLen(rest) > 0:
		return mk(tUUID, 36, strings.ToLower(rest[:36])), nil
	case c == '0' && len(rest) > 1 && (rest[1] == 'x' || rest[1] == 'X'):
		n := 2
		for n < len(rest) && isHex(rest[n]) {
			n++
		}
		if n < len(rest) && isIdentChar(rest[n]) {
			return token{}, l.errorf(line, col+n, "no viable alternative at character '%c'", rest[n])
		}
		return mk(tBlob, n, "0x"+strings.ToLower(rest[2:n])), nil
	case isLetter(c):
		n := 1
		for n < len(rest) && isIdentChar(rest[n]) {
			n++
		}
		return mk(tIdent, n, strings.ToLower(rest[:n])), nil
	case isDigit(c):
		n := 1
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		kind := tInt
		if n < len(rest) && rest[n] == '.' && !(n+1 < len(rest) && rest[n+1] == '.') {
			kind = tFloat
			n++
			for n < len(rest) && isDigit(rest[n]) {
				n++
			}
		}
		if n < len(rest) && (rest[n] == 'e' || rest[n] == 'E') {
			m := n + 1
			if m < len(rest) && (rest[m] == '+' || rest[m] == '-') {
				m++
			}
			if m < len(rest) && isDigit(rest[m]) {
				for m < len(rest) && isDigit(rest[m]) {
					m++
				}
				kind, n = tFloat, m
			}
		}
		if n < len(rest) && isIdentChar(rest[n]) {
			return token{}, l.errorf(line, col+n, "no viable alternative at character '%c'", rest[n])
		}
		return mk(kind, n, rest[:n]), nil
	case c == '\'':
		var b strings.Builder
		for i := 1; ; i++ {
			if i >= len(rest) {
				l.advance(len(rest))
				return token{}, l.errorf(l.line, l.col, "mismatched character '<EOF>' expecting '''")
			}
			if rest[i] == '\'' {
				if i+1 < len(rest) && rest[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				return mk(tString, i+1, b.String()), nil
			}
			b.WriteByte(rest[i])
		}
	case c == '"':
		var b strings.Builder
		for i := 1; ; i++ {
			if i >= len(rest) {
				l.advance(len(rest))
				return token{}, l.errorf(l.line, l.col, "mismatched character '<EOF>' expecting '\"'")
			}
			if rest[i] == '"' {
				if i+1 < len(rest) && rest[i+1] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				if b.Len() == 0 {
					return token{}, l.errorf(line, col, "no viable alternative at input '\"\"'")
				}
				return mk(tQIdent, i+1, b.String()), nil
			}
			b.WriteByte(rest[i])
		}
	case c == '?':
		return mk(tQMark, 1, "?"), nil
	case c == '<' || c == '>' || c == '!':
		if len(rest) > 1 && rest[1] == '=' {
			return mk(tPunct, 2, rest[:2]), nil
		}
		if c == '!' {
			return token{}, l.errorf(line, col, "no viable alternative at character '!'")
		}
		return mk(tPunct, 1, rest[:1]), nil
	case strings.IndexByte("(),;.=+-*{}:[]", c) >= 0:
		return mk(tPunct, 1, rest[:1]), nil
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return token{}, l.errorf(line, col, "no viable alternative at character '%c'", r)
}
