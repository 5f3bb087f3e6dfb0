package handlers

import (
	"context"
	"errors"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetDelete removes a group's offsets for some partitions (spec coordinator-apis §3.4).
// Partitions of unknown topics are refused one by one; the group decides the rest. A group-level
// error (missing group, non-empty group, availability) is answered alone, without topics, as
// Kafka does. The GROUP DELETE / TOPIC READ checks come with ACLs.
func (t *Table) offsetDelete(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !t.groupAllowed(r, req.Group, acl.OpDelete) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	snap, err := t.catalog(ctx)
	if err != nil {
		resp.ErrorCode = coordinatorCode(err)
		return resp
	}
	const pending = -2
	codes := make([][]int16, len(req.Topics))
	var parts []offsets.TopicPartition
	for i, rt := range req.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
		topic, known := snap.Topic(rt.Topic)
		denied := !t.topicAllowed(r, rt.Topic, acl.OpRead)
		for j, p := range rt.Partitions {
			if denied {
				codes[i][j] = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !known || p.Partition < 0 || p.Partition >= topic.Partitions {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			codes[i][j] = pending
			parts = append(parts, offsets.TopicPartition{Topic: rt.Topic, Partition: p.Partition})
		}
	}
	// The group is asked even when no partition survived, so that a missing group is reported.
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.DeleteOffsets(req.Group, parts))
	if err != nil {
		resp.ErrorCode = coordinatorCode(err)
		return resp
	}
	res := v.(shard.DeleteOffsetsResult)
	if res.Code != 0 {
		resp.ErrorCode = res.Code
		return resp
	}
	k := 0
	for i, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for j, p := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, codes[i][j]
			if sp.ErrorCode == pending {
				sp.ErrorCode = res.Codes[k]
				k++
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// coordinatorCode maps a shard runtime error on a group write the way Kafka's
// CoordinatorOperationExceptionHelper does; availabilityCode already does (never
// REQUEST_TIMED_OUT, which transactional clients treat as fatal).
func coordinatorCode(err error) int16 {
	return availabilityCode(err)
}

// commitWriteCode is coordinatorCode for the records of an offset commit: a batch the store
// refuses for its size is INVALID_COMMIT_OFFSET_SIZE (spec coordinator-apis §3.2 step 5).
func commitWriteCode(err error) int16 {
	if errors.Is(err, runtime.ErrRecordTooLarge) {
		return kerr.InvalidCommitOffsetSize.Code
	}
	return coordinatorCode(err)
}
