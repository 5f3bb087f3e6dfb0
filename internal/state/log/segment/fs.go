package segment

import (
	"errors"
	"io"
	"os"
	"sort"
)

// FS is the narrow seam between the log and the file system: exactly the operations the log
// needs, so a test double (MemFS) can fail any of them and simulate a crash that loses what was
// not synced. Paths are OS paths; the log never changes the working directory.
type FS interface {
	// OpenFile opens a file the way os.OpenFile does (only O_RDONLY, O_RDWR, O_CREATE, O_EXCL
	// and O_TRUNC are used).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// ReadDir returns the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// MkdirAll creates dir and its parents. Directories count as durable once created.
	MkdirAll(dir string, perm os.FileMode) error
	Remove(name string) error
	// Rename atomically replaces newpath by oldpath.
	Rename(oldpath, newpath string) error
	// SyncDir makes the directory's entries (creates, renames, removes) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on name (created if missing) without waiting; it
	// fails if another holder (another process, or another Lock in this one) has it.
	Lock(name string) (io.Closer, error)
}

// File is an open file. Writes are positional: the log always knows where its tail is.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the file's data durable (fdatasync where the OS has it).
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
}

// ErrLocked is returned when the log directory is locked by another holder.
var ErrLocked = errors.New("log directory is locked by another process")

// OSFS is the real file system.
type OSFS struct{}

type osFile struct{ f *os.File }

func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f}, nil
}

func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (OSFS) Remove(name string) error                    { return os.Remove(name) }
func (OSFS) Rename(oldpath, newpath string) error        { return os.Rename(oldpath, newpath) }

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (OSFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil // closing the descriptor releases the lock
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Sync() error                              { return datasync(o.f) }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o *osFile) Close() error                             { return o.f.Close() }

func (o *osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
