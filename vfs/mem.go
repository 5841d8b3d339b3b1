package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that enforces the package's durability contract
// and models a machine crash, as pebble's strict MemFS does. Create one with
// NewMem; it is safe for concurrent use.
//
// Every file has its current bytes (what reads see) and its durable bytes
// (a copy taken by File.Sync). Every directory has its current file entries
// and its durable file entries (a copy taken by SyncDir): a file created,
// renamed over or removed is durable in its directory only after SyncDir of
// that directory. Directories themselves are durable at once: MkdirAll,
// Remove of an empty directory and RemoveAll take effect in both views
// immediately (RemoveAll also drops the durable entries of what it removes).
//
// CrashClone returns a new MemFS holding only what survives a crash at that
// instant; the receiver is left as it was, so handles open on it (and code
// still running against it) keep working on the old, pre-crash filesystem
// and can never affect the clone. Code under test is then reopened on the
// clone, as a restarted process would be.
//
// Fault injection: Lose, Corrupt and Cut damage files in both views (a disk
// fault that survives crashes); FailSync and FailWrite make Sync, SyncDir,
// Write and Truncate fail (or, for FailSync with a nil error, succeed
// without making anything durable, as a lying disk does).
//
// Differences from os: paths are cleaned with filepath.Clean and relative
// paths are separate from absolute ones (there is no working directory);
// "/" and "." always exist; directories cannot be opened, renamed or
// synced as files; permissions are recorded but not enforced; ModTime is
// always the zero time.
type MemFS struct {
	mu   sync.Mutex
	dirs map[string]*memDir // by cleaned path

	syncMatch  func(string) bool
	syncErr    error
	writeMatch func(string) bool
	writeErr   error
}

type memDir struct {
	files   map[string]*memNode // current entries
	durable map[string]*memNode // entries as of the last SyncDir
	perm    fs.FileMode
}

type memNode struct {
	data   []byte // current contents
	synced []byte // contents as of the last Sync
	perm   fs.FileMode
	// data[dirtyLo:dirtyHi] (clipped to its length) holds every byte
	// changed since the last Sync, when dirty; Sync copies only that range
	// when the length is unchanged, so that syncing a large preallocated
	// file costs what was written to it.
	dirty            bool
	dirtyLo, dirtyHi int64
}

// touch records that data[lo:hi] changed.
func (n *memNode) touch(lo, hi int64) {
	if !n.dirty {
		n.dirty, n.dirtyLo, n.dirtyHi = true, lo, hi
		return
	}
	n.dirtyLo, n.dirtyHi = min(n.dirtyLo, lo), max(n.dirtyHi, hi)
}

// sync makes synced equal data.
func (n *memNode) sync() {
	if len(n.synced) != len(n.data) {
		n.synced = slices.Clone(n.data)
	} else if n.dirty {
		hi := min(n.dirtyHi, int64(len(n.data)))
		if lo := n.dirtyLo; lo < hi {
			copy(n.synced[lo:hi], n.data[lo:hi])
		}
	}
	n.dirty = false
}

// grow extends data to size with zeros (size above its length).
func (n *memNode) grow(size int64) {
	n.touch(int64(len(n.data)), size)
	grown := make([]byte, size)
	copy(grown, n.data)
	n.data = grown
}

// shrink cuts data to size, copying it out of a much larger array so that
// a file cut short (a preallocated segment trimmed) does not keep the
// array alive.
func (n *memNode) shrink(size int64) {
	n.touch(size, int64(len(n.data)))
	if int64(cap(n.data)) > 2*size+PageSize {
		n.data = slices.Clone(n.data[:size])
		return
	}
	n.data = n.data[:size:size]
}

// NewMem returns an empty in-memory filesystem holding the roots "/" and ".".
func NewMem() *MemFS {
	m := &MemFS{dirs: map[string]*memDir{}}
	m.dirs["/"] = newMemDir(0o755)
	m.dirs["."] = newMemDir(0o755)
	return m
}

