package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/records"
)

// counters is a test machine: named int64 values set by KindTest records.
type counters struct {
	vals    map[string]int64
	offsets []int64
}

func newCounters() *counters { return &counters{vals: map[string]int64{}} }

func setRecord(name string, v int64) log.Record {
	return log.Record{Key: records.NewKey(records.KindTest).String(name).Build(), Value: records.NewValue(0).Int64(v).Build()}
}

func delRecord(name string) log.Record {
	return log.Record{Key: records.NewKey(records.KindTest).String(name).Build()}
}

func (c *counters) Replay(offset int64, rec log.Record) error {
	r, err := records.ReadKey(rec.Key, records.KindTest)
	if err != nil {
		return err
	}
	name := r.String()
	if err := r.Err(); err != nil {
		return err
	}
	c.offsets = append(c.offsets, offset)
	if rec.Tombstone() {
		delete(c.vals, name)
		return nil
	}
	_, vr, err := records.ReadValue(rec.Value)
	if err != nil {
		return err
	}
	v := vr.Int64()
	if err := vr.Err(); err != nil {
		return err
	}
	c.vals[name] = v
	return nil
}

func set(name string, v int64) WriteOp[*counters] {
	return func(_ *Ctx[*counters], m *counters) Result {
		return Result{Records: []log.Record{setRecord(name, v)}, Response: m.vals[name]}
	}
}

func incr(name string) WriteOp[*counters] {
	return func(_ *Ctx[*counters], m *counters) Result {
		return Result{Records: []log.Record{setRecord(name, m.vals[name]+1)}, Response: m.vals[name] + 1}
	}
}

func get(name string) ReadOp[*counters] {
	return func(m *counters) (any, error) { return m.vals[name], nil }
}

func startShard(t *testing.T, b *memlog.Backend, onLoaded func(*Ctx[*counters], *counters)) *Shard[*counters] {
	t.Helper()
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b, OnLoaded: onLoaded})
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	waitState(t, s, StateActive)
	return s
}

