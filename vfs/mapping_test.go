package vfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/idemkv/idemkv/internal/testseed"
)

// TestMemMap checks a MemFS mapping: it preallocates with zeros, its writes
// are current at once and durable only after Sync, and it refuses writes past
// its size, after Close, and over a file truncated under it.
func TestMemMap(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	f, err := m.OpenFile("/d/seg", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hdr"))
	f.Sync()
	m.SyncDir("/d")
	mp, err := Map(f, 64)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size() != 64 {
		t.Fatalf("mapped file is %d bytes, want the 64 preallocated", fi.Size())
	}
	if n, err := mp.WriteAt([]byte("abc"), 3); n != 3 || err != nil {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
	want := "hdrabc" + strings.Repeat("\x00", 58)
	if got, _ := content(t, m, "/d/seg"); got != want {
		t.Fatalf("current bytes %q, want %q", got, want)
	}
	if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/seg"); got != "hdr" {
		t.Fatalf("before Sync a crash keeps %q, want only the synced header", got)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/seg"); got != want {
		t.Fatalf("after Sync a crash keeps %q, want %q", got, want)
	}
	if _, err := mp.WriteAt([]byte("xy"), 63); err == nil {
		t.Fatal("a write past the mapped size succeeded")
	}
	f.Close() // a mapping outlives its file handle
	if _, err := mp.WriteAt([]byte("z"), 10); err != nil {
		t.Fatalf("write after the file's Close: %v", err)
	}
	g, _ := m.OpenFile("/d/seg", os.O_RDWR, 0)
	g.Truncate(8)
	if _, err := mp.WriteAt([]byte("z"), 10); err == nil {
		t.Fatal("a write over a truncated file succeeded")
	}
	if err := mp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mp.WriteAt([]byte("z"), 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("write after Close: %v, want fs.ErrClosed", err)
	}
	if err := mp.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close: %v, want fs.ErrClosed", err)
	}

	w, _ := m.OpenFile("/d/wo", os.O_CREATE|os.O_WRONLY, 0o644)
	if _, err := Map(w, 64); err == nil {
		t.Fatal("mapped a file open for writing only")
	}
	rw, _ := m.OpenFile("/d/rw", os.O_CREATE|os.O_RDWR, 0o644)
	if mp, err := Map(unwrapping{rw}, 64); err != nil {
		t.Fatalf("Map through an Unwrapper: %v", err)
	} else {
		mp.WriteAt([]byte("w"), 0)
		if got, _ := content(t, m, "/d/rw"); len(got) != 64 || got[0] != 'w' {
			t.Fatalf("a write through the wrapped file's mapping left %q", got)
		}
	}
	if _, err := Map(opaque{rw}, 64); !errors.Is(err, ErrMapUnsupported) {
		t.Fatalf("Map of a wrapper without Unwrap: %v, want ErrMapUnsupported", err)
	}
	boom := errors.New("disk full")
	m.FailWrite(func(string) bool { return true }, boom)
	if _, err := Map(rw, 64); !errors.Is(err, boom) {
		t.Fatalf("Map with failing preallocation: %v, want %v", err, boom)
	}
}

// TestMemTearInPlace checks that a torn crash keeps a prefix, in file
// order, of bytes written in place (through a mapping), laid over the
// durable bytes.
func TestMemTearInPlace(t *testing.T) {
	build := func() *MemFS {
		m := NewMem()
		m.MkdirAll("/d", 0o755)
		f, _ := m.OpenFile("/d/seg", os.O_CREATE|os.O_RDWR, 0o644)
		mp, err := Map(f, 100)
		if err != nil {
			t.Fatal(err)
		}
		f.Sync()
		m.SyncDir("/d")
		mp.WriteAt(bytes.Repeat([]byte{'a'}, 20), 10)
		mp.WriteAt(bytes.Repeat([]byte{'b'}, 20), 40)
		return m
	}
	written, _ := content(t, build(), "/d/seg")
	lens := map[int]bool{}
	for seed := uint64(0); seed < 64; seed++ {
		got, _ := content(t, build().CrashClone(CrashOptions{Seed: seed, TearUnsynced: true}), "/d/seg")
		if len(got) != 100 {
			t.Fatalf("seed %d: torn file is %d bytes, want 100", seed, len(got))
		}
		k := strings.LastIndexAny(got, "ab") + 1
		if got[:k] != written[:k] || strings.Trim(got[k:], "\x00") != "" {
			t.Fatalf("seed %d: torn file is not a prefix of the writes over zeros: %q", seed, got)
		}
		lens[k] = true
	}
	if len(lens) < 3 {
		t.Fatalf("64 seeds tore at only %d places", len(lens))
	}
	if got, _ := content(t, build().CrashClone(CrashOptions{Seed: 1}), "/d/seg"); got != strings.Repeat("\x00", 100) {
		t.Fatalf("without TearUnsynced a crash kept %q", got)
	}
}

