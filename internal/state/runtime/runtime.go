// Package runtime runs one shard: a single goroutine owns its state machine, turns operations
// into records, hands them to the shard's log and releases each response only after the records
// it depends on are durable.
//
// The shard keeps one instance of its machine, with every record replayed as soon as an
// operation produces it, so that the next operation sees the latest state. Nothing a client
// reads can be lost in a crash because no answer leaves before the records it may have seen are
// durable: a write's answer waits for its records, a read's (and a write's that appended
// nothing) for what was pending when it ran. Dropping state that was never made durable is
// reloading the machine from the log, which happens only after a storage failure.
//
// A shard that publishes a view of its durable state for readers off the shard (OnDurable)
// keeps a second instance fed only with durable records, since its machine may be ahead of
// what is durable at any moment; only the metadata shard does.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"go.uber.org/zap"
)

// Machine is a shard's state machine. State changes only through Replay, which the write path
// (speculatively) and the load path share.
type Machine interface {
	Replay(offset int64, rec log.Record) error
}

// State is a shard's lifecycle state.
type State int32

const (
	StateInitial State = iota
	StateLoading
	StateActive
	StateFailed
	StateClosed
	// StateNotOwned: another node owns the shard (log.backend=kafka with several nodes); this
	// process holds no state for it.
	StateNotOwned
)

func (s State) String() string {
	return [...]string{"initial", "loading", "active", "failed", "closed", "not owned"}[s]
}

// Errors a caller maps to Kafka codes. Each is retriable for the client.
var (
	// ErrLoading: the shard is loading its log (COORDINATOR_LOAD_IN_PROGRESS).
	ErrLoading = errors.New("shard is loading")
	// ErrNotAvailable: the shard is closed, or failed (see ErrFailed, which matches it too).
	ErrNotAvailable = errors.New("shard is not available")
	// ErrFailed: the shard is FAILED (a storage failure, a record it cannot replay, a panic) and
	// serves nothing until the process restarts. Kafka answers NOT_COORDINATOR for a coordinator
	// partition in that state, as for one this broker does not own.
	ErrFailed = fmt.Errorf("%w: shard FAILED", ErrNotAvailable)
	// ErrNotOwned: another node owns the shard. Kafka answers NOT_COORDINATOR for a coordinator
	// partition it does not lead; matching ErrFailed gives it that code on every path that maps
	// a FAILED shard.
	ErrNotOwned = fmt.Errorf("%w: shard is owned by another node", ErrFailed)
	// ErrOverloaded: the shard's inbox is full; fail fast instead of queueing without limit.
	ErrOverloaded = errors.New("shard is overloaded")
	// ErrNotDurable: the operation's records could not be made durable; nothing of it stays.
	ErrNotDurable = errors.New("write was not made durable")
)

// ErrRecordTooLarge is not retriable: the operation's records exceed the log's batch limit
// (message.max.bytes), so the same request would fail again. Nothing of it stays. Handlers map it
// per API as Kafka does for RECORD_LIST_TOO_LARGE (UNKNOWN_SERVER_ERROR, or
// INVALID_COMMIT_OFFSET_SIZE on commit paths), never to a code a client retries forever. The
// error also matches log.ErrBatchTooLarge.
var ErrRecordTooLarge = errors.New("records too large for the log")

// Result is what a write operation returns. Records are appended as one atomic batch; Response
// and Err are delivered to the caller once the records (or, when there are none, everything the
// operation may have read: the keys and scopes it named with Ctx.Reads and Ctx.ReadsScope, else
// everything appended before it)
// are durable. A *Promise response makes the caller wait for it too.
//
// Units lets the records go in several batches when one would exceed the log's limit
// (message.max.bytes): it lists the lengths of consecutive runs of Records (summing to
// len(Records)) that are each kept whole in one batch; batches are filled in order with whole
// units. Nil keeps all Records in one batch. An operation sets it only when every prefix of
// whole units, replayed without the rest (a crash between batches), is a state replay accepts
// and that the operation, run again, completes: e.g. the tombstones of a large group's offsets,
// one unit each, followed by the group's own tombstones as one unit. The response still waits
// for the last batch.
type Result struct {
	Records  []log.Record
	Units    []int
	Response any
	Err      error
}

// WriteOp computes records and a response from the latest (speculative) state. It must not
// modify m: only records change state.
type WriteOp[M Machine] func(c *Ctx[M], m M) Result

// ReadOp answers from the shard's state; the answer is released once every record the state
// held when the op ran is durable (at once when none is pending). It must not modify m, and its
// answer must not share memory with m, which later operations change.
type ReadOp[M Machine] func(m M) (any, error)