func waitState(t *testing.T, s *Shard[*counters], want State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("shard state %s, want %s", s.State(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWriteAnsweredOnlyAfterDurable(t *testing.T) {
	b := memlog.New()
	s := startShard(t, b, nil)
	b.Hold(true)
	ctx := context.Background()

	answered := make(chan error, 1)
	go func() { _, err := s.Write(ctx, set("a", 5)); answered <- err }()
	for b.Pending(3) == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-answered:
		t.Fatal("write answered before its record was durable")
	case <-time.After(50 * time.Millisecond):
	}
	// A read sees the latest state, so its answer waits until that state is durable.
	read := make(chan any, 1)
	go func() { v, _ := s.Read(ctx, get("a")); read <- v }()
	select {
	case v := <-read:
		t.Fatalf("read answered %v while the record it saw was not durable", v)
	case <-time.After(50 * time.Millisecond):
	}
	// A write without records that read speculative state also waits.
	noRecords := make(chan any, 1)
	go func() {
		v, _ := s.Write(ctx, func(_ *Ctx[*counters], m *counters) Result { return Result{Response: m.vals["a"]} })
		noRecords <- v
	}()
	select {
	case <-noRecords:
		t.Fatal("record-less write answered while what it read was not durable")
	case <-time.After(50 * time.Millisecond):
	}
	b.Release(3)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if v := <-noRecords; v != int64(5) {
		t.Fatalf("record-less write saw %v", v)
	}
	if v := <-read; v != int64(5) {
		t.Fatalf("read answered %v once durable, want 5", v)
	}
	if v, _ := s.Read(ctx, get("a")); v != int64(5) {
		t.Fatalf("read-your-writes: got %v", v)
	}
}

func TestWritesSeeEachOtherBeforeDurability(t *testing.T) {
	b := memlog.New()
	s := startShard(t, b, nil)
	b.Hold(true)
	ctx := context.Background()
	results := make(chan any, 10)
	for i := 0; i < 10; i++ {
		go func() { v, _ := s.Write(ctx, incr("n")); results <- v }()
	}
	for b.Pending(3) < 10 {
		time.Sleep(time.Millisecond)
	}
	b.Release(3)
	seen := map[any]bool{}
	for i := 0; i < 10; i++ {
		seen[<-results] = true
	}
	if len(seen) != 10 {
		t.Fatalf("increments must chain on speculative state, got %v", seen)
	}
}

func TestReplayEquivalenceAfterRestart(t *testing.T) {
	b := memlog.New()
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
	s.Start()
	waitState(t, s, StateActive)
	rng := rand.New(rand.NewSource(1))
	ctx := context.Background()
	for i := 0; i < 500; i++ {
		name := fmt.Sprint("k", rng.Intn(20))
		var op WriteOp[*counters]
		switch rng.Intn(3) {
		case 0:
			op = set(name, rng.Int63n(1000))
		case 1:
			op = incr(name)
		default:
			op = func(_ *Ctx[*counters], _ *counters) Result { return Result{Records: []log.Record{delRecord(name)}} }
		}
		if _, err := s.Write(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.Read(ctx, func(m *counters) (any, error) { return maps.Clone(m.vals), nil })
	s.Close(ctx)

	again := startShard(t, b, nil)
	after, _ := again.Read(ctx, func(m *counters) (any, error) { return maps.Clone(m.vals), nil })
	if !maps.Equal(before.(map[string]int64), after.(map[string]int64)) {
		t.Fatalf("replayed state differs:\nbefore %v\nafter  %v", before, after)
	}
}

func TestLostWriteIsNeverAcknowledgedAndStateRollsBack(t *testing.T) {
	b := memlog.New()
	s := startShard(t, b, nil)
	ctx := context.Background()
	if _, err := s.Write(ctx, set("a", 1)); err != nil {
		t.Fatal(err)
	}
	b.Hold(true)
	answered := make(chan error, 1)
	go func() { _, err := s.Write(ctx, set("a", 2)); answered <- err }()
	for b.Pending(3) == 0 {
		time.Sleep(time.Millisecond)
	}
	b.Lose(3, errors.New("no space left on device"))
	if err := <-answered; !errors.Is(err, ErrNotDurable) {
		t.Fatalf("lost write answered %v, want ErrNotDurable", err)
	}
	b.Hold(false)
	waitState(t, s, StateActive)
	// The speculative 2 is gone: the next increment builds on the durable 1.
	v, err := s.Write(ctx, incr("a"))
	if err != nil || v != int64(2) {
		t.Fatalf("after rollback incr gave %v %v, want 2", v, err)
	}
}

func TestFatalStorageErrorFailsShard(t *testing.T) {
	b := memlog.New()
	s := startShard(t, b, nil)
	ctx := context.Background()
	b.Hold(true)
	answered := make(chan error, 1)
	go func() { _, err := s.Write(ctx, set("a", 2)); answered <- err }()
	for b.Pending(3) == 0 {
		time.Sleep(time.Millisecond)
	}
	b.Fail(3, errors.New("fsync: input/output error"))
	if err := <-answered; err == nil {
		t.Fatal("write acknowledged although its fsync failed")
	}
	waitState(t, s, StateFailed)
	if _, err := s.Read(ctx, get("a")); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("read on failed shard: %v", err)
	}
	if _, err := s.Write(ctx, set("b", 1)); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("write on failed shard: %v", err)
	}
}

func TestLoadingShardRefusesWithLoadInProgress(t *testing.T) {
	b := memlog.New()
	b.LoadGate = make(chan struct{})
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
	s.Start()
	t.Cleanup(func() { s.Close(context.Background()) })
	if _, err := s.Write(context.Background(), set("a", 1)); !errors.Is(err, ErrLoading) {
		t.Fatalf("write while loading: %v", err)
	}
	close(b.LoadGate)
	waitState(t, s, StateActive)
	if _, err := s.Write(context.Background(), set("a", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestFullInboxFailsFast(t *testing.T) {
	b := memlog.New()
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b, InboxSize: 2})
	s.Start()
	waitState(t, s, StateActive)
	t.Cleanup(func() { s.Close(context.Background()) })
	stall := make(chan struct{})
	go s.Read(context.Background(), func(*counters) (any, error) { <-stall; return nil, nil })
	time.Sleep(20 * time.Millisecond)
	var overloaded bool
	for i := 0; i < 10 && !overloaded; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, err := s.Read(ctx, get("a"))
		cancel()
		overloaded = errors.Is(err, ErrOverloaded)
	}
	close(stall)
	if !overloaded {
		t.Fatal("a full inbox never refused an operation")
	}
}

func TestTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
		s.Start()
		synctest.Wait()
		ctx := context.Background()
		schedule := func(key string, d time.Duration, op WriteOp[*counters]) {
			s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result { c.Schedule(key, d, op); return Result{} })
		}
		schedule("fire", time.Second, set("fired", 1))
		schedule("cancelled", time.Second, set("cancelled", 1))
		schedule("replaced", time.Second, set("replaced", 1))
		schedule("replaced", 3*time.Second, set("replaced", 2))
		s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result { c.Cancel("cancelled"); return Result{} })

		time.Sleep(2 * time.Second)
		synctest.Wait()
		vals, _ := s.Read(ctx, func(m *counters) (any, error) { return maps.Clone(m.vals), nil })
		if got := vals.(map[string]int64); got["fired"] != 1 || got["cancelled"] != 0 || got["replaced"] != 0 {
			t.Fatalf("after 2s: %v", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if v, _ := s.Read(ctx, get("replaced")); v != int64(2) {
			t.Fatalf("replaced timer ran %v, want only the replacement (2)", v)
		}
		s.Close(ctx)
	})
}