// TestOSMap maps a real file: the preallocated size shows in Stat, writes
// through the mapping are seen by a separate read at once (the page cache is
// shared), and Sync, Close and the bounds behave.
func TestOSMap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("mapping is implemented on Linux only")
	}
	path := filepath.Join(t.TempDir(), "seg")
	f, err := Default.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("hdr"))
	mp, err := Map(f, 1<<16)
	if errors.Is(err, ErrMapUnsupported) {
		t.Skipf("the temporary directory's filesystem cannot be mapped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); fi.Size() != 1<<16 {
		t.Fatalf("mapped file is %d bytes, want %d", fi.Size(), 1<<16)
	}
	if _, err := mp.WriteAt([]byte("record"), 3); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[:9]) != "hdrrecord" || len(got) != 1<<16 || strings.Trim(string(got[9:]), "\x00") != "" {
		t.Fatalf("a read of the file sees %q… (%d bytes)", got[:16], len(got))
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := mp.WriteAt([]byte("xy"), 1<<16-1); err == nil {
		t.Fatal("a write past the mapped size succeeded")
	}
	if err := mp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mp.WriteAt([]byte("z"), 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("write after Close: %v, want fs.ErrClosed", err)
	}
	ro, _ := os.Open(path)
	defer ro.Close()
	if _, err := Map(ro, 64); err == nil {
		t.Fatal("mapped a file open for reading only")
	}
}

type opaque struct{ File }

type unwrapping struct{ File }

func (u unwrapping) Unwrap() File { return u.File }

// TestMemTearPages checks CrashOptions.TearPages: each unsynced page is
// kept whole or not at all, independently (some crashes keep a later page
// and drop an earlier one), a page not kept holds its durable bytes, and a
// grown file ends with its last kept page.
func TestMemTearPages(t *testing.T) {
	build := func() *MemFS {
		m := NewMem()
		m.MkdirAll("/d", 0o755)
		f, _ := m.OpenFile("/d/seg", os.O_CREATE|os.O_RDWR, 0o644)
		mp, _ := Map(f, 8*PageSize)
		mp.WriteAt([]byte("old"), 0)
		f.Sync()
		m.SyncDir("/d")
		for p := int64(0); p < 8; p++ {
			mp.WriteAt(bytes.Repeat([]byte{byte('a' + p)}, PageSize), p*PageSize)
		}
		a, _ := m.OpenFile("/d/app", os.O_CREATE|os.O_RDWR, 0o644)
		a.Write([]byte("head"))
		a.Sync()
		m.SyncDir("/d")
		a.Write(bytes.Repeat([]byte{'x'}, 3*PageSize))
		return m
	}
	reordered := false
	for seed := uint64(0); seed < 32; seed++ {
		c := build().CrashClone(CrashOptions{Seed: seed, TearPages: true})
		got, _ := content(t, c, "/d/seg")
		if len(got) != 8*PageSize {
			t.Fatalf("seed %d: mapped file is %d bytes, want %d", seed, len(got), 8*PageSize)
		}
		var kept []bool
		for p := 0; p < 8; p++ {
			page := got[p*PageSize : (p+1)*PageSize]
			old := strings.Repeat("\x00", PageSize)
			if p == 0 {
				old = "old" + old[3:]
			}
			switch page {
			case strings.Repeat(string(rune('a'+p)), PageSize):
				kept = append(kept, true)
			case old:
				kept = append(kept, false)
			default:
				t.Fatalf("seed %d: page %d is neither the written nor the durable page", seed, p)
			}
		}
		for p := 1; p < 8; p++ {
			if kept[p] && !kept[p-1] {
				reordered = true
			}
		}
		app, _ := content(t, c, "/d/app")
		if !strings.HasPrefix(app, "head") || len(app) > 4+3*PageSize || (len(app) > 4 && app[len(app)-1] != 'x') {
			t.Fatalf("seed %d: appended file torn to %d bytes ending %q", seed, len(app), app[max(0, len(app)-4):])
		}
	}
	if !reordered {
		t.Fatal("32 seeds never kept a page and dropped the one before it")
	}
}

// TestMemSyncCopiesEveryChange drives a file with seeded random writes,
// in-place mapped writes, truncations and syncs, and after each sync checks
// that what a crash keeps is exactly the current contents: Sync copies only
// the changed range, and every change must be in it.
func TestMemSyncCopiesEveryChange(t *testing.T) {
	rng := testseed.Rand(t)
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	f, _ := m.OpenFile("/d/f", os.O_CREATE|os.O_RDWR, 0o644)
	m.SyncDir("/d")
	var mp Mapping
	var mapped int64
	for step := 0; step < 2000; step++ {
		size := func() int64 { fi, _ := f.Stat(); return fi.Size() }
		switch op := rng.IntN(10); {
		case op < 3:
			b := make([]byte, 1+rng.IntN(300))
			for i := range b {
				b[i] = byte(1 + rng.IntN(255))
			}
			f.(*memFile).off = rng.Int64N(size() + 100)
			f.Write(b)
		case op < 5 && mp != nil:
			n := int64(1 + rng.IntN(200))
			if off := rng.Int64N(mapped); off+n <= mapped && off+n <= size() {
				mp.WriteAt(bytes.Repeat([]byte{byte(1 + rng.IntN(255))}, int(n)), off)
			}
		case op < 6:
			f.Truncate(rng.Int64N(size() + 2*PageSize))
			if mp != nil {
				mp.Close()
				mp = nil
			}
		case op < 7 && mp == nil:
			mapped = size() + int64(rng.IntN(3*PageSize)) + 1
			var err error
			if mp, err = Map(f, mapped); err != nil {
				t.Fatal(err)
			}
		default:
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			cur, _ := content(t, m, "/d/f")
			if got, _ := content(t, m.CrashClone(CrashOptions{}), "/d/f"); got != cur {
				t.Fatalf("step %d: after Sync a crash keeps %d bytes differing from the %d current ones", step, len(got), len(cur))
			}
		}
	}
}
