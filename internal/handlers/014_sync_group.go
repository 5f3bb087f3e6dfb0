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

// syncGroup distributes the leader's assignment (spec coordinator-apis §2.6). A follower's
// request waits until the leader's assignment is durable.
func (t *Table) syncGroup(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	// From v5 protocol type and name are mandatory; Kafka refuses the request before looking at
	// anything else (KafkaApis handleSyncGroupRequest).
	if r.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		resp.MemberAssignment = []byte{}
		return resp
	}
	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		resp.MemberAssignment = []byte{}
		return resp
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	assignments := make(map[string][]byte, len(req.GroupAssignment))
	for _, a := range req.GroupAssignment {
		assignments[a.MemberID] = a.MemberAssignment
	}
	sr := classic.SyncRequest{
		Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation,
		ProtocolType: req.ProtocolType, Protocol: req.Protocol, Assignments: assignments, Version: r.Version,
	}
	v, err := t.deps.Groups.For(req.Group).Write(ctx, shard.SyncGroupWith(t.classicConfig(), sr, t.streamsContext(ctx, false)))
	if _, again := v.(shard.NeedsCatalog); again && err == nil {
		v, err = t.deps.Groups.For(req.Group).Write(ctx, shard.SyncGroupWith(t.classicConfig(), sr, t.streamsContext(ctx, true)))
	}
	if err != nil {
		resp.ErrorCode = availabilityCode(err)
		return resp
	}
	res := v.(*classic.SyncResult)
	resp.ErrorCode = res.Code
	if res.Code != 0 {
		resp.MemberAssignment = []byte{}
		return resp
	}
	resp.MemberAssignment = res.Assignment
	if r.Version >= 5 {
		resp.ProtocolType, resp.Protocol = res.ProtocolType, res.Protocol
	}
	return resp
}