// A timer pushed back again and again (a session timer reset by every heartbeat) runs once, at
// its last deadline, never at an earlier one; one brought forward runs at the earlier time.
// Pushing back only records the deadline, so the per-heartbeat cost is no timer work.
func TestTimersPushedBackOrBroughtForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
		s.Start()
		synctest.Wait()
		ctx := context.Background()
		schedule := func(key string, d time.Duration, op WriteOp[*counters]) {
			s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result { c.Schedule(key, d, op); return Result{} })
		}
		read := func(key string) int64 {
			synctest.Wait()
			v, _ := s.Read(ctx, get(key))
			return v.(int64)
		}
		schedule("forward", 10*time.Second, set("forward", 1))
		for i := 0; i < 10; i++ { // pushed back by 1 s every 500 ms for 5 s
			schedule("session", time.Second, set("session", int64(i+1)))
			time.Sleep(500 * time.Millisecond)
		}
		schedule("forward", 500*time.Millisecond, set("forward", 2))
		if v := read("session"); v != 0 {
			t.Fatalf("the session timer ran (%d) while it was being pushed back", v)
		}
		time.Sleep(600 * time.Millisecond) // 5.6 s: the last push set 5.5 s
		if v := read("session"); v != 10 {
			t.Fatalf("after its last deadline the session timer ran with %d, want the last op (10)", v)
		}
		if v := read("forward"); v != 2 {
			t.Fatalf("a timer brought forward ran %d at its new deadline, want 2", v)
		}
		time.Sleep(10 * time.Second)
		if v := read("forward"); v != 2 {
			t.Fatalf("a timer brought forward ran again at its old deadline (%d)", v)
		}
		s.Close(ctx)
	})
}

// Extend moves an armed timer (later or earlier) and keeps its operation; with nothing armed
// it arms nothing and says so, so the caller schedules the operation itself.
func TestTimerExtendKeepsOpAndMovesDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: memlog.New()})
		s.Start()
		synctest.Wait()
		ctx := context.Background()
		extend := func(key string, d time.Duration) bool {
			v, _ := s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result { return Result{Response: c.Extend(key, d)} })
			return v.(bool)
		}
		expect := func(key string, want int64, when string) {
			t.Helper()
			synctest.Wait()
			if v, _ := s.Read(ctx, get(key)); v != want {
				t.Fatalf("%s: timer %q ran to %v, want %d", when, key, v, want)
			}
		}
		if extend("none", time.Second) {
			t.Fatal("Extend reported a timer that was never armed")
		}
		s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
			c.Schedule("later", time.Second, set("later", 1))
			c.Schedule("sooner", 10*time.Second, set("sooner", 1))
			return Result{}
		})
		for i := 0; i < 4; i++ { // pushed back by 1 s every 500 ms
			time.Sleep(500 * time.Millisecond)
			if !extend("later", time.Second) {
				t.Fatal("Extend missed an armed timer")
			}
		}
		if !extend("sooner", time.Second) {
			t.Fatal("Extend missed an armed timer")
		}
		expect("later", 0, "before its new deadline (its old one passed)")
		time.Sleep(1100 * time.Millisecond) // 3.1 s: the last extensions set 3 s
		expect("later", 1, "after its new deadline, with its own op")
		expect("sooner", 1, "brought forward, at its new deadline")
		time.Sleep(10 * time.Second)
		expect("sooner", 1, "brought forward, after its old deadline")
		if extend("later", time.Second) {
			t.Fatal("Extend reported a timer that already ran")
		}
		s.Close(ctx)
	})
}

