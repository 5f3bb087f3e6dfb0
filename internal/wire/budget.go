package wire

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Budget bounds the bytes of requests read and not yet answered, across every connection and
// listener of the process: Kafka's queued.max.request.bytes. A connection reserves its next
// frame's size as soon as it has read the size prefix and before anything is allocated for the
// frame; while the reservation does not fit, the connection stops reading from its socket (TCP
// flow control then holds the peer back) and nothing is dropped. Once the request is handled
// its reservation is exchanged for one of its answer's size, taken before the answer is
// encoded, and released when the answer has been written or the connection closes.
//
// Frames larger than smallFrame are granted in arrival order among themselves, so a large frame
// is not starved by other large ones. Frames up to smallFrame (nearly every coordinator request)
// and answers are granted whenever they fit: a peer that claims a large frame and then sends its
// body slowly, or not at all, must not stall everyone else's requests, nor the answers of
// requests already handled (a JoinGroup leader's answer can be large).
// Because a whole frame is reserved at once, a connection never holds part of the budget while
// it waits for the rest, so connections cannot deadlock one another.
type Budget struct {
	limit int64 // <= 0: unbounded, only counted
	log   *zap.Logger

	waiting prometheus.Gauge
	waits   prometheus.Counter

	// used is the bytes reserved. A reservation that fits is taken with a compare-and-swap and
	// a release with an add, without mu: every request reserves and releases twice (its frame,
	// then its answer), and a mutex and a gauge update per step were 2% of a steady
	// heartbeat's CPU (issue 12). The gauge reads used when scraped.
	used atomic.Int64
	// pending counts the waiters queued and those about to queue; a release that sees none
	// takes no lock. A waiter counts itself before it looks at used for the last time (under
	// mu), and a release changes used before it looks at pending, so one of the two always
	// sees the other: either the waiter finds the released bytes or the release grants it.
	pending atomic.Int32
	// largeWaits counts the waiters above smallFrame (changed under mu, read without it).
	largeWaits atomic.Int32

	mu      sync.Mutex
	waiters []*budgetWaiter
	lastLog time.Time
}

// smallFrame is the largest request frame that may be granted ahead of a waiting larger one.
// Coordinator requests above 1 MiB are rare (a topology push, a commit of tens of thousands of
// partitions); everything below passes a large frame that cannot be served yet.
const smallFrame = 1 << 20

type budgetWaiter struct {
	n       int64
	ordered bool // a large request: granted in arrival order with the other large ones
	ready   chan struct{}
}

// BudgetExhaustedMessage is the WARN line logged (at most once per budgetLogEvery) when a
// connection starts waiting for the budget.
const BudgetExhaustedMessage = "queued.max.request.bytes exhausted: connections wait before reading their next request"

// budgetLogEvery rate-limits the "budget exhausted" line: one per window is enough to act on,
// and a flood of waiting connections must not become a flood of log lines.
const budgetLogEvery = 10 * time.Second

// NewBudget returns a budget of limit bytes (<= 0: unbounded). Its series are registered on reg
// (nil: not registered).
func NewBudget(limit int64, reg prometheus.Registerer, log *zap.Logger) *Budget {
	if log == nil {
		log = zap.NewNop()
	}
	b := &Budget{
		limit: limit,
		log:   log,
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coordinatord_connections_waiting_for_budget",
			Help: "Connections that stopped reading because their next request does not fit queued.max.request.bytes.",
		}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_budget_waits_total",
			Help: "Requests whose reading was held back until they fit queued.max.request.bytes.",
		}),
	}
	if reg != nil {
		reg.MustRegister(b.queuedGauge(), b.waiting, b.waits)
	}
	return b
}

// queuedGauge is the series of the bytes reserved, read when scraped.
func (b *Budget) queuedGauge() prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "coordinatord_queued_request_bytes",
		Help: "Bytes of requests read (or reserved for reading) and not yet answered, and of answers being written, counted against queued.max.request.bytes.",
	}, func() float64 { return float64(b.used.Load()) })
}

// Limit is the budget in bytes; <= 0 means unbounded.
func (b *Budget) Limit() int64 { return b.limit }

