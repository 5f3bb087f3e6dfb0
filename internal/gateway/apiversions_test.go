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
		24: {0, 5}, 27: {1, 2}, 52: {0, 2}, 61: {0, 0}, 68: {0, 1}, 76: {1, 1}, 95: {0, 3},
	})
	got := map[int16][2]int16{}
	for _, k := range mergeVersions(local, []*kmsg.ApiVersionsResponse{up}) {
		if r, dup := got[k.ApiKey]; dup {
			// A client takes one of the entries: the upstream's range of a group API, say.
			t.Errorf("key %d advertised twice (%v and %v)", k.ApiKey, r, [2]int16{k.MinVersion, k.MaxVersion})
		}
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
		61: {0, 0}, // an API of one version (DescribeProducers) is advertised all the same
		68: {0, 1}, // KIP-848 consumer groups: coordinatord's, never the upstream's
		69: {0, 1},
		88: {0, 1}, // served by coordinatord even where the upstream has no streams groups
		93: {0, 0},
	}
	for k, r := range want {
		if g, ok := got[k]; !ok || g != r {
			t.Errorf("key %d advertised as %v (present %v), want %v", k, g, ok, r)
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

// Each broker port advertises its own broker's ranges (node 0 included: Kafka's node ids
// commonly start there), coordinatord's port only what every broker serves: the newest of the
// brokers' oldest versions up to the oldest of their newest, and no key some broker lacks,
// whichever broker lists it first.
func TestEachPortAdvertisesWhatItsRequestsReach(t *testing.T) {
	g := testGateway(t)
	g.opts.Local = fakeLocal{}
	g.view = &upstream.View{
		Brokers: []upstream.Broker{{NodeID: 0}, {NodeID: 1}},
		Versions: map[int32]*kmsg.ApiVersionsResponse{
			0: upstreamVersions(map[int16][2]int16{0: {0, 13}, 1: {0, 18}, 3: {0, 12}, 61: {0, 0}}),
			1: upstreamVersions(map[int16][2]int16{0: {3, 11}, 1: {4, 17}, 3: {0, 12}, 65: {0, 0}}),
		},
	}
	advertised := func(node int32) map[int16][2]int16 {
		resp, ok := askVersions(&portHandler{g: g, node: node}).(*kmsg.ApiVersionsResponse)
		if !ok {
			t.Fatalf("node %d port: no ApiVersions answer", node)
		}
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		return got
	}
	for node, want := range map[int32]map[int16][2]int16{
		0:  {0: {0, 13}, 1: {0, 18}, 61: {0, 0}},
		1:  {0: {3, 11}, 1: {4, 17}, 65: {0, 0}},
		-1: {0: {3, 11}, 1: {4, 17}},
	} {
		got := advertised(node)
		for key, r := range want {
			if g, ok := got[key]; !ok || g != r {
				t.Errorf("node %d port: %s advertised as %v (present %v), want %v", node, kmsg.NameForKey(key), g, ok, r)
			}
		}
		// DescribeProducers only broker 0 serves, DescribeTransactions only broker 1.
		for _, key := range []int16{61, 65} {
			if _, ok := got[key]; ok && node < 0 {
				t.Errorf("coordinatord's port advertises %s, which not every broker serves", kmsg.NameForKey(key))
			}
		}
	}
}

// A client reads the finalized and supported features as lists: each feature is listed once,
// group.version and streams.version with coordinatord's levels only (a second, upstream entry
// at level 0 would tell a client streams groups are off), and a capped transaction.version
// stays a valid range (Kafka's client refuses a finalized range whose minimum is above its
// maximum).
func TestEachFeatureIsListedOnceAsAValidRange(t *testing.T) {
	up := kmsg.NewPtrApiVersionsResponse()
	for _, f := range []struct {
		name     string
		min, max int16
	}{{"transaction.version", 2, 2}, {"group.version", 0, 0}, {"streams.version", 0, 0}, {"metadata.version", 27, 27}} {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.min, f.max
		up.FinalizedFeatures = append(up.FinalizedFeatures, ff)
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.name, 1, f.max+1
		up.SupportedFeatures = append(up.SupportedFeatures, sf)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	mergeFeatures(resp, up, 4)
	finalized := map[string][2]int16{}
	for _, f := range resp.FinalizedFeatures {
		if _, dup := finalized[f.Name]; dup {
			t.Errorf("finalized feature %s listed twice: %+v", f.Name, resp.FinalizedFeatures)
		}
		if f.MinVersionLevel > f.MaxVersionLevel {
			t.Errorf("finalized %s range %d-%d is not a range", f.Name, f.MinVersionLevel, f.MaxVersionLevel)
		}
		finalized[f.Name] = [2]int16{f.MinVersionLevel, f.MaxVersionLevel}
	}
	for name, want := range map[string][2]int16{"transaction.version": {1, 1}, "group.version": {1, 1}, "streams.version": {1, 1}, "metadata.version": {27, 27}} {
		if finalized[name] != want {
			t.Errorf("finalized %s = %v, want %v", name, finalized[name], want)
		}
	}
	supported := map[string][2]int16{}
	for _, f := range resp.SupportedFeatures {
		if _, dup := supported[f.Name]; dup {
			t.Errorf("supported feature %s listed twice: %+v", f.Name, resp.SupportedFeatures)
		}
		supported[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
	}
	for name, want := range map[string][2]int16{"group.version": {0, 1}, "streams.version": {0, 1}, "metadata.version": {1, 28}} {
		if supported[name] != want {
			t.Errorf("supported %s = %v, want %v", name, supported[name], want)
		}
	}
}

// An upstream that lists FindCoordinator with a maximum below coordinatord's minimum (only a
// broken one does) must not leave the advertised range with min above max: no client could
// negotiate a version for its group lookups.
func TestFindCoordinatorRangeStaysValidBesideABrokenUpstream(t *testing.T) {
	local := keys(map[int16][2]int16{10: {0, 6}})
	up := upstreamVersions(map[int16][2]int16{10: {0, -1}})
	for _, k := range mergeVersions(local, []*kmsg.ApiVersionsResponse{up}) {
		if k.ApiKey == 10 && (k.MinVersion != 0 || k.MaxVersion != 6) {
			t.Fatalf("FindCoordinator advertised as %d-%d, want coordinatord's 0-6", k.MinVersion, k.MaxVersion)
		}
	}
}
