package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteGroups deletes Empty classic groups and simple groups with all their offsets (spec
// coordinator-apis §2.7). Duplicate ids get one result. The empty id is looked up like any
// other, as Kafka 4.4 does: OffsetCommit accepts "" (old clients' simple groups), so "" can
// exist, and deleting it is the only way to remove it. v3's ErrorMessage stays null for these
// codes, as Kafka 4.4 answers (the spec asks for a message on every error; Kafka only gives one
// where a topology description plugin failed).
func (t *Table) deleteGroups(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	seen := map[string]bool{}
	// Unauthorized groups are answered before anything, the plugin included, is touched.
	denied := map[string]bool{}
	var authorized []string
	for _, id := range req.Groups {
		if _, done := denied[id]; done {
			continue
		}
		denied[id] = !t.groupAllowed(r, id, acl.OpDelete)
		if !denied[id] {
			authorized = append(authorized, id)
		}
	}
	kept := t.preDeleteTopologyDescriptions(ctx, r.Version, authorized) // streams groups whose plugin delete failed
	for _, id := range req.Groups {
		if seen[id] {
			continue
		}
		seen[id] = true
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		switch pre, ok := kept[id]; {
		case denied[id]:
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case ok:
			g = pre
		default:
			v, err := t.deps.Groups.For(id).Write(ctx, shard.DeleteClassicGroup(id))
			if err != nil {
				g.ErrorCode = availabilityCode(err)
			} else {
				g.ErrorCode = v.(shard.DeleteResult).Code
				if v.(shard.DeleteResult).NotClassic {
					if t.isConsumerGroup(ctx, id) {
						g.ErrorCode = t.deleteConsumerGroup(ctx, id)
					} else {
						g.ErrorCode = t.deleteStreamsGroup(ctx, id)
					}
				}
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
