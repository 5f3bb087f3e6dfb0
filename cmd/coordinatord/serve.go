package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/console"
	"github.com/coordinatord/coordinatord/internal/gcpace"
	"github.com/coordinatord/coordinatord/internal/handlers"
	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func newServeCommand() *cobra.Command {
	var path, logFormat string
	var sets []string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the coordinator",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, sets)
			if err != nil {
				return configError(err)
			}
			if logFormat != "json" && logFormat != "console" {
				return configError(fmt.Errorf("--log-format %q: must be json or console", logFormat))
			}
			log, err := newLogger(cfg.LogLevel, logFormat)
			if err != nil {
				return err
			}
			defer log.Sync()
			for _, w := range cfg.Warnings() {
				log.Warn(w)
			}
			// SIGHUP too, as the JVM runs Kafka's shutdown hook on it: a closed terminal or a
			// mistaken "reload" must not kill the process without draining and, with
			// log.backend=kafka, without leaving the group (its shards would wait a session).
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			defer stop()
			if err := serve(ctx, cfg, log); err != nil {
				log.Error("coordinatord stopped with an error", zap.Error(err))
				return err
			}
			return nil
		},
	}
	addConfigFlags(cmd, &path, &sets)
	cmd.Flags().StringVar(&logFormat, "log-format", "json", "log encoding: json or console")
	return cmd
}

func newLogger(level, format string) (*zap.Logger, error) {
	zc := zap.NewProductionConfig()
	if format == "console" {
		zc.Encoding = "console"
		zc.EncoderConfig = zap.NewDevelopmentEncoderConfig()
	}
	zc.EncoderConfig.TimeKey = "ts"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	zc.Sampling = nil
	zc.OutputPaths = []string{"stdout"}
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	return zc.Build()
}

