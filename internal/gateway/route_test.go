package gateway

import (
	"context"
	"testing"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// forwards asks port p whether it passes req on upstream, as the wire server asks it with the
// request's frame.
func forwards(t *testing.T, p *portHandler, req kmsg.Request) bool {
	t.Helper()
	h, rest, err := wire.ParseHeader(requestFrame(req, 1))
	if err != nil {
		t.Fatal(err)
	}
	return p.Forwards(&wire.Conn{ID: 1}, h, rest)
}

// requestAt is an empty request of key at version (the codec's newest when version < 0).
func requestAt(t *testing.T, key, version int16) kmsg.Request {
	t.Helper()
	req := kmsg.RequestForKey(key)
	if req == nil {
		t.Fatalf("the codec has no request %d", key)
	}
	if version < 0 {
		version = req.MaxVersion()
	}
	req.SetVersion(version)
	return req
}

// Where a request is answered is what a client sees: a group request passed upstream reaches
// Kafka's own coordinator (the group is not coordinatord's), a broker-to-broker request passed
// upstream lets a client write transaction markers or alter the cluster behind coordinatord's
// back, and a data request kept here fails. Every key of each kind is listed by number, not
// taken from the tables under test.
func TestEachRequestIsAnsweredWhereItBelongs(t *testing.T) {
	g := testGateway(t)
	g.opts.Local = fakeLocal{}
	broker, own := &portHandler{g: g, node: 1}, &portHandler{g: g, node: -1}
	for _, p := range []*portHandler{broker, own} {
		// The group APIs, ApiVersions, and SASL (relayed, never passed on as bytes).
		for _, key := range []int16{8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 28, 36, 42, 47, 68, 69, 88, 89, 93} {
			if forwards(t, p, requestAt(t, key, -1)) {
				t.Errorf("node %d port: %s is passed upstream; coordinatord answers it", p.node, kmsg.NameForKey(key))
			}
		}
		// Broker-to-broker, controller and share-group APIs: never passed on (the connection
		// closes, or for WriteTxnMarkers coordinatord's own table answers).
		for _, key := range []int16{4, 5, 6, 7, 27, 52, 53, 54, 56, 58, 59, 62, 63, 67, 70, 73, 76, 77, 78, 79, 82, 83, 84, 85, 86, 87, 90, 91, 92} {
			if req := kmsg.RequestForKey(key); req != nil && forwards(t, p, requestAt(t, key, 0)) {
				t.Errorf("node %d port: %s is passed upstream; no client may reach it there", p.node, kmsg.NameForKey(key))
			}
		}
		// The data path and the cluster's admin APIs go upstream.
		for _, key := range []int16{0, 1, 2, 3, 19, 20, 29, 30, 31, 37, 60, 61, 65} {
			if !forwards(t, p, requestAt(t, key, -1)) {
				t.Errorf("node %d port: %s is not passed upstream", p.node, kmsg.NameForKey(key))
			}
		}
		// A version the gateway's codec does not know is never passed on blind.
		if forwards(t, p, requestAt(t, 3, kmsg.NewPtrMetadataRequest().MaxVersion()+1)) {
			t.Errorf("node %d port: Metadata above the codec's newest version is passed upstream", p.node)
		}
	}
	// ListTransactions and DescribeLogDirs are the broker's on its port, coordinatord's own
	// on coordinatord's port.
	for _, key := range []int16{35, 66} {
		if !forwards(t, broker, requestAt(t, key, -1)) || forwards(t, own, requestAt(t, key, -1)) {
			t.Errorf("%s: broker port forwards %v, own port forwards %v; want true, false", kmsg.NameForKey(key),
				forwards(t, broker, requestAt(t, key, -1)), forwards(t, own, requestAt(t, key, -1)))
		}
	}
	// The broker-only form of AddPartitionsToTxn (v4+) and EndTxn of transaction version 2
	// (v5+) stay here; the client forms go upstream.
	for _, c := range []struct {
		key, version int16
		want         bool
	}{{24, 3, true}, {24, 4, false}, {26, 4, true}, {26, 5, false}} {
		if got := forwards(t, broker, requestAt(t, c.key, c.version)); got != c.want {
			t.Errorf("%s v%d: forwarded %v, want %v", kmsg.NameForKey(c.key), c.version, got, c.want)
		}
	}
}

// FindCoordinator goes upstream for a transactional id only: a group's coordinator is
// coordinatord, and a share group's lookup is answered here (coordinatord serves none) rather
// than handing the client the upstream's share coordinator, whose requests it never forwards.
func TestFindCoordinatorGoesUpstreamForTransactionsOnly(t *testing.T) {
	g := testGateway(t)
	g.opts.Local = fakeLocal{}
	p := &portHandler{g: g, node: -1}
	for v := int16(0); v <= kmsg.NewPtrFindCoordinatorRequest().MaxVersion(); v++ {
		for _, kt := range []int8{0, 1, 2} {
			if kt == 2 && v < 6 || kt > 0 && v == 0 {
				continue
			}
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(v)
			req.CoordinatorKey, req.CoordinatorType, req.CoordinatorKeys = "k", kt, []string{"k"}
			if got, want := forwards(t, p, req), kt == 1; got != want {
				t.Errorf("FindCoordinator v%d key type %d: forwarded %v, want %v", v, kt, got, want)
			}
		}
	}
}

// Config requests naming a group, or coordinatord's own broker, are answered here (split from
// the rest when mixed); those naming only the cluster's topics and brokers go upstream whole.
func TestConfigRequestsNamingGroupsStayHere(t *testing.T) {
	g := testGateway(t)
	g.opts.Local = fakeLocal{}
	p := &portHandler{g: g, node: 1}
	type res struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	topic, group := res{kmsg.ConfigResourceTypeTopic, "t"}, res{kmsg.ConfigResourceTypeGroupConfig, "g"}
	self, other := res{kmsg.ConfigResourceTypeBroker, "100"}, res{kmsg.ConfigResourceTypeBroker, "1"}
	for _, c := range []struct {
		resources []res
		forwarded bool
	}{{[]res{topic}, true}, {[]res{other}, true}, {[]res{topic, other}, true}, {[]res{group}, false}, {[]res{self}, false}, {[]res{topic, group}, false}} {
		describe := kmsg.NewPtrDescribeConfigsRequest()
		describe.SetVersion(4)
		alter := kmsg.NewPtrAlterConfigsRequest()
		alter.SetVersion(2)
		incremental := kmsg.NewPtrIncrementalAlterConfigsRequest()
		incremental.SetVersion(1)
		for _, r := range c.resources {
			d := kmsg.NewDescribeConfigsRequestResource()
			d.ResourceType, d.ResourceName = r.typ, r.name
			describe.Resources = append(describe.Resources, d)
			a := kmsg.NewAlterConfigsRequestResource()
			a.ResourceType, a.ResourceName = r.typ, r.name
			alter.Resources = append(alter.Resources, a)
			i := kmsg.NewIncrementalAlterConfigsRequestResource()
			i.ResourceType, i.ResourceName = r.typ, r.name
			incremental.Resources = append(incremental.Resources, i)
		}
		for _, req := range []kmsg.Request{describe, alter, incremental} {
			if got := forwards(t, p, req); got != c.forwarded {
				t.Errorf("%s of %v: forwarded %v, want %v", kmsg.NameForKey(req.Key()), c.resources, got, c.forwarded)
			}
		}
	}
	for _, c := range []struct {
		types     []int8
		forwarded bool
	}{{[]int8{int8(kmsg.ConfigResourceTypeGroupConfig)}, false}, {[]int8{int8(kmsg.ConfigResourceTypeTopic)}, true}, {nil, true}} {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.SetVersion(1)
		req.ResourceTypes = c.types
		if got := forwards(t, p, req); got != c.forwarded {
			t.Errorf("ListConfigResources of %v: forwarded %v, want %v", c.types, got, c.forwarded)
		}
	}
}

// listingLocal is fakeLocal whose ListGroups answer names one group.
type listingLocal struct{ fakeLocal }

func (l listingLocal) Handle(ctx context.Context, r *wire.Request) kmsg.Response {
	resp := l.fakeLocal.Handle(ctx, r)
	if lg, ok := resp.(*kmsg.ListGroupsResponse); ok {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group = "orders"
		lg.Groups = append(lg.Groups, g)
	}
	return resp
}

// Admin clients ask every broker for its groups and concatenate the answers: only
// coordinatord's own port lists them, every upstream broker's port (node 0 included) lists
// none, or kafka-consumer-groups.sh --list would show each group once per broker.
func TestGroupsAreListedOnceAcrossThePorts(t *testing.T) {
	g := testGateway(t)
	g.opts.Local = listingLocal{}
	for _, c := range []struct {
		node   int32
		groups int
	}{{-1, 1}, {0, 0}, {1, 0}} {
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(4)
		resp := (&portHandler{g: g, node: c.node}).Handle(context.Background(), &wire.Request{Header: wire.Header{Key: 16, Version: 4}, Body: req, Conn: &wire.Conn{ID: 1}})
		if got := len(resp.(*kmsg.ListGroupsResponse).Groups); got != c.groups {
			t.Errorf("node %d port lists %d groups, want %d", c.node, got, c.groups)
		}
	}
}
