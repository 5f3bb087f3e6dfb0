package main

import (
	"context"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/handlers"
	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// lookupAssignor finds a task assignor by name: the built-in ones (a testhooks build adds a
// scripted one for tests).
var lookupAssignor = assign.Lookup

// streamsConfig turns the group.streams.* keys into the streams state machine's configuration,
// with the built-in task assignors.
func streamsConfig(cfg *config.Config) streams.Config {
	s := cfg.StreamsGroup
	ms := func(v int32) time.Duration { return time.Duration(v) * time.Millisecond }
	return streams.Config{
		SessionTimeout: ms(s.SessionTimeoutMs), HeartbeatInterval: ms(s.HeartbeatIntervalMs), MaxSize: s.MaxSize,
		ReconcilingHeartbeatInterval: ms(s.ReconciliationHeartbeatIntervalMs),
		NumStandbyReplicas:           s.NumStandbyReplicas, InitialRebalanceDelay: ms(s.InitialRebalanceDelayMs),
		AssignmentInterval: ms(s.AssignmentIntervalMs), AssignmentQuiet: ms(s.AssignmentQuietMs), Assignors: s.Assignors, RackAwareTags: s.RackAwareAssignmentTags,
		TaskOffsetInterval: ms(s.TaskOffsetIntervalMs), NumWarmupReplicas: s.NumWarmupReplicas,
		AcceptableRecoveryLag: s.AcceptableRecoveryLag, Lookup: lookupAssignor,
		TopologyDescriptionPlugin: cfg.TopologyPlugin.Class != "",
		MigrationPolicy:           streams.MigrationPolicy(s.MigrationPolicy),
		ClassicMaxSize:            cfg.GroupMaxSize,
		GroupBounds: streams.GroupConfigBounds{
			MinSessionTimeoutMs: s.MinSessionTimeoutMs, MaxSessionTimeoutMs: s.MaxSessionTimeoutMs,
			MinHeartbeatIntervalMs: s.MinHeartbeatIntervalMs, MaxHeartbeatIntervalMs: s.MaxHeartbeatIntervalMs,
			MinAssignmentIntervalMs: s.MinAssignmentIntervalMs, MaxAssignmentIntervalMs: s.MaxAssignmentIntervalMs,
			MaxStandbyReplicas: s.MaxStandbyReplicas, MaxWarmupReplicas: s.MaxWarmupReplicas,
			MinTaskOffsetIntervalMs: s.MinTaskOffsetIntervalMs,
		},
	}
}

// consumerConfig turns the group.consumer.* keys into the consumer group state machine's
// configuration, shared by the handlers and the timers the shards re-arm when they load.
func consumerConfig(cfg *config.Config) consumer.Config {
	s := cfg.ConsumerGroup
	ms := func(v int32) time.Duration { return time.Duration(v) * time.Millisecond }
	return consumer.Config{
		SessionTimeout: ms(s.SessionTimeoutMs), HeartbeatInterval: ms(s.HeartbeatIntervalMs), MaxSize: s.MaxSize,
		AssignmentInterval: ms(s.AssignmentIntervalMs), AssignmentQuiet: ms(s.AssignmentQuietMs), Assignors: s.Assignors,
		MinAssignmentIntervalMs: s.MinAssignmentIntervalMs, MaxAssignmentIntervalMs: s.MaxAssignmentIntervalMs,
		MinSessionTimeoutMs: s.MinSessionTimeoutMs, MaxSessionTimeoutMs: s.MaxSessionTimeoutMs,
		MinHeartbeatIntervalMs: s.MinHeartbeatIntervalMs, MaxHeartbeatIntervalMs: s.MaxHeartbeatIntervalMs,
		MigrationPolicy: s.MigrationPolicy,
	}
}

// classicConfig turns the group.* keys into the classic groups' configuration, shared by the
// handlers and the timers the shards re-arm when they load.
func classicConfig(cfg *config.Config) classic.Config {
	return classic.Config{
		MinSessionTimeoutMs: cfg.GroupMinSessionTimeoutMs, MaxSessionTimeoutMs: cfg.GroupMaxSessionTimeoutMs,
		InitialRebalanceDelayMs: cfg.GroupInitialRebalanceDelayMs, MaxSize: cfg.GroupMaxSize,
		NewMemberJoinTimeoutMs: classic.DefaultConfig().NewMemberJoinTimeoutMs,
	}
}

// openTopologyPlugin builds the configured topology description plugin (KIP-1331); nil when
// none is configured. An unknown plugin name or bad plugin keys fail start-up.
func openTopologyPlugin(cfg *config.Config, log *zap.Logger, reg prometheus.Registerer) (*plugin.Caller, error) {
	tp := cfg.TopologyPlugin
	return plugin.Open(plugin.Settings{
		Class: tp.Class, Props: tp.Props, CallTimeout: tp.CallTimeout, MaxConcurrency: tp.MaxConcurrency,
		Backoff: plugin.BackoffConfig{Initial: tp.BackoffInitial, Max: tp.BackoffMax, Multiplier: 2, Jitter: tp.BackoffJitter},
	}, plugin.NewRegistry(), log, reg)
}

// startTopologyCleanup runs the topology description cleanup cycle (spec
// topology-description §6) every offsets.retention.check.interval.ms, first one interval after
// start, in a goroutine of its own: it calls the plugin, which never happens on a shard. A
// tick that finds the previous cycle still running is skipped (single flight). The returned
// function stops the cycle and waits for it; it is a no-op without a plugin. settled reports
// whether the loaded stored epochs are final (a volatile plugin's reset is durable), so that
// the first count of the stored-groups gauge does not count what the plugin lost.
func startTopologyCleanup(table *handlers.Table, caller *plugin.Caller, interval time.Duration, settled func() bool, log *zap.Logger) (stop func()) {
	if !caller.Enabled() || interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	running := make(chan struct{}, 1)
	// The stored-groups gauge starts from the loaded state: recount until every shard answers.
	wg.Go(func() {
		for !settled() || !table.RecountStoredDescriptions(ctx) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			select {
			case running <- struct{}{}:
			default:
				log.Warn("topology description cleanup cycle skipped: previous cycle is still in flight")
				continue
			}
			wg.Go(func() {
				defer func() { <-running }()
				table.TopologyCleanup(ctx)
			})
		}
	})
	return func() { cancel(); wg.Wait() }
}

