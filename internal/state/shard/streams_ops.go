package shard

import (
	"maps"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Streams group operations (spec streams-groups): the state machine in internal/state/streams
// computes records, responses and timer actions; these ops arm the timers on the shard.

// StreamsHeartbeat runs a StreamsGroupHeartbeat that passed streams.ValidateRequest. The
// response is a streams.HeartbeatOutput.
func StreamsHeartbeat(in streams.HeartbeatInput) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		in.Now, in.Scheduled, in.Foreign, in.Classic = c.Now(), c.Scheduled, m.streamsForeign, m.classicView
		// The group's overrides apply from its next heartbeat on: a changed standby count
		// changes the assignment configs, which bumps the group epoch (Kafka does the same).
		in.Config = m.streamsConfigFor(in.Req.Group, in.Config)
		out := m.Streams.Heartbeat(in)
		if u := out.Upgrade; u != nil {
			ev := MigrationEvent{Group: in.Req.Group, Protocol: MigrationStreams, Direction: MigrationUpgrade, Result: MigrationRefused, Reason: u.Refused, Generation: u.Generation, Members: u.ClassicMembers}
			if u.Converted {
				ev.Result = MigrationConverted
				m.retireClassicGroup(c, in.Req.Group)
			}
			m.observeMigration(c, ev)
		}
		applyStreamsTimers(c, out.Timers, in.Config)
		out.Records = m.finishDowngrade(c, in.Req.Group, out.Downgrade, out.Records)
		if len(out.Records) == 0 {
			// A steady heartbeat only moves the member's session deadline (a timer, never a
			// record): its answer waits for its own group's pending writes, not the shard's.
			groupReads(c, in.Req.Group)
			if steadyStreamsAnswer(in, out, c.Now().UnixMilli()) && m.Streams.Steady(in.Req.Group, in.Req.MemberID) {
				// Nothing changed and nothing but the session deadline moved: the same request
				// gets the same answer until another operation runs on this shard, other than
				// one scoped to another group (the ticket is taken for this group's scope).
				out.Ticket, out.Session = c.Ticket(out.Timers[0].Key(), in.Req.Group), out.Timers[0].After
			}
		}
		return runtime.Result{Records: out.Records, Response: out}
	}
}

// StreamsDescribe describes streams groups (spec §9). It is a write op without records so that
// it sees the groups' soft state (reported task offsets) yet answers only once everything it
// read is durable.
func StreamsDescribe(groups []string, includeOps bool, cat streams.Catalog, cfg streams.Config) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		out := make([]kmsg.StreamsGroupDescribeResponseGroup, len(groups))
		for i, g := range groups {
			owned, _, _ := m.streamsForeign(g)
			out[i] = m.Streams.Describe(g, includeOps, cat, m.streamsConfigFor(g, cfg), owned)
		}
		return runtime.Result{Response: out}
	}
}

// StreamsDeleteGroup is DeleteGroups for a streams group (spec §11.3, §10.3): owned is false
// when no streams group has the id; otherwise code is the group's result and recs the
// tombstones (committed offsets first) to append. Call CancelStreamsGroupTimers after it.
func (m *Machine) StreamsDeleteGroup(group string) (owned bool, code int16, recs []log.Record) {
	owned, code, d := m.streamsDelete(group)
	return owned, code, d.recs
}

// streamsDelete is StreamsDeleteGroup with the records' units (see divisible).
func (m *Machine) streamsDelete(group string) (owned bool, code int16, d divisible) {
	if !m.Streams.Owns(group) {
		return false, 0, d
	}
	code, tombs := m.Streams.DeleteGroup(group)
	if code != 0 {
		return true, code, d
	}
	d.each(m.Offsets.DeleteGroupRecords(group)...)
	d.whole(tombs...)
	return true, 0, d
}

// CancelStreamsGroupTimers cancels a deleted group's initial-delay timer.
func CancelStreamsGroupTimers(c *runtime.Ctx[*Machine], group string) {
	c.Cancel(streams.TimerKey(streams.InitialDelayTimer, group, ""))
}

// StreamsListed returns the ListGroups state string of a streams group (spec §11.1: protocol
// type and group type "streams"), or "" when no streams group has the id.
func (m *Machine) StreamsListed(group string) string { return m.Streams.ListedState(group) }