// Options configure a shard.
type Options[M Machine] struct {
	Shard   int32
	New     func() M // a fresh, empty machine
	Backend log.Backend
	Logger  *zap.Logger
	Metrics *Metrics
	// InboxSize bounds queued operations; beyond it callers get ErrOverloaded. The inbox holds
	// room for what is queued, not for the bound (see inbox).
	InboxSize int
	// OnLoaded runs on the shard goroutine after each load, to re-arm timers (never persisted)
	// from the loaded state.
	OnLoaded func(c *Ctx[M], m M)
	// OnDurable runs on the shard goroutine with the durable machine after each load and each
	// advance of durable state, so a machine can publish an immutable view of what is durable
	// for readers that must not make a round trip through the shard. It must not modify m's
	// state, and it never sees a record that is not durable. Setting it costs a second machine
	// instance (every record replayed twice, state memory doubled): only for small state.
	OnDurable func(m M)
	// DurableUpTo runs on the shard goroutine with the machine each time records up to offset
	// become durable, before the operations waiting for them are answered: what a machine
	// noted of its records as they were replayed (not yet durable) can be made visible then.
	DurableUpTo func(m M, offset int64)
	// LoadSlots, when set, is a semaphore shared by shards so that only so many replay their
	// logs at once (loading is CPU-bound; more than the core count only adds contention).
	LoadSlots chan struct{}
	// CompactEvery is the pause between compactions of the shard's log (log.cleaner.backoff.ms);
	// 0 disables them.
	CompactEvery time.Duration
	// Kind names the family of shards in metric labels ("group" when empty, "meta"), since
	// shard numbers restart at 0 in each family.
	Kind string
	// Scope, when set, names the scope of a record key, or nil for none: Ctx.ReadsScope then
	// waits for the pending records of every key in a scope. It must be a pure function of the
	// key, and cheap (it runs for every record appended); the result may alias the key.
	Scope func(key []byte) []byte
	// ReloadedByOwner: something outside reloads a FAILED shard (log.backend=kafka: the
	// membership, at the next heartbeat); the FAILED line says so instead of asking for a
	// restart.
	ReloadedByOwner bool
}

// Shard is one running shard.
type Shard[M Machine] struct {
	opts Options[M]
	lg   *zap.Logger
	m    *Metrics

	state atomic.Int32
	lag   atomic.Int64 // appended - durableO, for the durable lag gauge
	// loadingSince is when the current load began (Unix ns; 0 while not loading), for the
	// loading gauge: a load that does not end shows there even when its log lines are missed.
	loadingSince atomic.Int64
	// ver moves with every write operation that neither took a Ticket nor declared its scope
	// (Ctx.Scoped), every unscoped append and every reload: a Ticket is valid only while it has
	// not moved. base is the origin of leases' deadlines (monotonic).
	ver  atomic.Uint64
	base time.Time

	// replySlots holds this shard's idle reply slots. Per shard rather than per process: a
	// channel belongs to the synctest bubble that made it, and a shard and its callers share one.
	replySlots sync.Pool
	// lastCompacted is when the last compaction of this shard's log succeeded (Unix ns, 0:
	// never since start); written by the compaction goroutine, read by the console.
	lastCompacted atomic.Int64

	prio   chan event[M] // storage reports, close
	normal *inbox[M]     // operations, timer fires, async results
	// closing is closed when Close starts; posts from storage and timer goroutines give up then
	// instead of blocking on an inbox nobody will drain.
	closing     chan struct{}
	closeOnce   sync.Once
	closingOnce sync.Once
	// stopWaiting is closed when Close's context ends: nobody waits for the writes in flight
	// any more, so a log that can give them up (log.Abandoner) does.
	stopWaiting     chan struct{}
	stopWaitingOnce sync.Once
	started         atomic.Bool
	done            chan struct{}

	// Owned by the shard goroutine.
	gen  uint64
	log  log.Log
	spec M
	// durable mirrors spec with durable records only, kept when OnDurable needs it.
	durable  M
	mirrored bool
	next     int64 // offset of the next record appended
	appended int64 // last offset appended (-1: none this generation)
	durableO int64 // last offset reported durable
	pending  []pendingRecord
	// lastPending maps the hash of a record key to the offset of the last not-yet-durable
	// record with that key, so that an operation which appends nothing waits only for the keys
	// it read (Ctx.Reads). A hash collision only makes such an operation wait longer.
	lastPending map[uint64]int64
	keySeed     maphash.Seed
	// waiters are ordered by offset: markDurable answers a prefix of them.
	waiters  []waiter
	timers   map[string]*timer[M]
	timerSeq uint64
	// scopes holds the version of each scope a Ticket was taken in since ver last moved
	// (Ctx.Scoped moves only its scope's). Tickets read the counters from any goroutine; the
	// map itself only the shard goroutine, which drops it whenever ver moves (every ticket of
	// before is invalid then), so it never holds more than the scopes of current tickets.
	scopes   map[string]*atomic.Uint64
	promises map[*Promise]struct{}
	asyncCtx context.Context
	asyncEnd context.CancelFunc
	// compacting: a Compact of this generation's log runs on its own goroutine.
	compacting bool
	// replaying is the offset of the record being replayed, -1 outside a replay: a panic
	// report names it.
	replaying int64
	// opCtx is the Ctx of the write operation running (runWrite).
	opCtx Ctx[M]
	// compactTimer posts evCompactDue every Options.CompactEvery (nil: never).
	compactTimer *time.Timer
}

type pendingRecord struct {
	offset int64
	rec    log.Record
	key    uint64 // hash of rec.Key, for lastPending
	// scope is the hash of the key's scope (Options.Scope), for lastPending too; scoped
	// tells a real hash from none.
	scope  uint64
	scoped bool
}

// scopeHash hashes a scope apart from record keys: a scope's bytes may equal some key's, and
// lastPending holds both (a collision would only make an operation wait longer).
func (s *Shard[M]) scopeHash(scope []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(s.keySeed)
	h.WriteByte(0xff)
	h.Write(scope)
	return h.Sum64()
}

type outcome struct {
	resp any
	err  error
}

