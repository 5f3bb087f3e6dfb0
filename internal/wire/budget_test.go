package wire

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func gaugeValue(g prometheus.Metric) float64 {
	var m dto.Metric
	g.Write(&m)
	return m.GetGauge().GetValue()
}

// A reservation that does not fit waits and is granted when bytes are released. Large frames
// are granted in arrival order; a small one is granted whenever it fits, even past a waiting
// large one (a peer slowly sending a large frame must not stall everyone's small requests).
// The gauges show the queued bytes and the waiting connections.
func TestBudgetWaitsInOrderAndReleases(t *testing.T) {
	const S = smallFrame + 1 // the smallest large frame
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(10*S, nil, nil)
		ctx := context.Background()
		if err := b.Acquire(ctx, 6*S); err != nil {
			t.Fatal(err)
		}
		granted := make(chan string, 2)
		go func() { b.Acquire(ctx, 5*S); granted <- "first large" }()
		synctest.Wait()
		// 3S would fit now, but it arrived after the 5S frame: it must not overtake it.
		go func() { b.Acquire(ctx, 3*S); granted <- "second large" }()
		synctest.Wait()
		if len(granted) != 0 {
			t.Fatalf("%s granted before anything was released", <-granted)
		}
		if err := b.Acquire(ctx, smallFrame); err != nil {
			t.Fatal(err) // fits: granted at once, past the waiting large frames
		}
		if got := gaugeValue(b.waiting); got != 2 {
			t.Fatalf("%v connections waiting, want 2", got)
		}
		if got := gaugeValue(b.queuedGauge()); got != 6*S+smallFrame {
			t.Fatalf("queued %v, want %d", got, 6*S+smallFrame)
		}
		b.Release(2 * S) // room for the first large frame only
		synctest.Wait()
		if n := len(granted); n != 1 {
			t.Fatalf("after the first release %d of 2 waiters granted, want 1", n)
		}
		if first := <-granted; first != "first large" {
			t.Fatalf("%s granted first", first)
		}
		b.Release(4 * S)
		synctest.Wait()
		if n := len(granted); n != 1 {
			t.Fatalf("the second large frame was not granted after the second release")
		}
		if got := gaugeValue(b.queuedGauge()); got != 8*S+smallFrame {
			t.Fatalf("queued %v, want %d", got, 8*S+smallFrame)
		}
		if got := gaugeValue(b.waiting); got != 0 {
			t.Fatalf("%v connections waiting, want 0", got)
		}
	})
}

// A waiter that gives up (shutdown) leaves the queue, and the ones behind it are not stuck.
func TestBudgetCancelledWaiterUnblocksTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const S = smallFrame + 1
		b := NewBudget(100*S, nil, nil)
		b.Acquire(context.Background(), 90*S)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- b.Acquire(ctx, 100*S) }()
		synctest.Wait()
		granted := make(chan struct{})
		go func() { b.Acquire(context.Background(), 10*S); close(granted) }()
		synctest.Wait()
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("cancelled wait reported success")
		}
		<-granted
		if got := gaugeValue(b.queuedGauge()); got != 100*S {
			t.Fatalf("queued %v, want %d", got, 100*S)
		}
	})
}

// Unbounded (queued.max.request.bytes <= 0, Kafka's default) never waits but still counts.
func TestBudgetUnboundedCounts(t *testing.T) {
	b := NewBudget(-1, nil, nil)
	b.Acquire(context.Background(), 1<<40)
	if got := gaugeValue(b.queuedGauge()); got != 1<<40 {
		t.Fatalf("queued %v", got)
	}
	b.Release(1 << 40)
}

// A request frame that needs nearly the whole budget waits for it; meanwhile requests up to
// smallFrame and answers of any size that fit are granted, so one peer claiming a huge frame
// under steady traffic cannot hold back the large answers of requests already served (a
// JoinGroup leader's) nor ordinary requests.
func TestBudgetHugeWaitingFrameDoesNotHoldBackAnswers(t *testing.T) {
	const S = smallFrame + 1
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(10*S, nil, nil)
		ctx := context.Background()
		b.Acquire(ctx, 2*S) // traffic in flight
		huge := make(chan struct{})
		go func() { b.Acquire(ctx, 9*S); close(huge) }()
		synctest.Wait()
		if err := b.AcquireAnswer(ctx, 3*S); err != nil {
			t.Fatal(err)
		}
		if err := b.Acquire(ctx, smallFrame); err != nil {
			t.Fatal(err)
		}
		select {
		case <-huge:
			t.Fatal("the huge frame was granted without room")
		default:
		}
		b.Release(2*S + 3*S + smallFrame)
		<-huge
	})
}

// TryAcquire grants what Acquire would grant at once and refuses, reserving nothing, what
// Acquire would wait for: a frame that does not fit, and a large frame while another large one
// waits (its turn comes first). A small frame still passes a waiting large one.
func TestBudgetTryAcquireNeverJumpsTheQueue(t *testing.T) {
	const S = smallFrame + 1
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(10*S, nil, nil)
		if !b.TryAcquire(8 * S) {
			t.Fatal("8 of 10 free units refused")
		}
		if b.TryAcquire(3 * S) {
			t.Fatal("3 units granted with 2 free")
		}
		if got := gaugeValue(b.queuedGauge()); got != 8*S {
			t.Fatalf("a refused TryAcquire left %v bytes queued, want %v", got, 8*S)
		}
		waiting := make(chan struct{})
		go func() { b.Acquire(context.Background(), 3*S); close(waiting) }()
		synctest.Wait()
		b.Release(6 * S) // 8 free now, but the waiting large frame is granted its 3 first
		<-waiting
		go func() { b.Acquire(context.Background(), 9*S) }() // waits: 5 free
		synctest.Wait()
		if b.TryAcquire(2 * S) {
			t.Fatal("a large frame jumped ahead of a waiting large frame")
		}
		if !b.TryAcquire(smallFrame) {
			t.Fatal("a small frame that fits was held behind a waiting large one")
		}
		b.Release(2*S + 3*S + smallFrame) // lets the 9 through before the test ends
	})
}

// A connection that starts waiting for room just as another releases it gets the room:
// reservations and releases take no lock while nobody waits, and a release that comes after
// the waiter found no room but before it queued must not be missed (nothing else would ever
// wake it).
func TestBudgetReleaseAsAWaiterQueuesIsNotMissed(t *testing.T) {
	b := NewBudget(8, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Acquire(ctx, 8); err != nil {
		t.Fatal(err)
	}
	testHookBudgetWaiting = func() { b.Release(8) }
	defer func() { testHookBudgetWaiting = nil }()
	if err := b.Acquire(ctx, 8); err != nil {
		t.Fatalf("the room released as the reservation began to wait was missed: %v", err)
	}
	if got := gaugeValue(b.queuedGauge()); got != 8 {
		t.Fatalf("queued %v, want 8", got)
	}
}
