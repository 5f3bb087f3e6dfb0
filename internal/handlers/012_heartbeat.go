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
	if tk, ok := memo(r).(*classicTicket); ok && tk.answers(req) && t.deps.Groups.For(req.Group).Valid(tk.out.Ticket, tk.out.Session) {
		resp.ErrorCode = tk.out.Code
		return resp
	}
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.Heartbeat(t.classicConfig(), req.Group, req.MemberID, req.InstanceID, req.Generation))
	switch {
	case errors.Is(err, runtime.ErrLoading):
		resp.ErrorCode = 0
	case err != nil:
		resp.ErrorCode = availabilityCode(err)
	default:
		out := v.(shard.HeartbeatResult)
		resp.ErrorCode = out.Code
		if r.Conn != nil {
			if out.Ticket != nil {
				r.Conn.Memo = &classicTicket{out: out, group: req.Group, member: req.MemberID, instance: req.InstanceID, generation: req.Generation}
			} else if _, ok := r.Conn.Memo.(*classicTicket); ok {
				r.Conn.Memo = nil
			}
		}
	}
	return resp
}

// classicTicket is a steady classic Heartbeat's answer kept on its connection (see
// consumerTicket): the same group, member, instance id and generation get the same code
// without the shard while the shard's ticket holds.
type classicTicket struct {
	out        shard.HeartbeatResult
	group      string
	member     string
	instance   *string
	generation int32
}

func (tk *classicTicket) answers(req *kmsg.HeartbeatRequest) bool {
	return req.Generation == tk.generation && req.MemberID == tk.member && req.Group == tk.group &&
		(req.InstanceID == nil) == (tk.instance == nil) && (req.InstanceID == nil || *req.InstanceID == *tk.instance)
}
