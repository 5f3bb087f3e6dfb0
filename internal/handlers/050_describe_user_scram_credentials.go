package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (t *Table) describeUserScramCredentials(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !t.clusterAllowed(r, acl.OpDescribe) {
		// As Kafka's error answer: the code and message at the top and in one result per
		// requested user, whose User stays empty (Kafka does not set it either).
		msg := clusterAuthorizationFailedMessage
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
		for range req.Users {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
			resp.Results = append(resp.Results, res)
		}
		return resp
	}
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