// migrationObserver logs every online migration between classic groups and streams or consumer
// groups and its refusals at INFO, and counts them (spec online-migration §8).
func migrationObserver(log *zap.Logger, reg prometheus.Registerer) func(shard.MigrationEvent) {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinatord_group_migrations_total",
		Help: "Online conversions between classic groups and streams or consumer groups, and refused attempts.",
	}, []string{"protocol", "direction", "mode", "result"})
	if reg != nil {
		reg.MustRegister(total)
	}
	return func(ev shard.MigrationEvent) {
		total.WithLabelValues(string(ev.Protocol), string(ev.Direction), "online", string(ev.Result)).Inc()
		switch {
		case ev.Direction == shard.MigrationUpgrade && ev.Result == shard.MigrationConverted:
			log.Info("converted classic group to "+string(ev.Protocol)+" group", zap.String("group", ev.Group),
				zap.Int32("generation", ev.Generation), zap.Int("classic_members", ev.Members), zap.Int32("epoch", ev.Generation+1))
		case ev.Direction == shard.MigrationDowngrade && ev.Result == shard.MigrationConverted:
			log.Info("converted "+string(ev.Protocol)+" group to classic group, rebalance prepared", zap.String("group", ev.Group),
				zap.Int32("generation", ev.Generation), zap.Int("members", ev.Members))
		default:
			log.Info("refused "+string(ev.Direction)+" of group", zap.String("group", ev.Group),
				zap.String("protocol", string(ev.Protocol)), zap.String("reason", ev.Reason))
		}
	}
}
