package plugin

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// Method names a plugin method in metrics, logs and errors.
type Method string

const (
	MethodSet    Method = "set"
	MethodGet    Method = "get"
	MethodDelete Method = "delete"
)

// Cause says why a call failed.
type Cause uint8

const (
	CausePlugin   Cause = iota // the plugin returned an error
	CauseTimeout               // the call timeout expired (waiting for a worker or in the plugin)
	CausePanic                 // the plugin panicked
	CauseCanceled              // the caller's context was cancelled
	CauseClosed                // the caller is closed (shutdown)
	CauseInvalid               // Get returned a description that fails Validate
)

func (c Cause) String() string {
	return [...]string{"plugin", "timeout", "panic", "canceled", "closed", "invalid"}[c]
}

// GenericFailureMessage is what a client is told when the plugin's own message must not or
// cannot be used (panic), as Kafka does for a plugin that violates its contract.
const GenericFailureMessage = "Topology description plugin failed."

// NoCauseMessage replaces an empty plugin error message (Kafka's "failure with no cause").
const NoCauseMessage = "Plugin failure (no cause)."

// MaxClientMessageBytes bounds the plugin message copied into ErrorMessage.
const MaxClientMessageBytes = 1024

// CallError is the error of a guarded plugin call. Kind is permanent only when the plugin
// returned an error marked permanent; timeouts, panics, cancellation and everything else are
// transient. errors.As finds it, and topologyplugin.KindOf(err) agrees with Kind.
type CallError struct {
	Method Method
	Group  string
	Kind   topologyplugin.Kind
	Cause  Cause
	Err    error // the plugin's error, the context error, or the recovered panic value
}

func (e *CallError) Error() string {
	return fmt.Sprintf("topology description plugin %s for group %q: %s (%s): %v", e.Method, e.Group, e.Cause, e.Kind, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// ClientMessage is the ErrorMessage for a failed Set: the plugin's own message (truncated to
// MaxClientMessageBytes), or a fixed text where the plugin's is unusable.
func (e *CallError) ClientMessage() string {
	switch e.Cause {
	case CausePanic:
		return GenericFailureMessage
	case CauseTimeout:
		return "Topology description plugin did not answer in time."
	case CauseClosed, CauseCanceled:
		return "Topology description plugin call was abandoned (shutdown or cancelled request)."
	}
	msg := ""
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		return NoCauseMessage
	}
	return truncate(msg, MaxClientMessageBytes)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// ClientMessage returns the ErrorMessage for any error returned by a Caller method.
func ClientMessage(err error) string {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.ClientMessage()
	}
	if err == nil {
		return ""
	}
	if m := err.Error(); m != "" {
		return truncate(m, MaxClientMessageBytes)
	}
	return NoCauseMessage
}

// Options configures a Caller.
type Options struct {
	Plugin         topologyplugin.Plugin
	Name           string        // registered name, for logs
	CallTimeout    time.Duration // per call, from entry (including the wait for a worker); default 10 s
	MaxConcurrency int           // plugin calls running at once; default 64
	Backoff        BackoffConfig
	Now            func() time.Time // back-off clock; nil: time.Now
	Logger         *zap.Logger
}

// Caller is what the coordinator uses instead of calling a plugin directly. Each call runs on
// a worker goroutine bounded by MaxConcurrency while the calling goroutine waits (at most the
// call timeout; a shard goroutine must never call it). A call that does not return in time, or
// panics, is a transient failure and the caller gets its answer at the deadline; the abandoned
// worker keeps its slot until the plugin returns, so a hung plugin can occupy at most
// MaxConcurrency goroutines and later calls fail fast at their own deadline.
//
// A nil *Caller means "no plugin configured"; Enabled reports that.
type Caller struct {
	plugin  topologyplugin.Plugin
	name    string
	timeout time.Duration
	sem     chan struct{}
	log     *zap.Logger
	metrics *Metrics
	backoff *Backoff

	root    context.Context
	stop    context.CancelFunc
	mu      sync.RWMutex   // orders workers.Add against Close's Wait
	workers sync.WaitGroup // calls in flight, until their plugin method returns
	closed  atomic.Bool
	once    sync.Once
	err     error
	lateSet atomic.Pointer[func(group string, epoch int32)]
}

// NewCaller wraps p. Its metrics are registered on reg (nil: not registered).
func NewCaller(o Options, reg prometheus.Registerer) *Caller {
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = 64
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	root, stop := context.WithCancel(context.Background())
	c := &Caller{
		plugin:  o.Plugin,
		name:    o.Name,
		timeout: o.CallTimeout,
		sem:     make(chan struct{}, o.MaxConcurrency),
		log:     o.Logger.With(zap.String("plugin", o.Name)),
		backoff: NewBackoff(o.Backoff, o.Now),
		root:    root,
		stop:    stop,
	}
	c.metrics = newMetrics(reg, c.backoff, o.Plugin)
	return c
}

// Enabled reports whether a plugin is configured (c is not nil).
func (c *Caller) Enabled() bool { return c != nil }

// Name is the plugin's registered name.
func (c *Caller) Name() string { return c.name }

// Backoff is the per-group solicitation back-off.
func (c *Caller) Backoff() *Backoff { return c.backoff }

// Metrics are the caller's series, for the coordinator's own counts.
func (c *Caller) Metrics() *Metrics { return c.metrics }

// Volatile reports whether the plugin declared that its contents do not survive a restart
// (topologyplugin.Volatile): every stored epoch loaded from the log is then stale.
func (c *Caller) Volatile() bool { return c != nil && topologyplugin.IsVolatile(c.plugin) }

// Plugin is the wrapped plugin (for tests and tools; call it through the Caller).
func (c *Caller) Plugin() topologyplugin.Plugin { return c.plugin }

// Set calls the plugin's Set. On a transient failure it extends the group's back-off at this
// epoch (spec §3.3); on success or a permanent failure the back-off is left for the coordinator
// to clear once its outcome record is durable (Backoff().Clear).
func (c *Caller) Set(ctx context.Context, group string, epoch int32, d *topologyplugin.Description) error {
	late := func() {
		if fn := c.lateSet.Load(); fn != nil {
			(*fn)(group, epoch)
		}
	}
	_, err := call(c, ctx, MethodSet, group, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.plugin.Set(ctx, group, epoch, d)
	}, late)
	if err != nil && topologyplugin.KindOf(err) == topologyplugin.KindTransient {
		c.backoff.Extend(group, epoch)
	}
	return err
}

