package integration

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// T64: for a Stable classic "consumer" group subscribed to t, OffsetDelete answers
// GROUP_SUBSCRIBED_TO_TOPIC for t's partitions and deletes the offsets of other topics.
func TestSpec8_4_T64_OffsetDeleteSubscribedTopic(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	createTopic(t, adm, "u", 1)
	commitPlain(t, adm, "cg", "u", 0, 3)

	cl := d.client(kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	eventually(t, "a Stable group", func() bool {
		groups, err := adm.DescribeGroups(ctxT(t), "cg")
		return err == nil && groups["cg"].State == "Stable"
	})

	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "cg"
	for _, topic := range []string{"t", "u"} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := call(t, d, req, 0).(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 2 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || resp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %+v", resp)
	}
	if got := fetchV7(t, d, "cg", false, "u", 0); got[0] != (fetched{-1, 0}) {
		t.Fatalf("u/0 not deleted: %v", got)
	}
}
