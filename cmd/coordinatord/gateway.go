package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/gateway"
	"github.com/coordinatord/coordinatord/internal/handlers"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// listenerSet is every wire server of the process; broker listeners join it while it runs.
type listenerSet struct {
	mu      sync.Mutex
	servers []*wire.Server
	errc    chan error
	closed  bool
}

func (l *listenerSet) serve(srv *wire.Server, ln net.Listener) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		ln.Close()
		return
	}
	l.servers = append(l.servers, srv)
	go func() {
		if err := srv.Serve(ln); err != nil {
			select {
			case l.errc <- err:
			default:
			}
		}
	}()
}

// shutdownAll stops every server; no new one joins afterwards.
func (l *listenerSet) shutdownAll(ctx context.Context, log *zap.Logger) {
	l.mu.Lock()
	l.closed = true
	servers := append([]*wire.Server(nil), l.servers...)
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Add(1)
		go func(srv *wire.Server) {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				log.Warn("shutdown timed out; closed connections with requests still in flight", zap.Error(err))
			}
		}(srv)
	}
	wg.Wait()
}

// gatewayMode is what serve holds in gateway mode.
type gatewayMode struct {
	gw *gateway.Gateway
	up *upstream.Client
	// acls keeps the authorizer's bindings equal to the upstream's (nil without an authorizer).
	acls *gateway.ACLMirror
	// peers carries transaction outcomes to the nodes owning shards (nil: one node owns all).
	peers *gateway.PeerMarkers
	// refreshing lets one request refresh the catalog at a time; the others then find the view
	// fresh and do not ask the upstream again.
	refreshing sync.Mutex
	closeOnce  sync.Once
}

// close stops the upstream refresh (and so catalog writes) and closes upstream connections;
// called on shutdown before the state closes, and deferred for the error paths.
func (m *gatewayMode) close(ctx context.Context) {
	m.closeOnce.Do(func() {
		m.acls.Close()
		if m.peers != nil {
			m.peers.Close()
		}
		m.up.Close()
		m.gw.Close(ctx)
	})
}

