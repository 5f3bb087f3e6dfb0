package segment

// One shard's log: Load (recovery), Append (hand-off to the syncer), the syncer goroutine
// (group commit), failure handling and Close.
//
// With a journal, the syncer's state (everything about the active segment's tail) belongs to
// the syncer goroutine while it works (busy) or, while a group of the shard is in the journal
// (inFlight), to the journal round that carries it: the round reports the group durable and
// hands the shard's next pending group to the following round itself (complete). When neither
// holds it and the journal's round loop runs, Append hands its group to the journal itself. So
// under load a commit passes through no goroutine of its shard's log; the syncer goroutine wakes
// for an idle journal (whose round it runs), rolls, writing the tail into the segment, fsyncs and
// the close. Every hand-over of the state is under mu.
//
// Concurrency. The shard goroutine calls Load, Append and Close, and Compact runs on a goroutine
// of the runtime's, one at a time (Close stops and waits for it); the holder of the syncer's
// state (above; in the relaxed mode always the syncer goroutine, started by Load) owns the
// active segment file and everything about its tail (size, durable size, the unwritten tail,
// rolls). They share only what mu guards: the pending buffer, the offset counter, the
// state, and the segment list (the syncer appends to it when it rolls; Compact replaces its
// sealed prefix, which the syncer never touches). Sealed segments are immutable, so Compact
// reads and replaces them without stopping the syncer.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

type logState int

const (
	stateOpen   logState = iota
	stateLost            // a write error lost pending appends; Append fails until resume
	stateFailed          // fsync (or recovery from a write error) failed; for good
)

// maxSpareBuffer bounds the write buffer the syncer keeps between rounds.
const maxSpareBuffer = 4 << 20

const (
	// tailFlushBytes: once a shard holds this many acknowledged bytes that its segment does not
	// have yet, its syncer writes them (without fsync) before its next group. With the journal,
	// a group is not written into its segment when it commits: the journal holds it durably, and
	// the segment gets the shard's recent groups in one pwrite at its next sync, roll or close, or
	// at this size (issue 12: one segment pwrite per group was a tenth of a commit's CPU).
	tailFlushBytes = 64 << 10
	// tailMaxBytes bounds the unwritten tail while writing it fails: beyond it, new groups fail as
	// write errors until the segment takes the tail again.
	tailMaxBytes = 1 << 20
)

type shardLog struct {
	store *Store
	shard int32
	dir   string
	opts  Options
	fs    FS
	lg    *zap.Logger
	cb    log.Callbacks

	loaded bool // shard goroutine only

	mu       sync.Mutex
	state    logState
	lostErr  *log.WriteError
	failErr  error
	closed   bool
	inFlight bool        // a group of ours is in the journal: its round owns the syncer's state
	busy     bool        // the syncer goroutine is working on the syncer's state
	next     int64       // offset of the next appended record
	pend     batchWriter // encoded batches handed to the syncer, not yet taken
	pendFrom int64       // first offset in pend
	pendTo   int64       // last offset in pend
	pendEnd  int         // position of the last frame in pend.buf
	segs     []int64     // base offsets, ascending; the last is the active segment
	swap     *swapAction // a compaction swap committed but not completed (retried by Compact)
	// What decides whether compaction has anything to do (compact.go): the size of every sealed
	// segment, the last sealed segment of the clean prefix (-1: none) and the append time of the
	// oldest tombstone in it (math.MaxInt64: none).
	segBytes     map[int64]int64
	cleanThrough int64
	cleanTombMs  int64
	compactDone  chan struct{} // closed when the running Compact returns; nil when none runs

	stop atomic.Bool // set by Close: a running compaction gives up before its commit point

	kick chan struct{}
	done chan struct{}

	// Syncer goroutine only (set up by Load before it starts).
	active      File
	activeBase  int64
	size        int64 // bytes in the active segment, the unwritten tail included
	durableSize int64 // bytes of the active segment up to the last batch reported durable
	unsynced    bool  // written or in the tail but not fsynced (the journal or the relaxed flush mode covers it)
	// The active segment holds its first written bytes in the file; tail holds the rest (up to
	// size), which only the journal has on disk (it keeps them until the segment is fsynced,
	// which writes the tail first). With the journal, the file never holds a byte that is not
	// acknowledged: the tail is written only between rounds.
	written  int64
	tail     []byte
	spare    []byte
	closeErr error
	jseq     int64 // newest journal file holding an entry of ours not yet fsynced in our segment; -1: none
	jreq     jreq
	journal  *journal // nil in the relaxed flush mode

	// syncWanted: the journal wants to drop a file we hold entries in (set by the journal, taken
	// by the syncer).
	syncWanted atomic.Bool
}

