package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// File is the built-in `file` plugin: one JSON file per group and epoch in a directory, which
// survives restarts.
//
// Crash model. A description is written to a temporary file in the same directory, fsynced,
// renamed over its final name, and the directory is fsynced; only then does Set return. A
// crash before the rename leaves a *.tmp-* file, removed at the next start; after it, the new
// file is complete. The previous epoch's file is removed after the new one is durable; a crash
// in between leaves two epochs of one group, and the start-up scan keeps the higher one.
// Deletes fsync the directory before returning, so a deleted description cannot reappear.
//
// File names: "<key>.<epoch>.json", where key is "g-" + the group id in lowercase unpadded
// base32hex (safe on case-insensitive file systems) or, for ids whose encoding would exceed
// 160 characters, "h-" + the hex SHA-256 of the id. Each file holds
// {"groupId", "topologyEpoch", "description"}; Get checks the group id and epoch in it.
//
// Bounds: a description larger than max.description.bytes (wire-encoded size) is rejected
// permanently; a Set that would take the directory's files past max.bytes fails transiently
// (space comes back when groups are deleted). As in the memory plugin, a Set for an epoch lower
// than the stored one is ignored. One process per directory: two servers sharing a directory
// would corrupt each other's accounting.
type File struct {
	dir      string
	maxBytes int64
	maxDesc  int64

	locks [64]sync.RWMutex // per group (striped): orders the I/O of one group's files
	seed  maphash.Seed

	mu     sync.Mutex
	index  map[string]fileEntry // by file key
	total  int64
	closed bool
}

type fileEntry struct {
	epoch int32
	size  int64
}

type fileEnvelope struct {
	GroupID     string                      `json:"groupId"`
	Epoch       int32                       `json:"topologyEpoch"`
	Description *topologyplugin.Description `json:"description"`
}

// Keys of the file plugin (under group.streams.topology.description.plugin.file.).
const (
	FileDir                 = "dir"
	FileMaxBytes            = "max.bytes"
	FileMaxDescriptionBytes = "max.description.bytes"
)

var fileKeyEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

// NewFile is the file plugin's factory. It creates the directory if needed, removes leftover
// temporary files and superseded epochs, and indexes what is there.
func NewFile(cfg topologyplugin.Config) (topologyplugin.Plugin, error) {
	if err := cfg.Check(FileDir, FileMaxBytes, FileMaxDescriptionBytes); err != nil {
		return nil, err
	}
	dir := cfg.String(FileDir, "")
	if dir == "" {
		return nil, &topologyplugin.ConfigError{Key: FileDir, Reason: "must be set to the directory holding the descriptions"}
	}
	maxBytes, err := cfg.Int(FileMaxBytes, 1<<30, 1, 1<<62)
	if err != nil {
		return nil, err
	}
	maxDesc, err := cfg.Int(FileMaxDescriptionBytes, min(4<<20, maxBytes), 1, maxBytes)
	if err != nil {
		return nil, err
	}
	f := &File{dir: dir, maxBytes: maxBytes, maxDesc: maxDesc, seed: maphash.MakeSeed(), index: map[string]fileEntry{}}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("file plugin: create %s: %w", dir, err)
	}
	if err := f.scan(); err != nil {
		return nil, err
	}
	return f, nil
}

// fileKey is the file-name stem for a group id.
func fileKey(group string) string {
	enc := strings.ToLower(fileKeyEncoding.EncodeToString([]byte(group)))
	if len(enc) <= 160 {
		return "g-" + enc
	}
	sum := sha256.Sum256([]byte(group))
	return "h-" + hex.EncodeToString(sum[:])
}

func (f *File) path(key string, epoch int32) string {
	return filepath.Join(f.dir, key+"."+strconv.FormatInt(int64(epoch), 10)+".json")
}

// parseName splits "<key>.<epoch>.json"; ok is false for names this plugin did not write.
func parseName(name string) (key string, epoch int32, ok bool) {
	stem, found := strings.CutSuffix(name, ".json")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(stem, '.')
	if i <= 0 || !(strings.HasPrefix(stem, "g-") || strings.HasPrefix(stem, "h-")) {
		return "", 0, false
	}
	n, err := strconv.ParseInt(stem[i+1:], 10, 32)
	if err != nil {
		return "", 0, false
	}
	return stem[:i], int32(n), true
}

func (f *File) scan() error {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return fmt.Errorf("file plugin: read %s: %w", f.dir, err)
	}
	var stale []string
	for _, e := range entries {
		name := e.Name()
		if strings.Contains(name, ".tmp-") {
			stale = append(stale, name)
			continue
		}
		key, epoch, ok := parseName(name)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("file plugin: stat %s: %w", name, err)
		}
		cur, exists := f.index[key]
		switch {
		case !exists:
		case cur.epoch > epoch:
			stale = append(stale, filepath.Base(f.path(key, epoch)))
			continue
		default:
			stale = append(stale, filepath.Base(f.path(key, cur.epoch)))
			f.total -= cur.size
		}
		f.index[key] = fileEntry{epoch: epoch, size: info.Size()}
		f.total += info.Size()
	}
	for _, name := range stale {
		if err := os.Remove(filepath.Join(f.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file plugin: remove leftover %s: %w", name, err)
		}
	}
	if len(stale) > 0 {
		return syncDir(f.dir)
	}
	return nil
}

