package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"
	"maps"
	"slices"

	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsGroupDescribe describes streams groups (spec streams-groups §9), each from its shard.
// With v1 IncludeTopologyDescription the topology descriptions are fetched from the plugin for
// all groups at once, only where the stored epoch is the group's topology epoch (spec
// topology-description §5); the group part of the answer never changes because of it.
func (t *Table) streamsGroupDescribe(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.StreamsGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	include := r.Version >= 1 && req.IncludeTopologyDescription
	snap, catErr := t.catalog(ctx)
	var gets []plugin.GetRequest
	var getAt []int
	ids, at := distinctGroups(req.Groups)
	for _, id := range ids {
		g := kmsg.NewStreamsGroupDescribeResponseGroup()
		g.Group = id
		var epochs streams.DescriptionEpochs
		found := false
		switch {
		case !t.groupAllowed(r, id, acl.OpDescribe):
			// The code alone, as Kafka 4.4 answers (test/conformance/testdata/authz_sasl.txt).
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case id == "":
			g.ErrorCode = kerr.InvalidGroupID.Code
		case catErr != nil:
			g.ErrorCode = availabilityCode(catErr)
		default:
			v, err := t.deps.Groups.For(id).Write(ctx, shard.StreamsDescribeWithEpochs([]string{id}, req.IncludeAuthorizedOperations, snap, t.deps.Streams))
			if err != nil {
				g.ErrorCode = availabilityCode(err)
			} else {
				d := v.([]shard.StreamsDescribed)[0]
				g, epochs, found = d.Group, d.Epochs, d.Found
				if g.ErrorCode != 0 {
					g.AssignorName = nil
				} else if !t.topologyDescribable(r, g.Topology) {
					g = kmsg.NewStreamsGroupDescribeResponseGroup()
					g.Group, g.ErrorCode = id, kerr.TopicAuthorizationFailed.Code
					g.ErrorMessage = strPtr("The described group uses topics that the client is not authorized to describe.")
					found = false
				} else if req.IncludeAuthorizedOperations {
					g.AuthorizedOperations = t.authorizedOps(r, acl.ResourceGroup, id)
				}
			}
		}
		if include && g.ErrorCode == 0 {
			g.TopologyDescriptionStatus = topologyDescriptionNotStored
			if found && t.deps.Topology.Enabled() && epochs.Topology >= 0 && epochs.Stored == epochs.Topology {
				gets = append(gets, plugin.GetRequest{Group: id, Epoch: epochs.Topology})
				getAt = append(getAt, len(resp.Groups))
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	if len(gets) > 0 {
		var lost []plugin.GetRequest
		for i, res := range t.deps.Topology.GetMany(ctx, gets) {
			g := &resp.Groups[getAt[i]]
			switch {
			case res.Err != nil:
				g.TopologyDescriptionStatus = topologyDescriptionError
				t.log.Warn("topology description plugin get failed", zap.String("group", g.Group), zap.Error(res.Err))
			case res.Description == nil:
				t.log.Warn("topology description plugin holds no description of the stored epoch; a member will be asked to push it again",
					zap.String("group", g.Group), zap.Int32("topology_epoch", gets[i].Epoch))
				lost = append(lost, gets[i])
			default:
				g.TopologyDescriptionStatus = topologyDescriptionAvailable
				g.TopologyDescription = DescriptionToWire(res.Description)
			}
		}
		t.descriptionsLost(ctx, lost)
	}
	resp.Groups = expandAnswers(resp.Groups, at)
	return resp
}

// descriptionsLost resets the stored epoch of groups whose description the plugin no longer
// has (issue 10 defect 14; Kafka keeps describing NOT_STORED and never asks again). The write
// is done before the describe answers, so a heartbeat that follows it solicits a push; a
// failed write is only logged, as the next describe finds the loss again.
func (t *Table) descriptionsLost(ctx context.Context, lost []plugin.GetRequest) {
	if len(lost) == 0 {
		return
	}
	byShard := map[*runtime.Shard[*shard.Machine]]map[string]int32{}
	for _, l := range lost {
		sh := t.deps.Groups.For(l.Group)
		if byShard[sh] == nil {
			byShard[sh] = map[string]int32{}
		}
		byShard[sh][l.Group] = l.Epoch
	}
	for sh, groups := range byShard {
		if _, err := sh.Write(ctx, shard.StreamsDescriptionLost(groups)); err != nil {
			t.log.Warn("recording a lost topology description failed; the next describe retries", zap.Error(err))
		}
	}
	t.RecountStoredDescriptions(context.WithoutCancel(ctx), slices.Collect(maps.Keys(byShard))...)
}

// isStreamsGroup reports whether a streams group has the id (DescribeGroups, spec §11.2).
func (t *Table) isStreamsGroup(ctx context.Context, id string) bool {
	v, err := t.deps.Groups.For(id).Read(ctx, shard.IsStreamsGroup(id))
	return err == nil && v.(bool)
}

// deleteStreamsGroup is DeleteGroups for a streams group (spec §11.3).
func (t *Table) deleteStreamsGroup(ctx context.Context, id string) int16 {
	v, err := t.deps.Groups.For(id).Write(ctx, shard.DeleteStreamsGroup(id))
	if err != nil {
		return availabilityCode(err)
	}
	if v.(int16) == 0 && t.deps.Topology.Enabled() {
		// A new group with this id starts from scratch, solicitation included (topology-description §4).
		t.deps.Topology.Backoff().ClearGroup(id)
	}
	return v.(int16)
}

// validateStreamsFetch applies the streams member checks of an OffsetFetch v9+ (spec §11.5);
// 0 when the group is not a streams group or the member may fetch.
func (t *Table) validateStreamsFetch(ctx context.Context, group string, member *string, epoch int32) int16 {
	v, err := t.deps.Groups.For(group).Read(ctx, shard.ValidateStreamsFetch(group, member, epoch))
	if err != nil {
		return 0 // the fetch itself reports availability
	}
	return v.(int16)
}

// topologyDescribable says whether the principal may DESCRIBE every topic of a described
// group's topology; Kafka hides a group that names one it may not.
func (t *Table) topologyDescribable(r *wire.Request, topo *kmsg.StreamsGroupDescribeResponseGroupTopology) bool {
	if topo == nil || !t.deps.Authorizer.Enabled() {
		return true
	}
	ok := func(name string) bool { return t.allowed(r, acl.ResourceTopic, name, acl.OpDescribe) }
	for _, st := range topo.Subtopologies {
		for _, n := range st.SourceTopics {
			if !ok(n) {
				return false
			}
		}
		for _, n := range st.RepartitionSinkTopics {
			if !ok(n) {
				return false
			}
		}
		for _, it := range st.StateChangelogTopics {
			if !ok(it.Topic) {
				return false
			}
		}
		for _, it := range st.RepartitionSourceTopics {
			if !ok(it.Topic) {
				return false
			}
		}
	}
	return true
}
