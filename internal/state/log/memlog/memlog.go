// Package memlog is an in-memory log.Backend for tests of everything above the storage seam.
// Durability is under the test's control: syncs can be automatic, held until released, or made
// to fail, so a test can prove that nothing is acknowledged before it is durable.
package memlog

import (
	"errors"
	"fmt"
	"sync"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// Backend keeps every shard's durable records across Open/Close, like a disk would.
type Backend struct {
	mu     sync.Mutex
	shards map[int32]*store
	// Hold, when set, keeps appends pending until Release; otherwise each Append becomes durable
	// right away on another goroutine.
	hold bool
	// LoadGate, when not nil, blocks every Load until it is closed.
	LoadGate chan struct{}
	// MaxBatchRecords, when positive, makes batches with more records too large (as a size
	// limit would), through log.BatchChecker and Append alike.
	MaxBatchRecords int
	// CompactHook, when not nil, runs inside every Compact (on the caller's goroutine), so that
	// a test can hold a compaction or count them.
	CompactHook func(shard int32)
}

type store struct {
	durable []entry
	next    int64
	open    *memLog
}

type entry struct {
	offset int64
	rec    log.Record
}

// New returns an empty backend whose appends become durable immediately.
func New() *Backend { return &Backend{shards: map[int32]*store{}} }

// Hold makes later appends wait for Release (true) or sync on their own (false).
func (b *Backend) Hold(hold bool) {
	b.mu.Lock()
	b.hold = hold
	b.mu.Unlock()
}

// Open implements log.Backend.
func (b *Backend) Open(shard int32, cb log.Callbacks) (log.Log, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.shards[shard]
	if st == nil {
		st = &store{}
		b.shards[shard] = st
	}
	// A log that failed for good may still be closing when its shard is loaded again (Set.Own
	// closes a FAILED shard in the background), as the Kafka backend allows: it writes nothing
	// more, so only a live one makes a second open a mistake.
	if st.open != nil && !st.open.closed && st.open.failed == nil {
		return nil, fmt.Errorf("shard %d log already open", shard)
	}
	l := &memLog{b: b, st: st, shard: shard, cb: cb}
	st.open = l
	return l, nil
}

// Records returns a copy of a shard's durable records.
func (b *Backend) Records(shard int32) []log.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.shards[shard]
	if st == nil {
		return nil
	}
	out := make([]log.Record, len(st.durable))
	for i, e := range st.durable {
		out[i] = e.rec
	}
	return out
}

// Pending returns how many appended batches wait for Release.
func (b *Backend) Pending(shard int32) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.shards[shard]; st != nil && st.open != nil {
		return len(st.open.pending)
	}
	return 0
}

// Release makes every pending append of the shard durable and reports it.
func (b *Backend) Release(shard int32) { b.release(shard, -1) }

// ReleaseOldest makes only the oldest pending append of the shard durable and reports it, as a
// log reports a prefix of what waits while later appends wait for the next fsync.
func (b *Backend) ReleaseOldest(shard int32) { b.release(shard, 1) }

// release makes the first n pending appends durable (all when n < 0).
func (b *Backend) release(shard int32, n int) {
	b.mu.Lock()
	st := b.shards[shard]
	if st == nil || st.open == nil {
		b.mu.Unlock()
		return
	}
	l := st.open
	if n < 0 || n > len(l.pending) {
		n = len(l.pending)
	}
	last := int64(-1)
	for _, batch := range l.pending[:n] {
		st.durable = append(st.durable, batch...)
		last = batch[len(batch)-1].offset
	}
	l.pending = l.pending[n:]
	b.mu.Unlock()
	if last >= 0 {
		l.cb.Durable(last)
	}
}

// Lose drops every pending append of the shard and reports a recoverable write error.
func (b *Backend) Lose(shard int32, cause error) {
	b.mu.Lock()
	l := b.shards[shard].open
	first, last := l.dropPending()
	b.mu.Unlock()
	l.cb.Lost(&log.WriteError{Shard: shard, First: first, Last: last, Err: cause}, func() {})
}

// Fail drops every pending append and fails the log for good.
func (b *Backend) Fail(shard int32, cause error) {
	b.mu.Lock()
	l := b.shards[shard].open
	l.dropPending()
	l.failed = cause
	b.mu.Unlock()
	l.cb.Failed(cause)
}

type memLog struct {
	b       *Backend
	st      *store
	shard   int32
	cb      log.Callbacks
	pending [][]entry
	closed  bool
	failed  error
}

func (l *memLog) dropPending() (first, last int64) {
	first, last = -1, -1
	for _, batch := range l.pending {
		if first < 0 {
			first = batch[0].offset
		}
		last = batch[len(batch)-1].offset
	}
	l.pending = nil
	return first, last
}

func (l *memLog) Load(fn func(offset int64, rec log.Record) error) (int64, error) {
	if g := l.b.LoadGate; g != nil {
		<-g
	}
	l.b.mu.Lock()
	entries := append([]entry(nil), l.st.durable...)
	// Offsets never go back, even over records lost before they were durable.
	next := l.st.next
	l.b.mu.Unlock()
	for _, e := range entries {
		if err := fn(e.offset, e.rec); err != nil {
			return 0, err
		}
	}
	return next, nil
}

func (l *memLog) Append(recs []log.Record) (int64, error) {
	l.b.mu.Lock()
	if l.closed {
		l.b.mu.Unlock()
		return 0, log.ErrClosed
	}
	if l.failed != nil {
		l.b.mu.Unlock()
		return 0, fmt.Errorf("%w: %v", log.ErrFailed, l.failed)
	}
	if err := l.CheckBatch(recs); err != nil {
		l.b.mu.Unlock()
		return 0, err
	}
	batch := make([]entry, len(recs))
	for i, r := range recs {
		batch[i] = entry{offset: l.st.next, rec: log.Record{Key: clone(r.Key), Value: cloneValue(r.Value)}}
		l.st.next++
	}
	last := l.st.next - 1
	l.pending = append(l.pending, batch)
	hold := l.b.hold
	l.b.mu.Unlock()
	if !hold {
		go l.b.Release(l.shard)
	}
	return last, nil
}

// CheckBatch implements log.BatchChecker.
func (l *memLog) CheckBatch(recs []log.Record) error {
	if l.b.MaxBatchRecords > 0 && len(recs) > l.b.MaxBatchRecords {
		return fmt.Errorf("batch of %d records: %w", len(recs), log.ErrBatchTooLarge)
	}
	return nil
}

func (l *memLog) Compact() error {
	if h := l.b.CompactHook; h != nil {
		h(l.shard)
	}
	return nil
}

func (l *memLog) Close() error {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if l.closed {
		return errors.New("closed twice")
	}
	l.closed = true
	l.dropPending()
	return nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func cloneValue(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