// StreamsGroups lists the shard's streams group ids.
func (m *Machine) StreamsGroups() []string {
	out := make([]string, 0, len(m.Streams.Groups))
	for id := range m.Streams.Groups {
		out = append(out, id)
	}
	return out
}

// StreamsOnLoaded re-arms the streams timers of a freshly loaded shard (spec §4.6).
func StreamsOnLoaded(c *runtime.Ctx[*Machine], m *Machine, cfg streams.Config) {
	for _, a := range m.Streams.LoadedTimers(func(group string) streams.Config { return m.streamsConfigFor(group, cfg) }) {
		applyStreamsTimers(c, []streams.TimerAction{a}, m.streamsConfigFor(a.Group, cfg))
	}
	// A streams group left with classic members only gets its downgrade re-checked
	// (online-migration §7.7): a refusal's cause (policy, plugin) may be gone.
	for _, group := range m.Streams.AllClassic() {
		c.Schedule("streams-downgrade-check\x00"+group, 0, func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
			gcfg := m.streamsConfigFor(group, cfg)
			recs, timers, dg := m.Streams.DowngradeCheck(group, gcfg.DowngradeSettings(nil, c.Now()))
			applyStreamsTimers(c, timers, gcfg)
			return runtime.Result{Records: m.finishDowngrade(c, group, dg, recs)}
		})
	}
}

// streamsForeign reports whether another group type owns a group id, whether that group is an
// empty classic group a streams join converts, and the records deleting it (spec §2.6).
func (m *Machine) streamsForeign(group string) (owned, convertible bool, tombstones []log.Record) {
	if m.Consumer != nil && m.Consumer.Owns(group) {
		return true, false, nil // Kafka converts only classic groups into streams groups
	}
	g := m.Classic.Group(group)
	if g == nil || g.State == classic.Dead {
		return false, false, nil
	}
	if g.State == classic.Empty && len(g.Members) == 0 {
		return true, true, []log.Record{classic.DeleteRecord(group)}
	}
	return true, false, nil
}

func (m *Machine) validateStreamsCommit(r CommitRequest) (int16, bool) {
	if m.Streams.Groups[r.Group] == nil {
		return 0, false // not a streams group: no copy of the partitions to find that out
	}
	parts := make([]streams.CommitPartition, len(r.Partitions))
	for i, p := range r.Partitions {
		parts[i] = streams.CommitPartition{Topic: p.Topic, Partition: p.Partition}
	}
	return m.Streams.ValidateCommit(r.Group, r.MemberID, r.InstanceID, r.Generation, r.Version, r.Transactional, parts)
}

func applyStreamsTimers(c *runtime.Ctx[*Machine], actions []streams.TimerAction, cfg streams.Config) {
	for _, a := range actions {
		key := a.Key()
		if a.Cancel {
			c.Cancel(key)
			continue
		}
		switch a.Kind {
		case streams.SessionTimer:
			c.Schedule(key, a.After, streamsFence(a.Group, a.Member, 0, false, cfg))
		case streams.RebalanceTimer:
			c.Schedule(key, a.After, streamsFence(a.Group, a.Member, a.Epoch, true, cfg))
		case streams.ClassicSessionTimer, streams.ClassicJoinTimer, streams.ClassicSyncTimer:
			group, member := a.Group, a.Member
			c.Schedule(key, a.After, func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
				cfg := m.streamsConfigFor(group, m.streamsBase())
				recs, timers, dg := m.Streams.ClassicFence(group, member, cfg.DowngradeSettings(nil, c.Now()))
				applyStreamsTimers(c, timers, cfg)
				return runtime.Result{Records: m.finishDowngrade(c, group, dg, recs)}
			})
		case streams.InitialDelayTimer:
			group, cat := a.Group, a.Catalog
			c.Schedule(key, a.After, func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
				return runtime.Result{Records: m.Streams.InitialDelayExpired(group, cat, cfg, c.Now())}
			})
		}
	}
}

// streamsFence is a session or rebalance timer's expiry.
func streamsFence(group, member string, epoch int32, checkEpoch bool, cfg streams.Config) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		gcfg := m.streamsConfigFor(group, cfg)
		recs, timers, dg := m.Streams.FenceWith(group, member, epoch, checkEpoch, gcfg.DowngradeSettings(nil, c.Now()))
		applyStreamsTimers(c, timers, cfg)
		return runtime.Result{Records: m.finishDowngrade(c, group, dg, recs)}
	}
}