func TestTimersDroppedOnReloadAndRearmedByOnLoaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		onLoaded := func(c *Ctx[*counters], m *counters) {
			if m.vals["armed"] == 1 {
				c.Schedule("rearmed", time.Second, set("rearmed", 1))
			}
		}
		s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b, OnLoaded: onLoaded})
		s.Start()
		synctest.Wait()
		ctx := context.Background()
		s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
			c.Schedule("stale", time.Second, set("stale", 1))
			return Result{Records: []log.Record{setRecord("armed", 1)}}
		})
		synctest.Wait()
		// A recoverable storage error reloads the shard: the old timer must not act.
		b.Hold(true)
		go s.Write(ctx, set("x", 1))
		synctest.Wait()
		b.Lose(3, errors.New("disk full"))
		b.Hold(false)
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		vals, _ := s.Read(ctx, func(m *counters) (any, error) { return maps.Clone(m.vals), nil })
		if got := vals.(map[string]int64); got["stale"] != 0 || got["rearmed"] != 1 {
			t.Fatalf("after reload: %v (stale timer must not run, OnLoaded's must)", got)
		}
		s.Close(ctx)
	})
}

func TestAsyncWorkReentersAsWrite(t *testing.T) {
	b := memlog.New()
	s := startShard(t, b, nil)
	ctx := context.Background()
	release := make(chan struct{})
	s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
		c.Go(func(context.Context) WriteOp[*counters] { <-release; return set("async", 7) })
		return Result{}
	})
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, _ := s.Read(ctx, get("async")); v == int64(7) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("async result never applied")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPromiseResolvedByLaterOperation(t *testing.T) {
	b := memlog.New()
	s := startShard(t, b, nil)
	ctx := context.Background()
	var p *Promise
	got := make(chan any, 1)
	created := make(chan struct{})
	go func() {
		v, _ := s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
			p = c.NewPromise()
			close(created)
			return Result{Response: p}
		})
		got <- v
	}()
	<-created
	s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
		c.AfterDurable(func() { c.Resolve(p, "joined", nil) })
		return Result{Records: []log.Record{setRecord("gen", 1)}}
	})
	if v := <-got; v != "joined" {
		t.Fatalf("promise gave %v", v)
	}
}

func TestPromiseFailsWhenShardReloads(t *testing.T) {
	b := memlog.New()
	s := startShard(t, b, nil)
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result { return Result{Response: c.NewPromise()} })
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	b.Hold(true)
	go s.Write(ctx, set("x", 1))
	for b.Pending(3) == 0 {
		time.Sleep(time.Millisecond)
	}
	b.Lose(3, errors.New("disk full"))
	if err := <-errc; !errors.Is(err, ErrNotDurable) && !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("parked request after reload: %v", err)
	}
}

func TestCloseWaitsForDurability(t *testing.T) {
	b := memlog.New()
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
	s.Start()
	waitState(t, s, StateActive)
	b.Hold(true)
	answered := make(chan error, 1)
	go func() { _, err := s.Write(context.Background(), set("a", 1)); answered <- err }()
	for b.Pending(3) == 0 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { s.Close(context.Background()); close(closed) }()
	time.Sleep(20 * time.Millisecond)
	b.Release(3)
	<-closed
	if err := <-answered; err != nil {
		t.Fatalf("write durable before close completed: %v", err)
	}
	if _, err := s.Write(context.Background(), set("b", 1)); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("write after close: %v", err)
	}
}

