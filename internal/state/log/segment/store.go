// Package segment is the embedded local segmented log, the default storage backend of a shard
// (ARCHITECTURE §5.2): one directory per shard holding append-only segment files of CRC-checked
// batch frames, one syncer goroutine per shard doing group commit, recovery that truncates a torn
// tail and fails loudly on any other damage, and key-based compaction with a crash-safe swap.
// docs/storage.md describes the format and the crash model.
package segment

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

const (
	metaFile      = "meta.properties"
	lockFileName  = ".lock"
	formatVersion = 1
)

// Store is the root of a log directory: it holds the directory lock and opens shard logs. It
// implements log.Backend.
type Store struct {
	opts     Options
	fs       FS
	lock     io.Closer
	journals []*journal // none in the relaxed flush mode

	mu     sync.Mutex
	open   map[int32]*shardLog
	closed bool
}

var _ log.Backend = (*Store)(nil)

// Open locks the log directory opts.Dir (creating it if needed) and checks or writes its
// meta.properties. It fails with ErrLocked if another process holds the directory and refuses a
// directory written with another shard count.
func Open(opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	fs := opts.FS
	if err := fs.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log directory %s: %w", opts.Dir, err)
	}
	lock, err := fs.Lock(filepath.Join(opts.Dir, lockFileName))
	if err != nil {
		return nil, fmt.Errorf("lock log directory %s: %w", opts.Dir, err)
	}
	s := &Store{opts: opts, fs: fs, lock: lock, open: map[int32]*shardLog{}}
	if err := s.checkMeta(); err != nil {
		lock.Close()
		return nil, err
	}
	if err := s.startJournals(); err != nil {
		lock.Close()
		return nil, err
	}
	if opts.FlushInterval > 0 {
		opts.Logger.Warn("UNSAFE log.flush.interval.ms > 0: appends are acknowledged before fsync and can be lost on power failure",
			zap.String("dir", opts.Dir), zap.Duration("flush_interval", opts.FlushInterval))
	}
	return s, nil
}

// startJournals writes back what a previous run left in the journal, then starts the journals
// unless the relaxed flush mode makes them pointless.
func (s *Store) startJournals() error {
	dir := filepath.Join(s.opts.Dir, journalDirName)
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create journal directory %s: %w", dir, err)
	}
	if err := s.fs.SyncDir(s.opts.Dir); err != nil {
		return fmt.Errorf("sync %s: %w", s.opts.Dir, err)
	}
	last, err := recoverJournal(s, dir)
	if err != nil {
		return fmt.Errorf("open log directory %s: %w", s.opts.Dir, err)
	}
	if s.opts.FlushInterval > 0 {
		return nil
	}
	for i := range s.opts.Journals {
		j, err := openJournal(s, dir, i, last+1)
		if err != nil {
			for _, j := range s.journals {
				j.close()
			}
			s.journals = nil
			return err
		}
		s.journals = append(s.journals, j)
	}
	return nil
}

// journalFor is the journal of shard's group commits, nil in the relaxed flush mode.
func (s *Store) journalFor(shard int32) *journal {
	if len(s.journals) == 0 {
		return nil
	}
	return s.journals[int(shard)%len(s.journals)]
}

// requestSync asks the open shard logs among shards to fsync their segments.
func (s *Store) requestSync(shards map[int32]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for shard := range shards {
		if l := s.open[shard]; l != nil {
			l.requestSync()
		}
	}
}

// checkMeta reads meta.properties, or writes it for a directory holding no shard yet.
func (s *Store) checkMeta() error {
	m, err := readMeta(s.fs, s.opts.Dir)
	if errors.Is(err, os.ErrNotExist) {
		names, err := s.fs.ReadDir(s.opts.Dir)
		if err != nil {
			return fmt.Errorf("list log directory %s: %w", s.opts.Dir, err)
		}
		for _, n := range names {
			if strings.HasPrefix(n, "shard-") {
				return fmt.Errorf("log directory %s holds %s but no %s: refusing to guess its shard count", s.opts.Dir, n, metaFile)
			}
		}
		return writeMeta(s.fs, s.opts.Dir, meta{version: formatVersion, shards: s.opts.Shards})
	}
	if err != nil {
		return err
	}
	if m.shards != s.opts.Shards {
		return fmt.Errorf("log directory %s was created with %d shards but offsets.topic.num.partitions is %d: "+
			"the shard of a group depends on the count, so the directory cannot be reused", s.opts.Dir, m.shards, s.opts.Shards)
	}
	return nil
}

