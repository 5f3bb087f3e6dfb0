package plugin

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// BackoffConfig shapes the per-group solicitation window (spec §2.3). The defaults equal
// Kafka's hard-coded constants.
type BackoffConfig struct {
	Initial    time.Duration // group.streams.topology.description.backoff.initial.ms
	Max        time.Duration // group.streams.topology.description.backoff.max.ms
	Multiplier float64       // 2, as in Kafka
	Jitter     float64       // group.streams.topology.description.backoff.jitter, ± fraction
}

// DefaultBackoffConfig is 30 s doubling to 1 h with ±20 % jitter.
func DefaultBackoffConfig() BackoffConfig {
	return BackoffConfig{Initial: 30 * time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.2}
}

const backoffStripes = 64

// Backoff is the in-memory, per-group window that throttles how often the coordinator asks
// members of a group to push their topology description (spec §2.3). At most one entry per
// group: {epoch, attempts, nextAttemptAt}. It is never persisted; a restart starts empty.
//
// All methods are safe for concurrent use and cost one striped lock and one map lookup, so the
// heartbeat path can call Solicit on every eligible heartbeat.
type Backoff struct {
	cfg     BackoffConfig
	expMax  float64
	now     func() time.Time
	jitter  func() float64 // U[0,1)
	seed    maphash.Seed
	stripes [backoffStripes]backoffStripe
	size    atomic.Int64
}

type backoffStripe struct {
	mu        sync.Mutex
	m         map[string]backoffEntry
	lastPrune time.Time
}

type backoffEntry struct {
	epoch    int32
	attempts int
	next     time.Time
}

// NewBackoff returns an empty back-off map. now is the clock (nil: time.Now, which
// testing/synctest fakes). A zero cfg means DefaultBackoffConfig; otherwise zero Initial, Max
// and Multiplier take the defaults and Jitter is used as given (0: deterministic windows).
func NewBackoff(cfg BackoffConfig, now func() time.Time) *Backoff {
	def := DefaultBackoffConfig()
	if cfg == (BackoffConfig{}) {
		cfg = def
	}
	if cfg.Initial <= 0 {
		cfg.Initial = def.Initial
	}
	if cfg.Max <= 0 {
		cfg.Max = def.Max
	}
	if cfg.Max < cfg.Initial {
		cfg.Max = cfg.Initial
	}
	if cfg.Multiplier <= 1 {
		cfg.Multiplier = def.Multiplier
	}
	if cfg.Jitter < 0 || cfg.Jitter >= 1 {
		cfg.Jitter = def.Jitter
	}
	if now == nil {
		now = time.Now
	}
	b := &Backoff{cfg: cfg, now: now, jitter: rand.Float64, seed: maphash.MakeSeed()}
	b.expMax = math.Log(float64(cfg.Max)/float64(cfg.Initial)) / math.Log(cfg.Multiplier)
	for i := range b.stripes {
		b.stripes[i].m = map[string]backoffEntry{}
	}
	return b
}

// Config returns the effective configuration.
func (b *Backoff) Config() BackoffConfig { return b.cfg }

// Delay is the window after attempt n (0-based): initial·multiplier^min(n, expMax), times a
// jitter factor drawn from [1-jitter, 1+jitter), floored to whole milliseconds, capped at max.
// As in Kafka's ExponentialBackoff the jitter is applied before the cap.
func (b *Backoff) Delay(attempts int) time.Duration {
	ms := float64(b.cfg.Initial/time.Millisecond) * math.Pow(b.cfg.Multiplier, math.Min(float64(attempts), b.expMax))
	if j := b.cfg.Jitter; j > 0 {
		ms *= 1 - j + b.jitter()*2*j
	}
	d := time.Duration(math.Floor(ms)) * time.Millisecond
	return min(d, b.cfg.Max)
}

func (b *Backoff) stripe(group string) *backoffStripe {
	return &b.stripes[maphash.String(b.seed, group)%backoffStripes]
}

