package main

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/gateway"
	"github.com/coordinatord/coordinatord/internal/handlers"
	"github.com/coordinatord/coordinatord/internal/membership"
	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	slog "github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/kafkalog"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	rt "github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// state is every shard of the process with the logs under them.
type state struct {
	groupStore *segment.Store // nil with log.backend=kafka
	groupLog   slog.Backend
	metaStore  *segment.Store
	groups     *shard.Set
	meta       *rt.Shard[*meta.Catalog]
	// catalog is the metadata shard's latest durable snapshot, for handlers (no round trip).
	catalog *meta.Published
	// forgotten is set per group shard once a volatile plugin's reset is durable (nil when the
	// plugin is not volatile).
	forgotten []atomic.Bool
	// membership shares the group shards with the other nodes of cluster.id (log.backend=kafka);
	// nil until the upstream is reached, and with the local log.
	membership atomic.Pointer[membership.Membership]
	// shared: the group shards are loaded as membership assigns them.
	shared bool
	// stateTopic is log.kafka.topic when shared.
	stateTopic string
	// onGroupLoaded is told each group shard that finished loading (set in gateway mode with a
	// shared log: the marker relay recovers a gained shard's staged transactions).
	onGroupLoaded atomic.Pointer[func(shard int32)]
	// peerOutcome is the marker relay's TxnPeerOutcome once the gateway started (shared log).
	peerOutcome atomic.Pointer[func(ctx context.Context, pid int64, epoch int16, commit bool) map[int32]int16]
	// announced is, per group shard, the runtime whose load onGroupLoaded was told of last.
	announced []atomic.Pointer[rt.Shard[*shard.Machine]]
	// releasing is set while the heap freed by a finished wave of loads goes back to the OS.
	releasing atomic.Bool
}

// groupOwner is the node owning a group shard, for FindCoordinator.
func (s *state) groupOwner(i int32) (handlers.PeerNode, bool) {
	m := s.membership.Load()
	if m == nil {
		return handlers.PeerNode{}, false
	}
	n, ok := m.Owner(i)
	return handlers.PeerNode{Self: ok && m.IsSelf(n), ID: n.ID, Host: n.Host, Port: n.Port}, ok
}

// shardOwnerName names the other node serving shard i, for the console: false while it is
// handed over (or before any assignment).
func (s *state) shardOwnerName(i int32) (string, bool) {
	n, ok := s.groupOwner(i)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("node %d (%s)", n.ID, net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))), true
}

// unlisted reports a node the upstream group's leader refused: the shard map does not list it.
func (s *state) unlisted() bool {
	m := s.membership.Load()
	return m != nil && m.Refused() != ""
}

// txnPeerOutcome serves another node's settle request (handlers.Deps.TxnPeerOutcome): nothing
// is answered for before the relay exists.
func (s *state) txnPeerOutcome(ctx context.Context, pid int64, epoch int16, commit bool) map[int32]int16 {
	if f := s.peerOutcome.Load(); f != nil {
		return (*f)(ctx, pid, epoch, commit)
	}
	return nil
}

// announcedShard is the runtime of group shard i whose load the marker relay was told of last.
func (s *state) announcedShard(i int32) *rt.Shard[*shard.Machine] { return s.announced[i].Load() }

// peers are the coordinatord nodes of the latest shard assignment, for broker lists.
func (s *state) peers() []gateway.Peer {
	m := s.membership.Load()
	if m == nil {
		return nil
	}
	var out []gateway.Peer
	for _, n := range m.Nodes() {
		out = append(out, gateway.Peer{ID: n.ID, Host: n.Host, Port: n.Port})
	}
	return out
}

// descriptionsSettled reports whether every group shard's stored description epochs can be
// trusted: always, unless the plugin is volatile and a shard's reset is not yet durable.
func (s *state) descriptionsSettled() bool {
	for i := range s.forgotten {
		if !s.forgotten[i].Load() {
			return false
		}
	}
	return true
}