// ListStreamsGroups lists the streams groups of a shard from durable state for ListGroups
// (spec §11.1): protocol type and group type "streams", the state string of §4.3. Filters are
// case-insensitive; the state filter names are §4.3's (not_ready).
func ListStreamsGroups(states, types []string) runtime.ReadOp[*Machine] {
	match := matchListFilter
	return func(m *Machine) (any, error) {
		var out []GroupListing
		for _, id := range m.StreamsGroups() {
			st := m.Streams.ListedState(id)
			if match(states, streams.ListedStateFilter(st)) && match(types, "streams") {
				out = append(out, GroupListing{ID: id, ProtocolType: "streams", State: st, Type: "streams"})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, nil
	}
}

// IsStreamsGroup reports whether a streams group has the id (DescribeGroups answers it with
// "Group <g> is not a classic group.", spec §11.2).
func IsStreamsGroup(group string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) { return m.Streams.Owns(group), nil }
}

// DeleteStreamsGroup is DeleteGroups for a group id DeleteClassicGroup left to another type:
// an Empty streams group is deleted with its offsets (spec §11.3, §10.3); NON_EMPTY_GROUP
// otherwise; GROUP_ID_NOT_FOUND when no streams group has the id.
func DeleteStreamsGroup(group string) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		owned, code, d := m.streamsDelete(group)
		if !owned {
			return runtime.Result{Response: kerr.GroupIDNotFound.Code}
		}
		if code == 0 {
			CancelStreamsGroupTimers(c, group)
		}
		return runtime.Result{Records: d.recs, Units: d.units, Response: code}
	}
}

// streamsOffsetRules tells the offsets code about a streams group (spec §11.4): OffsetDelete
// refuses partitions of source topics while the group has members, and offsets expire (by
// commit time) only while it is Empty; an Empty group without offsets is deleted by the sweep.
func (m *Machine) streamsOffsetRules(groupID string) (OffsetRules, bool) {
	if !m.Streams.Owns(groupID) {
		return OffsetRules{}, false
	}
	empty := m.Streams.IsEmpty(groupID)
	r := OffsetRules{Empty: empty, Subscribed: func(topic string) bool { return m.Streams.Subscribed(groupID, topic) }}
	if empty {
		r.ExpireBase = commitTimeBase
		// With a topology description plugin, a group whose description may still be held by
		// the plugin is pinned until the cleanup cycle has deleted it (topology-description §6.4).
		if !m.PinTopologyDescriptions || !m.Streams.DescriptionHeld(groupID) {
			r.DeleteRecords = func() []log.Record { return m.Streams.Tombstones(groupID) }
		}
	}
	return r, true
}

// ValidateStreamsFetch checks an OffsetFetch's member id and epoch against a streams group
// (spec §11.5); it answers 0 for ids no streams group has.
func ValidateStreamsFetch(group string, member *string, epoch int32) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		code, _ := m.Streams.ValidateFetch(group, member, epoch)
		return code, nil
	}
}

// StreamsConversion serves a classic JoinGroup on a streams group id (spec §11.2): owned
// reports whether a streams group has the id; when it is Empty, recs are its tombstones in the
// §10.3 order (committed offsets are kept: a conversion never touches them) and its timers
// are cancelled, so the caller can prepend recs to the new classic group's records. A
// non-empty one is INCONSISTENT_GROUP_PROTOCOL for the caller.
func (m *Machine) StreamsConversion(c *runtime.Ctx[*Machine], group string) (owned, empty bool, recs []log.Record) {
	if !m.Streams.Owns(group) {
		return false, false, nil
	}
	if !m.Streams.IsEmpty(group) {
		return true, false, nil
	}
	CancelStreamsGroupTimers(c, group)
	return true, true, m.Streams.Tombstones(group)
}

// Topology description (KIP-1331, spec topology-description; ARCHITECTURE §4.10). The shard
// only does bookkeeping: plugin calls run in the request goroutine or the cleanup goroutine,
// between these ops, never on the shard.

// DescriptionCheck is the answer of StreamsDescriptionCheck: 0 or an error code and message.
type DescriptionCheck struct {
	Code    int16
	Message string
}

// StreamsDescriptionCheck validates a StreamsGroupTopologyDescriptionUpdate against committed
// state (spec §3.1 steps 10-12).
func StreamsDescriptionCheck(group, member string, epoch int32) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		code, msg := m.Streams.CheckDescriptionPush(group, member, epoch)
		return DescriptionCheck{Code: code, Message: msg}, nil
	}
}

