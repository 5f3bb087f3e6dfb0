package integration

import (
	"sort"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApiVersionsAdvertisesOnlyWhatIsServed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cl := d.client()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "coordinatord-test", "1.0"
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("error %d", resp.ErrorCode)
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		if _, dup := got[k.ApiKey]; dup {
			t.Fatalf("key %d listed twice", k.ApiKey)
		}
		if k.MinVersion > k.MaxVersion {
			t.Fatalf("key %d: min %d > max %d", k.ApiKey, k.MinVersion, k.MaxVersion)
		}
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{18: {0, 4}, 3: {0, 13}, 10: {0, 6}, 19: {2, 7}, 20: {1, 6}, 37: {0, 3}, 8: {2, 10}, 9: {1, 10}}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: advertised %v, want %v", kmsg.NameForKey(k), got[k], v)
		}
	}
	for _, notServed := range []int16{0, 1, 2} { // Produce, Fetch, ListOffsets
		if _, ok := got[notServed]; ok {
			t.Errorf("%s must not be advertised", kmsg.NameForKey(notServed))
		}
	}
	if resp.FinalizedFeaturesEpoch != -1 || len(resp.FinalizedFeatures) != 0 {
		t.Errorf("finalized features must be absent (epoch -1), got epoch %d %v", resp.FinalizedFeaturesEpoch, resp.FinalizedFeatures)
	}
	// Every advertised version must be accepted: the daemon closes the connection otherwise.
	c := dialRaw(t, d.Addr)
	corr := int32(0)
	for key, r := range got {
		for v := r[0]; v <= r[1]; v++ {
			corr++
			req := kmsg.RequestForKey(key)
			if fc, ok := req.(*kmsg.FindCoordinatorRequest); ok {
				fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
			}
			if av, ok := req.(*kmsg.ApiVersionsRequest); ok {
				av.ClientSoftwareName, av.ClientSoftwareVersion = "x", "1"
			}
			c.write(frame(req, v, corr, strp("c"), nil))
			c.read(req.ResponseKind(), v, corr)
		}
	}
}

func TestMetadataNamesThisNodeAsOnlyBroker(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "node.id=7", "cluster.id=test-cluster")
	adm := kadm.NewClient(d.client())
	md, err := adm.Metadata(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != "test-cluster" || md.Controller != 7 {
		t.Fatalf("cluster %q controller %d", md.Cluster, md.Controller)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != 7 || md.Brokers[0].Host != "127.0.0.1" {
		t.Fatalf("brokers %+v", md.Brokers)
	}
	if len(md.Topics) != 0 {
		t.Fatalf("topic catalog is empty, got %v", md.Topics.Names())
	}

	c := dialRaw(t, d.Addr)
	// v0: empty list = all topics; v1: empty list = none, null = all (spec T22). With an empty
	// catalog both are empty; a named topic is unknown, also with auto-creation asked (T23).
	for i, v := range []int16{0, 1, 4, 9, 12, 13} {
		req := kmsg.NewPtrMetadataRequest()
		name := "missing"
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &name
		req.Topics = []kmsg.MetadataRequestTopic{rt}
		req.AllowAutoTopicCreation = true
		c.write(frame(req, v, int32(i), strp("c"), nil))
		resp := kmsg.NewPtrMetadataResponse()
		c.read(resp, v, int32(i))
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || *resp.Topics[0].Topic != "missing" {
			t.Fatalf("v%d: %+v", v, resp.Topics)
		}
	}
	// v12: by unknown id, a null name and UNKNOWN_TOPIC_ID (T24).
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = [16]byte{1, 2, 3}
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	c.write(frame(req, 12, 99, strp("c"), nil))
	resp := kmsg.NewPtrMetadataResponse()
	c.read(resp, 12, 99)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code || resp.Topics[0].Topic != nil || resp.Topics[0].TopicID != rt.TopicID {
		t.Fatalf("by id: %+v", resp.Topics)
	}
}

func TestFindCoordinatorBatchedKeysEchoed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "node.id=3")
	cl := d.client()
	// Raw: kgo splits batched FindCoordinator requests and merges the answers in its own order.
	c := dialRaw(t, d.Addr)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{"a", "", "b"}
	c.write(frame(req, 4, 1, strp("c"), nil))
	resp := kmsg.NewPtrFindCoordinatorResponse()
	c.read(resp, 4, 1)
	if len(resp.Coordinators) != 3 {
		t.Fatalf("%d results", len(resp.Coordinators))
	}
	for i, key := range []string{"a", "", "b"} {
		c := resp.Coordinators[i]
		if c.Key != key || c.ErrorCode != 0 || c.NodeID != 3 {
			t.Errorf("result %d: %+v", i, c)
		}
	}
	// kgo and kadm find the group coordinator end to end, and it is in the broker list.
	adm := kadm.NewClient(cl)
	found := adm.FindGroupCoordinators(ctxT(t), "g1", "g2")
	if len(found) != 2 {
		t.Fatalf("%d results", len(found))
	}
	for g, r := range found {
		if r.Err != nil || r.NodeID != 3 {
			t.Errorf("%s: %+v", g, r)
		}
	}
	txn := adm.FindTxnCoordinators(ctxT(t), "tx")
	if r := txn["tx"]; r.Err != nil || r.NodeID != 3 {
		t.Errorf("transaction key: %+v", r)
	}
}

func TestFindCoordinatorKeyTypes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d.Addr)
	cases := []struct {
		version  int16
		keyType  int8
		wantCode int16
	}{
		{0, 0, 0},
		{1, 0, 0},
		{3, 1, 0},
		{3, 2, kerr.InvalidRequest.Code},
		{5, 2, kerr.InvalidRequest.Code}, // SHARE before v6 (T27)
		{6, 7, kerr.InvalidRequest.Code}, // unknown type (T27)
		{6, 2, kerr.InvalidRequest.Code}, // share groups are not served
	}
	for i, tc := range cases {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorType = "grp", tc.keyType
		req.CoordinatorKeys = []string{"grp:topic:0"}
		c.write(frame(req, tc.version, int32(i), strp("c"), nil))
		resp := kmsg.NewPtrFindCoordinatorResponse()
		c.read(resp, tc.version, int32(i))
		code, node, host, port, msg := resp.ErrorCode, resp.NodeID, resp.Host, resp.Port, resp.ErrorMessage
		if tc.version >= 4 {
			r := resp.Coordinators[0]
			code, node, host, port, msg = r.ErrorCode, r.NodeID, r.Host, r.Port, r.ErrorMessage
		}
		if code != tc.wantCode {
			t.Errorf("v%d type %d: code %d want %d", tc.version, tc.keyType, code, tc.wantCode)
		}
		if code != 0 && (node != -1 || host != "" || port != -1 || (tc.version >= 1 && (msg == nil || *msg == ""))) {
			t.Errorf("v%d type %d: error answer must be node -1, host \"\", port -1 with a message; got %d %q %d %v", tc.version, tc.keyType, node, host, port, msg)
		}
	}
}

func TestManyClientsAtOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			adm := kadm.NewClient(d.client())
			md, err := adm.BrokerMetadata(ctxT(t))
			if err != nil {
				errs <- err
				return
			}
			if len(md.Brokers) != 1 {
				errs <- errBrokers(len(md.Brokers))
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []string
	for err := range errs {
		all = append(all, err.Error())
	}
	sort.Strings(all)
	if len(all) > 0 {
		t.Fatalf("%d clients failed, first: %s", len(all), all[0])
	}
}

type errBrokers int

func (e errBrokers) Error() string { return "unexpected broker count" }