func newMemDir(perm fs.FileMode) *memDir {
	return &memDir{files: map[string]*memNode{}, durable: map[string]*memNode{}, perm: perm}
}

func pathErr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

// lookup returns the directory holding name, the cleaned base name and the
// file node (nil if none); m.mu is held.
func (m *MemFS) lookup(name string) (dir *memDir, base string, n *memNode, err error) {
	clean := filepath.Clean(name)
	if _, isDir := m.dirs[clean]; isDir {
		return nil, "", nil, syscall.EISDIR
	}
	d, ok := m.dirs[filepath.Dir(clean)]
	if !ok {
		if _, ok := m.fileAt(filepath.Dir(clean)); ok {
			return nil, "", nil, syscall.ENOTDIR
		}
		return nil, "", nil, fs.ErrNotExist
	}
	base = filepath.Base(clean)
	return d, base, d.files[base], nil
}

// fileAt returns the file at a cleaned path; m.mu is held.
func (m *MemFS) fileAt(clean string) (*memNode, bool) {
	d, ok := m.dirs[filepath.Dir(clean)]
	if !ok {
		return nil, false
	}
	n, ok := d.files[filepath.Base(clean)]
	return n, ok
}

// OpenFile opens name with os.OpenFile's flags (see FS).
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if n == nil {
		if flag&os.O_CREATE == 0 {
			return nil, pathErr("open", name, fs.ErrNotExist)
		}
		n = &memNode{perm: perm.Perm()}
		d.files[base] = n
	} else if flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL {
		return nil, pathErr("open", name, fs.ErrExist)
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	f := &memFile{fs: m, node: n, name: name,
		read:   acc == os.O_RDONLY || acc == os.O_RDWR,
		write:  acc == os.O_WRONLY || acc == os.O_RDWR,
		append: flag&os.O_APPEND != 0}
	if flag&os.O_TRUNC != 0 && f.write {
		if m.writeMatch != nil && m.writeMatch(name) {
			return nil, pathErr("truncate", name, m.writeErr)
		}
		n.touch(0, int64(len(n.data)))
		n.data = nil
	}
	return f, nil
}

// Open opens name for reading.
func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile returns a copy of name's current contents.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.lookup(name)
	if err == nil && n == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return slices.Clone(n.data), nil
}

// Remove removes a file (durable after SyncDir of its directory) or an empty
// directory (durable at once).
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := filepath.Clean(name)
	if d, ok := m.dirs[clean]; ok {
		if clean == "/" || clean == "." {
			return pathErr("remove", name, syscall.EBUSY)
		}
		if len(d.files) > 0 || len(m.subdirs(clean)) > 0 {
			return pathErr("remove", name, syscall.ENOTEMPTY)
		}
		delete(m.dirs, clean)
		return nil
	}
	d, base, n, err := m.lookup(name)
	if err == nil && n == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return pathErr("remove", name, err)
	}
	delete(d.files, base)
	return nil
}

