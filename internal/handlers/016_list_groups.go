package handlers

import (
	"context"
	"errors"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listGroups lists the groups of every shard (spec coordinator-apis §1.6, §2.7), filtered by
// state (v4+) and type (v5+), case-insensitively. A shard that cannot answer (loading) sets the
// error code; the groups of the others are still listed. A FAILED shard is left out silently,
// as Kafka leaves out a partition that answers NOT_COORDINATOR: its groups are not served here.
func (t *Table) listGroups(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	var states, types []string
	if r.Version >= 4 {
		states = req.StatesFilter
	}
	if r.Version >= 5 {
		types = req.TypesFilter
	}
	// CLUSTER DESCRIBE sees every group; otherwise only groups the principal may DESCRIBE
	// are listed, and the others are left out silently (KafkaApis.handleListGroupsRequest).
	seeAll := t.allowed(r, acl.ResourceCluster, acl.ClusterName, acl.OpDescribe)
	for i := int32(0); i < t.deps.Groups.Count(); i++ {
		v, err := t.deps.Groups.Shard(i).Read(ctx, shard.ListClassicGroups(states, types))
		if errors.Is(err, runtime.ErrFailed) {
			continue
		}
		if err != nil {
			if resp.ErrorCode == 0 {
				resp.ErrorCode = availabilityCode(err)
			}
			continue
		}
		listed := v.([]shard.GroupListing)
		if sv, err := t.deps.Groups.Shard(i).Read(ctx, shard.ListStreamsGroups(states, types)); err == nil {
			listed = append(listed, sv.([]shard.GroupListing)...)
		}
		if cv, err := t.deps.Groups.Shard(i).Read(ctx, shard.ListConsumerGroups(states, types)); err == nil {
			listed = append(listed, cv.([]shard.GroupListing)...)
		}
		for _, l := range listed {
			if !seeAll && !t.allowed(r, acl.ResourceGroup, l.ID, acl.OpDescribe) {
				continue
			}
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.ID, l.ProtocolType, l.State, l.Type
			resp.Groups = append(resp.Groups, g)
		}
	}
	return resp
}
