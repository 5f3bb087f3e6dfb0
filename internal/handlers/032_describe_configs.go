package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeConfigs answers DescribeConfigs for GROUP resources and this node's BROKER resource,
// in request order. Synonyms (v1+) and documentation (v3+) only when asked, as Kafka does.
func (t *Table) describeConfigs(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range req.Resources {
		if code, msg := t.configResourceAllowed(r, res.ResourceType, res.ResourceName, acl.OpDescribeConfigs); code != 0 {
			out := kmsg.NewDescribeConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode, out.ErrorMessage = res.ResourceType, res.ResourceName, code, msg
			resp.Resources = append(resp.Resources, out)
			continue
		}
		switch {
		case res.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			resp.Resources = append(resp.Resources, t.describeGroupConfigs(ctx, res, req.IncludeSynonyms, req.IncludeDocumentation))
		case IsLocalConfigResource(res.ResourceType, res.ResourceName, t.deps.Node.ID):
			resp.Resources = append(resp.Resources, t.describeBrokerConfigs(res, req.IncludeSynonyms, req.IncludeDocumentation))
		case isClusterBrokerDefaults(res.ResourceType, res.ResourceName):
			// Standalone, this node is the cluster: its cluster-wide dynamic broker defaults
			// are none. kafka-configs.sh --describe --entity-type brokers asks for them after
			// each broker's own, and failed on a refusal here.
			out := kmsg.NewDescribeConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorMessage = res.ResourceType, res.ResourceName, kmsg.StringPtr("")
			resp.Resources = append(resp.Resources, out)
		default:
			out := kmsg.NewDescribeConfigsResponseResource()
			out.ResourceType, out.ResourceName = res.ResourceType, res.ResourceName
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, t.unsupportedResourceMessage()
			resp.Resources = append(resp.Resources, out)
		}
	}
	return resp
}
