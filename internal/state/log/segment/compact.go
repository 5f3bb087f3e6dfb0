package segment

// Compaction: rewrite the sealed segments (all but the active one) into one segment holding
// only the newest record of each key, without tombstones older than the delete retention.
// Records keep their offsets. The swap is crash-safe:
//
//	1. write X.cleaned (X = base offset of the first sealed segment), fsync it
//	2. rename X.cleaned -> X.swap, fsync the directory        (commit point)
//	3. delete the other replaced segments
//	4. rename X.swap over X.log, fsync the directory
//
// Opening the shard deletes a .cleaned file (crash before the commit point: the old segments
// are intact) and completes a .swap file from the replaced range in its header (crash after).
//
// When: only when there is something to drop (cleanable). The log remembers which sealed
// segments are clean (the output of the last compaction, or segments a scan found nothing to
// drop in) and their sizes; compaction runs when the dirty share of the sealed bytes exceeds
// MinCleanableRatio (Kafka's log.cleaner.min.cleanable.ratio), or when a tombstone in the clean
// part has outlived the delete retention. A pass-1 scan that finds nothing superseded and no
// expired tombstone writes nothing and marks the range clean. So a log nobody writes to is never
// rewritten.
//
// Concurrency: Compact may run on any goroutine, one call at a time, concurrently with Append
// and the syncer. It snapshots the segment list under mu and then reads and replaces only sealed
// segments, which the syncer never touches again; the syncer may roll meanwhile, which only
// appends to the list. The swap of the in-memory list is one step under mu. Close stops a
// compaction between batches (before its commit point) and waits for it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// compactBatchBytes is the size at which compaction closes an output batch.
const compactBatchBytes = 256 << 10

// errCompactionRunning is returned by a Compact call made while another one runs.
var errCompactionRunning = errors.New("a compaction of this shard is already running")

// Compact rewrites the sealed segments when they hold something to drop. It returns nil without
// doing anything when there is no sealed segment or nothing cleanable.
func (l *shardLog) Compact() error {
	if !l.loaded {
		return fmt.Errorf("shard %d: compact before load", l.shard)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return log.ErrClosed
	}
	if l.state == stateFailed {
		err := l.failErr
		l.mu.Unlock()
		return fmt.Errorf("shard %d: %w: %w", l.shard, log.ErrFailed, err)
	}
	if l.compactDone != nil {
		l.mu.Unlock()
		return fmt.Errorf("shard %d: %w", l.shard, errCompactionRunning)
	}
	done := make(chan struct{})
	l.compactDone = done
	pending := l.swap
	sealed := append([]int64(nil), l.segs[:len(l.segs)-1]...)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.compactDone = nil
		l.mu.Unlock()
		close(done)
	}()

	if pending != nil {
		// The previous compaction committed but could not finish its swap: finish it first.
		if err := l.completeSwap(pending, sealed); err != nil {
			return err
		}
		l.mu.Lock()
		sealed = append([]int64(nil), l.segs[:len(l.segs)-1]...)
		l.mu.Unlock()
	}
	if len(sealed) == 0 || !l.cleanable(sealed) {
		return nil
	}
	return l.compact(sealed)
}

// cleanable reports whether compacting sealed could drop anything: the dirty (never compacted
// nor found clean) share of their bytes is above MinCleanableRatio, or a tombstone in the clean
// part is past the delete retention.
func (l *shardLog) cleanable(sealed []int64) bool {
	horizon := l.opts.Now().Add(-l.opts.DeleteRetention).UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	var clean, dirty int64
	for _, base := range sealed {
		if base <= l.cleanThrough {
			clean += l.segBytes[base]
		} else {
			dirty += l.segBytes[base]
		}
	}
	if l.cleanTombMs < horizon {
		return true
	}
	return dirty > 0 && float64(dirty)/float64(clean+dirty) > l.opts.MinCleanableRatio
}

// markClean records that the sealed segments up to and including through hold nothing to drop
// but tombstones, the oldest appended at tombMs (math.MaxInt64: none).
func (l *shardLog) markClean(through, tombMs int64) {
	l.mu.Lock()
	l.cleanThrough, l.cleanTombMs = through, tombMs
	l.mu.Unlock()
}

// stopping reports that Close wants a running compaction to give up.
func (l *shardLog) stopping() error {
	if l.stop.Load() {
		return log.ErrClosed
	}
	return nil
}

