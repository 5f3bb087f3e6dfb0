package plugin

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func deterministic() BackoffConfig {
	return BackoffConfig{Initial: 30 * time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0}
}

// Spec §2.3 / §9.22: a client that never pushes is solicited at 0, 30, 90, 210, 450, 930, 1890,
// 3810 s and every 3600 s after (jitter 0), with a heartbeat every second.
func TestSpec9_22SolicitationsOfAClientThatNeverPushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBackoff(deterministic(), nil)
		start := time.Now()
		var at []int
		for time.Since(start) <= 3810*time.Second+2*3600*time.Second {
			if b.Solicit("orders", 3) {
				at = append(at, int(time.Since(start)/time.Second))
			}
			time.Sleep(time.Second)
		}
		want := []int{0, 30, 90, 210, 450, 930, 1890, 3810, 7410, 11010}
		if fmt.Sprint(at) != fmt.Sprint(want) {
			t.Fatalf("solicited at %v, want %v", at, want)
		}
	})
}

// Spec §2.4 worked timeline: solicit, transient failure (extend), re-solicit, never-push
// window, successful push (clear).
func TestSpec2_4WorkedTimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBackoff(deterministic(), nil)
		t0 := time.Now()
		at := func(sec int) { time.Sleep(t0.Add(time.Duration(sec) * time.Second).Sub(time.Now())) }
		entry := func(wantAttempts, wantNextSec int) {
			t.Helper()
			ep, n, next, ok := b.Entry("orders")
			if !ok || ep != 3 || n != wantAttempts || next.Sub(t0) != time.Duration(wantNextSec)*time.Second {
				t.Fatalf("entry {%d %d %v %v}, want {3 %d %ds}", ep, n, next.Sub(t0), ok, wantAttempts, wantNextSec)
			}
		}
		if !b.Solicit("orders", 3) { // t=0, A
			t.Fatal("first heartbeat must be solicited")
		}
		entry(0, 30)
		at(2)
		if b.Solicit("orders", 3) || b.Active("orders", 3) == false {
			t.Fatal("B at 2s: window active")
		}
		at(3)
		b.Extend("orders", 3) // A's push fails transiently
		entry(1, 63)
		at(60)
		if b.Solicit("orders", 3) {
			t.Fatal("60s: still in the extended window")
		}
		at(65)
		if !b.Solicit("orders", 3) {
			t.Fatal("65s: window over, B must be solicited")
		}
		entry(2, 185)
		at(190)
		if !b.Solicit("orders", 3) {
			t.Fatal("190s: A must be solicited")
		}
		entry(3, 430)
		at(191)
		b.Clear("orders", 3) // success record durable
		if _, _, _, ok := b.Entry("orders"); ok || b.Len() != 0 {
			t.Fatal("clear must remove the entry")
		}
	})
}

// Spec §2.3: an epoch advance restarts the chain; a late Extend for an older epoch leaves a
// newer window alone; Clear is epoch-scoped; ClearGroup is not; the window caps at Max.
func TestSpec2_3BackoffRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBackoff(deterministic(), nil)
		b.Solicit("g", 3)
		b.Extend("g", 3)
		b.Extend("g", 3)
		if _, n, _, _ := b.Entry("g"); n != 2 {
			t.Fatalf("attempts %d", n)
		}
		if !b.Solicit("g", 4) {
			t.Fatal("a new epoch must be solicited at once")
		}
		if ep, n, _, _ := b.Entry("g"); ep != 4 || n != 0 {
			t.Fatalf("epoch advance must restart at attempt 0, got {%d %d}", ep, n)
		}
		b.Extend("g", 3)
		if ep, n, _, _ := b.Entry("g"); ep != 4 || n != 0 {
			t.Fatal("a late extend for an older epoch changed a newer window")
		}
		b.Clear("g", 3)
		if _, _, _, ok := b.Entry("g"); !ok {
			t.Fatal("clear for another epoch must not remove the entry")
		}
		b.Extend("fresh", 7)
		if ep, n, _, ok := b.Entry("fresh"); !ok || ep != 7 || n != 0 {
			t.Fatal("extend without an entry arms attempt 0")
		}
		b.ClearGroup("g")
		b.ClearGroup("fresh")
		b.ClearGroup("none")
		if b.Len() != 0 {
			t.Fatalf("len %d after clearGroup", b.Len())
		}
		for i := 0; i < 20; i++ {
			b.Extend("cap", 1)
		}
		if _, _, next, _ := b.Entry("cap"); next.Sub(time.Now()) != time.Hour {
			t.Fatalf("window must cap at 1h, got %v", next.Sub(time.Now()))
		}
		// A window keyed at -2 (classic-join conversion, spec §6.6) is queried without arming.
		b.Extend("conv", -2)
		if !b.Active("conv", -2) || b.Active("conv", 5) || b.Active("nobody", -2) {
			t.Fatal("Active is wrong")
		}
	})
}

// Spec §2.3 delay table: with ±20 % jitter each window lies in [0.8, 1.2) of nominal, is whole
// milliseconds, and never exceeds the cap.
func TestSpec2_3DelayWithJitter(t *testing.T) {
	b := NewBackoff(DefaultBackoffConfig(), nil)
	nominal := []time.Duration{30, 60, 120, 240, 480, 960, 1920, 3600, 3600}
	for n, nom := range nominal {
		nom *= time.Second
		for i := 0; i < 200; i++ {
			d := b.Delay(n)
			lo := time.Duration(float64(nom) * 0.8)
			hi := time.Duration(float64(nom) * 1.2)
			if d < lo || d >= hi || d > time.Hour || d%time.Millisecond != 0 {
				t.Fatalf("attempt %d: delay %v outside [%v, %v) or above the cap", n, d, lo, hi)
			}
		}
	}
	zero := NewBackoff(BackoffConfig{}, nil).Config()
	if zero != DefaultBackoffConfig() {
		t.Fatalf("zero config must mean defaults, got %+v", zero)
	}
}

// Spec §9.21: ten members heartbeating concurrently for a fresh epoch: exactly one is solicited.
func TestSpec9_21ConcurrentSolicitSetsOneFlag(t *testing.T) {
	b := NewBackoff(DefaultBackoffConfig(), nil)
	var flagged atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Go(func() {
			if b.Solicit("orders", 1) {
				flagged.Add(1)
			}
		})
	}
	wg.Wait()
	if flagged.Load() != 1 {
		t.Fatalf("%d responses flagged, want 1", flagged.Load())
	}
}

// Entries of groups nobody heartbeats for are dropped once they are older than Max, so the map
// stays bounded by live groups.
func TestBackoffPrunesAbandonedEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBackoff(deterministic(), nil)
		b.Solicit("abandoned", 1)
		time.Sleep(3 * time.Hour)
		for i := 0; i < 100000; i++ {
			if _, _, _, ok := b.Entry("abandoned"); !ok {
				if b.Len() != i {
					t.Fatalf("len %d, want %d", b.Len(), i)
				}
				return
			}
			b.Solicit(fmt.Sprintf("live-%d", i), 1)
		}
		t.Fatal("abandoned entry never pruned")
	})
}