// openState opens the logs and starts loading every shard; requests for a shard that is still
// loading get COORDINATOR_LOAD_IN_PROGRESS. volatileDescriptions says the topology description
// plugin started empty (topologyplugin.Volatile), so the stored epochs the shards load are
// reset once.
func openState(cfg *config.Config, clusterID string, log *zap.Logger, reg prometheus.Registerer, volatileDescriptions bool) (*state, error) {
	logMetrics := segment.NewMetrics(reg)
	fs := logMetrics.FS(segment.OSFS{})
	storeOpts := func(dir string, shards int32) segment.Options {
		return segment.Options{
			Dir: dir, Shards: shards, SegmentBytes: cfg.LogSegmentBytes, FlushInterval: cfg.LogFlushInterval,
			DeleteRetention: cfg.LogCleanerDeleteRetention, MinCleanableRatio: cfg.LogCleanerMinCleanableRatio,
			MaxBatchBytes: cfg.MessageMaxBytes, Logger: log.With(zap.String("log", filepath.Base(dir))),
			FS: fs, RoundObserver: logMetrics.ObserveRound,
		}
	}
	var groupStore *segment.Store
	var groupLog slog.Backend
	if cfg.LogBackend.Kafka() {
		kb, err := openKafkaLog(cfg, clusterID, log)
		if err != nil {
			return nil, err
		}
		groupLog = kb
	} else {
		var err error
		groupStore, err = segment.Open(storeOpts(filepath.Join(cfg.LogDirs, "groups"), cfg.ShardCount))
		if err != nil {
			return nil, fmt.Errorf("open group log in %s: %w", cfg.LogDirs, err)
		}
		groupLog = groupStore
	}
	// The metadata shard has a log of its own so that the group shard count never has to
	// account for it.
	metaStore, err := segment.Open(storeOpts(filepath.Join(cfg.LogDirs, "meta"), 1))
	if err != nil {
		if groupStore != nil {
			groupStore.Close()
		}
		return nil, fmt.Errorf("open metadata log in %s: %w", cfg.LogDirs, err)
	}
	metrics := rt.NewMetrics(reg)
	slots := make(chan struct{}, runtime.NumCPU())
	s := &state{groupStore: groupStore, groupLog: groupLog, metaStore: metaStore, catalog: &meta.Published{}}
	s.meta = rt.New(rt.Options[*meta.Catalog]{
		Shard: 0, New: meta.NewCatalog, Backend: metaStore, Logger: log.With(zap.String("shard_kind", "meta")),
		OnDurable: s.catalog.Publish,
		Metrics:   metrics, LoadSlots: slots, CompactEvery: cfg.LogCleanerBackoff, Kind: "meta",
	})
	// Offsets retention: a timer per group shard, re-armed on every load. The deleted-topics part
	// reads the catalog from the metadata shard off the group shard's goroutine (Ctx.Go).
	retention := shard.RetentionConfig{
		Retention: cfg.OffsetsRetention, CheckInterval: cfg.OffsetsRetentionCheckInterval,
		ProducerExpiration: cfg.ProducerIDExpiration, Logger: log,
		Topics: func(ctx context.Context) (offsets.TopicLookup, error) {
			v, err := s.meta.Read(ctx, meta.Read)
			if err != nil {
				return nil, err
			}
			return v.(*meta.Snapshot).Lookup, nil
		},
	}
	if volatileDescriptions {
		s.forgotten = make([]atomic.Bool, cfg.ShardCount)
	}
	s.shared = cfg.LogBackend.Kafka()
	if s.shared {
		s.stateTopic = cfg.LogBackend.Topic
	}
	s.announced = make([]atomic.Pointer[rt.Shard[*shard.Machine]], cfg.ShardCount)
	s.groups = shard.NewSet(shard.SetOptions{
		Deferred: s.shared,
		Count:    cfg.ShardCount, Backend: groupLog, Logger: log, Metrics: metrics, LoadSlots: slots,
		CompactEvery: cfg.LogCleanerBackoff, Streams: streamsConfig(cfg), Classic: classicConfig(cfg), Consumer: consumerConfig(cfg),
		OnMigration:  migrationObserver(log, reg),
		Catalog:      s.currentCatalog,
		GroupMetrics: shard.NewGroupMetrics(reg),
		OnLoaded: func(c *rt.Ctx[*shard.Machine], _ *shard.Machine) {
			shard.ArmRetention(c, retention)
			if volatileDescriptions {
				shard.ForgetVolatileDescriptions(c, &s.forgotten[c.ShardID()], log)
			}
			if f := s.onGroupLoaded.Load(); f != nil {
				(*f)(c.ShardID())
			}
			s.announced[c.ShardID()].Store(s.groups.Shard(c.ShardID()))
			s.releaseAfterLoads(log)
		},
	})
	// The catalog loads first: group requests validate topics against it.
	s.meta.Start()
	s.groups.Start()
	go func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		s.groups.WaitReady(ctx)
		if !s.shared && s.ready() {
			log.Info("all shards loaded", zap.Int32("shards", cfg.ShardCount), zap.Duration("took", time.Since(start)))
		}
	}()
	return s, nil
}

