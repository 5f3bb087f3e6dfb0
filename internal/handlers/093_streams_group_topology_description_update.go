package handlers

import (
	"context"
	"errors"
	"github.com/coordinatord/coordinatord/internal/acl"
	"slices"
	"time"

	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// StreamsGroupTopologyDescriptionUpdate (KIP-1331, spec topology-description §3) and the
// plugin plumbing the other topology description paths share: the plugin is called from the
// request goroutine (or the cleanup goroutine) through internal/plugin, which bounds every call
// by its worker pool and call timeout; the shard only sees bookkeeping ops before and after the
// call (ARCHITECTURE §4.10), so a plugin that hangs never holds up a shard.

// noTopologyPluginMessage is Kafka's answer to a push when no plugin is configured.
const noTopologyPluginMessage = "The broker has no streams group topology description plugin configured."

// deleteDescriptionFailedMessage is the fixed DeleteGroups v3 ErrorMessage when the plugin's
// delete fails; the plugin's own message only reaches the log (spec §4 step 6).
const deleteDescriptionFailedMessage = "Topology description plugin failed to delete the topology."

// TopologyDescriptionStatus values of StreamsGroupDescribe v1 (spec §0.2).
const (
	topologyDescriptionNotRequested = 0
	topologyDescriptionNotStored    = 1
	topologyDescriptionError        = 2
	topologyDescriptionAvailable    = 3
)

// authorizeGroupRead is the READ-on-GROUP check of spec §3.1 step 3.
func (t *Table) authorizeGroupRead(_ context.Context, r *wire.Request, group string) bool {
	return t.groupAllowed(r, group, acl.OpRead)
}

func (t *Table) streamsGroupTopologyDescriptionUpdate(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.StreamsGroupTopologyDescriptionUpdateRequest)
	resp := req.ResponseKind().(*kmsg.StreamsGroupTopologyDescriptionUpdateResponse)
	resp.ErrorCode, resp.ErrorMessage = t.pushTopologyDescription(ctx, r, req)
	return resp
}