// Solicit is the heartbeat's atomic check-and-arm (spec §2.3 solicit). It returns false, and
// changes nothing, while a window for this epoch is active. Otherwise it arms the next window
// (continuing the chain when the expired entry is for the same epoch, restarting at attempt 0
// for any other epoch) and returns true: the caller sets TopologyDescriptionRequired.
func (b *Backoff) Solicit(group string, epoch int32) bool {
	now := b.now()
	s := b.stripe(group)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[group]
	if ok && e.epoch == epoch && now.Before(e.next) {
		return false
	}
	b.armLocked(s, group, e, ok, epoch, now)
	return true
}

// Extend arms or lengthens the window after a transient plugin failure on a push at epoch, or
// after the outcome write failed (spec §2.3 extend). An entry for a newer epoch is left alone,
// so a late callback cannot overwrite a newer window.
func (b *Backoff) Extend(group string, epoch int32) {
	now := b.now()
	s := b.stripe(group)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[group]
	if ok && e.epoch > epoch {
		return
	}
	b.armLocked(s, group, e, ok, epoch, now)
}

func (b *Backoff) armLocked(s *backoffStripe, group string, e backoffEntry, ok bool, epoch int32, now time.Time) {
	n := 0
	if ok && e.epoch == epoch {
		n = e.attempts + 1
	}
	if !ok {
		b.size.Add(1)
	}
	s.m[group] = backoffEntry{epoch: epoch, attempts: n, next: now.Add(b.Delay(n))}
	b.pruneLocked(s, now)
}

// Active reports, without arming anything, whether a window for this epoch is running, i.e.
// whether Solicit would return false now. Used where an operation is throttled by the window
// without soliciting (spec §6.6, classic-join conversion keyed at epoch -2).
func (b *Backoff) Active(group string, epoch int32) bool {
	now := b.now()
	s := b.stripe(group)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[group]
	return ok && e.epoch == epoch && now.Before(e.next)
}

// Clear removes the group's entry if it is for this epoch (spec §2.3 clear: after the success
// or permanent-failure record is durable).
func (b *Backoff) Clear(group string, epoch int32) {
	s := b.stripe(group)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[group]; ok && e.epoch == epoch {
		delete(s.m, group)
		b.size.Add(-1)
	}
}

// ClearGroup removes the group's entry whatever its epoch (spec §2.3 clearGroup: plugin delete
// succeeded, group gone, or the group left this coordinator).
func (b *Backoff) ClearGroup(group string) {
	s := b.stripe(group)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[group]; ok {
		delete(s.m, group)
		b.size.Add(-1)
	}
}

// Entry returns the group's entry, for tests and diagnostics.
func (b *Backoff) Entry(group string) (epoch int32, attempts int, next time.Time, ok bool) {
	s := b.stripe(group)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[group]
	return e.epoch, e.attempts, e.next, ok
}

// Groups lists the groups with an entry, so that the coordinator can drop those of groups that
// no longer exist (ClearGroup) without waiting for the lazy prune.
func (b *Backoff) Groups() []string {
	out := make([]string, 0, b.Len())
	for i := range b.stripes {
		s := &b.stripes[i]
		s.mu.Lock()
		for g := range s.m {
			out = append(out, g)
		}
		s.mu.Unlock()
	}
	return out
}

// Len is the number of groups with an entry.
func (b *Backoff) Len() int { return int(b.size.Load()) }

// pruneLocked bounds the map: an entry whose window ended more than Max ago belongs to a group
// nobody has heartbeated for since (a live group is re-solicited when its window ends, which
// refreshes the entry), so dropping it changes at most the length of that group's next window.
// It runs at most once per Max per stripe.
func (b *Backoff) pruneLocked(s *backoffStripe, now time.Time) {
	if now.Sub(s.lastPrune) < b.cfg.Max {
		return
	}
	s.lastPrune = now
	cutoff := now.Add(-b.cfg.Max)
	for g, e := range s.m {
		if e.next.Before(cutoff) {
			delete(s.m, g)
			b.size.Add(-1)
		}
	}
}