func TestOversizeBatchFailsOnlyItsOperation(t *testing.T) {
	b := memlog.New()
	b.MaxBatchRecords = 2
	s := startShard(t, b, nil)
	ctx := context.Background()
	if _, err := s.Write(ctx, set("a", 1)); err != nil {
		t.Fatal(err)
	}
	big := func(_ *Ctx[*counters], _ *counters) Result {
		return Result{Records: []log.Record{setRecord("a", 9), setRecord("b", 9), setRecord("c", 9)}}
	}
	if _, err := s.Write(ctx, big); !errors.Is(err, log.ErrBatchTooLarge) || !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversize batch: %v, want ErrRecordTooLarge wrapping ErrBatchTooLarge", err)
	}
	// An operation that parks its response (a JoinGroup) and is refused leaves no promise behind.
	parked := func(c *Ctx[*counters], _ *counters) Result {
		p := c.NewPromise()
		return Result{Records: []log.Record{setRecord("a", 9), setRecord("b", 9), setRecord("c", 9)}, Response: p}
	}
	if _, err := s.Write(ctx, parked); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversize parked op: %v", err)
	}
	if n, _ := s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result { return Result{Response: len(c.s.promises)} }); n != 0 {
		t.Fatalf("%v promises left by refused operations", n)
	}
	if s.State() != StateActive {
		t.Fatalf("shard %s after an oversize batch; it must keep serving", s.State())
	}
	// Nothing of the refused batch leaked into speculative state.
	if v, err := s.Write(ctx, incr("a")); err != nil || v != int64(2) {
		t.Fatalf("incr after refusal: %v %v, want 2", v, err)
	}
}

// Defect 5 (issue 10): a compaction's I/O runs off the shard goroutine. While one is held inside
// the log, the shard still answers reads and writes; at most one compaction runs at a time; a
// close waits for the running one.
func TestShardServesWhileCompactionIsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		release := make(chan struct{})
		var releaseOnce sync.Once
		defer releaseOnce.Do(func() { close(release) }) // a failed assertion must not strand the hook
		var running, total int
		b.CompactHook = func(int32) {
			running++ // only ever one at a time, so no lock: -race reports any overlap
			total++
			<-release
			running--
		}
		s := New(Options[*counters]{Shard: 1, New: newCounters, Backend: b, CompactEvery: time.Second})
		s.Start()
		synctest.Wait()
		time.Sleep(1500 * time.Millisecond) // the first tick starts a compaction, which blocks
		synctest.Wait()
		if total != 1 {
			t.Fatalf("%d compactions started, want 1", total)
		}
		// Several more ticks pass while the compaction is held: none starts another.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := 0; i < 5; i++ {
			if _, err := s.Write(ctx, incr("a")); err != nil {
				t.Fatalf("write while a compaction is held: %v", err)
			}
			if v, err := s.Read(ctx, get("a")); err != nil || v != int64(i+1) {
				t.Fatalf("read while a compaction is held: %v %v", v, err)
			}
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if total != 1 {
			t.Fatalf("%d compactions started while one was running, want 1", total)
		}
		releaseOnce.Do(func() { close(release) })
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if total < 2 {
			t.Fatalf("no compaction after the held one finished (%d)", total)
		}
		s.Close(context.Background())
	})
}

// readsKey answers a counter without writing, naming the one key it read.
func readsKey(name string) WriteOp[*counters] {
	return func(c *Ctx[*counters], m *counters) Result {
		c.Reads(setRecord(name, 0).Key)
		return Result{Response: m.vals[name]}
	}
}

