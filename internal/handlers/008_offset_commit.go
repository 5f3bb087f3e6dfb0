package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetCommit stores committed offsets (spec coordinator-apis §3.2): partitions of unknown
// topics are refused one by one, the group's rules decide for the rest, and a success is only
// answered once the commit is durable.
func (t *Table) offsetCommit(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)

	// codes[i][j] is the answer for request topic i, partition j; -2 marks "ask the group".
	const pending = -2
	codes := make([][]int16, len(req.Topics))
	names := make([]string, len(req.Topics))
	var commit []shard.CommitPartition
	snap, err := t.catalog(ctx)
	for i, rt := range req.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
		topicCode := int16(0)
		switch {
		case err != nil:
			topicCode = availabilityCode(err)
		case r.Version >= 10:
			if topic, ok := snap.TopicByID(rt.TopicID); ok {
				names[i] = topic.Name
			} else {
				topicCode = kerr.UnknownTopicID.Code
			}
		default:
			names[i] = rt.Topic
			if _, ok := snap.Topic(rt.Topic); !ok {
				topicCode = kerr.UnknownTopicOrPartition.Code
			}
		}
		for j, p := range rt.Partitions {
			codes[i][j] = topicCode
			if topicCode != 0 {
				continue
			}
			if topic, _ := snap.Topic(names[i]); p.Partition < 0 || p.Partition >= topic.Partitions {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			codes[i][j] = pending
			retention := int64(-1)
			if r.Version >= 2 && r.Version <= 4 && req.RetentionTimeMillis != -1 {
				retention = req.RetentionTimeMillis
			}
			commit = append(commit, shard.CommitPartition{
				TopicPartition: offsets.TopicPartition{Topic: names[i], Partition: p.Partition},
				Offset:         p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, RetentionMs: retention,
			})
		}
	}

	var groupCodes []int16
	if len(commit) > 0 {
		v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.CommitOffsets(shard.CommitRequest{
			Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
			Version: r.Version, Partitions: commit, MaxMetadata: t.deps.Limits.OffsetMetadataMaxBytes,
		}))
		if err != nil {
			code := commitWriteCode(err)
			groupCodes = make([]int16, len(commit))
			for i := range groupCodes {
				groupCodes[i] = code
			}
		} else {
			groupCodes = v.([]int16)
		}
	}

	k := 0
	for i, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for j, p := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, codes[i][j]
			if sp.ErrorCode == pending {
				sp.ErrorCode = groupCodes[k]
				k++
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