// releaseAfterLoads gives the heap that loading the group shards freed back to the OS once no
// group shard is loading any more (the last one of a start, or of a wave of gained shards with
// log.backend=kafka). A load replays the whole log: the decoded batches and the slices that
// grew while the state was built are garbage by the end, and the Go heap only ever grows to
// about twice its live data before collecting, so without this the resident memory after a
// start of 1M offsets was two to three times the state itself (docs/benchmarks-storage.md,
// "Restart with 1M committed offsets"). It costs one forced collection per wave of loads, off
// the shard goroutines; the memory the heap later grows into under traffic is the collector's
// headroom, which internal/gcpace sizes by the scannable heap once no shard is loading.
func (s *state) releaseAfterLoads(log *zap.Logger) {
	if s.loading() {
		return // the last shard to finish releases for all
	}
	if !s.releasing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.releasing.Store(false)
		start := time.Now()
		debug.FreeOSMemory()
		log.Debug("returned the heap freed by shard loads to the OS", zap.Duration("took", time.Since(start)))
	}()
}

// loading says whether a group shard is loading its log (or about to).
func (s *state) loading() bool {
	for i := int32(0); i < s.groups.Count(); i++ {
		if st := s.groups.Shard(i).State(); st == rt.StateLoading || st == rt.StateInitial {
			return true
		}
	}
	return false
}

