package wire

import (
	"context"
	"sync"
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

	queued  prometheus.Gauge
	waiting prometheus.Gauge
	waits   prometheus.Counter

	mu         sync.Mutex
	used       int64
	waiters    []*budgetWaiter
	largeWaits int // waiters above smallFrame
	lastLog    time.Time
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
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coordinatord_queued_request_bytes",
			Help: "Bytes of requests read (or reserved for reading) and not yet answered, and of answers being written, counted against queued.max.request.bytes.",
		}),
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
		reg.MustRegister(b.queued, b.waiting, b.waits)
	}
	return b
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
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fitsLocked(n, n > smallFrame)
}

// fitsLocked reserves n bytes if they fit now and no wait must go first.
func (b *Budget) fitsLocked(n int64, ordered bool) bool {
	if b.limit <= 0 || b.used+n <= b.limit && (!ordered || b.largeWaits == 0) {
		b.used += n
		b.queued.Set(float64(b.used))
		return true
	}
	return false
}

func (b *Budget) acquire(ctx context.Context, n int64, ordered bool) error {
	b.mu.Lock()
	if b.fitsLocked(n, ordered) {
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ordered: ordered, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	if ordered {
		b.largeWaits++
	}
	b.waiting.Inc()
	b.waits.Inc()
	if now := time.Now(); now.Sub(b.lastLog) >= budgetLogEvery {
		b.lastLog = now
		b.log.Warn(BudgetExhaustedMessage,
			zap.Int64("queued_bytes", b.used), zap.Int64("queued_max_request_bytes", b.limit),
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
		b.used -= n
	default:
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		if ordered {
			b.largeWaits--
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
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *Budget) grantLocked() {
	kept := b.waiters[:0]
	largeBlocked := false
	for _, w := range b.waiters {
		if (!w.ordered || !largeBlocked) && b.used+w.n <= b.limit {
			b.used += w.n
			if w.ordered {
				b.largeWaits--
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
	b.queued.Set(float64(b.used))
}