func (f *File) lock(key string) *sync.RWMutex {
	return &f.locks[maphash.String(f.seed, key)%uint64(len(f.locks))]
}

func (f *File) Set(ctx context.Context, group string, epoch int32, d *topologyplugin.Description) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d == nil {
		return topologyplugin.Permanent("no topology description")
	}
	if size := int64(d.EncodedSize()); size > f.maxDesc {
		return topologyplugin.Permanentf("topology description of %d bytes is larger than the file plugin's max.description.bytes (%d)", size, f.maxDesc)
	}
	data, err := json.Marshal(fileEnvelope{GroupID: group, Epoch: epoch, Description: d})
	if err != nil {
		return topologyplugin.Permanentf("encode topology description: %v", err)
	}
	key := fileKey(group)
	l := f.lock(key)
	l.Lock()
	defer l.Unlock()

	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errClosed
	}
	cur, exists := f.index[key]
	if exists && cur.epoch > epoch {
		f.mu.Unlock()
		return nil
	}
	after := f.total + int64(len(data))
	if exists {
		after -= cur.size
	}
	if after > f.maxBytes {
		f.mu.Unlock()
		return topologyplugin.Transientf("file plugin is full: storing %d more bytes would exceed max.bytes (%d)", len(data), f.maxBytes)
	}
	f.mu.Unlock()

	if err := writeAtomic(f.dir, f.path(key, epoch), data); err != nil {
		return topologyplugin.MarkTransient(err)
	}

	f.mu.Lock()
	if cur, ok := f.index[key]; ok {
		f.total -= cur.size
	}
	f.index[key] = fileEntry{epoch: epoch, size: int64(len(data))}
	f.total += int64(len(data))
	f.mu.Unlock()

	if exists && cur.epoch != epoch {
		// The new epoch is durable; the old file is garbage. A failure here is repaired by the
		// next start-up scan, so it does not fail the Set.
		_ = os.Remove(f.path(key, cur.epoch))
	}
	return nil
}

// writeAtomic writes data to path via a synced temporary file, a rename and a directory sync.
// A directory removed behind the plugin's back is created again (and its parent synced), so
// that the descriptions the coordinator asks for again after such a loss can be stored.
func writeAtomic(dir, path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("file plugin: create %s again: %w", dir, err)
		}
		if err = syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
		tmp, err = os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	}
	if err != nil {
		return fmt.Errorf("file plugin: create temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("file plugin: write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("file plugin: fsync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("file plugin: close %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("file plugin: rename to %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("file plugin: open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("file plugin: fsync directory %s: %w", dir, err)
	}
	return nil
}

func (f *File) Get(ctx context.Context, group string, epoch int32) (*topologyplugin.Description, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := fileKey(group)
	l := f.lock(key)
	l.RLock()
	defer l.RUnlock()
	f.mu.Lock()
	cur, ok := f.index[key]
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if !ok || cur.epoch != epoch {
		return nil, nil
	}
	path := f.path(key, epoch)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Removed behind our back: the data is lost, not an error. Forget it, so that its
		// bytes no longer count against max.bytes; the coordinator asks for it again.
		f.mu.Lock()
		if now, ok := f.index[key]; ok && now == cur {
			delete(f.index, key)
			f.total -= cur.size
		}
		f.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("file plugin: read %s: %w", path, err)
	}
	var env fileEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("file plugin: %s is corrupt: %w", path, err)
	}
	if env.GroupID != group || env.Epoch != epoch {
		return nil, fmt.Errorf("file plugin: %s holds group %q epoch %d, not group %q epoch %d", path, env.GroupID, env.Epoch, group, epoch)
	}
	if env.Description == nil {
		return nil, fmt.Errorf("file plugin: %s has no description", path)
	}
	return env.Description, nil
}

func (f *File) Delete(ctx context.Context, group string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := fileKey(group)
	l := f.lock(key)
	l.Lock()
	defer l.Unlock()
	f.mu.Lock()
	cur, ok := f.index[key]
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return errClosed
	}
	if !ok {
		return nil
	}
	if err := os.Remove(f.path(key, cur.epoch)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file plugin: remove %s: %w", f.path(key, cur.epoch), err)
	}
	if err := syncDir(f.dir); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.index, key)
	f.total -= cur.size
	f.mu.Unlock()
	return nil
}

func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Stats implements topologyplugin.StatsReporter.
func (f *File) Stats() topologyplugin.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return topologyplugin.Stats{Descriptions: int64(len(f.index)), Bytes: f.total}
}
