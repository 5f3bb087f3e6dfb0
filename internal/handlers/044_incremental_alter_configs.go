package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
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
		switch {
		case res.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			ops := make([]groupConfigOp, len(res.Configs))
			for i, c := range res.Configs {
				ops[i] = groupConfigOp{name: c.Name, op: c.Op, value: c.Value}
			}
			out.ErrorCode, out.ErrorMessage = t.alterGroupConfigs(ctx, res.ResourceName, ops, false, req.ValidateOnly)
		case IsLocalConfigResource(res.ResourceType, res.ResourceName, t.deps.Node.ID):
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, staticBrokerMessage()
		default:
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, t.unsupportedResourceMessage()
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}
