package segment

// The journal: one write-ahead file per store through which the group commits of all its shards
// become durable, so that a round costs one fdatasync however many shards it covers
// (docs/storage.md, "Write path"). A shard hands its group to the journal and keeps the bytes in
// memory as its segment's unwritten tail; the round answers the shard itself (jreq.complete),
// which may hand the shard's next group to the next round. A shard's segment is written and
// fsynced later, when it rolls, closes, or when the journal asks it to so that an old journal
// file can go; only then does the shard release its entries in that file.
//
// Frame: [u32 length][u32 crc32c][u8 flags][i32 shard][i64 segment base][i64 byte position][data]
// length counts the bytes after the length field; the CRC covers flags through data. flags bit 0
// marks the last frame of a round. data is exactly what the shard wrote at that position of that
// segment.
//
// Recovery (Store.Open, before any shard opens): every frame of every journal file whose segment
// is still its shard's newest is written back at its position, the segments are fsynced, and the
// journal files are removed. Frames for older segments are skipped: a segment is fsynced when it
// rolls, and compaction, which rewrites sealed segments in place of their names, never touches
// the newest one. Rewriting is idempotent because a position of a segment holding an
// acknowledged group never gets other bytes while the process runs.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

const (
	journalDirName = "journal"
	journalExt     = ".wal"
	jHeadLen       = 4 + 4 + 1 + 4 + 8 + 8
	jFlagRoundEnd  = 1
	// defaultJournalBytes is the size after which the journal starts a new file and asks the
	// shards holding entries in the old one to fsync their segments. It bounds the disk the
	// journal takes and the bytes recovery rewrites.
	defaultJournalBytes = 64 << 20
	// DefaultJournals is how many journals a store runs when Options.Journals is zero: one, so
	// that a round pays one fsync for every shard of the store. More journals trade batching
	// for concurrent fsyncs (docs/benchmarks-storage.md).
	DefaultJournals = 1
	// journalZeroAhead is how far past its last frame a journal file is written with zeros, so
	// that the rounds after it overwrite bytes the file already has and their fdatasync has no
	// size change to commit to the file system's own journal (ext4: 100 against 145 µs per
	// round on the test machine, docs/benchmarks-storage.md). The round that extends the file
	// writes the zeros and pays for them, once per this many bytes of frames.
	journalZeroAhead = 256 << 10
	// DefaultJournalWait is the longest a round waits for the groups its predecessor says are
	// coming (Options.JournalWait; docs/storage.md "Gathering a round", measured in
	// docs/benchmarks-storage.md). 200 µs rather than 100: the wait blocks, so a longer bound
	// costs no processor time, and at 8 committing clients the groups of a ~250 µs turnaround
	// then make fuller rounds. That means fewer fsyncs and rounds, at 3-7 µs less CPU per commit.
	DefaultJournalWait = 200 * time.Microsecond
)

type journal struct {
	fs      FS
	dir     string
	prefix  string // file names are prefix + sequence number: one series per stripe
	lg      *zap.Logger
	limit   int64
	store   *Store
	observe func(files int)

	// wait bounds how long a round is held back for expected groups (Options.JournalWait); 0:
	// never. timer starts that bound (Options.gatherTimer).
	wait  time.Duration
	timer func(d time.Duration) (<-chan time.Time, func())

	mu    sync.Mutex
	queue []*jreq
	// requeued: requests queued by the answers of the round in progress (resubmit), which the
	// next round's expectation must not count twice.
	requeued int
	// want: while a round gathers, the queue length that ends its wait (0: none gathers);
	// the commit that reaches it sends on gathered.
	want     int
	gathered chan struct{}
	running  bool
	// busy mirrors running for a look without the mutex (Append's choice of path).
	busy    atomic.Bool
	failErr error
	closed  bool
	idle    *sync.Cond // signalled when the round loop stops
	cur     int64      // sequence number of the file rounds are written to
	// held: for every journal file still on disk, the shards with entries in it that are not
	// yet fsynced in their own segments. A file other than cur goes when its set is empty.
	held map[int64]map[int32]bool

	// Round loop only.
	f      File
	seq    int64
	size   int64 // end of the last round's frames in f
	zeroed int64 // bytes of f written (frames, then zeros); rounds below it do not grow f
	broken bool  // the last fsync of f failed: nothing more may be written to it
	buf    []byte
	spare  []*jreq
	// expect: how many groups the next round can count on, from the last round (see loop).
	expect int
}

