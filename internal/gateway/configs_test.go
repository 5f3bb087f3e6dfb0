package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A mixed DescribeConfigs is split into the local resources (GROUP, coordinatord's BROKER and
// BROKER_LOGGER) and the upstream's, and the answers come back in request order.
func TestConfigSplitAndMergeKeepRequestOrder(t *testing.T) {
	g := testGateway(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	type res struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	in := []res{{kmsg.ConfigResourceTypeTopic, "t"}, {kmsg.ConfigResourceTypeGroupConfig, "g"}, {kmsg.ConfigResourceTypeBroker, "100"},
		{kmsg.ConfigResourceTypeBroker, "1"}, {kmsg.ConfigResourceTypeTopic, "u"},
		{kmsg.ConfigResourceTypeBrokerLogger, "100"}, {kmsg.ConfigResourceTypeBrokerLogger, "1"}}
	for _, r := range in {
		x := kmsg.NewDescribeConfigsRequestResource()
		x.ResourceType, x.ResourceName = r.typ, r.name
		req.Resources = append(req.Resources, x)
	}
	local := make([]bool, len(in))
	for i, r := range configResources(req) {
		local[i] = g.localConfig(r)
	}
	if want := []bool{false, true, true, false, false, true, false}; !equalBools(local, want) {
		t.Fatalf("local %v, want %v", local, want)
	}
	l, u := splitRequest(req, local)
	answer := func(r kmsg.Request, throttle int32) *kmsg.DescribeConfigsResponse {
		resp := kmsg.NewPtrDescribeConfigsResponse()
		resp.ThrottleMillis = throttle
		for _, x := range r.(*kmsg.DescribeConfigsRequest).Resources {
			o := kmsg.NewDescribeConfigsResponseResource()
			o.ResourceType, o.ResourceName = x.ResourceType, x.ResourceName
			resp.Resources = append(resp.Resources, o)
		}
		return resp
	}
	merged := mergeResponses(req, answer(l, 0), answer(u, 30), local).(*kmsg.DescribeConfigsResponse)
	if len(merged.Resources) != len(in) || merged.ThrottleMillis != 30 {
		t.Fatalf("merged %d resources, throttle %d", len(merged.Resources), merged.ThrottleMillis)
	}
	for i, r := range in {
		if got := merged.Resources[i]; got.ResourceType != r.typ || got.ResourceName != r.name {
			t.Fatalf("resource %d is %v %s, want %v %s", i, got.ResourceType, got.ResourceName, r.typ, r.name)
		}
	}
}

// ListConfigResources is answered here only when it asks for GROUP resources alone.
func TestListConfigResourcesLocalOnlyForGroups(t *testing.T) {
	body := func(types ...int8) []byte {
		r := kmsg.NewPtrListConfigResourcesRequest()
		r.SetVersion(1)
		r.ResourceTypes = types
		return r.AppendTo(kbin.AppendUvarint(nil, 0)) // empty header tags first
	}
	h := wire.Header{Key: 74, Version: 1}
	for _, tc := range []struct {
		types []int8
		want  bool
	}{{[]int8{32}, true}, {[]int8{32, 2}, false}, {nil, false}, {[]int8{16}, false}} {
		if got := listConfigResourcesLocal(h, body(tc.types...)); got != tc.want {
			t.Errorf("types %v: local %v, want %v", tc.types, got, tc.want)
		}
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// describeConfigsLocal answers DescribeConfigs for the resources it is given, each with the
// error message "local", as the handler table answers the GROUP resources.
type describeConfigsLocal struct{}

func (describeConfigsLocal) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, false, false
	}
	req.SetVersion(version)
	return req, true, true
}

func (describeConfigsLocal) Handle(_ context.Context, r *wire.Request) kmsg.Response {
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.SetVersion(r.Version)
	local := "local"
	for _, x := range r.Body.(*kmsg.DescribeConfigsRequest).Resources {
		o := kmsg.NewDescribeConfigsResponseResource()
		o.ResourceType, o.ResourceName, o.ErrorMessage = x.ResourceType, x.ResourceName, &local
		resp.Resources = append(resp.Resources, o)
	}
	return resp
}

func (describeConfigsLocal) Versions() []kmsg.ApiVersionsResponseApiKey { return nil }

// The upstream's part of a split config request is read past its answer header's tagged
// fields, as every forwarded answer is: an upstream that sends one had the answer read from
// inside them (one byte was skipped for them), and the client's connection closed.
func TestSplitConfigsReadUpstreamAnswerPastHeaderTags(t *testing.T) {
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			h, rest, _ := wire.ParseHeader(frame)
			rest, _ = wire.SkipHeaderTags(rest)
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.SetVersion(h.Version)
			if req.ReadFrom(rest) != nil {
				return
			}
			resp := kmsg.NewPtrDescribeConfigsResponse()
			resp.SetVersion(h.Version)
			for _, x := range req.Resources {
				o := kmsg.NewDescribeConfigsResponseResource()
				o.ResourceType, o.ResourceName = x.ResourceType, x.ResourceName
				resp.Resources = append(resp.Resources, o)
			}
			c.Write(withHeaderTag(frameOf(h.CorrelationID, resp)))
		}
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	g.opts.Local = describeConfigsLocal{}
	c := dialBrokerPort(t, g)

	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "orders"}, {kmsg.ConfigResourceTypeGroupConfig, "g"}} {
		x := kmsg.NewDescribeConfigsRequestResource()
		x.ResourceType, x.ResourceName = r.typ, r.name
		req.Resources = append(req.Resources, x)
	}
	frame := requestFrame(req, 11)
	c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, err := readRequest(c)
	if err != nil {
		t.Fatalf("no answer to a split DescribeConfigs: %v", err)
	}
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.SetVersion(4)
	if err := resp.ReadFrom(answer[5:]); err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 2 || resp.Resources[0].ResourceName != "orders" || resp.Resources[0].ErrorMessage != nil ||
		resp.Resources[1].ResourceName != "g" || resp.Resources[1].ErrorMessage == nil {
		t.Fatalf("answer %+v, want the upstream's orders then the local g", resp.Resources)
	}
}