// StreamsDescriptionBarrier writes stored := UNCERTAIN for the groups that are still streams
// groups (and still empty with requireEmpty) and answers their ids ([]string).
func StreamsDescriptionBarrier(groups []string, requireEmpty bool) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		recs, kept := m.Streams.MarkDescriptionUncertain(groups, requireEmpty)
		return runtime.Result{Records: recs, Response: kept}
	}
}

// StreamsDescriptionStored records a successful plugin set; the answer (bool) is false when
// the group is gone.
func StreamsDescriptionStored(group string, epoch int32) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		recs, found := m.Streams.DescriptionStored(group, epoch)
		return runtime.Result{Records: recs, Response: found}
	}
}

// StreamsDescriptionRejected records a permanent plugin rejection; the answer (bool) is false
// when the group is gone.
func StreamsDescriptionRejected(group string, epoch int32) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		recs, found := m.Streams.DescriptionRejected(group, epoch)
		return runtime.Result{Records: recs, Response: found}
	}
}

// StreamsDescriptionFinalize follows successful plugin deletes (UNCERTAIN → NONE, a raced
// real epoch → UNCERTAIN).
func StreamsDescriptionFinalize(groups []string) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		return runtime.Result{Records: m.Streams.FinalizeDescriptionDelete(groups)}
	}
}

// StreamsDescriptionLost resets to UNCERTAIN the stored epoch of each group that still claims
// the epoch the plugin was found not to hold (group → epoch), so that a member is asked to push
// again (streams.State.DescriptionLost). It answers how many groups were reset (int).
func StreamsDescriptionLost(lost map[string]int32) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		recs := m.Streams.DescriptionLost(lost)
		return runtime.Result{Records: recs, Response: len(recs)}
	}
}

// volatileDescriptionsTimer runs ForgetVolatileDescriptions' reset right after a load.
const volatileDescriptionsTimer = "topology-description-volatile"

// volatileResetBatch bounds the groups one reset op rewrites, so that its batch stays far below
// the log's batch limit whatever the number of groups; the op continues with the rest at once.
const volatileResetBatch = 500

// ForgetVolatileDescriptions is called from OnLoaded when the topology description plugin
// declared itself volatile (topologyplugin.Volatile): the plugin started empty with this
// process, whatever the log says it holds, so every group with a real stored epoch is reset
// to UNCERTAIN (StreamsDescriptionLost) and its members are asked to push again. It runs until
// the reset is durable, once per process and shard: done is set then, and a later reload of the
// shard, when the plugin may hold newer pushes, skips it.
func ForgetVolatileDescriptions(c *runtime.Ctx[*Machine], done *atomic.Bool, lg *zap.Logger) {
	if done.Load() {
		return
	}
	total := 0
	var step runtime.WriteOp[*Machine]
	step = func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		stored := m.Streams.StoredDescriptionEpochs()
		more := len(stored) > volatileResetBatch
		if more {
			ids := slices.Sorted(maps.Keys(stored))
			for _, id := range ids[volatileResetBatch:] {
				delete(stored, id)
			}
		}
		recs, shardID := m.Streams.DescriptionLost(stored), c.ShardID()
		total += len(recs)
		if more {
			c.Schedule(volatileDescriptionsTimer, 0, step)
			return runtime.Result{Records: recs}
		}
		c.AfterDurable(func() {
			done.Store(true)
			if total > 0 && lg != nil {
				lg.Info("topology description plugin is volatile: stored descriptions were lost with the restart; members will be asked to push them again",
					zap.Int32("shard", shardID), zap.Int("groups", total))
			}
		})
		return runtime.Result{Records: recs}
	}
	c.Schedule(volatileDescriptionsTimer, 0, step)
}

// StreamsGroupsAbsent lists, from durable state, which of the ids no streams group has.
func StreamsGroupsAbsent(groups []string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		var out []string
		for _, id := range groups {
			if !m.Streams.Owns(id) {
				out = append(out, id)
			}
		}
		return out, nil
	}
}

// StreamsDescriptionDeletable lists, from committed state, which of the ids are empty streams
// groups whose plugin description must be deleted before their tombstone (spec §4 step 2;
// non-empty groups are skipped: they fail with NON_EMPTY_GROUP anyway).
func StreamsDescriptionDeletable(groups []string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		var out []string
		for _, id := range groups {
			if m.Streams.DescriptionHeld(id) && m.Streams.IsEmpty(id) {
				out = append(out, id)
			}
		}
		return out, nil
	}
}

