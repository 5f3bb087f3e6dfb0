package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// countingBackend counts the loads its logs begin.
type countingBackend struct {
	*memlog.Backend
	loads atomic.Int32
}

func (b *countingBackend) Open(shard int32, cb log.Callbacks) (log.Log, error) {
	l, err := b.Backend.Open(shard, cb)
	return &countingLog{Log: l, loads: &b.loads}, err
}

type countingLog struct {
	log.Log
	loads *atomic.Int32
}

func (l *countingLog) Load(fn func(int64, log.Record) error) (int64, error) {
	l.loads.Add(1)
	return l.Log.Load(fn)
}

// A shard closed while its load waits for a load slot (every one taken by other shards' loads,
// which on log.backend=kafka may wait on the upstream for long) stops at once: its Close used
// to wait until a slot came free, holding a disowning node's lock, and the load then began
// after all, for a shard that had moved (its fence could take the shard from its new owner).
// The wait says so while it lasts, and the loading gauge shows it.
func TestCloseStopsALoadWaitingForALoadSlot(t *testing.T) {
	defer func(d time.Duration) { loadReportEvery = d }(loadReportEvery)
	loadReportEvery = 20 * time.Millisecond
	slots := make(chan struct{}, 1)
	slots <- struct{}{} // another shard's load that does not end
	b := &countingBackend{Backend: memlog.New()}
	core, logs := observer.New(zap.InfoLevel)
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b, LoadSlots: slots, Logger: zap.New(core)})
	s.Start()
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessageSnippet("waiting for a load slot").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a load waiting for a slot said nothing (logged %v)", logs.All())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := s.State(); st != StateLoading {
		t.Fatalf("state %v while waiting for a slot, want loading", st)
	}
	if g := s.gauges().loading; g <= 0 {
		t.Fatalf("loading gauge %v while waiting for a slot, want the time waited", g)
	}
	closeWithoutWaiting(t, s, "a load slot")
	<-slots // the other load ends
	time.Sleep(50 * time.Millisecond)
	if n := b.loads.Load(); n != 0 {
		t.Fatalf("a closed shard began %d loads once a slot came free", n)
	}
	if len(slots) != 0 {
		t.Fatal("a closed shard took a load slot")
	}
	if st := s.State(); st != StateClosed {
		t.Fatalf("state %v after Close, want closed", st)
	}
	if g := s.gauges().loading; g != 0 {
		t.Fatalf("loading gauge %v after Close, want 0", g)
	}
	if n := logs.FilterMessageSnippet("shard FAILED").Len(); n != 0 {
		t.Fatalf("a load stopped by Close FAILED the shard (%d lines)", n)
	}
}

// heldWriteBackend's logs hold their Close as a remote log does while a write is in flight on
// an unreachable upstream, until Abandon gives the write up.
type heldWriteBackend struct {
	*memlog.Backend
	abandoned chan struct{}
	once      sync.Once
}

func (b *heldWriteBackend) Open(shard int32, cb log.Callbacks) (log.Log, error) {
	l, err := b.Backend.Open(shard, cb)
	return &heldWriteLog{Log: l, b: b}, err
}

type heldWriteLog struct {
	log.Log
	b *heldWriteBackend
}

func (l *heldWriteLog) Abandon() { l.b.once.Do(func() { close(l.b.abandoned) }) }

func (l *heldWriteLog) Close() error {
	select {
	case <-l.b.abandoned:
	case <-time.After(30 * time.Second): // a kafka log's round gives up after the transaction timeout
	}
	return l.Log.Close()
}

// A shard whose Close stops waiting (Set.Disown, a lapsed lease: every waiter is answered at
// once) gives up its log's write in flight: the kafka log's producer otherwise kept retrying
// it through an upstream outage and sent it once the upstream was back, after the shard had
// been loaded again, which left a transaction open below the new load's marker and held that
// load (and the shard) for good (issue 18).
func TestCloseThatStopsWaitingAbandonsTheWriteInFlight(t *testing.T) {
	b := &heldWriteBackend{Backend: memlog.New(), abandoned: make(chan struct{})}
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b})
	s.Start()
	waitState(t, s, StateActive)
	b.Hold(true)
	written := make(chan error, 1)
	go func() { _, err := s.Write(context.Background(), set("a", 1)); written <- err }()
	for b.Pending(3) == 0 {
		time.Sleep(time.Millisecond)
	}
	closeWithoutWaiting(t, s, "the log's write in flight")
	select {
	case <-b.abandoned:
	default:
		t.Fatal("the write in flight was not given up")
	}
	if err := <-written; !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("the write in flight was answered %v, want ErrNotAvailable", err)
	}
}

// gatedBackend's logs wait on "the network" at the start of Load (a kafka log's fence and
// marker) and then pass the replay gate, as log.ReplayGate logs do; waited is closed once a
// load got past the network part.
type gatedBackend struct {
	*memlog.Backend
	waited chan struct{}
}

func (b *gatedBackend) Open(shard int32, cb log.Callbacks) (log.Log, error) {
	l, err := b.Backend.Open(shard, cb)
	return &gatedLog{Log: l, waited: b.waited}, err
}

type gatedLog struct {
	log.Log
	gate   func() error
	waited chan struct{}
}

func (l *gatedLog) SetReplayGate(gate func() error) { l.gate = gate }

func (l *gatedLog) Load(fn func(int64, log.Record) error) (int64, error) {
	close(l.waited)
	if l.gate != nil {
		if err := l.gate(); err != nil {
			return 0, err
		}
	}
	return l.Log.Load(fn)
}

// A log that waits on a remote cluster before it replays (the kafka log's fence and marker,
// retried through a partial outage) does that wait without a load slot, and takes one only to
// replay: slots bound the replays, which use the CPU, and two loads retrying their fence used
// to hold both slots of a 2-CPU node, so that every other shard's load waited on them (issue 18).
func TestLoadWaitsOnTheNetworkWithoutALoadSlot(t *testing.T) {
	slots := make(chan struct{}, 1)
	slots <- struct{}{} // another shard's replay
	b := &gatedBackend{Backend: memlog.New(), waited: make(chan struct{})}
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b, LoadSlots: slots})
	s.Start()
	t.Cleanup(func() {
		stopNow, cancel := context.WithCancel(context.Background())
		cancel()
		s.Close(stopNow)
	})
	select {
	case <-b.waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the load's network part waited for a load slot")
	}
	if st := s.State(); st != StateLoading {
		t.Fatalf("state %v before the replay had a slot, want loading", st)
	}
	<-slots // the other replay ends
	waitState(t, s, StateActive)
	if len(slots) != 0 {
		t.Fatal("the load kept its slot after it ended")
	}
}

// closeWithoutWaiting closes s with a context that has already ended, as a Disown does, and
// fails the test unless Close returns without waiting for what (blocked elsewhere) to end.
func closeWithoutWaiting(t *testing.T, s *Shard[*counters], what string) {
	t.Helper()
	stopNow, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan struct{})
	go func() { s.Close(stopNow); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("Close waited for %s", what)
	}
}