// zeroAhead is what a round writes after its frames when it extends the file.
var zeroAhead [journalZeroAhead]byte

type jreq struct {
	shard     int32
	base, pos int64
	data      []byte
	from, to  int64 // offsets the request carries (topUp moves to)
	queued    bool  // in the queue, not yet taken by a round (under mu)
	// complete receives the round's answer, on the round's goroutine; it may resubmit the
	// request for the next round.
	complete func(r *jreq, res jres)
	// topUp, when set, runs when the request's round starts, on the round's goroutine: it may
	// add more of the shard's groups (more) to the round, so that a commit arriving while its
	// shard's previous group waits for a round joins that round instead of the next.
	topUp func(r *jreq)
	more  []jchunk
}

// jchunk is a group added to a request by topUp: its bytes at pos of the same segment.
type jchunk struct {
	pos  int64
	data []byte
}

// jres is a round's answer to one request. fatal: the shard must fail for good (its data may
// be in a journal file whose fsync failed); otherwise err is a write error nothing was kept of.
type jres struct {
	seq   int64
	err   error
	fatal bool
}

func (j *journal) path(seq int64) string {
	return filepath.Join(j.dir, fmt.Sprintf("%s%020d%s", j.prefix, seq, journalExt))
}

// openJournal starts a new journal file numbered seq; recovery has emptied the directory.
func openJournal(s *Store, dir string, stripe int, seq int64) (*journal, error) {
	j := &journal{fs: s.fs, dir: dir, prefix: fmt.Sprintf("%03d-", stripe), lg: s.opts.Logger.With(zap.Int("journal", stripe)), limit: s.opts.journalBytes, store: s,
		observe: s.opts.RoundObserver, held: map[int64]map[int32]bool{}, wait: max(s.opts.JournalWait, 0), timer: s.opts.gatherTimer,
		gathered: make(chan struct{}, 1)}
	if j.timer == nil {
		t := time.NewTimer(time.Hour)
		t.Stop()
		j.timer = func(d time.Duration) (<-chan time.Time, func()) {
			t.Reset(d)
			return t.C, func() { t.Stop() }
		}
	}
	j.idle = sync.NewCond(&j.mu)
	f, err := j.create(seq)
	if err != nil {
		return nil, err
	}
	j.f, j.seq, j.cur = f, seq, seq
	j.held[seq] = map[int32]bool{}
	return j, nil
}

// create makes a journal file whose directory entry is durable before any round relies on it.
func (j *journal) create(seq int64) (File, error) {
	path := j.path(seq)
	f, err := j.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create journal %s: %w", path, err)
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		f.Close()
		if rerr := j.fs.Remove(path); rerr != nil {
			j.lg.Warn("removing journal file after failed directory sync", zap.String("file", path), zap.Error(rerr))
		}
		return nil, fmt.Errorf("create journal %s: sync %s: %w", path, j.dir, err)
	}
	return f, nil
}

// submit queues r for the next round; r.complete receives the answer. An idle journal's round
// runs on the caller, which saves a goroutine hand-off per commit when commits are sparse,
// until r is answered and not queued again; whatever queued meanwhile goes to a round loop of
// its own.
func (j *journal) submit(r *jreq) {
	if j.admit(r) {
		j.loop(r)
	}
}

// enqueue queues r for the next round from a shard's Append, which calls it only when the
// journal looked busy; one that went idle meanwhile starts a round loop of its own (the
// appending shard goroutine must not wait for the disk).
func (j *journal) enqueue(r *jreq) {
	if j.admit(r) {
		go j.loop(nil)
	}
}

// admit queues r (or answers it with the journal's refusal) and reports whether the caller
// must start the round loop: none was running, and from now on it counts as running.
func (j *journal) admit(r *jreq) (startLoop bool) {
	j.mu.Lock()
	if err := j.refusalLocked(); err != nil {
		j.mu.Unlock()
		r.complete(r, jres{err: err, fatal: true})
		return false
	}
	j.enqueueLocked(r)
	if j.running {
		j.mu.Unlock()
		return false
	}
	j.running = true
	j.busy.Store(true)
	j.mu.Unlock()
	return true
}