// OnLateSet registers fn to run when a Set that its caller had given up on (call timeout,
// cancellation, shutdown) returns success after all: the plugin now holds a description the
// coordinator recorded no outcome for, and the group may have been released and removed in the
// meantime (Kafka applies no deadline, so it never has this case). fn runs on the finished
// call's goroutine after its worker slot is free, so it may call the plugin itself.
func (c *Caller) OnLateSet(fn func(group string, epoch int32)) {
	if c != nil {
		c.lateSet.Store(&fn)
	}
}

// Get calls the plugin's Get. (nil, nil) means the plugin holds nothing for (group, epoch):
// NOT_STORED. A description that fails Validate is an error (CauseInvalid).
func (c *Caller) Get(ctx context.Context, group string, epoch int32) (*topologyplugin.Description, error) {
	return call(c, ctx, MethodGet, group, c.getFn(group, epoch), nil)
}

func (c *Caller) getFn(group string, epoch int32) func(context.Context) (*topologyplugin.Description, error) {
	return func(ctx context.Context) (*topologyplugin.Description, error) {
		d, err := c.plugin.Get(ctx, group, epoch)
		if err == nil && d != nil {
			if verr := d.Validate(); verr != nil {
				return nil, &invalidError{verr}
			}
		}
		return d, err
	}
}

type invalidError struct{ error }

func (e *invalidError) Unwrap() error { return e.error }

// Delete calls the plugin's Delete. On success the group's back-off entry is removed (spec §2.3
// clearGroup after a successful plugin delete).
func (c *Caller) Delete(ctx context.Context, group string) error {
	_, err := call(c, ctx, MethodDelete, group, c.deleteFn(group), nil)
	c.afterDelete(group, err)
	return err
}

func (c *Caller) deleteFn(group string) func(context.Context) (struct{}, error) {
	return func(ctx context.Context) (struct{}, error) { return struct{}{}, c.plugin.Delete(ctx, group) }
}

func (c *Caller) afterDelete(group string, err error) {
	if err == nil {
		c.backoff.ClearGroup(group)
	}
}

// GetRequest is one group of a describe.
type GetRequest struct {
	Group string
	Epoch int32
}

