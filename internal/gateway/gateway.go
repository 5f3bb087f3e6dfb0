// Package gateway is coordinatord's gateway mode: clients bootstrap to coordinatord, which
// answers the group APIs itself and passes every other request on to an upstream Kafka cluster.
// Each upstream broker is reachable only through a listener of its own ("port per broker"), so
// a client never learns an upstream address: the answers that carry one (Metadata,
// DescribeCluster, FindCoordinator for transactions, the leader hints of Produce and Fetch) are
// rewritten on the way back.
package gateway

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Local is what answers the requests coordinatord serves itself: the handler table.
type Local interface {
	wire.Handler
	// Versions is the local API table, ApiVersions' source.
	Versions() []kmsg.ApiVersionsResponseApiKey
}

// Peer is another coordinatord node as clients reach it.
type Peer struct {
	ID   int32
	Host string
	Port int32
}

// Options configure a Gateway.
type Options struct {
	Local  Local
	NodeID int32
	// SelfHost and SelfPort are coordinatord's own advertised address (its broker entry).
	SelfHost string
	SelfPort int32
	// Peers, when set, are the other coordinatord nodes sharing the group shards
	// (log.backend=kafka): listed beside this node in broker lists, so that a client told to
	// find a group's coordinator on one of them knows it.
	Peers func() []Peer
	// Unlisted, when set and true, is a node the shard map leaves out (its group's leader
	// refused it: a node.id another node uses, another shard count): broker lists show the
	// map's nodes only, not this one, so that a client never takes this node for the node the
	// map lists under its id.
	Unlisted func() bool
	// GroupOwner, when set (several nodes share the group shards), is the other node owning a
	// group's shard; false when this node owns it or nobody does now. PeerRequest sends a
	// request to another node's own listener. With both, group config requests for another
	// node's shard are passed to it (configs.go).
	GroupOwner  func(group string) (Peer, bool)
	PeerRequest func(ctx context.Context, p Peer, req kmsg.Request) (kmsg.Response, error)
	// ACLsReread, when set (an authorizer in force), reads the upstream's ACLs again at once
	// and returns when that read has ended (ACLMirror.Reread): after a forwarded
	// CreateAcls/DeleteAcls, and on another node's notice of one (aclchange.go).
	ACLsReread func(ctx context.Context) error
	// ListenHost and AdvertisedHost are where broker listeners bind and what clients are told.
	ListenHost, AdvertisedHost string
	PortMin, PortMax           int
	// OwnPorts are ports of the range this node's other listeners use; no broker listener
	// takes one, though it may be free when the broker is first seen.
	OwnPorts []int
	DataDir  string
	// WriteFileDurable replaces a file so that a crash leaves the old or the new content.
	WriteFileDurable func(path string, data []byte) error
	ConnectTimeout   time.Duration
	// RequestTimeout bounds the wait for a forwarded request's answer beyond the wait the
	// request itself asks of the broker (upstream.request.timeout.ms); 0: unbounded.
	RequestTimeout time.Duration
	// Security secures each upstream connection (upstream.security.protocol, upstream.ssl.*,
	// upstream.sasl.*); UpstreamClientID names coordinatord's own login requests.
	Security         upstream.Security
	UpstreamClientID string
	// SASLMechanisms are the mechanisms relayed to the upstream, by listener name
	// (sasl.enabled.mechanisms of SASL listeners); the per-upstream-broker ports use those of
	// BrokerPortsListener, the listener whose settings they serve with.
	SASLMechanisms      map[string][]string
	BrokerPortsListener string
	// MaxResponseBytes bounds one upstream response frame.
	MaxResponseBytes int32
	Logger           *zap.Logger
	Metrics          *Metrics
	// Serve starts a wire server for a broker listener (the caller owns the transport options
	// and shutdown).
	Serve func(listenerName string, ln net.Listener, h wire.Handler)
}