type waiter struct {
	offset       int64
	done         replyTo // zero for operations nobody waits on (timers, async results)
	out          outcome
	afterDurable []func()
	appendedAt   time.Time
}

type eventKind uint8

const (
	evWrite eventKind = iota
	evRead
	evTimer
	evDurable
	evFailed
	evLost
	evClose
	evCompacted
	evCompactDue // Options.CompactEvery has passed since the last one
	evPanic      // a Ctx.Go work function panicked; err carries the report
)

type event[M Machine] struct {
	kind   eventKind
	gen    uint64 // for events bound to a generation (timers, async results, storage reports); 0 = any
	write  WriteOp[M]
	read   ReadOp[M]
	done   replyTo
	offset int64
	err    error
	key    string
	seq    uint64
}

// New creates a shard; Start loads it.
func New[M Machine](opts Options[M]) *Shard[M] {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.InboxSize <= 0 {
		opts.InboxSize = 4096
	}
	if opts.Kind == "" {
		opts.Kind = "group"
	}
	s := &Shard[M]{
		opts:    opts,
		lg:      opts.Logger.With(zap.Int32("shard", opts.Shard)),
		m:       opts.Metrics,
		prio:    make(chan event[M], 64),
		normal:  newInbox[M](opts.InboxSize),
		closing: make(chan struct{}),
		done:    make(chan struct{}),

		stopWaiting: make(chan struct{}),

		replaying: -1,
		keySeed:   maphash.MakeSeed(),
		base:      time.Now(),
	}
	s.replySlots.New = func() any { return &replySlot{ch: make(chan outcome, 1)} }
	s.setState(StateInitial)
	s.m.track(opts.Kind, opts.Shard, s.gauges)
	return s
}

// LastCompaction is when a compaction of the shard's log last succeeded in this process; the
// zero time when none has.
func (s *Shard[M]) LastCompaction() time.Time {
	if ns := s.lastCompacted.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// State returns the shard's lifecycle state.
func (s *Shard[M]) State() State { return State(s.state.Load()) }

func (s *Shard[M]) setState(st State) {
	if st != StateLoading {
		s.loadingSince.Store(0)
	} else if s.loadingSince.Load() == 0 {
		s.loadingSince.Store(time.Now().UnixNano())
	}
	s.state.Store(int32(st))
	s.m.state.WithLabelValues(s.opts.Kind, fmt.Sprint(s.opts.Shard)).Set(float64(st))
}

// gauges are read by the metrics collector from its own goroutine: channel lengths are safe to
// read anywhere, and the lag is published atomically by the shard goroutine.
func (s *Shard[M]) gauges() shardGauges {
	g := shardGauges{priority: len(s.prio), normal: s.normal.len(), lag: s.lag.Load()}
	if since := s.loadingSince.Load(); since != 0 {
		g.loading = time.Since(time.Unix(0, since))
	}
	return g
}

// NotOwned is a shard this process does not own: every operation fails with ErrNotOwned. It is
// never started; Close returns at once.
func NotOwned[M Machine](opts Options[M]) *Shard[M] {
	// Nothing is ever queued on it (admit refuses first), so its inbox never allocates a ring:
	// a group Set keeps one per shard beside the owned one.
	s := New(opts)
	s.setState(StateNotOwned)
	return s
}

// Republish sets a NotOwned shard's state series again: it shares the series with the shard
// runtimes that held the same shard number meanwhile, the last of which left it at "closed".
func (s *Shard[M]) Republish() {
	if !s.started.Load() {
		s.setState(s.State())
	}
}

// Start loads the shard in its own goroutine and then serves it.
func (s *Shard[M]) Start() {
	s.started.Store(true)
	s.setState(StateLoading)
	go s.run()
}

// Done is closed when the shard goroutine has exited.
func (s *Shard[M]) Done() <-chan struct{} { return s.done }

// Write runs op against the latest state and returns its response once durable.
func (s *Shard[M]) Write(ctx context.Context, op WriteOp[M]) (any, error) {
	return s.submit(ctx, event[M]{kind: evWrite, write: op})
}

// Read runs op against durable state.
func (s *Shard[M]) Read(ctx context.Context, op ReadOp[M]) (any, error) {
	return s.submit(ctx, event[M]{kind: evRead, read: op})
}

func (s *Shard[M]) submit(ctx context.Context, e event[M]) (any, error) {
	if err := s.admit(); err != nil {
		return nil, err
	}
	e.done = s.replySlots.Get().(*replySlot).begin()
	if queued, closed := s.normal.offer(e); !queued {
		s.replySlots.Put(e.done.slot) // never handed to the shard
		if closed {
			return nil, fmt.Errorf("shard %d: %w", s.opts.Shard, ErrNotAvailable)
		}
		s.m.rejected.Inc()
		return nil, fmt.Errorf("shard %d: %w", s.opts.Shard, ErrOverloaded)
	}
	var out outcome
	select {
	case out = <-e.done.slot.ch:
		s.replySlots.Put(e.done.slot) // answered and emptied: free for another operation
	case <-ctx.Done():
		// Not pooled: the shard may still answer into it (or may have, as ctx ended).
		return nil, ctx.Err()
	}
	if p, ok := out.resp.(*Promise); ok && out.err == nil {
		return p.Wait(ctx)
	}
	return out.resp, out.err
}

func (s *Shard[M]) admit() error {
	switch s.State() {
	case StateActive:
		return nil
	case StateLoading, StateInitial:
		return fmt.Errorf("shard %d: %w", s.opts.Shard, ErrLoading)
	case StateFailed:
		return fmt.Errorf("shard %d: %w", s.opts.Shard, ErrFailed)
	case StateNotOwned:
		return fmt.Errorf("shard %d: %w", s.opts.Shard, ErrNotOwned)
	default:
		return fmt.Errorf("shard %d: %w", s.opts.Shard, ErrNotAvailable)
	}
}

// post delivers an event from a goroutine other than the shard's (storage, timers, async
// work); it waits for room but gives up once the shard is closing.
func (s *Shard[M]) post(ch chan event[M], e event[M]) {
	// A send into room first: the two-channel select locks both channels, and every journal
	// round posts one durability report per shard it carried (issue 12).
	select {
	case ch <- e:
	default:
		select {
		case ch <- e:
		case <-s.closing:
			return
		}
	}
	s.normal.wake() // the shard waits on one channel for both lanes (run)
}

// Close stops the shard: new operations are refused, operations waiting for durability get it
// or ErrNotAvailable when ctx ends first, and the log is closed.
func (s *Shard[M]) Close(ctx context.Context) {
	if !s.started.Load() {
		return // never started (NotOwned): no goroutine, no log
	}
	s.closeOnce.Do(func() {
		select {
		case s.prio <- event[M]{kind: evClose}:
			s.normal.wake()
		case <-s.done:
		}
	})
	select {
	case <-s.done:
	case <-ctx.Done():
		s.stopWaitingOnce.Do(func() { close(s.stopWaiting) })
		s.closeOnceClosing()
		<-s.done
	}
}

func (s *Shard[M]) run() {
	defer close(s.done)
	s.guard(replyTo{}, "load", s.load)
	// A due compaction arrives as an event in the priority lane (storage reports go first), so
	// a shard that is never idle still compacts. Not a ticker in the select below: a goroutine
	// that blocks in a select on a timer's channel puts the timer into the runtime's heap and
	// takes it out again on every wake-up, and a shard wakes twice per commit (issue 12).
	if s.opts.CompactEvery > 0 {
		s.compactTimer = time.AfterFunc(s.opts.CompactEvery, func() { s.post(s.prio, event[M]{kind: evCompactDue}) })
		defer s.compactTimer.Stop()
	}
	for {
		var e event[M]
		select {
		case e = <-s.prio:
		default:
			var ok bool
			if e, ok = s.normal.take(); !ok {
				// Whoever queues in either lane leaves a token in ready after the event (post,
				// Close, inbox.offer): waiting on that one channel is a receive, not a select
				// over two, on each of the shard's two wake-ups per commit (issue 12).
				<-s.normal.ready
				continue
			}
		}
		if e.kind == evClose {
			s.shutdown()
			return
		}
		s.guard(e.done, e.kind.String(), func() { s.handle(e) })
	}
}

func (k eventKind) String() string {
	switch k {
	case evWrite:
		return "write operation"
	case evRead:
		return "read operation"
	case evTimer:
		return "timer operation"
	case evCompactDue:
		return "compaction"
	default:
		return "durability report"
	}
}

// guard runs fn and turns a panic in it into a FAILED shard instead of a dead process. A panic
// is a bug whose damage to the machine is unknown, so the shard stops serving (every other shard
// keeps going); done, the caller of the event that panicked, gets ErrFailed unless it was
// already answered.
func (s *Shard[M]) guard(done replyTo, during string, fn func()) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		s.panicked(during, v, debug.Stack())
		reply(done, outcome{err: fmt.Errorf("shard %d: %w", s.opts.Shard, ErrFailed)}) // dropped if answered before the panic
	}()
	fn()
}