// resubmit queues r again from its complete, on the goroutine of the round that answered it.
func (j *journal) resubmit(r *jreq) {
	j.mu.Lock()
	if err := j.refusalLocked(); err != nil {
		j.mu.Unlock()
		r.complete(r, jres{err: err, fatal: true})
		return
	}
	j.enqueueLocked(r)
	j.requeued++
	j.mu.Unlock()
}

func (j *journal) refusalLocked() error {
	if j.failErr != nil {
		return j.failErr
	}
	if j.closed {
		return log.ErrClosed
	}
	return nil
}

func (j *journal) enqueueLocked(r *jreq) {
	j.queue = append(j.queue, r)
	r.queued = true
	if j.want > 0 && len(j.queue) >= j.want {
		j.want = 0
		j.gathered <- struct{}{} // never blocks: one send per gathering wait, received or drained by it
	}
}

// loop runs rounds while requests are queued; requests arriving during a round share the next.
// With mine set, it returns once mine is answered and not queued again, handing any queued
// requests to a new loop.
//
// Before a round it may gather: a round that would carry fewer groups than expect waits, at
// most j.wait, for more to queue. expect is the groups of the last round plus those that queued
// during it (not counting a shard twice whose next group its answer queued): when commits come
// in closed loops (a client sends its next commit once the last is answered), those are the
// shards whose next groups are on their way, and a round that starts with the first of them
// makes the others pay a second fsync. A lone committer's rounds carry one group, so it never
// waits; at most one round waits in vain when the load drops. Every shard has at most one
// request in a journal, so expect never exceeds the shards it serves.
func (j *journal) loop(mine *jreq) {
	for {
		j.mu.Lock()
		q := j.queue
		if len(q) == 0 {
			j.running = false
			j.busy.Store(false)
			j.idle.Broadcast()
			j.mu.Unlock()
			return
		}
		if mine != nil && !mine.queued {
			j.mu.Unlock()
			go j.loop(nil)
			return
		}
		if len(q) < j.expect && j.wait > 0 && !j.closed {
			j.mu.Unlock()
			j.gather(j.expect)
			j.mu.Lock()
			q = j.queue
		}
		for _, r := range q {
			r.queued = false
		}
		j.queue = j.spare[:0]
		j.requeued = 0
		j.mu.Unlock()
		j.round(q)
		j.mu.Lock()
		j.expect = len(q) + len(j.queue) - j.requeued
		j.mu.Unlock()
		clear(q)
		j.spare = q[:0]
	}
}

// gather waits until want groups are queued or j.wait has passed. It blocks instead of
// polling: the commit that completes the round wakes it, so the wait costs no processor time
// while the awaited groups are on their way (an earlier version yielded in a loop and spent
// 17% of the server's CPU at 8 committing clients). Only the bound needs a timer, which can
// fire late (up to a millisecond when the whole process is idle: the runtime's epoll wait has
// millisecond resolution); that costs the one round whose groups did not come.
func (j *journal) gather(want int) {
	j.mu.Lock()
	if len(j.queue) >= want || j.closed {
		j.mu.Unlock()
		return
	}
	j.want = want
	j.mu.Unlock()
	fired, stop := j.timer(j.wait)
	select {
	case <-j.gathered:
	case <-fired:
	}
	stop()
	j.mu.Lock()
	j.want = 0
	select {
	case <-j.gathered: // sent after the timer fired
	default:
	}
	j.mu.Unlock()
}