// serve runs the daemon until ctx is cancelled (a signal), then shuts down gracefully.
func serve(ctx context.Context, cfg *config.Config, log *zap.Logger) error {
	if err := os.MkdirAll(cfg.LogDirs, 0o755); err != nil {
		return fmt.Errorf("create log.dirs %s: %w", cfg.LogDirs, err)
	}
	clusterID, err := loadClusterID(segment.OSFS{}, cfg)
	if err != nil {
		return err
	}
	if err := checkLogBackend(segment.OSFS{}, cfg); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := wire.NewMetrics(reg)

	// Bind every listener first so that a port given as 0 is advertised as the port we got.
	lns := make([]net.Listener, 0, len(cfg.Listeners))
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	bound := map[string]int{}
	for _, l := range cfg.Listeners {
		ln, err := net.Listen("tcp", l.Addr())
		if err != nil {
			return fmt.Errorf("listen %s: %w", l, err)
		}
		lns = append(lns, ln)
		bound[l.Name] = ln.Addr().(*net.TCPAddr).Port
	}
	node := handlers.Node{ID: cfg.NodeID, ClusterID: clusterID}
	for _, a := range cfg.AdvertisedListeners {
		port := a.Port
		if port == 0 {
			port = bound[a.Name]
		}
		node.Endpoints = append(node.Endpoints, handlers.Endpoint{Listener: a.Name, Host: a.Host, Port: int32(port)})
	}
	secOpts, sasl, err := setupSecurity(cfg, log)
	if err != nil {
		return configError(err)
	}
	adminTLSConfig, err := adminTLS(cfg, log)
	if err != nil {
		return configError(err)
	}
	topology, err := openTopologyPlugin(cfg, log, reg)
	if err != nil {
		return err
	}
	defer topology.Close() // after the shards: the coordinator has stopped serving
	procs, procsWhy := setSchedulerProcs(cfg.LogBackend.Kafka())
	st, err := openState(cfg, clusterID, log, reg, topology.Volatile())
	if err != nil {
		return err
	}
	defer st.close(log)
	if err := recordLogBackend(segment.OSFS{}, cfg); err != nil {
		return err
	}
	// The collector's headroom follows the scannable heap, not the pointer-free offset entries,
	// except while shards load (internal/gcpace); an operator's GOGC wins. go_gc_gogc_percent
	// shows what is in force.
	gcPacing := "GOGC from the environment"
	if pacer := gcpace.Start(nil, st.loading); pacer != nil {
		defer pacer.Stop()
		gcPacing = "headroom of the scannable heap"
	}
	// In gateway mode Streams internal topics are created upstream; gm is set before any
	// listener serves, so no heartbeat can reach createTopics earlier.
	var gm *gatewayMode
	var createTopics func(context.Context, []meta.NewTopic) ([]meta.TopicResult, error)
	var refreshCatalog func(context.Context) error
	var verifyTxn func(context.Context, handlers.TxnVerification) int16
	if cfg.Gateway.Enabled() {
		verifyTxn = func(ctx context.Context, v handlers.TxnVerification) int16 { return gm.verifyTxnOffsets(ctx, v) }
		createTopics = func(ctx context.Context, ts []meta.NewTopic) ([]meta.TopicResult, error) {
			return gm.createUpstream(ctx, ts)
		}
		refreshCatalog = func(ctx context.Context) error { return gm.refreshCatalog(ctx) }
	}
	var brokerConfigs []handlers.BrokerConfig
	brokerDefaults := map[string]string{}
	for _, e := range cfg.Entries() {
		brokerConfigs = append(brokerConfigs, handlers.BrokerConfig{Name: e.Key, Value: e.Value, Doc: e.Doc, Explicit: e.Source != config.SourceDefault})
		if d, ok := config.Default(e.Key); ok {
			brokerDefaults[e.Key] = d
		}
	}
	authorizer, err := newAuthorizer(cfg, log, reg)
	if err != nil {
		return err
	}
	var groupOwner func(int32) (handlers.PeerNode, bool)
	if st.shared {
		groupOwner = st.groupOwner
	}
	table := handlers.New(handlers.Deps{
		GroupOwner:    groupOwner,
		Authorizer:    authorizer,
		BrokerConfigs: brokerConfigs, BrokerDefaults: brokerDefaults,
		TxnPeerOutcome: st.txnPeerOutcome,
		CreateTopics:   createTopics, RefreshCatalog: refreshCatalog, VerifyTxnOffsets: verifyTxn, JoinCreatesInternalTopics: cfg.StreamsGroup.JoinCreatesInternalTopics,
		Node: node, Logger: log, Meta: st.meta, Catalog: st.catalog, Groups: st.groups, Streams: streamsConfig(cfg), Topology: topology,
		Classic: classicConfig(cfg), Consumer: consumerConfig(cfg), SASL: sasl,
		Limits: handlers.Limits{
			OffsetMetadataMaxBytes:   cfg.OffsetMetadataMaxBytes,
			GroupConfigMaxGroups:     cfg.GroupConfigMaxGroupsPerShard,
			TxnMarkerMaxProducers:    cfg.ProducerIDMaxPerShard,
			DefaultPartitions:        cfg.DefaultPartitions,
			DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		},
	})

	adminLn, err := net.Listen("tcp", cfg.AdminListener)
	if err != nil {
		return fmt.Errorf("listen admin.listener %s: %w", cfg.AdminListener, err)
	}
	mux := adminMux(reg, st.unready, cfg.AdminPprofEnable)
	// In gateway mode the console's lag reads the upstream's log end offsets; the upstream
	// client exists only once the gateway started, after the admin listener serves.
	var upstreamClient atomic.Pointer[upstream.Client]
	if cfg.AdminConsoleEnable {
		var logEnd func(context.Context, map[string][]int32) (map[string]map[int32]int64, error)
		if cfg.Gateway.Enabled() {
			logEnd = func(ctx context.Context, parts map[string][]int32) (map[string]map[int32]int64, error) {
				up := upstreamClient.Load()
				if up == nil {
					return nil, errors.New("the upstream cluster is not reached yet")
				}
				return up.LogEnd(ctx, parts)
			}
		}
		mountConsole(mux, st, topology, reg, logEnd)
	}
	registerTestHooks(mux, st)
	// ReadHeaderTimeout bounds the TLS handshake too. Refused handshakes (no client
	// certificate, an unknown CA, plain HTTP) are net/http's to log: routed to zap so that they
	// reach the same log as everything else rather than stderr.
	admin := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: adminTLSConfig,
		ErrorLog: zap.NewStdLog(log.With(zap.String("listener", "admin")))}
	if adminTLSConfig != nil {
		go admin.ServeTLS(adminLn, "", "")
	} else {
		go admin.Serve(adminLn)
	}

	stopCleanup := startTopologyCleanup(table, topology, cfg.OffsetsRetentionCheckInterval, st.descriptionsSettled, log)
	defer stopCleanup()
	st.waitCatalog(ctx)
	// The ACLs are part of the metadata shard just loaded: install them before any listener
	// serves, so that no request is decided by an empty set. In gateway mode they are the
	// upstream's instead, read by startGateway before it serves.
	if !cfg.Gateway.Enabled() {
		if err := handlers.LoadACLs(ctx, st.meta, authorizer); err != nil {
			return fmt.Errorf("load ACLs from the metadata shard: %w", err)
		}
	}
	// One budget for every listener: queued.max.request.bytes bounds the process, not a port.
	budget := wire.NewBudget(cfg.QueuedMaxRequestBytes, reg, log)
	newServer := func(name string, h wire.Handler) *wire.Server {
		opts := wire.Options{
			ListenerName:    name,
			MaxRequestBytes: cfg.MaxRequestBytes,
			IdleTimeout:     cfg.ConnectionsMaxIdle,
			MaxConnections:  cfg.MaxConnections,
			Budget:          budget,
			Logger:          log.With(zap.String("listener", name)),
			Metrics:         metrics,
		}
		if apply, ok := secOpts[name]; ok {
			apply(&opts)
		} else if apply, ok := secOpts[cfg.AdvertisedListeners[0].Name]; ok && cfg.Gateway.Enabled() {
			// A per-upstream-broker port (gateway mode) serves as the listener whose host it
			// is advertised with: same protocol (config check makes every listener's the
			// same), certificates and SASL settings.
			apply(&opts)
		}
		return wire.NewServer(opts, h)
	}
	ls := &listenerSet{errc: make(chan error, 1)}
	var handler wire.Handler = table
	if cfg.Gateway.Enabled() {
		self := cfg.AdvertisedListeners[0]
		if self.Port == 0 {
			self.Port = bound[self.Name]
		}
		gm, err = startGateway(ctx, cfg, log, reg, table, authorizer, st, self, newServer, ls)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				// Stopped (SIGTERM, ...) while the upstream was still out of reach: an
				// operator's stop, not a failure. The deferred closes release what was opened.
				log.Info("stopped before the upstream cluster was reached", zap.NamedError("cause", context.Cause(ctx)))
				log.Info("coordinatord stopped")
				return nil
			}
			return gatewayError(err)
		}
		defer gm.close(context.Background())
		upstreamClient.Store(gm.up)
		handler = gm.gw.SelfHandler()
		if st.shared {
			mem := startMembership(cfg, clusterID, self, st, gm, log, reg)
			defer mem.Close(context.Background())
		}
	}
	for i, ln := range lns {
		if st.shared {
			// Bound until this function returns (the deferred close above), after the node
			// has closed its shards and left the group: heldlistener.go.
			ln = holdPort(ln)
		}
		ls.serve(newServer(cfg.Listeners[i].Name, handler), ln)
	}
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = cfg.Listeners[i].Name + "://" + ln.Addr().String()
	}
	// What clients are told to dial (Metadata, FindCoordinator): a wrong advertised address is
	// the usual reason clients connect once and then fail.
	advertised := make([]string, len(node.Endpoints))
	for i, e := range node.Endpoints {
		advertised[i] = e.Listener + "://" + net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
	}
	log.Info("coordinatord started",
		zap.String("version", version), zap.Strings("listeners", addrs), zap.Strings("advertised", advertised), zap.String("admin", adminLn.Addr().String()), zap.String("admin_protocol", cfg.AdminSecurity.Protocol),
		zap.Int32("node_id", cfg.NodeID), zap.String("cluster_id", clusterID), zap.Int32("shards", cfg.ShardCount),
		zap.String("log_dirs", cfg.LogDirs), zap.String("gc_pacing", gcPacing),
		zap.Int("gomaxprocs", procs), zap.String("gomaxprocs_from", procsWhy))

	var serveErr error
	select {
	case <-ctx.Done():
		// The cause names the signal, as Kafka logs "Terminating process due to signal ...".
		log.Info("shutting down: draining in-flight requests", zap.NamedError("cause", context.Cause(ctx)),
			zap.Int64("shutdown.timeout.ms", cfg.ShutdownTimeout.Milliseconds()))
	case serveErr = <-ls.errc:
		log.Error("listener failed; shutting down", zap.Error(serveErr))
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	// The group shards close while the connections drain, as Kafka unloads its coordinators on
	// shutdown: what they appended becomes durable and is answered, and a JoinGroup or
	// SyncGroup parked for a rebalance that cannot finish now is answered
	// COORDINATOR_NOT_AVAILABLE (Kafka: NOT_COORDINATOR) at once. Left parked, it held the
	// drain for the whole shutdown.timeout.ms and then saw its connection cut.
	groupsClosed := make(chan struct{})
	go func() { defer close(groupsClosed); st.groups.Close(shutdownCtx) }()
	ls.shutdownAll(shutdownCtx, log)
	<-groupsClosed
	if m := st.membership.Load(); m != nil {
		// The group shards closed first, so what they appended is durable (and nothing is
		// fenced under them); then the node leaves, and the others take the shards at once.
		// Both before the upstream client closes with the gateway.
		m.Close(shutdownCtx)
	}
	if gm != nil {
		// Before the state shuts down: the upstream refresh writes the catalog.
		gm.close(shutdownCtx)
	}
	stopCleanup()
	// Connections are closed: nothing new reaches the shards. Let what they appended become
	// durable before the logs close.
	st.shutdown(shutdownCtx)
	admin.Shutdown(shutdownCtx)
	log.Info("coordinatord stopped")
	return serveErr
}

