package runtime

import (
	"math"
	"sync/atomic"
	"time"
)

// A Ticket lets the caller of a steady operation answer the next identical request without a
// round trip through the shard (issues 12 and 17: a steady heartbeat spent most of its server
// CPU on handing the request to the shard goroutine and back, not on the group logic).
//
// An operation takes a ticket (Ctx.Ticket) when it changed nothing and its answer would be the
// same for the same request until something else runs on the shard. The ticket is valid while
// no write operation that may change its answer has run since, the shard is ACTIVE and it is
// still the shard the request is routed to (Shard.Valid). Every write that does not take a
// ticket, every timer operation, every append and every reload moves the shard's version and
// ends every ticket of the shard; the exception is a write that declared its scope
// (Ctx.Scoped: an OffsetCommit changes only its group's offsets), which moves only its scope's
// version, ending the tickets taken in that scope and no other (issue 12: a group's commits
// must not send the heartbeats of the other groups of its shard through the shard goroutine).
// Its answer was released only after everything it read was durable, so an answer repeated from
// a valid ticket shows durable state only: the same answer the shard would have given had the
// request been ordered before whatever runs next. Nothing of the machine is read off the shard.
//
// The ticket also carries a lease on one timer (a member's session): Shard.Valid pushes that
// timer's deadline back from the caller's goroutine, as the operation itself would have done
// with Ctx.Extend. The lease is lost when the timer fires, is cancelled or replaced, or the shard
// reloads: a repeat then goes through the shard, which orders it after whatever the timer did.
type Ticket struct {
	ver   *atomic.Uint64
	at    uint64
	scope *atomic.Uint64 // the version of the scope it was taken in; nil: none
	scAt  uint64
	state *atomic.Int32
	lease *lease
}

// Valid reports whether the ticket's answer may be repeated now, and if so extends its timer
// to d from now. false: send the request through the shard (which may hand out a new ticket).
// s is the shard the request would be sent to now, looked up as for sending it: a ticket of
// any other shard is not valid, so a shard this node stopped serving (replaced by a NotOwned
// placeholder while its old runtime still closes, or behind a closed serving gate) answers
// nothing from its tickets.
func (s *Shard[M]) Valid(t *Ticket, d time.Duration) bool {
	if t == nil || t.ver != &s.ver || State(t.state.Load()) != StateActive || t.ver.Load() != t.at ||
		(t.scope != nil && t.scope.Load() != t.scAt) {
		return false
	}
	return t.lease.extend(d)
}

// leaseLost marks a lease that no longer extends anything.
const leaseLost = math.MinInt64

// lease is the part of a timer's deadline that goroutines other than the shard's may move:
// nanoseconds after base (monotonic), or leaseLost. The shard goroutine claims it (sets
// leaseLost) before it runs the timer's operation or drops the timer, so an extension either
// happened before the decision to fire, and is seen by it, or fails.
type lease struct {
	base time.Time
	at   atomic.Int64
}

func (l *lease) extend(d time.Duration) bool {
	if l == nil {
		return false
	}
	now := time.Since(l.base)
	want := int64(now + d)
	for {
		v := l.at.Load()
		if v == leaseLost || v <= int64(now) {
			// Lost, or due: the timer is about to fire (or firing); let the shard order this
			// request after it.
			return false
		}
		if v >= want || l.at.CompareAndSwap(v, want) {
			return true
		}
	}
}

// raise moves the lease to at least deadline (the shard extended the timer itself).
func (l *lease) raise(deadline time.Time) {
	want := int64(deadline.Sub(l.base))
	for {
		v := l.at.Load()
		if v == leaseLost || v >= want || l.at.CompareAndSwap(v, want) {
			return
		}
	}
}

// claim takes the lease back for the shard if it still holds v (read with at.Load): true means
// no extension can succeed any more.
func (l *lease) claim(v int64) bool { return l.at.CompareAndSwap(v, leaseLost) }

// lose ends the lease whatever its value (the timer was cancelled, replaced or dropped).
func (l *lease) lose() {
	if l != nil {
		l.at.Store(leaseLost)
	}
}

// Ticket hands out a ticket for this operation's answer (see Ticket), with a lease on the timer
// armed under key; nil when no timer is armed under it. scope names what the answer reads (a
// group id): a write declared Scoped to another scope leaves the ticket valid; "" names none,
// and only shard-wide moves end the ticket. Taking one tells the shard that the operation
// changed nothing, so it does not move the shard's version; an operation that returns records
// moves it anyway, and the ticket it took is then never valid.
func (c *Ctx[M]) Ticket(key, scope string) *Ticket {
	s := c.s
	t := s.timers[key]
	if t == nil {
		return nil
	}
	c.steady = true
	if t.lease == nil {
		t.lease = &lease{base: s.base}
		t.lease.at.Store(int64(t.deadline.Sub(s.base)))
	}
	tk := &Ticket{ver: &s.ver, at: s.ver.Load(), state: &s.state, lease: t.lease}
	if scope != "" {
		v := s.scopes[scope]
		if v == nil {
			// Made here, on the shard goroutine, and published to other goroutines only inside
			// the ticket, which reaches them through the operation's reply.
			v = new(atomic.Uint64)
			if s.scopes == nil {
				s.scopes = make(map[string]*atomic.Uint64)
			}
			s.scopes[scope] = v
		}
		tk.scope, tk.scAt = v, v.Load()
	}
	return tk
}

// Scoped declares that the operation changes nothing that the answer of a ticket taken in
// another scope depends on: only scope's tickets end, not the shard's. Declare it only for an
// operation whose every possible change was read to be within scope (what it appends and
// replays, the timers it arranges, the state any ticket-taking operation of another scope
// reads); anything undeclared ends every ticket of the shard. An operation that declared it and
// took a ticket itself never finds that ticket valid when its scope is the ticket's.
func (c *Ctx[M]) Scoped(scope string) { c.scoped, c.scope = true, scope }

// moved ends every ticket of the shard: the shard's version moves, and the scopes' versions,
// which only matter while it stays, are dropped.
func (s *Shard[M]) moved() {
	s.ver.Add(1)
	if len(s.scopes) > 0 {
		s.scopes = nil
	}
}
