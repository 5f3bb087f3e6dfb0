package streams

import (
	"errors"
	"fmt"
	"github.com/coordinatord/coordinatord/internal/state/assigntiming"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"sort"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TimerKind names the streams timers (spec §4.6).
type TimerKind int

const (
	SessionTimer TimerKind = iota
	RebalanceTimer
	InitialDelayTimer
	// Timers of classic members (spec online-migration §4.8): each fences the member.
	ClassicSessionTimer
	ClassicJoinTimer
	ClassicSyncTimer
)

// TimerAction asks the shard to arm or cancel a timer.
type TimerAction struct {
	Kind   TimerKind
	Group  string
	Member string
	Epoch  int32 // rebalance timer: the member epoch it was armed at
	After  time.Duration
	Cancel bool
	// Catalog is the snapshot the initial-delay timer configures the topology with.
	Catalog Catalog
}

// TimerKey is the runtime timer key of a streams timer.
func TimerKey(kind TimerKind, group, member string) string {
	switch kind {
	case SessionTimer:
		return "streams-session\x00" + group + "\x00" + member
	case RebalanceTimer:
		return "streams-rebalance\x00" + group + "\x00" + member
	case ClassicSessionTimer:
		return "streams-classic-session\x00" + group + "\x00" + member
	case ClassicJoinTimer:
		return "streams-classic-join\x00" + group + "\x00" + member
	case ClassicSyncTimer:
		return "streams-classic-sync\x00" + group + "\x00" + member
	}
	return "initial-rebalance-timeout-" + group
}

// Key is the action's timer key.
func (a TimerAction) Key() string { return TimerKey(a.Kind, a.Group, a.Member) }

// HeartbeatInput is one StreamsGroupHeartbeat addressed to this shard.
type HeartbeatInput struct {
	Req        *kmsg.StreamsGroupHeartbeatRequest
	Version    int16
	ClientID   string
	ClientHost string
	Catalog    Catalog
	Config     Config
	Now        time.Time
	// Scheduled reports whether a timer is armed (the initial-delay timer).
	Scheduled func(key string) bool
	// Foreign reports whether another group type owns the id, whether that group is an empty
	// classic group (convertible), and the records that delete it.
	Foreign func(group string) (owned, convertible bool, tombstones []log.Record)
	// Classic returns the non-empty classic group with this id, for an online upgrade (nil: none).
	Classic func(group string) *ClassicGroupView
}

// HeartbeatOutput is the outcome of a heartbeat.
type HeartbeatOutput struct {
	Response *kmsg.StreamsGroupHeartbeatResponse
	Records  []log.Record
	Timers   []TimerAction
	// ToCreate are internal topics the handler creates in the catalog (spec §5.5).
	ToCreate []InternalTopic
	// Description are the group's topology description epochs after this heartbeat, for the
	// solicitation rule (spec topology-description §2.2); set on successful joins/heartbeats.
	Description DescriptionEpochs
	// Upgrade is set when the heartbeat converted a classic group or an upgrade was refused.
	Upgrade *Upgrade
	// Downgrade is set when a leave left only classic members (converted or declined).
	Downgrade *Downgrade
	// Ticket, when set, lets the caller answer a repeat of this exact request with Response,
	// without the shard, while the group's shard finds Ticket valid (runtime.Shard.Valid with
	// Session); set by the shard's operation for a steady heartbeat (Steady, SteadyRequest).
	Ticket  *runtime.Ticket
	Session time.Duration
	// ShortIntervalUntil, when the answer carries the reconciliation heartbeat interval, is the
	// moment (Unix ms) until which time alone keeps it so: the window after an assignment ends
	// then (a hand-over in progress may keep it short longer, but only a write changes that).
	// A Ticket for such an answer is valid only before it (0: only the shard ends the ticket).
	ShortIntervalUntil int64
}

// ErrorResponse is a heartbeat error response (spec §1.2).
func ErrorResponse(code int16, msg string) *kmsg.StreamsGroupHeartbeatResponse {
	r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	r.ErrorCode = code
	r.Status = []kmsg.StreamsGroupHeartbeatResponseStatus{} // Kafka sends an empty list, not null
	if msg != "" {
		r.ErrorMessage = &msg
	}
	return r
}

func fail(err *kerr.Error, format string, args ...any) HeartbeatOutput {
	return HeartbeatOutput{Response: ErrorResponse(err.Code, fmt.Sprintf(format, args...))}
}

var kafkaInternalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true, "__share_group_state": true}

