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
	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		return heartbeatAnswer(req, kerr.GroupAuthorizationFailed.Code)
	}
	if req.Group == "" {
		return heartbeatAnswer(req, kerr.InvalidGroupID.Code)
	}
	if tk, ok := memo(r).(*classicTicket); ok && tk.answers(req) && t.deps.Groups.Shard(tk.shard).Valid(tk.out.Ticket, tk.out.Session) {
		tk.resp = kmsg.NewHeartbeatResponse()
		tk.resp.Version, tk.resp.ErrorCode = req.Version, tk.out.Code
		return &tk.resp
	}
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.Heartbeat(t.classicConfig(), req.Group, req.MemberID, req.InstanceID, req.Generation))
	switch {
	case errors.Is(err, runtime.ErrLoading):
		return heartbeatAnswer(req, 0)
	case err != nil:
		return heartbeatAnswer(req, availabilityCode(err))
	}
	out := v.(shard.HeartbeatResult)
	if r.Conn != nil {
		if out.Ticket != nil {
			r.Conn.Memo = &classicTicket{out: out, group: req.Group, member: req.MemberID, instance: req.InstanceID, generation: req.Generation,
				shard: t.deps.Groups.ShardOf(req.Group)}
		} else if _, ok := r.Conn.Memo.(*classicTicket); ok {
			r.Conn.Memo = nil
		}
	}
	return heartbeatAnswer(req, out.Code)
}

func heartbeatAnswer(req *kmsg.HeartbeatRequest, code int16) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = code
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
	// shard is the group's shard index: the same group id always hashes to it, so the
	// steady path does not hash it again (issue 12).
	shard int32
	// resp is the answer the steady path returns, reused: the wire layer encodes an answer
	// before it reads the connection's next request and keeps nothing of it.
	resp kmsg.HeartbeatResponse
}

func (tk *classicTicket) answers(req *kmsg.HeartbeatRequest) bool {
	return req.Generation == tk.generation && req.MemberID == tk.member && req.Group == tk.group &&
		(req.InstanceID == nil) == (tk.instance == nil) && (req.InstanceID == nil || *req.InstanceID == *tk.instance)
}
