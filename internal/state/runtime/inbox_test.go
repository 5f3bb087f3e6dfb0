package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
)

// A shard queues up to its bound behind a busy operation, answers all of them, and refuses the
// one past the bound with ErrOverloaded, however small its inbox started.
func TestInboxQueuesUpToItsBoundThenRefuses(t *testing.T) {
	const bound = 300
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: memlog.New(), InboxSize: bound})
	s.Start()
	waitState(t, s, StateActive)
	t.Cleanup(func() { s.Close(context.Background()) })
	ctx := context.Background()

	running, stall := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(stall) })
	t.Cleanup(release) // before the Close above, which waits for the stalled operation
	go s.Read(ctx, func(*counters) (any, error) { close(running); <-stall; return nil, nil })
	<-running

	var wg sync.WaitGroup
	errs := make(chan error, bound)
	for range bound {
		wg.Go(func() {
			if _, err := s.Write(ctx, incr("n")); err != nil {
				errs <- err
			}
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.normal.len() < bound {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d operations queued", s.normal.len(), bound)
		}
		time.Sleep(time.Millisecond)
	}
	// Bounded: an operation queued past the bound would wait for the stalled shard.
	past, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := s.Write(past, incr("n")); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("operation past the bound of %d: %v, want ErrOverloaded", bound, err)
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a queued operation failed: %v", err)
	}
	if v, _ := s.Read(ctx, get("n")); v != int64(bound) {
		t.Fatalf("n = %v after %d queued increments", v, bound)
	}
}

func testEvent(seq uint64) event[*counters] { return event[*counters]{kind: evTimer, seq: seq} }

// The ring is what is queued, not the bound: nothing before the first event, a doubling ring
// during a burst, and back down once the burst is over and traffic is light again.
func TestInboxRingFollowsWhatIsQueued(t *testing.T) {
	q := newInbox[*counters](4096)
	if q.ring != nil {
		t.Fatalf("an unused inbox holds a ring of %d events", len(q.ring))
	}
	q.offer(testEvent(0))
	if len(q.ring) != inboxFirstRing {
		t.Fatalf("after one event the ring holds %d, want %d", len(q.ring), inboxFirstRing)
	}
	q.take()

	// A burst of 1000, taken in order.
	for i := range 1000 {
		if ok, _ := q.offer(testEvent(uint64(i))); !ok {
			t.Fatalf("event %d of a burst under the bound refused", i)
		}
	}
	if len(q.ring) != 1024 {
		t.Fatalf("a burst of 1000 left a ring of %d, want 1024", len(q.ring))
	}
	for i := range 1000 {
		if e, ok := q.take(); !ok || e.seq != uint64(i) {
			t.Fatalf("take %d: %v %v", i, e.seq, ok)
		}
	}

	// Light traffic afterwards: one or two queued at a time.
	for i := range 4096 {
		q.offer(testEvent(uint64(i)))
		if i%2 == 0 {
			q.offer(testEvent(uint64(i)))
			q.take()
		}
		q.take()
	}
	if len(q.ring) != inboxFirstRing {
		t.Fatalf("light traffic after a burst left a ring of %d, want %d", len(q.ring), inboxFirstRing)
	}

	// Steady traffic that fills its ring does not make it shrink and grow again.
	for range 10 {
		for i := range inboxFirstRing {
			q.offer(testEvent(uint64(i)))
		}
		for range inboxFirstRing {
			q.take()
		}
	}
	if len(q.ring) != inboxFirstRing {
		t.Fatalf("a ring filled by steady traffic is %d, want %d", len(q.ring), inboxFirstRing)
	}
}

// Timer fires and async results wait for room rather than being refused, and give up when the
// shard stops; after close nothing is queued and what was queued is handed back.
func TestInboxPostWaitsForRoom(t *testing.T) {
	q := newInbox[*counters](2)
	q.offer(testEvent(1))
	q.offer(testEvent(2))
	if ok, closed := q.offer(testEvent(3)); ok || closed {
		t.Fatalf("offer to a full inbox: queued %v, closed %v", ok, closed)
	}

	posted := make(chan struct{})
	go func() { q.post(testEvent(3), nil); close(posted) }()
	select {
	case <-posted:
		t.Fatal("post to a full inbox returned before there was room")
	case <-time.After(20 * time.Millisecond):
	}
	q.take()
	within(t, "a post once there is room", func() { <-posted })
	for _, want := range []uint64{2, 3} {
		if e, _ := q.take(); e.seq != want {
			t.Fatalf("took %d, want %d", e.seq, want)
		}
	}

	// Two posters blocked on a full inbox both get in as room appears.
	q.offer(testEvent(4))
	q.offer(testEvent(5))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { q.post(testEvent(6), nil) })
	}
	for q.waitingNow() < 2 {
		time.Sleep(time.Millisecond)
	}
	q.take()
	q.take()
	within(t, "two posters into two freed slots", wg.Wait)
	if n := q.len(); n != 2 {
		t.Fatalf("%d queued after two posts into two freed slots", n)
	}

	stop := make(chan struct{})
	gaveUp := make(chan struct{})
	go func() { q.post(testEvent(7), stop); close(gaveUp) }()
	close(stop)
	within(t, "a post told to stop", func() { <-gaveUp })

	left := q.close()
	if len(left) != 2 || left[0].seq != 6 || left[1].seq != 6 {
		t.Fatalf("close handed back %+v", left)
	}
	if ok, closed := q.offer(testEvent(8)); ok || !closed {
		t.Fatalf("offer after close: queued %v, closed %v", ok, closed)
	}
	q.post(testEvent(9), nil) // returns at once
	if n := q.len(); n != 0 {
		t.Fatalf("%d queued after close", n)
	}
}

func (q *inbox[M]) waitingNow() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// within fails the test when wait does not return soon, instead of hanging it.
func within(t *testing.T, what string, wait func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting after 5 s", what)
	}
}