func (j *journal) round(q []*jreq) {
	if j.observe != nil {
		j.observe(len(q))
	}
	answer := func(res jres) {
		for _, r := range q {
			r.complete(r, res)
		}
	}
	for _, r := range q {
		if r.topUp != nil {
			r.topUp(r)
		}
	}
	buf := j.buf[:0]
	for i, r := range q {
		last := i == len(q)-1
		buf = appendJFrame(buf, r.shard, r.base, r.pos, r.data, last && len(r.more) == 0)
		for k, c := range r.more {
			buf = appendJFrame(buf, r.shard, r.base, c.pos, c.data, last && k == len(r.more)-1)
		}
	}
	if cap(buf) <= maxSpareBuffer {
		j.buf = buf
	}
	if j.broken || (j.size > 0 && j.size+int64(len(buf)) > j.limit) {
		if err := j.rotate(); err != nil {
			if j.broken {
				err = fmt.Errorf("journal unusable: its last fsync failed and a new file could not be started: %w", err)
				j.setFailed(err)
				answer(jres{err: err, fatal: true})
				return
			}
			// The current file is still sound: go on in it and try again next round.
			j.lg.Warn("starting a new journal file failed; writing on in the current one", zap.Error(err))
		}
	}
	end := j.size + int64(len(buf))
	_, err := j.f.WriteAt(buf, j.size)
	if err == nil && end > j.zeroed {
		// Zeros read back as a frame of length 0, which ends the file (parseJournal), so they
		// are no different from the end of the file to recovery.
		if _, err = j.f.WriteAt(zeroAhead[:], end); err == nil {
			j.zeroed = end + journalZeroAhead
		}
	}
	if err != nil {
		// The file's name is formatted only here and below: per round it was two allocations.
		werr := fmt.Errorf("write journal %s at byte %d: %w", j.path(j.seq), j.size, err)
		j.zeroed = j.size
		terr := j.f.Truncate(j.size)
		if terr == nil {
			terr = j.f.Sync()
		}
		if terr != nil {
			err := fmt.Errorf("%w; cutting the journal back failed: %v", werr, terr)
			j.setFailed(err)
			answer(jres{err: err, fatal: true})
			return
		}
		answer(jres{err: werr})
		return
	}
	j.size = end
	if err := j.f.Sync(); err != nil {
		// Only the shards of this round depend on what this fsync covered; the next round
		// starts a new file, since this one can no longer be trusted.
		j.broken = true
		answer(jres{err: fmt.Errorf("fsync journal %s: %w", j.path(j.seq), err), fatal: true})
		return
	}
	j.mu.Lock()
	h := j.held[j.seq]
	for _, r := range q {
		h[r.shard] = true
	}
	j.mu.Unlock()
	answer(jres{seq: j.seq})
}

func (j *journal) setFailed(err error) {
	j.lg.Error("journal failed: no shard of this store can make appends durable", zap.Error(err))
	j.mu.Lock()
	j.failErr = err
	j.mu.Unlock()
}

// rotate starts the next journal file and asks the shards holding entries in older files to
// fsync their segments, so that those files can go.
func (j *journal) rotate() error {
	seq := j.seq + 1
	f, err := j.create(seq)
	if err != nil {
		return err
	}
	old := j.f
	j.f, j.seq, j.size, j.zeroed, j.broken = f, seq, 0, 0, false
	j.mu.Lock()
	j.cur = seq
	j.held[seq] = map[int32]bool{}
	var gone []int64
	holders := map[int32]bool{}
	for s, h := range j.held {
		if s == seq {
			continue
		}
		if len(h) == 0 {
			delete(j.held, s)
			gone = append(gone, s)
		}
		for shard := range h {
			holders[shard] = true
		}
	}
	j.mu.Unlock()
	if err := old.Close(); err != nil {
		j.lg.Warn("closing journal file", zap.Error(err))
	}
	j.remove(gone)
	j.store.requestSync(holders)
	return nil
}

// release records that shard has fsynced its segment after its entries in journal files up to
// seq; files nobody holds any more are removed.
func (j *journal) release(shard int32, seq int64) {
	j.mu.Lock()
	var gone []int64
	for s, h := range j.held {
		if s > seq {
			continue
		}
		delete(h, shard)
		if len(h) == 0 && s != j.cur {
			delete(j.held, s)
			gone = append(gone, s)
		}
	}
	j.mu.Unlock()
	j.remove(gone)
}

