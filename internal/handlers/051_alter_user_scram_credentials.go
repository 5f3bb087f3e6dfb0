package handlers

import (
	"context"
	"slices"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/security"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterUserScramCredentials stores credentials derived from the salted passwords the client
// sent (kafka-configs.sh salts them itself); the salted password is dropped after StoredKey
// and ServerKey are computed from it.
func (t *Table) alterUserScramCredentials(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !t.clusterAllowed(r, acl.OpAlter) {
		// As Kafka's error answer: every distinct user named, sorted, with the code. Kafka's
		// message quotes its internal request object; none is sent rather than an imitation.
		names := slices.Compact(slices.Sorted(slices.Values(append(namesOfDeletions(req), namesOfUpsertions(req)...))))
		for _, name := range names {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = name, kerr.ClusterAuthorizationFailed.Code
			resp.Results = append(resp.Results, res)
		}
		return resp
	}
	dels := make([]meta.ScramDeletion, len(req.Deletions))
	for i, d := range req.Deletions {
		dels[i] = meta.ScramDeletion{User: d.Name, Mechanism: d.Mechanism}
	}
	ups := make([]meta.ScramUpsertion, len(req.Upsertions))
	for i, u := range req.Upsertions {
		ups[i] = meta.ScramUpsertion{User: u.Name, Mechanism: u.Mechanism, Credential: meta.ScramCredential{Iterations: u.Iterations}}
		if m, ok := security.MechanismByType(u.Mechanism); ok {
			c := m.CredentialFromSalted(u.SaltedPassword, u.Salt, u.Iterations)
			ups[i].Credential = meta.ScramCredential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
		}
	}
	v, err := t.deps.Meta.Write(ctx, meta.AlterScram(dels, ups))
	if err != nil {
		code := availabilityCode(err)
		seen := map[string]bool{}
		for _, name := range append(namesOfDeletions(req), namesOfUpsertions(req)...) {
			if !seen[name] {
				seen[name] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode = name, code
				resp.Results = append(resp.Results, res)
			}
		}
		return resp
	}
	for _, u := range v.([]meta.ScramUserResult) {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = u.User, u.Code, u.Message
		resp.Results = append(resp.Results, res)
	}
	return resp
}

func namesOfDeletions(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	out := make([]string, len(req.Deletions))
	for i, d := range req.Deletions {
		out[i] = d.Name
	}
	return out
}

func namesOfUpsertions(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	out := make([]string, len(req.Upsertions))
	for i, u := range req.Upsertions {
		out[i] = u.Name
	}
	return out
}
