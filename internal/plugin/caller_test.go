package plugin

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// fake is a controllable plugin: per-call behaviour by group.
type fake struct {
	mu      sync.Mutex
	set     func(ctx context.Context, group string) error
	get     func(ctx context.Context, group string) (*topologyplugin.Description, error)
	del     func(ctx context.Context, group string) error
	calls   atomic.Int32
	closed  atomic.Int32
	running atomic.Int32
	maxRun  atomic.Int32
}

func (f *fake) enter() func() {
	f.calls.Add(1)
	n := f.running.Add(1)
	for {
		m := f.maxRun.Load()
		if n <= m || f.maxRun.CompareAndSwap(m, n) {
			break
		}
	}
	return func() { f.running.Add(-1) }
}

func (f *fake) Set(ctx context.Context, group string, epoch int32, d *topologyplugin.Description) error {
	defer f.enter()()
	if f.set != nil {
		return f.set(ctx, group)
	}
	return nil
}

func (f *fake) Get(ctx context.Context, group string, epoch int32) (*topologyplugin.Description, error) {
	defer f.enter()()
	if f.get != nil {
		return f.get(ctx, group)
	}
	return desc(group), nil
}

func (f *fake) Delete(ctx context.Context, group string) error {
	defer f.enter()()
	if f.del != nil {
		return f.del(ctx, group)
	}
	return nil
}

func (f *fake) Close() error { f.closed.Add(1); return nil }

func newTestCaller(t *testing.T, p topologyplugin.Plugin, timeout time.Duration, pool int) (*Caller, *prometheus.Registry, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	c := NewCaller(Options{Plugin: p, Name: "fake", CallTimeout: timeout, MaxConcurrency: pool,
		Backoff: BackoffConfig{Initial: 30 * time.Second, Max: time.Hour, Jitter: 0},
		Logger:  zap.New(core)}, reg)
	return c, reg, logs
}

func callErr(t *testing.T, err error) *CallError {
	t.Helper()
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *CallError, got %v", err)
	}
	return ce
}

func counter(t *testing.T, c *Caller, method Method, result, kind string) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.metrics.vec(method).WithLabelValues(result, kind).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Spec §9.28 / issue: a plugin that hangs is cut off at the call timeout as a transient failure;
// its workers stay occupied (at most the pool size), other callers are not delayed while the
// pool has room, and wait at most their own timeout when it has none.
func TestSpec9_28HangingPluginIsCutOffAtTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		f := &fake{set: func(ctx context.Context, group string) error {
			if strings.HasPrefix(group, "hang") {
				<-release // ignores ctx on purpose
			}
			return nil
		}}
		c, _, logs := newTestCaller(t, f, time.Second, 3)
		ctx := context.Background()

		var wg sync.WaitGroup
		for _, g := range []string{"hang-1", "hang-2"} {
			wg.Go(func() {
				start := time.Now()
				err := c.Set(ctx, g, 1, desc("x"))
				ce := callErr(t, err)
				if ce.Cause != CauseTimeout || ce.Kind != topologyplugin.KindTransient || !topologyplugin.IsTransient(err) {
					t.Errorf("%s: want a transient timeout, got %v", g, err)
				}
				if d := time.Since(start); d != time.Second {
					t.Errorf("%s: answered after %v, want exactly the 1s timeout", g, d)
				}
			})
		}
		synctest.Wait() // both hung calls hold a worker

		start := time.Now()
		if err := c.Set(ctx, "fast", 1, desc("x")); err != nil {
			t.Fatalf("a free worker remains; the call must succeed: %v", err)
		}
		if time.Since(start) != 0 {
			t.Fatal("a call must not wait for hung calls while the pool has room")
		}
		wg.Wait() // the hung calls have been answered at their deadline

		// Occupy the last worker too: now a call waits for a worker and times out itself.
		wg.Go(func() { c.Set(ctx, "hang-3", 1, desc("x")) })
		synctest.Wait()
		start = time.Now()
		_, err := c.Get(ctx, "other", 1)
		ce := callErr(t, err)
		if ce.Cause != CauseTimeout || !strings.Contains(ce.Err.Error(), "free plugin worker") || time.Since(start) > 2*time.Second+time.Millisecond {
			t.Fatalf("want a timeout waiting for a worker, got %v after %v", err, time.Since(start))
		}
		if f.maxRun.Load() > 3 {
			t.Fatalf("%d plugin calls ran at once, pool is 3", f.maxRun.Load())
		}
		wg.Wait()

		close(release)
		synctest.Wait()
		if _, err := c.Get(ctx, "other", 1); err != nil {
			t.Fatalf("after the plugin recovered: %v", err)
		}
		if n := counter(t, c, MethodSet, "error", "timeout"); n != 3 {
			t.Fatalf("set timeouts counted %v, want 3", n)
		}
		if logs.FilterMessageSnippet("timed out").Len() == 0 {
			t.Fatal("a timeout must be logged")
		}
		// A timed-out Set counts as transient for the back-off.
		if _, attempts, _, ok := c.backoff.Entry("hang-1"); !ok || attempts != 0 {
			t.Fatal("a transient Set failure must arm the back-off")
		}
		c.Close()
	})
}

