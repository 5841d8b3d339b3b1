//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// ptyArgsEnv carries the flags of `idemkv cql` to the test binary run as
// the shell on a pseudo-terminal (TestCQLTerminalChild).
const ptyArgsEnv = "IDEMKV_TEST_CQL_PTY_ARGS"

// TestCQLTerminalChild is not a test: it is the shell process of
// TestCQLTerminal, run on the pseudo-terminal.
func TestCQLTerminalChild(t *testing.T) {
	args := os.Getenv(ptyArgsEnv)
	if args == "" {
		t.Skip("run by TestCQLTerminal")
	}
	os.Exit(run(append([]string{"cql"}, strings.Fields(args)...), os.Stdout, os.Stderr))
}

func ioctl(fd uintptr, req uint, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(req), uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// openPTY opens a pseudo-terminal pair with a 40x120 window.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	var n uint32
	if err := ioctl(m.Fd(), syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatal(err)
	}
	if err := ioctl(m.Fd(), syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := [4]uint16{40, 120, 0, 0}
	if err := ioctl(s.Fd(), syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// terminal is the user's side of a pseudo-terminal: what the shell wrote so
// far, and keys to type.
type terminal struct {
	t      *testing.T
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	seen   int // the output up to here matched earlier expectations
}

func (term *terminal) read() {
	buf := make([]byte, 4096)
	for {
		n, err := term.master.Read(buf)
		term.mu.Lock()
		term.out.Write(buf[:n])
		term.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (term *terminal) typeKeys(keys string) {
	term.t.Helper()
	if _, err := term.master.Write([]byte(keys)); err != nil {
		term.t.Fatal(err)
	}
}

// expect waits for the shell to write want after the previous expectation.
// The bound only keeps a broken shell from hanging the test.
func (term *terminal) expect(want string) {
	term.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		term.mu.Lock()
		got := term.out.String()
		term.mu.Unlock()
		if i := strings.Index(got[term.seen:], want); i >= 0 {
			term.seen += i + len(want)
			return
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("the shell did not write %q; it wrote after the last match:\n%q", want, got[term.seen:])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCQLTerminal types at idemkv cql on a pseudo-terminal, through liner:
// the up arrow recalls a statement, Ctrl-C drops the statement being typed
// and Ctrl-D leaves without running the unfinished one.
func TestCQLTerminal(t *testing.T) {
	port := strconv.Itoa(startNode(t))
	var out, errOut bytes.Buffer
	if code := run([]string{"cql", "--port", port, "-e", "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}; " +
		"CREATE TABLE ks.t (k text PRIMARY KEY, c counter); UPDATE ks.t SET c = c + 1 WHERE k = 'a'"}, &out, &errOut); code != 0 {
		t.Fatalf("setup: %s", errOut.String())
	}
	master, slave := openPTY(t)
	defer master.Close()
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCQLTerminalChild$")
	cmd.Env = append(os.Environ(), ptyArgsEnv+"=--port "+port, "TERM=xterm", "HOME="+home)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	term := &terminal{t: t, master: master}
	go term.read()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	term.expect("Use HELP for help.")
	term.expect("idemkv> ")
	term.typeKeys("SELECT c FROM ks.t WHERE k = 'a';\r")
	term.expect("(1 rows)")
	term.expect("idemkv> ")
	term.typeKeys("\x1b[A") // up: the statement again
	term.expect("SELECT c FROM ks.t WHERE k = 'a';")
	term.typeKeys("\r")
	term.expect("(1 rows)")
	term.expect("idemkv> ")
	term.typeKeys("UPDATE ks.t SET c = c + 100\r")
	term.expect("   ... ")
	term.typeKeys("WHERE k = 'a'")
	term.expect("WHERE k = 'a'")
	term.typeKeys("\x03") // Ctrl-C: the UPDATE is dropped
	term.expect("idemkv> ")
	term.typeKeys("UPDATE ks.t SET c = c + 10 WHERE k = 'a'\r")
	term.expect("   ... ")
	term.typeKeys("\x04") // Ctrl-D: leave; the UPDATE does not run
	term.expect("(the unfinished statement was not executed)")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the shell: %v", err)
	}

	out.Reset()
	if code := run([]string{"cql", "--port", port, "-e", "SELECT c FROM ks.t WHERE k = 'a'"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), " 1\n") {
		t.Errorf("the counter changed (want 1):\n%s%s", out.String(), errOut.String())
	}
	hist, err := os.ReadFile(filepath.Join(home, ".idemkv_history"))
	if err != nil || string(hist) != "SELECT c FROM ks.t WHERE k = 'a';\n" {
		t.Errorf("history file %q (%v)", hist, err)
	}
}