// waitCatalog blocks until the metadata shard has loaded (or failed), so that no client is
// told "no topics" by a catalog that simply is not loaded yet. It is small and loads first.
func (s *state) waitCatalog(ctx context.Context) {
	for {
		if st := s.meta.State(); st != rt.StateLoading && st != rt.StateInitial {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *state) ready() bool { return len(s.unready()) == 0 }

// currentCatalog is the metadata shard's latest published snapshot, or none before its load
// (a nil *meta.Snapshot must not become a non-nil consumer.Catalog).
func (s *state) currentCatalog() consumer.Catalog {
	if snap := s.catalog.Load(); snap != nil {
		return snap
	}
	return nil
}

// unready names every shard that is not serving, with its state.
func (s *state) unready() []string {
	var out []string
	if st := s.meta.State(); st != rt.StateActive {
		out = append(out, fmt.Sprintf("meta shard 0: %s", st))
	}
	m := s.membership.Load()
	if s.shared {
		switch {
		case m == nil || !m.Joined():
			out = append(out, "membership: no shard assignment from the upstream group yet")
		case m.Refused() != "":
			out = append(out, "membership: the upstream group's leader gives this node no shards: "+m.Refused())
		case !m.Serving():
			out = append(out, "membership: no answer from the upstream group for log.kafka.session.timeout.ms; serving no shard")
		}
	}
	for i := int32(0); i < s.groups.Count(); i++ {
		st := s.groups.Shard(i).State()
		switch {
		case st == rt.StateNotOwned && s.shared && m != nil && m.Assigned(i):
			out = append(out, fmt.Sprintf("group shard %d: assigned to this node, not loading yet", i))
		case st != rt.StateActive && st != rt.StateNotOwned:
			out = append(out, fmt.Sprintf("group shard %d: %s", i, st))
		}
	}
	return out
}

// logBytes sums the sizes of a shard's log files ("group" or "meta"), for the console.
func (s *state) logBytes(kind string, shard int32) (int64, error) {
	store := s.groupStore
	if kind == "meta" {
		store = s.metaStore
	}
	if store == nil {
		return 0, nil // the shard's log is on the upstream cluster
	}
	var n int64
	err := filepath.WalkDir(store.ShardDir(shard), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// shutdown closes the shards, letting appended records become durable until ctx ends.
func (s *state) shutdown(ctx context.Context) {
	s.groups.Close(ctx)
	s.meta.Close(ctx)
}

func (s *state) close(log *zap.Logger) {
	s.shutdown(context.Background())
	if s.groupStore != nil {
		if err := s.groupStore.Close(); err != nil {
			log.Warn("closing group log", zap.Error(err))
		}
	}
	if err := s.metaStore.Close(); err != nil {
		log.Warn("closing metadata log", zap.Error(err))
	}
}

// openKafkaLog opens the group shard logs on the upstream cluster with coordinatord's own
// upstream client settings (bootstrap, TLS, SASL login).
func openKafkaLog(cfg *config.Config, clusterID string, log *zap.Logger) (*kafkalog.Backend, error) {
	g := cfg.Gateway
	sec, err := upstreamSecurity(g.Security)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(g.Bootstrap...), kgo.ClientID(g.ClientID),
		kgo.RequestTimeoutOverhead(g.RequestTimeout), kgo.DialTimeout(g.ConnectTimeout)}
	if sec.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(sec.TLS.Clone()))
	}
	if sec.SASL != nil {
		opts = append(opts, kgo.SASL(sec.SASL))
	}
	l := cfg.LogBackend
	ctx, cancel := context.WithTimeout(context.Background(), g.StartupTimeout)
	defer cancel()
	if err := checkStateTopicUnshared(ctx, opts, l.MembershipGroup(clusterID), l.Topic, clusterID); err != nil {
		return nil, fmt.Errorf("log.backend=kafka: %w", err)
	}
	b, err := kafkalog.New(ctx, kafkalog.Options{
		Client: opts, Topic: l.Topic, Partitions: cfg.ShardCount, ReplicationFactor: l.ReplicationFactor,
		MinInsyncReplicas: l.MinInsyncReplicas, TransactionTimeout: l.TransactionTimeout, MaxBatchBytes: cfg.MessageMaxBytes,
		TransactionalIDPrefix:     "coordinatord-" + clusterID + "-shard-",
		NodeTransactionalIDPrefix: "coordinatord-" + clusterID + "-node-", NodeID: cfg.NodeID,
		Logger: log.With(zap.String("log", "kafka"), zap.String("topic", l.Topic)),
	})
	if err != nil {
		return nil, fmt.Errorf("log.backend=kafka: %w", err)
	}
	log.Info("group shard logs on the upstream cluster", zap.String("log.kafka.topic", l.Topic), zap.Int32("partitions", cfg.ShardCount))
	return b, nil
}

// checkStateTopicUnshared refuses to start on a state topic that live nodes of another cluster.id
// write (membership.CheckStateTopicUnshared), before this node loads or claims anything there.
func checkStateTopicUnshared(ctx context.Context, opts []kgo.Opt, group, topic, clusterID string) error {
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer kc.Close()
	return membership.CheckStateTopicUnshared(ctx, kc.Request, group, topic, clusterID)
}

// startMembership joins the upstream group of the nodes of cluster.id; the shards load as it
// assigns them. Every lookup of a shard is gated on its lease from here on.
func startMembership(cfg *config.Config, clusterID string, self config.Listener, st *state, gm *gatewayMode,
	log *zap.Logger, reg prometheus.Registerer) *membership.Membership {
	l := cfg.LogBackend
	group := l.MembershipGroup(clusterID)
	m := membership.New(membership.Options{
		Request: gm.up.Request, Group: group,
		Self:       membership.Node{ID: cfg.NodeID, Host: self.Host, Port: int32(self.Port)},
		ShardCount: cfg.ShardCount, Shards: st.groups, Topic: l.Topic, ClusterID: clusterID,
		SessionTimeout: l.SessionTimeout, HeartbeatInterval: l.HeartbeatInterval, RebalanceTimeout: l.RebalanceTimeout,
		PeerProbeInterval: l.PeerProbeInterval,
		Logger:            log.With(zap.String("component", "membership")), Registerer: reg,
		BeforeLoad: gm.refreshCatalog,
	})
	st.groups.SetServing(m.Serving)
	st.membership.Store(m)
	log.Info("sharing the group shards through the upstream group", zap.String("log.kafka.group.id", group),
		zap.Int64("log.kafka.session.timeout.ms", l.SessionTimeout.Milliseconds()))
	m.Start()
	return m
}