// A plugin that honours its context and returns ctx.Err() at the deadline is a timeout too.
func TestCallerTimeoutHonouredByPlugin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{del: func(ctx context.Context, group string) error { <-ctx.Done(); return ctx.Err() }}
		c, _, _ := newTestCaller(t, f, 2*time.Second, 4)
		defer c.Close()
		err := c.Delete(context.Background(), "g")
		if ce := callErr(t, err); ce.Cause != CauseTimeout || ce.Kind != topologyplugin.KindTransient {
			t.Fatalf("want a transient timeout, got %v", err)
		}
	})
}

// Spec §9.27: a panicking plugin is a transient failure with the generic client message and an
// ERROR log with the stack; the process keeps running and the worker is released.
func TestSpec9_27PanickingPluginIsTransient(t *testing.T) {
	f := &fake{set: func(ctx context.Context, group string) error { panic("plugin bug") }}
	c, _, logs := newTestCaller(t, f, time.Second, 1)
	defer c.Close()
	for i := 0; i < 3; i++ { // pool of 1: a leaked worker would make the second call time out
		err := c.Set(context.Background(), "g", 5, desc("x"))
		ce := callErr(t, err)
		if ce.Cause != CausePanic || ce.Kind != topologyplugin.KindTransient {
			t.Fatalf("want a transient panic failure, got %v", err)
		}
		if ClientMessage(err) != GenericFailureMessage {
			t.Fatalf("client message %q", ClientMessage(err))
		}
	}
	entries := logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("panicked").All()
	if len(entries) != 3 {
		t.Fatalf("want 3 ERROR lines, got %d", len(entries))
	}
	stack, _ := entries[0].ContextMap()["stack"].(string)
	if !strings.Contains(stack, "caller_test.go") {
		t.Fatalf("ERROR log must carry the stack of the panic, got %q", stack)
	}
	if n := counter(t, c, MethodSet, "error", "panic"); n != 3 {
		t.Fatalf("panic counter %v", n)
	}
	if _, attempts, _, ok := c.backoff.Entry("g"); !ok || attempts != 2 {
		t.Fatalf("three transient failures must extend the back-off to attempt 2 (ok=%v attempts=%d)", ok, attempts)
	}
}

