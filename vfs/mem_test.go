package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func mustWrite(t *testing.T, m FS, name string, data []byte, sync bool) File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func content(t *testing.T, m FS, name string) (string, bool) {
	t.Helper()
	b, err := m.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestMemDurability(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/d/e", 0o755); err != nil {
		t.Fatal(err)
	}
	// Synced data and a synced directory survive; unsynced appends do not.
	f := mustWrite(t, m, "/d/a", []byte("hello"), true)
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(" world"))
	// Created and synced, but the directory is not synced: vanishes.
	mustWrite(t, m, "/d/b", []byte("bbb"), true)
	// Created, directory synced, data never synced: survives empty.
	mustWrite(t, m, "/d/e/c", []byte("ccc"), false)
	if err := m.SyncDir("/d/e"); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, m, "/d/a"); got != "hello world" {
		t.Fatalf("before crash: %q", got)
	}
	c := m.CrashClone(CrashOptions{})
	if got, ok := content(t, c, "/d/a"); !ok || got != "hello" {
		t.Fatalf("synced file after crash: %q, %v; want only the synced bytes", got, ok)
	}
	if _, ok := content(t, c, "/d/b"); ok {
		t.Fatal("file whose directory was never synced survived the crash")
	}
	if got, ok := content(t, c, "/d/e/c"); !ok || got != "" {
		t.Fatalf("unsynced file after crash: %q, %v; want empty", got, ok)
	}
	// The old FS is untouched by the crash.
	if got, _ := content(t, m, "/d/a"); got != "hello world" {
		t.Fatalf("old FS after CrashClone: %q", got)
	}
	if _, err := f.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, c, "/d/a"); got != "hello" {
		t.Fatalf("write on the old handle reached the clone: %q", got)
	}
}

func TestMemRenameAndRemoveRevert(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	mustWrite(t, m, "/d/old", []byte("1"), true)
	mustWrite(t, m, "/d/target", []byte("2"), true)
	m.SyncDir("/d")
	if err := m.Rename("/d/old", "/d/target"); err != nil {
		t.Fatal(err)
	}
	if _, ok := content(t, m, "/d/old"); ok {
		t.Fatal("old name still there after rename")
	}
	c := m.CrashClone(CrashOptions{})
	if got, _ := content(t, c, "/d/old"); got != "1" {
		t.Fatalf("rename without SyncDir: old name holds %q after crash", got)
	}
	if got, _ := content(t, c, "/d/target"); got != "2" {
		t.Fatalf("rename without SyncDir: target holds %q after crash", got)
	}
	m.SyncDir("/d")
	c = m.CrashClone(CrashOptions{})
	if _, ok := content(t, c, "/d/old"); ok {
		t.Fatal("synced rename reverted")
	}
	if got, _ := content(t, c, "/d/target"); got != "1" {
		t.Fatalf("synced rename: target holds %q", got)
	}
	// Remove without SyncDir reverts.
	if err := m.Remove("/d/target"); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/target"); got != "1" {
		t.Fatalf("unsynced remove: target %q after crash", got)
	}
	m.SyncDir("/d")
	if _, ok := content(t, m.CrashClone(CrashOptions{}), "/d/target"); ok {
		t.Fatal("synced remove reverted")
	}
}

