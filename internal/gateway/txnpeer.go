package gateway

// Delivery of a transaction outcome to the node owning a shard (log.backend=kafka with several
// nodes; docs/scale-out.md, "Transaction outcomes across nodes"). A producer's
// TxnOffsetCommit goes to the owner of its group's shard, but its EndTxn passes through the node
// whose gateway port fronts the upstream transaction coordinator, which may be another one. That
// node's relay learns the outcome (txnrelay.go) and hands it to the owner as Kafka's transaction
// coordinator hands it to a group coordinator: a WriteTxnMarkers for partition N of
// __consumer_offsets, sent to the owner's advertised listener with coordinatord's own upstream
// login (which the owner's SASL listener checks with the upstream, sasl_relay.go; with an
// authorizer the principal needs CLUSTER_ACTION, as for any marker). The EndTxn answer is held
// until the owner has made the marker durable, so what a client is told committed is committed
// on the owner; a marker the owner cannot take yet (hand-over, a node down) fails the delivery,
// and the relay's retry (the client's EndTxn retry, the sweep) sends it again to whoever owns the
// shard then.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// PeerMarkersOptions configure PeerMarkers.
type PeerMarkersOptions struct {
	// Owner is the node owning a shard in the latest assignment, other than this one; false
	// while it is handed over, unknown, or this node.
	Owner func(shard int32) (Peer, bool)
	// Nodes are the nodes of the latest assignment: connections to others are closed, and
	// Settle asks each but SelfID.
	Nodes  func() []Peer
	SelfID int32
	// Security secures the connections to the other nodes: TLS, and coordinatord's own login,
	// which the other node's SASL listener checks with the upstream.
	Security    upstream.Security
	DialTimeout time.Duration
	ClientID    string
	// Timeout bounds one delivery.
	Timeout time.Duration
	// Send replaces the connection (tests).
	Send       func(ctx context.Context, p Peer, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// PeerMarkers sends transaction markers to the nodes owning shards.
type PeerMarkers struct {
	o       PeerMarkersOptions
	results *prometheus.CounterVec

	mu    sync.Mutex
	pools map[string]*peerPool // by address; at most one per node of the assignment
}

// errNoOwner is a shard being handed over: no node takes its markers yet.
var errNoOwner = errors.New("the shard has no owner in the latest assignment (handed over)")

// NewPeerMarkers creates the sender.
func NewPeerMarkers(o PeerMarkersOptions) *PeerMarkers {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	p := &PeerMarkers{o: o, pools: map[string]*peerPool{},
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_txn_peer_markers_total",
			Help: "Transaction outcomes this node's marker relay sent to the node owning a shard (log.backend=kafka), by result: applied, refused (the owner's shard had a later producer or coordinator epoch), retry (no owner, unreachable, or an answer asking to retry; sent again later); and settle requests to every node after an EndTxn answer: settled (every shard answered for), unsettled (the answer is held).",
		}, []string{"result"}),
	}
	if o.Send == nil {
		p.o.Send = p.send
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(p.results)
	}
	return p
}

