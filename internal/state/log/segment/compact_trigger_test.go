package segment

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// countWrites counts the mutating file operations made while it is installed: with no appends
// running, every one of them is compaction I/O (a rewrite costs a create, writes, three fsyncs,
// renames and deletes).
func countWrites(e *env) (stop func() int32) {
	var n atomic.Int32
	e.mem.SetInject(func(op Op, _ string) error {
		if op.Mutating() {
			n.Add(1)
		}
		return nil
	})
	return func() int32 { e.mem.SetInject(nil); return n.Load() }
}

func compactCounted(t *testing.T, e *env, o *opened) int32 {
	t.Helper()
	stop := countWrites(e)
	err := o.log.Compact()
	n := stop()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fill appends one batch per call so that segment boundaries are deterministic, and returns
// the entries appended.
func fill(t *testing.T, o *opened, n int, key func(i int) string, size int) []entry {
	t.Helper()
	var all []entry
	for i := 0; i < n; i++ {
		k, v := key(i), fmt.Sprintf("%d-%s", i, strings.Repeat("v", size))
		off := o.mustAppend(t, rec(k, v))
		o.rec.waitDurable(t, off)
		all = append(all, entry{off: off, key: k, val: &v})
	}
	return all
}

// Defect 5 (issue 10): a log nobody writes to is compacted once, then never rewritten again —
// not at the next check, not after a reopen — until a tombstone in it expires.
func TestCompactionLeavesCleanLogAlone(t *testing.T) {
	e := compactEnv(t)
	e.opts.MinCleanableRatio = DefaultMinCleanableRatio
	o := e.open(0)
	o.load(t)
	all := history(t, e, o, 200, 5)
	if n := compactCounted(t, e, o); n == 0 {
		t.Fatal("the first compaction of a dirty log wrote nothing")
	}
	for i := 0; i < 3; i++ {
		if n := compactCounted(t, e, o); n != 0 {
			t.Fatalf("check %d rewrote a clean log (%d mutating operations)", i, n)
		}
	}
	o.close(t)
	o = e.open(0)
	o.load(t)
	if n := compactCounted(t, e, o); n != 0 {
		t.Fatalf("after reopening, a clean log was rewritten (%d mutating operations)", n)
	}
	// The compacted segment keeps tombstones younger than the one-hour retention; once they are
	// older there is garbage again, and it is dropped once.
	e.clock.Advance(2 * time.Hour)
	if n := compactCounted(t, e, o); n == 0 {
		t.Fatal("expired tombstones in the clean segment were not dropped")
	}
	if n := compactCounted(t, e, o); n != 0 {
		t.Fatalf("rewritten again after the expired tombstones went (%d)", n)
	}
	o.close(t)
	got, _ := e.reload(0)
	if !reflect.DeepEqual(live(got), live(all)) {
		t.Fatal("live state changed")
	}
	bases := segmentBases(t, e, 0)
	for _, en := range got {
		if en.val == nil && en.off < bases[len(bases)-1] {
			t.Fatalf("sealed tombstone %v survived its retention", en)
		}
	}
}

// log.cleaner.min.cleanable.ratio: new sealed bytes are compacted only once they are more than
// the ratio of the sealed bytes.
func TestCompactionWaitsForDirtyRatio(t *testing.T) {
	e := compactEnv(t)
	e.opts.MinCleanableRatio = DefaultMinCleanableRatio
	o := e.open(0)
	o.load(t)
	keys := func(i int) string { return fmt.Sprintf("k%03d", i%200) }
	all := fill(t, o, 600, keys, 100) // every key three times: two thirds garbage
	if n := compactCounted(t, e, o); n == 0 {
		t.Fatal("first compaction wrote nothing")
	}
	clean, _ := e.mem.ReadFile(e.segFile(0, 0))
	// A little more garbage: well under half of the sealed bytes.
	all = append(all, fill(t, o, 60, keys, 100)...)
	if n := compactCounted(t, e, o); n != 0 {
		t.Fatalf("compacted at a dirty share under the ratio (clean %d bytes, %d mutating operations)", len(clean), n)
	}
	all = append(all, fill(t, o, 400, keys, 100)...)
	if n := compactCounted(t, e, o); n == 0 {
		t.Fatal("not compacted with most sealed bytes dirty")
	}
	o.close(t)
	if got, _ := e.reload(0); !reflect.DeepEqual(live(got), live(all)) || !reflect.DeepEqual(liveOffsets(got), liveOffsets(all)) {
		t.Fatal("live state changed")
	}
}

// Sealed segments with nothing superseded and no expired tombstone are not rewritten even the
// first time: there is nothing to drop.
func TestCompactionWithoutGarbageWritesNothing(t *testing.T) {
	e := compactEnv(t)
	o := e.open(0)
	o.load(t)
	fill(t, o, 200, func(i int) string { return fmt.Sprintf("unique-%d", i) }, 100)
	if b := segmentBases(t, e, 0); len(b) < 3 {
		t.Fatalf("want several sealed segments, have %v", b)
	}
	if n := compactCounted(t, e, o); n != 0 {
		t.Fatalf("sealed segments without garbage rewritten (%d mutating operations)", n)
	}
	o.close(t)
}

// holdCompaction makes the compaction's first operation matching hold block until the returned
// release is called; held is closed once it blocks.
func holdCompaction(e *env, match func(op Op, path string) bool) (held chan struct{}, release func()) {
	held = make(chan struct{})
	gate := make(chan struct{})
	var once, relOnce sync.Once
	e.mem.SetInject(func(op Op, p string) error {
		if match(op, p) {
			blocked := false
			once.Do(func() { blocked = true; close(held) })
			if blocked {
				<-gate
			}
		}
		return nil
	})
	return held, func() { relOnce.Do(func() { close(gate) }) }
}

// Appends (rolls included) go on and become durable while a compaction's I/O is held, and the
// swap afterwards keeps every one of them.
func TestAppendsDurableWhileCompactionIOHeld(t *testing.T) {
	e := compactEnv(t)
	o := e.open(0)
	o.load(t)
	all := history(t, e, o, 150, 21)
	held, release := holdCompaction(e, func(op Op, p string) bool { return op == OpSync && strings.HasSuffix(p, cleanedExt) })
	defer release()
	errc := make(chan error, 1)
	go func() { errc <- o.log.Compact() }()
	<-held
	before := len(segmentBasesAny(t, e, 0))
	all = append(all, fill(t, o, 60, func(i int) string { return fmt.Sprintf("during-%d", i%7) }, 200)...)
	if after := len(segmentBasesAny(t, e, 0)); after <= before {
		t.Fatalf("the appends during compaction did not roll a segment (%d -> %d files)", before, after)
	}
	release()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	o.close(t)
	if got, _ := e.reload(0); !reflect.DeepEqual(live(got), live(all)) || !reflect.DeepEqual(liveOffsets(got), liveOffsets(all)) {
		t.Fatal("live state differs after a compaction that ran beside appends")
	}
}

// segmentBasesAny lists the segment files, compaction's temporary ones included.
func segmentBasesAny(t *testing.T, e *env, shard int32) []string {
	t.Helper()
	names, err := e.mem.ReadDir(e.opts.Dir + "/" + shardDirName(shard))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Close stops a running compaction before its commit point and waits for it; the log is as it
// was and reopens with everything.
func TestCloseStopsRunningCompaction(t *testing.T) {
	e := compactEnv(t)
	o := e.open(0)
	o.load(t)
	all := history(t, e, o, 150, 23)
	before := segmentBases(t, e, 0)
	held, release := holdCompaction(e, func(op Op, p string) bool { return op == OpCreate && strings.HasSuffix(p, cleanedExt) })
	defer release()
	errc := make(chan error, 1)
	go func() { errc <- o.log.Compact() }()
	<-held
	closed := make(chan error, 1)
	go func() { closed <- o.log.Close() }()
	for !o.log.(*shardLog).stop.Load() { // Close has asked the compaction to stop
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while the compaction still ran", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the compaction still ran", err)
	default:
	}
	release()
	if err := <-errc; !errors.Is(err, log.ErrClosed) {
		t.Fatalf("compaction stopped by Close returned %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	e.mem.SetInject(nil)
	o.store.Close()
	if after := segmentBases(t, e, 0); !reflect.DeepEqual(after, before) {
		t.Fatalf("segments %v after a stopped compaction, want %v", after, before)
	}
	if got, _ := e.reload(0); !reflect.DeepEqual(live(got), live(all)) {
		t.Fatal("live state differs")
	}
}

// A crash at every step of a compaction that runs beside appends: a record appended (and
// reported durable) while the compaction was at that step survives, and so does everything else.
func TestCrashAtEveryCompactionStepWithAppendsBeside(t *testing.T) {
	base := compactEnv(t)
	o := base.open(0)
	o.load(t)
	all := history(t, base, o, 200, 42)
	o.close(t)
	dead := errors.New("process died")

	for k := 1; ; k++ {
		e := *base
		e.mem = base.mem.Clone()
		e.opts.FS = e.mem
		o := e.open(0)
		o.load(t)
		var ops atomic.Int32
		var crashed atomic.Bool
		pause, resume := make(chan struct{}), make(chan struct{})
		appending := atomic.Bool{}
		e.mem.SetInject(func(op Op, p string) error {
			if !op.Mutating() || appending.Load() {
				return nil
			}
			if crashed.Load() {
				return dead
			}
			if ops.Add(1) == int32(k) {
				close(pause) // the test appends now, then the process dies at this step
				<-resume
				crashed.Store(true)
				return dead
			}
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- o.log.Compact() }()
		var err error
		var during []entry
		select {
		case <-pause:
			appending.Store(true)
			during = fill(t, o, 3, func(i int) string { return fmt.Sprintf("during-%d-%d", k, i) }, 50)
			appending.Store(false)
			close(resume)
			err = <-errc
		case err = <-errc:
		}
		e.mem.SetInject(func(op Op, _ string) error {
			if op.Mutating() {
				return dead
			}
			return nil
		})
		o.store.Close()
		e.mem.SetInject(nil)
		e.mem.Crash(nil)
		want := append(append([]entry(nil), all...), during...)
		got, _ := e.reload(0)
		if !reflect.DeepEqual(live(got), live(want)) || !reflect.DeepEqual(liveOffsets(got), liveOffsets(want)) {
			t.Fatalf("crash at compaction step %d with appends beside (compact err %v): live state differs\nfiles:\n%s", k, err, e.mem)
		}
		if len(during) == 0 {
			if err != nil {
				t.Fatalf("compaction failed without a crash: %v", err)
			}
			t.Logf("compaction takes %d mutating operations; crashed at each with appends beside", k-1)
			return
		}
	}
}