// adminMux serves metrics, health and readiness; with pprof, also net/http/pprof's handlers,
// registered here explicitly because importing the package only registers them on
// http.DefaultServeMux, which nothing serves.
func adminMux(reg *prometheus.Registry, unready func() []string, pprofOn bool) *http.ServeMux {
	mux := http.NewServeMux()
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	// Ready once every shard is loaded and serving; otherwise the body names the shards that
	// are not, one a line ("group shard 7: failed"), so a probe's output points at the log line.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if not := unready(); len(not) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:")
			for _, s := range not {
				fmt.Fprintln(w, s)
			}
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// mountConsole serves the read-only web console under /console/ (and sends / there).
func mountConsole(mux *http.ServeMux, st *state, topology *plugin.Caller, reg prometheus.Gatherer,
	logEnd func(context.Context, map[string][]int32) (map[string]map[int32]int64, error)) {
	mux.Handle(console.Prefix, console.New(console.Options{
		Groups: st.groups, Meta: st.meta.State, MetaLastCompaction: st.meta.LastCompaction,
		LogBytes: st.logBytes, Topology: topology, Gatherer: reg, LogEnd: logEnd, ShardOwner: st.shardOwnerName,
	}))
	mux.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusFound))
}

// loadClusterID returns the cluster id the data under log.dirs belongs to: the configured one,
// or the one generated on first start. Either is kept beside the data so that it is stable
// across restarts, crashes included (clients that cached the id treat a different one as a
// different cluster), and so that a configured id other than the one the data was written
// under is refused, as Kafka refuses a cluster id other than its meta.properties' one.
func loadClusterID(fs segment.FS, cfg *config.Config) (string, error) {
	path := filepath.Join(cfg.LogDirs, "cluster.id")
	b, err := segment.ReadSmallFile(fs, path, 4096)
	switch {
	case err == nil:
		stored := strings.TrimSpace(string(b))
		switch {
		case stored != "" && cfg.ClusterID != "" && stored != cfg.ClusterID:
			return "", fmt.Errorf("cluster.id=%s is configured, but the data in log.dirs %s belongs to cluster %s (%s): "+
				"set cluster.id=%s (or leave it empty) to keep this data, or point log.dirs at an empty directory to start cluster %s",
				cfg.ClusterID, cfg.LogDirs, stored, path, stored, cfg.ClusterID)
		case stored != "":
			return stored, nil
		case cfg.ClusterID == "":
			return "", fmt.Errorf("%s is empty; delete it or set cluster.id", path)
		}
		// An empty file and a configured id: the id is written below, as on a first start.
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	id := cfg.ClusterID
	if id == "" {
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return "", err
		}
		id = base64.RawURLEncoding.EncodeToString(raw[:])
	}
	if err := segment.WriteFileDurable(fs, path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("persist cluster id: %w", err)
	}
	return id, nil
}