// subdirs returns the names of the directories directly under the cleaned
// path dir; m.mu is held.
func (m *MemFS) subdirs(dir string) []string {
	var out []string
	for p := range m.dirs {
		if p != dir && filepath.Dir(p) == dir {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}

// RemoveAll removes path and everything below it, in both the current and
// the durable views.
func (m *MemFS) RemoveAll(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := filepath.Clean(path)
	if _, ok := m.dirs[clean]; !ok {
		d, ok := m.dirs[filepath.Dir(clean)]
		if ok {
			delete(d.files, filepath.Base(clean))
			delete(d.durable, filepath.Base(clean))
		}
		return nil
	}
	if clean == "/" || clean == "." {
		return pathErr("removeall", path, syscall.EBUSY)
	}
	prefix := clean + string(filepath.Separator)
	for p := range m.dirs {
		if p == clean || strings.HasPrefix(p, prefix) {
			delete(m.dirs, p)
		}
	}
	return nil
}

// Rename moves the file oldname to newname, replacing any file there. Both
// directories must be synced for the move to be durable.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, n, err := m.lookup(oldname)
	if err == nil && n == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	nd, nbase, _, err := m.lookup(newname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	delete(od.files, obase)
	nd.files[nbase] = n
	return nil
}

// MkdirAll creates dir and any missing parents; directories are durable at
// once.
func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := filepath.Clean(dir)
	var missing []string
	for p := clean; ; p = filepath.Dir(p) {
		if _, ok := m.dirs[p]; ok {
			break
		}
		if _, ok := m.fileAt(p); ok {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for _, p := range missing {
		m.dirs[p] = newMemDir(perm.Perm())
	}
	return nil
}

// ReadDir lists dir's current entries sorted by name.
func (m *MemFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := filepath.Clean(dir)
	d, ok := m.dirs[clean]
	if !ok {
		if _, isFile := m.fileAt(clean); isFile {
			return nil, pathErr("readdirent", dir, syscall.ENOTDIR)
		}
		return nil, pathErr("open", dir, fs.ErrNotExist)
	}
	var out []fs.DirEntry
	for name, n := range d.files {
		out = append(out, fs.FileInfoToDirEntry(n.info(name)))
	}
	for _, name := range m.subdirs(clean) {
		out = append(out, fs.FileInfoToDirEntry(m.dirs[filepath.Join(clean, name)].info(name)))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Stat describes a file or directory.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := filepath.Clean(name)
	if d, ok := m.dirs[clean]; ok {
		return d.info(filepath.Base(clean)), nil
	}
	_, _, n, err := m.lookup(name)
	if err == nil && n == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return n.info(filepath.Base(clean)), nil
}

// SyncDir makes dir's current file entries its durable ones.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := filepath.Clean(dir)
	d, ok := m.dirs[clean]
	if !ok {
		return pathErr("open", dir, fs.ErrNotExist)
	}
	if m.syncMatch != nil && m.syncMatch(dir) {
		if m.syncErr != nil {
			return pathErr("sync", dir, m.syncErr)
		}
		return nil
	}
	d.durable = maps.Clone(d.files)
	return nil
}

// CrashOptions shape CrashClone.
type CrashOptions struct {
	// TearUnsynced keeps, for each surviving file whose current contents
	// differ from its durable contents, a random prefix of the unsynced
	// bytes (a torn write: from the first byte written since the last Sync
	// to the last, appended or written in place, as through a Mapping)
	// instead of dropping them all.
	TearUnsynced bool
	// TearPages keeps each PageSize-aligned page of a file's unsynced bytes
	// with probability 1/2, independently of the others, instead of a
	// prefix: a disk that persisted the kernel's writeback in another order
	// than the file's (or a filesystem that converted a later preallocated
	// extent to written before an earlier one). A page not kept holds its
	// durable bytes, zeros past the durable length; a file longer than its
	// durable contents ends with its last page kept. It takes precedence
	// over TearUnsynced.
	TearPages bool
	// Seed drives the random prefixes; the same seed on the same state gives
	// the same result.
	Seed uint64
}

// CrashClone returns a new MemFS holding what survives a machine crash now:
// each directory's durable entries, each surviving file with its durable
// contents (plus, with TearUnsynced, a random prefix of its unsynced
// bytes). Directories all survive. The clone is durable as it
// stands (a second crash of it loses nothing more) and has no injected
// faults. The receiver is not changed.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5851f42d4c957f2d))
	c := &MemFS{dirs: make(map[string]*memDir, len(m.dirs))}
	paths := make([]string, 0, len(m.dirs))
	for p := range m.dirs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		d := m.dirs[p]
		nd := newMemDir(d.perm)
		names := make([]string, 0, len(d.durable))
		for name := range d.durable {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			n := d.durable[name]
			data := slices.Clone(n.synced)
			switch {
			case opts.TearPages:
				data = tearPages(data, n.data, rng)
			case opts.TearUnsynced:
				data = tear(data, n.data, rng)
			}
			nn := &memNode{data: data, synced: slices.Clone(data), perm: n.perm}
			nd.files[name] = nn
			nd.durable[name] = nn
		}
		c.dirs[p] = nd
	}
	return c
}

// tear returns synced with a random prefix of the unsynced writes in data
// laid over it: the bytes from the first one that differs from synced (or
// that synced lacks) to the last such byte, in file order, as the kernel
// writes a file's dirty pages back. A file cut shorter than synced is not
// torn (synced is returned).
func tear(synced, data []byte, rng *rand.Rand) []byte {
	if len(data) < len(synced) {
		return synced
	}
	first := firstDiff(synced, data[:len(synced)])
	last := len(data)
	if first == len(synced) && len(data) == len(synced) {
		return synced
	}
	if len(data) == len(synced) {
		last = lastDiff(synced, data) + 1
	}
	keep := rng.IntN(last - first + 1)
	if end := first + keep; end > len(synced) {
		synced = append(synced, make([]byte, end-len(synced))...)
	}
	copy(synced[first:], data[first:first+keep])
	return synced
}

// firstDiff is the index of the first byte where a and b (of one length)
// differ, or their length. It compares a page at a time (a memory
// comparison, not a loop over bytes: a preallocated file is tens of MiB).
func firstDiff(a, b []byte) int {
	p := 0
	for p+PageSize <= len(a) && string(a[p:p+PageSize]) == string(b[p:p+PageSize]) {
		p += PageSize
	}
	for p < len(a) && a[p] == b[p] {
		p++
	}
	return p
}

// lastDiff is the index of the last byte where a and b (of one length, not
// equal) differ.
func lastDiff(a, b []byte) int {
	q := len(a)
	for q-PageSize >= 0 && string(a[q-PageSize:q]) == string(b[q-PageSize:q]) {
		q -= PageSize
	}
	for a[q-1] == b[q-1] {
		q--
	}
	return q - 1
}

// PageSize is the unit in which CrashOptions.TearPages keeps or drops
// unsynced bytes: the kernel's page.
const PageSize = 4096

// tearPages returns synced with each page of data that differs from it
// laid over it with probability 1/2 (see CrashOptions.TearPages).
func tearPages(synced, data []byte, rng *rand.Rand) []byte {
	if len(data) < len(synced) {
		return synced // a cut file is not torn
	}
	out := synced
	if len(data) > len(out) {
		out = append(out, make([]byte, len(data)-len(out))...)
	}
	end := len(synced)
	for p := 0; p < len(data); p += PageSize {
		q := min(p+PageSize, len(data))
		var old []byte
		if p < len(synced) {
			old = synced[p:min(q, len(synced))]
		}
		if string(old) == string(data[p:q]) || rng.IntN(2) == 0 {
			continue
		}
		copy(out[p:q], data[p:q])
		end = max(end, q)
	}
	if len(data) > len(synced) {
		out = out[:end]
	}
	return out
}

// Lose removes the file name from both the current and the durable views, as
// a disk fault that loses a file would.
func (m *MemFS) Lose(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, n, err := m.lookup(name)
	if err == nil && n == nil && d.durable[base] == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return pathErr("lose", name, err)
	}
	delete(d.files, base)
	delete(d.durable, base)
	return nil
}