// A config request naming only local resources is answered here without asking the upstream
// (it is answered while the upstream is unreachable); a mixed one whose upstream part fails
// closes the client's connection, as a failed forward does, rather than answering only the
// local resources as if the others did not exist.
func TestConfigRequestsAskTheUpstreamOnlyForItsResources(t *testing.T) {
	g := testGateway(t) // no upstream view: every forward fails
	g.opts.Local = fakeLocal{}
	p := &portHandler{g: g, node: 1}
	describe := func(types ...kmsg.ConfigResourceType) kmsg.Response {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		for _, typ := range types {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = typ, "x"
			req.Resources = append(req.Resources, r)
		}
		return p.Handle(context.Background(), &wire.Request{Header: wire.Header{Key: 32, Version: 4}, Body: req, Conn: &wire.Conn{ID: 1}})
	}
	if resp := describe(kmsg.ConfigResourceTypeGroupConfig); resp == nil {
		t.Error("a DescribeConfigs of a group alone was not answered while the upstream is unreachable")
	}
	if resp := describe(kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeTopic); resp != nil {
		t.Errorf("a DescribeConfigs of a group and a topic was answered without the upstream's part: %+v", resp)
	}
}

// notOwnedLocal answers DescribeConfigs as the handler table of a node sharing the shards:
// NOT_COORDINATOR for the groups named remote-*, GROUP_AUTHORIZATION_FAILED for remote-denied
// (the client's principal may not), NONE for the others.
type notOwnedLocal struct{ describeConfigsLocal }

