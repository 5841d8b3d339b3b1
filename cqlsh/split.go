package cqlsh

import "strings"

// splitter cuts the input into statements as lines arrive. A statement ends
// at a semicolon outside string literals ('...', a quote doubled inside), quoted
// names ("..."), $$...$$ strings and comments; comments (--, // to the end
// of the line, /* ... */ across lines) are dropped, so a comment after a
// semicolon does not begin the next statement. The shell's own commands
// (HELP, DESCRIBE, EXPAND, ...) also end at the end of their line, with or
// without a semicolon, as in cqlsh.
type splitter struct {
	buf     strings.Builder
	quote   byte // '\'' or '"' while inside one; 0 outside
	dollar  bool // inside $$...$$
	comment bool // inside /* ... */
}

// feed adds one line of input and returns the statements it completed,
// without their semicolons.
func (s *splitter) feed(line string) []string {
	var done []string
	for i := 0; i < len(line); i++ {
		c := line[i]
		next := byte(0)
		if i+1 < len(line) {
			next = line[i+1]
		}
		switch {
		case s.comment:
			if c == '*' && next == '/' {
				s.comment = false
				s.buf.WriteByte(' ')
				i++
			}
		case s.quote != 0:
			s.buf.WriteByte(c)
			if c == s.quote {
				if next == s.quote { // a doubled quote stays inside
					s.buf.WriteByte(next)
					i++
				} else {
					s.quote = 0
				}
			}
		case s.dollar:
			s.buf.WriteByte(c)
			if c == '$' && next == '$' {
				s.buf.WriteByte(next)
				i++
				s.dollar = false
			}
		case c == '-' && next == '-', c == '/' && next == '/':
			i = len(line) // the rest of the line is a comment
		case c == '/' && next == '*':
			s.comment = true
			i++
		case c == '\'' || c == '"':
			s.quote = c
			s.buf.WriteByte(c)
		case c == '$' && next == '$':
			s.dollar = true
			s.buf.WriteString("$$")
			i++
		case c == ';':
			if st := strings.TrimSpace(s.buf.String()); st != "" {
				done = append(done, st)
			}
			s.buf.Reset()
		default:
			s.buf.WriteByte(c)
		}
	}
	if s.quote == 0 && !s.dollar && !s.comment {
		if p := s.pending(); p != "" && isShellCommand(p) {
			done = append(done, p)
			s.buf.Reset()
			return done
		}
	}
	if s.pending() != "" || s.quote != 0 || s.dollar {
		s.buf.WriteByte('\n')
	}
	return done
}

// pending is the unfinished statement, "" if there is none.
func (s *splitter) pending() string {
	return strings.TrimSpace(s.buf.String())
}

// busy reports whether a statement, string or comment is unfinished.
func (s *splitter) busy() bool {
	return s.pending() != "" || s.quote != 0 || s.dollar || s.comment
}

// reset drops the unfinished statement.
func (s *splitter) reset() {
	*s = splitter{}
}

// shellCommands are the first words of the commands the shell handles that
// end at the end of their line (USE and CONSISTENCY are CQL-like but shell
// handled too; USE needs its semicolon as in cqlsh).
var shellCommands = map[string]bool{
	"help": true, "?": true, "exit": true, "quit": true, "describe": true, "desc": true,
	"expand": true, "paging": true, "source": true, "show": true, "tracing": true,
	"consistency": true, "serial": true, "history": true, "clear": true, "cls": true,
}

func firstWord(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) == 0 {
		return ""
	}
	return strings.ToLower(f[0])
}

func isShellCommand(stmt string) bool { return shellCommands[firstWord(stmt)] }
