package segment

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// fakeClock is the injectable clock: time moves only when a test says so.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// recorder collects a log's callbacks.
type recorder struct {
	mu      sync.Mutex
	cond    *sync.Cond
	durable int64
	reports []int64 // every Durable offset, in order
	failed  error
	lost    []*log.WriteError
	resume  func()
	// autoResume calls resume from the callback (a shard would do it from its goroutine).
	autoResume bool
}

func newRecorder() *recorder {
	r := &recorder{durable: -1}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *recorder) callbacks() log.Callbacks {
	return log.Callbacks{
		Durable: func(off int64) {
			r.mu.Lock()
			if off <= r.durable {
				panic(fmt.Sprintf("durable offset went from %d to %d", r.durable, off))
			}
			r.durable = off
			r.reports = append(r.reports, off)
			r.cond.Broadcast()
			r.mu.Unlock()
		},
		Failed: func(err error) {
			r.mu.Lock()
			if r.failed != nil {
				panic("Failed reported twice")
			}
			r.failed = err
			r.cond.Broadcast()
			r.mu.Unlock()
		},
		Lost: func(err *log.WriteError, resume func()) {
			r.mu.Lock()
			r.lost = append(r.lost, err)
			r.resume = resume
			r.cond.Broadcast()
			auto := r.autoResume
			r.mu.Unlock()
			if auto {
				resume()
			}
		},
	}
}

// wait blocks until cond holds (checked under the lock) or fails the test after 10 s.
func (r *recorder) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	timer := time.AfterFunc(10*time.Second, func() { r.mu.Lock(); r.cond.Broadcast(); r.mu.Unlock() })
	defer timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (durable=%d failed=%v lost=%v)", what, r.durable, r.failed, r.lost)
		}
		r.cond.Wait()
	}
}

func (r *recorder) waitDurable(t testing.TB, off int64) {
	t.Helper()
	r.wait(t, fmt.Sprintf("durable %d", off), func() bool { return r.durable >= off })
}

func (r *recorder) waitFailed(t testing.TB) error {
	t.Helper()
	r.wait(t, "failure", func() bool { return r.failed != nil })
	return r.failed
}

func (r *recorder) waitLost(t testing.TB, n int) *log.WriteError {
	t.Helper()
	r.wait(t, "lost report", func() bool { return len(r.lost) >= n })
	return r.lost[n-1]
}

func (r *recorder) durableOffset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.durable
}

// env is one log directory used across reopenings.
type env struct {
	t     testing.TB
	opts  Options
	mem   *MemFS // nil on the OS file system
	clock *fakeClock
	logs  *observer.ObservedLogs
}

func newMemEnv(t testing.TB) *env {
	mem := NewMemFS()
	clock := newFakeClock()
	core, logs := observer.New(zapcore.DebugLevel)
	return &env{t: t, mem: mem, clock: clock, logs: logs, opts: Options{
		Dir: "/data", Shards: 4, FS: mem, Now: clock.Now, Logger: zap.New(core),
	}}
}

func newOSEnv(t testing.TB) *env {
	clock := newFakeClock()
	core, logs := observer.New(zapcore.DebugLevel)
	return &env{t: t, clock: clock, logs: logs, opts: Options{
		Dir: t.TempDir(), Shards: 4, Now: clock.Now, Logger: zap.New(core),
	}}
}

// opened is one open shard log.
type opened struct {
	store *Store
	log   log.Log
	rec   *recorder
}

func (e *env) open(shard int32) *opened {
	e.t.Helper()
	o, err := e.tryOpen(shard)
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	return o
}

func (e *env) tryOpen(shard int32) (*opened, error) {
	st, err := Open(e.opts)
	if err != nil {
		return nil, err
	}
	rec := newRecorder()
	l, err := st.Open(shard, rec.callbacks())
	if err != nil {
		st.Close()
		return nil, err
	}
	return &opened{store: st, log: l, rec: rec}, nil
}

func (o *opened) close(t testing.TB) {
	t.Helper()
	if err := o.store.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// entry is one replayed record.
type entry struct {
	off int64
	key string
	val *string // nil = tombstone
}

func (en entry) String() string {
	if en.val == nil {
		return fmt.Sprintf("%d:%s=<tomb>", en.off, en.key)
	}
	return fmt.Sprintf("%d:%s=%s", en.off, en.key, *en.val)
}

func (o *opened) load(t testing.TB) ([]entry, int64) {
	t.Helper()
	var got []entry
	next, err := o.log.Load(func(off int64, r log.Record) error {
		en := entry{off: off, key: string(r.Key)}
		if r.Value != nil {
			v := string(r.Value)
			en.val = &v
		}
		got = append(got, en)
		return nil
	})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return got, next
}

// reopen closes nothing: it opens the directory again and loads the shard.
func (e *env) reload(shard int32) ([]entry, int64) {
	e.t.Helper()
	o := e.open(shard)
	defer o.close(e.t)
	return o.load(e.t)
}

func rec(k, v string) log.Record    { return log.Record{Key: []byte(k), Value: []byte(v)} }
func tombstone(k string) log.Record { return log.Record{Key: []byte(k)} }

// live replays entries into key -> value, as a shard would.
func live(entries []entry) map[string]string {
	m := map[string]string{}
	for _, en := range entries {
		if en.val == nil {
			delete(m, en.key)
		} else {
			m[en.key] = *en.val
		}
	}
	return m
}

// liveOffsets maps each live key to the offset of its value.
func liveOffsets(entries []entry) map[string]int64 {
	m := map[string]int64{}
	for _, en := range entries {
		if en.val == nil {
			delete(m, en.key)
		} else {
			m[en.key] = en.off
		}
	}
	return m
}

func (e *env) segFile(shard int32, base int64) string {
	return filepath.Join(e.opts.Dir, shardDirName(shard), segmentName(base, logExt))
}

func (o *opened) mustAppend(t testing.TB, recs ...log.Record) int64 {
	t.Helper()
	last, err := o.log.Append(recs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return last
}

var errInjected = errors.New("injected fault")
