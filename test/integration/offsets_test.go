package integration

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func errorsIs(err error, target error) bool { return errors.Is(err, target) }

func createTopic(t *testing.T, adm *kadm.Client, name string, partitions int32) {
	t.Helper()
	res, err := adm.CreateTopics(ctxT(t), partitions, -1, nil, name)
	if err != nil || res[name].Err != nil {
		t.Fatalf("create %s: %v %v", name, err, res[name].Err)
	}
}

func TestOffsetCommitFetchRoundTripAndRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)
	createTopic(t, adm, "u", 1)
	ctx := ctxT(t)

	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 10, LeaderEpoch: 3, Metadata: "m0"})
	offs.Add(kadm.Offset{Topic: "t", Partition: 1, At: 20, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "u", Partition: 0, At: 5, LeaderEpoch: -1})
	committed, err := adm.CommitOffsets(ctx, "g", offs)
	if err != nil || committed.Error() != nil {
		t.Fatalf("commit: %v %v", err, committed.Error())
	}
	check := func(adm *kadm.Client) {
		t.Helper()
		got, err := adm.FetchOffsets(ctxT(t), "g")
		if err != nil || got.Error() != nil {
			t.Fatalf("fetch: %v %v", err, got.Error())
		}
		if o, _ := got.Lookup("t", 0); o.At != 10 || o.LeaderEpoch != 3 || o.Metadata != "m0" {
			t.Fatalf("t/0: %+v", o)
		}
		if o, _ := got.Lookup("t", 1); o.At != 20 {
			t.Fatalf("t/1: %+v", o)
		}
		if o, _ := got.Lookup("u", 0); o.At != 5 {
			t.Fatalf("u/0: %+v", o)
		}
	}
	check(adm)
	if d.stop() != 0 {
		t.Fatal("stop")
	}
	d.start()
	check(kadm.NewClient(d.client()))
}

func TestOffsetCommitErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "offset.metadata.max.bytes=10")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)
	cl := d.client()
	ctx := ctxT(t)

	commit := func(version int16, group string, generation int32, member string, parts map[string][]int32, metadata string) *kmsg.OffsetCommitResponse {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(version)
		req.Group, req.Generation, req.MemberID = group, generation, member
		for topic, ps := range parts {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			for _, p := range ps {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset, rp.Metadata = p, 1, &metadata
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		c := dialRaw(t, d.Addr)
		c.write(frame(req, version, 1, strp("c"), nil))
		resp := kmsg.NewPtrOffsetCommitResponse()
		c.read(resp, version, 1)
		return resp
	}
	codes := func(resp *kmsg.OffsetCommitResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				out[rt.Topic+"/"+string(rune('0'+p.Partition))] = p.ErrorCode
			}
		}
		return out
	}
	_ = cl
	_ = ctx

	// Unknown topics and partitions fail alone; the rest commits.
	got := codes(commit(8, "g1", -1, "", map[string][]int32{"t": {0, 7}, "nope": {0}}, "ok"))
	if got["t/0"] != 0 || got["t/7"] != kerr.UnknownTopicOrPartition.Code || got["nope/0"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("catalog checks: %v", got)
	}
	// Metadata over offset.metadata.max.bytes fails that partition only.
	if got := codes(commit(8, "g1", -1, "", map[string][]int32{"t": {1}}, "0123456789ABC")); got["t/1"] != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("metadata too large: %v", got)
	}
	// A generation-bearing commit to a group that does not exist.
	if got := codes(commit(9, "missing", 3, "m", map[string][]int32{"t": {0}}, "")); got["t/0"] != kerr.GroupIDNotFound.Code {
		t.Fatalf("v9 missing group: %v", got)
	}
	if got := codes(commit(8, "missing", 3, "m", map[string][]int32{"t": {0}}, "")); got["t/0"] != kerr.IllegalGeneration.Code {
		t.Fatalf("v8 missing group: %v", got)
	}
	// The simple group g1 has no members.
	if got := codes(commit(8, "g1", 1, "someone", map[string][]int32{"t": {0}}, "")); got["t/0"] != kerr.UnknownMemberID.Code {
		t.Fatalf("member commit to simple group: %v", got)
	}

	fetched, err := adm.FetchOffsets(ctxT(t), "g1")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("t", 1); ok && o.At != -1 {
		t.Fatalf("rejected metadata commit was stored: %+v", o)
	}
	// An unknown group is not an error for OffsetFetch.
	unknown, err := adm.FetchOffsets(ctxT(t), "no-such-group")
	if err != nil || unknown.Error() != nil || len(unknown) != 0 {
		t.Fatalf("unknown group fetch: %v %v %v", err, unknown.Error(), unknown)
	}
}

// Issue 10, defect 13 (Kafka's OffsetFetchRequestTest.testFetchOffsetWithRecreatedTopic): a
// topic deleted and re-created under the same name has a new id and none of the old topic's
// offsets; OffsetFetch v10 by the new id and a fetch by name answer -1, also after a restart.
// The deletion also removes the offsets at once (no retention sweep runs in this test), so
// the simple group that only had them is gone.
func TestOffsetFetchAfterTopicRecreated(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 3)
	for p := int32(0); p < 3; p++ {
		commitPlain(t, adm, "g", "t", p, 100+int64(p))
	}
	if res, err := adm.DeleteTopics(ctxT(t), "t"); err != nil || res["t"].Err != nil {
		t.Fatalf("delete t: %v %v", err, res["t"].Err)
	}
	res, err := adm.CreateTopics(ctxT(t), 3, -1, nil, "t")
	if err != nil || res["t"].Err != nil {
		t.Fatalf("re-create t: %v %v", err, res["t"].Err)
	}
	newID := [16]byte(res["t"].ID)
	check := func(when string) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "g"
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.TopicID, rt.Partitions = newID, []int32{0, 1, 2}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp := call(t, d, req, 10).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 3 {
			t.Fatalf("%s: v10 answer %+v", when, resp)
		}
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Offset != -1 {
				t.Fatalf("%s: v10 partition %d: offset %d code %d, want -1", when, p.Partition, p.Offset, p.ErrorCode)
			}
		}
		if got := fetchV7(t, d, "g", false, "t", 0, 1, 2); got[0].offset != -1 || got[1].offset != -1 || got[2].offset != -1 {
			t.Fatalf("%s: fetch by name %v", when, got)
		}
	}
	check("after re-create")
	eventually(t, "the group with only the deleted topic's offsets disappears", func() bool {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"g"}
		return call(t, d, req, 5).(*kmsg.DescribeGroupsResponse).Groups[0].State == "Dead"
	})
	// The new topic's own commit is served (a new client: the first one caches the old id).
	commitPlain(t, kadm.NewClient(d.client()), "g", "t", 1, 7)
	d.stop()
	d.start()
	check2 := fetchV7(t, d, "g", false, "t", 0, 1)
	if check2[0].offset != -1 || check2[1].offset != 7 {
		t.Fatalf("after restart: %v", check2)
	}
}
