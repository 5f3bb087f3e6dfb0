package segment

// MemFS: the fault-injection file system for crash and failure tests (ours and the shard
// runtime's). It keeps two states of everything: what the process sees, and what would survive
// a crash. File data survives only once the file is synced; a create, rename or remove survives
// only once its directory is synced. Crash throws away the rest, optionally keeping a torn piece
// of each file's unsynced appended bytes, which is what a real disk may show after power loss.
// Directories themselves are treated as durable once created.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Op names a file system operation for fault injection.
type Op int

const (
	OpOpen     Op = iota // OpenFile of an existing file without O_TRUNC
	OpCreate             // OpenFile that creates or truncates
	OpRead               // File.ReadAt
	OpWrite              // File.WriteAt
	OpSync               // File.Sync
	OpTruncate           // File.Truncate
	OpRemove             // FS.Remove
	OpRename             // FS.Rename
	OpSyncDir            // FS.SyncDir
)

var opNames = [...]string{"open", "create", "read", "write", "sync", "truncate", "remove", "rename", "syncdir"}

func (o Op) String() string { return opNames[o] }

// Mutating reports whether the operation changes state (everything but open and read).
func (o Op) Mutating() bool { return o != OpOpen && o != OpRead }

// MemFS is an in-memory FS that can fail chosen operations and simulate crashes. Safe for
// concurrent use.
type MemFS struct {
	mu      sync.Mutex
	live    map[string]*memNode // what the process sees
	durable map[string]*memNode // what survives a crash
	dirs    map[string]bool
	locks   map[string]bool
	gen     int // bumped by Crash: handles from before a crash fail
	inject  func(op Op, path string) error
	partial bool
}

type memNode struct {
	data   []byte
	synced []byte
}

// NewMemFS returns an empty file system.
func NewMemFS() *MemFS {
	return &MemFS{live: map[string]*memNode{}, durable: map[string]*memNode{}, dirs: map[string]bool{"/": true, ".": true}, locks: map[string]bool{}}
}

// SetInject installs f, called before every operation (without the MemFS lock held); an error
// from it fails the operation with no effect (see SetPartialWrites for writes). nil removes it.
func (m *MemFS) SetInject(f func(op Op, path string) error) {
	m.mu.Lock()
	m.inject = f
	m.mu.Unlock()
}

// SetPartialWrites makes a write failed by injection first write half its bytes, as a write
// that runs out of space part way does.
func (m *MemFS) SetPartialWrites(on bool) {
	m.mu.Lock()
	m.partial = on
	m.mu.Unlock()
}

// Crash simulates power loss: files and directory entries go back to their durable state and
// locks are released; handles opened before fail from now on. keep, if not nil, says how many
// of a file's unsynced bytes survive (a torn write): the unsynced bytes run from the first
// byte where the file differs from its synced content to the end of the file, whether they
// were appended or written over synced bytes (a journal file's zeros); the surviving bytes are
// as written, or zeros if zero is true, and past them the synced content stays as it was.
func (m *MemFS) Crash(keep func(path string, unsynced []byte) (n int, zero bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	m.locks = map[string]bool{}
	m.live = map[string]*memNode{}
	for path, n := range m.durable {
		data := slices.Clone(n.synced)
		if keep != nil && len(n.data) >= len(n.synced) && !bytes.Equal(n.data, n.synced) {
			from := 0
			for from < len(n.synced) && n.data[from] == n.synced[from] {
				from++
			}
			tail := n.data[from:]
			k, zero := keep(path, slices.Clone(tail))
			k = min(max(k, 0), len(tail))
			data = data[:from]
			if zero {
				data = append(data, make([]byte, k)...)
			} else {
				data = append(data, tail[:k]...)
			}
			if rest := from + k; rest < len(n.synced) {
				data = append(data, n.synced[rest:]...)
			}
		}
		nn := &memNode{data: data, synced: slices.Clone(data)}
		m.live[path] = nn
		m.durable[path] = nn
	}
}

// Clone returns an independent copy of the file system's current state (live and durable),
// without injection settings or locks.
func (m *MemFS) Clone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	nodes := map[*memNode]*memNode{}
	cp := func(n *memNode) *memNode {
		if nn, ok := nodes[n]; ok {
			return nn
		}
		nn := &memNode{data: slices.Clone(n.data), synced: slices.Clone(n.synced)}
		nodes[n] = nn
		return nn
	}
	for p, n := range m.live {
		c.live[p] = cp(n)
	}
	for p, n := range m.durable {
		c.durable[p] = cp(n)
	}
	for d := range m.dirs {
		c.dirs[d] = true
	}
	return c
}

// ReadFile returns a copy of the live content of path.
func (m *MemFS) ReadFile(path string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live[filepath.Clean(path)]
	if !ok {
		return nil, &os.PathError{Op: "read", Path: path, Err: os.ErrNotExist}
	}
	return slices.Clone(n.data), nil
}

