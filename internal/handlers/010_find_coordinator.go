package handlers

import (
	"context"
	"fmt"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
	coordinatorShare       = 2
)

type coordinatorAnswer struct {
	node    int32
	host    string
	port    int32
	code    int16
	message *string
}

// findCoordinator answers every GROUP key with the node owning the group's shard (this node
// unless several share the shards, GroupOwner), COORDINATOR_NOT_AVAILABLE while that shard is
// handed over, and every TRANSACTION key with this node. Share groups are not served.
func (t *Table) findCoordinator(_ context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	ep := t.deps.Node.endpointFor(r.Conn.Listener)

	answer := func(key string, keyType int8) coordinatorAnswer {
		fail := func(code int16, format string, args ...any) coordinatorAnswer {
			msg := fmt.Sprintf(format, args...)
			return coordinatorAnswer{node: -1, host: "", port: -1, code: code, message: &msg}
		}
		switch keyType {
		case coordinatorGroup:
			if !t.groupAllowed(r, key, acl.OpDescribe) {
				return fail(kerr.GroupAuthorizationFailed.Code, "Group authorization failed.")
			}
		case coordinatorTransaction:
			if !t.authorize(r, acl.ResourceTransactionalID, key, acl.OpDescribe) {
				return fail(kerr.TransactionalIDAuthorizationFailed.Code, "Transactional Id authorization failed.")
			}
		case coordinatorShare:
			if r.Version < 6 {
				return fail(kerr.InvalidRequest.Code, "key type SHARE needs FindCoordinator v6 or later")
			}
			return fail(kerr.InvalidRequest.Code, "share groups are not served by this coordinator")
		default:
			return fail(kerr.InvalidRequest.Code, "unknown key type %d", keyType)
		}
		// Kafka fills the message on success too: the error's name below v4, empty from v4.
		ok := "NONE"
		if r.Version >= 4 {
			ok = ""
		}
		if keyType == coordinatorGroup && t.deps.GroupOwner != nil {
			owner, known := t.deps.GroupOwner(t.deps.Groups.ShardOf(key))
			if !known {
				return fail(kerr.CoordinatorNotAvailable.Code, "The coordinator is not available.")
			}
			if !owner.Self {
				return coordinatorAnswer{node: owner.ID, host: owner.Host, port: owner.Port, message: &ok}
			}
		}
		return coordinatorAnswer{node: t.deps.Node.ID, host: ep.Host, port: ep.Port, message: &ok}
	}

	if r.Version < 4 {
		a := answer(req.CoordinatorKey, req.CoordinatorType)
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = a.node, a.host, a.port, a.code, a.message
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		a := answer(key, req.CoordinatorType)
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = key, a.node, a.host, a.port, a.code, a.message
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
