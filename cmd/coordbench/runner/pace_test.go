package runner

import (
	"math"
	"testing"
	"time"
)

// simulate drives one pacer against a simulated clock: every wait is slept, plus overshoot
// for each non-zero sleep, and every operation takes opTime. It returns the slots booked
// before the clock passes d, and the longest run of operations sent back to back (wait 0).
func simulate(p *pacer, start time.Time, d, opTime, overshoot time.Duration, stallAt, stall time.Duration) (ops, longestBurst int) {
	now := start
	burst := 0
	stalled := false
	for {
		if !stalled && stall > 0 && now.Sub(start) >= stallAt {
			now = now.Add(stall)
			stalled = true
		}
		w := p.wait(now)
		if w > 0 {
			now = now.Add(w + overshoot)
			burst = 0
		} else {
			burst++
			longestBurst = max(longestBurst, burst)
		}
		if now.Sub(start) >= d {
			return ops, longestBurst
		}
		ops++
		now = now.Add(opTime)
	}
}

// The aggregate rate is what the clients send, whether the answers are fast or take most of the
// interval, and whether each sleep overshoots by a millisecond (the runtime's poller
// granularity) or not.
func TestPacerHoldsTheRate(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, c := range []struct {
		name              string
		clients           int
		rate              float64
		opTime, overshoot time.Duration
	}{
		{"10 clients, fast answers", 10, 20_000, 50 * time.Microsecond, 0},
		{"10 clients, sleeps overshoot 1ms", 10, 20_000, 50 * time.Microsecond, time.Millisecond},
		{"1000 clients, answers take most of the interval", 1000, 20_000, 40 * time.Millisecond, 0},
		{"1000 clients, sleeps overshoot 1ms", 1000, 20_000, 100 * time.Microsecond, time.Millisecond},
		{"100 clients, slow rate", 100, 500, time.Millisecond, 200 * time.Microsecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			const d = 10 * time.Second
			total := 0
			for i := range c.clients {
				ops, _ := simulate(newPacer(start, c.rate, i, c.clients, paceMaxLag), start, d, c.opTime, c.overshoot, 0, 0)
				total += ops
			}
			got := float64(total) / d.Seconds()
			if math.Abs(got-c.rate)/c.rate > 0.01 {
				t.Errorf("aggregate rate %.0f/s, want %.0f/s within 1%%", got, c.rate)
			}
		})
	}
}

// A client held up for a second (a stalled answer, a descheduled process) drops the slots it
// missed: it sends at most 1 + maxLag/interval operations back to back, then is on schedule
// again, instead of making up the second's worth at once.
func TestPacerDoesNotBurstAfterAStall(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, c := range []struct {
		clients int
		rate    float64
	}{{10, 20_000}, {1000, 20_000}, {1, 100}} {
		p := newPacer(start, c.rate, 0, c.clients, paceMaxLag)
		bound := 1 + int(paceMaxLag/p.interval)
		ops, burst := simulate(p, start, 3*time.Second, 10*time.Microsecond, 0, time.Second, time.Second)
		if burst > bound {
			t.Errorf("%d clients at %.0f/s: %d operations back to back after a 1s stall, want at most %d", c.clients, c.rate, burst, bound)
		}
		// Two seconds of slots were open (the stalled one is lost), give or take the bound.
		want := 2 * c.rate / float64(c.clients)
		if math.Abs(float64(ops)-want) > float64(bound)+1 {
			t.Errorf("%d clients at %.0f/s: %d operations in 3s with a 1s stall, want %.0f", c.clients, c.rate, ops, want)
		}
	}
}

// The clients' first slots are spread over one interval, not all at the start.
func TestPacerSpreadsTheClients(t *testing.T) {
	start := time.Unix(1000, 0)
	const n, rate = 4, 1000.0
	for i := range n {
		p := newPacer(start, rate, i, n, paceMaxLag)
		if w, want := p.wait(start), time.Duration(i)*time.Millisecond; w != want {
			t.Errorf("client %d first waits %s, want %s", i, w, want)
		}
		if p.interval != 4*time.Millisecond {
			t.Errorf("client %d interval %s, want 4ms", i, p.interval)
		}
	}
}
