package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// bomb is the counters machine with a bug: replaying the key "boom" panics.
type bomb struct{ *counters }

func newBomb() *bomb { return &bomb{newCounters()} }

func (b *bomb) Replay(offset int64, rec log.Record) error {
	r, err := records.ReadKey(rec.Key, records.KindTest)
	if err == nil && r.String() == "boom" {
		panic("replayed the bad record")
	}
	return b.counters.Replay(offset, rec)
}

func bset(name string, v int64) WriteOp[*bomb] {
	return func(_ *Ctx[*bomb], _ *bomb) Result { return Result{Records: []log.Record{setRecord(name, v)}} }
}

func bget(name string) ReadOp[*bomb] {
	return func(m *bomb) (any, error) { return m.vals[name], nil }
}

type panicRig struct {
	b       *memlog.Backend
	reg     *prometheus.Registry
	logs    *observer.ObservedLogs
	victim  *Shard[*bomb] // shard 3
	bystand *Shard[*bomb] // shard 4, same backend, metrics and logger
}

func newPanicRig(t *testing.T) *panicRig {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	r := &panicRig{b: memlog.New(), reg: prometheus.NewRegistry(), logs: logs}
	m := NewMetrics(r.reg)
	start := func(id int32) *Shard[*bomb] {
		s := New(Options[*bomb]{Shard: id, New: newBomb, Backend: r.b, Logger: zap.New(core), Metrics: m})
		s.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Close(ctx)
		})
		return s
	}
	r.victim, r.bystand = start(3), start(4)
	waitBombState(t, r.victim, StateActive)
	waitBombState(t, r.bystand, StateActive)
	return r
}