func errMsg(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// pushTopologyDescription runs the checks of spec §3.1 in order, then the barrier, the plugin
// set and the outcome record.
func (t *Table) pushTopologyDescription(ctx context.Context, r *wire.Request, req *kmsg.StreamsGroupTopologyDescriptionUpdateRequest) (int16, *string) {
	if !t.authorizeGroupRead(ctx, r, req.Group) {
		return kerr.GroupAuthorizationFailed.Code, nil
	}
	caller := t.deps.Topology
	if !caller.Enabled() {
		return kerr.UnsupportedVersion.Code, errMsg(noTopologyPluginMessage)
	}
	switch {
	case req.MemberID == "":
		return kerr.InvalidRequest.Code, errMsg("MemberId can't be empty.")
	case req.Group == "":
		return kerr.InvalidRequest.Code, errMsg("GroupId can't be empty.")
	}
	sh := t.deps.Groups.For(req.Group)
	v, err := sh.Read(ctx, shard.StreamsDescriptionCheck(req.Group, req.MemberID, req.TopologyEpoch))
	if err != nil {
		return availabilityCode(err), nil
	}
	if chk := v.(shard.DescriptionCheck); chk.Code != 0 {
		return chk.Code, errMsg(chk.Message)
	}
	d := DescriptionFromWire(&req.TopologyDescription)
	if err := d.Validate(); err != nil {
		return kerr.InvalidRequest.Code, errMsg(err.Error())
	}
	// Step 14: the durable barrier; a group gone since the check is not sent to the plugin.
	v, err = sh.Write(ctx, shard.StreamsDescriptionBarrier([]string{req.Group}, false))
	if err != nil {
		return availabilityCode(err), nil
	}
	if len(v.([]string)) == 0 {
		return kerr.GroupIDNotFound.Code, errMsg("Group " + req.Group + " not found.")
	}
	// The barrier may have taken a real epoch away (a redundant push); whatever the outcome,
	// the stored-groups gauge is recounted from the shard's durable state afterwards.
	defer t.RecountStoredDescriptions(context.WithoutCancel(ctx), sh)
	group, epoch := req.Group, req.TopologyEpoch
	setErr := caller.Set(ctx, group, epoch, d) // a transient failure has extended the back-off
	var op runtime.WriteOp[*shard.Machine]
	switch {
	case setErr == nil:
		op = shard.StreamsDescriptionStored(group, epoch)
	case topologyplugin.IsPermanent(setErr):
		op = shard.StreamsDescriptionRejected(group, epoch)
	default:
		t.log.Info("topology description plugin set failed (transient)", zap.String("group", group), zap.Int32("topology_epoch", epoch), zap.Error(setErr))
		return kerr.StreamsTopologyDescriptionUpdateFailed.Code, errMsg(plugin.ClientMessage(setErr))
	}
	v, err = sh.Write(ctx, op)
	switch {
	case err != nil:
		code := availabilityCode(err)
		if code != kerr.NotCoordinator.Code && code != kerr.CoordinatorLoadInProgress.Code && code != kerr.CoordinatorNotAvailable.Code {
			caller.Backoff().Extend(group, epoch)
		}
		return code, nil
	case !v.(bool):
		if setErr == nil {
			t.releaseOrphanedDescription(context.WithoutCancel(ctx), sh, group)
		}
		caller.Backoff().ClearGroup(group)
		return kerr.GroupIDNotFound.Code, errMsg("Group " + group + " not found.")
	}
	caller.Backoff().Clear(group, epoch)
	if setErr != nil {
		t.log.Info("topology description rejected permanently by the plugin", zap.String("group", group), zap.Int32("topology_epoch", epoch), zap.Error(setErr))
		return kerr.StreamsTopologyDescriptionUpdateFailed.Code, errMsg(plugin.ClientMessage(setErr))
	}
	return 0, nil
}

// releaseOrphanedDescription runs when a plugin set succeeded for a group that was removed
// while the set was in flight (the member left, the cleanup cycle deleted the description and
// finalized NONE, the offsets sweep or DeleteGroups tombstoned the group; spec §6.5): no group
// is left to be cleaned up later, so the description just stored would stay in the plugin
// forever. Delete it now. Should a group with the same id have been created meanwhile, it is
// afterwards marked UNCERTAIN, so it never claims an epoch this delete may have removed: it is
// re-solicited if it lives on, and reclaimed by the cleanup if it is idle.
func (t *Table) releaseOrphanedDescription(ctx context.Context, sh *runtime.Shard[*shard.Machine], group string) {
	if err := t.deps.Topology.Delete(ctx, group); err != nil {
		t.log.Warn("topology description stored for a group removed meanwhile could not be deleted; it stays in the plugin",
			zap.String("group", group), zap.Error(err))
		return
	}
	if _, err := sh.Write(ctx, shard.StreamsDescriptionBarrier([]string{group}, false)); err != nil {
		t.log.Warn("marking a re-created group after an orphan delete failed", zap.String("group", group), zap.Error(err))
	}
}

// lateDescriptionSetTimeout bounds the bookkeeping after a late plugin set (shard ops and the
// plugin delete, which has its own call timeout too).
const lateDescriptionSetTimeout = time.Minute

// lateDescriptionSet runs when a plugin set succeeded after its push had stopped waiting for it
// (call timeout): the push answered 135 and recorded no outcome, so its barrier left the group
// UNCERTAIN, and a DeleteGroups or cleanup may have deleted the group's description meanwhile,
// before this set landed, and released or removed the group. If the group is gone or holds
// nothing (NONE), no cleanup will ever delete the description now stored: delete it, as for a
// push whose group vanished (releaseOrphanedDescription). An UNCERTAIN group is still released
// by a later delete or cleanup; a group with a real epoch holds this epoch or a newer one,
// which the plugin keeps over this older set.
func (t *Table) lateDescriptionSet(group string, epoch int32) {
	ctx, cancel := context.WithTimeout(context.Background(), lateDescriptionSetTimeout)
	defer cancel()
	sh := t.deps.Groups.For(group)
	v, err := sh.Read(ctx, shard.StreamsDescriptionEpochsOf(group))
	if err != nil {
		t.log.Warn("a topology description stored after its push timed out could not be checked; it may stay in the plugin",
			zap.String("group", group), zap.Int32("topology_epoch", epoch), zap.Error(err))
		return
	}
	if d, ok := v.(streams.DescriptionEpochs); ok && d.Stored != streams.DescriptionNone {
		return
	}
	t.log.Info("a topology description stored after its push timed out belongs to a group released meanwhile; deleting it",
		zap.String("group", group), zap.Int32("topology_epoch", epoch))
	t.releaseOrphanedDescription(ctx, sh, group)
	t.RecountStoredDescriptions(ctx, sh)
}

// DescriptionFromWire converts a pushed description to the plugin form, canonicalised as
// Kafka's model reads it (spec §5): duplicates within a list are dropped, and only the fields
// of a node's type are kept, so what plugins store is what describe returns.
func DescriptionFromWire(w *kmsg.TopologyDescription) *topologyplugin.Description {
	d := &topologyplugin.Description{}
	for _, s := range w.Subtopologies {
		st := topologyplugin.Subtopology{ID: s.SubtopologyID}
		for _, n := range s.Nodes {
			st.Nodes = append(st.Nodes, nodeFromWire(n))
		}
		d.Subtopologies = append(d.Subtopologies, st)
	}
	for _, g := range w.GlobalStores {
		d.GlobalStores = append(d.GlobalStores, topologyplugin.GlobalStore{Source: nodeFromWire(g.Source), Processor: nodeFromWire(g.Processor)})
	}
	return d
}

func nodeFromWire(n kmsg.TopologyDescriptionNode) topologyplugin.Node {
	out := topologyplugin.Node{Name: n.Name, Type: topologyplugin.NodeType(n.NodeType), Successors: dedupStrings(n.Successors)}
	switch out.Type {
	case topologyplugin.NodeSource:
		out.SourceTopics = dedupStrings(n.SourceTopics)
	case topologyplugin.NodeProcessor:
		out.Stores = dedupStrings(n.Stores)
	case topologyplugin.NodeSink:
		if n.SinkTopic != nil {
			s := *n.SinkTopic
			out.SinkTopic = &s
		}
	default: // rejected by Validate; keep what came for the error message
		out.SourceTopics, out.Stores, out.SinkTopic = n.SourceTopics, n.Stores, n.SinkTopic
	}
	return out
}

func dedupStrings(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// DescriptionToWire converts a plugin description to StreamsGroupDescribe v1's form.
func DescriptionToWire(d *topologyplugin.Description) *kmsg.StreamsGroupDescribeResponseGroupTopologyDescription {
	out := kmsg.NewStreamsGroupDescribeResponseGroupTopologyDescription()
	out.Subtopologies = []kmsg.TopologyDescriptionSubtopology{}
	out.GlobalStores = []kmsg.TopologyDescriptionGlobalStore{}
	for _, s := range d.Subtopologies {
		st := kmsg.NewTopologyDescriptionSubtopology()
		st.SubtopologyID = s.ID
		st.Nodes = []kmsg.TopologyDescriptionNode{}
		for _, n := range s.Nodes {
			st.Nodes = append(st.Nodes, nodeToWire(n))
		}
		out.Subtopologies = append(out.Subtopologies, st)
	}
	for _, g := range d.GlobalStores {
		gs := kmsg.NewTopologyDescriptionGlobalStore()
		gs.Source, gs.Processor = nodeToWire(g.Source), nodeToWire(g.Processor)
		out.GlobalStores = append(out.GlobalStores, gs)
	}
	return &out
}

func nodeToWire(n topologyplugin.Node) kmsg.TopologyDescriptionNode {
	w := kmsg.NewTopologyDescriptionNode()
	w.Name, w.NodeType = n.Name, int8(n.Type)
	w.SourceTopics, w.Stores, w.Successors = []string{}, []string{}, dedupStrings(n.Successors)
	switch n.Type {
	case topologyplugin.NodeSource:
		w.SourceTopics = dedupStrings(n.SourceTopics)
	case topologyplugin.NodeProcessor:
		w.Stores = dedupStrings(n.Stores)
	case topologyplugin.NodeSink:
		w.SinkTopic = n.SinkTopic
	}
	return w
}

// deleteTopologyDescriptions releases the plugin's descriptions of groups about to be deleted
// (DeleteGroups, spec §4 steps 4-5; cleanup, §6.3 steps 2-4): per shard a barrier that keeps
// only groups that are still empty streams groups, the plugin deletes of all shards
// concurrently, then per shard one finalize write for the successes. It returns the groups
// whose delete failed (they keep stored = UNCERTAIN) and, for barrier failures, the error of
// each affected group.
func (t *Table) deleteTopologyDescriptions(ctx context.Context, groups []string) (failed map[string]error, barrierErr map[string]error) {
	failed, barrierErr = map[string]error{}, map[string]error{}
	caller := t.deps.Topology
	if !caller.Enabled() || len(groups) == 0 {
		return failed, barrierErr
	}
	byShard := map[*runtime.Shard[*shard.Machine]][]string{}
	var order []*runtime.Shard[*shard.Machine]
	for _, g := range groups {
		sh := t.deps.Groups.For(g)
		if _, ok := byShard[sh]; !ok {
			order = append(order, sh)
		}
		byShard[sh] = append(byShard[sh], g)
	}
	defer t.RecountStoredDescriptions(context.WithoutCancel(ctx), order...)
	var marked []string
	for _, sh := range order {
		v, err := sh.Write(ctx, shard.StreamsDescriptionBarrier(byShard[sh], true))
		if err != nil {
			for _, g := range byShard[sh] {
				barrierErr[g] = err
			}
			continue
		}
		marked = append(marked, v.([]string)...)
	}
	errs := caller.DeleteMany(ctx, marked) // success clears each group's back-off entry
	ok := map[*runtime.Shard[*shard.Machine]][]string{}
	for i, g := range marked {
		if errs[i] != nil {
			failed[g] = errs[i]
			t.log.Warn("topology description plugin failed to delete a group's description", zap.String("group", g), zap.Error(errs[i]))
			continue
		}
		sh := t.deps.Groups.For(g)
		ok[sh] = append(ok[sh], g)
	}
	for sh, gs := range ok {
		if _, err := sh.Write(ctx, shard.StreamsDescriptionFinalize(gs)); err != nil {
			t.log.Warn("recording topology description deletes failed; the cleanup cycle retries", zap.Strings("groups", gs), zap.Error(err))
		}
	}
	return failed, barrierErr
}

// TopologyCleanup is one cycle of the periodic cleanup of idle streams groups' descriptions
// (spec §6): per shard a committed-state scan for eligible groups, then barrier, plugin delete
// and finalize. The offsets sweep tombstones a group once its stored epoch is NONE. It returns
// how many groups were eligible.
func (t *Table) TopologyCleanup(ctx context.Context) int {
	caller := t.deps.Topology
	if !caller.Enabled() {
		return 0
	}
	caller.Metrics().CleanupCycle()
	// Recount every shard: groups also leave by routes that never call the plugin.
	t.RecountStoredDescriptions(ctx)
	t.pruneBackoff(ctx)
	var eligible []string
	for i := int32(0); i < t.deps.Groups.Count(); i++ {
		if ctx.Err() != nil {
			return len(eligible)
		}
		v, err := t.deps.Groups.Shard(i).Read(ctx, shard.StreamsDescriptionCleanupCandidates())
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.log.Debug("topology description cleanup skipped a shard", zap.Int32("shard", i), zap.Error(err))
			}
			continue
		}
		eligible = append(eligible, v.([]string)...)
	}
	if len(eligible) == 0 {
		return 0
	}
	caller.Metrics().CleanupEligible(len(eligible))
	_, barrierErr := t.deleteTopologyDescriptions(ctx, eligible)
	for g, err := range barrierErr {
		t.log.Warn("topology description cleanup could not mark a group; retried next cycle", zap.String("group", g), zap.Error(err))
	}
	return len(eligible)
}

