package segment

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// roundSizes records the groups of every journal round.
type roundSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (r *roundSizes) observe(groups int) {
	r.mu.Lock()
	r.sizes = append(r.sizes, groups)
	r.mu.Unlock()
}

func (r *roundSizes) get() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sizes)
}

// holdThreeBehindOne makes round 1 carry shard 0's group alone while shards 1-3 queue behind
// it, then lets round 1 finish: the next round expects 4 groups (round 1's and the 3 queued).
func holdThreeBehindOne(t *testing.T, e *env, s *shared) *syncGate {
	t.Helper()
	g := newSyncGate(e, 2)
	s.logs[0].mustAppend(t, rec("a", "1"))
	g.waitEntered(t, 1)
	for sh := int32(1); sh < 4; sh++ {
		s.logs[sh].mustAppend(t, rec(fmt.Sprintf("k%d", sh), "1"))
	}
	waitQueued(t, s.store.journals[0], 3)
	g.results[1] <- nil
	s.logs[0].rec.waitDurable(t, 0)
	return g
}

// Closed-loop committers: the shard answered in one round comes back while the shards that
// queued during it wait, and the next round waits for it instead of making it pay one fsync
// more. The clock never moves here, so only the arrival can end the wait.
func TestJournalGatherWaitsForTheShardsOfTheLastRound(t *testing.T) {
	e := newMemEnv(t)
	var rounds roundSizes
	e.opts.RoundObserver = rounds.observe
	e.opts.JournalWait = time.Hour
	e.opts.clock = func() time.Duration { return 0 }
	s := e.openShared(t, 0, 1, 2, 3)
	defer s.store.Close()
	g := holdThreeBehindOne(t, e, s)
	// The round of shards 1-3 must not start (its fsync would be the gate's second) until
	// shard 0 is back. A round that did not wait starts within microseconds; correct code
	// never does, so the window only gives broken code time to show.
	select {
	case <-g.entered[2]:
		g.results[2] <- nil // let the store close
		t.Fatal("the next round started without the group expected from the last round's shard")
	case <-time.After(100 * time.Millisecond):
	}
	s.logs[0].mustAppend(t, rec("a", "2")) // shard 0's client commits again
	g.waitEntered(t, 2)
	g.results[2] <- nil
	s.logs[0].rec.waitDurable(t, 1)
	for sh := int32(1); sh < 4; sh++ {
		s.logs[sh].rec.waitDurable(t, 0)
	}
	if got := rounds.get(); !slices.Equal(got, []int{1, 4}) {
		t.Fatalf("rounds carried %v groups, want [1 4]", got)
	}
}

// The wait is bounded: a round whose expected groups do not come starts after JournalWait,
// and once rounds carry one group a lone commit does not wait at all. The clock steps 1 µs per
// reading, so the readings count the virtual time waited.
func TestJournalGatherIsBoundedAndSparesALoneCommit(t *testing.T) {
	e := newMemEnv(t)
	var rounds roundSizes
	e.opts.RoundObserver = rounds.observe
	const wait = 50 * time.Microsecond
	e.opts.JournalWait = wait
	var readings atomic.Int64
	e.opts.clock = func() time.Duration { return time.Duration(readings.Add(1)) * time.Microsecond }
	s := e.openShared(t, 0, 1, 2, 3)
	defer s.store.Close()
	g := holdThreeBehindOne(t, e, s)
	// Shard 0 does not come back: the round of shards 1-3 starts once the wait is over.
	g.waitEntered(t, 2)
	g.results[2] <- nil
	for sh := int32(1); sh < 4; sh++ {
		s.logs[sh].rec.waitDurable(t, 0)
	}
	// The last round carried 3 groups: a lone commit now waits for the others, in vain, once.
	s.logs[0].mustAppend(t, rec("a", "2"))
	s.logs[0].rec.waitDurable(t, 1)
	// Each wait reads the clock once at its start and once per poll until wait has passed.
	if n, most := readings.Load(), 2*int64(wait/time.Microsecond+2); n > most {
		t.Fatalf("two bounded waits read the clock %d times: more than %d µs waited", n, most)
	}
	// Rounds carry one group now: a lone commit starts its round at once.
	before := readings.Load()
	s.logs[0].mustAppend(t, rec("a", "3"))
	s.logs[0].rec.waitDurable(t, 2)
	if n := readings.Load() - before; n != 0 {
		t.Fatalf("a lone commit after lone rounds waited (%d clock readings)", n)
	}
	if got := rounds.get(); !slices.Equal(got, []int{1, 3, 1, 1}) {
		t.Fatalf("rounds carried %v groups, want [1 3 1 1]", got)
	}
}

// Many closed-loop committers through waiting rounds: every acknowledged record survives a
// power failure, and the rounds carried exactly the groups the shards committed.
func TestJournalGatherKeepsEveryAcknowledgedGroup(t *testing.T) {
	e := newMemEnv(t)
	var rounds roundSizes
	e.opts.RoundObserver = rounds.observe
	e.opts.JournalWait = 200 * time.Microsecond
	s := e.openShared(t, 0, 1, 2, 3)
	const commits = 200
	var wg sync.WaitGroup
	for sh, o := range s.logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range commits {
				off, err := o.log.Append([]log.Record{rec(fmt.Sprintf("g%d", sh), fmt.Sprint(i))})
				if err != nil {
					t.Errorf("shard %d append: %v", sh, err)
					return
				}
				if !durableWithin(o.rec, off, 10*time.Second) {
					t.Errorf("shard %d: offset %d not durable within 10s", sh, off)
					return
				}
			}
		}()
	}
	wg.Wait()
	groups := 0
	for _, n := range rounds.get() {
		groups += n
	}
	// Each commit waited for its own durability before the next: one group per commit.
	if groups != 4*commits {
		t.Fatalf("rounds carried %d groups for %d commits", groups, 4*commits)
	}
	e.mem.Crash(nil)
	s.store.Close()
	for sh := int32(0); sh < 4; sh++ {
		got, _ := e.reload(sh)
		if len(got) != commits {
			t.Fatalf("shard %d has %d of %d acknowledged records after the crash", sh, len(got), commits)
		}
	}
}

// durableWithin is recorder.waitDurable for goroutines other than the test's (which must not
// call t.Fatal).
func durableWithin(r *recorder, off int64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	timer := time.AfterFunc(d, func() { r.mu.Lock(); r.cond.Broadcast(); r.mu.Unlock() })
	defer timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.durable < off {
		if time.Now().After(deadline) {
			return false
		}
		r.cond.Wait()
	}
	return true
}
