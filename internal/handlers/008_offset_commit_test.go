package handlers

import (
	"context"
	"reflect"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// A commit mixing refused partitions (unknown topic, partition beyond the topic) with accepted
// ones stores exactly the accepted ones, each with its own offset and metadata: the partitions
// passed to the group are gathered in the array the request's partitions were copied into, so
// one written over before it was read would commit the wrong offset to the wrong partition.
func TestOffsetCommitStoresOnlyAcceptedPartitionsWithTheirOwnOffsets(t *testing.T) {
	pub := &meta.Published{}
	m := catalogShard(t, pub, meta.NewTopic{Name: "a", Partitions: 3, ReplicationFactor: 1}, meta.NewTopic{Name: "b", Partitions: 2, ReplicationFactor: 1})
	groups := loadedGroupShards(t, 2)
	tbl := &Table{deps: Deps{Meta: m, Catalog: pub, Groups: groups, Limits: Limits{OffsetMetadataMaxBytes: 4096}}, log: zap.NewNop()}

	type part struct {
		p      int32
		offset int64
		meta   string
		code   int16
	}
	unknown, ok := kerr.UnknownTopicOrPartition.Code, int16(0)
	request := []struct {
		topic string
		parts []part
	}{
		{"a", []part{{2, 22, "a2", ok}, {0, 23, "a0", ok}, {7, 20, "a7", unknown}}},
		{"missing", []part{{0, 10, "m0", unknown}, {1, 11, "m1", unknown}}},
		{"b", []part{{1, 31, "b1", ok}, {-1, 32, "b-", unknown}, {0, 30, "b0", ok}}},
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = "g", -1
	for _, rt := range request {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = rt.topic
		for _, p := range rt.parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = p.p, p.offset, kmsg.StringPtr(p.meta)
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	resp := tbl.offsetCommit(context.Background(), &wire.Request{Header: wire.Header{Key: 8, Version: 8}, Body: req}).(*kmsg.OffsetCommitResponse)
	for i, rt := range request {
		for j, p := range rt.parts {
			if got := resp.Topics[i].Partitions[j]; got.Partition != p.p || got.ErrorCode != p.code {
				t.Errorf("commit answer for %s/%d: partition %d code %d, want code %d", rt.topic, p.p, got.Partition, got.ErrorCode, p.code)
			}
		}
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(7)
	fetch.Group = "g"
	fetch.Topics = nil // every committed offset of the group
	fr := tbl.offsetFetch(context.Background(), &wire.Request{Header: wire.Header{Key: 9, Version: 7}, Body: fetch}).(*kmsg.OffsetFetchResponse)
	type stored struct {
		offset int64
		meta   string
	}
	got := map[string]stored{}
	for _, rt := range fr.Topics {
		for _, p := range rt.Partitions {
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			got[rt.Topic+"/"+string(rune('0'+p.Partition))] = stored{p.Offset, meta}
		}
	}
	want := map[string]stored{"a/2": {22, "a2"}, "a/0": {23, "a0"}, "b/1": {31, "b1"}, "b/0": {30, "b0"}}
	if len(got) != len(want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s stored %+v, want %+v (all: %v)", k, got[k], w, got)
		}
	}
}

// The group's per-partition answers (metadata too large, a refused generation) reach the
// partitions they belong to when the catalog refuses others of the same request: the shard op
// writes them into the array the handler lends it, after the catalog's codes, and the answer
// is built from one object for a small one-topic commit and from slices for a larger one.
func TestOffsetCommitAnswersTheGroupsCodesAtTheirPartitions(t *testing.T) {
	pub := &meta.Published{}
	m := catalogShard(t, pub, meta.NewTopic{Name: "a", Partitions: 12, ReplicationFactor: 1})
	groups := loadedGroupShards(t, 2)
	tbl := &Table{deps: Deps{Meta: m, Catalog: pub, Groups: groups, Limits: Limits{OffsetMetadataMaxBytes: 4}}, log: zap.NewNop()}

	unknown, tooLarge, illegal := kerr.UnknownTopicOrPartition.Code, kerr.OffsetMetadataTooLarge.Code, kerr.IllegalGeneration.Code
	type part struct {
		p    int32
		meta string
		code int16
	}
	commit := func(group string, generation int32, parts []part) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group, req.Generation = group, generation
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "a"
		for _, p := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = p.p, 5, kmsg.StringPtr(p.meta)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := tbl.offsetCommit(context.Background(), &wire.Request{Header: wire.Header{Key: 8, Version: 8}, Body: req}).(*kmsg.OffsetCommitResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(parts) {
			t.Fatalf("group %s: answer %+v, want one topic of %d partitions", group, resp.Topics, len(parts))
		}
		for j, p := range parts {
			if got := resp.Topics[0].Partitions[j]; got.Partition != p.p || got.ErrorCode != p.code {
				t.Errorf("group %s, partition %d: answered partition %d code %d, want code %d", group, p.p, got.Partition, got.ErrorCode, p.code)
			}
		}
	}
	small := []part{{0, "ok", 0}, {70, "x", unknown}, {1, "too long", tooLarge}, {2, "", 0}}
	commit("small", -1, small)
	var large []part // beyond the one-object answer
	for p := int32(0); p < 12; p++ {
		large = append(large, part{p, "m", 0})
		if p%3 == 1 {
			large = append(large, part{100 + p, "m", unknown}, part{p, "way too long", tooLarge})
		}
	}
	commit("large", -1, large)
	// A group that refuses the commit as a whole answers every partition the catalog passed on.
	commit("nobody", 3, []part{{0, "", illegal}, {99, "", unknown}, {3, "", illegal}})
}

// A connection decodes its next OffsetCommit into the request it answered last (Recycle): the
// request must then read exactly as one decoded afresh, whatever the earlier one held, in
// particular fields its version lacks (instance id, retention) and fewer topics. A large
// request's array is not kept, nor what the kept array's topics held: a connection would pin
// it for its lifetime.
func TestOffsetCommitRecycledRequestDecodesAsANewOne(t *testing.T) {
	tbl := New(Deps{})
	served, _ := tbl.lookup(8)
	encode := func(version int16, fill func(*kmsg.OffsetCommitRequest)) []byte {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.SetVersion(version)
		fill(r)
		return r.AppendTo(nil)
	}
	topic := func(name string, parts ...int32) kmsg.OffsetCommitRequestTopic {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = name
		for _, p := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = p, int64(p)*10, kmsg.StringPtr("m")
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	bodies := []struct {
		version int16
		body    []byte
	}{
		{7, encode(7, func(r *kmsg.OffsetCommitRequest) {
			r.Group, r.Generation, r.MemberID, r.InstanceID = "g", 4, "m-1", kmsg.StringPtr("static-1")
			r.Topics = []kmsg.OffsetCommitRequestTopic{topic("a", 0, 1, 2), topic("b", 3)}
		})},
		{3, encode(3, func(r *kmsg.OffsetCommitRequest) {
			r.Group, r.Generation, r.MemberID, r.RetentionTimeMillis = "g", 5, "m-2", 60000
			r.Topics = []kmsg.OffsetCommitRequestTopic{topic("c", 7)}
		})},
		{6, encode(6, func(r *kmsg.OffsetCommitRequest) {
			r.Group, r.Generation, r.MemberID = "h", 6, "m-3"
			r.Topics = []kmsg.OffsetCommitRequestTopic{topic("d", 1, 2)}
		})},
	}
	var spare kmsg.Request
	for i, b := range bodies {
		req, decode, ok := tbl.NewRequestInto(spare, 8, b.version)
		if !ok || !decode {
			t.Fatalf("request %d: NewRequestInto answered ok=%v decode=%v", i, ok, decode)
		}
		if i > 0 && req != spare {
			t.Fatalf("request %d: the recycled request was not reused", i)
		}
		req.SetVersion(b.version)
		if err := req.ReadFrom(b.body); err != nil {
			t.Fatal(err)
		}
		fresh := kmsg.NewPtrOffsetCommitRequest()
		fresh.SetVersion(b.version)
		if err := fresh.ReadFrom(b.body); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(req, fresh) {
			t.Errorf("request %d (v%d) decoded into the recycled request as\n%+v\nwant\n%+v", i, b.version, req, fresh)
		}
		spare = tbl.Recycle(req)
		kept := spare.(*kmsg.OffsetCommitRequest).Topics
		for _, rt := range kept[:cap(kept)] {
			if rt.Topic != "" || rt.Partitions != nil {
				t.Errorf("request %d: the recycled request still holds topic %q and %d partitions", i, rt.Topic, len(rt.Partitions))
			}
		}
	}
	if _, _, ok := tbl.NewRequestInto(spare, 8, served.max+1); ok {
		t.Errorf("a version beyond the served range was accepted with a spare request")
	}
	large := kmsg.NewPtrOffsetCommitRequest()
	large.Topics = make([]kmsg.OffsetCommitRequestTopic, 1000)
	if tbl.Recycle(large) != nil {
		t.Errorf("a request of 1000 topics was kept for the connection's next one")
	}
	if tbl.Recycle(kmsg.NewPtrHeartbeatRequest()) != nil {
		t.Errorf("a Heartbeat request was recycled")
	}
}
