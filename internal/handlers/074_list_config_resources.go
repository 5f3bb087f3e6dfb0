package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listConfigResources lists the GROUP resources that have group-level configs (v1; no types
// means every type). kafka-configs.sh --describe --entity-type groups asks it to tell a group
// with configs from an unknown one. v0 lists client-metrics resources, of which coordinatord
// has none.
func (t *Table) listConfigResources(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !t.clusterAllowed(r, acl.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	want := r.Version >= 1 && len(req.ResourceTypes) == 0
	for _, typ := range req.ResourceTypes {
		want = want || typ == int8(kmsg.ConfigResourceTypeGroupConfig)
	}
	if !want {
		return resp
	}
	var names []string
	for i := int32(0); i < t.deps.Groups.Count(); i++ {
		if t.deps.GroupOwner != nil {
			// Several nodes share the shards: the owner lists its own (the gateway asks every
			// node and puts the lists together).
			if owner, ok := t.deps.GroupOwner(i); ok && !owner.Self {
				continue
			}
		}
		v, err := t.deps.Groups.Shard(i).Read(ctx, shard.GroupsWithConfigs())
		if err != nil {
			resp.ErrorCode = availabilityCode(err)
			return resp
		}
		names = append(names, v.([]string)...)
	}
	sort.Strings(names)
	for _, n := range names {
		c := kmsg.NewListConfigResourcesResponseConfigResource()
		c.Name, c.Type = n, int8(kmsg.ConfigResourceTypeGroupConfig)
		resp.ConfigResources = append(resp.ConfigResources, c)
	}
	return resp
}
