package runtime

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime/debug"
	"time"
)

// Ctx is what an operation may do besides reading state: learn the time, arrange timers, start
// work off the shard, park a response, and act once its records are durable. It is valid only
// during the operation, on the shard goroutine.
type Ctx[M Machine] struct {
	s            *Shard[M]
	now          time.Time
	afterDurable []func()
	promises     []*Promise // created by this operation
	reads        []uint64   // hashes of the record keys named by Reads; nil: not named
	readsAll     bool       // a ReadsScope the shard cannot resolve: wait for everything
	steady       bool       // took a Ticket: changed nothing, so the shard's version stays
	scoped       bool       // declared by Scoped: moves scope's version instead of the shard's
	scope        string
}

// Now is the time the operation started; use it instead of time.Now so that one operation sees
// one instant.
func (c *Ctx[M]) Now() time.Time { return c.now }

// ShardID is the shard the operation runs on.
func (c *Ctx[M]) ShardID() int32 { return c.s.opts.Shard }

// AfterDurable runs fn on the shard goroutine once this operation's records — or, if it has
// none, everything appended before it (even with Reads) — are durable, just before its response
// is released. It
// never runs if they are not made durable.
func (c *Ctx[M]) AfterDurable(fn func()) { c.afterDurable = append(c.afterDurable, fn) }

// Reads names a record key whose state the operation's answer depends on. An operation that
// appends no records and names every key it read is answered as soon as the last pending
// record of those keys is durable, instead of after everything appended before it: a heartbeat
// does not wait for another group's fsync, and still sees its own group's writes only once they
// are durable. Name every key read (a key with no record yet too: its first record may be
// pending); an operation that names none, or registers AfterDurable work, waits for everything.
func (c *Ctx[M]) Reads(key []byte) { c.reads = append(c.reads, maphash.Bytes(c.s.keySeed, key)) }

// ReadsScope is Reads for every record key that Options.Scope maps to scope (a group's
// membership records, say): an operation whose answer depends on a whole group names one scope
// instead of one key per member, and waits for the last pending record of any of them. On a
// shard without Options.Scope it cannot tell a scope's records, so the operation waits for
// everything appended before it.
func (c *Ctx[M]) ReadsScope(scope []byte) {
	if c.s.opts.Scope == nil {
		c.readsAll = true
		return
	}
	c.reads = append(c.reads, c.s.scopeHash(scope))
}

type timer[M Machine] struct {
	t   *time.Timer
	seq uint64
	op  WriteOp[M]
	// deadline is when op is due; firesAt is when t is set to go off, never after deadline. A
	// replacement that moves the deadline later (a session timer pushed back by every
	// heartbeat) only records it: the fire at firesAt sets t again for the rest, so a group's
	// heartbeats cost no timer work per beat.
	deadline, firesAt time.Time
	// lease, once a Ticket was taken on this timer, lets other goroutines push deadline back;
	// it ends (lose) whenever the timer's operation or existence changes.
	lease *lease
}

// Schedule arranges for op to run as a write operation after d, replacing any timer with the
// same key. Timers are not persisted: OnLoaded re-arms them after a load, and a reload drops
// them.
func (c *Ctx[M]) Schedule(key string, d time.Duration, op WriteOp[M]) {
	s := c.s
	deadline := time.Now().Add(d)
	if old := s.timers[key]; old != nil {
		// A new operation: a ticket's lease on the old one must not extend it.
		old.lease.lose()
		old.lease = nil
		if !old.firesAt.After(deadline) {
			old.op, old.deadline = op, deadline
			return
		}
		old.t.Stop()
	}
	c.arm(key, d, deadline, op)
}

// Extend moves an armed timer to run after d, keeping its operation, and reports whether one
// was armed. It is Schedule for a caller whose operation would be the same as the armed one
// (a session timer pushed back by a heartbeat): the caller then need not build it.
func (c *Ctx[M]) Extend(key string, d time.Duration) bool {
	old := c.s.timers[key]
	if old == nil {
		return false
	}
	deadline := time.Now().Add(d)
	if !old.firesAt.After(deadline) {
		old.deadline = deadline
		if old.lease != nil {
			old.lease.raise(deadline)
		}
		return true
	}
	old.t.Stop()
	old.lease.lose() // brought forward: a fresh timer, whose ticket is taken anew
	c.arm(key, d, deadline, old.op)
	return true
}