// panicked fails the shard after a recovered panic, with one ERROR line carrying the stack and
// the log offset involved: the record being replayed, or else the last one appended.
func (s *Shard[M]) panicked(during string, v any, stack []byte) {
	s.m.panics.WithLabelValues(s.opts.Kind, fmt.Sprint(s.opts.Shard)).Inc()
	if during == "load" {
		s.m.loads.WithLabelValues("failed").Inc()
	}
	offset := s.appended
	if s.replaying >= 0 {
		offset = s.replaying
	}
	s.replaying = -1
	if s.State() == StateFailed {
		// A panic while failing (say, in closing the log): the shard is down already.
		s.lg.Error("panic in a FAILED shard", zap.String("during", during), zap.Any("panic", v), zap.ByteString("stack", stack))
		return
	}
	s.fail(fmt.Errorf("panic in %s: %v", during, v),
		zap.Int64("offset", offset), zap.Int64("durable_offset", s.durableO), zap.ByteString("stack", stack))
}

func (s *Shard[M]) handle(e event[M]) {
	switch e.kind {
	case evWrite:
		if e.gen != 0 && e.gen != s.gen {
			return // async result from before a reload
		}
		if err := s.admit(); err != nil {
			reply(e.done, outcome{err: err})
			return
		}
		s.runWrite(e.write, e.done)
	case evRead:
		if err := s.admit(); err != nil {
			reply(e.done, outcome{err: err})
			return
		}
		if s.mirrored {
			resp, err := e.read(s.durable)
			reply(e.done, outcome{resp: resp, err: err})
			return
		}
		resp, err := e.read(s.spec)
		s.release(waiter{done: e.done, out: outcome{resp: resp, err: err}}, s.appended, time.Now())
	case evTimer:
		t := s.timers[e.key]
		if e.gen != s.gen || t == nil || t.seq != e.seq || s.State() != StateActive {
			return // cancelled, replaced or from before a reload
		}
		for {
			deadline, v := t.deadline, int64(0)
			if t.lease != nil {
				// A ticket's holder may have pushed it back off the shard, and may still.
				v = t.lease.at.Load()
				if ld := s.base.Add(time.Duration(v)); ld.After(deadline) {
					deadline = ld
				}
			}
			if rest := time.Until(deadline); rest > 0 {
				t.firesAt = deadline // pushed back since it was set: go off again for the rest
				t.t.Reset(rest)
				return
			}
			if t.lease == nil || t.lease.claim(v) {
				break // no extension can come in between any more
			}
		}
		delete(s.timers, e.key)
		s.runWrite(t.op, replyTo{})
	case evDurable:
		if e.gen == s.gen {
			s.markDurable(e.offset)
		}
	case evLost, evFailed:
		if e.gen == s.gen {
			s.storageFailed(e.kind == evLost, e.err)
		}
	case evCompacted:
		if e.gen == s.gen {
			s.compacting = false
		}
	case evCompactDue:
		s.compact()
		s.compactTimer.Reset(s.opts.CompactEvery)
	case evPanic:
		p := e.err.(*goPanic)
		if e.gen != s.gen || s.State() != StateActive {
			// Work started before a reload or failure: the state it ran for is gone, but the bug
			// is real.
			s.m.panics.WithLabelValues(s.opts.Kind, fmt.Sprint(s.opts.Shard)).Inc()
			s.lg.Error("panic in Ctx.Go work of an earlier generation; shard not failed again",
				zap.Any("panic", p.value), zap.ByteString("stack", p.stack))
			return
		}
		s.panicked("Ctx.Go work", p.value, p.stack)
	}
}

