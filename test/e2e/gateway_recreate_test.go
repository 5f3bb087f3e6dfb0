package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// recreateObservations is what a client sees of one group's offsets for a topic deleted and
// re-created upstream, asked by name (OffsetFetch v9) and by topic id (v10).
type recreateObservations struct {
	MetadataID          bool  // Metadata named the topic under its new id
	ByNameAfterRecreate int64 // the old topic's commit, asked for by name once the client saw the new topic
	ByNameAfterCommit   int64 // a commit by name for the new topic, read back by name
	ByIDAfterCommit     int64 // and by the new topic's id
	ByNameLater         int64 // the same once the removal of the old topic's offsets has run
}

// A topic deleted and re-created upstream between two of the gateway's metadata refreshes,
// used by a client that commits by name (OffsetCommit v9, as librdkafka and older Java clients
// do): the old topic's offsets must not show for the new topic, and a commit for the new topic
// must not be lost when the gateway learns of the re-creation. The same sequence is run against
// the broker itself, and both must answer alike.
func TestGateway_TopicRecreatedUpstreamMatchesKafka(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	// Refreshes far apart: the whole sequence runs inside one refresh interval, as it would on
	// a busy gateway whose upstream changed a moment ago.
	g := startGateway(t, "upstream.metadata.max.age.ms=600000")
	got := runRecreateSequence(t, g.Addr, "gw")
	want := runRecreateSequence(t, upstreamAddr, "kafka")
	t.Logf("kafka %+v, gateway %+v", want, got)
	if got != want {
		t.Fatalf("the gateway answers unlike Kafka for a topic deleted and re-created upstream:\n kafka   %+v\n gateway %+v", want, got)
	}
}

func runRecreateSequence(t *testing.T, addr, label string) recreateObservations {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	byName := newClient(t, addr, kgo.MaxVersions(func() *kversion.Versions {
		v := kversion.Stable()
		v.SetMaxKeyVersion(8, 9)
		v.SetMaxKeyVersion(9, 9)
		return v
	}()))
	byID := newClient(t, addr)
	direct := kadm.NewClient(newClient(t, upstreamAddr))
	topic := "gw-recreate-" + label + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	group := topic + "-group"
	if _, err := direct.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	commit := func(offset int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = group, -1, ""
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, byName)
		if err != nil {
			t.Fatalf("%s: commit %d: %v", label, offset, err)
		}
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("%s: commit %d: error code %d", label, offset, c)
		}
	}
	fetch := func(cl *kgo.Client, id [16]byte) int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.TopicID, rt.Partitions = topic, id, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: fetch: %v", label, err)
		}
		if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			t.Fatalf("%s: fetch: unexpected answer %+v", label, resp)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			return -1000 - int64(p.ErrorCode)
		}
		return p.Offset
	}
	commit(41)
	before, err := direct.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	oldID := before[topic].ID
	if _, err := direct.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	var newID [16]byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := direct.CreateTopic(ctx, 1, 1, nil, topic); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("re-creating %s upstream: %v", topic, err)
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		after, _ := direct.ListTopics(ctx, topic)
		if d, ok := after[topic]; ok && d.Err == nil && d.ID != oldID {
			newID = d.ID
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream never showed the re-created topic under a new id")
		}
	}
	var o recreateObservations
	// A consumer of the new topic learns of it from Metadata before it commits.
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mdResp, err := md.RequestWith(ctx, byName)
	if err != nil {
		t.Fatalf("%s: metadata: %v", label, err)
	}
	o.MetadataID = len(mdResp.Topics) == 1 && mdResp.Topics[0].TopicID == newID
	o.ByNameAfterRecreate = fetch(byName, [16]byte{})
	commit(7)
	o.ByNameAfterCommit = fetch(byName, [16]byte{})
	o.ByIDAfterCommit = fetch(byID, newID)
	// The removal of the old topic's offsets runs in the background once the gateway knows.
	time.Sleep(3 * time.Second)
	o.ByNameLater = fetch(byName, [16]byte{})
	return o
}