// startGateway reaches the upstream (refusing to start when it cannot, after the configured
// retries), binds a listener per upstream broker and keeps the topic catalog equal to the
// upstream's.
func startGateway(ctx context.Context, cfg *config.Config, log *zap.Logger, reg prometheus.Registerer, local *handlers.Table, authorizer *acl.Authorizer,
	st *state, self config.Listener, newServer func(name string, h wire.Handler) *wire.Server, ls *listenerSet) (*gatewayMode, error) {
	g := cfg.Gateway
	sec, err := upstreamSecurity(g.Security)
	if err != nil {
		return nil, err
	}
	// With several nodes, the connections to the others carry transaction outcomes (the marker
	// relay's) and group config requests for their shards.
	var peers *gateway.PeerMarkers
	var groupOwner func(string) (gateway.Peer, bool)
	var peerRequest func(context.Context, gateway.Peer, kmsg.Request) (kmsg.Response, error)
	if st.shared {
		peers = peerMarkers(cfg, sec, st, log, reg)
		groupOwner = func(group string) (gateway.Peer, bool) {
			n, ok := st.groupOwner(st.groups.ShardOf(group))
			if !ok || n.Self {
				return gateway.Peer{}, false
			}
			return gateway.Peer{ID: n.ID, Host: n.Host, Port: n.Port}, true
		}
		peerRequest = peers.Request
	}
	// The mirror is made once the upstream client exists, before any port serves.
	var mirror *gateway.ACLMirror
	var aclsReread func(context.Context) error
	if authorizer.Enabled() {
		aclsReread = func(ctx context.Context) error { return mirror.Reread(ctx) }
	}
	gw, err := gateway.New(gateway.Options{
		GroupOwner: groupOwner, PeerRequest: peerRequest, Unlisted: st.unlisted, ACLsReread: aclsReread,
		Security: sec, UpstreamClientID: g.ClientID,
		SASLMechanisms: saslMechanisms(cfg), BrokerPortsListener: cfg.AdvertisedListeners[0].Name,
		Local: local, NodeID: cfg.NodeID, SelfHost: self.Host, SelfPort: int32(self.Port), Peers: st.peers,
		ListenHost: g.ListenHost, AdvertisedHost: g.AdvertisedHost, PortMin: g.PortMin, PortMax: g.PortMax, OwnPorts: g.OwnPorts,
		DataDir: cfg.LogDirs, WriteFileDurable: func(path string, data []byte) error { return segment.WriteFileDurable(segment.OSFS{}, path, data) },
		ConnectTimeout: g.ConnectTimeout, RequestTimeout: g.RequestTimeout, MaxResponseBytes: 1 << 30,
		Logger: log.With(zap.String("component", "gateway")), Metrics: gateway.NewMetrics(reg),
		Serve: func(name string, ln net.Listener, h wire.Handler) { ls.serve(newServer(name, h), ln) },
	})
	if err != nil {
		return nil, err
	}
	// OnView runs on the refresh goroutine once Start has started it, and broker ports serve
	// (and may ask for a refresh) before Start returns: started and startErr are shared.
	var startMu sync.Mutex
	var started bool
	var startErr error
	up, err := upstream.New(upstream.Options{
		Bootstrap: g.Bootstrap, ClientID: g.ClientID, RequestTimeout: g.RequestTimeout,
		ConnectTimeout: g.ConnectTimeout, MaxAge: g.MetadataMaxAge, Security: sec, Logger: log.With(zap.String("component", "upstream")),
		OnView: func(v *upstream.View) {
			if err := gw.OnView(v); err != nil {
				startMu.Lock()
				refused := !started
				if refused {
					startErr = err
				}
				startMu.Unlock()
				if refused {
					return
				}
			}
			mirrorCatalog(st, v, log, local.TopicsDeleted)
		},
	})
	if err != nil {
		return nil, err
	}
	gw.SetUpstream(up.Refresh, up.RefreshUntil)
	tb := &txnBackend{groups: st.groups, up: func() *upstream.Client { return up }, lg: log.With(zap.String("component", "txn-relay"))}
	if st.shared {
		tb.peers = peers
		tb.announced = st.announcedShard
	}
	gw.SetTxnBackend(tb)
	if st.shared {
		// A shard handed to this node brings the previous owner's staged transactions, which
		// no relay of this node has seen.
		loaded := gw.TxnShardLoaded
		st.onGroupLoaded.Store(&loaded)
		outcome := gw.TxnPeerOutcome
		st.peerOutcome.Store(&outcome)
	}
	if authorizer.Enabled() {
		// The upstream's ACLs are read before any port serves (broker ports start serving
		// during Start), so that no request is decided by an empty set.
		mirror = gateway.NewACLMirror(gateway.ACLMirrorOptions{
			Fetch: up.DescribeAllACLs, Authorizer: authorizer, Interval: cfg.Authorizer.UpstreamRefresh,
			Timeout: g.StartupTimeout, Logger: log.With(zap.String("component", "upstream-acls")), Registerer: reg,
		})
		if err := loadUpstreamACLs(ctx, mirror, g.StartupTimeout, log); err != nil {
			up.Close()
			return nil, fmt.Errorf("read the upstream cluster's ACLs (authorizer.class.name is set; coordinatord's upstream principal needs DESCRIBE on CLUSTER there, and the upstream an authorizer): %w", err)
		}
		authorizer.SetOnDenied(mirror.Denied)
		mirror.Start()
	}
	log.Info("gateway mode: connecting to the upstream cluster", zap.Strings("upstream.bootstrap.servers", g.Bootstrap))
	if err := up.Start(ctx, g.StartupTimeout); err != nil {
		mirror.Close()
		up.Close()
		return nil, err
	}
	startMu.Lock()
	err = startErr
	started = err == nil
	startMu.Unlock()
	if err != nil {
		mirror.Close()
		up.Close()
		return nil, err
	}
	v := up.Current()
	log.Info("gateway mode: upstream reached", zap.String("upstream_cluster_id", v.ClusterID),
		zap.Int("upstream_brokers", len(v.Brokers)), zap.Int("upstream_topics", len(v.Topics)), zap.Any("broker_ports", gw.Ports()))
	// Transactional requests wait until what a previous run left staged is resolved.
	go gw.RecoverTxns(ctx)
	return &gatewayMode{gw: gw, up: up, acls: mirror, peers: tb.peers}, nil
}