// Spec §3.2 / §3.3: permanent errors keep their kind and message; transient Set failures extend
// the back-off, permanent ones and successes leave it for the coordinator to clear.
func TestSpec3_2SetOutcomeClassification(t *testing.T) {
	f := &fake{set: func(ctx context.Context, group string) error {
		switch group {
		case "perm":
			return topologyplugin.Permanent("too large")
		case "trans":
			return errors.New("backend offline")
		case "empty":
			return errors.New("")
		}
		return nil
	}}
	c, _, _ := newTestCaller(t, f, time.Second, 2)
	defer c.Close()
	ctx := context.Background()

	err := c.Set(ctx, "perm", 3, desc("x"))
	if ce := callErr(t, err); ce.Kind != topologyplugin.KindPermanent || ce.Cause != CausePlugin || ClientMessage(err) != "too large" || !topologyplugin.IsPermanent(err) {
		t.Fatalf("permanent: %v / %q", err, ClientMessage(err))
	}
	if _, _, _, ok := c.backoff.Entry("perm"); ok {
		t.Fatal("a permanent failure must not arm the back-off")
	}
	err = c.Set(ctx, "trans", 3, desc("x"))
	if ce := callErr(t, err); ce.Kind != topologyplugin.KindTransient || ClientMessage(err) != "backend offline" {
		t.Fatalf("transient: %v / %q", err, ClientMessage(err))
	}
	if ep, n, _, ok := c.backoff.Entry("trans"); !ok || ep != 3 || n != 0 {
		t.Fatal("a transient failure must arm the back-off at the pushed epoch")
	}
	if err := c.Set(ctx, "empty", 3, desc("x")); ClientMessage(err) != NoCauseMessage {
		t.Fatalf("empty message: %q", ClientMessage(err))
	}
	if err := c.Set(ctx, "ok", 3, desc("x")); err != nil {
		t.Fatal(err)
	}
	if counter(t, c, MethodSet, "error", "permanent") != 1 || counter(t, c, MethodSet, "error", "transient") != 2 || counter(t, c, MethodSet, "success", "") != 1 {
		t.Fatal("set counters did not move as expected")
	}
	long := &CallError{Cause: CausePlugin, Err: errors.New(strings.Repeat("é", 1000))}
	if m := long.ClientMessage(); len(m) > MaxClientMessageBytes || !strings.HasPrefix(m, "é") {
		t.Fatalf("long message not truncated on a rune boundary: %d bytes", len(m))
	}
}

// Spec §5: Get (nil, nil) is NOT_STORED and counts as success; a failing group is an error for
// that group only; the gets of one describe run in parallel.
func TestSpec5_GetManyRunsInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{get: func(ctx context.Context, group string) (*topologyplugin.Description, error) {
			time.Sleep(200 * time.Millisecond)
			switch group {
			case "missing":
				return nil, nil
			case "broken":
				return nil, errors.New("backend down")
			case "malformed":
				return &topologyplugin.Description{Subtopologies: []topologyplugin.Subtopology{{Nodes: []topologyplugin.Node{{Type: 9}}}}}, nil
			}
			return desc(group), nil
		}}
		c, _, _ := newTestCaller(t, f, time.Second, 8)
		defer c.Close()
		reqs := []GetRequest{{"a", 1}, {"missing", 1}, {"broken", 1}, {"b", 1}, {"malformed", 1}}
		start := time.Now()
		res := c.GetMany(context.Background(), reqs)
		if d := time.Since(start); d != 200*time.Millisecond {
			t.Fatalf("describe of 5 groups took %v, want one call's 200ms", d)
		}
		if !topologyplugin.Equal(res[0].Description, desc("a")) || res[0].Err != nil || !topologyplugin.Equal(res[3].Description, desc("b")) {
			t.Fatal("available groups wrong")
		}
		if res[1].Description != nil || res[1].Err != nil {
			t.Fatal("missing must be (nil, nil)")
		}
		if res[2].Err == nil || res[4].Err == nil || callErr(t, res[4].Err).Cause != CauseInvalid {
			t.Fatalf("broken/malformed must be errors: %v %v", res[2].Err, res[4].Err)
		}
		if counter(t, c, MethodGet, "success", "") != 3 || counter(t, c, MethodGet, "error", "transient") != 1 || counter(t, c, MethodGet, "error", "invalid") != 1 {
			t.Fatal("get counters")
		}
	})
}

