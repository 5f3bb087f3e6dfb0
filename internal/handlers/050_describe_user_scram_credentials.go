package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (t *Table) describeUserScramCredentials(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	// ACL hook (issue 13 item 4): Kafka requires CLUSTER DESCRIBE here; denied answers
	// CLUSTER_AUTHORIZATION_FAILED in the top-level error code.
	resp.ErrorMessage = kmsg.StringPtr("") // Kafka 4.4 answers "" rather than null, here and per user
	users := make([]string, len(req.Users))
	for i, u := range req.Users {
		users[i] = u.Name
	}
	v, err := t.deps.Meta.Read(ctx, meta.DescribeScram(users, len(users) == 0))
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = availabilityCode(err), nil
		return resp
	}
	for _, u := range v.([]meta.ScramUserResult) {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = u.User, u.Code, u.Message
		if res.ErrorMessage == nil {
			res.ErrorMessage = kmsg.StringPtr("")
		}
		for _, info := range u.Infos {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = info.Mechanism, info.Iterations
			res.CredentialInfos = append(res.CredentialInfos, ci)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}