// pruneBackoff drops the solicitation back-off entries of groups that no longer exist: groups
// removed by routes that never touch the plugin (members expired, then the offsets sweep
// tombstoned the group; classic conversion of a group that held nothing) would otherwise keep
// their entry until the back-off's own lazy prune, up to backoff.max.ms after their window
// ended. A group created again with the same id meanwhile only loses its window: it starts
// from scratch, as a new group should. It runs once per cleanup cycle.
func (t *Table) pruneBackoff(ctx context.Context) {
	b := t.deps.Topology.Backoff()
	byShard := map[*runtime.Shard[*shard.Machine]][]string{}
	for _, g := range b.Groups() {
		sh := t.deps.Groups.For(g)
		byShard[sh] = append(byShard[sh], g)
	}
	for sh, groups := range byShard {
		v, err := sh.Read(ctx, shard.StreamsGroupsAbsent(groups))
		if err != nil {
			continue // a loading or failed shard: next cycle
		}
		for _, g := range v.([]string) {
			b.ClearGroup(g)
		}
	}
}

// preDeleteTopologyDescriptions is DeleteGroups' plugin step (spec topology-description §4):
// for the requested ids that are empty streams groups with a description the plugin may hold,
// the plugin delete runs before the tombstones. It answers the groups that must not be
// deleted: plugin failures (GROUP_DELETION_FAILED with the fixed message in v3, -1 before, as
// older versions do not know code 134) and groups of a shard whose state could not be read.
// Other groups, on this shard or others, are unaffected.
func (t *Table) preDeleteTopologyDescriptions(ctx context.Context, version int16, ids []string) map[string]kmsg.DeleteGroupsResponseGroup {
	out := map[string]kmsg.DeleteGroupsResponseGroup{}
	if !t.deps.Topology.Enabled() {
		return out
	}
	answer := func(id string, code int16, msg string) {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group, g.ErrorCode = id, code
		if version >= 3 {
			g.ErrorMessage = errMsg(msg)
		}
		out[id] = g
	}
	byShard := map[*runtime.Shard[*shard.Machine]][]string{}
	var order []*runtime.Shard[*shard.Machine]
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		sh := t.deps.Groups.For(id)
		if _, ok := byShard[sh]; !ok {
			order = append(order, sh)
		}
		byShard[sh] = append(byShard[sh], id)
	}
	var held []string
	for _, sh := range order {
		v, err := sh.Read(ctx, shard.StreamsDescriptionDeletable(byShard[sh]))
		if err != nil {
			for _, id := range byShard[sh] {
				answer(id, availabilityCode(err), "")
			}
			continue
		}
		held = append(held, v.([]string)...)
	}
	failed, barrierErr := t.deleteTopologyDescriptions(ctx, held)
	for id, err := range barrierErr {
		answer(id, availabilityCode(err), "")
	}
	for id := range failed {
		if version >= 3 {
			answer(id, kerr.GroupDeletionFailed.Code, deleteDescriptionFailedMessage)
		} else {
			answer(id, kerr.UnknownServerError.Code, "")
		}
	}
	return out
}

// RecountStoredDescriptions sets the stored-groups gauge (groups whose stored epoch is real,
// spec §7.4) from the durable state of the given shards, or of every shard when none is
// given: each shard counts its groups and reports on its own goroutine, so the gauge is the
// sum of each shard's latest durable count, whatever order concurrent recounts finish in. It
// answers whether every shard asked could count (a loading shard cannot).
func (t *Table) RecountStoredDescriptions(ctx context.Context, only ...*runtime.Shard[*shard.Machine]) bool {
	caller := t.deps.Topology
	if !caller.Enabled() {
		return true
	}
	all := true
	for i := int32(0); i < t.deps.Groups.Count(); i++ {
		sh := t.deps.Groups.Shard(i)
		if len(only) > 0 && !slices.Contains(only, sh) {
			continue
		}
		report := func(n int) { caller.Metrics().SetShardStoredGroups(i, n) }
		if _, err := sh.Read(ctx, shard.StreamsStoredDescriptionCount(report)); err != nil {
			all = false
		}
	}
	return all
}