// arm sets a new timer for key, replacing the map entry.
func (c *Ctx[M]) arm(key string, d time.Duration, deadline time.Time, op WriteOp[M]) {
	s := c.s
	s.timerSeq++
	seq, gen := s.timerSeq, s.gen
	t := &timer[M]{seq: seq, op: op, deadline: deadline, firesAt: deadline}
	t.t = time.AfterFunc(d, func() {
		s.normal.post(event[M]{kind: evTimer, gen: gen, key: key, seq: seq}, s.closing)
	})
	s.timers[key] = t
}

// Cancel removes a timer. A fire already on its way is ignored because its sequence no longer
// matches.
func (c *Ctx[M]) Cancel(key string) {
	if t := c.s.timers[key]; t != nil {
		t.t.Stop()
		t.lease.lose()
		delete(c.s.timers, key)
	}
}

// Scheduled reports whether a timer with this key is armed.
func (c *Ctx[M]) Scheduled(key string) bool { _, ok := c.s.timers[key]; return ok }

// Go runs work off the shard goroutine (a plugin call, say) and feeds the operation it returns,
// if any, back into the shard as an ordinary write. The work's context is cancelled when the
// shard reloads or closes, and a result arriving after a reload is dropped: the operation
// must re-validate state anyway.
func (c *Ctx[M]) Go(work func(ctx context.Context) WriteOp[M]) {
	s := c.s
	gen, ctx := s.gen, s.asyncCtx
	go func() {
		defer func() {
			// The work runs on its own goroutine, where a panic would end the process; it is the
			// shard's code, so its shard fails as if the panic had happened on it.
			if v := recover(); v != nil {
				s.post(s.prio, event[M]{kind: evPanic, gen: gen, err: &goPanic{value: v, stack: debug.Stack()}})
			}
		}()
		op := work(ctx)
		if op == nil {
			return
		}
		s.normal.post(event[M]{kind: evWrite, gen: gen, write: op}, s.closing)
	}()
}

// goPanic carries a recovered panic of a Ctx.Go work function to the shard goroutine.
type goPanic struct {
	value any
	stack []byte
}

func (p *goPanic) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// NewPromise returns a response that is completed later, by another operation (a JoinGroup
// parked until the rebalance completes). The caller of Write waits for it after the creating
// operation's records are durable. If the shard reloads or closes first, the promise fails
// with ErrNotAvailable (ErrFailed if the shard failed).
func (c *Ctx[M]) NewPromise() *Promise {
	p := &Promise{ch: make(chan outcome, 1)}
	c.s.promises[p] = struct{}{}
	c.promises = append(c.promises, p)
	return p
}

// dropPromises fails the promises this operation created, when its records were refused.
func (c *Ctx[M]) dropPromises(err error) {
	for _, p := range c.promises {
		delete(c.s.promises, p)
		p.resolve(outcome{err: err})
	}
}

// Resolve completes a promise created on this shard. Call it from an operation, normally inside
// AfterDurable so that the response reflects durable state. Resolving twice is a no-op.
func (c *Ctx[M]) Resolve(p *Promise, resp any, err error) {
	if _, ok := c.s.promises[p]; !ok {
		return
	}
	delete(c.s.promises, p)
	p.resolve(outcome{resp: resp, err: err})
}

// Promise is a response completed later.
type Promise struct {
	ch chan outcome
}

func (p *Promise) resolve(o outcome) {
	select {
	case p.ch <- o:
	default:
	}
}

// Wait blocks until the promise is resolved or ctx ends.
func (p *Promise) Wait(ctx context.Context) (any, error) {
	select {
	case o := <-p.ch:
		return o.resp, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