func waitBombState(t *testing.T, s *Shard[*bomb], want State) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("shard state %s, want %s", s.State(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkFailed asserts what an operator and a client see of the shard that panicked, and that
// its neighbour still serves.
func (r *panicRig) checkFailed(t *testing.T, during string, offset int64) {
	t.Helper()
	ctx := context.Background()
	waitBombState(t, r.victim, StateFailed)
	if _, err := r.victim.Read(ctx, bget("a")); !errors.Is(err, ErrFailed) {
		t.Errorf("read on the failed shard: %v, want ErrFailed", err)
	}
	if _, err := r.victim.Write(ctx, bset("a", 9)); !errors.Is(err, ErrFailed) {
		t.Errorf("write on the failed shard: %v, want ErrFailed", err)
	}
	if _, err := r.bystand.Write(ctx, bset("a", 2)); err != nil {
		t.Errorf("the other shard stopped serving writes: %v", err)
	}
	if v, err := r.bystand.Read(ctx, bget("a")); err != nil || v != int64(2) {
		t.Errorf("the other shard read %v %v, want 2", v, err)
	}
	if got := gatheredAll(t, r.reg, "coordinatord_shard_panics_total", "shard", "3"); got != 1 {
		t.Errorf("coordinatord_shard_panics_total{shard=3} = %v, want 1", got)
	}
	if got := gatheredAll(t, r.reg, "coordinatord_shard_failures_total", "kind", "group"); got != 1 {
		t.Errorf("coordinatord_shard_failures_total = %v, want 1", got)
	}
	if got := gatheredAll(t, r.reg, "coordinatord_shard_state", "shard", "3"); got != float64(StateFailed) {
		t.Errorf("coordinatord_shard_state{shard=3} = %v, want %d", got, StateFailed)
	}
	lines := r.logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("shard FAILED").All()
	if len(lines) != 1 {
		t.Fatalf("%d ERROR lines for the failure, want 1: %v", len(lines), lines)
	}
	f := lines[0].ContextMap()
	if f["shard"] != int32(3) {
		t.Errorf("ERROR line names shard %v, want 3", f["shard"])
	}
	if !strings.Contains(f["error"].(string), "panic in "+during) {
		t.Errorf("ERROR line error %q does not say it panicked in %s", f["error"], during)
	}
	if f["offset"] != offset {
		t.Errorf("ERROR line offset %v, want %d", f["offset"], offset)
	}
	if st, _ := f["stack"].(string); !strings.Contains(st, "panic_test.go") {
		t.Errorf("ERROR line has no stack through the panicking code: %q", st)
	}
}

// Defect 2 (issue 10): before the recover in the shard loop, each of these panics ended the
// test binary. Now each fails only its shard, fails its callers and parked promises with
// ErrFailed (NOT_COORDINATOR), and is logged and counted.
func TestPanicFailsOnlyItsShard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during string
		// trigger makes shard 3 panic; the error is what its caller got, if it is the panicking
		// operation's caller.
		trigger func(s *Shard[*bomb]) error
		offset  int64 // the log offset the ERROR line names (shard 3 holds "a" at 0 before)
		later   bool  // the triggering operation succeeds; the panic comes after it
	}{
		{"write operation", "write operation", func(s *Shard[*bomb]) error {
			_, err := s.Write(context.Background(), func(*Ctx[*bomb], *bomb) Result { panic("bug in a write op") })
			return err
		}, 0, false},
		{"read operation", "read operation", func(s *Shard[*bomb]) error {
			_, err := s.Read(context.Background(), func(*bomb) (any, error) { panic("bug in a read op") })
			return err
		}, 0, false},
		{"replay of a produced record", "write operation", func(s *Shard[*bomb]) error {
			_, err := s.Write(context.Background(), bset("boom", 1))
			return err
		}, 1, false},
		{"after durable", "durability report", func(s *Shard[*bomb]) error {
			_, err := s.Write(context.Background(), func(c *Ctx[*bomb], _ *bomb) Result {
				c.AfterDurable(func() { panic("bug after durable") })
				return Result{Records: []log.Record{setRecord("b", 1)}}
			})
			return err
		}, 1, false},
		{"timer operation", "timer operation", func(s *Shard[*bomb]) error {
			_, err := s.Write(context.Background(), func(c *Ctx[*bomb], _ *bomb) Result {
				c.Schedule("t", time.Millisecond, func(*Ctx[*bomb], *bomb) Result { panic("bug in a timer op") })
				return Result{}
			})
			return err
		}, 0, true},
		{"Go work", "Ctx.Go work", func(s *Shard[*bomb]) error {
			_, err := s.Write(context.Background(), func(c *Ctx[*bomb], _ *bomb) Result {
				c.Go(func(context.Context) WriteOp[*bomb] { panic("bug in async work") })
				return Result{}
			})
			return err
		}, 0, true},
		{"Go feedback operation", "write operation", func(s *Shard[*bomb]) error {
			_, err := s.Write(context.Background(), func(c *Ctx[*bomb], _ *bomb) Result {
				c.Go(func(context.Context) WriteOp[*bomb] {
					return func(*Ctx[*bomb], *bomb) Result { panic("bug in a fed-back op") }
				})
				return Result{}
			})
			return err
		}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPanicRig(t)
			ctx := context.Background()
			if _, err := r.victim.Write(ctx, bset("a", 1)); err != nil {
				t.Fatal(err)
			}
			// A member parked on a promise (a JoinGroup waiting for its rebalance).
			parked := make(chan error, 1)
			created := make(chan struct{})
			go func() {
				_, err := r.victim.Write(ctx, func(c *Ctx[*bomb], _ *bomb) Result {
					defer close(created)
					return Result{Response: c.NewPromise()}
				})
				parked <- err
			}()
			<-created
			err := tc.trigger(r.victim)
			if tc.later && err != nil {
				t.Fatalf("scheduling operation: %v", err)
			}
			if !tc.later && !errors.Is(err, ErrFailed) {
				t.Fatalf("the panicking operation's caller got %v, want ErrFailed", err)
			}
			select {
			case err := <-parked:
				if !errors.Is(err, ErrFailed) {
					t.Errorf("parked promise failed with %v, want ErrFailed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("parked promise never failed")
			}
			r.checkFailed(t, tc.during, tc.offset)
		})
	}
}

// A record that makes replay panic during a load fails the shard at load, naming the record's
// offset; the process and the other shards live on.
func TestPanicDuringLoadFailsOnlyItsShard(t *testing.T) {
	b := memlog.New()
	seed := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
	seed.Start()
	waitState(t, seed, StateActive)
	ctx := context.Background()
	for _, op := range []WriteOp[*counters]{set("a", 1), set("b", 1), set("boom", 1)} {
		if _, err := seed.Write(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	seed.Close(ctx)

	core, logs := observer.New(zapcore.InfoLevel)
	r := &panicRig{b: b, reg: prometheus.NewRegistry(), logs: logs}
	m := NewMetrics(r.reg)
	for id, dst := range map[int32]**Shard[*bomb]{3: &r.victim, 4: &r.bystand} {
		s := New(Options[*bomb]{Shard: id, New: newBomb, Backend: b, Logger: zap.New(core), Metrics: m})
		s.Start()
		t.Cleanup(func() { s.Close(context.Background()) })
		*dst = s
	}
	waitBombState(t, r.bystand, StateActive)
	r.checkFailed(t, "load", 2)
	if got := gatheredAll(t, r.reg, "coordinatord_shard_loads_total", "result", "ok"); got != 1 {
		t.Errorf("loads ok = %v, want 1 (only the bystander)", got)
	}
	if got := gatheredAll(t, r.reg, "coordinatord_shard_loads_total", "result", "failed"); got != 1 {
		t.Errorf("loads failed = %v, want 1", got)
	}
}

// A replay that returns an error (a malformed record) fails the shard the same way, without a
// panic, and its callers get ErrFailed too.
func TestReplayErrorDuringLoadFailsShard(t *testing.T) {
	b := memlog.New()
	durable := make(chan int64, 1)
	l, err := b.Open(3, log.Callbacks{Durable: func(o int64) { durable <- o }, Failed: func(error) {}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Load(func(int64, log.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	bad := log.Record{Key: records.NewKey(records.KindTest).String("x").Build(), Value: []byte{0}}
	if _, err := l.Append([]log.Record{bad}); err != nil {
		t.Fatal(err)
	}
	<-durable
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
	s.Start()
	t.Cleanup(func() { s.Close(context.Background()) })
	waitState(t, s, StateFailed)
	if _, err := s.Read(context.Background(), get("x")); !errors.Is(err, ErrFailed) {
		t.Fatalf("read on a shard whose log does not replay: %v, want ErrFailed", err)
	}
}

// A FAILED shard that its owner reloads (log.backend=kafka: the membership, at the next
// heartbeat) says so; only a shard nothing reloads asks for a restart. An operator told to
// restart a node whose shard the membership was about to reload would move every shard it holds.
func TestFailedLineSaysWhoReloadsTheShard(t *testing.T) {
	b := memlog.New()
	seed := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
	seed.Start()
	waitState(t, seed, StateActive)
	if _, err := seed.Write(context.Background(), set("boom", 1)); err != nil {
		t.Fatal(err)
	}
	seed.Close(context.Background())
	for reloaded, want := range map[bool]string{
		false: "shard FAILED: its groups get NOT_COORDINATOR until the process is restarted",
		true:  "shard FAILED: its groups get NOT_COORDINATOR until this node loads it again, at its next heartbeat to the upstream group if the shard is still assigned to it",
	} {
		core, logs := observer.New(zapcore.ErrorLevel)
		s := New(Options[*bomb]{Shard: 3, New: newBomb, Backend: b, Logger: zap.New(core), ReloadedByOwner: reloaded})
		s.Start()
		waitBombState(t, s, StateFailed)
		s.Close(context.Background())
		if n := logs.FilterMessage(want).Len(); n != 1 {
			t.Errorf("ReloadedByOwner=%v: %d lines %q; logged %v", reloaded, n, want, logs.All())
		}
	}
}
