package gateway

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/internal/wire/wiretest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakePeer answers markers with queued codes (or a connection error) and records them.
type fakePeer struct {
	mu    sync.Mutex
	codes []int16
	err   error
	sent  []*kmsg.WriteTxnMarkersRequest
	to    []Peer
}

func (f *fakePeer) send(_ context.Context, p Peer, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent, f.to = append(f.sent, req), append(f.to, p)
	if f.err != nil {
		return nil, f.err
	}
	code := f.codes[0]
	f.codes = f.codes[1:]
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	m := kmsg.NewWriteTxnMarkersResponseMarker()
	rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
	rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
	rp.Partition, rp.ErrorCode = req.Markers[0].Topics[0].Partitions[0], code
	rt.Partitions = append(rt.Partitions, rp)
	m.Topics = append(m.Topics, rt)
	resp.Markers = append(resp.Markers, m)
	return resp, nil
}

// A marker for a shard another node owns goes to that node as Kafka's transaction coordinator
// sends it (partition N of __consumer_offsets, the producer's id and epoch, the outcome), and
// counts as delivered only when the owner answers NONE; NOT_LEADER_OR_FOLLOWER (the owner is
// loading it), an unreachable owner and a shard without an owner (handed over) are errors the
// relay retries; a later epoch's refusal is an answer, as from a local shard.
func TestPeerMarkersDeliverToTheOwnerAndReportWhatToRetry(t *testing.T) {
	owners := map[int32]Peer{3: {ID: 1002, Host: "coord-2", Port: 9092}}
	f := &fakePeer{}
	p := NewPeerMarkers(PeerMarkersOptions{Owner: func(sh int32) (Peer, bool) { o, ok := owners[sh]; return o, ok }, Send: f.send})

	f.codes = []int16{0, kerr.NotLeaderForPartition.Code, kerr.InvalidProducerEpoch.Code, kerr.ClusterAuthorizationFailed.Code}
	if code, err := p.Mark(context.Background(), 3, 77, 4, true); err != nil || code != 0 {
		t.Fatalf("applied: code %d err %v", code, err)
	}
	req := f.sent[0]
	m := req.Markers[0]
	if f.to[0].ID != 1002 || len(req.Markers) != 1 || m.ProducerID != 77 || m.ProducerEpoch != 4 || !m.Committed ||
		m.CoordinatorEpoch != -1 || len(m.Topics) != 1 || m.Topics[0].Topic != "__consumer_offsets" || len(m.Topics[0].Partitions) != 1 || m.Topics[0].Partitions[0] != 3 {
		t.Fatalf("sent %+v to %+v", req, f.to[0])
	}
	if _, err := p.Mark(context.Background(), 3, 77, 4, false); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("the owner still loading: %v, want NOT_LEADER_OR_FOLLOWER as an error", err)
	}
	if code, err := p.Mark(context.Background(), 3, 77, 4, false); err != nil || code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a later epoch on the owner: code %d err %v, want INVALID_PRODUCER_EPOCH as an answer", code, err)
	}
	if _, err := p.Mark(context.Background(), 3, 77, 4, false); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("refused by the owner's authorizer: %v, want an error (not applied)", err)
	}
	f.err = errors.New("connection refused")
	if _, err := p.Mark(context.Background(), 3, 77, 4, true); err == nil {
		t.Fatal("an unreachable owner counted as delivered")
	}
	sent := len(f.sent)
	if _, err := p.Mark(context.Background(), 5, 77, 4, true); !errors.Is(err, errNoOwner) || len(f.sent) != sent {
		t.Fatalf("a shard being handed over: %v (sent %d), want errNoOwner and nothing sent", err, len(f.sent)-sent)
	}
	for result, want := range map[string]float64{"applied": 1, "refused": 1, "retry": 4} {
		if got := seriesValue(t, p.results.WithLabelValues(result)); got != want {
			t.Errorf("coordinatord_gateway_txn_peer_markers_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// Connections to the other nodes are kept one per node of the latest assignment: a node that
// left it has its connection closed at the next delivery.
func TestPeerMarkersKeepConnectionsOnlyToNodesOfTheAssignment(t *testing.T) {
	var mu sync.Mutex
	nodes := []Peer{{ID: 1, Host: "127.0.0.1", Port: 1}, {ID: 2, Host: "127.0.0.1", Port: 2}}
	p := NewPeerMarkers(PeerMarkersOptions{Owner: func(int32) (Peer, bool) { return Peer{}, false },
		Nodes: func() []Peer { mu.Lock(); defer mu.Unlock(); return append([]Peer(nil), nodes...) }})
	defer p.Close()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { p.pool(n) })
	}
	wg.Wait()
	if len(p.pools) != 2 {
		t.Fatalf("%d pools, want 2", len(p.pools))
	}
	mu.Lock()
	nodes = nodes[1:]
	mu.Unlock()
	p.pool(nodes[0])
	if _, ok := p.pools["127.0.0.1:1"]; ok || len(p.pools) != 1 {
		t.Fatalf("pools %v, want only node 2's", p.pools)
	}
}

// markerServer answers every WriteTxnMarkers frame on its connections with NONE for each
// partition, as coordinatord's own listener does, and counts the connections.
func markerServer(t *testing.T) (addr string, conns *atomic.Int32) {
	t.Helper()
	s := wiretest.Serve(t, func(h wire.Header, body []byte) kmsg.Response {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		if !wiretest.Request(h, body, req) {
			t.Errorf("a WriteTxnMarkers v%d frame does not decode", h.Version)
			return nil
		}
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, mt := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = mt.Topic
				for _, p := range mt.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp
	})
	return s.Addr.String(), &s.Conns
}

// Deliveries over real connections: the flexible request and answer frames round-trip, and a
// connection is reused rather than one dialed per marker.
func TestPeerMarkersReuseTheirConnection(t *testing.T) {
	addr, conns := markerServer(t)
	host, port, _ := net.SplitHostPort(addr)
	pn, _ := strconv.Atoi(port)
	peer := Peer{ID: 1002, Host: host, Port: int32(pn)}
	p := NewPeerMarkers(PeerMarkersOptions{Owner: func(int32) (Peer, bool) { return peer, true }, DialTimeout: time.Second})
	defer p.Close()
	for i := range 5 {
		if code, err := p.Mark(context.Background(), 3, 77, int16(i), true); err != nil || code != 0 {
			t.Fatalf("delivery %d: code %d err %v", i, code, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 deliveries in a row, want 1", n)
	}
}

// Settle asks every other node of the assignment and succeeds only when the shards answered for
// (this node's and the others' NONE partitions) are all of them; a node that cannot be reached
// or answers for fewer leaves the rest unsettled.
func TestPeerMarkersSettleNeedsEveryShardAnsweredFor(t *testing.T) {
	nodes := []Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	var mu sync.Mutex
	answers := map[int32][]int32{2: {2, 3}, 3: {4, 5}}
	down := map[int32]bool{}
	var asked []int32
	p := NewPeerMarkers(PeerMarkersOptions{SelfID: 1, Nodes: func() []Peer { return nodes },
		Send: func(_ context.Context, peer Peer, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, peer.ID)
			m := req.Markers[0]
			if m.ProducerID != 77 || m.ProducerEpoch != 4 || !m.Committed || len(m.Topics) != 1 || m.Topics[0].Topic != "__consumer_offsets" || len(m.Topics[0].Partitions) != 0 {
				t.Errorf("settle request %+v", m)
			}
			if down[peer.ID] {
				return nil, errors.New("connection refused")
			}
			resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			for _, sh := range answers[peer.ID] {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = sh
				rt.Partitions = append(rt.Partitions, rp)
			}
			rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
			rp.Partition, rp.ErrorCode = 0, kerr.NotLeaderForPartition.Code // not a cover
			rt.Partitions = append(rt.Partitions, rp)
			rm.Topics = append(rm.Topics, rt)
			resp.Markers = append(resp.Markers, rm)
			return resp, nil
		}})
	mine := map[int32]bool{0: true, 1: true}
	if err := p.Settle(context.Background(), 77, 4, true, mine, 6); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || slices.Contains(asked, 1) {
		t.Fatalf("asked nodes %v, want 2 and 3", asked)
	}
	if err := p.Settle(context.Background(), 77, 4, true, map[int32]bool{1: true}, 6); err == nil {
		t.Fatal("settled with shard 0 answered for by nobody")
	}
	down[3] = true
	if err := p.Settle(context.Background(), 77, 4, true, mine, 6); err == nil {
		t.Fatal("settled with node 3 (shards 4 and 5) unreachable")
	}
	for result, want := range map[string]float64{"settled": 1, "unsettled": 2} {
		if got := seriesValue(t, p.results.WithLabelValues(result)); got != want {
			t.Errorf("coordinatord_gateway_txn_peer_markers_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}
