package shard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Set is every group shard of this process. With Deferred, a shard is served only once Own
// loads it; until then, and after Disown, it answers ErrNotOwned.
type Set struct {
	shards []atomic.Pointer[runtime.Shard[*Machine]]
	// build makes shard i's runtime, loadable (own) or a NotOwned placeholder.
	build func(i int32, own bool) *runtime.Shard[*Machine]
	// serving, when set, gates every lookup: false makes every shard answer as not owned (a
	// node whose ownership lease lapsed must not serve what it may have lost).
	serving atomic.Pointer[func() bool]
	// disowned[i] is shard i's placeholder, built once.
	disowned []*runtime.Shard[*Machine]
	mu       sync.Mutex // serialises Own and Disown
	closed   bool       // Close ran: Own loads nothing more
}

// SetOptions configure a Set.
type SetOptions struct {
	Count   int32
	Backend log.Backend
	Logger  *zap.Logger
	Metrics *runtime.Metrics
	// LoadSlots bounds how many shards replay their logs at once (the CPU count is sensible).
	LoadSlots chan struct{}
	// CompactEvery is log.cleaner.backoff.ms.
	CompactEvery time.Duration
	// OnLoaded re-arms the timers of a freshly loaded shard.
	OnLoaded func(c *runtime.Ctx[*Machine], m *Machine)
	// Streams is the streams groups' broker-level configuration (session timeouts of timers
	// re-armed on load).
	Streams streams.Config
	// Classic is the classic groups' configuration (group.* keys) the timers re-armed on load
	// run with; zero means Kafka's defaults.
	Classic classic.Config
	// Consumer is the consumer groups' broker-level configuration (group.consumer.* keys)
	// the timers re-armed on load run with; a zero session timeout means Kafka's defaults.
	Consumer consumer.Config
	// OnMigration is told of every online migration and refusal (Machine.OnMigration).
	OnMigration func(MigrationEvent)
	// Catalog is the current topic catalog (Machine.Catalog).
	Catalog func() consumer.Catalog
	// GroupMetrics, when set, counts rebalances and serves the groups gauge for this Set.
	GroupMetrics *GroupMetrics
	// Deferred leaves every shard not owned until Own: its owner is decided elsewhere (several
	// nodes sharing the shards, log.backend=kafka).
	Deferred bool
}

// NewSet creates the shards; Start loads them.
func NewSet(o SetOptions) *Set {
	if o.Streams.SessionTimeout <= 0 {
		o.Streams = streams.DefaultConfig()
	}
	if o.Consumer.SessionTimeout <= 0 {
		o.Consumer = consumer.DefaultConfig()
	}
	if o.Classic == (classic.Config{}) {
		o.Classic = classic.DefaultConfig()
	}
	s := &Set{shards: make([]atomic.Pointer[runtime.Shard[*Machine]], o.Count), disowned: make([]*runtime.Shard[*Machine], o.Count)}
	var counter *prometheus.CounterVec
	if o.GroupMetrics != nil {
		counter = o.GroupMetrics.rebalances
		o.GroupMetrics.mu.Lock()
		o.GroupMetrics.set = s
		o.GroupMetrics.mu.Unlock()
	}
	ledgers := make([]*rebalanceLedger, o.Count)
	for i := range ledgers {
		ledgers[i] = newRebalanceLedger(counter)
	}
	s.build = func(i int32, own bool) *runtime.Shard[*Machine] {
		lg := o.Logger
		// The ledger outlives reloads (the history is the console's), while the machines
		// are rebuilt; New runs on the shard goroutine at the start of each load.
		ledger := ledgers[i]
		opts := runtime.Options[*Machine]{
			Shard: i,
			New: func() *Machine {
				ledger.reset()
				m := NewMachine()
				m.rebalances = ledger
				m.PinTopologyDescriptions = o.Streams.TopologyDescriptionPlugin
				m.OnMigration, m.Catalog = o.OnMigration, o.Catalog
				m.StreamsConfig, m.ClassicConfig, m.ConsumerConfig = o.Streams, o.Classic, o.Consumer
				return m
			},
			DurableUpTo:  func(m *Machine, offset int64) { m.rebalances.durable(offset) },
			Backend:      o.Backend,
			Logger:       lg,
			Metrics:      o.Metrics,
			LoadSlots:    o.LoadSlots,
			CompactEvery: o.CompactEvery,
			Scope:        RecordScope,
			// With Deferred the membership owns the shard's lifecycle and reloads a
			// FAILED shard it is assigned.
			ReloadedByOwner: o.Deferred,
			OnLoaded: func(c *runtime.Ctx[*Machine], m *Machine) {
				if m.UnknownKinds > 0 && lg != nil {
					lg.Warn("skipped records of unknown kinds (written by a newer version?)", zap.Int32("shard", c.ShardID()), zap.Int("records", m.UnknownKinds))
				}
				// From here on, records are the shard's own writes, not its history.
				m.rebalances.live = true
				m.Offsets.Settle()
				m.onLoadedClassic(c, o.Classic)
				StreamsOnLoaded(c, m, o.Streams)
				ConsumerOnLoaded(c, m, o.Consumer)
				if o.OnLoaded != nil {
					o.OnLoaded(c, m)
				}
			},
		}
		if !own {
			return runtime.NotOwned(opts)
		}
		return runtime.New(opts)
	}
	for i := range s.shards {
		s.disowned[i] = s.build(int32(i), false)
		if o.Deferred {
			s.shards[i].Store(s.disowned[i])
		} else {
			s.shards[i].Store(s.build(int32(i), true))
		}
	}
	return s
}