func openShard(s *Store, shard int32, cb log.Callbacks) (*shardLog, error) {
	l := &shardLog{
		store:   s,
		shard:   shard,
		dir:     s.shardDir(shard),
		opts:    s.opts,
		fs:      s.fs,
		lg:      s.logger(shard),
		cb:      cb,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		jseq:    -1,
		jreq:    jreq{shard: shard},
		journal: s.journalFor(shard),
	}
	l.jreq.topUp, l.jreq.complete = l.topUp, l.complete
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("open shard %d: create %s: %w", shard, l.dir, err)
	}
	if err := l.fs.SyncDir(s.opts.Dir); err != nil {
		return nil, fmt.Errorf("open shard %d: sync %s: %w", shard, s.opts.Dir, err)
	}
	p, err := makePlan(l.fs, l.dir, shard)
	if err != nil {
		return nil, fmt.Errorf("open shard %d: %w", shard, err)
	}
	if p.changes() {
		l.lg.Warn("completing interrupted compaction",
			zap.Strings("deleted_unfinished", p.cleaned), zap.Strings("deleted_replaced", p.orphans), zap.Int("swaps", len(p.swaps)))
		if err := p.apply(l.fs, l.dir); err != nil {
			return nil, fmt.Errorf("open shard %d: %w", shard, err)
		}
	}
	l.segs = p.segs
	return l, nil
}

func (l *shardLog) segPath(base int64) string {
	return filepath.Join(l.dir, segmentName(base, logExt))
}

// Load replays every record, truncating a torn tail of the newest segment, then opens the
// newest segment for appending and starts the syncer.
func (l *shardLog) Load(fn func(offset int64, rec log.Record) error) (int64, error) {
	if l.loaded {
		return 0, fmt.Errorf("shard %d: log already loaded", l.shard)
	}
	l.mu.Lock()
	closed := l.closed
	segs := append([]int64(nil), l.segs...)
	l.mu.Unlock()
	if closed {
		return 0, log.ErrClosed
	}

	segs, err := l.dropTornRoll(segs)
	if err != nil {
		return 0, l.logCorrupt(err)
	}

	last := int64(-1)
	var active File
	var res scanResult
	// The clean prefix: sealed segments up to the last one written by compaction.
	segBytes := map[int64]int64{}
	cleanThrough, cleanTombMs := int64(-1), int64(math.MaxInt64)
	tombMs := make([]int64, len(segs))
	for i, base := range segs {
		tombMs[i] = math.MaxInt64
		isLast := i == len(segs)-1
		path := l.segPath(base)
		flag := os.O_RDONLY
		if isLast {
			flag = os.O_RDWR
		}
		f, err := l.fs.OpenFile(path, flag, 0)
		if err != nil {
			return 0, fmt.Errorf("load shard %d: open %s: %w", l.shard, path, err)
		}
		below := int64(-1)
		if !isLast {
			below = segs[i+1]
		}
		res, err = scanSegment(f, scanOpts{
			shard: l.shard, path: path, base: base, last: isLast, after: last, below: below,
			fresh: true, maxFrame: MaxFrameBytes,
			onBatch: func(_ int64, b *Batch) error {
				for j, rec := range b.Records {
					if rec.Value == nil {
						tombMs[i] = min(tombMs[i], b.AppendTimeMs)
					}
					if err := fn(b.Offsets[j], rec); err != nil {
						return err
					}
				}
				return nil
			},
		})
		if err != nil {
			f.Close()
			return 0, l.logCorrupt(err) // corruption, fn's error, or an I/O error naming the file
		}
		if res.lastOff >= 0 {
			last = res.lastOff
		}
		if !isLast {
			f.Close()
			segBytes[base] = res.size
			if res.hdr.compacted() {
				cleanThrough = base
			}
			continue
		}
		if t := res.torn; t != nil {
			l.lg.Warn("truncating torn tail of newest segment",
				zap.String("file", t.File), zap.Int64("byte_offset", t.Offset), zap.Int64("dropped_bytes", t.Bytes), zap.String("reason", t.Reason))
			err := f.Truncate(t.Offset)
			if err == nil {
				err = f.Sync()
			}
			if err != nil {
				f.Close()
				return 0, fmt.Errorf("load shard %d: truncate torn tail of %s: %w", l.shard, path, err)
			}
			res.size = t.Offset
		}
		active = f
	}

	activeBase := int64(0)
	if active == nil {
		// An empty shard: its first segment starts at offset 0.
		f, err := l.createSegment(0)
		if err != nil {
			return 0, fmt.Errorf("load shard %d: %w", l.shard, err)
		}
		active, res.size = f, headerLen
		segs = []int64{0}
	} else {
		activeBase = segs[len(segs)-1]
	}
	next := max(last+1, activeBase)

	l.active, l.activeBase = active, activeBase
	l.size, l.durableSize, l.written = res.size, res.size, res.size
	for i, base := range segs {
		if base <= cleanThrough {
			cleanTombMs = min(cleanTombMs, tombMs[i])
		}
	}
	l.mu.Lock()
	l.segs = segs
	l.segBytes, l.cleanThrough, l.cleanTombMs = segBytes, cleanThrough, cleanTombMs
	l.next = next
	l.mu.Unlock()
	l.loaded = true
	go l.run()
	return next, nil
}

