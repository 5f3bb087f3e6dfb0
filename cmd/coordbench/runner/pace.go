package runner

import "time"

// paceMaxLag bounds how far a paced client's schedule may fall behind the clock. Sleeps
// overshoot (the Go runtime's idle poller waits in whole milliseconds, and other processes
// share the cores), so a client that is a little late sends its next operations at once until
// it is back on schedule; a client held up longer than this (a stall, a slow answer) drops the
// slots it missed instead of sending them all in one burst. So after any stall a client sends
// at most 1 + paceMaxLag/interval operations back to back.
const paceMaxLag = 5 * time.Millisecond

// pacer spaces one client's operations on a fixed schedule, one every interval, so that N
// clients together hold an aggregate rate whatever the server's answer time (an open loop as
// long as an answer takes less than the interval).
type pacer struct {
	interval time.Duration
	maxLag   time.Duration
	next     time.Time // the slot of the next operation
}

// newPacer paces client i of n at an aggregate rate (operations per second): each client at
// rate/n, their first slots spread evenly over one interval from start so that the clients
// do not all send at the same instants.
func newPacer(start time.Time, rate float64, i, n int, maxLag time.Duration) *pacer {
	interval := time.Duration(float64(n) / rate * float64(time.Second))
	if interval <= 0 {
		interval = 1
	}
	offset := time.Duration(float64(i) / rate * float64(time.Second))
	return &pacer{interval: interval, maxLag: maxLag, next: start.Add(offset)}
}

// wait returns how long the client waits from now before its next operation, and books that
// slot. A schedule more than maxLag behind now is moved up to now-maxLag first: the missed
// slots are dropped, not made up.
func (p *pacer) wait(now time.Time) time.Duration {
	if now.Sub(p.next) > p.maxLag {
		p.next = now.Add(-p.maxLag)
	}
	w := p.next.Sub(now)
	p.next = p.next.Add(p.interval)
	if w < 0 {
		return 0
	}
	return w
}
