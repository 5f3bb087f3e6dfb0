package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

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
		ops := make([]groupConfigOp, len(res.Configs))
		for i, c := range res.Configs {
			ops[i] = groupConfigOp{name: c.Name, op: kmsg.IncrementalAlterConfigOpSet, value: c.Value}
		}
		if out.ErrorCode, out.ErrorMessage = t.configResourceAllowed(r, res.ResourceType, res.ResourceName, acl.OpAlterConfigs); out.ErrorCode == 0 {
			out.ErrorCode, out.ErrorMessage = t.alterResource(ctx, res.ResourceType, res.ResourceName, ops, true, req.ValidateOnly)
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// alterResource applies ops to one resource of an alter request: a group's configs, or the
// refusal Kafka-style for coordinatord's own (static) broker config and everything else.
// replace says the ops are the group's whole new set (legacy AlterConfigs).
func (t *Table) alterResource(ctx context.Context, typ kmsg.ConfigResourceType, name string, ops []groupConfigOp, replace, validateOnly bool) (int16, *string) {
	switch {
	case typ == kmsg.ConfigResourceTypeGroupConfig:
		return t.alterGroupConfigs(ctx, name, ops, replace, validateOnly)
	case IsLocalConfigResource(typ, name, t.deps.Node.ID), isClusterBrokerDefaults(typ, name):
		return kerr.InvalidRequest.Code, staticBrokerMessage()
	default:
		return kerr.InvalidRequest.Code, t.unsupportedResourceMessage()
	}
}

func staticBrokerMessage() *string {
	m := "coordinatord's configuration is static: set it in its config file or with --set and restart"
	return &m
}