// logCorrupt logs err at ERROR if it is corruption (the shard will go FAILED) and returns it.
func (l *shardLog) logCorrupt(err error) error {
	var ce *log.CorruptError
	if errors.As(err, &ce) {
		l.lg.Error("log corrupt: shard cannot load",
			zap.String("file", ce.File), zap.Int64("byte_offset", ce.Offset), zap.String("reason", ce.Reason))
	}
	return err
}

// dropTornRoll removes the newest segment if it has no complete header: a crash during a roll
// left it, and it never held a batch (the header is fsynced before any batch is written). A
// damaged header on a segment holding more than a header is corruption.
func (l *shardLog) dropTornRoll(segs []int64) ([]int64, error) {
	n := len(segs)
	if n == 0 {
		return segs, nil
	}
	path := l.segPath(segs[n-1])
	torn, size, err := isTornRoll(l.fs, l.shard, path)
	if err != nil {
		return nil, fmt.Errorf("load shard %d: %w", l.shard, err)
	}
	if !torn {
		return segs, nil
	}
	l.lg.Warn("removing segment left incomplete by a crash during roll", zap.String("file", path), zap.Int64("bytes", size))
	if err := l.fs.Remove(path); err != nil {
		return nil, fmt.Errorf("load shard %d: remove torn segment: %w", l.shard, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return nil, fmt.Errorf("load shard %d: sync %s: %w", l.shard, l.dir, err)
	}
	return segs[:n-1], nil
}

// createSegment creates the segment with base offset base, writes and fsyncs its header and
// fsyncs the directory, so that it exists before anything is written into it.
func (l *shardLog) createSegment(base int64) (File, error) {
	path := l.segPath(base)
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", path, err)
	}
	_, err = f.WriteAt(header{shard: l.shard, base: base, replacedFrom: -1, replacedTo: -1}.encode(), 0)
	if err == nil {
		if err = f.Sync(); err == nil {
			if err = l.fs.SyncDir(l.dir); err != nil {
				err = &fsyncError{err}
			}
		} else {
			err = &fsyncError{err}
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("create segment %s: %w", path, err)
	}
	return f, nil
}

// fsyncError marks a failed fsync, which is never retried: after one, the kernel may have
// dropped dirty pages and a later fsync can succeed without them.
type fsyncError struct{ err error }

func (e *fsyncError) Error() string { return "fsync: " + e.err.Error() }
func (e *fsyncError) Unwrap() error { return e.err }

// CheckBatch implements log.BatchChecker.
func (l *shardLog) CheckBatch(recs []log.Record) error {
	if size := EncodedSize(recs); size > l.opts.MaxBatchBytes {
		return fmt.Errorf("shard %d: batch of %d records is %d bytes, message.max.bytes is %d: %w",
			l.shard, len(recs), size, l.opts.MaxBatchBytes, log.ErrBatchTooLarge)
	}
	return nil
}

// Append encodes recs as one batch into the pending buffer, then hands it to the journal itself,
// leaves it to the round that holds the shard, or wakes the syncer goroutine.
func (l *shardLog) Append(recs []log.Record) (int64, error) {
	if len(recs) == 0 {
		return 0, fmt.Errorf("shard %d: append of an empty batch", l.shard)
	}
	l.mu.Lock()
	if err := l.appendErrLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	base := l.next
	pos := len(l.pend.buf)
	l.pend.begin(base, l.opts.Now().UnixMilli(), 0)
	for i, r := range recs {
		l.pend.add(base+int64(i), r)
	}
	if size := l.pend.size(); size > l.opts.MaxBatchBytes {
		l.pend.abort()
		l.mu.Unlock()
		return 0, fmt.Errorf("shard %d: batch of %d records is %d bytes, message.max.bytes is %d: %w",
			l.shard, len(recs), size, l.opts.MaxBatchBytes, log.ErrBatchTooLarge)
	}
	l.pend.end()
	if pos == 0 {
		l.pendFrom = base
	}
	l.pendTo = base + int64(len(recs)) - 1
	l.pendEnd = pos
	l.next = l.pendTo + 1
	last := l.pendTo
	switch {
	case l.inFlight:
		// The round that carries our last group takes this one along or sends it next (topUp,
		// complete).
		l.mu.Unlock()
	case !l.busy && l.journal != nil && l.journal.busy.Load() && !l.syncWanted.Load() &&
		len(l.tail) < tailFlushBytes && l.size+int64(len(l.pend.buf)) <= l.opts.SegmentBytes:
		// Nobody holds the syncer's state, the group needs nothing of the syncer goroutine and
		// a round loop runs: hand the group to it from here, sparing a wake-up per commit. An
		// idle journal is left to the syncer goroutine, which runs the round itself: a round
		// loop started from here would be a new goroutine, which cost a lone committer more
		// than the wake-up (offset-commit at 1 client: 3,834 -> 3,244 ops/s, 120 -> 142 µs/op).
		buf, from, to, end := l.takePendLocked()
		l.inFlight = true
		l.mu.Unlock()
		setFlags(buf, end, flagGroupEnd)
		l.stage(buf, from, to)
		l.journal.enqueue(&l.jreq)
	default:
		l.mu.Unlock()
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return last, nil
}

// takePendLocked takes the pending groups for sending, leaving the spare buffer to the appends.
func (l *shardLog) takePendLocked() (buf []byte, from, to int64, end int) {
	buf, from, to, end = l.pend.buf, l.pendFrom, l.pendTo, l.pendEnd
	l.pend.buf, l.spare = l.spare[:0], nil
	return buf, from, to, end
}

func (l *shardLog) appendErrLocked() error {
	switch {
	case l.closed:
		return log.ErrClosed
	case !l.loaded:
		return fmt.Errorf("shard %d: append before load", l.shard)
	case l.state == stateFailed:
		return fmt.Errorf("shard %d: %w: %w", l.shard, log.ErrFailed, l.failErr)
	case l.state == stateLost:
		return l.lostErr
	}
	return nil
}

// run is the syncer goroutine. In the relaxed flush mode it takes everything pending, writes it
// with one call and reports it durable (fsyncing on the timer); appends arriving meanwhile share
// the next write. With a journal, see runJournaled.
func (l *shardLog) run() {
	defer close(l.done)
	if l.journal != nil {
		l.runJournaled()
		return
	}
	var tick <-chan time.Time
	if l.opts.FlushInterval > 0 {
		t := time.NewTicker(l.opts.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-l.kick:
			if l.syncWanted.Swap(false) && !l.syncUnsynced() {
				return
			}
		case <-tick:
			if !l.syncUnsynced() {
				return
			}
			continue
		}
		// Double buffering: appends fill one buffer while the syncer writes the other.
		l.mu.Lock()
		buf, from, to, end := l.pend.buf, l.pendFrom, l.pendTo, l.pendEnd
		l.pend.buf, l.spare = l.spare[:0], nil
		closing := l.closed
		l.mu.Unlock()
		if len(buf) > 0 && !l.writeGroup(buf, from, to, end) {
			return
		}
		if cap(buf) <= maxSpareBuffer {
			l.spare = buf[:0]
		}
		if closing {
			if !l.syncUnsynced() {
				l.closeErr = l.failErrValue()
			}
			return
		}
	}
}

func (l *shardLog) failErrValue() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failErr
}

// writeGroup writes one group of batches in the relaxed flush mode (no journal) and reports it
// durable. It returns false once the log has failed for good.
func (l *shardLog) writeGroup(buf []byte, from, to int64, end int) bool {
	setFlags(buf, end, flagGroupEnd)
	if l.size > headerLen && l.size+int64(len(buf)) > l.opts.SegmentBytes {
		if err, fatal := l.roll(from); err != nil {
			if fatal {
				l.fail(err)
				return false
			}
			return l.writeFailed(err, from, to)
		}
	}
	// The UNSAFE relaxed mode: the write to the OS is all there is until the timer's fsync.
	if _, err := l.active.WriteAt(buf, l.size); err != nil {
		return l.writeFailed(fmt.Errorf("write %s at byte %d: %w", l.segPath(l.activeBase), l.size, err), from, to)
	}
	l.size += int64(len(buf))
	l.written = l.size
	l.unsynced = true
	l.durableSize = l.size
	l.cb.Durable(to)
	return true
}

// runJournaled is the syncer with a journal. It hands the shard's pending groups to the
// journal and lets go: the round reports them durable and sends the shard's next groups on
// (complete). The goroutine takes over again, woken by complete or Append, for what a round
// must not do on its goroutine, which all shards' answers wait for: rolls, writing the tail
// into the segment past tailFlushBytes, segment fsyncs the journal asks for, and the close.
func (l *shardLog) runJournaled() {
	for range l.kick {
		l.mu.Lock()
		if l.inFlight {
			l.mu.Unlock()
			continue // the round that carries our group goes on from here
		}
		l.busy = true
		l.mu.Unlock()
		stop := l.turn()
		l.mu.Lock()
		l.busy = false
		l.mu.Unlock()
		if stop {
			return
		}
	}
}

// turn does what the syncer goroutine was woken for; true when the syncer is done for good.
func (l *shardLog) turn() (stop bool) {
	l.mu.Lock()
	failed, closing := l.state == stateFailed, l.closed
	l.mu.Unlock()
	if failed {
		return true
	}
	if l.syncWanted.Swap(false) && !l.syncUnsynced() {
		return true
	}
	sent, alive := l.sendPending()
	if !alive {
		return true
	}
	if sent || !closing {
		return false
	}
	if err := l.flushTail(); err != nil {
		l.closeErr = fmt.Errorf("shard %d: %w (the journal keeps the groups the segment lacks for the next open)", l.shard, err)
		return true
	}
	if !l.syncUnsynced() {
		l.closeErr = l.failErrValue()
	}
	return true
}

// sendPending hands what is pending to the journal (rolling the segment or writing the tail
// first when due). sent: a group is in the journal now; alive: false once the log has failed.
func (l *shardLog) sendPending() (sent, alive bool) {
	l.mu.Lock()
	if len(l.pend.buf) == 0 {
		l.mu.Unlock()
		return false, true
	}
	buf, from, to, end := l.takePendLocked()
	l.mu.Unlock()
	setFlags(buf, end, flagGroupEnd)
	if l.size > headerLen && l.size+int64(len(buf)) > l.opts.SegmentBytes {
		if err, fatal := l.roll(from); err != nil {
			if fatal {
				l.fail(err)
				return false, false
			}
			return false, l.writeFailed(err, from, to)
		}
	}
	if len(l.tail) >= tailFlushBytes {
		if err := l.flushTail(); err != nil && len(l.tail) >= tailMaxBytes {
			return false, l.writeFailed(err, from, to)
		}
	}
	l.stage(buf, from, to)
	l.mu.Lock()
	l.inFlight, l.busy = true, false // the round owns the state now, even if we run it (submit)
	l.mu.Unlock()
	l.journal.submit(&l.jreq)
	return true, true
}

// stage puts a group at the end of the tail and makes it the shard's journal request. The
// segment itself gets it later (flushTail): the journal covers it until the segment is fsynced.
func (l *shardLog) stage(buf []byte, from, to int64) {
	pos := l.size
	l.tail = append(l.tail, buf...)
	l.size += int64(len(buf))
	l.unsynced = true
	r := &l.jreq
	r.base, r.pos, r.data, r.from, r.to = l.activeBase, pos, l.tail[len(l.tail)-len(buf):], from, to
	r.more = r.more[:0]
	if cap(buf) <= maxSpareBuffer {
		l.spare = buf[:0]
	}
}

// complete is the journal round's answer to our request, on the round's goroutine (or on the
// syncer's when the journal refused it at once), which owns the syncer's state until it sets
// inFlight false. While the shard has a group pending that the round may send, it sends it to
// the next round at once: no goroutine of ours wakes between two rounds of a busy shard.
func (l *shardLog) complete(r *jreq, res jres) {
	if res.err != nil {
		if res.fatal {
			l.fail(res.err)
		} else {
			l.writeFailed(res.err, r.from, r.to)
		}
		l.letGo()
		return
	}
	l.jseq = max(l.jseq, res.seq)
	l.durableSize = l.size
	l.cb.Durable(r.to)
	l.mu.Lock()
	if n := len(l.pend.buf); n > 0 && l.state == stateOpen && !l.closed && !l.syncWanted.Load() &&
		len(l.tail) < tailFlushBytes && l.size+int64(n) <= l.opts.SegmentBytes {
		buf, from, to, end := l.takePendLocked()
		l.mu.Unlock()
		setFlags(buf, end, flagGroupEnd)
		l.stage(buf, from, to)
		l.journal.resubmit(r)
		return
	}
	l.mu.Unlock()
	l.letGo()
}

// letGo gives the syncer's state back to the syncer goroutine, waking it when it has work.
func (l *shardLog) letGo() {
	l.mu.Lock()
	l.inFlight = false
	wake := len(l.pend.buf) > 0 || l.closed || l.state == stateFailed || l.syncWanted.Load() || len(l.tail) >= tailFlushBytes
	l.mu.Unlock()
	if wake {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// topUp adds the groups appended since r was queued to r's round (see jreq.topUp). It runs on
// the round's goroutine, which owns the syncer's state while r is in the journal. A group that
// would roll the segment is left to the syncer.
func (l *shardLog) topUp(r *jreq) {
	l.mu.Lock()
	if n := len(l.pend.buf); n == 0 || l.state != stateOpen || l.size+int64(n) > l.opts.SegmentBytes || len(l.tail) >= tailMaxBytes {
		l.mu.Unlock()
		return
	}
	buf, _, to, end := l.takePendLocked()
	l.mu.Unlock()
	setFlags(buf, end, flagGroupEnd)
	pos := l.size
	l.tail = append(l.tail, buf...)
	r.more = append(r.more, jchunk{pos: pos, data: l.tail[len(l.tail)-len(buf):]})
	l.size += int64(len(buf))
	r.to = to
	if cap(buf) <= maxSpareBuffer {
		l.spare = buf[:0]
	}
}

// flushTail writes the tail into the segment, without fsync. It is called only between rounds,
// when every byte of the tail is acknowledged. After a failed write the tail stays (the bytes
// that did reach the file are the same bytes, written again next time).
func (l *shardLog) flushTail() error {
	if len(l.tail) == 0 {
		return nil
	}
	if _, err := l.active.WriteAt(l.tail, l.written); err != nil {
		return fmt.Errorf("write %s at byte %d: %w", l.segPath(l.activeBase), l.written, err)
	}
	l.written += int64(len(l.tail))
	if cap(l.tail) > 2*tailFlushBytes {
		l.tail = nil
	} else {
		l.tail = l.tail[:0]
	}
	return nil
}

// syncUnsynced writes the tail and fsyncs the segment, then releases the shard's journal
// entries; false once the log has failed.
func (l *shardLog) syncUnsynced() bool {
	if !l.unsynced {
		return true
	}
	if err := l.flushTail(); err != nil {
		// The journal keeps holding the tail (nothing is released), so nothing is at risk;
		// the next sync, roll or close tries again.
		l.lg.Warn("writing the journaled tail into the segment failed; the journal keeps it", zap.Error(err))
		return true
	}
	if err := l.active.Sync(); err != nil {
		l.fail(fmt.Errorf("fsync %s: %w", l.segPath(l.activeBase), err))
		return false
	}
	l.unsynced = false
	l.segmentSynced()
	return true
}

// segmentSynced: everything written to our segments is durable in them, so the journal no
// longer needs our entries.
func (l *shardLog) segmentSynced() {
	if l.jseq >= 0 {
		l.journal.release(l.shard, l.jseq)
		l.jseq = -1
	}
}

// requestSync asks the syncer to fsync the active segment at its next turn.
func (l *shardLog) requestSync() {
	l.syncWanted.Store(true)
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// roll seals the active segment and starts a new one at base. An error is fatal when the
// directory may be left in a state recovery would misread.
func (l *shardLog) roll(base int64) (err error, fatal bool) {
	if l.unsynced {
		if err := l.flushTail(); err != nil {
			return err, false // the tail stays with the journal; the group that would roll is lost
		}
		if err := l.active.Sync(); err != nil {
			return fmt.Errorf("fsync %s before roll: %w", l.segPath(l.activeBase), err), true
		}
		l.unsynced = false
		l.segmentSynced()
	}
	path := l.segPath(base)
	f, err := l.createSegment(base)
	if err != nil {
		var fe *fsyncError
		if errors.As(err, &fe) {
			return err, true
		}
		// Whatever was created must go: a stray newer segment would hide the active one's tail.
		if rerr := removeIfExists(l.fs, path); rerr != nil {
			return fmt.Errorf("%w; removing it failed: %v", err, rerr), true
		}
		if serr := l.fs.SyncDir(l.dir); serr != nil {
			return fmt.Errorf("%w; syncing %s failed: %v", err, l.dir, serr), true
		}
		return err, false
	}
	if cerr := l.active.Close(); cerr != nil {
		l.lg.Warn("closing sealed segment", zap.String("file", l.segPath(l.activeBase)), zap.Error(cerr))
	}
	sealedBase, sealedSize := l.activeBase, l.size
	l.active, l.activeBase = f, base
	l.size, l.durableSize, l.written = headerLen, headerLen, headerLen
	l.mu.Lock()
	l.segs = append(l.segs, base)
	l.segBytes[sealedBase] = sealedSize
	l.mu.Unlock()
	return nil, false
}

// writeFailed handles a failed write: everything pending is lost, the segment is cut back to
// its last durable byte, and the shard is told through Lost (or Failed when that is not
// possible). It returns false once the log has failed for good.
func (l *shardLog) writeFailed(cause error, from, to int64) bool {
	l.mu.Lock()
	if l.pend.buf != nil && len(l.pend.buf) > 0 {
		to = l.pendTo
		l.pend.buf = l.pend.buf[:0]
	}
	werr := &log.WriteError{Shard: l.shard, First: from, Last: to, Err: cause}
	l.state, l.lostErr = stateLost, werr
	l.mu.Unlock()

	if l.journal != nil {
		// Nothing that was not durable reached the file: the lost groups are only in the
		// tail. What stays of the tail is acknowledged and still held by the journal.
		l.tail = l.tail[:l.durableSize-l.written]
		l.size = l.durableSize
	} else {
		err := l.active.Truncate(l.durableSize)
		if err == nil {
			err = l.active.Sync()
		}
		if err != nil {
			l.fail(fmt.Errorf("%w; cutting %s back to byte %d failed: %v", werr, l.segPath(l.activeBase), l.durableSize, err))
			return false
		}
		l.size, l.written = l.durableSize, l.durableSize
		l.unsynced = false
		l.segmentSynced()
	}
	if l.cb.Lost == nil {
		l.fail(werr)
		return false
	}
	l.lg.Error("write failed: pending appends lost, log cut back to last durable batch",
		zap.Int64("first_lost", from), zap.Int64("last_lost", to), zap.Error(cause))
	l.cb.Lost(werr, func() {
		l.mu.Lock()
		if l.state == stateLost && l.lostErr == werr {
			l.state, l.lostErr = stateOpen, nil
		}
		l.mu.Unlock()
	})
	return true
}

// fail makes the log failed for good and reports it; the syncer stops after this.
func (l *shardLog) fail(err error) {
	l.mu.Lock()
	l.state, l.failErr, l.lostErr = stateFailed, err, nil
	l.pend.buf = l.pend.buf[:0]
	l.mu.Unlock()
	l.lg.Error("log failed: nothing after the last durable offset can be made durable", zap.Error(err))
	l.cb.Failed(err)
}

// Close lets the syncer finish what is pending, then closes the active segment.
func (l *shardLog) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	compacting := l.compactDone
	l.mu.Unlock()
	if compacting != nil {
		l.stop.Store(true)
		<-compacting
	}
	var err error
	if l.loaded {
		select {
		case l.kick <- struct{}{}:
		default:
		}
		<-l.done
		err = l.closeErr
		if cerr := l.active.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("shard %d: close %s: %w", l.shard, l.segPath(l.activeBase), cerr)
		}
	}
	l.store.released(l.shard)
	return err
}
