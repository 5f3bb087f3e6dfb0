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