// StreamsDescriptionCleanupCandidates lists the shard's streams groups eligible for the
// periodic cleanup (spec §6.2): empty, stored ≠ NONE, no committed or pending offsets left.
func StreamsDescriptionCleanupCandidates() runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		var out []string
		for _, id := range m.StreamsGroups() {
			if m.Streams.DescriptionHeld(id) && m.Streams.IsEmpty(id) && !m.Offsets.HasGroup(id) {
				out = append(out, id)
			}
		}
		sort.Strings(out)
		return out, nil
	}
}

// StreamsDescribed is one group of StreamsDescribeWithEpochs.
type StreamsDescribed struct {
	Group  kmsg.StreamsGroupDescribeResponseGroup
	Epochs streams.DescriptionEpochs
	Found  bool
}

// StreamsDescribeWithEpochs is StreamsDescribe plus each group's topology description epochs
// (StreamsGroupDescribe v1 with IncludeTopologyDescription, spec §5).
func StreamsDescribeWithEpochs(groups []string, includeOps bool, cat streams.Catalog, cfg streams.Config) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		out := make([]StreamsDescribed, len(groups))
		for i, g := range groups {
			owned, _, _ := m.streamsForeign(g)
			out[i].Group = m.Streams.Describe(g, includeOps, cat, m.streamsConfigFor(g, cfg), owned)
			out[i].Epochs, out[i].Found = m.Streams.DescriptionEpochs(g)
		}
		return runtime.Result{Response: out}
	}
}

// StreamsStoredDescriptionCount counts, on durable state, the streams groups whose stored
// description epoch is real, hands the count to report on the shard goroutine (so a shard's
// reports are ordered like its states) and answers it (int).
func StreamsStoredDescriptionCount(report func(n int)) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		n := m.Streams.StoredDescriptionCount()
		if report != nil {
			report(n)
		}
		return n, nil
	}
}

// StreamsDescriptionEpochsOf reads a group's topology description epochs from durable state
// (streams.DescriptionEpochs, or nil when no streams group has the id).
func StreamsDescriptionEpochsOf(group string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		if d, ok := m.Streams.DescriptionEpochs(group); ok {
			return d, nil
		}
		return nil, nil
	}
}

// StreamsTopologyAdopts reports (bool) whether a heartbeat carrying topology t would configure
// the group with it: no such group, a group without a topology, or one whose topology is t.
func StreamsTopologyAdopts(group string, t *streams.Topology) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		g := m.Streams.Groups[group]
		return g == nil || g.Topology == nil || g.Topology.Equal(t), nil
	}
}

// StreamsDescriptionToRelease reports (bool) whether a classic JoinGroup must have the plugin
// delete the group's topology description before converting it: an empty streams group whose
// stored epoch is not NONE.
func StreamsDescriptionToRelease(group string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		return m.Streams.Owns(group) && m.Streams.IsEmpty(group) && m.Streams.DescriptionHeld(group), nil
	}
}

// steadyStreamsAnswer reports whether a heartbeat's answer stays the same for the same request
// while nothing else runs on the shard: a steady request answered without an error, tasks,
// statuses or endpoints, with only the session timer moved, nothing to create, no migration.
// The shorter reconciliation interval is answered for a while after each assignment, so time
// alone changes it: such an answer is repeated only until then (out.ShortIntervalUntil, later
// than now); the plain interval, once answered, stays until some operation changes the group.
func steadyStreamsAnswer(in streams.HeartbeatInput, out streams.HeartbeatOutput, now int64) bool {
	r := out.Response
	return streams.SteadyRequest(in.Req) && out.Upgrade == nil && out.Downgrade == nil && len(out.ToCreate) == 0 &&
		r.ErrorCode == 0 && r.ActiveTasks == nil && r.StandbyTasks == nil && r.WarmupTasks == nil && len(r.Status) == 0 &&
		r.PartitionsByUserEndpoint == nil && !r.TopologyDescriptionRequired &&
		(r.HeartbeatIntervalMillis == int32(in.Config.HeartbeatInterval.Milliseconds()) || out.ShortIntervalUntil > now) &&
		len(out.Timers) == 1 && out.Timers[0].Kind == streams.SessionTimer && !out.Timers[0].Cancel
}
