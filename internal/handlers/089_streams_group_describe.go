package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topologyDescriptionNotStored is TopologyDescriptionStatus NOT_STORED: asked for, but no
// topology description plugin is configured (spec topology-description.md).
const topologyDescriptionNotStored = 1

// streamsGroupDescribe describes streams groups (spec streams-groups §9), each from its shard.
func (t *Table) streamsGroupDescribe(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.StreamsGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	snap, catErr := t.catalog(ctx)
	for _, id := range req.Groups {
		g := kmsg.NewStreamsGroupDescribeResponseGroup()
		g.Group = id
		switch {
		case id == "":
			g.ErrorCode = kerr.InvalidGroupID.Code
		case catErr != nil:
			g.ErrorCode = availabilityCode(catErr)
		default:
			v, err := t.deps.Groups.For(id).Write(ctx, shard.StreamsDescribe([]string{id}, req.IncludeAuthorizedOperations, snap, t.deps.Streams))
			if err != nil {
				g.ErrorCode = availabilityCode(err)
			} else {
				g = v.([]kmsg.StreamsGroupDescribeResponseGroup)[0]
				if g.ErrorCode != 0 {
					g.AssignorName = nil
				}
			}
		}
		if r.Version >= 1 && req.IncludeTopologyDescription && g.ErrorCode == 0 {
			g.TopologyDescriptionStatus = topologyDescriptionNotStored
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

// isStreamsGroup reports whether a streams group has the id (DescribeGroups, spec §11.2).
func (t *Table) isStreamsGroup(ctx context.Context, id string) bool {
	v, err := t.deps.Groups.For(id).Read(ctx, shard.IsStreamsGroup(id))
	return err == nil && v.(bool)
}

// deleteStreamsGroup is DeleteGroups for a streams group (spec §11.3).
func (t *Table) deleteStreamsGroup(ctx context.Context, id string) int16 {
	v, err := t.deps.Groups.For(id).Write(ctx, shard.DeleteStreamsGroup(id))
	if err != nil {
		return availabilityCode(err)
	}
	return v.(int16)
}

// validateStreamsFetch applies the streams member checks of an OffsetFetch v9+ (spec §11.5);
// 0 when the group is not a streams group or the member may fetch.
func (t *Table) validateStreamsFetch(ctx context.Context, group string, member *string, epoch int32) int16 {
	v, err := t.deps.Groups.For(group).Read(ctx, shard.ValidateStreamsFetch(group, member, epoch))
	if err != nil {
		return 0 // the fetch itself reports availability
	}
	return v.(int16)
}