func (l *shardLog) compact(sealed []int64) error {
	start := l.opts.Now()
	horizon := start.Add(-l.opts.DeleteRetention).UnixMilli()
	first, lastSealed := sealed[0], sealed[len(sealed)-1]

	// Pass 1: the newest offset of every key in the sealed segments, and whether anything would
	// be dropped at all.
	newest := map[string]int64{}
	var inBytes, records, expired int64
	tombMs := int64(math.MaxInt64)
	err := l.scanSealed(sealed, func(b *Batch) error {
		for i, r := range b.Records {
			newest[string(r.Key)] = b.Offsets[i]
		}
		records += int64(len(b.Records))
		return l.stopping()
	}, &inBytes)
	if err != nil {
		return err
	}
	if records == int64(len(newest)) {
		// Nothing superseded: only expired tombstones could go. Look for them (and the oldest
		// kept one) without writing anything.
		err := l.scanSealed(sealed, func(b *Batch) error {
			for _, r := range b.Records {
				if r.Value == nil {
					if b.AppendTimeMs < horizon {
						expired++
					} else {
						tombMs = min(tombMs, b.AppendTimeMs)
					}
				}
			}
			return l.stopping()
		}, nil)
		if err != nil {
			return err
		}
		if expired == 0 {
			l.markClean(lastSealed, tombMs)
			l.lg.Debug("sealed segments hold nothing to drop; not rewritten", zap.Int("segments", len(sealed)), zap.Int64("bytes", inBytes))
			return nil
		}
	}

	// Pass 2: write the survivors to X.cleaned.
	cleaned := filepath.Join(l.dir, segmentName(first, cleanedExt))
	if err := removeIfExists(l.fs, cleaned); err != nil {
		return fmt.Errorf("shard %d: compact: %w", l.shard, err)
	}
	f, err := l.fs.OpenFile(cleaned, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("shard %d: compact: create %s: %w", l.shard, cleaned, err)
	}
	hdr := header{flags: headerFlagCompacted, shard: l.shard, base: first, replacedFrom: first, replacedTo: lastSealed}
	out := compactWriter{f: f, w: batchWriter{buf: hdr.encode()}}
	var kept, dropped, tombsDropped int64
	err = l.scanSealed(sealed, func(b *Batch) error {
		for i, r := range b.Records {
			off := b.Offsets[i]
			if newest[string(r.Key)] != off {
				dropped++
				continue
			}
			if r.Value == nil && b.AppendTimeMs < horizon {
				tombsDropped++
				continue
			}
			if err := out.add(off, r, b.AppendTimeMs); err != nil {
				return err
			}
			if r.Value == nil {
				tombMs = min(tombMs, b.AppendTimeMs)
			}
			kept++
		}
		return l.stopping()
	}, nil)
	if err == nil {
		err = out.finish()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if rerr := removeIfExists(l.fs, cleaned); rerr != nil {
			l.lg.Warn("removing unfinished compaction output", zap.String("file", cleaned), zap.Error(rerr))
		}
		return fmt.Errorf("shard %d: compact: write %s: %w", l.shard, cleaned, err)
	}

	// Commit point: once X.swap is durable, the swap happens, now or on the next open.
	swapPath := filepath.Join(l.dir, segmentName(first, swapExt))
	if err := l.fs.Rename(cleaned, swapPath); err != nil {
		removeIfExists(l.fs, cleaned)
		return fmt.Errorf("shard %d: compact: rename %s: %w", l.shard, cleaned, err)
	}
	sw := &swapAction{hdr: hdr, swap: swapPath, dest: l.segPath(first), size: out.pos, tombMs: tombMs}
	if err := l.fs.SyncDir(l.dir); err != nil {
		// Whether the rename is durable is unknown, so the swap must be finished either way.
		l.setPendingSwap(sw)
		return fmt.Errorf("shard %d: compact: sync %s: %w", l.shard, l.dir, err)
	}
	if err := l.completeSwap(sw, sealed); err != nil {
		l.setPendingSwap(sw)
		return err
	}
	l.lg.Info("compacted sealed segments",
		zap.Int("segments", len(sealed)), zap.Int64("bytes_in", inBytes), zap.Int64("bytes_out", out.pos),
		zap.Int64("records_kept", kept), zap.Int64("records_dropped", dropped), zap.Int64("tombstones_dropped", tombsDropped),
		zap.Duration("took", l.opts.Now().Sub(start)))
	return nil
}

