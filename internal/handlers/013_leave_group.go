package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaveGroup removes members from a classic group (spec coordinator-apis §1.6, §2.6). v0-2
// name one member and answer at the top level; v3+ name several and answer per member, the top
// level only for request-wide failures.
func (t *Table) leaveGroup(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	var members []classic.LeaveMember
	if r.Version < 3 {
		members = []classic.LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			members = append(members, classic.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
		}
	}
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.LeaveGroup(t.classicConfig(), req.Group, members))
	if err != nil {
		resp.ErrorCode = availabilityCode(err)
		return resp
	}
	res := v.(shard.LeaveResult)
	if r.Version < 3 {
		resp.ErrorCode = res.Members[0]
		return resp
	}
	if res.Code != 0 && res.Code != kerr.UnknownMemberID.Code {
		resp.ErrorCode = res.Code
		return resp
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, res.Members[i]
		if res.MemberIDs != nil {
			rm.MemberID = res.MemberIDs[i]
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp
}