// remove deletes journal files nothing depends on. The deletes are not fsynced: a file a crash
// brings back only makes recovery rewrite bytes the segments already hold.
func (j *journal) remove(seqs []int64) {
	for _, s := range seqs {
		if err := j.fs.Remove(j.path(s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			j.lg.Warn("removing journal file", zap.String("file", j.path(s)), zap.Error(err))
		}
	}
}

// close waits for the round loop to stop (the shards are closed, so nothing is queued for
// long), then closes the current file; when every entry is in a fsynced segment, the files go.
func (j *journal) close() error {
	j.mu.Lock()
	j.closed = true
	if j.want > 0 { // a gathering round need not wait for groups of closed shards
		j.want = 0
		j.gathered <- struct{}{}
	}
	for j.running {
		j.idle.Wait()
	}
	var all []int64
	clean := true
	for s, h := range j.held {
		all = append(all, s)
		clean = clean && len(h) == 0
	}
	j.mu.Unlock()
	err := j.f.Close()
	if clean {
		j.remove(all)
	}
	return err
}

func appendJFrame(buf []byte, shard int32, base, pos int64, data []byte, last bool) []byte {
	start := len(buf)
	var flags byte
	if last {
		flags = jFlagRoundEnd
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(jHeadLen-4+len(data)))
	buf = binary.BigEndian.AppendUint32(buf, 0)
	buf = append(buf, flags)
	buf = binary.BigEndian.AppendUint32(buf, uint32(shard))
	buf = binary.BigEndian.AppendUint64(buf, uint64(base))
	buf = binary.BigEndian.AppendUint64(buf, uint64(pos))
	buf = append(buf, data...)
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+8:], crcTable))
	return buf
}

// jentry is one frame read back from a journal file.
type jentry struct {
	shard     int32
	base, pos int64
	data      []byte
}

// readJournal reads every journal file under dir in order. A damaged frame ends its file (the
// torn tail of its last round, or of a round whose fsync failed) unless a complete later round
// follows the damaged one in the same file, which only damage to synced data can produce: that
// is corruption.
func readJournal(fs FS, dir string, shards int32) (files []string, entries []jentry, err error) {
	names, err := fs.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", dir, err)
	}
	for _, n := range names {
		if filepath.Ext(n) != journalExt {
			continue
		}
		path := filepath.Join(dir, n)
		files = append(files, path)
		data, err := ReadSmallFile(fs, path, 1<<40)
		if err != nil {
			return nil, nil, fmt.Errorf("read journal %s: %w", path, err)
		}
		ents, err := parseJournal(path, data, shards)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, ents...)
	}
	return files, entries, nil
}

func parseJournal(path string, data []byte, shards int32) ([]jentry, error) {
	var out []jentry
	corrupt := func(pos int, reason string) error {
		return &log.CorruptError{Shard: -1, File: path, Offset: int64(pos), Reason: "journal: " + reason}
	}
	// frame returns the frame at pos, its end, and whether it is intact.
	frame := func(pos int) (body []byte, end int, ok bool) {
		if len(data)-pos < jHeadLen {
			return nil, 0, false
		}
		n := int(binary.BigEndian.Uint32(data[pos:]))
		if n < jHeadLen-4 || n > len(data)-pos-4 {
			return nil, 0, false
		}
		end = pos + 4 + n
		body = data[pos+8 : end]
		return body, end, binary.BigEndian.Uint32(data[pos+4:]) == crc32.Checksum(body, crcTable)
	}
	for pos := 0; pos < len(data); {
		body, end, ok := frame(pos)
		if !ok {
			// The final round may be torn, its pages even persisted out of order, so intact
			// frames of it (its round end among them) may follow the damage. Two round ends
			// after the damage mean a complete round came after a damaged one, which only
			// damage to synced data produces.
			ends := 0
			for p := end; end > 0 && p < len(data); {
				b, e, ok := frame(p)
				if !ok {
					break
				}
				if b[0]&jFlagRoundEnd != 0 {
					if ends++; ends == 2 {
						return nil, corrupt(pos, "damaged frame followed by a complete round")
					}
				}
				p = e
			}
			return out, nil
		}
		e := jentry{
			shard: int32(binary.BigEndian.Uint32(body[1:])),
			base:  int64(binary.BigEndian.Uint64(body[5:])),
			pos:   int64(binary.BigEndian.Uint64(body[13:])),
			data:  body[jHeadLen-8:],
		}
		if body[0]&^jFlagRoundEnd != 0 || e.shard < 0 || e.shard >= shards || e.base < 0 || e.pos < headerLen || len(e.data) == 0 {
			return nil, corrupt(pos, "frame with a valid checksum but impossible content")
		}
		out = append(out, e)
		pos = end
	}
	return out, nil
}

// redo is what recovery writes: per newest segment (by path), the journal's frames for it.
type redo struct {
	shard   int32
	path    string
	entries []jentry
}