// ValidateRequest applies the request-level checks that need no state (spec §2.1 1c-1d, §2.3),
// in Kafka's order. It returns 0 when the request may go to the shard.
func ValidateRequest(req *kmsg.StreamsGroupHeartbeatRequest) (int16, string) {
	if req.Topology != nil {
		var internal, invalid []string
		for _, n := range TopicNames(req.Topology) {
			if kafkaInternalTopics[n] {
				internal = append(internal, n)
			} else if meta.ValidateTopicName(n) != nil {
				invalid = append(invalid, n)
			}
		}
		if len(internal) > 0 {
			return kerr.StreamsInvalidTopology.Code, fmt.Sprintf("Use of Kafka internal topics %s in a Kafka Streams topology is prohibited.", strings.Join(dedup(internal), ","))
		}
		if len(invalid) > 0 {
			return kerr.StreamsInvalidTopology.Code, fmt.Sprintf("Topic names %s are not valid topic names.", strings.Join(dedup(invalid), ","))
		}
		for _, s := range req.Topology.Subtopologies {
			if len(s.SourceTopicRegex) > 0 {
				return kerr.InvalidRequest.Code, "Regular expressions for source topics are not supported yet."
			}
		}
	}
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	inv := kerr.InvalidRequest.Code
	switch {
	case blank(req.MemberID):
		return inv, "MemberId can't be empty."
	case blank(req.Group):
		return inv, "GroupId can't be empty."
	case req.InstanceID != nil && blank(*req.InstanceID):
		return inv, "InstanceId can't be empty."
	case req.RackID != nil && blank(*req.RackID):
		return inv, "RackId can't be empty."
	}
	if req.MemberEpoch == 0 {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return inv, "RebalanceTimeoutMs must be provided in first request."
		case req.ActiveTasks == nil || len(req.ActiveTasks) > 0:
			return inv, "ActiveTasks must be empty when (re-)joining."
		case req.StandbyTasks == nil || len(req.StandbyTasks) > 0:
			return inv, "StandbyTasks must be empty when (re-)joining."
		case req.WarmupTasks == nil || len(req.WarmupTasks) > 0:
			return inv, "WarmupTasks must be empty when (re-)joining."
		case req.Topology == nil:
			return inv, "Topology must be non-null when (re-)joining."
		}
		for _, s := range req.Topology.Subtopologies {
			for _, c := range s.StateChangelogTopics {
				if c.NumPartitions != 0 {
					return kerr.StreamsInvalidTopology.Code, fmt.Sprintf("Changelog topic %s must have an undefined partition count, but it is set to %d.", c.Topic, c.NumPartitions)
				}
			}
		}
	}
	switch {
	case req.MemberEpoch == -2 && req.InstanceID == nil:
		return inv, "InstanceId can't be null."
	case req.MemberEpoch < -2:
		return inv, fmt.Sprintf("MemberEpoch is %d, but must be greater than or equal to -2.", req.MemberEpoch)
	}
	nn := 0
	for _, l := range [][]kmsg.TaskIDs{req.ActiveTasks, req.StandbyTasks, req.WarmupTasks} {
		if l != nil {
			nn++
		}
	}
	if nn != 0 && nn != 3 {
		return inv, "If one task-type is non-null, all must be non-null."
	}
	if req.MemberEpoch != 0 && req.Topology != nil {
		return inv, "Topology can only be provided when (re-)joining."
	}
	return 0, ""
}

func rolesFromWire(active, standby, warmup []kmsg.TaskIDs) *Roles {
	if active == nil || standby == nil || warmup == nil {
		return nil
	}
	var r Roles
	for role, l := range [][]kmsg.TaskIDs{active, standby, warmup} {
		for _, ids := range l {
			for _, p := range ids.Partitions {
				r.add(Role(role), Task{Subtopology: ids.SubtopologyID, Partition: p}, 0)
			}
		}
	}
	return &r
}

// TasksToWire lists a role's tasks for a response.
func TasksToWire(m map[Task]int32) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	for _, s := range sortedTasks(m) {
		t := kmsg.NewTaskIDs()
		t.SubtopologyID, t.Partitions = s.ID, s.Partitions
		out = append(out, t)
	}
	return out
}

// Heartbeat runs a StreamsGroupHeartbeat that passed ValidateRequest (spec §2.4-§3).
func (s *State) Heartbeat(in HeartbeatInput) HeartbeatOutput {
	if in.Req.MemberEpoch < 0 {
		return s.leave(in)
	}
	return s.heartbeat(in)
}

func (s *State) notStreams(in HeartbeatInput) bool {
	if in.Foreign == nil {
		return false
	}
	owned, _, _ := in.Foreign(in.Req.Group)
	return owned
}

func (s *State) leave(in HeartbeatInput) HeartbeatOutput {
	req := in.Req
	g := s.Groups[req.Group]
	if g == nil {
		if s.notStreams(in) {
			return fail(kerr.GroupIDNotFound, "Group %s is not a streams group.", req.Group)
		}
		return fail(kerr.GroupIDNotFound, "Group %s not found.", req.Group)
	}
	if req.ShutdownApplication && g.soft.shutdownBy == "" {
		g.soft.shutdownBy = req.MemberID // soft state, set even if the leave then fails [Kafka, quirk]
	}
	var m *Member
	if req.InstanceID == nil {
		if m = g.Members[req.MemberID]; m == nil {
			return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, req.Group)
		}
	} else {
		if m = g.staticMember(*req.InstanceID); m == nil {
			return fail(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		}
		if m.ID != req.MemberID {
			return fail(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, m.ID)
		}
	}
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	resp.MemberID, resp.MemberEpoch, resp.Status = req.MemberID, req.MemberEpoch, []kmsg.StreamsGroupHeartbeatResponseStatus{}
	if req.MemberEpoch == -2 && req.InstanceID != nil {
		n := m.clone()
		n.Epoch = -2
		n.Pending = Roles{}
		for t := range n.Assigned[Active] {
			n.Assigned[Active][t] = 0
		}
		return HeartbeatOutput{Response: resp, Records: []log.Record{CurrentMemberRecord(g.ID, n)}}
	}
	recs, timers, dg := s.removeMembers(g, []string{m.ID}, in.Config.DowngradeSettings(in.Catalog, in.Now))
	return HeartbeatOutput{Response: resp, Records: recs, Timers: timers, Downgrade: dg}
}

// Fence is the expiry of a session or rebalance timer: it removes the member if it still
// exists (and, for a rebalance timer, is still at the epoch the timer was armed at).
func (s *State) Fence(group, member string, epoch int32, checkEpoch bool) ([]log.Record, []TimerAction) {
	recs, timers, _ := s.FenceWith(group, member, epoch, checkEpoch, DowngradeSettings{})
	return recs, timers
}

