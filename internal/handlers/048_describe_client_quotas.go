package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeClientQuotas answers that no quota is set, which is true: coordinatord enforces
// none. It is served because kafka-configs.sh --describe --entity-type users asks for a user's
// quotas before its SCRAM credentials and fails the whole command when the API is missing.
func (t *Table) describeClientQuotas(_ context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !t.clusterAllowed(r, acl.OpDescribeConfigs) {
		// Kafka's error answer: null entries and the exception's (default) message.
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, strPtr(clusterAuthorizationFailedMessage)
		return resp
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	resp.ErrorMessage = kmsg.StringPtr("") // as Kafka 4.4
	return resp
}