// GetResult is the answer for the GetRequest at the same index.
type GetResult struct {
	Description *topologyplugin.Description // nil with a nil Err: NOT_STORED
	Err         error                       // non-nil: ERROR for this group only
}

// GetMany runs the Gets concurrently and waits for all of them (spec §5: a describe of N
// groups takes about one call's time, not N). A goroutine is started for a group only once it
// holds a worker slot, so a describe of 100 000 groups costs at most MaxConcurrency goroutines;
// every call's timeout counts from GetMany's entry, so groups still waiting for a slot when it
// expires fail at once, as they would have had each been called on its own at that moment.
func (c *Caller) GetMany(ctx context.Context, reqs []GetRequest) []GetResult {
	out := make([]GetResult, len(reqs))
	many(c, ctx, MethodGet, len(reqs),
		func(i int) string { return reqs[i].Group },
		func(i int) func(context.Context) (*topologyplugin.Description, error) {
			return c.getFn(reqs[i].Group, reqs[i].Epoch)
		},
		func(i int, d *topologyplugin.Description, err error) { out[i] = GetResult{Description: d, Err: err} })
	return out
}

// DeleteMany runs the Deletes concurrently, bounded as GetMany is, and returns their errors in
// the order of groups.
func (c *Caller) DeleteMany(ctx context.Context, groups []string) []error {
	out := make([]error, len(groups))
	many(c, ctx, MethodDelete, len(groups),
		func(i int) string { return groups[i] },
		func(i int) func(context.Context) (struct{}, error) { return c.deleteFn(groups[i]) },
		func(i int, _ struct{}, err error) {
			c.afterDelete(groups[i], err)
			out[i] = err
		})
	return out
}

// many calls fnOf(i) for i in [0, n) with the pool's concurrency, acquiring each call's worker
// slot on this goroutine before anything is spawned for it.
func many[T any](c *Caller, ctx context.Context, method Method, n int, groupOf func(int) string,
	fnOf func(int) func(context.Context) (T, error), done func(int, T, error)) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		cctx, ccancel, err := c.enter(ctx, method, groupOf(i), start)
		if err != nil {
			var zero T
			done(i, zero, err)
			continue
		}
		wg.Go(func() {
			defer ccancel()
			v, err := run(c, cctx, method, groupOf(i), start, fnOf(i), nil)
			done(i, v, err)
		})
	}
	wg.Wait()
}

type result[T any] struct {
	v   T
	err error
}

// call runs fn on a worker with the call timeout, the panic guard and the metrics. late, if
// not nil, runs when fn succeeds after the caller stopped waiting for it.
func call[T any](c *Caller, ctx context.Context, method Method, group string, fn func(context.Context) (T, error), late func()) (T, error) {
	start := time.Now()
	ctx, cancel, err := c.enter(ctx, method, group, start)
	if err != nil {
		var zero T
		return zero, err
	}
	defer cancel()
	return run(c, ctx, method, group, start, fn, late)
}

// failed records a failed call in the metrics and builds its error.
func (c *Caller) failed(method Method, group string, start time.Time, cause Cause, kind topologyplugin.Kind, err error) error {
	c.metrics.latency.WithLabelValues(string(method)).Observe(time.Since(start).Seconds())
	c.metrics.vec(method).WithLabelValues("error", failureKind(cause, kind)).Inc()
	return &CallError{Method: method, Group: group, Kind: kind, Cause: cause, Err: err}
}

// enter starts a call: it derives the call's context (the call timeout, cancelled on Close) and
// waits for a worker slot. On success the caller owns the slot and one count of c.workers, and
// must pass them to run; on failure nothing is held.
func (c *Caller) enter(ctx context.Context, method Method, group string, start time.Time) (context.Context, context.CancelFunc, error) {
	c.mu.RLock()
	if c.closed.Load() {
		c.mu.RUnlock()
		return nil, nil, c.failed(method, group, start, CauseClosed, topologyplugin.KindTransient, errors.New("plugin caller is closed"))
	}
	c.workers.Add(1)
	c.mu.RUnlock()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	stopOnClose := context.AfterFunc(c.root, cancel)
	release := func() { stopOnClose(); cancel() }
	if ctx.Err() == nil {
		select {
		case c.sem <- struct{}{}:
			return ctx, release, nil
		case <-ctx.Done():
		}
	}
	// Checked first so that a batch past its deadline starts nothing even where a slot is free.
	err := c.failed(method, group, start, ctxCause(c, ctx), topologyplugin.KindTransient, fmt.Errorf("waiting for a free plugin worker: %w", ctx.Err()))
	release()
	c.workers.Done()
	return nil, nil, err
}

