package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// incrementalAlterConfigs sets and deletes group-level configs (GROUP resources). The group
// need not exist; a change reaches a streams group at its next heartbeat.
func (t *Table) incrementalAlterConfigs(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, res := range req.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = res.ResourceType, res.ResourceName
		ops := make([]groupConfigOp, len(res.Configs))
		for i, c := range res.Configs {
			ops[i] = groupConfigOp{name: c.Name, op: c.Op, value: c.Value}
		}
		if out.ErrorCode, out.ErrorMessage = t.configResourceAllowed(r, res.ResourceType, res.ResourceName, acl.OpAlterConfigs); out.ErrorCode == 0 {
			out.ErrorCode, out.ErrorMessage = t.alterResource(ctx, res.ResourceType, res.ResourceName, ops, false, req.ValidateOnly)
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}