// replySlot carries an operation's outcome to the goroutine waiting for it in submit. Slots
// are pooled, since a channel made per operation was a measurable share of a heartbeat's CPU
// (issue 12). A slot returns to the pool only once its answer has been received, so its
// channel is empty whenever a use begins; and each use has its own number, so that a reply for
// an earlier use (a second one, after a panic that followed the answer) is dropped instead of
// reaching the operation that now holds the slot.
type replySlot struct {
	ch  chan outcome  // capacity 1
	use atomic.Uint64 // the current use's number (even); plus 1 once it is answered
}

// replyTo is where one use of a slot is answered; the zero value is nobody.
type replyTo struct {
	slot *replySlot
	use  uint64
}

// begin starts a use of a slot taken for one operation. Only the slot's holder starts a use, and the
// shard only ever marks the current use answered, so the Store cannot lose a concurrent mark.
func (sl *replySlot) begin() replyTo {
	use := sl.use.Load()&^1 + 2
	sl.use.Store(use)
	return replyTo{slot: sl, use: use}
}

// reply answers r's use at most once; a repeated or stale reply is dropped. The send never
// blocks: one answer per use, into a channel that was empty when the use began.
func reply(r replyTo, out outcome) {
	if r.slot != nil && r.slot.use.CompareAndSwap(r.use, r.use+1) {
		r.slot.ch <- out
	}
}

// runWrite runs a write op, replays and appends its records, and parks or answers the caller.
func (s *Shard[M]) runWrite(op WriteOp[M], done replyTo) {
	// One Ctx per shard, reset for each operation: a Ctx is valid only while its operation
	// runs (Resolve, the one method called later, from AfterDurable, reads only the shard), and
	// allocating one per write was a sixth of the objects an offset commit left to the
	// collector (issue 12). Nothing of the previous operation's survives the reset: its
	// AfterDurable list went to its waiter as it was.
	s.opCtx = Ctx[M]{s: s, now: time.Now()}
	c := &s.opCtx
	res := op(c, s.spec)
	// Before anything of it is answered: no ticket from before it that it may have changed the
	// answer of is valid.
	switch {
	case c.scoped:
		if v := s.scopes[c.scope]; v != nil {
			v.Add(1)
		}
	case !c.steady || len(res.Records) > 0:
		s.moved()
	}
	w := waiter{done: done, out: outcome{resp: res.Response, err: res.Err}, afterDurable: c.afterDurable}
	if len(res.Records) > 0 {
		batches := [][]log.Record{res.Records}
		// splitBatches only when the batch is refused: it allocates its answer.
		if bc, ok := s.log.(log.BatchChecker); ok && bc.CheckBatch(res.Records) != nil {
			var err error
			if batches, err = splitBatches(bc, res.Records, res.Units); err != nil {
				// Refused before anything changed: only this operation fails, and a response it
				// parked would never be completed.
				err = fmt.Errorf("shard %d: %w: %w", s.opts.Shard, ErrRecordTooLarge, err)
				c.dropPromises(err)
				reply(done, outcome{err: err})
				return
			}
		}
		first := s.next
		for i, rec := range res.Records {
			s.replaying = first + int64(i)
			if err := s.spec.Replay(first+int64(i), rec); err != nil {
				// An operation produced a record its own machine cannot apply: a bug. The
				// speculative state may be half-changed; stop rather than guess.
				s.lg.Error("replay of a freshly produced record failed; shard stops", zap.Int64("offset", first+int64(i)), zap.Error(err))
				reply(done, outcome{err: fmt.Errorf("shard %d: %w", s.opts.Shard, ErrFailed)})
				s.fail(err)
				return
			}
		}
		s.replaying = -1
		var last int64
		end := first - 1
		for _, b := range batches {
			end += int64(len(b))
			var err error
			last, err = s.log.Append(b)
			if err != nil || last != end {
				if err == nil {
					err = fmt.Errorf("log assigned offset %d, expected %d", last, end)
				}
				// The speculative state is now ahead of the log: rebuild it.
				reply(done, outcome{err: fmt.Errorf("shard %d: %w: %v", s.opts.Shard, ErrNotDurable, err)})
				s.storageFailed(!errors.Is(err, log.ErrFailed), err)
				return
			}
		}
		s.next = last + 1
		s.appended = last
		s.lag.Store(s.appended - s.durableO)
		for i, rec := range res.Records {
			offset := first + int64(i)
			p := pendingRecord{offset: offset, rec: rec, key: maphash.Bytes(s.keySeed, rec.Key)}
			s.lastPending[p.key] = offset
			if s.opts.Scope != nil {
				if sc := s.opts.Scope(rec.Key); sc != nil {
					p.scope, p.scoped = s.scopeHash(sc), true
					s.lastPending[p.scope] = offset
				}
			}
			s.pending = append(s.pending, p)
		}
		s.m.appended(len(res.Records), res.Records)
	}
	// Wait for this op's records, or for whatever it may have read that is not durable yet:
	// everything appended, unless it appended nothing and named what it read.
	wait := s.appended
	if len(res.Records) == 0 && c.reads != nil && !c.readsAll && len(c.afterDurable) == 0 {
		wait = s.durableO
		for _, h := range c.reads {
			if o, ok := s.lastPending[h]; ok && o > wait {
				wait = o
			}
		}
	}
	s.release(w, wait, c.now)
}