// run runs fn on a worker goroutine holding the slot enter acquired, and waits for it at most
// until ctx is done; the worker gives the slot back when fn returns.
func run[T any](c *Caller, ctx context.Context, method Method, group string, start time.Time, fn func(context.Context) (T, error), late func()) (T, error) {
	var zero T
	fail := func(cause Cause, kind topologyplugin.Kind, err error) (T, error) {
		return zero, c.failed(method, group, start, cause, kind, err)
	}
	done := make(chan result[T], 1)
	// Who settles the call first: the worker with its answer (1), or the caller giving up (2).
	var settled atomic.Int32
	c.metrics.inflight.Inc()
	go func() {
		defer c.workers.Done()
		r := guarded(c, ctx, method, group, fn)
		abandoned := !settled.CompareAndSwap(0, 1)
		// The slot is free and the gauge down before the caller sees the answer, so that what
		// a caller observes after a call returns is settled.
		c.metrics.inflight.Dec()
		<-c.sem
		done <- r
		if abandoned && r.err == nil && late != nil {
			c.log.Info("topology description plugin call succeeded after it had been given up",
				zap.String("method", string(method)), zap.String("group", group))
			late()
		}
	}()

	var r result[T]
	select {
	case r = <-done:
	case <-ctx.Done():
		if !settled.CompareAndSwap(0, 2) {
			r = <-done // finished at the same moment: prefer the real answer
		} else {
			cause := ctxCause(c, ctx)
			if cause == CauseTimeout {
				c.log.Warn("topology description plugin call timed out; treated as a transient failure",
					zap.String("method", string(method)), zap.String("group", group), zap.Duration("timeout", c.timeout))
			}
			return fail(cause, topologyplugin.KindTransient, ctx.Err())
		}
	}
	if r.err != nil {
		var pe *panicError
		var ie *invalidError
		switch {
		case errors.As(r.err, &pe):
			return fail(CausePanic, topologyplugin.KindTransient, r.err)
		case errors.As(r.err, &ie):
			return fail(CauseInvalid, topologyplugin.KindTransient, ie.error)
		case ctx.Err() != nil && errors.Is(r.err, ctx.Err()):
			// The plugin gave up because of our deadline or cancellation.
			return fail(ctxCause(c, ctx), topologyplugin.KindTransient, r.err)
		}
		return fail(CausePlugin, topologyplugin.KindOf(r.err), r.err)
	}
	c.metrics.latency.WithLabelValues(string(method)).Observe(time.Since(start).Seconds())
	c.metrics.vec(method).WithLabelValues("success", "").Inc()
	return r.v, nil
}

// guarded runs fn, turning a panic into a result.
func guarded[T any](c *Caller, ctx context.Context, method Method, group string, fn func(context.Context) (T, error)) (r result[T]) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("topology description plugin panicked; treated as a transient failure",
				zap.String("method", string(method)), zap.String("group", group),
				zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			r = result[T]{err: &panicError{value: p}}
		}
	}()
	v, err := fn(ctx)
	return result[T]{v: v, err: err}
}

type panicError struct{ value any }

func (e *panicError) Error() string { return fmt.Sprintf("plugin panicked: %v", e.value) }

func ctxCause(c *Caller, ctx context.Context) Cause {
	switch {
	case c.closed.Load():
		return CauseClosed
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return CauseTimeout
	}
	return CauseCanceled
}

func failureKind(cause Cause, kind topologyplugin.Kind) string {
	switch cause {
	case CauseTimeout, CausePanic, CauseInvalid:
		return cause.String()
	}
	return kind.String()
}

// Close stops the caller: new calls fail (transient, CauseClosed), calls in flight have their
// context cancelled, and the plugin's Close runs once the workers have returned or after one
// call timeout, whichever is first (a plugin that ignores its context cannot hold up shutdown).
func (c *Caller) Close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() {
		c.mu.Lock()
		c.closed.Store(true)
		c.mu.Unlock()
		c.stop()
		done := make(chan struct{})
		go func() { c.workers.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(c.timeout):
			c.log.Warn("closing the topology description plugin while calls are still running", zap.Duration("waited", c.timeout))
		}
		c.err = c.plugin.Close()
	})
	return c.err
}