// FenceWith is Fence with the downgrade check of online-migration §5 (a fenced last streams
// member may turn the group back into a classic group).
func (s *State) FenceWith(group, member string, epoch int32, checkEpoch bool, ds DowngradeSettings) ([]log.Record, []TimerAction, *Downgrade) {
	g := s.Groups[group]
	if g == nil {
		return nil, nil, nil
	}
	m := g.Members[member]
	if m == nil || (checkEpoch && m.Epoch != epoch) {
		return nil, nil, nil
	}
	return s.removeMembers(g, []string{member}, ds)
}

func sameMetadata(a, b *Member) bool {
	return eqPtr(a.InstanceID, b.InstanceID) && eqPtr(a.RackID, b.RackID) && a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		a.RebalanceTimeoutMs == b.RebalanceTimeoutMs && a.TopologyEpoch == b.TopologyEpoch && a.ProcessID == b.ProcessID &&
		eqEndpoint(a.UserEndpoint, b.UserEndpoint) && equalConfigs(a.ClientTags, b.ClientTags)
}

func eqPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func eqEndpoint(a, b *Endpoint) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func (s *State) heartbeat(in HeartbeatInput) HeartbeatOutput {
	req, cfg := in.Req, in.Config
	var recs []log.Record
	var timers []TimerAction
	g := s.Groups[req.Group]
	created := false
	var upgrade *Upgrade
	if g == nil && in.Foreign != nil {
		if owned, convertible, tombs := in.Foreign(req.Group); owned {
			switch {
			case req.MemberEpoch == 0 && convertible:
				recs = append(recs, tombs...)
			case req.MemberEpoch == 0 && cfg.MigrationPolicy.AllowsUpgrade() && in.Classic != nil && in.Classic(req.Group) != nil:
				// Online upgrade (spec online-migration §3): the classic group becomes this
				// streams group, then the join runs on it; one batch.
				v := in.Classic(req.Group)
				ug, urecs, reason := upgradeFromClassic(v, req, in.Catalog, cfg)
				if reason != "" {
					return refusedUpgrade(v, req.Group, reason)
				}
				g, recs, timers = ug, urecs, classicSessionTimers(ug)
				upgrade = &Upgrade{Converted: true, Generation: v.Generation, ClassicMembers: len(v.Members)}
			default:
				out := fail(kerr.GroupIDNotFound, "Group %s is not a streams group.", req.Group)
				if req.MemberEpoch == 0 && !convertible && !cfg.MigrationPolicy.AllowsUpgrade() {
					out.Upgrade = &Upgrade{Refused: "group.streams.migration.policy is " + string(cfg.MigrationPolicy.effective())}
				}
				return out
			}
		}
	}
	if g == nil {
		if req.MemberEpoch != 0 {
			return fail(kerr.GroupIDNotFound, "Streams group %s not found.", req.Group)
		}
		// A new group lives only in this operation until its records are replayed; soft state
		// set on it is lost, as in Kafka (spec §4.8, §8).
		g = newGroup(req.Group)
		created = true
	}
	wasEmpty := len(g.Members) == 0

	// The group as this heartbeat changes it, materialized only where every member is needed.
	view := groupView{g: g}

	// Group size (joins only).
	if req.MemberEpoch == 0 {
		static := req.InstanceID != nil && g.staticMember(*req.InstanceID) != nil
		if !static && int64(len(g.Members)) >= int64(cfg.MaxSize) && g.Members[req.MemberID] == nil {
			return fail(kerr.GroupMaxSizeReached, "The streams group has reached its maximum capacity of %d members.", cfg.MaxSize)
		}
	}

	// Member resolution (spec §2.6).
	var stored *Member // the member before this heartbeat (nil: new)
	static := req.InstanceID != nil
	if req.InstanceID == nil {
		stored = g.Members[req.MemberID]
		if stored == nil && req.MemberEpoch != 0 {
			return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, req.Group)
		}
	} else {
		existing := g.staticMember(*req.InstanceID)
		if req.MemberEpoch == 0 {
			switch {
			case existing == nil:
				stored = g.Members[req.MemberID] // its instance id changes (or is set)
			case existing.Epoch != -2 && existing.Classic == nil:
				// A classic member never releases its instance id with epoch -2, so replacing
				// one needs no release (spec online-migration §3.7, KIP-848's exemption).
				return fail(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", req.MemberID, *req.InstanceID, existing.ID)
			default:
				// Replacement: the new member id inherits the old one's assignment and target.
				oldTarget := g.Targets[existing.ID]
				recs = append(recs, memberTombstones(g.ID, existing)...)
				repl := existing.clone()
				repl.ID, repl.Epoch, repl.PreviousEpoch = req.MemberID, 0, 0
				repl.Classic = nil // a classic member replaced by a streams member (spec online-migration §3.7)
				recs = append(recs, MemberMetadataRecord(g.ID, repl), TargetMemberRecord(g.ID, repl.ID, oldTarget), CurrentMemberRecord(g.ID, repl))
				view.gone, view.repl, view.replTarget = existing.ID, repl.ID, oldTarget
				timers = append(timers, cancelAllTimers(g.ID, existing.ID)...)
				stored = repl
			}
		} else {
			switch {
			case existing == nil:
				return fail(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
			case existing.ID != req.MemberID:
				return fail(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, existing.ID)
			}
			stored = existing
		}
	}
	if stored != nil && stored.Classic != nil && req.MemberEpoch != 0 {
		// Classic members talk JoinGroup/SyncGroup/Heartbeat (spec online-migration §4.3 S4's mirror).
		return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, req.Group)
	}
	owned := rolesFromWire(req.ActiveTasks, req.StandbyTasks, req.WarmupTasks)
	if req.MemberEpoch > 0 {
		switch {
		case req.MemberEpoch > stored.Epoch:
			return fail(kerr.FencedMemberEpoch, "The streams group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, stored.Epoch)
		case req.MemberEpoch < stored.Epoch:
			if req.MemberEpoch != stored.PreviousEpoch || owned == nil || !ownedSubset(*owned, stored.Assigned) {
				return fail(kerr.FencedMemberEpoch, "The streams group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, stored.Epoch)
			}
		}
	}
	isNew := stored == nil
	if isNew {
		stored = newMember(req.MemberID)
	}

	// Updated member (spec §3 step 2).
	m := stored.shallow() // fields below are replaced, never changed in place
	if req.InstanceID != nil {
		m.InstanceID = req.InstanceID
	}
	if req.RackID != nil {
		m.RackID = req.RackID
	}
	if req.ProcessID != nil {
		m.ProcessID = *req.ProcessID
	}
	if req.ClientTags != nil {
		m.ClientTags = make(map[string]string, len(req.ClientTags))
		for _, t := range req.ClientTags {
			m.ClientTags[t.Key] = t.Value
		}
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.Topology != nil {
		m.TopologyEpoch = req.Topology.Epoch
	}
	m.ClientID, m.ClientHost = in.ClientID, in.ClientHost
	if req.MemberEpoch == 0 || req.UserEndpoint != nil {
		m.UserEndpoint = nil
		if req.UserEndpoint != nil && req.UserEndpoint.Host != "" {
			m.UserEndpoint = &Endpoint{Host: req.UserEndpoint.Host, Port: req.UserEndpoint.Port}
		}
	}
	bump := false
	var memberRec []log.Record
	if m.Classic != nil { // a classic member's id rejoining with the streams protocol
		m.Classic = nil
		memberRec = append(memberRec, classicMemberTombstone(g.ID, m.ID))
	}
	if isNew || !sameMetadata(stored, m) {
		memberRec = append(memberRec, MemberMetadataRecord(g.ID, m))
		if !static || stored.TopologyEpoch != m.TopologyEpoch || !eqPtr(stored.RackID, m.RackID) ||
			!equalConfigs(stored.ClientTags, m.ClientTags) || stored.ProcessID != m.ProcessID || isNew {
			bump = true
		}
	}
	view.self = m

	// Topology (spec §5.1).
	topology := g.Topology
	var topoRec []log.Record
	var statuses []Status
	if req.Topology != nil {
		if req.Topology.Epoch < 0 {
			return fail(kerr.InvalidRequest, "Topology epoch must be non-negative.")
		}
		ids := map[string]bool{}
		for _, st := range req.Topology.Subtopologies {
			if ids[st.SubtopologyID] {
				return fail(kerr.InvalidRequest, "Subtopology %s is defined more than once.", st.SubtopologyID)
			}
			ids[st.SubtopologyID] = true
		}
		rt := TopologyFromRequest(req.Topology)
		switch {
		case topology == nil:
			topology = rt
			topoRec = append(topoRec, TopologyRecord(g.ID, rt))
		case topology.Epoch > rt.Epoch:
			// a stale member: admitted, gets tasks of the group's topology
		case !topology.Equal(rt):
			return fail(kerr.InvalidRequest, "Topology updates are not supported yet.")
		}
	}
	if topology != nil && m.TopologyEpoch < topology.Epoch {
		statuses = append(statuses, Status{StatusStaleTopology, fmt.Sprintf("The member's topology epoch %d is behind the group's topology epoch %d.", m.TopologyEpoch, topology.Epoch)})
	}

	// Configured topology and metadata hash (spec §5.2-§5.4): recomputed from the catalog on
	// every heartbeat, which is Kafka's lazy refresh without the notification bookkeeping.
	var configured *Configured
	hash := g.MetadataHash
	if topology != nil {
		c, h, err := g.configure(topology, in.Catalog)
		if err != nil {
			var inv *InvalidTopologyError
			if errors.As(err, &inv) {
				return fail(kerr.StreamsInvalidTopology, "%s", inv.Msg)
			}
			return fail(kerr.UnknownServerError, "")
		}
		configured = c
		if h != hash {
			hash, bump = h, true
		}
	}
	validated := int32(-1)
	if configured.Ready() {
		validated = topology.Epoch
		for _, l := range [][]kmsg.TaskIDs{req.ActiveTasks, req.StandbyTasks, req.WarmupTasks} {
			for _, ids := range l {
				st := configured.subtopology(ids.SubtopologyID)
				if st == nil {
					return fail(kerr.InvalidRequest, "Subtopology %s does not exist in the topology.", ids.SubtopologyID)
				}
				for _, p := range ids.Partitions {
					if p < 0 || p >= st.Tasks {
						return fail(kerr.InvalidRequest, "Task %d for subtopology %s is invalid. Number of tasks for this subtopology: %d", p, ids.SubtopologyID, st.Tasks)
					}
				}
			}
		}
	}
	offsets, endOffsets := g.soft.taskOffsets[m.ID], g.soft.taskEndOffsets[m.ID]
	for i, l := range [][]kmsg.TaskOffset{req.TaskOffsets, req.TaskEndOffsets} {
		if l == nil {
			continue
		}
		mm, err := taskOffsetsOf(l, configured)
		if err != nil {
			return fail(kerr.InvalidRequest, "%s", err.Error())
		}
		if i == 0 {
			offsets = mm
		} else {
			endOffsets = mm
		}
	}
	if validated != g.ValidatedTopologyEpoch {
		bump = true
	}
	acfg := cfg.assignmentConfigs()
	if !equalConfigs(acfg, g.AssignmentConfigs) {
		bump = true
	}
	// The assignor's view of task progress: every member's last report, this heartbeat's applied.
	view.offsets, view.endOffsets = offsets, endOffsets
	// A warm-up that has caught up is released by the next assignment (spec §6.7), so it needs
	// one: bump unless an assignment is already pending. Only targets with warm-ups can ask for
	// it, so the sticky assignor's groups bump exactly as in Kafka 4.4 (spec §4.2).
	if !bump && g.AssignmentEpoch >= g.Epoch && configured.Ready() && g.warmTargets > 0 &&
		followUpDue(view.targets(), view.members(), view.taskOffsets(), view.taskEndOffsets(), cfg.AcceptableRecoveryLag) {
		bump = true
	}
	groupEpoch := g.Epoch
	var groupRec []log.Record
	now := in.Now.UnixMilli()
	if bump {
		groupEpoch++
		groupRec = append(groupRec, GroupMetadataRecord(g, groupEpoch, hash, validated, acfg))
		g.soft.changedAt = now
	}

	// Initial rebalance delay (spec §4.6).
	delayKey := TimerKey(InitialDelayTimer, g.ID, "")
	delayPending := in.Scheduled != nil && in.Scheduled(delayKey)
	if wasEmpty && cfg.InitialRebalanceDelay > 0 && !delayPending {
		timers = append(timers, TimerAction{Kind: InitialDelayTimer, Group: g.ID, After: cfg.InitialRebalanceDelay, Catalog: in.Catalog})
		delayPending = true
	}

	// Target assignment (spec §6.1).
	targetEpoch := g.AssignmentEpoch
	target := view.target(m.ID)
	var targetRecs []log.Record
	switch {
	case delayPending:
		target = Roles{}
		statuses = append(statuses, Status{StatusAssignmentDelayed, "Assignment delayed due to the configured initial rebalance delay."})
	case g.AssignmentEpoch >= groupEpoch:
	case assignmentHeld(g, cfg, now):
		statuses = append(statuses, Status{StatusAssignmentDelayed, "Assignment delayed due to the configured assignment interval."})
	default:
		members := view.members()
		newTargets, err := computeTargets(members, configured, cfg, assignConfigs(cfg), view.taskOffsets(), view.taskEndOffsets())
		if err != nil {
			return fail(kerr.UnknownServerError, "")
		}
		targets := view.targets()
		for _, id := range sortedMemberIDs(members) {
			old, had := targets[id]
			if !had || !old.SameTasks(newTargets[id]) {
				targetRecs = append(targetRecs, TargetMemberRecord(g.ID, id, newTargets[id]))
			}
		}
		targetRecs = append(targetRecs, TargetMetadataRecord(g.ID, groupEpoch, now))
		target, targetEpoch = newTargets[m.ID], groupEpoch
	}

	// Reconciliation (spec §4.4).
	if req.MemberEpoch == 0 && !isNew {
		e := Roles{}
		owned = &e // a rejoin acknowledges every pending revocation
	}
	// Ownership as of before this heartbeat: the member's own holdings are its stored ones (a
	// new member holds nothing), a replaced static member's are its replacement's.
	own := ownership{owners: g.owners, members: g.Members, self: m.ID, alias: view.gone}
	n, err := reconcile(m, targetEpoch, target, owned, own)
	if err != nil {
		return fail(kerr.FencedMemberEpoch, "%s", err.Error())
	}
	var currentRec []log.Record
	if isNew && n == m || !sameCurrent(n, stored) {
		currentRec = append(currentRec, CurrentMemberRecord(g.ID, n))
		if n.State == UnrevokedTasks {
			timers = append(timers, TimerAction{Kind: RebalanceTimer, Group: g.ID, Member: n.ID, Epoch: n.Epoch, After: time.Duration(max(n.RebalanceTimeoutMs, 0)) * time.Millisecond})
		} else {
			timers = append(timers, TimerAction{Kind: RebalanceTimer, Group: g.ID, Member: n.ID, Cancel: true})
		}
	}
	view.self = n
	timers = append(timers, TimerAction{Kind: SessionTimer, Group: g.ID, Member: n.ID, After: cfg.SessionTimeout})

	recs = append(recs, memberRec...)
	recs = append(recs, topoRec...)
	recs = append(recs, groupRec...)
	recs = append(recs, targetRecs...)
	recs = append(recs, currentRec...)

	// Soft state (never rolled back, never persisted).
	g.soft.catalog = in.Catalog
	if req.TaskOffsets != nil || req.TaskEndOffsets != nil {
		if g.soft.taskOffsets == nil {
			g.soft.taskOffsets, g.soft.taskEndOffsets = map[string]map[Task]int64{}, map[string]map[Task]int64{}
		}
		g.soft.taskOffsets[m.ID], g.soft.taskEndOffsets[m.ID] = offsets, endOffsets
	}
	if req.ShutdownApplication && g.soft.shutdownBy == "" {
		g.soft.shutdownBy = m.ID
	}
	tasksChanged := !n.Assigned.Equal(stored.Assigned)
	if !eqEndpoint(stored.UserEndpoint, n.UserEndpoint) || (tasksChanged && n.UserEndpoint != nil) {
		g.soft.endpointEpoch++
	}

	// Response (spec §1.2).
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	resp.MemberID, resp.MemberEpoch = m.ID, n.Epoch
	resp.HeartbeatIntervalMillis = int32(cfg.HeartbeatInterval.Milliseconds())
	assignedAt := g.AssignmentTimestamp
	if len(targetRecs) > 0 {
		assignedAt = now
	}
	var shortUntil int64
	// A Kafka Streams 4.4 client waits twice the last interval it was told for a missing source
	// topic to appear before it fails the application (StreamThread's topicsReadyTimer): the
	// short interval would cut that grace from 10 s to 1 s.
	missingSources := configured != nil && configured.Problem != nil && configured.Problem.Code == StatusMissingSourceTopics
	if r := cfg.ReconcilingHeartbeatInterval; r > 0 && r < cfg.HeartbeatInterval && !missingSources &&
		(now < assignedAt+cfg.HeartbeatInterval.Milliseconds() || handingOver(g, n, view.gone, groupEpoch, targetEpoch, statuses)) {
		resp.HeartbeatIntervalMillis = int32(r.Milliseconds())
		shortUntil = assignedAt + cfg.HeartbeatInterval.Milliseconds()
	}
	resp.TaskOffsetIntervalMillis = int32(cfg.TaskOffsetInterval.Milliseconds())
	resp.AcceptableRecoveryLag = cfg.AcceptableRecoveryLag
	if req.MemberEpoch == 0 || tasksChanged {
		resp.ActiveTasks, resp.StandbyTasks, resp.WarmupTasks = TasksToWire(n.Assigned[Active]), TasksToWire(n.Assigned[Standby]), TasksToWire(n.Assigned[Warmup])
	}
	if configured != nil && configured.Problem != nil {
		statuses = append(statuses, *configured.Problem)
	}
	if g.soft.shutdownBy != "" {
		statuses = append(statuses, Status{StatusShutdownApplication, fmt.Sprintf("Streams group member %s encountered a fatal error and requested a shutdown for the entire application.", g.soft.shutdownBy)})
	}
	if in.Version >= 1 && len(cfg.RackAwareTags) > 0 {
		var missing []string
		for _, k := range cfg.RackAwareTags {
			if _, ok := n.ClientTags[k]; !ok {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			statuses = append(statuses, Status{StatusMissingClientTags, fmt.Sprintf("Missing required client tags for rack-aware standby assignment: [%s]. Configure them via 'client.tag.<tagKey>' in your Streams config.", strings.Join(missing, ", "))})
		}
	}
	resp.Status = make([]kmsg.StreamsGroupHeartbeatResponseStatus, 0, len(statuses))
	for _, st := range statuses {
		ws := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		ws.StatusCode, ws.StatusDetail = st.Code, st.Detail
		resp.Status = append(resp.Status, ws)
	}
	resp.EndpointInformationEpoch = g.soft.endpointEpoch
	if g.soft.endpointEpoch != req.EndpointInformationEpoch {
		resp.PartitionsByUserEndpoint = endpointPartitions(view.members(), n.ID, configured)
	}
	if created {
		resp.EndpointInformationEpoch = 0
	}
	out := HeartbeatOutput{Response: resp, Records: recs, Timers: timers, Upgrade: upgrade, ShortIntervalUntil: shortUntil}
	out.Description = DescriptionEpochs{Topology: -1, Stored: g.StoredDescriptionEpoch, Failed: g.FailedDescriptionEpoch}
	if topology != nil {
		out.Description.Topology = topology.Epoch
	}
	if configured != nil && configured.Problem != nil {
		out.ToCreate = configured.ToCreate
	}
	return out
}

// The reconciliation interval is answered while a hand-over is in progress (handingOver) and,
// to every member, for one configured heartbeat interval after the group's target assignment
// was last computed: members join and leave in bursts (the instances of a deployment start one
// after another), and a member that owns tasks learns of the next change only at its next
// heartbeat, which the configured interval would put up to a whole interval away.

// handingOver reports whether tasks are changing hands in the group as this heartbeat leaves
// it: the member itself has tasks to revoke or to receive, or an assignment waits (delayed
// by the initial delay or the assignment interval), or the group's target is newer than its
// last computed assignment, or another member has not reconciled to the target yet. A member
// learns of its part in a hand-over only from a heartbeat answer, so every member of such a
// group heartbeating sooner is what shortens it; a stable group goes back to the configured
// interval at each member's next heartbeat. The count of members reconciled to the target is
// kept by Replay, so this costs the same whatever the group's size.
func handingOver(g *Group, n *Member, gone string, groupEpoch, targetEpoch int32, statuses []Status) bool {
	if n.State != Stable || n.Epoch != targetEpoch || groupEpoch > targetEpoch {
		return true
	}
	for _, st := range statuses {
		if st.Code == StatusAssignmentDelayed {
			return true
		}
	}
	others, settled := len(g.Members), g.stableAt[targetEpoch]
	for _, id := range []string{n.ID, gone} {
		if m := g.Members[id]; id != "" && m != nil {
			others--
			if m.State == Stable && m.Epoch == targetEpoch {
				settled--
			}
		}
	}
	return settled < others
}

// taskOffsetsOf turns a reported TaskOffsets or TaskEndOffsets list into what the group keeps
// for the member. A duplicate (subtopology, partition) is INVALID_REQUEST, as in Kafka
// (MemberTaskOffsets). Unlike Kafka, only entries naming a task of the ready configured topology
// are kept, so the soft state a member can make the shard hold is bounded by the topology's task
// count whatever the request carries; the rest is dropped rather than refused because a Streams
// client reports offsets for every task it has state for on disk, which after a topology or
// partition-count change can include tasks the group no longer has. Without a ready topology
// no entry can be checked, so none is kept (the assignor is not called then either).
func taskOffsetsOf(l []kmsg.TaskOffset, configured *Configured) (map[Task]int64, error) {
	var tasks map[string]int32
	if configured.Ready() {
		tasks = make(map[string]int32, len(configured.Subtopologies))
		for _, st := range configured.Subtopologies {
			tasks[st.ID] = st.Tasks
		}
	}
	out := map[Task]int64{}
	var dropped map[Task]struct{} // only to find duplicates among entries that are not kept
	for _, o := range l {
		t := Task{Subtopology: o.SubtopologyID, Partition: o.Partition}
		dup := false
		if n, ok := tasks[o.SubtopologyID]; ok && o.Partition >= 0 && o.Partition < n {
			_, dup = out[t]
			out[t] = o.Offset
		} else {
			if dropped == nil {
				dropped = map[Task]struct{}{}
			}
			_, dup = dropped[t]
			dropped[t] = struct{}{}
		}
		if dup {
			return nil, fmt.Errorf("Task offsets contain a duplicate entry for subtopology %s and partition %d.", o.SubtopologyID, o.Partition)
		}
	}
	return out, nil
}

// ownedSubset: every owned task is in the member's assigned tasks of that role.
func ownedSubset(owned, assigned Roles) bool {
	for role := range owned {
		for t := range owned[role] {
			if _, ok := assigned[role][t]; !ok {
				return false
			}
		}
	}
	return true
}

// groupView is the group with one heartbeat's changes applied: a static member replaced (gone
// by repl, who inherits its target), the heartbeating member's new state (self) and its latest
// task offsets. The common heartbeat reads single entries through it; only the paths that need
// every member (an assignment, a due warm-up check, endpoint information) materialize maps, so
// a heartbeat that changes nothing copies nothing of size O(group) (issue 12).
type groupView struct {
	g                   *Group
	gone, repl          string
	replTarget          Roles
	self                *Member
	offsets, endOffsets map[Task]int64
}

// target is a member's target in the view.
func (v *groupView) target(id string) Roles {
	if v.repl != "" && id == v.repl {
		return v.replTarget
	}
	if v.gone != "" && id == v.gone {
		return Roles{}
	}
	return v.g.Targets[id]
}

func (v *groupView) members() map[string]*Member {
	out := make(map[string]*Member, len(v.g.Members)+1)
	for id, m := range v.g.Members {
		out[id] = m
	}
	if v.gone != "" {
		delete(out, v.gone)
	}
	out[v.self.ID] = v.self
	return out
}

func (v *groupView) targets() map[string]Roles {
	out := make(map[string]Roles, len(v.g.Targets)+1)
	for id, t := range v.g.Targets {
		out[id] = t
	}
	if v.gone != "" {
		delete(out, v.gone)
	}
	if v.repl != "" {
		out[v.repl] = v.replTarget
	}
	return out
}

func (v *groupView) taskOffsets() map[string]map[Task]int64 {
	return withEntry(v.g.soft.taskOffsets, v.self.ID, v.offsets)
}

func (v *groupView) taskEndOffsets() map[string]map[Task]int64 {
	return withEntry(v.g.soft.taskEndOffsets, v.self.ID, v.endOffsets)
}

func withEntry(m map[string]map[Task]int64, id string, e map[Task]int64) map[string]map[Task]int64 {
	out := make(map[string]map[Task]int64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[id] = e
	return out
}

func sortedMemberIDs(members map[string]*Member) []string {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func assignConfigs(cfg Config) assign.Configs {
	return assign.Configs{NumStandbyReplicas: cfg.NumStandbyReplicas, AcceptableRecoveryLag: cfg.AcceptableRecoveryLag,
		MaxWarmupReplicas: cfg.NumWarmupReplicas, RackAwareTags: cfg.RackAwareTags}
}

// computeTargets runs the assignor over the membership view; without a ready topology every
// target is empty and the assignor is not called (spec §5.3, §6.1).
func computeTargets(members map[string]*Member, configured *Configured, cfg Config, ac assign.Configs, offsets, endOffsets map[string]map[Task]int64) (map[string]Roles, error) {
	out := make(map[string]Roles, len(members))
	for id := range members {
		out[id] = Roles{}
	}
	if !configured.Ready() {
		return out, nil
	}
	a, err := cfg.assignor()
	if err != nil {
		return nil, err
	}
	in := assign.Input{Configs: ac, Members: assignMembers(members, offsets, endOffsets)}
	for _, st := range configured.Subtopologies {
		in.Subtopologies = append(in.Subtopologies, assign.Subtopology{ID: st.ID, Tasks: st.Tasks, Stateful: st.Stateful})
	}
	res, err := safeAssign(a, in)
	if err != nil {
		return nil, err
	}
	for id, ma := range res {
		if _, ok := out[id]; !ok {
			continue
		}
		var r Roles
		// Kafka 4.4's sticky assignor never returns warm-ups; the highavailability one does
		// (spec §6.7), and they reach the member like any other role.
		for role, ts := range []assign.TaskSet{ma.Active, ma.Standby, ma.Warmup} {
			for sub, ps := range ts {
				for _, p := range ps {
					r.add(Role(role), Task{Subtopology: sub, Partition: p}, 0)
				}
			}
		}
		out[id] = r
	}
	return out, nil
}

// assignMembers is the membership view as the assignor sees it (spec §6.1): assigned tasks
// without those pending revocation, and the last reported task offsets.
func assignMembers(members map[string]*Member, offsets, endOffsets map[string]map[Task]int64) []assign.Member {
	out := make([]assign.Member, 0, len(members))
	for _, id := range sortedMemberIDs(members) {
		m := members[id]
		out = append(out, assign.Member{ID: id, ProcessID: m.ProcessID, InstanceID: m.InstanceID, RackID: m.RackID, ClientTags: m.ClientTags,
			Active: toTaskSet(m.Assigned[Active]), Standby: toTaskSet(m.Assigned[Standby]), Warmup: toTaskSet(m.Assigned[Warmup]),
			TaskOffsets: offsets[id], TaskEndOffsets: endOffsets[id]})
	}
	return out
}

// followUpDue reports whether the target has a warm-up that is now caught up (assign.FollowUpDue).
// It runs on every heartbeat, so it costs nothing for a target without warm-ups and otherwise
// looks only at the warm-ups and the members' processes and offsets.
func followUpDue(targets map[string]Roles, members map[string]*Member, offsets, endOffsets map[string]map[Task]int64, lag int64) bool {
	var warm assign.Output
	for id, r := range targets {
		if len(r[Warmup]) > 0 {
			if warm == nil {
				warm = assign.Output{}
			}
			warm[id] = assign.MemberAssignment{Warmup: toTaskSet(r[Warmup])}
		}
	}
	if warm == nil {
		return false
	}
	view := make([]assign.Member, 0, len(members))
	for id, m := range members {
		view = append(view, assign.Member{ID: id, ProcessID: m.ProcessID, TaskOffsets: offsets[id], TaskEndOffsets: endOffsets[id]})
	}
	return assign.FollowUpDue(warm, view, lag)
}

func safeAssign(a assign.Assignor, in assign.Input) (out assign.Output, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task assignor %s panicked: %v", a.Name(), r)
		}
	}()
	return a.Assign(in)
}

func toTaskSet(m map[Task]int32) assign.TaskSet {
	out := assign.TaskSet{}
	for _, s := range sortedTasks(m) {
		out[s.ID] = s.Partitions
	}
	return out
}

// endpointPartitions builds PartitionsByUserEndpoint (spec §8): other members first, the
// heartbeating member last.
func endpointPartitions(members map[string]*Member, self string, configured *Configured) []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint {
	out := []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint{}
	ids := sortedMemberIDs(members)
	ids = append(ids, self)
	for i, id := range ids {
		if id == self && i != len(ids)-1 {
			continue
		}
		m := members[id]
		if m == nil || m.UserEndpoint == nil {
			continue
		}
		e := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpoint()
		e.UserEndpoint.Host, e.UserEndpoint.Port = m.UserEndpoint.Host, m.UserEndpoint.Port
		standby := map[Task]int32{}
		for t := range m.Assigned[Standby] {
			standby[t] = 0
		}
		for t := range m.Assigned[Warmup] {
			standby[t] = 0
		}
		for _, tp := range topicPartitions(m.Assigned[Active], configured) {
			a := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition()
			a.Topic, a.Partitions = tp.topic, tp.partitions
			e.ActivePartitions = append(e.ActivePartitions, a)
		}
		for _, tp := range topicPartitions(standby, configured) {
			s := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition()
			s.Topic, s.Partitions = tp.topic, tp.partitions
			e.StandbyPartitions = append(e.StandbyPartitions, s)
		}
		if e.ActivePartitions == nil {
			e.ActivePartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{}
		}
		if e.StandbyPartitions == nil {
			e.StandbyPartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{}
		}
		out = append(out, e)
	}
	return out
}

type topicParts struct {
	topic      string
	partitions []int32
}

func topicPartitions(tasks map[Task]int32, configured *Configured) []topicParts {
	if configured == nil {
		return nil
	}
	by := map[string][]int32{}
	var order []string
	for _, s := range sortedTasks(tasks) {
		st := configured.subtopology(s.ID)
		if st == nil {
			continue
		}
		for _, name := range sortedKeysInt(st.TopicCounts) {
			count := st.TopicCounts[name]
			for _, p := range s.Partitions {
				if p < count {
					if _, seen := by[name]; !seen {
						order = append(order, name)
					}
					by[name] = append(by[name], p)
				}
			}
		}
	}
	out := make([]topicParts, 0, len(order))
	for _, name := range order {
		ps := by[name]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, topicParts{topic: name, partitions: ps})
	}
	return out
}

func sortedKeysInt(m map[string]int32) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// assignmentHeld reports whether the assignment interval (or, shorter, coordinatord's quiet
// time: assigntiming) still holds back a new target.
func assignmentHeld(g *Group, cfg Config, now int64) bool {
	return !assigntiming.Due(g.AssignmentTimestamp, g.soft.changedAt, now, cfg.AssignmentInterval, cfg.AssignmentQuiet)
}

// SteadyRequest reports whether req is a steady heartbeat: an established member's epoch (with
// its endpoint information epoch and instance id) and nothing else; every field a member sends
// only when it changes is null. Only such a request is answered from a ticket.
func SteadyRequest(req *kmsg.StreamsGroupHeartbeatRequest) bool {
	return req.MemberEpoch > 0 && req.MemberID != "" && req.RackID == nil && req.RebalanceTimeoutMillis == -1 &&
		req.Topology == nil && req.ActiveTasks == nil && req.StandbyTasks == nil && req.WarmupTasks == nil &&
		req.ProcessID == nil && req.UserEndpoint == nil && req.ClientTags == nil &&
		req.TaskOffsets == nil && req.TaskEndOffsets == nil && !req.ShutdownApplication
}

// Steady reports whether a heartbeat of member that changed nothing is answered the same until
// some other operation runs on the shard, so its answer may be repeated off the shard (a
// runtime.Ticket): the group's target is computed for its epoch (a target held back by the
// assignment interval is released by time alone, in the next heartbeat of any member), and the
// member is a streams-protocol member settled at that target. What the answer shows besides
// (statuses, the heartbeat interval, tasks, endpoints) the shard's operation checks on the answer
// itself (shard.StreamsHeartbeat).
func (s *State) Steady(group, member string) bool {
	g := s.Groups[group]
	if g == nil || g.Epoch != g.AssignmentEpoch {
		return false
	}
	m := g.Members[member]
	return m != nil && m.Classic == nil && m.State == Stable && m.Epoch == g.AssignmentEpoch
}
