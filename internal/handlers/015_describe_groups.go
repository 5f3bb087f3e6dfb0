package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"
	"math"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeGroups describes classic and simple groups from durable state (spec
// coordinator-apis §2.7). A group that does not exist is reported Dead, with GROUP_ID_NOT_FOUND
// from v6 (KIP-1043).
func (t *Table) describeGroups(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	ids, at := distinctGroups(req.Groups)
	for _, id := range ids {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.AuthorizedOperations = id, math.MinInt32
		if !t.groupAllowed(r, id, acl.OpDescribe) {
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			if r.Version >= 6 {
				g.ErrorMessage = strPtr(kerr.ErrorForCode(g.ErrorCode).Error())
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		v, err := t.deps.Groups.For(id).Read(ctx, shard.DescribeClassicGroups([]string{id}))
		if err != nil {
			g.ErrorCode = availabilityCode(err)
			if r.Version >= 6 {
				g.ErrorMessage = strPtr(kerr.ErrorForCode(g.ErrorCode).Error())
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d := v.([]shard.GroupDescription)[0]
		g.State = d.State
		// Kafka fills the bitfield for every result without an error: below v6 that includes
		// a missing group, described as Dead.
		if r.Version >= 3 && req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = t.authorizedOps(r, acl.ResourceGroup, id)
		}
		if !d.Found {
			if r.Version >= 6 {
				g.ErrorCode = kerr.GroupIDNotFound.Code
				g.ErrorMessage = strPtr("Group " + id + " not found.")
				if t.isStreamsGroup(ctx, id) || t.isConsumerGroup(ctx, id) {
					g.ErrorMessage = strPtr("Group " + id + " is not a classic group.")
				}
				g.AuthorizedOperations = math.MinInt32
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.ProtocolType, g.Protocol = d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.ClientID, gm.ClientHost = m.ID, m.InstanceID, m.ClientID, m.ClientHost
			gm.ProtocolMetadata, gm.MemberAssignment = nonNilBytes(m.Metadata), nonNilBytes(m.Assignment)
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	resp.Groups = expandAnswers(resp.Groups, at)
	return resp
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