// Start begins loading every shard this Set owns.
func (s *Set) Start() {
	for i := range s.shards {
		if sh := s.shards[i].Load(); sh.State() != runtime.StateNotOwned {
			sh.Start()
		}
	}
}

// SetServing gates every lookup on serving(): while it is false every shard answers
// ErrNotOwned, loaded or not.
func (s *Set) SetServing(serving func() bool) { s.serving.Store(&serving) }

// Own loads shard i unless this Set already holds it; a held shard that FAILED is replaced by a
// fresh load (its log fenced it, or failed: the owner retries). It reports whether it started a load.
func (s *Set) Own(i int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	cur := s.shards[i].Load()
	switch cur.State() {
	case runtime.StateNotOwned:
	case runtime.StateFailed, runtime.StateClosed:
		go cur.Close(context.Background())
	default:
		return false
	}
	sh := s.build(i, true)
	s.shards[i].Store(sh)
	sh.Start()
	return true
}

// Disown stops serving shard i at once: lookups answer ErrNotOwned from now on, operations
// waiting for durability are answered ErrNotAvailable, and the shard's log closes (a load in
// progress stops). It returns once the shard has stopped or ctx ends.
func (s *Set) Disown(ctx context.Context, i int32) {
	s.mu.Lock()
	cur := s.shards[i].Load()
	s.shards[i].Store(s.disowned[i])
	s.mu.Unlock()
	// Waiters are answered at once (stopNow); the log's close may take up to its transaction
	// timeout on an unreachable upstream (a round in flight), and waiting for it beyond ctx held
	// the membership's lock, so heartbeats and the rejoin after an upstream restart, for that
	// long. Whatever that round does later acknowledges nobody, and a new load fences it.
	stopNow, cancel := context.WithCancel(ctx)
	cancel()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		cur.Close(stopNow)
		s.mu.Lock()
		if s.shards[i].Load() == s.disowned[i] {
			s.disowned[i].Republish()
		}
		s.mu.Unlock()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}

// Owned reports whether this Set holds shard i (loading, serving or FAILED).
func (s *Set) Owned(i int32) bool { return s.shards[i].Load().State() != runtime.StateNotOwned }

// Count is the number of shards.
func (s *Set) Count() int32 { return int32(len(s.shards)) }

// ShardOf is the number of the shard that owns a group.
func (s *Set) ShardOf(groupID string) int32 { return For(groupID, int32(len(s.shards))) }

// For returns the shard that owns a group.
func (s *Set) For(groupID string) *runtime.Shard[*Machine] {
	return s.Shard(For(groupID, int32(len(s.shards))))
}

// Shard returns shard i (its NotOwned placeholder while another node owns it, or while the
// serving gate is closed).
func (s *Set) Shard(i int32) *runtime.Shard[*Machine] {
	if g := s.serving.Load(); g != nil && !(*g)() {
		return s.disowned[i]
	}
	return s.shards[i].Load()
}

// Close closes every shard, waiting up to ctx for in-flight writes to become durable.
func (s *Set) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	var wg sync.WaitGroup
	for i := range s.shards {
		sh := s.shards[i].Load()
		wg.Add(1)
		go func() { defer wg.Done(); sh.Close(ctx) }()
	}
	wg.Wait()
}

// WaitReady blocks until every shard is active or failed, or ctx ends.
func (s *Set) WaitReady(ctx context.Context) {
	for {
		settled := true
		for i := range s.shards {
			if st := s.shards[i].Load().State(); st == runtime.StateLoading || st == runtime.StateInitial {
				settled = false
			}
		}
		if settled {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