// loadUpstreamACLs reads the upstream's ACLs, retrying while the upstream cannot be reached
// (it may be starting too, as Start allows for) but not on its refusal, which no retry changes.
func loadUpstreamACLs(ctx context.Context, m *gateway.ACLMirror, timeout time.Duration, log *zap.Logger) error {
	deadline := time.Now().Add(timeout)
	for {
		err := m.Load(ctx)
		var ke *kerr.Error
		if err == nil || errors.As(err, &ke) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		log.Info("upstream ACLs not readable yet; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// mirrorCatalog writes the upstream's topics into the catalog (ids and partition counts), so
// group APIs validate against the cluster the clients actually use. A deletion seen upstream
// removes the topic's offsets, as Kafka does when a deletion reaches its group coordinator.
func mirrorCatalog(st *state, v *upstream.View, log *zap.Logger, topicsDeleted func()) {
	topics := make([]meta.Topic, 0, len(v.Topics))
	for _, t := range v.Topics {
		topics = append(topics, meta.Topic{Name: t.Name, ID: t.ID, Partitions: t.Partitions, ReplicationFactor: -1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfgMirrorTimeout)
	defer cancel()
	res, err := st.meta.Write(ctx, meta.Mirror(topics))
	if err != nil {
		log.Warn("could not mirror the upstream's topics into the catalog; retrying at the next refresh", zap.Error(err))
		return
	}
	r := res.(meta.MirrorResult)
	if len(r.Deleted) > 0 {
		topicsDeleted()
	}
	if m := st.membership.Load(); m != nil && slices.Contains(r.Deleted, st.stateTopic) {
		// Deleted, or deleted and re-created, under the node: its shards' memory holds
		// commits the topic no longer has. Served on, they would answer them until a write
		// failed, and a shard reloaded meanwhile would not: every shard loads again, and
		// serves what the topic holds once it exists again.
		n := m.LetGoOfAll()
		log.Error("the state topic was deleted upstream: the group state it held is gone; every shard of this node loads again from the topic, "+
			"once it exists again (a node creates it at start, compacted with offsets.topic.num.partitions partitions)",
			zap.String("log.kafka.topic", st.stateTopic), zap.Int("shards", n))
	}
	if n := len(r.Created) + len(r.Changed) + len(r.Deleted); n > 0 {
		log.Info("catalog follows the upstream", zap.Int("created", len(r.Created)), zap.Int("changed", len(r.Changed)),
			zap.Strings("deleted", r.Deleted))
	}
}

// saslMechanisms are sasl.enabled.mechanisms by SASL listener.
func saslMechanisms(cfg *config.Config) map[string][]string {
	m := map[string][]string{}
	for _, l := range cfg.Listeners {
		if l.Security.SASL() {
			m[l.Name] = l.Security.SASLMechanisms
		}
	}
	return m
}

// upstreamSecurity loads the upstream.ssl.* material and the gateway's own SASL login.
func upstreamSecurity(s config.UpstreamSecurity) (upstream.Security, error) {
	sec, err := upstream.NewSecurity(upstream.SecurityConfig{
		TLS: s.TLS(), SASL: s.SASL(),
		TruststoreLocation: s.TruststoreLocation, TruststoreCertificates: s.TruststoreCertificates,
		KeystoreLocation: s.KeystoreLocation, KeystoreCertificateChain: s.KeystoreCertificateChain, KeystoreKey: s.KeystoreKey,
		VerifyHostname: s.VerifyHostname, Mechanism: s.Mechanism, Username: s.Username, Password: s.Password,
	})
	if err != nil {
		return sec, &config.KeyError{Key: "upstream.security.protocol", Value: s.Protocol, Reason: err.Error()}
	}
	return sec, nil
}

func gatewayError(err error) error { return fmt.Errorf("gateway mode: %w", err) }

const cfgMirrorTimeout = 30 * time.Second

// createUpstream creates Streams internal topics in the upstream cluster, where the clients'
// data lives, instead of in the catalog; the catalog learns them from the refresh that
// CreateTopics waits for.
func (m *gatewayMode) createUpstream(ctx context.Context, topics []meta.NewTopic) ([]meta.TopicResult, error) {
	nts := make([]upstream.NewTopic, len(topics))
	for i, t := range topics {
		nts[i] = upstream.NewTopic{Name: t.Name, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor, Configs: t.Configs}
		if nts[i].ReplicationFactor == 0 {
			nts[i].ReplicationFactor = -1
		}
	}
	rs, err := m.up.CreateTopics(ctx, nts)
	if err != nil {
		return nil, err
	}
	out := make([]meta.TopicResult, len(rs))
	for i, r := range rs {
		out[i] = meta.TopicResult{Name: r.Name, Code: r.Code, Message: r.Message}
	}
	return out, nil
}

// catalogRefreshMinInterval bounds the upstream metadata requests that requests naming unknown
// topics can cause: a client committing for topics that do not exist costs the upstream at most
// one metadata request per interval, however fast it sends.
const catalogRefreshMinInterval = time.Second

// refreshCatalog fetches the upstream's metadata (and so mirrors it into the catalog), no
// sooner than catalogRefreshMinInterval after the last fetch; requests that asked meanwhile
// share one fetch.
func (m *gatewayMode) refreshCatalog(ctx context.Context) error {
	asked := time.Now()
	m.refreshing.Lock()
	defer m.refreshing.Unlock()
	v := m.up.Current()
	if v != nil && v.Fetched.After(asked) {
		return nil // another request refreshed while this one waited
	}
	if v != nil {
		// Too soon after the last look: wait for the interval rather than skip, since the
		// topic may have been created just after that look.
		select {
		case <-time.After(time.Until(v.Fetched.Add(catalogRefreshMinInterval))):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return m.up.RefreshUntil(ctx, func(*upstream.View) bool { return true })
}

// peerMarkers connects this node to the others to hand them transaction outcomes for their
// shards (gateway/txnpeer.go). A node reaches another at the address the assignment names (its
// first advertised listener) with that listener's protocol, and authenticates with
// coordinatord's own upstream login and TLS settings: the other node's SASL listener checks the
// login with the upstream, as for any client, and its authorizer wants CLUSTER_ACTION for it.
func peerMarkers(cfg *config.Config, sec upstream.Security, st *state, log *zap.Logger, reg prometheus.Registerer) *gateway.PeerMarkers {
	var ls config.ListenerSecurity
	for _, l := range cfg.Listeners {
		if l.Name == cfg.AdvertisedListeners[0].Name {
			ls = l.Security
		}
	}
	var peerSec upstream.Security
	if ls.TLS() {
		peerSec.TLS = sec.TLS
		if peerSec.TLS == nil {
			peerSec.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	if ls.SASL() {
		peerSec.SASL = sec.SASL
	}
	return gateway.NewPeerMarkers(gateway.PeerMarkersOptions{
		Owner: func(i int32) (gateway.Peer, bool) {
			n, ok := st.groupOwner(i)
			if !ok || n.Self {
				return gateway.Peer{}, false
			}
			return gateway.Peer{ID: n.ID, Host: n.Host, Port: n.Port}, true
		},
		Nodes: st.peers, SelfID: cfg.NodeID,
		Security: peerSec, DialTimeout: cfg.Gateway.ConnectTimeout, ClientID: cfg.Gateway.ClientID,
		Timeout: cfg.Gateway.RequestTimeout,
		Logger:  log.With(zap.String("component", "txn-peers")), Registerer: reg,
	})
}