// Gateway holds the broker listeners and the upstream view.
type Gateway struct {
	opts  Options
	lg    *zap.Logger
	ports *portMap

	mu        sync.RWMutex
	view      *upstream.View
	listeners map[int32]int32 // upstream node id -> bound port
	refresh   func()
	// refreshUntil fetches upstream metadata until done accepts it (nil in unit tests).
	refreshUntil func(ctx context.Context, done func(*upstream.View) bool) error
	// catchingUp makes the Metadata answers that show a topic re-created upstream wait for one
	// refresh between them, not one each (afterMetadata).
	catchingUp sync.Mutex
	// unwaited are topic ids no Metadata answer waits for (afterMetadata): ids the view has
	// replaced, which only a broker behind the view still names, and ids a wait already gave
	// up on. Guarded by mu; emptied when it reaches maxUnwaitedIDs.
	unwaited map[[16]byte]bool

	// conns maps each client connection (*wire.Conn: ids are per listener, so they repeat
	// across the gateway's listeners) to what it holds upstream (*clientConn).
	conns sync.Map

	// relay is the marker relay (txnrelay.go); nil until SetTxnBackend.
	relay *txnRelay

	lastNoListenerLog atomic.Int64 // unix nanoseconds
	// lookScheduled is set while a look at the upstream's metadata that a Metadata answer
	// asked for waits for viewLookMinInterval to pass (lookIfViewDisagrees).
	lookScheduled atomic.Bool
}

// New creates a gateway; Attach connects it to the upstream client.
func New(opts Options) (*Gateway, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 1 << 30
	}
	pm, err := loadPortMap(opts.DataDir, opts.PortMin, opts.PortMax, opts.WriteFileDurable)
	if err != nil {
		return nil, err
	}
	return &Gateway{opts: opts, lg: opts.Logger, ports: pm, listeners: map[int32]int32{}, refresh: func() {}}, nil
}

// SetUpstream gives the gateway its ways to ask for fresh upstream metadata: soon (a response
// named a broker it does not know), or now and until a change shows.
func (g *Gateway) SetUpstream(refresh func(), refreshUntil func(ctx context.Context, done func(*upstream.View) bool) error) {
	g.refresh, g.refreshUntil = refresh, refreshUntil
}

// OnView takes a new upstream view: it checks that no upstream broker has coordinatord's node
// id and binds a listener for every broker that has none yet. It returns an error on a node id
// clash, which refuses a start.
func (g *Gateway) OnView(v *upstream.View) error {
	for _, b := range v.Brokers {
		if b.NodeID == g.opts.NodeID {
			err := fmt.Errorf("upstream broker %d (%s) has coordinatord's node.id %d: clients could not tell them apart; give coordinatord a node.id no upstream broker uses", b.NodeID, b.Addr(), g.opts.NodeID)
			g.lg.Error("node id clash with the upstream cluster", zap.Error(err))
			return err
		}
	}
	for _, b := range v.Brokers {
		if _, err := g.ensureListener(b.NodeID, true); err != nil {
			g.lg.Error("cannot listen for upstream broker; clients cannot reach it", zap.Int32("node_id", b.NodeID), zap.Error(err))
		}
	}
	g.mu.Lock()
	if g.view != nil {
		for _, t := range v.Topics {
			if old, ok := g.view.TopicID(t.Name); ok && old != t.ID {
				g.unwaitLocked(old)
			}
		}
	}
	g.view = v
	g.mu.Unlock()
	return nil
}

// maxUnwaitedIDs bounds unwaited: forgetting one costs at most one more topicWaitMax wait.
const maxUnwaitedIDs = 4096

func (g *Gateway) unwaitLocked(id [16]byte) {
	if g.unwaited == nil || len(g.unwaited) >= maxUnwaitedIDs {
		g.unwaited = map[[16]byte]bool{}
	}
	g.unwaited[id] = true
}

// View is the latest upstream view.
func (g *Gateway) View() *upstream.View {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.view
}

// maxUnlistedListeners bounds the listeners bound for node ids that an answer named (a leader
// hint, a transaction coordinator) before the upstream's metadata listed them. Such a broker
// is reachable at once, as a client told of it expects; but an upstream that names ever new
// ids cannot make the gateway bind ports and grow its port map without end.
const maxUnlistedListeners = 64

