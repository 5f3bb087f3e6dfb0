package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterConfigs is the legacy AlterConfigs: Kafka 4.4 accepts it for GROUP resources and
// replaces the group's whole set of overrides with the given keys.
func (t *Table) alterConfigs(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, res := range req.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = res.ResourceType, res.ResourceName
		switch {
		case res.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			ops := make([]groupConfigOp, len(res.Configs))
			for i, c := range res.Configs {
				ops[i] = groupConfigOp{name: c.Name, op: kmsg.IncrementalAlterConfigOpSet, value: c.Value}
			}
			out.ErrorCode, out.ErrorMessage = t.alterGroupConfigs(ctx, res.ResourceName, ops, true, req.ValidateOnly)
		case IsLocalConfigResource(res.ResourceType, res.ResourceName, t.deps.Node.ID):
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, staticBrokerMessage()
		default:
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, t.unsupportedResourceMessage()
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

func staticBrokerMessage() *string {
	m := "coordinatord's configuration is static: set it in its config file or with --set and restart"
	return &m
}