func (notOwnedLocal) Handle(ctx context.Context, r *wire.Request) kmsg.Response {
	resp := describeConfigsLocal{}.Handle(ctx, r).(*kmsg.DescribeConfigsResponse)
	for i := range resp.Resources {
		switch n := resp.Resources[i].ResourceName; {
		case n == "remote-denied":
			resp.Resources[i].ErrorCode = kerr.GroupAuthorizationFailed.Code
		case strings.HasPrefix(n, "remote-"):
			resp.Resources[i].ErrorCode = kerr.NotCoordinator.Code
		}
	}
	return resp
}

// The GROUP resources the local table answers NOT_COORDINATOR go to the node owning each
// group's shard, one request per owner with only its resources, and its answers take their
// place; a group whose shard has no owner now, or whose owner cannot be reached, keeps
// NOT_COORDINATOR; a resource the local table refused (authorization, validation) is not
// passed on, since the owner checks coordinatord's principal, not the client's; a request
// another node passed on is never passed on again.
func TestGroupConfigsGoToTheOwnerOfTheirShard(t *testing.T) {
	g := testGateway(t)
	g.opts.Local = notOwnedLocal{}
	owners := map[string]Peer{"remote-a": {ID: 2}, "remote-b": {ID: 3}, "remote-c": {ID: 2}, "remote-denied": {ID: 3}}
	g.opts.GroupOwner = func(group string) (Peer, bool) { p, ok := owners[group]; return p, ok }
	var asked map[int32][]string
	unreachable := int32(-1)
	g.opts.PeerRequest = func(_ context.Context, p Peer, req kmsg.Request) (kmsg.Response, error) {
		if p.ID == unreachable {
			return nil, errors.New("connection refused")
		}
		resp := kmsg.NewPtrDescribeConfigsResponse()
		for _, r := range req.(*kmsg.DescribeConfigsRequest).Resources {
			asked[p.ID] = append(asked[p.ID], r.ResourceName)
			o := kmsg.NewDescribeConfigsResponseResource()
			o.ResourceType, o.ResourceName, o.ErrorMessage = r.ResourceType, r.ResourceName, kmsg.StringPtr(fmt.Sprintf("node %d", p.ID))
			resp.Resources = append(resp.Resources, o)
		}
		return resp, nil
	}
	p := &portHandler{g: g, node: -1}
	describe := func(clientID string) []string {
		asked = map[int32][]string{}
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		for _, n := range []string{"remote-a", "here", "remote-b", "remote-orphan", "remote-c", "remote-denied"} {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, n
			req.Resources = append(req.Resources, r)
		}
		resp := p.Handle(context.Background(), &wire.Request{Header: wire.Header{Key: 32, Version: 4, ClientID: clientID}, Body: req, Conn: &wire.Conn{ID: 1}})
		var out []string
		for _, r := range resp.(*kmsg.DescribeConfigsResponse).Resources {
			out = append(out, fmt.Sprintf("%s:%s:%d", r.ResourceName, *r.ErrorMessage, r.ErrorCode))
		}
		return out
	}
	nc := strconv.Itoa(int(kerr.NotCoordinator.Code))
	got := describe("admin")
	want := []string{"remote-a:node 2:0", "here:local:0", "remote-b:node 3:0", "remote-orphan:local:" + nc, "remote-c:node 2:0",
		"remote-denied:local:" + strconv.Itoa(int(kerr.GroupAuthorizationFailed.Code))}
	if !slices.Equal(got, want) || !slices.Equal(asked[2], []string{"remote-a", "remote-c"}) || !slices.Equal(asked[3], []string{"remote-b"}) {
		t.Fatalf("answers %v (nodes asked %v), want %v", got, asked, want)
	}
	unreachable = 3
	got = describe("admin")
	if got[2] != "remote-b:local:"+nc || got[0] != "remote-a:node 2:0" {
		t.Fatalf("with node 3 unreachable: %v", got)
	}
	unreachable = -1
	got = describe(PeerForwardClientID)
	if len(asked) != 0 || got[0] != "remote-a:local:"+nc {
		t.Fatalf("a request passed on by another node was passed on again (asked %v): %v", asked, got)
	}
}