// node returns the file name in either view; m.mu is held.
func (m *MemFS) node(op, name string) (*memNode, error) {
	d, base, n, err := m.lookup(name)
	if err == nil && n == nil {
		n = d.durable[base]
	}
	if err == nil && n == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	return n, nil
}

// Corrupt XORs the byte at offset of file name with x, in both its current
// and its durable contents (where they are long enough). It fails if the
// offset is beyond both.
func (m *MemFS) Corrupt(name string, offset int64, x byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.node("corrupt", name)
	if err != nil {
		return err
	}
	hit := false
	for _, b := range [][]byte{n.data, n.synced} {
		if offset >= 0 && offset < int64(len(b)) {
			b[offset] ^= x
			hit = true
		}
	}
	if !hit {
		return pathErr("corrupt", name, fmt.Errorf("offset %d beyond the file: %w", offset, io.EOF))
	}
	return nil
}

// Cut shortens file name to at most size bytes in both its current and its
// durable contents, as a disk that lost the file's tail would.
func (m *MemFS) Cut(name string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.node("cut", name)
	if err != nil {
		return err
	}
	if size < 0 {
		return pathErr("cut", name, fs.ErrInvalid)
	}
	if int64(len(n.data)) > size {
		n.data = n.data[:size:size]
	}
	if int64(len(n.synced)) > size {
		n.synced = n.synced[:size:size]
	}
	return nil
}