// Spec §2.3 clearGroup: a successful plugin delete removes the group's back-off entry; a failed
// one keeps it. DeleteMany reports per group.
func TestSpec2_3DeleteClearsBackoff(t *testing.T) {
	f := &fake{del: func(ctx context.Context, group string) error {
		if group == "bad" {
			return errors.New("nope")
		}
		return nil
	}}
	c, _, _ := newTestCaller(t, f, time.Second, 4)
	defer c.Close()
	c.backoff.Solicit("good", 3)
	c.backoff.Solicit("bad", 3)
	errs := c.DeleteMany(context.Background(), []string{"good", "bad"})
	if errs[0] != nil || errs[1] == nil {
		t.Fatalf("errors %v", errs)
	}
	if _, _, _, ok := c.backoff.Entry("good"); ok {
		t.Fatal("delete success must clear the back-off")
	}
	if _, _, _, ok := c.backoff.Entry("bad"); !ok {
		t.Fatal("delete failure must keep the back-off")
	}
}

// Close cancels calls in flight, fails later calls, and closes the plugin once.
func TestCallerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{set: func(ctx context.Context, group string) error { <-ctx.Done(); return ctx.Err() }}
		c, _, _ := newTestCaller(t, f, time.Minute, 2)
		done := make(chan error)
		go func() { done <- c.Set(context.Background(), "g", 1, desc("x")) }()
		synctest.Wait()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if ce := callErr(t, <-done); ce.Cause != CauseClosed {
			t.Fatalf("in-flight call: %v", ce)
		}
		if ce := callErr(t, c.Set(context.Background(), "g", 1, desc("x"))); ce.Cause != CauseClosed || ce.Kind != topologyplugin.KindTransient {
			t.Fatalf("call after close: %v", ce)
		}
		c.Close()
		if f.closed.Load() != 1 {
			t.Fatalf("plugin closed %d times", f.closed.Load())
		}
		var nilCaller *Caller
		if nilCaller.Enabled() || nilCaller.Close() != nil {
			t.Fatal("nil caller: feature off")
		}
	})
}

// Metrics are registered on the given registry only, so two callers can coexist; the stats of
// a StatsReporter plugin and the back-off size are exported.
func TestCallerMetricsRegistration(t *testing.T) {
	m, _ := NewMemory(nil)
	c1, reg1, _ := newTestCaller(t, m, time.Second, 1)
	defer c1.Close()
	c2, _, _ := newTestCaller(t, &fake{}, time.Second, 1)
	defer c2.Close()
	mustSetCaller(t, c1, "g", 1)
	c1.backoff.Solicit("g", 1)
	c1.Metrics().SetStoredGroups(4)
	c1.Metrics().CleanupCycle()
	c1.Metrics().CleanupEligible(2)
	want := map[string]float64{
		metricPrefix + "plugin_descriptions":    1,
		metricPrefix + "backoff_groups":         1,
		metricPrefix + "stored_groups":          4,
		metricPrefix + "cleanup_cycles_total":   1,
		metricPrefix + "cleanup_eligible_total": 2,
		metricPrefix + "plugin_workers_busy":    0,
	}
	fams, err := reg1.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var latencyCount uint64
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				got[f.GetName()] = m.GetGauge().GetValue()
			case m.GetCounter() != nil && len(m.GetLabel()) == 0:
				got[f.GetName()] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				latencyCount += m.GetHistogram().GetSampleCount()
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if latencyCount != 1 {
		t.Errorf("latency samples %d, want 1", latencyCount)
	}
}

func mustSetCaller(t *testing.T, c *Caller, group string, epoch int32) {
	t.Helper()
	if err := c.Set(context.Background(), group, epoch, desc(group)); err != nil {
		t.Fatal(err)
	}
}

