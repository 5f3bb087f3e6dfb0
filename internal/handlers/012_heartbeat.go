package handlers

import (
	"context"
	"errors"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// heartbeat keeps a classic member's session alive and tells it when to rejoin (spec
// coordinator-apis §2.6). While the group's shard is loading the answer is NONE, as Kafka's,
// so that members are not sent into a rebalance by a coordinator restart.
func (t *Table) heartbeat(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.Heartbeat(t.classicConfig(), req.Group, req.MemberID, req.InstanceID, req.Generation))
	switch {
	case errors.Is(err, runtime.ErrLoading):
		resp.ErrorCode = 0
	case err != nil:
		resp.ErrorCode = availabilityCode(err)
	default:
		resp.ErrorCode = v.(int16)
	}
	return resp
}