// FailSync makes File.Sync and SyncDir on every path for which match returns
// true fail with err (wrapped in a *fs.PathError), without making anything
// durable. With a nil err they succeed without making anything durable: a
// disk that lies about fsync. FailSync(nil, nil) clears the fault. Paths are
// given to match as the caller spelled them.
func (m *MemFS) FailSync(match func(name string) bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncMatch, m.syncErr = match, err
}

// FailWrite makes Write and Truncate (and O_TRUNC opens) on every file for
// which match returns true fail with err, changing nothing. FailWrite(nil,
// nil) clears the fault. err must not be nil when match is set.
func (m *MemFS) FailWrite(match func(name string) bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if match != nil && err == nil {
		err = errors.New("vfs: injected write error")
	}
	m.writeMatch, m.writeErr = match, err
}

type memInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

func (n *memNode) info(name string) fs.FileInfo {
	return memInfo{name: name, size: int64(len(n.data)), mode: n.perm}
}

func (d *memDir) info(name string) fs.FileInfo {
	return memInfo{name: name, mode: fs.ModeDir | d.perm}
}

// memFile is an open MemFS file. Its state is guarded by fs.mu, so it is
// safe for concurrent use, although File does not promise that.
type memFile struct {
	fs                  *MemFS
	node                *memNode
	name                string
	off                 int64
	read, write, append bool
	closed              bool
}

var errBadFD = errors.New("bad file descriptor")

func (f *memFile) check(op string, needRead, needWrite bool) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if (needRead && !f.read) || (needWrite && !f.write) {
		return pathErr(op, f.name, errBadFD)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if f.off >= int64(len(f.node.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.off:])
	f.off += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, errors.New("negative offset"))
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.fs.writeMatch != nil && f.fs.writeMatch(f.name) {
		return 0, pathErr("write", f.name, f.fs.writeErr)
	}
	n := f.node
	if f.append {
		f.off = int64(len(n.data))
	}
	end := f.off + int64(len(p))
	lo := min(f.off, int64(len(n.data))) // bytes from here on change (a gap is cleared)
	if old := int64(len(n.data)); end > old {
		if end <= int64(cap(n.data)) {
			n.data = n.data[:end]
			if f.off > old {
				clear(n.data[old:f.off])
			}
		} else {
			grown := make([]byte, end, max(end, 2*int64(cap(n.data))))
			copy(grown, n.data)
			n.data = grown
		}
	}
	copy(n.data[f.off:], p)
	n.touch(lo, end)
	f.off = end
	return len(p), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false, false); err != nil {
		return err
	}
	if f.fs.syncMatch != nil && f.fs.syncMatch(f.name) {
		if f.fs.syncErr != nil {
			return pathErr("sync", f.name, f.fs.syncErr)
		}
		return nil
	}
	f.node.sync()
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", false, true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	if f.fs.writeMatch != nil && f.fs.writeMatch(f.name) {
		return pathErr("truncate", f.name, f.fs.writeErr)
	}
	n := f.node
	if size <= int64(len(n.data)) {
		n.shrink(size)
	} else {
		n.grow(size)
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, pathErr("stat", f.name, fs.ErrClosed)
	}
	return f.node.info(filepath.Base(f.name)), nil
}

func (f *memFile) Name() string { return f.name }
