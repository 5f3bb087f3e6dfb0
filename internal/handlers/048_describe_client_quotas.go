package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeClientQuotas answers that no quota is set, which is true: coordinatord enforces
// none. It is served because kafka-configs.sh --describe --entity-type users asks for a user's
// quotas before its SCRAM credentials and fails the whole command when the API is missing.
func (t *Table) describeClientQuotas(_ context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	// ACL hook (issue 13 item 4): Kafka requires CLUSTER DESCRIBE_CONFIGS here.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	resp.ErrorMessage = kmsg.StringPtr("") // as Kafka 4.4
	return resp
}