// release answers w once offset is durable: at once when it already is, else from markDurable.
func (s *Shard[M]) release(w waiter, offset int64, now time.Time) {
	if offset > s.durableO {
		w.offset = offset
		w.appendedAt = now
		// Usually the last; an op waiting for fewer keys may go before others.
		i := sort.Search(len(s.waiters), func(i int) bool { return s.waiters[i].offset > offset })
		s.waiters = slices.Insert(s.waiters, i, w)
		return
	}
	for _, fn := range w.afterDurable {
		fn()
	}
	reply(w.done, w.out)
}

// splitBatches cuts recs into batches the log accepts, each made of whole units (see
// Result.Units), as few as filling them in order allows. It fails, before anything changed, when
// a single unit is too large or the units do not add up.
func splitBatches(bc log.BatchChecker, recs []log.Record, units []int) ([][]log.Record, error) {
	err := bc.CheckBatch(recs)
	if err == nil {
		return [][]log.Record{recs}, nil
	}
	if len(units) < 2 {
		return nil, err
	}
	ends := make([]int, len(units)) // ends[i]: index just past unit i
	n := 0
	for i, u := range units {
		if u <= 0 {
			return nil, fmt.Errorf("record unit of %d records: %w", u, err)
		}
		n += u
		ends[i] = n
	}
	if n != len(recs) {
		return nil, fmt.Errorf("record units cover %d of %d records: %w", n, len(recs), err)
	}
	var out [][]log.Record
	start, next := 0, 0 // next: the first unit not yet placed
	fits := func(u int) bool { return bc.CheckBatch(recs[start:ends[u]]) == nil }
	for next < len(units) {
		if !fits(next) {
			return nil, bc.CheckBatch(recs[start:ends[next]])
		}
		// Gallop to a unit that does not fit, then bisect: a batch costs O(its size · log).
		lo, step := next, 1
		hi := len(units)
		for lo+step < len(units) {
			if !fits(lo + step) {
				hi = lo + step
				break
			}
			lo += step
			step *= 2
		}
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if fits(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		out = append(out, recs[start:ends[lo]])
		start, next = ends[lo], lo+1
	}
	return out, nil
}

// compact starts a compaction of the log's sealed history on a goroutine of its own: its reads,
// writes and fsyncs must not hold the shard's requests. The log swaps the result in itself
// (only sealed segments are rewritten; appends go on meanwhile) and Close waits for it, so a
// reload or shutdown never runs beside it. At most one runs per shard.
func (s *Shard[M]) compact() {
	if s.State() != StateActive || s.log == nil || s.compacting {
		return
	}
	s.compacting = true
	l, gen := s.log, s.gen
	go func() {
		start := time.Now()
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("compaction panicked: %v", r)
				}
			}()
			return l.Compact()
		}()
		if err != nil {
			if !errors.Is(err, log.ErrClosed) {
				s.lg.Warn("log compaction failed; will retry after log.cleaner.backoff.ms", zap.Error(err))
			}
		} else {
			s.m.compactSeconds.Observe(time.Since(start).Seconds())
			s.lastCompacted.Store(time.Now().UnixNano())
		}
		s.post(s.prio, event[M]{kind: evCompacted, gen: gen})
	}()
}

