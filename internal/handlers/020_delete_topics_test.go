package handlers

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// DeleteTopics starts at most one background drop at a time however many deletions arrive,
// and a deletion during a pass gets a pass that starts after it.
func TestSingleFlightRunsOneAtATimeAndOnceMore(t *testing.T) {
	var s singleFlight
	var running, maxRunning, passes atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	fn := func() {
		n := running.Add(1)
		if n > maxRunning.Load() {
			maxRunning.Store(n)
		}
		if passes.Add(1) == 1 {
			started <- struct{}{}
			<-release // hold the first pass while more calls arrive
		}
		running.Add(-1)
	}
	s.run(fn)
	<-started
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { s.run(fn) })
	}
	wg.Wait()
	close(release)
	for {
		s.mu.Lock()
		idle := !s.running
		s.mu.Unlock()
		if idle {
			break
		}
		runtime.Gosched()
	}
	if maxRunning.Load() != 1 || passes.Load() != 2 {
		t.Fatalf("max concurrent %d, passes %d; want 1 and 2", maxRunning.Load(), passes.Load())
	}
}
