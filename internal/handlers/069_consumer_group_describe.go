package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGroupDescribe describes KIP-848 consumer groups, each from its shard.
func (t *Table) consumerGroupDescribe(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	snap, catErr := t.catalog(ctx)
	ids, at := distinctGroups(req.Groups)
	for _, id := range ids {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = id
		switch {
		case !t.groupAllowed(r, id, acl.OpDescribe):
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code // no message, as Kafka
		case id == "":
			g.ErrorCode = kerr.InvalidGroupID.Code
		case catErr != nil:
			g.ErrorCode = availabilityCode(catErr)
		default:
			v, err := t.deps.Groups.For(id).Write(ctx, shard.ConsumerDescribe([]string{id}, req.IncludeAuthorizedOperations, snap, t.deps.Consumer))
			if err != nil {
				g.ErrorCode = availabilityCode(err)
			} else {
				g = v.([]kmsg.ConsumerGroupDescribeResponseGroup)[0]
				if g.ErrorCode == 0 && req.IncludeAuthorizedOperations {
					g.AuthorizedOperations = t.authorizedOps(r, acl.ResourceGroup, id)
				}
				if t.deps.Authorizer.Enabled() && !t.assignmentsDescribable(r, g.Members) {
					// Kafka replaces the whole group: the members' assignments would
					// reveal topics the client may not see.
					g = kmsg.NewConsumerGroupDescribeResponseGroup()
					g.Group, g.ErrorCode = id, kerr.TopicAuthorizationFailed.Code
					g.ErrorMessage = strPtr("The group has described topic(s) that the client is not authorized to describe.")
					g.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
				}
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	resp.Groups = expandAnswers(resp.Groups, at)
	return resp
}

// assignmentsDescribable reports whether every topic of the members' current and target
// assignments may be described.
func (t *Table) assignmentsDescribable(r *wire.Request, members []kmsg.ConsumerGroupDescribeResponseGroupMember) bool {
	seen := map[string]bool{}
	check := func(tps []kmsg.AssignmentTopicPartition) bool {
		for _, tp := range tps {
			if seen[tp.Topic] {
				continue
			}
			seen[tp.Topic] = true
			if !t.topicAllowed(r, tp.Topic, acl.OpDescribe) {
				return false
			}
		}
		return true
	}
	for _, m := range members {
		if !check(m.Assignment.TopicPartitions) || !check(m.TargetAssignment.TopicPartitions) {
			return false
		}
	}
	return true
}

// isConsumerGroup reports whether a consumer group has the id (DescribeGroups, DeleteGroups).
func (t *Table) isConsumerGroup(ctx context.Context, id string) bool {
	v, err := t.deps.Groups.For(id).Read(ctx, shard.IsConsumerGroup(id))
	return err == nil && v.(bool)
}

// deleteConsumerGroup is DeleteGroups for a consumer group.
func (t *Table) deleteConsumerGroup(ctx context.Context, id string) int16 {
	v, err := t.deps.Groups.For(id).Write(ctx, shard.DeleteConsumerGroup(id))
	if err != nil {
		return availabilityCode(err)
	}
	return v.(int16)
}

// validateConsumerFetch applies the consumer group member checks of an OffsetFetch v9+; 0
// when the group is not a consumer group or the member may fetch.
func (t *Table) validateConsumerFetch(ctx context.Context, group string, member *string, epoch int32) int16 {
	v, err := t.deps.Groups.For(group).Read(ctx, shard.ValidateConsumerFetch(group, member, epoch))
	if err != nil {
		return 0
	}
	return v.(int16)
}
