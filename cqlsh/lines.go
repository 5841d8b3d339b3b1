package cqlsh

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/peterh/liner"
)

// ErrInterrupt is what a LineReader returns when the user cancels the line
// being typed (Ctrl-C): the shell drops the statement being entered, as
// cqlsh does, and prompts again.
var ErrInterrupt = errors.New("cqlsh: input interrupted")

// LineReader is where the shell reads its input from, one line at a time.
// ReadLine shows prompt (if the reader is interactive) and returns the line
// without its end-of-line; io.EOF at the end of the input (Ctrl-D on an
// empty terminal line), ErrInterrupt when the user cancels the line.
type LineReader interface {
	ReadLine(prompt string) (string, error)
	// AddHistory records an entered statement for recall; readers without
	// history ignore it.
	AddHistory(entry string)
	// Interactive reports whether a person types the input: prompts are
	// shown, errors do not end the session and long results are paged.
	Interactive() bool
}

// Lines reads lines from an io.Reader with no prompts and no history: the
// reader of piped scripts, -e and SOURCE files.
type Lines struct {
	Name string // where the lines come from, for error messages
	sc   *bufio.Scanner
	line int // lines read so far
}

// NewLines returns a non-interactive LineReader over r.
func NewLines(r io.Reader) *Lines {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &Lines{sc: sc}
}

// ReadLine returns the next line; the prompt is ignored.
func (l *Lines) ReadLine(string) (string, error) {
	if !l.sc.Scan() {
		if err := l.sc.Err(); err != nil {
			return "", fmt.Errorf("cqlsh: read input: %w", err)
		}
		return "", io.EOF
	}
	l.line++
	return strings.TrimSuffix(l.sc.Text(), "\r"), nil
}

// AddHistory does nothing: scripts keep no history.
func (l *Lines) AddHistory(string) {}

// Interactive is false.
func (l *Lines) Interactive() bool { return false }

// Line is the number of the line last read (1-based), for error messages.
func (l *Lines) Line() int { return l.line }

// Interrupt is the entry of a Scripted reader that stands for Ctrl-C: the
// byte a terminal sends for it.
const Interrupt = "\x03"

// Scripted is an interactive LineReader whose user types a fixed list of
// lines: an entry equal to Interrupt is a Ctrl-C, and the end of the list
// is a Ctrl-D. It records the prompts it showed and the history it was
// given; tests drive the shell with it exactly as a terminal would.
type Scripted struct {
	entries []string
	Prompts []string // the prompts shown, in order
	History []string // the entries added to the history
}

// NewScripted returns a Scripted reader that will type entries in order.
func NewScripted(entries ...string) *Scripted {
	return &Scripted{entries: entries}
}

// ReadLine returns the next entry.
func (s *Scripted) ReadLine(prompt string) (string, error) {
	s.Prompts = append(s.Prompts, prompt)
	if len(s.entries) == 0 {
		return "", io.EOF
	}
	e := s.entries[0]
	s.entries = s.entries[1:]
	if e == Interrupt {
		return "", ErrInterrupt
	}
	return e, nil
}

// AddHistory records entry.
func (s *Scripted) AddHistory(entry string) { s.History = append(s.History, entry) }

// Interactive is true.
func (s *Scripted) Interactive() bool { return true }

// Terminal is the LineReader of a person at a terminal, over
// github.com/peterh/liner: Emacs-style line editing, history recall with the
// arrow keys and Ctrl-R, Ctrl-C cancelling the line and Ctrl-D on an empty
// line ending the session. The history is loaded from and saved to a file.
type Terminal struct {
	st          *liner.State
	historyFile string
	// sigs gets SIGINT. liner reads keys in raw mode, where Ctrl-C is a
	// key; on a terminal it cannot drive (TERM=dumb, no known width) it
	// reads plain lines and Ctrl-C is a signal, which must not end the
	// shell either: the line typed after it is kept in stash and the
	// statement being typed is dropped.
	sigs  chan os.Signal
	stash *string
}

// NewTerminal puts the terminal in line-editing mode and loads the history
// from historyFile ("" keeps no history file). Close restores the terminal.
func NewTerminal(historyFile string) *Terminal {
	st := liner.NewLiner()
	st.SetCtrlCAborts(true)
	st.SetMultiLineMode(true)
	t := &Terminal{st: st, historyFile: historyFile, sigs: make(chan os.Signal, 1)}
	signal.Notify(t.sigs, os.Interrupt)
	if historyFile != "" {
		if f, err := os.Open(historyFile); err == nil {
			_, _ = st.ReadHistory(f)
			f.Close()
		}
	}
	return t
}

// ReadLine reads one edited line.
func (t *Terminal) ReadLine(prompt string) (string, error) {
	if t.stash != nil {
		line := *t.stash
		t.stash = nil
		return line, nil
	}
	interrupted := func() bool {
		select {
		case <-t.sigs:
			return true
		default:
			return false
		}
	}
	interrupted() // a Ctrl-C that cancelled a statement is spent
	line, err := t.st.Prompt(prompt)
	if err == nil && interrupted() {
		t.stash = &line
		return "", ErrInterrupt
	}
	switch {
	case errors.Is(err, liner.ErrPromptAborted):
		return "", ErrInterrupt
	case errors.Is(err, io.EOF):
		return "", io.EOF
	case err != nil:
		return "", fmt.Errorf("cqlsh: read terminal: %w", err)
	}
	return line, nil
}

// AddHistory adds entry to the history and appends it to the history file.
func (t *Terminal) AddHistory(entry string) {
	t.st.AppendHistory(entry)
	if t.historyFile == "" {
		return
	}
	if f, err := os.OpenFile(t.historyFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintln(f, entry)
		f.Close()
	}
}

// Interactive is true.
func (t *Terminal) Interactive() bool { return true }

// Close saves the history (its last 1000 entries, which keeps the file
// from growing without bound) and restores the terminal's mode.
func (t *Terminal) Close() error {
	if t.historyFile != "" {
		if f, err := os.OpenFile(t.historyFile, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600); err == nil {
			_, _ = t.st.WriteHistory(f)
			f.Close()
		}
	}
	signal.Stop(t.sigs)
	if err := t.st.Close(); err != nil {
		return fmt.Errorf("cqlsh: restore terminal: %w", err)
	}
	return nil
}