// planRedo keeps, per shard, the entries for the shard's newest segment.
func planRedo(fs FS, root string, entries []jentry) ([]redo, error) {
	byShard := map[int32][]jentry{}
	for _, e := range entries {
		byShard[e.shard] = append(byShard[e.shard], e)
	}
	var out []redo
	for shard, ents := range byShard {
		p, err := makePlan(fs, filepath.Join(root, shardDirName(shard)), shard)
		if err != nil {
			return nil, err
		}
		if len(p.segs) == 0 {
			continue
		}
		newest := p.segs[len(p.segs)-1]
		r := redo{shard: shard, path: p.readPath[newest]}
		for _, e := range ents {
			if e.base == newest {
				r.entries = append(r.entries, e)
			}
		}
		if len(r.entries) > 0 {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b redo) int { return int(a.shard) - int(b.shard) })
	return out, nil
}

// recoverJournal writes back what the journal holds into the segments, fsyncs them, and removes
// the journal files. It runs before any shard of the store opens.
func recoverJournal(s *Store, dir string) (lastSeq int64, err error) {
	fs, lg := s.fs, s.opts.Logger
	files, entries, err := readJournal(fs, dir, s.opts.Shards)
	if err != nil {
		return 0, err
	}
	lastSeq = -1
	for _, f := range files {
		_, name, _ := strings.Cut(filepath.Base(f), "-")
		if seq, err := strconv.ParseInt(strings.TrimSuffix(name, journalExt), 10, 64); err == nil {
			lastSeq = max(lastSeq, seq)
		}
	}
	redos, err := planRedo(fs, s.opts.Dir, entries)
	if err != nil {
		return 0, err
	}
	for _, r := range redos {
		f, err := fs.OpenFile(r.path, os.O_RDWR, 0)
		if err != nil {
			return 0, fmt.Errorf("journal recovery: open %s: %w", r.path, err)
		}
		var bytes int
		for _, e := range r.entries {
			if _, err = f.WriteAt(e.data, e.pos); err != nil {
				break
			}
			bytes += len(e.data)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, fmt.Errorf("journal recovery: write back into %s: %w", r.path, err)
		}
		lg.Info("journal recovery: groups written back into the newest segment",
			zap.Int32("shard", r.shard), zap.String("file", r.path), zap.Int("groups", len(r.entries)), zap.Int("bytes", bytes))
	}
	for _, f := range files {
		if err := fs.Remove(f); err != nil {
			return 0, fmt.Errorf("journal recovery: remove %s: %w", f, err)
		}
	}
	if len(files) > 0 {
		if err := fs.SyncDir(dir); err != nil {
			return 0, fmt.Errorf("journal recovery: sync %s: %w", dir, err)
		}
	}
	return lastSeq, nil
}

// redoFS shows the newest segments as recovery would leave them, for Verify and Dump, which
// must not change the directory.
type redoFS struct {
	FS
	files map[string][]byte
}

func newRedoFS(fs FS, root string, shards int32) (FS, []redo, error) {
	_, entries, err := readJournal(fs, filepath.Join(root, journalDirName), shards)
	if err != nil {
		return nil, nil, err
	}
	redos, err := planRedo(fs, root, entries)
	if err != nil {
		return nil, nil, err
	}
	if len(redos) == 0 {
		return fs, nil, nil
	}
	r := redoFS{FS: fs, files: map[string][]byte{}}
	for _, rd := range redos {
		data, err := ReadSmallFile(fs, rd.path, 1<<40)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range rd.entries {
			if end := e.pos + int64(len(e.data)); end > int64(len(data)) {
				data = append(data, make([]byte, end-int64(len(data)))...)
			}
			copy(data[e.pos:], e.data)
		}
		r.files[filepath.Clean(rd.path)] = data
	}
	return r, redos, nil
}

func (r redoFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if data, ok := r.files[filepath.Clean(name)]; ok && flag&(os.O_RDWR|os.O_WRONLY|os.O_CREATE|os.O_TRUNC) == 0 {
		return bytesFile(data), nil
	}
	return r.FS.OpenFile(name, flag, perm)
}

// bytesFile is a read-only File over memory.
type bytesFile []byte

func (b bytesFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (b bytesFile) WriteAt([]byte, int64) (int, error) { return 0, os.ErrPermission }
func (b bytesFile) Sync() error                        { return nil }
func (b bytesFile) Truncate(int64) error               { return os.ErrPermission }
func (b bytesFile) Size() (int64, error)               { return int64(len(b)), nil }
func (b bytesFile) Close() error                       { return nil }