// ensureListener returns the port clients use for node id, binding it first if needed; listed
// says the upstream's metadata lists the node.
func (g *Gateway) ensureListener(id int32, listed bool) (int32, error) {
	g.mu.RLock()
	p, ok := g.listeners[id]
	g.mu.RUnlock()
	if ok {
		return p, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.listeners[id]; ok {
		return p, nil
	}
	if !listed && g.unlistedListeners() >= maxUnlistedListeners {
		return 0, fmt.Errorf("%d listeners are bound for nodes the upstream's metadata does not list; node %d named by an answer gets none until the metadata lists it", maxUnlistedListeners, id)
	}
	// A port of the range that another process holds is passed over, or the first such port
	// would leave every new node without a listener; a node's recorded port is never moved.
	var taken map[int]bool
	for _, p := range g.opts.OwnPorts {
		if taken == nil {
			taken = map[int]bool{}
		}
		taken[p] = true
	}
	var ln net.Listener
	for {
		want, recorded := g.ports.portSkipping(id, taken)
		if want < 0 {
			return 0, fmt.Errorf("gateway.broker.port.range %d-%d has no free port left", g.opts.PortMin, g.opts.PortMax)
		}
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(g.opts.ListenHost, strconv.Itoa(want)))
		if err == nil {
			break
		}
		if recorded || want == 0 {
			return 0, err
		}
		g.lg.Warn("gateway broker port taken by another process; trying the next", zap.Int("port", want), zap.Error(err))
		if taken == nil {
			taken = map[int]bool{}
		}
		taken[want] = true
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := g.ports.bound(id, port); err != nil {
		ln.Close()
		return 0, fmt.Errorf("recording the port of node %d: %w", id, err)
	}
	g.listeners[id] = int32(port)
	g.lg.Info("listening for upstream broker", zap.Int32("node_id", id), zap.String("addr", ln.Addr().String()))
	g.opts.Serve(fmt.Sprintf("BROKER-%d", id), ln, &portHandler{g: g, node: id})
	return int32(port), nil
}

// mechanisms are the SASL mechanisms relayed on listener.
func (g *Gateway) mechanisms(listener string) []string {
	if m, ok := g.opts.SASLMechanisms[listener]; ok {
		return m
	}
	return g.opts.SASLMechanisms[g.opts.BrokerPortsListener]
}

// unlistedListeners counts the bound listeners whose node the current view does not list;
// g.mu held.
func (g *Gateway) unlistedListeners() int {
	n := 0
	for id := range g.listeners {
		if g.view == nil {
			n++
		} else if _, ok := g.view.Broker(id); !ok {
			n++
		}
	}
	return n
}

// address returns what clients are told for node id; ok=false when no listener could be bound.
func (g *Gateway) address(id int32) (host string, port int32, ok bool) {
	listed := false
	if v := g.View(); v != nil {
		_, listed = v.Broker(id)
	}
	if !listed {
		// Named by an answer (a leader hint) before the view lists it: its port would refuse
		// every forward until the next periodic refresh.
		defer g.refresh()
	}
	p, err := g.ensureListener(id, listed)
	if err != nil {
		g.warnNoListener(id, err)
		return "", 0, false
	}
	return g.opts.AdvertisedHost, p, true
}

// warnNoListener logs a node left out of an answer, at most once a minute: an upstream that
// keeps naming unknown nodes would otherwise log once per forwarded answer.
func (g *Gateway) warnNoListener(id int32, err error) {
	now := time.Now().UnixNano()
	last := g.lastNoListenerLog.Load()
	if now-last < int64(time.Minute) || !g.lastNoListenerLog.CompareAndSwap(last, now) {
		return
	}
	g.lg.Warn("upstream node left out of an answer to a client: no gateway listener for it", zap.Int32("node_id", id), zap.Error(err))
}

// Ports lists the broker listeners, node id -> port (for logs and tests).
func (g *Gateway) Ports() map[int32]int32 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make(map[int32]int32, len(g.listeners))
	for k, v := range g.listeners {
		out[k] = v
	}
	return out
}

// SelfHandler is the handler of coordinatord's own listeners in gateway mode.
func (g *Gateway) SelfHandler() wire.Handler { return &portHandler{g: g, node: -1} }

// pinnedNode picks the upstream broker that forwarded requests of a connection on
// coordinatord's own port go to: one per connection, so order and fetch sessions hold.
func (g *Gateway) pinnedNode(connID uint64) (upstream.Broker, bool) {
	v := g.View()
	if v == nil || len(v.Brokers) == 0 {
		return upstream.Broker{}, false
	}
	brokers := append([]upstream.Broker(nil), v.Brokers...)
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].NodeID < brokers[j].NodeID })
	return brokers[connID%uint64(len(brokers))], true
}

// closeConn drops a client connection's upstream connections.
func (g *Gateway) closeConn(conn *wire.Conn) {
	if c, ok := g.conns.LoadAndDelete(conn); ok {
		c.(*clientConn).close()
	}
}

// Close closes every upstream connection still open.
func (g *Gateway) Close(ctx context.Context) {
	g.conns.Range(func(k, v any) bool {
		v.(*clientConn).close()
		g.conns.Delete(k)
		return true
	})
}
