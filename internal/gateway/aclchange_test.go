package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A CreateAcls/DeleteAcls forwarded upstream that changed something is answered only after
// this node has read the ACLs again and every other node was told to; a node that cannot be
// told is counted; a change that changed nothing, or a notice another node passed on, tells
// nobody.
func TestACLChangesAreReadAgainByEveryNodeBeforeTheAnswer(t *testing.T) {
	var deleted atomic.Bool
	deleted.Store(true)
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
			var resp kmsg.Response
			switch key {
			case 30:
				r := kmsg.NewPtrCreateACLsResponse()
				res := kmsg.NewCreateACLsResponseResult()
				r.Results = append(r.Results, res)
				resp = r
			case 31:
				r := kmsg.NewPtrDeleteACLsResponse()
				res := kmsg.NewDeleteACLsResponseResult()
				if deleted.Load() {
					res.MatchingACLs = append(res.MatchingACLs, kmsg.NewDeleteACLsResponseResultMatchingACL())
				}
				r.Results = append(r.Results, res)
				resp = r
			default:
				return
			}
			resp.SetVersion(version)
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
		}
	})
	g := testGateway(t)
	reg := prometheus.NewRegistry()
	g.opts.Metrics = NewMetrics(reg)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	var mu sync.Mutex
	var rereads int
	var told []int32
	g.opts.ACLsReread = func(context.Context) error { mu.Lock(); rereads++; mu.Unlock(); return nil }
	g.opts.Peers = func() []Peer { return []Peer{{ID: 100}, {ID: 2}, {ID: 3}} } // 100 is this node
	g.opts.PeerRequest = func(_ context.Context, p Peer, req kmsg.Request) (kmsg.Response, error) {
		if _, ok := req.(*kmsg.DescribeACLsRequest); !ok {
			t.Errorf("node %d told with a %T", p.ID, req)
		}
		if p.ID == 3 {
			return nil, errors.New("connection refused")
		}
		mu.Lock()
		told = append(told, p.ID)
		mu.Unlock()
		return kmsg.NewPtrDescribeACLsResponse(), nil
	}
	conn := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	defer g.closeConn(conn)
	forward := func(req kmsg.Request, clientID string, wantRereads int, wantTold []int32) {
		t.Helper()
		rereads, told = 0, nil
		h := wire.Header{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 3, ClientID: clientID}
		if _, err := g.forward(context.Background(), 1, conn, h, requestFrame(req, 3), func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if rereads != wantRereads || !slices.Equal(told, wantTold) {
			t.Fatalf("%s: read again here %d times and told nodes %v before the answer, want %d and %v",
				kmsg.NameForKey(req.Key()), rereads, told, wantRereads, wantTold)
		}
	}
	create := kmsg.NewPtrCreateACLsRequest()
	create.SetVersion(3)
	create.Creations = append(create.Creations, kmsg.NewCreateACLsRequestCreation())
	forward(create, "admin", 1, []int32{2})
	del := kmsg.NewPtrDeleteACLsRequest()
	del.SetVersion(3)
	del.Filters = append(del.Filters, kmsg.NewDeleteACLsRequestFilter())
	forward(del, "admin", 1, []int32{2})
	if n := counterValue(t, reg, "coordinatord_gateway_acl_change_rereads_total", map[string]string{"target": "peer", "result": "failed"}); n != 2 {
		t.Errorf("%v notices counted failed, want 2 (node 3 could not be told twice)", n)
	}
	deleted.Store(false) // the filter matched nothing: nothing changed
	forward(del, "admin", 0, nil)
	deleted.Store(true)
	forward(del, PeerForwardClientID, 0, nil)
}

// describeACLsLocal answers DescribeAcls as the handler table does for a principal with
// (allowed) or without DESCRIBE on CLUSTER.
type describeACLsLocal struct {
	describeConfigsLocal
	allowed bool
}

func (l describeACLsLocal) Handle(_ context.Context, r *wire.Request) kmsg.Response {
	resp := r.Body.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !l.allowed {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	return resp
}

// Another node's notice is answered on coordinatord's own port, not forwarded, once the ACLs
// were read again; a principal that may not describe the cluster's ACLs reads nothing; a
// client's own DescribeAcls is the upstream's.
func TestANoticeOfAnACLChangeReadsTheACLsAgain(t *testing.T) {
	g := testGateway(t)
	local := &describeACLsLocal{allowed: true}
	g.opts.Local = local
	rereads := 0
	var readErr error
	g.opts.ACLsReread = func(context.Context) error { rereads++; return readErr }
	own := &portHandler{g: g, node: -1}
	notice := func() *kmsg.DescribeACLsResponse {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.SetVersion(1)
		h := wire.Header{Key: 29, Version: 1, ClientID: PeerForwardClientID}
		if own.Forwards(&wire.Conn{ID: 1}, h, nil) {
			t.Fatal("a notice is forwarded upstream")
		}
		return own.Handle(context.Background(), &wire.Request{Header: h, Body: req, Conn: &wire.Conn{ID: 1}}).(*kmsg.DescribeACLsResponse)
	}
	if r := notice(); r.ErrorCode != 0 || rereads != 1 {
		t.Fatalf("notice answered %d after %d reads, want 0 after 1", r.ErrorCode, rereads)
	}
	readErr = errors.New("upstream unreachable")
	if r := notice(); r.ErrorCode == 0 {
		t.Fatal("a notice whose read failed is answered as applied")
	}
	readErr = nil
	local.allowed = false
	if r := notice(); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || rereads != 2 {
		t.Fatalf("notice without DESCRIBE on CLUSTER answered %d after %d reads, want CLUSTER_AUTHORIZATION_FAILED and no read", r.ErrorCode, rereads)
	}
	if !own.Forwards(&wire.Conn{ID: 1}, wire.Header{Key: 29, Version: 1, ClientID: "admin"}, nil) {
		t.Fatal("a client's DescribeAcls is not forwarded")
	}
}