// A write op that appends nothing and names what it read waits for those keys only: not
// behind another key's fsync, but still until its own key's pending record is durable
// (read-your-writes), and in offset order with the writes it waits beside.
func TestRecordlessWriteWaitsOnlyForKeysItRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		s := startShard(t, b, nil)
		b.Hold(true)
		ctx := context.Background()
		async := func(op WriteOp[*counters]) <-chan any {
			ch := make(chan any, 1)
			go func() {
				v, err := s.Write(ctx, op)
				if err != nil {
					v = err
				}
				ch <- v
			}()
			synctest.Wait()
			return ch
		}
		answered := func(ch <-chan any) (any, bool) {
			synctest.Wait()
			select {
			case v := <-ch:
				return v, true
			default:
				return nil, false
			}
		}
		setA := async(set("a", 1)) // offset 0, its own fsync round
		setB := async(set("b", 2)) // offset 1, the next round
		if v, ok := answered(async(readsKey("c"))); !ok || v != int64(0) {
			t.Fatalf("read of an untouched key waited for other keys' fsyncs (answered %v, %v)", ok, v)
		}
		readA := async(readsKey("a"))
		readAll := async(func(_ *Ctx[*counters], m *counters) Result { return Result{Response: m.vals["c"]} })
		if _, ok := answered(readA); ok {
			t.Fatal("read of a answered before a's pending record was durable")
		}
		b.ReleaseOldest(3) // a durable, b still pending
		if v, ok := answered(setA); !ok || v != int64(0) {
			t.Fatalf("write of a: answered %v, %v", ok, v)
		}
		if v, ok := answered(readA); !ok || v != int64(1) {
			t.Fatalf("read of a once a is durable: answered %v, %v", ok, v)
		}
		if _, ok := answered(readAll); ok {
			t.Fatal("an op naming no keys answered before everything appended before it was durable")
		}
		if _, ok := answered(setB); ok {
			t.Fatal("write of b answered before durable")
		}
		b.Release(3)
		if _, ok := answered(setB); !ok {
			t.Fatal("write of b not answered once durable")
		}
		if _, ok := answered(readAll); !ok {
			t.Fatal("op naming no keys not answered once everything was durable")
		}
	})
}

// The console shows when a shard's log was last compacted: nothing before the first compaction
// has finished, then the (fake) time it finished.
func TestLastCompactionIsSetWhenACompactionSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		release := make(chan struct{})
		b.CompactHook = func(int32) { <-release }
		s := New(Options[*counters]{Shard: 1, New: newCounters, Backend: b, CompactEvery: time.Second})
		s.Start()
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := s.LastCompaction(); !got.IsZero() {
			t.Fatalf("LastCompaction %v while the first compaction runs, want zero", got)
		}
		close(release)
		synctest.Wait()
		if got, want := s.LastCompaction(), time.Now(); !got.Equal(want) {
			t.Fatalf("LastCompaction %v, want %v", got, want)
		}
		s.Close(context.Background())
	})
}

// scopeOfName is a test Options.Scope: a counter "g/x" belongs to scope "g".
func scopeOfName(key []byte) []byte {
	r, err := records.ReadKey(key, records.KindTest)
	if err != nil {
		return nil
	}
	name := r.String()
	if i := strings.IndexByte(name, '/'); i > 0 {
		return []byte(name[:i])
	}
	return nil
}

// readsScope answers a counter without writing, naming the scope of what it read.
func readsScope(scope, name string) WriteOp[*counters] {
	return func(c *Ctx[*counters], m *counters) Result {
		c.ReadsScope([]byte(scope))
		return Result{Response: m.vals[name]}
	}
}

// A scope stands for every key in it: an op naming scope g waits for a pending g/b though it
// read only g/a, and not for another scope's records. A shard without
// Options.Scope cannot tell, so such an op waits for everything.
func TestRecordlessWriteWaitsForItsScope(t *testing.T) {
	for _, scoped := range []bool{true, false} {
		t.Run(fmt.Sprintf("scoped=%v", scoped), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := memlog.New()
				opts := Options[*counters]{Shard: 3, New: newCounters, Backend: b}
				if scoped {
					opts.Scope = scopeOfName
				}
				s := New(opts)
				s.Start()
				defer s.Close(context.Background())
				synctest.Wait()
				b.Hold(true)
				defer b.Hold(false)
				defer b.Release(3)
				async := func(op WriteOp[*counters]) <-chan any {
					ch := make(chan any, 1)
					go func() { v, _ := s.Write(context.Background(), op); ch <- v }()
					synctest.Wait()
					return ch
				}
				answered := func(ch <-chan any) bool {
					synctest.Wait()
					select {
					case <-ch:
						return true
					default:
						return false
					}
				}
				async(set("h/x", 1)) // offset 0: another scope
				if got := answered(async(readsScope("g", "g/a"))); got != scoped {
					t.Fatalf("op naming scope g answered %v beside another scope's pending record, want %v", got, scoped)
				}
				b.Release(3)
				async(set("g/b", 2)) // offset 1: a key of g the op did not name
				ga := async(readsScope("g", "g/a"))
				if answered(ga) {
					t.Fatal("op naming scope g answered before g/b's pending record was durable")
				}
				b.Release(3)
				if !answered(ga) {
					t.Fatal("op naming scope g not answered once g/b was durable")
				}
			})
		})
	}
}