func TestMemWriteFileAtomic(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	if err := WriteFileAtomic(m, "/d", "f", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(m, "/d", "f", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone(CrashOptions{})
	if got, _ := content(t, c, "/d/f"); got != "v2" {
		t.Fatalf("after crash: %q", got)
	}
	if _, ok := content(t, c, "/d/f.tmp"); ok {
		t.Fatal("temporary file left behind")
	}
}

func TestMemOpenSemantics(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	if _, err := m.Open("/d/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	if _, err := m.OpenFile("/nodir/x", os.O_CREATE|os.O_WRONLY, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in a missing directory: %v", err)
	}
	f, err := m.OpenFile("/d/x", os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.OpenFile("/d/x", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on an existing file: %v", err)
	}
	f.Write([]byte("abcdef"))
	b := make([]byte, 3)
	if n, err := f.ReadAt(b, 2); n != 3 || err != nil || string(b) != "cde" {
		t.Fatalf("ReadAt: %d %v %q", n, err, b)
	}
	if n, err := f.ReadAt(b, 4); n != 2 || err != io.EOF {
		t.Fatalf("ReadAt past end: %d %v", n, err)
	}
	if n, err := f.Read(b); n != 0 || err != io.EOF {
		t.Fatalf("Read at end of what was written: %d %v", n, err)
	}
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("Z")) // offset 6: zero gap
	if got, _ := content(t, m, "/d/x"); got != "ab\x00\x00\x00\x00Z" {
		t.Fatalf("write after truncate: %q", got)
	}
	if st, _ := f.Stat(); st.Size() != 7 || st.Name() != "x" {
		t.Fatalf("Stat %v %d", st.Name(), st.Size())
	}
	f.Close()
	if _, err := f.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}

	a, _ := m.OpenFile("/d/x", os.O_WRONLY|os.O_APPEND, 0)
	a.Write([]byte("++"))
	r, _ := m.Open("/d/x")
	all, _ := io.ReadAll(r)
	if string(all) != "ab\x00\x00\x00\x00Z++" {
		t.Fatalf("O_APPEND: %q", all)
	}
	if _, err := r.Write([]byte("x")); err == nil {
		t.Fatal("write on a read-only handle succeeded")
	}
	if _, err := a.Read(b); err == nil {
		t.Fatal("read on a write-only handle succeeded")
	}
	tr, _ := m.OpenFile("/d/x", os.O_WRONLY|os.O_TRUNC, 0)
	tr.Close()
	if st, err := m.Stat("/d/x"); err != nil || st.Size() != 0 {
		t.Fatalf("O_TRUNC: %v", err)
	}
	if st, err := m.Stat("/d"); err != nil || !st.IsDir() {
		t.Fatalf("Stat dir: %v", err)
	}
	if err := m.Remove("/d"); err == nil {
		t.Fatal("removed a non-empty directory")
	}
	if err := m.RemoveAll("/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat("/d/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after RemoveAll: %v", err)
	}
	if err := m.RemoveAll("/d"); err != nil {
		t.Fatalf("RemoveAll of a missing path: %v", err)
	}
}

func TestMemReadDirSorted(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d/sub", 0o755)
	for _, n := range []string{"c", "a", "b10", "b2"} {
		mustWrite(t, m, filepath.Join("/d", n), []byte(n), false).Close()
	}
	es, err := m.ReadDir("/d")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
		if e.IsDir() != (e.Name() == "sub") || (!e.IsDir() && !e.Type().IsRegular()) {
			t.Fatalf("entry %s: type %v", e.Name(), e.Type())
		}
	}
	if fmt.Sprint(names) != "[a b10 b2 c sub]" {
		t.Fatalf("ReadDir order %v", names)
	}
	if _, err := m.ReadDir("/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadDir missing: %v", err)
	}
}

func TestMemTearingReproducible(t *testing.T) {
	build := func() *MemFS {
		m := NewMem()
		m.MkdirAll("/d", 0o755)
		for i := 0; i < 20; i++ {
			f := mustWrite(t, m, fmt.Sprintf("/d/f%02d", i), []byte("durable-"), true)
			f.Write(bytes.Repeat([]byte{byte('a' + i)}, 100))
		}
		m.SyncDir("/d")
		return m
	}
	snap := func(m *MemFS) string {
		var b bytes.Buffer
		for i := 0; i < 20; i++ {
			s, _ := content(t, m, fmt.Sprintf("/d/f%02d", i))
			fmt.Fprintf(&b, "%q\n", s)
		}
		return b.String()
	}
	m := build()
	one := snap(m.CrashClone(CrashOptions{Seed: 7, TearUnsynced: true}))
	if two := snap(build().CrashClone(CrashOptions{Seed: 7, TearUnsynced: true})); one != two {
		t.Fatalf("same seed, different tears:\n%s\n%s", one, two)
	}
	if other := snap(m.CrashClone(CrashOptions{Seed: 8, TearUnsynced: true})); other == one {
		t.Fatal("different seeds gave identical tears")
	}
	torn := 0
	for i := 0; i < 20; i++ {
		s, _ := content(t, m.CrashClone(CrashOptions{Seed: 7, TearUnsynced: true}), fmt.Sprintf("/d/f%02d", i))
		want := "durable-" + string(bytes.Repeat([]byte{byte('a' + i)}, 100))
		if len(s) < 8 || want[:len(s)] != s {
			t.Fatalf("torn file %d is not a prefix of what was written: %q", i, s)
		}
		if len(s) > 8 && len(s) < len(want) {
			torn++
		}
	}
	if torn == 0 {
		t.Fatal("no file was torn")
	}
	if got := snap(m.CrashClone(CrashOptions{Seed: 7})); got != snap(m.CrashClone(CrashOptions{Seed: 99})) {
		t.Fatal("without TearUnsynced the seed matters")
	}
}

