package runtime

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
)

// bubbleShard starts a shard inside the calling synctest bubble and waits until it is loaded.
func bubbleShard() *Shard[*counters] {
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: memlog.New()})
	s.Start()
	synctest.Wait()
	return s
}

// timersShard is bubbleShard with a 10 s timer armed under each key, for tickets to lease.
func timersShard(keys ...string) *Shard[*counters] {
	s := bubbleShard()
	s.Write(context.Background(), func(c *Ctx[*counters], _ *counters) Result {
		for i, k := range keys {
			c.Schedule(k, 10*time.Second, set("fenced", int64(i+1)))
		}
		return Result{}
	})
	return s
}

// A ticket stays valid while only reads and other ticket-taking (steady) operations run, and
// stops being valid once any other write runs, including one that took a ticket but appended.
func TestTicketValidUntilAnotherWriteRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, ctx := timersShard("session", "other"), context.Background()
		ticket := func(key string, recs bool) *Ticket {
			v, _ := s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
				r := Result{Response: c.Ticket(key, "")}
				if recs {
					r.Records = []log.Record{setRecord("n", 1)}
				}
				return r
			})
			return v.(*Ticket)
		}
		tk := ticket("session", false)
		if !s.Valid(tk, 10*time.Second) {
			t.Fatal("a fresh ticket is not valid")
		}
		s.Read(ctx, get("n"))
		ticket("other", false)
		if !s.Valid(tk, 10*time.Second) {
			t.Fatal("a read or another steady operation ended the ticket")
		}
		s.Write(ctx, func(*Ctx[*counters], *counters) Result { return Result{} })
		if s.Valid(tk, 10*time.Second) {
			t.Fatal("the ticket is still valid after a write that took none")
		}
		tk = ticket("session", false)
		appending := ticket("other", true)
		if s.Valid(appending, 10*time.Second) || s.Valid(tk, 10*time.Second) {
			t.Fatal("a ticket is valid after an operation appended records")
		}
		if ticket("none", false) != nil {
			t.Fatal("a ticket on a key with no timer")
		}
		s.Close(ctx)
	})
}

// Valid pushes the leased timer back as an extension on the shard would: the timer's
// operation runs only once the extensions stop, a session after the last one. A ticket whose
// timer fired, was cancelled or replaced extends nothing and is not valid, even when nothing
// else moved the shard's version.
func TestTicketLeaseDelaysTimerAndEndsWithIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, ctx := bubbleShard(), context.Background()
		steady := func(fn func(c *Ctx[*counters]) *Ticket) *Ticket {
			v, _ := s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result { return Result{Response: fn(c)} })
			return v.(*Ticket)
		}
		fired := func() int64 {
			synctest.Wait()
			v, _ := s.Read(ctx, get("fired"))
			return v.(int64)
		}
		s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
			c.Schedule("session", time.Second, incr("fired"))
			return Result{}
		})
		tk := steady(func(c *Ctx[*counters]) *Ticket { return c.Ticket("session", "") })
		for i := 0; i < 6; i++ { // every 500 ms for 3 s, a 1 s session each time
			time.Sleep(500 * time.Millisecond)
			if !s.Valid(tk, time.Second) {
				t.Fatalf("extension %d refused", i)
			}
		}
		if n := fired(); n != 0 {
			t.Fatalf("the timer ran %d times while its lease was extended", n)
		}
		time.Sleep(900 * time.Millisecond)
		if n := fired(); n != 0 {
			t.Fatal("the timer ran before a session had passed since the last extension")
		}
		time.Sleep(200 * time.Millisecond)
		if n := fired(); n != 1 {
			t.Fatalf("the timer ran %d times a session after the last extension, want 1", n)
		}
		if s.Valid(tk, time.Second) {
			t.Fatal("a ticket is valid after its timer fired")
		}

		// Cancelled or replaced by operations that themselves took tickets (so the version
		// stays): the lease ends with the timer it was on.
		s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
			c.Schedule("a", time.Hour, incr("fired"))
			c.Schedule("b", time.Hour, incr("fired"))
			return Result{}
		})
		ta := steady(func(c *Ctx[*counters]) *Ticket { return c.Ticket("a", "") })
		tb := steady(func(c *Ctx[*counters]) *Ticket { return c.Ticket("b", "") })
		steady(func(c *Ctx[*counters]) *Ticket {
			c.Cancel("a")
			c.Schedule("b", 2*time.Hour, set("fired", 9))
			return c.Ticket("b", "")
		})
		if s.Valid(ta, time.Second) {
			t.Fatal("a ticket is valid after its timer was cancelled")
		}
		if s.Valid(tb, time.Second) {
			t.Fatal("a ticket is valid after its timer was replaced by another operation")
		}
		s.Close(ctx)
	})
}

// A write that declared its scope (Scoped) ends the tickets taken in that scope only: a scoped
// write of group B, records and all, leaves group A's ticket valid; one of A ends A's; a write
// that declared nothing ends both.
func TestScopedWriteEndsOnlyItsScopesTickets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, ctx := timersShard("a/session", "b/session"), context.Background()
		ticket := func(key, scope string) *Ticket {
			v, _ := s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result { return Result{Response: c.Ticket(key, scope)} })
			return v.(*Ticket)
		}
		commit := func(scope string) {
			s.Write(ctx, func(c *Ctx[*counters], _ *counters) Result {
				if scope != "" {
					c.Scoped(scope)
				}
				return Result{Records: []log.Record{setRecord("offsets/"+scope, 1)}}
			})
		}
		ta, tb := ticket("a/session", "a"), ticket("b/session", "b")
		commit("b")
		if !s.Valid(ta, 10*time.Second) {
			t.Fatal("a write scoped to group b ended group a's ticket")
		}
		if s.Valid(tb, 10*time.Second) {
			t.Fatal("a write scoped to group b left b's own ticket valid")
		}
		tb = ticket("b/session", "b")
		commit("a")
		if s.Valid(ta, 10*time.Second) {
			t.Fatal("a write scoped to group a left a's own ticket valid")
		}
		if !s.Valid(tb, 10*time.Second) {
			t.Fatal("a write scoped to group a ended group b's ticket")
		}
		ta = ticket("a/session", "a")
		commit("")
		if s.Valid(ta, 10*time.Second) || s.Valid(tb, 10*time.Second) {
			t.Fatal("a ticket is valid after a write that declared no scope")
		}
		// Scopes' versions restart once the shard's moved: a ticket taken since is valid, and
		// ends with its scope's next write as before.
		ta = ticket("a/session", "a")
		if !s.Valid(ta, 10*time.Second) {
			t.Fatal("a ticket taken after an unscoped write is not valid")
		}
		commit("a")
		if s.Valid(ta, 10*time.Second) {
			t.Fatal("a write scoped to group a left a's ticket of a fresh scope version valid")
		}
		s.Close(ctx)
	})
}