// markDurable moves records up to offset into the durable machine and answers the operations
// that were waiting for them, in offset order.
func (s *Shard[M]) markDurable(offset int64) {
	if offset <= s.durableO {
		return
	}
	i := 0
	for ; i < len(s.pending) && s.pending[i].offset <= offset; i++ {
		p := s.pending[i]
		if s.mirrored {
			s.replaying = p.offset
			if err := s.durable.Replay(p.offset, p.rec); err != nil {
				s.lg.Error("replay into durable state failed; shard stops", zap.Int64("offset", p.offset), zap.Error(err))
				s.fail(err)
				return
			}
		}
		if s.lastPending[p.key] == p.offset {
			delete(s.lastPending, p.key)
		}
		if p.scoped && s.lastPending[p.scope] == p.offset {
			delete(s.lastPending, p.scope)
		}
	}
	s.replaying = -1
	s.pending = dropFront(s.pending, i)
	s.durableO = offset
	if i > 0 && s.opts.OnDurable != nil {
		s.opts.OnDurable(s.durable)
	}
	if s.opts.DurableUpTo != nil {
		s.opts.DurableUpTo(s.spec, offset)
	}
	s.lag.Store(max(s.appended-s.durableO, 0))
	now := time.Now()
	j := 0
	for ; j < len(s.waiters) && s.waiters[j].offset <= offset; j++ {
		w := s.waiters[j]
		for _, fn := range w.afterDurable {
			fn()
		}
		s.m.durableWait.Observe(now.Sub(w.appendedAt).Seconds())
		reply(w.done, w.out)
	}
	s.waiters = dropFront(s.waiters, j)
}

// dropFront removes the first n elements of q and keeps its array: re-slicing past them made
// every append after a few durable reports reallocate (growslice on each commit).
func dropFront[T any](q []T, n int) []T {
	k := copy(q, q[n:])
	clear(q[k:])
	return q[:k]
}

// storageFailed answers every waiting operation with a retriable error and drops speculative
// state. A recoverable loss reloads the shard from its log; anything else leaves it FAILED.
func (s *Shard[M]) storageFailed(recoverable bool, err error) {
	s.abandon(fmt.Errorf("shard %d: %w: %v", s.opts.Shard, ErrNotDurable, err))
	if !recoverable {
		s.fail(err)
		return
	}
	s.lg.Warn("storage write failed; reloading the shard from its log", zap.Error(err))
	s.closeLog()
	s.load()
}

// abandon fails everything that waits on this generation's speculative state.
func (s *Shard[M]) abandon(err error) {
	for _, w := range s.waiters {
		reply(w.done, outcome{err: err})
	}
	s.waiters = nil
	s.pending = nil
	clear(s.lastPending)
	s.lag.Store(0) // what was pending will never be reported durable
	for p := range s.promises {
		p.resolve(outcome{err: err})
	}
	s.promises = nil
	for _, t := range s.timers {
		t.t.Stop()
		t.lease.lose()
	}
	s.timers = nil
	s.moved() // the state tickets were taken on is gone
	if s.asyncEnd != nil {
		s.asyncEnd()
	}
}

// fail stops the shard for good. It counts and logs before anything observable changes, so
// that whoever sees the FAILED state or a failed request also finds the metric and the log line.
func (s *Shard[M]) fail(err error, fields ...zap.Field) {
	s.m.failures.WithLabelValues(s.opts.Kind).Inc()
	msg := "shard FAILED: its groups get NOT_COORDINATOR until the process is restarted"
	if s.opts.ReloadedByOwner {
		msg = "shard FAILED: its groups get NOT_COORDINATOR until this node loads it again, at its next heartbeat to the upstream group if the shard is still assigned to it"
	}
	s.lg.Error(msg, append([]zap.Field{zap.Error(err)}, fields...)...)
	s.setState(StateFailed)
	s.abandon(fmt.Errorf("shard %d: %w", s.opts.Shard, ErrFailed))
	s.closeLog()
}

func (s *Shard[M]) closeLog() {
	if s.log != nil {
		if err := s.log.Close(); err != nil {
			s.lg.Warn("closing shard log", zap.Error(err))
		}
		s.log = nil
	}
}

// loadReportEvery is how often a load waiting for a load slot says so. Tests change it.
var loadReportEvery = 5 * time.Second

// takeLoadSlot waits for a place among the LoadSlots, saying every loadReportEvery that it
// waits (a load that never begins is otherwise silent); false when the shard closes first.
func (s *Shard[M]) takeLoadSlot(slots chan struct{}, start time.Time) bool {
	t := time.NewTicker(loadReportEvery)
	defer t.Stop()
	for {
		select {
		case slots <- struct{}{}:
			return true
		case <-s.closing:
			return false
		case <-t.C:
			s.lg.Warn("shard load is waiting for a load slot: every one is taken by another shard's load",
				zap.Int("load_slots", cap(slots)), zap.Duration("elapsed", time.Since(start)))
		}
	}
}

func (s *Shard[M]) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// loadAborted ends a load that the shard's Close stopped (its ownership moved): not a failure,
// nothing was loaded, and Close's shutdown follows.
func (s *Shard[M]) loadAborted() {
	s.m.loads.WithLabelValues("aborted").Inc()
	s.lg.Info("shard load stopped: the shard is closing")
	s.closeLog()
	s.setState(StateClosed)
}