// WriteFile replaces the content of path, durably (for tests that damage files on purpose).
func (m *MemFS) WriteFile(path string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	path = filepath.Clean(path)
	n := &memNode{data: slices.Clone(data), synced: slices.Clone(data)}
	m.live[path] = n
	m.durable[path] = n
}

func (m *MemFS) check(op Op, path string) error {
	m.mu.Lock()
	f := m.inject
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	if err := f(op, path); err != nil {
		return &os.PathError{Op: op.String(), Path: path, Err: err}
	}
	return nil
}

func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	name = filepath.Clean(name)
	op := OpOpen
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		op = OpCreate
	}
	if err := m.check(op, name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case !ok:
		if !m.dirs[filepath.Dir(name)] {
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		}
		n = &memNode{}
		m.live[name] = n
	}
	if flag&os.O_TRUNC != 0 {
		n.data = n.data[:0:0]
	}
	return &memFile{fs: m, node: n, name: name, gen: m.gen, write: flag&(os.O_RDWR|os.O_WRONLY) != 0}, nil
}

func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: os.ErrNotExist}
	}
	var names []string
	for p := range m.live {
		if filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			names = append(names, filepath.Base(d))
		}
	}
	slices.Sort(names)
	return names, nil
}

func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; !m.dirs[d]; d = filepath.Dir(d) {
		m.dirs[d] = true
	}
	return nil
}

func (m *MemFS) Remove(name string) error {
	name = filepath.Clean(name)
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	delete(m.live, name)
	return nil
}

func (m *MemFS) Rename(oldpath, newpath string) error {
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	if err := m.check(OpRename, oldpath); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live[oldpath]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: os.ErrNotExist}
	}
	delete(m.live, oldpath)
	m.live[newpath] = n
	return nil
}

func (m *MemFS) SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	if err := m.check(OpSyncDir, dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.durable {
		if filepath.Dir(p) == dir {
			if _, ok := m.live[p]; !ok {
				delete(m.durable, p)
			}
		}
	}
	for p, n := range m.live {
		if filepath.Dir(p) == dir {
			m.durable[p] = n
		}
	}
	return nil
}

func (m *MemFS) Lock(name string) (io.Closer, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[name] {
		return nil, ErrLocked
	}
	m.locks[name] = true
	return &memLock{fs: m, name: name, gen: m.gen}, nil
}

type memLock struct {
	fs   *MemFS
	name string
	gen  int
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.fs.mu.Lock()
		if l.fs.gen == l.gen {
			delete(l.fs.locks, l.name)
		}
		l.fs.mu.Unlock()
	})
	return nil
}

type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	gen    int
	write  bool
	closed bool
}

// errStale fails handles opened before a simulated crash: that process is gone.
var errStale = errors.New("file handle from before a simulated crash")

func (f *memFile) usable(op Op) error {
	if err := f.fs.check(op, f.name); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed:
		return &os.PathError{Op: op.String(), Path: f.name, Err: os.ErrClosed}
	case f.gen != f.fs.gen:
		return &os.PathError{Op: op.String(), Path: f.name, Err: errStale}
	case op.Mutating() && !f.write:
		return &os.PathError{Op: op.String(), Path: f.name, Err: fmt.Errorf("file opened read-only")}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.usable(OpRead); err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.usable(OpWrite); err != nil {
		f.fs.mu.Lock()
		partial := f.fs.partial && f.gen == f.fs.gen && !f.closed
		f.fs.mu.Unlock()
		if partial && len(p) > 1 {
			f.fs.mu.Lock()
			f.writeLocked(p[:len(p)/2], off)
			f.fs.mu.Unlock()
			return len(p) / 2, err
		}
		return 0, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.writeLocked(p, off)
	return len(p), nil
}

func (f *memFile) writeLocked(p []byte, off int64) {
	if end := off + int64(len(p)); end > int64(len(f.node.data)) {
		f.node.data = append(f.node.data, make([]byte, end-int64(len(f.node.data)))...)
	}
	copy(f.node.data[off:], p)
}

func (f *memFile) Sync() error {
	if err := f.usable(OpSync); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.node.synced = slices.Clone(f.node.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.usable(OpTruncate); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if size <= int64(len(f.node.data)) {
		f.node.data = f.node.data[:size:size]
	} else {
		f.node.data = append(f.node.data, make([]byte, size-int64(len(f.node.data)))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.closed = true
	return nil
}

// String lists the live files and their sizes (for test failure messages).
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range m.live {
			if !yield(p) {
				return
			}
		}
	}) {
		n := m.live[p]
		fmt.Fprintf(&b, "%s %d bytes (%d synced)\n", p, len(n.data), len(n.synced))
	}
	return b.String()
}
