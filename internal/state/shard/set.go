package shard

import (
	"context"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Set is every group shard of this process.
type Set struct {
	shards []*runtime.Shard[*Machine]
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
	s := &Set{shards: make([]*runtime.Shard[*Machine], o.Count)}
	var counter *prometheus.CounterVec
	if o.GroupMetrics != nil {
		counter = o.GroupMetrics.rebalances
		o.GroupMetrics.mu.Lock()
		o.GroupMetrics.set = s
		o.GroupMetrics.mu.Unlock()
	}
	for i := range s.shards {
		lg := o.Logger
		// The ledger outlives reloads (the history is the console's), while the machines
		// are rebuilt; New runs on the shard goroutine at the start of each load.
		ledger := newRebalanceLedger(counter)
		s.shards[i] = runtime.New(runtime.Options[*Machine]{
			Shard: int32(i),
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
			OnLoaded: func(c *runtime.Ctx[*Machine], m *Machine) {
				if m.UnknownKinds > 0 && lg != nil {
					lg.Warn("skipped records of unknown kinds (written by a newer version?)", zap.Int32("shard", c.ShardID()), zap.Int("records", m.UnknownKinds))
				}
				// From here on, records are the shard's own writes, not its history.
				m.rebalances.live = true
				m.onLoadedClassic(c, o.Classic)
				StreamsOnLoaded(c, m, o.Streams)
				ConsumerOnLoaded(c, m, o.Consumer)
				if o.OnLoaded != nil {
					o.OnLoaded(c, m)
				}
			},
		})
	}
	return s
}

// Start begins loading every shard.
func (s *Set) Start() {
	for _, sh := range s.shards {
		sh.Start()
	}
}

// Count is the number of shards.
func (s *Set) Count() int32 { return int32(len(s.shards)) }

// For returns the shard that owns a group.
func (s *Set) For(groupID string) *runtime.Shard[*Machine] {
	return s.shards[For(groupID, int32(len(s.shards)))]
}

// Shard returns shard i.
func (s *Set) Shard(i int32) *runtime.Shard[*Machine] { return s.shards[i] }

// Close closes every shard, waiting up to ctx for in-flight writes to become durable.
func (s *Set) Close(ctx context.Context) {
	var wg sync.WaitGroup
	for _, sh := range s.shards {
		wg.Add(1)
		go func() { defer wg.Done(); sh.Close(ctx) }()
	}
	wg.Wait()
}

// WaitReady blocks until every shard is active or failed, or ctx ends.
func (s *Set) WaitReady(ctx context.Context) {
	for {
		settled := true
		for _, sh := range s.shards {
			if st := sh.State(); st == runtime.StateLoading || st == runtime.StateInitial {
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