// load opens the log and replays it into fresh machines, as a new generation.
func (s *Shard[M]) load() {
	s.setState(StateLoading)
	s.moved()
	s.gen++
	gen := s.gen
	start := time.Now()
	s.mirrored = s.opts.OnDurable != nil
	s.spec = s.opts.New()
	if s.mirrored {
		s.durable = s.opts.New()
	}
	s.pending, s.waiters = nil, nil
	s.lastPending = map[uint64]int64{}
	s.timers = map[string]*timer[M]{}
	s.promises = map[*Promise]struct{}{}
	s.compacting = false // the previous log's Close waited for its compaction
	s.asyncCtx, s.asyncEnd = context.WithCancel(context.Background())
	l, err := s.opts.Backend.Open(s.opts.Shard, log.Callbacks{
		Durable: func(offset int64) { s.post(s.prio, event[M]{kind: evDurable, gen: gen, offset: offset}) },
		Failed:  func(err error) { s.post(s.prio, event[M]{kind: evFailed, gen: gen, err: err}) },
		Lost: func(err *log.WriteError, _ func()) {
			// The shard reloads instead of resuming: reopening rebuilds the speculative state.
			s.post(s.prio, event[M]{kind: evLost, gen: gen, err: err})
		},
	})
	if err != nil {
		s.m.loads.WithLabelValues("failed").Inc()
		s.fail(fmt.Errorf("open log: %w", err))
		return
	}
	s.log = l
	// A load may wait a long time (a kafka log's fence retries while the upstream is away); a
	// shard closed meanwhile (its ownership moved) must not finish it, or it would fence the
	// shard's new owner.
	if a, ok := l.(log.LoadAborter); ok {
		loaded := make(chan struct{})
		defer close(loaded)
		go func() {
			select {
			case <-s.closing:
				a.AbortLoad()
			case <-loaded:
			}
		}()
	}
	if slots := s.opts.LoadSlots; slots != nil {
		// A shard closed while it waits gives its turn up: waiting on would hold its Close (and
		// a disowning node's lock) until other shards' loads end, and then start a load nobody
		// wants.
		var held bool
		take := func() error {
			if !s.takeLoadSlot(slots, start) {
				return fmt.Errorf("shard %d: waiting for a load slot: %w", s.opts.Shard, log.ErrClosed)
			}
			held = true
			return nil
		}
		defer func() {
			if held {
				<-slots
			}
		}()
		// A log that waits on a remote cluster before it replays takes its slot once that wait
		// is over: slots bound replays, which use the CPU, and a load retrying its fence through
		// a partial outage held one, so that two of them stopped every other shard's load.
		if g, ok := l.(log.ReplayGate); ok {
			g.SetReplayGate(take)
		} else if take() != nil {
			s.loadAborted()
			return
		}
	}
	records := 0
	next, err := l.Load(func(offset int64, rec log.Record) error {
		records++
		s.replaying = offset
		if s.mirrored {
			if err := s.durable.Replay(offset, rec); err != nil {
				return fmt.Errorf("replay offset %d: %w", offset, err)
			}
		}
		if err := s.spec.Replay(offset, rec); err != nil {
			return fmt.Errorf("replay offset %d: %w", offset, err)
		}
		return nil
	})
	s.replaying = -1
	if err != nil && errors.Is(err, log.ErrClosed) && s.isClosing() {
		s.loadAborted()
		return
	}
	if err != nil {
		s.m.loads.WithLabelValues("failed").Inc()
		s.fail(fmt.Errorf("load: %w", err))
		return
	}
	s.next, s.appended, s.durableO = next, next-1, next-1
	if s.opts.OnDurable != nil {
		s.opts.OnDurable(s.durable)
	}
	s.setState(StateActive)
	took := time.Since(start)
	s.m.loads.WithLabelValues("ok").Inc()
	s.m.loadSeconds.Observe(took.Seconds())
	s.lg.Info("shard loaded", zap.Int("records", records), zap.Int64("next_offset", next), zap.Duration("took", took))
	if s.opts.OnLoaded != nil {
		s.opts.OnLoaded(&Ctx[M]{s: s, now: time.Now()}, s.spec)
	}
}

// shutdown answers what is still waiting: operations become durable while the log closes
// (Close flushes) unless the shard is told to stop waiting.
func (s *Shard[M]) shutdown() {
	s.setState(StateClosed)
	for len(s.waiters) > 0 && s.log != nil {
		select {
		case e := <-s.prio:
			if e.kind == evDurable || e.kind == evFailed || e.kind == evLost {
				s.guard(replyTo{}, e.kind.String(), func() { s.handle(e) })
			}
		case <-s.closing:
			s.abandon(fmt.Errorf("shard %d: %w", s.opts.Shard, ErrNotAvailable))
		}
	}
	s.abandon(fmt.Errorf("shard %d: %w", s.opts.Shard, ErrNotAvailable))
	s.closeOnceClosing()
	// The log's Close waits for its write in flight; once Close's caller stops waiting (a
	// disowned shard, a shutdown past its timeout) that write is given up, not left to reach
	// the upstream after an outage, when another load may have fenced this one.
	if a, ok := s.log.(log.Abandoner); ok {
		logClosed := make(chan struct{})
		defer close(logClosed)
		go func() {
			select {
			case <-s.stopWaiting:
				a.Abandon()
			case <-logClosed:
			}
		}()
	}
	s.closeLog()
	// Fail whatever was queued behind the close; whatever comes later is refused.
	for _, e := range s.normal.close() {
		reply(e.done, outcome{err: fmt.Errorf("shard %d: %w", s.opts.Shard, ErrNotAvailable)})
	}
}

func (s *Shard[M]) closeOnceClosing() { s.closingOnce.Do(func() { close(s.closing) }) }