// Acquire reserves n bytes for a request frame, waiting until they fit or ctx is done. n must
// not exceed a positive limit (the caller refuses such a frame: it could never fit).
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	return b.acquire(ctx, n, n > smallFrame)
}

// AcquireAnswer reserves n bytes for an answer: like Acquire, but never queued behind a large
// request, since the request it answers has already been served.
func (b *Budget) AcquireAnswer(ctx context.Context, n int64) error {
	return b.acquire(ctx, n, false)
}

// TryAcquire reserves n bytes for a request frame if they fit now, as Acquire would without
// waiting; false reserves nothing. The connection loop learns from it that it did not wait,
// so the peer's idle deadline needs no second look.
func (b *Budget) TryAcquire(n int64) bool {
	return b.reserve(n, n > smallFrame)
}

// TryAcquireAnswer is TryAcquire for an answer (AcquireAnswer without waiting).
func (b *Budget) TryAcquireAnswer(n int64) bool {
	return b.reserve(n, false)
}

// reserve takes n bytes if they fit now and, for an ordered (large) frame, no large frame
// waits ahead of it.
func (b *Budget) reserve(n int64, ordered bool) bool {
	if b.limit <= 0 {
		b.used.Add(n)
		return true
	}
	if ordered && b.largeWaits.Load() > 0 {
		return false
	}
	return b.reserveUnordered(n)
}

func (b *Budget) reserveUnordered(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// testHookBudgetWaiting runs, in tests, when a reservation has found no room and is about to
// wait.
var testHookBudgetWaiting func()

func (b *Budget) acquire(ctx context.Context, n int64, ordered bool) error {
	if b.reserve(n, ordered) {
		return nil
	}
	// From here on every release takes mu and grants the waiters; one that came before
	// (testHookBudgetWaiting stands there in tests) is seen by the second look, under mu.
	b.pending.Add(1)
	if testHookBudgetWaiting != nil {
		testHookBudgetWaiting()
	}
	b.mu.Lock()
	if b.reserve(n, ordered) {
		b.pending.Add(-1)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ordered: ordered, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	if ordered {
		b.largeWaits.Add(1)
	}
	b.waiting.Inc()
	b.waits.Inc()
	if now := time.Now(); now.Sub(b.lastLog) >= budgetLogEvery {
		b.lastLog = now
		b.log.Warn(BudgetExhaustedMessage,
			zap.Int64("queued_bytes", b.used.Load()), zap.Int64("queued_max_request_bytes", b.limit),
			zap.Int("connections_waiting", len(b.waiters)), zap.Int64("frame_bytes", n),
			zap.String("action", "requests are delayed, not lost; if this persists, raise queued.max.request.bytes where memory allows or find the clients sending large requests (coordinatord_requests_total, coordinatord_bytes_received_total)"))
	}
	b.mu.Unlock()

	select {
	case <-w.ready:
		b.waiting.Dec()
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	select {
	case <-w.ready: // granted while we gave up: hand it back
		b.used.Add(-n)
	default:
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		b.pending.Add(-1)
		if ordered {
			b.largeWaits.Add(-1)
		}
	}
	b.grantLocked() // we may have been the first large frame, holding back the others
	b.mu.Unlock()
	b.waiting.Dec()
	return ctx.Err()
}

// Release returns n bytes reserved by Acquire.
func (b *Budget) Release(n int64) {
	if n == 0 {
		return
	}
	b.used.Add(-n)
	if b.pending.Load() == 0 {
		return
	}
	b.mu.Lock()
	b.grantLocked()
	b.mu.Unlock()
}

func (b *Budget) grantLocked() {
	kept := b.waiters[:0]
	largeBlocked := false
	for _, w := range b.waiters {
		if (!w.ordered || !largeBlocked) && b.reserveUnordered(w.n) {
			b.pending.Add(-1)
			if w.ordered {
				b.largeWaits.Add(-1)
			}
			close(w.ready)
			continue
		}
		largeBlocked = largeBlocked || w.ordered
		kept = append(kept, w)
	}
	clear(b.waiters[len(kept):])
	b.waiters = kept
	if len(b.waiters) == 0 {
		b.waiters = nil // let a once-long queue's array go
	}
}