func TestMemFaults(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	f := mustWrite(t, m, "/d/f", []byte("0123456789"), true)
	m.SyncDir("/d")
	if err := m.Corrupt("/d/f", 3, 0xff); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/f"); got != "012\xcc456789" {
		t.Fatalf("corrupt did not reach durable bytes: %q", got)
	}
	if err := m.Corrupt("/d/f", 10, 1); err == nil {
		t.Fatal("corrupt beyond the end succeeded")
	}
	if err := m.Cut("/d/f", 4); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, m, "/d/f"); got != "012\xcc" {
		t.Fatalf("cut: %q", got)
	}
	if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/f"); got != "012\xcc" {
		t.Fatalf("cut did not reach durable bytes: %q", got)
	}

	boom := errors.New("boom")
	m.FailSync(func(name string) bool { return name == "/d/f" }, boom)
	f.Write([]byte("x"))
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Fatalf("injected sync error: %v", err)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatalf("unmatched SyncDir: %v", err)
	}
	if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/f"); got != "012\xcc" {
		t.Fatalf("failed sync made data durable: %q", got)
	}
	m.FailSync(func(string) bool { return true }, nil) // lying disk
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/f"); got != "012\xcc" {
		t.Fatalf("no-op sync made data durable: %q", got)
	}
	m.FailSync(nil, nil)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	// The handle's offset is still 10: the cut left a hole, as on os.
	if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/f"); got != "012\xcc\x00\x00\x00\x00\x00\x00x" {
		t.Fatalf("after clearing the fault: %q", got)
	}

	m.FailWrite(func(name string) bool { return name == "/d/f" }, boom)
	if _, err := f.Write([]byte("y")); !errors.Is(err, boom) {
		t.Fatalf("injected write error: %v", err)
	}
	if err := f.Truncate(0); !errors.Is(err, boom) {
		t.Fatalf("injected truncate error: %v", err)
	}
	m.FailWrite(nil, nil)
	if got, _ := content(t, m, "/d/f"); got != "012\xcc\x00\x00\x00\x00\x00\x00x" {
		t.Fatalf("failed write changed the file: %q", got)
	}

	if err := m.Lose("/d/f"); err != nil {
		t.Fatal(err)
	}
	if _, ok := content(t, m, "/d/f"); ok {
		t.Fatal("lost file still readable")
	}
	if _, ok := content(t, m.CrashClone(CrashOptions{}), "/d/f"); ok {
		t.Fatal("lost file came back after a crash")
	}
	if err := m.Lose("/d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("losing a missing file: %v", err)
	}
}

func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			name := fmt.Sprintf("/d/w%d", w)
			f, err := m.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < 200; i++ {
				f.Write([]byte{byte(i)})
				if i%10 == 0 {
					f.Sync()
					m.SyncDir("/d")
				}
				m.ReadDir("/d")
				m.Stat(name)
				if i%50 == 0 {
					m.CrashClone(CrashOptions{Seed: uint64(i), TearUnsynced: true})
				}
			}
			f.Close()
		}(w)
	}
	wg.Wait()
	for w := 0; w < 8; w++ {
		if st, err := m.Stat(fmt.Sprintf("/d/w%d", w)); err != nil || st.Size() != 200 {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
}

var _ FS = (*MemFS)(nil)
