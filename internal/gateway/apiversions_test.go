package gateway

import (
	"context"
	"testing"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func keys(ranges map[int16][2]int16) []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k, r := range ranges {
		v := kmsg.NewApiVersionsResponseApiKey()
		v.ApiKey, v.MinVersion, v.MaxVersion = k, r[0], r[1]
		out = append(out, v)
	}
	return out
}

func upstreamVersions(ranges map[int16][2]int16) *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.ApiKeys = keys(ranges)
	return r
}

func TestAdvertisedVersions(t *testing.T) {
	local := keys(map[int16][2]int16{3: {0, 13}, 8: {2, 10}, 28: {0, 6}, 10: {0, 6}, 18: {0, 4}, 19: {2, 7}, 27: {1, 2}, 68: {0, 1}, 69: {0, 1}, 88: {0, 1}, 93: {0, 0}})
	up := upstreamVersions(map[int16][2]int16{
		0: {0, 14}, 1: {4, 18}, 3: {0, 14}, 4: {0, 7}, 8: {2, 11}, 10: {0, 5}, 18: {0, 5}, 19: {2, 7},
		24: {0, 5}, 27: {1, 2}, 52: {0, 2}, 68: {0, 1}, 76: {1, 1}, 95: {0, 3},
	})
	got := map[int16][2]int16{}
	for _, k := range mergeVersions(local, []*kmsg.ApiVersionsResponse{up}) {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{
		0:  {0, kmsg.NewPtrProduceRequest().MaxVersion()}, // upstream's min 0 kept, capped at the codec
		1:  {4, 18},
		3:  {0, 13}, // forwarded, capped at what the gateway can rewrite
		8:  {2, 10}, // coordinatord's range, not the upstream's
		10: {0, 5},  // groups here, transactions upstream: both must work
		18: {0, 4},
		19: {2, 7},
		24: {0, 3}, // v4+ is the broker-only form
		68: {0, 1}, // KIP-848 consumer groups: coordinatord's, never the upstream's
		69: {0, 1},
		88: {0, 1}, // served by coordinatord even where the upstream has no streams groups
		93: {0, 0},
	}
	for k, r := range want {
		if got[k] != r {
			t.Errorf("key %d advertised as %v, want %v", k, got[k], r)
		}
	}
	if r, ok := got[28]; !ok || r[1] < 4 {
		t.Errorf("TxnOffsetCommit advertised as %v (present %v); the marker relay makes it servable in gateway mode", r, ok)
	}
	for _, never := range []int16{4, 27, 52, 76, 95} {
		if r, ok := got[never]; ok {
			t.Errorf("key %d is advertised (%v); clients must never reach it upstream", never, r)
		}
	}
}

func TestOwnPortAdvertisesOnlyWhatEveryBrokerServes(t *testing.T) {
	a := upstreamVersions(map[int16][2]int16{1: {4, 17}, 44: {0, 1}, 75: {0, 0}})
	b := upstreamVersions(map[int16][2]int16{1: {4, 18}, 44: {0, 1}})
	got := map[int16][2]int16{}
	for _, k := range mergeVersions(nil, []*kmsg.ApiVersionsResponse{a, b}) {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if got[1] != [2]int16{4, 17} || got[44] != [2]int16{0, 1} {
		t.Fatalf("intersection wrong: %v", got)
	}
	if _, ok := got[75]; ok {
		t.Fatalf("a key only one broker serves is advertised on coordinatord's port: %v", got)
	}
}

func TestFeaturesAreUpstreamsButGroupFeaturesOurs(t *testing.T) {
	up := kmsg.NewPtrApiVersionsResponse()
	up.FinalizedFeaturesEpoch = 812
	for _, f := range []struct {
		name  string
		level int16
	}{{"transaction.version", 2}, {"group.version", 0}, {"streams.version", 0}, {"metadata.version", 27}} {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.level, f.level
		up.FinalizedFeatures = append(up.FinalizedFeatures, ff)
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.name, 0, f.level
		up.SupportedFeatures = append(up.SupportedFeatures, sf)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	mergeFeatures(resp, up, 4)
	finalized := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	// transaction.version is capped at 1: the marker relay is argued for version 1 only.
	if finalized["transaction.version"] != 1 || finalized["metadata.version"] != 27 {
		t.Fatalf("upstream features not passed on: %v", finalized)
	}
	if finalized["streams.version"] != 1 {
		t.Fatalf("streams.version = %d, want coordinatord's 1", finalized["streams.version"])
	}
	if finalized["group.version"] != 1 {
		t.Fatalf("group.version = %d, want coordinatord's 1 (it serves KIP-848 consumer groups whatever the upstream's level)", finalized["group.version"])
	}
	if resp.FinalizedFeaturesEpoch != 812 {
		t.Fatalf("epoch %d, want the upstream broker's", resp.FinalizedFeaturesEpoch)
	}
	old := kmsg.NewPtrApiVersionsResponse()
	mergeFeatures(old, up, 3)
	for _, f := range old.SupportedFeatures {
		if f.MinVersion == 0 {
			t.Fatalf("v3 answer lists %s with min version 0 (KAFKA-17011)", f.Name)
		}
	}
}

// fakeLocal answers ApiVersions with a table of group APIs and the local copies of Metadata
// and CreateTopics, as coordinatord's handler table does.
type fakeLocal struct{}

func (fakeLocal) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	r := kmsg.RequestForKey(key)
	return r, true, r != nil
}

func (fakeLocal) Handle(_ context.Context, r *wire.Request) kmsg.Response {
	resp := r.Body.ResponseKind()
	resp.SetVersion(r.Version)
	if av, ok := resp.(*kmsg.ApiVersionsResponse); ok {
		av.ApiKeys = keys(map[int16][2]int16{3: {0, 13}, 8: {2, 10}, 10: {0, 6}, 18: {0, 4}, 19: {2, 7}})
	}
	return resp
}

func (fakeLocal) Versions() []kmsg.ApiVersionsResponseApiKey { return nil }

func askVersions(p *portHandler) kmsg.Response {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	return p.Handle(context.Background(), &wire.Request{Header: wire.Header{Key: 18, Version: 3}, Body: req, Conn: &wire.Conn{ID: 1}})
}

// A broker port whose upstream broker's ApiVersions is not known yet must not advertise only
// the group APIs: a client caches the table per node and would find no Metadata, Produce or
// Fetch there. It advertises what the known brokers serve; with none known, the connection is
// closed (the client reconnects) and a refresh is asked for.
func TestBrokerPortWithUnknownVersionsAdvertisesTheCluster(t *testing.T) {
	g := testGateway(t)
	g.opts.Local = fakeLocal{}
	refreshed := 0
	g.refresh = func() { refreshed++ }
	g.view = &upstream.View{
		Brokers:  []upstream.Broker{{NodeID: 1}, {NodeID: 2}},
		Versions: map[int32]*kmsg.ApiVersionsResponse{1: upstreamVersions(map[int16][2]int16{0: {0, 11}, 1: {4, 17}, 3: {0, 12}, 10: {0, 6}})},
	}
	resp, ok := askVersions(&portHandler{g: g, node: 2}).(*kmsg.ApiVersionsResponse)
	if !ok {
		t.Fatal("no ApiVersions answer on the port of a broker whose versions are unknown, with another broker's known")
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for key, want := range map[int16][2]int16{0: {0, 11}, 1: {4, 17}, 3: {0, 12}, 8: {2, 10}} {
		if got[key] != want {
			t.Errorf("key %d advertised as %v, want %v", key, got[key], want)
		}
	}
	if refreshed == 0 {
		t.Error("no refresh asked for the broker whose ApiVersions is missing")
	}

	g.view = &upstream.View{Brokers: []upstream.Broker{{NodeID: 1}, {NodeID: 2}}, Versions: map[int32]*kmsg.ApiVersionsResponse{}}
	for _, node := range []int32{2, -1} {
		if resp := askVersions(&portHandler{g: g, node: node}); resp != nil {
			t.Errorf("node %d: with no upstream ApiVersions known, answered %+v; want the connection closed", node, resp)
		}
	}
}

// DescribeQuorum v2 answers carry the KRaft controllers' listeners (host and port): upstream
// addresses no gateway port stands for. It is advertised and forwarded up to v1 only.
func TestDescribeQuorumCappedBelowControllerEndpoints(t *testing.T) {
	up := upstreamVersions(map[int16][2]int16{55: {0, 2}})
	for _, k := range mergeVersions(nil, []*kmsg.ApiVersionsResponse{up}) {
		if k.ApiKey == 55 && k.MaxVersion != 1 {
			t.Fatalf("DescribeQuorum advertised up to v%d, want v1", k.MaxVersion)
		}
	}
	p := &portHandler{g: testGateway(t), node: 1}
	req := kmsg.NewPtrDescribeQuorumRequest()
	for v, want := range map[int16]bool{1: true, 2: false} {
		req.SetVersion(v)
		if got := p.Forwards(&wire.Conn{ID: 1}, wire.Header{Key: 55, Version: v}, req.AppendTo(nil)); got != want {
			t.Errorf("DescribeQuorum v%d forwarded: %v, want %v", v, got, want)
		}
	}
}