// Mark delivers a marker for a producer's staged offsets on shard to the shard's owner and
// returns once the owner made it durable: code is the owner's marker answer
// (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a later marker already settled them).
// An error means the marker may not have been applied; it is safe to send again.
func (p *PeerMarkers) Mark(ctx context.Context, shard int32, producerID int64, epoch int16, commit bool) (int16, error) {
	peer, ok := p.o.Owner(shard)
	if !ok {
		p.results.WithLabelValues(string(peerMarkerRetry)).Inc()
		return 0, fmt.Errorf("shard %d: %w", shard, errNoOwner)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = producerID, epoch, commit
	// The relay has no coordinator epoch of its own; -1 is below every epoch a transaction
	// coordinator uses, so an operator's marker with a real one still wins (the owner answers
	// TRANSACTION_COORDINATOR_FENCED, having settled the offsets by then).
	m.CoordinatorEpoch = -1
	t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	t.Topic = "__consumer_offsets"
	t.Partitions = []int32{shard}
	m.Topics = append(m.Topics, t)
	req.Markers = append(req.Markers, m)

	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	resp, err := p.o.Send(ctx, peer, req)
	if err == nil {
		var code int16
		code, err = markerCode(resp)
		if err == nil {
			switch code {
			case 0:
				p.results.WithLabelValues(string(peerMarkerApplied)).Inc()
				return 0, nil
			case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
				p.results.WithLabelValues(string(peerMarkerRefused)).Inc()
				return code, nil
			}
			// NOT_LEADER_OR_FOLLOWER (the owner is loading or just lost the shard), or a
			// refusal an operator must fix (CLUSTER_AUTHORIZATION_FAILED): not applied.
			err = kerr.ErrorForCode(code)
		}
	}
	p.results.WithLabelValues(string(peerMarkerRetry)).Inc()
	p.o.Logger.Warn("could not hand a transaction outcome to the node owning its shard; the relay sends it again",
		zap.Int32("shard", shard), zap.Int32("owner", peer.ID), zap.Int64("producer_id", producerID),
		zap.Int16("epoch", epoch), zap.Bool("commit", commit), zap.Error(err))
	return 0, fmt.Errorf("node %d, shard %d: %w", peer.ID, shard, err)
}

// Settle asks every other node of the assignment to settle a producer's transaction wherever it
// holds staged offsets of it, in parallel (a WriteTxnMarkers for __consumer_offsets naming no
// partition; TxnPeerOutcome there), and returns nil once the shards answered for, by covered
// (this node's) and the others' answers, are all count of them. Until then a later transaction
// of the producer could mix with offsets of this one on a shard nobody answered for (its owner
// is loading it, or unreachable), so the caller holds the client's answer.
func (p *PeerMarkers) Settle(ctx context.Context, producerID int64, epoch int16, commit bool, covered map[int32]bool, count int32) error {
	var peers []Peer
	if p.o.Nodes != nil {
		for _, n := range p.o.Nodes() {
			if n.ID != p.o.SelfID {
				peers = append(peers, n)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	type answer struct {
		peer Peer
		resp *kmsg.WriteTxnMarkersResponse
		err  error
	}
	answers := make(chan answer, len(peers))
	for _, peer := range peers {
		go func() {
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			req.Version = 1
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = producerID, epoch, commit, -1
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = "__consumer_offsets" // and no partition: wherever the node holds them
			m.Topics = append(m.Topics, t)
			req.Markers = append(req.Markers, m)
			resp, err := p.o.Send(ctx, peer, req)
			answers <- answer{peer, resp, err}
		}()
	}
	all := make(map[int32]bool, count)
	for sh := range covered {
		all[sh] = true
	}
	var errs []error
	for range peers {
		a := <-answers
		if a.err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", a.peer.ID, a.err))
			continue
		}
		for _, m := range a.resp.Markers {
			for _, t := range m.Topics {
				for _, pt := range t.Partitions {
					if pt.ErrorCode == 0 {
						all[pt.Partition] = true
					}
				}
			}
		}
	}
	var missing []int32
	for sh := range count {
		if !all[sh] {
			missing = append(missing, sh)
		}
	}
	if len(missing) == 0 {
		p.results.WithLabelValues(string(peerMarkerSettled)).Inc()
		return nil
	}
	p.results.WithLabelValues(string(peerMarkerUnsettled)).Inc()
	err := fmt.Errorf("no node answered for shards %v (handed over, loading or unreachable): %w", missing, errors.Join(errs...))
	p.o.Logger.Warn("not every shard's owner settled a transaction; the client's EndTxn answer is held",
		zap.Int64("producer_id", producerID), zap.Int16("epoch", epoch), zap.Bool("commit", commit), zap.Int32s("shards", missing), zap.Error(err))
	return err
}

// markerCode is the answer for the one partition of a marker request.
func markerCode(resp *kmsg.WriteTxnMarkersResponse) (int16, error) {
	if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		return 0, errors.New("malformed WriteTxnMarkers answer")
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode, nil
}

func (p *PeerMarkers) send(ctx context.Context, peer Peer, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	resp, err := p.roundTrip(ctx, peer, p.o.ClientID, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// Request sends req to another node's own listener over the same bounded connections as the
// markers, under PeerForwardClientID: the group config requests a node passes to the owner of
// the group's shard (configs.go).
func (p *PeerMarkers) Request(ctx context.Context, peer Peer, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	return p.roundTrip(ctx, peer, PeerForwardClientID, req)
}

func (p *PeerMarkers) roundTrip(ctx context.Context, peer Peer, clientID string, req kmsg.Request) (kmsg.Response, error) {
	pool := p.pool(peer)
	select {
	case pool.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-pool.slots }()
	var c *peerConn
	select {
	case c = <-pool.idle:
	default:
		// The owner's own listener, not a gateway port: WriteTxnMarkers is answered there
		// (the gateway never advertises it, so a Kafka client library would refuse to send it).
		d := &net.Dialer{Timeout: p.o.DialTimeout}
		nc, _, err := p.o.Security.Dial(ctx, d, pool.addr, p.o.ClientID, true)
		if err != nil {
			return nil, err
		}
		c = &peerConn{nc: nc}
	}
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
	}
	resp, err := upstream.RoundTrip(c.nc, clientID, &c.corr, req)
	if err != nil {
		c.nc.Close() // its state is unknown: the next delivery dials again
		return nil, err
	}
	c.nc.SetDeadline(time.Time{})
	// Under mu: a pool dropped meanwhile (its node left the assignment) has been drained, and
	// must not be given a connection again.
	p.mu.Lock()
	kept := false
	if p.pools[pool.addr] == pool {
		select {
		case pool.idle <- c:
			kept = true
		default:
		}
	}
	p.mu.Unlock()
	if !kept {
		c.nc.Close()
	}
	return resp, nil
}

// peerConnsPerNode bounds the connections (and the deliveries in flight) to one node; a
// delivery beyond them waits for a free one.
const peerConnsPerNode = 8

type peerConn struct {
	nc   net.Conn
	corr int32
}

type peerPool struct {
	addr  string
	slots chan struct{}  // deliveries in flight
	idle  chan *peerConn // open connections not in use
}

func (pp *peerPool) close() {
	for {
		select {
		case c := <-pp.idle:
			c.nc.Close()
		default:
			return
		}
	}
}

// pool is the connections to a node; those of nodes that left the assignment are closed, so
// there are never more pools than the assignment has nodes.
func (p *PeerMarkers) pool(peer Peer) *peerPool {
	addr := net.JoinHostPort(peer.Host, strconv.Itoa(int(peer.Port)))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o.Nodes != nil {
		live := map[string]bool{addr: true}
		for _, n := range p.o.Nodes() {
			live[net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))] = true
		}
		for a, pp := range p.pools {
			if !live[a] {
				pp.close() // a delivery in flight closes its connection when it returns it
				delete(p.pools, a)
			}
		}
	}
	pp := p.pools[addr]
	if pp == nil {
		pp = &peerPool{addr: addr, slots: make(chan struct{}, peerConnsPerNode), idle: make(chan *peerConn, peerConnsPerNode)}
		p.pools[addr] = pp
	}
	return pp
}

// Close closes the idle connections.
func (p *PeerMarkers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, pp := range p.pools {
		pp.close()
		delete(p.pools, a)
	}
}