type meta struct {
	version int
	shards  int32
}

func readMeta(fs FS, dir string) (meta, error) {
	path := filepath.Join(dir, metaFile)
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return meta{}, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return meta{}, fmt.Errorf("read %s: %w", path, err)
	}
	if size > 64<<10 {
		return meta{}, fmt.Errorf("read %s: %d bytes is not a meta.properties file", path, size)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return meta{}, fmt.Errorf("read %s: %w", path, err)
	}
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(buf))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	var m meta
	if m.version, err = strconv.Atoi(props["format.version"]); err != nil {
		return meta{}, fmt.Errorf("%s: bad format.version %q", path, props["format.version"])
	}
	if m.version != formatVersion {
		return meta{}, fmt.Errorf("%s: format.version %d is not supported (this build reads %d)", path, m.version, formatVersion)
	}
	n, err := strconv.ParseInt(props["shard.count"], 10, 32)
	if err != nil || n <= 0 {
		return meta{}, fmt.Errorf("%s: bad shard.count %q", path, props["shard.count"])
	}
	m.shards = int32(n)
	return m, nil
}

// writeMeta replaces meta.properties atomically: temp file, fsync, rename, fsync directory.
func writeMeta(fs FS, dir string, m meta) error {
	body := fmt.Sprintf("# coordinatord log directory. Do not edit.\nformat.version=%d\nshard.count=%d\n", m.version, m.shards)
	return WriteFileDurable(fs, filepath.Join(dir, metaFile), []byte(body))
}

// WriteFileDurable replaces path with data so that after a crash the file holds either its old
// content or all of data: write a temp file, fsync it, rename it into place, fsync the
// directory. Without the last fsync the rename may not survive a crash, and a file written
// once (an identity) could come back missing and be generated anew.
func WriteFileDurable(fs FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = f.WriteAt(data, 0); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		err = fs.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadSmallFile returns the content of path, refusing files over limit bytes.
func ReadSmallFile(fs FS, path string, limit int64) ([]byte, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if size > limit {
		return nil, fmt.Errorf("read %s: %d bytes, more than the %d expected", path, size, limit)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf, nil
}

// Open opens the log of one shard. Completing an interrupted compaction happens here; reading
// the segments and truncating a torn tail happen in Load. A shard may be open once at a time.
func (s *Store) Open(shard int32, cb log.Callbacks) (log.Log, error) {
	if shard < 0 || shard >= s.opts.Shards {
		return nil, fmt.Errorf("open shard %d: outside [0, %d)", shard, s.opts.Shards)
	}
	if cb.Durable == nil || cb.Failed == nil {
		return nil, fmt.Errorf("open shard %d: Durable and Failed callbacks are required", shard)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("open shard %d: %w", shard, log.ErrClosed)
	}
	if s.open[shard] != nil {
		return nil, fmt.Errorf("open shard %d: already open", shard)
	}
	l, err := openShard(s, shard, cb)
	if err != nil {
		return nil, err
	}
	s.open[shard] = l
	return l, nil
}

func (s *Store) released(shard int32) {
	s.mu.Lock()
	delete(s.open, shard)
	s.mu.Unlock()
}

// Close closes every shard log still open and releases the directory lock.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	logs := make([]*shardLog, 0, len(s.open))
	for _, l := range s.open {
		logs = append(logs, l)
	}
	s.mu.Unlock()
	var errs []error
	for _, l := range logs {
		errs = append(errs, l.Close())
	}
	for _, j := range s.journals {
		errs = append(errs, j.close())
	}
	errs = append(errs, s.lock.Close())
	return errors.Join(errs...)
}

// ShardDir is the directory holding a shard's segments (the console sums its files' sizes).
func (s *Store) ShardDir(shard int32) string { return s.shardDir(shard) }

func (s *Store) shardDir(shard int32) string {
	return filepath.Join(s.opts.Dir, shardDirName(shard))
}

func (s *Store) logger(shard int32) *zap.Logger {
	return s.opts.Logger.With(zap.Int32("shard", shard))
}