func (l *shardLog) setPendingSwap(sw *swapAction) {
	l.mu.Lock()
	l.swap = sw
	l.mu.Unlock()
}

// completeSwap deletes the segments a committed compaction replaced and renames its output into
// place (steps 3 and 4); each step may be repeated.
func (l *shardLog) completeSwap(sw *swapAction, sealed []int64) error {
	for _, base := range sealed {
		if base > sw.hdr.replacedFrom && base <= sw.hdr.replacedTo {
			if err := removeIfExists(l.fs, l.segPath(base)); err != nil {
				return fmt.Errorf("shard %d: compact: delete replaced segment: %w", l.shard, err)
			}
		}
	}
	if err := l.fs.Rename(sw.swap, sw.dest); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("shard %d: compact: rename %s: %w", l.shard, sw.swap, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("shard %d: compact: sync %s: %w", l.shard, l.dir, err)
	}
	l.mu.Lock()
	kept := l.segs[:0:0]
	for _, base := range l.segs {
		if base <= sw.hdr.replacedFrom || base > sw.hdr.replacedTo {
			kept = append(kept, base)
		} else {
			delete(l.segBytes, base)
		}
	}
	l.segs = kept
	l.segBytes[sw.hdr.replacedFrom] = sw.size
	l.cleanThrough, l.cleanTombMs = sw.hdr.replacedFrom, sw.tombMs
	l.swap = nil
	l.mu.Unlock()
	return nil
}

// scanSealed reads the sealed segments in order, reusing one frame buffer.
func (l *shardLog) scanSealed(sealed []int64, fn func(b *Batch) error, bytes *int64) error {
	after := int64(-1)
	for i, base := range sealed {
		path := l.segPath(base)
		f, err := l.fs.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("shard %d: compact: open %s: %w", l.shard, path, err)
		}
		below := int64(-1)
		if i+1 < len(sealed) {
			below = sealed[i+1]
		}
		res, err := scanSegment(f, scanOpts{
			shard: l.shard, path: path, base: base, after: after, below: below, maxFrame: MaxFrameBytes,
			onBatch: func(_ int64, b *Batch) error { return fn(b) },
		})
		f.Close()
		if err != nil {
			return fmt.Errorf("shard %d: compact: %w", l.shard, err)
		}
		if res.lastOff >= 0 {
			after = res.lastOff
		}
		if bytes != nil {
			*bytes += res.size
		}
	}
	return nil
}

// compactWriter packs surviving records into batches and writes them out in large chunks. A
// batch's append time only matters for its tombstones, so records from different source batches
// share an output batch unless it holds tombstones of another append time: a tombstone is never
// given a newer time than it had, which would delay its removal at every later compaction.
type compactWriter struct {
	f        File
	w        batchWriter
	pos      int64 // bytes written to f
	open     bool
	maxTime  int64
	tombTime int64 // append time of the open batch's tombstones, -1 if none
}

func (c *compactWriter) add(off int64, r log.Record, appendTime int64) error {
	tomb := r.Value == nil
	if c.open && (c.w.size() >= compactBatchBytes || (tomb && c.tombTime >= 0 && c.tombTime != appendTime)) {
		if err := c.endBatch(); err != nil {
			return err
		}
	}
	if !c.open {
		c.w.begin(off, appendTime, 0)
		c.open, c.maxTime, c.tombTime = true, appendTime, -1
	}
	c.w.add(off, r)
	c.maxTime = max(c.maxTime, appendTime)
	if tomb {
		c.tombTime = appendTime
	}
	return nil
}

func (c *compactWriter) endBatch() error {
	t := c.maxTime
	if c.tombTime >= 0 {
		t = c.tombTime
	}
	binary.BigEndian.PutUint64(c.w.buf[c.w.start+18:], uint64(t))
	c.w.end()
	c.open = false
	if len(c.w.buf) >= 1<<20 {
		return c.flush()
	}
	return nil
}

func (c *compactWriter) flush() error {
	if _, err := c.f.WriteAt(c.w.buf, c.pos); err != nil {
		return err
	}
	c.pos += int64(len(c.w.buf))
	c.w.buf = c.w.buf[:0]
	return nil
}

func (c *compactWriter) finish() error {
	if c.open {
		if err := c.endBatch(); err != nil {
			return err
		}
	}
	return c.flush()
}