// A Set the caller gave up on (timeout) that then succeeds is reported to OnLateSet, after its
// worker is free (the hook may call the plugin); one answered in time, one that fails late and
// late Gets and Deletes are not.
func TestCallerReportsLateSuccessfulSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		hang := func(ctx context.Context, group string) error {
			if strings.HasPrefix(group, "hang") {
				<-release // ignores ctx on purpose
			}
			if strings.HasSuffix(group, "fails") {
				return errors.New("backend offline")
			}
			return nil
		}
		f := &fake{set: hang, del: hang,
			get: func(ctx context.Context, group string) (*topologyplugin.Description, error) {
				return nil, hang(ctx, group)
			}}
		c, _, _ := newTestCaller(t, f, time.Second, 4)
		defer c.Close()
		var mu sync.Mutex
		var late []string
		c.OnLateSet(func(group string, epoch int32) {
			// The hook may use the plugin: the finished call's worker is free again.
			if err := c.Delete(context.Background(), "from-hook"); err != nil {
				t.Errorf("plugin call from the hook: %v", err)
			}
			mu.Lock()
			late = append(late, fmt.Sprintf("%s@%d", group, epoch))
			mu.Unlock()
		})
		ctx := context.Background()
		if err := c.Set(ctx, "fast", 1, desc("x")); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { c.Set(ctx, "hang-ok", 7, desc("x")) })
		wg.Go(func() { c.Set(ctx, "hang-fails", 7, desc("x")) })
		wg.Go(func() { c.Get(ctx, "hang-get", 7) })
		wg.Go(func() { c.Delete(ctx, "hang-del") })
		wg.Wait() // all four given up at their deadline
		close(release)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(late) != 1 || late[0] != "hang-ok@7" {
			t.Fatalf("late sets reported: %v, want only hang-ok@7", late)
		}
	})
}

// Issue 10 defect 3: a describe (or cleanup) of many groups with a hung plugin starts no more
// goroutines than the pool allows, and still ends one call timeout after it began, every group
// answered with a transient timeout.
func TestGetManyAndDeleteManySpawnOnlyWithinThePool(t *testing.T) {
	const pool, groups = 4, 10_000
	hang := func(ctx context.Context, _ string) error { <-ctx.Done(); return ctx.Err() }
	f := &fake{
		get: func(ctx context.Context, g string) (*topologyplugin.Description, error) { return nil, hang(ctx, g) },
		del: hang,
	}
	names := make([]string, groups)
	reqs := make([]GetRequest, groups)
	for i := range names {
		names[i] = fmt.Sprintf("g%d", i)
		reqs[i] = GetRequest{Group: names[i], Epoch: 1}
	}
	for _, method := range []Method{MethodGet, MethodDelete} {
		t.Run(string(method), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _, _ := newTestCaller(t, f, time.Second, pool)
				defer c.Close()
				base := runtime.NumGoroutine()
				var errs []error
				start := time.Now()
				done := make(chan struct{})
				go func() {
					defer close(done)
					if method == MethodGet {
						for _, r := range c.GetMany(context.Background(), reqs) {
							errs = append(errs, r.Err)
						}
						return
					}
					errs = c.DeleteMany(context.Background(), names)
				}()
				synctest.Wait()
				// Per call in flight: the waiting goroutine and the plugin worker; plus the batch.
				if grown := runtime.NumGoroutine() - base; grown > 2*pool+1 {
					t.Fatalf("%d goroutines for a %s of %d groups with a pool of %d", grown, method, groups, pool)
				}
				<-done
				if took := time.Since(start); took != time.Second {
					t.Fatalf("took %v, want one call timeout", took)
				}
				for i, err := range errs {
					if ce := callErr(t, err); ce.Cause != CauseTimeout || ce.Kind != topologyplugin.KindTransient {
						t.Fatalf("group %d: %v", i, err)
					}
				}
			})
		})
	}
}
