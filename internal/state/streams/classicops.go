package streams

import (
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kerr"
)

// JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic members of a streams group (spec
// online-migration §4.2-§4.5, mirroring Kafka's classicGroup*ToConsumerGroup for KIP-848).

// ClassicJoinInput is a JoinGroup addressed to a streams group.
type ClassicJoinInput struct {
	Group              string
	MemberID           string
	InstanceID         *string
	ProtocolType       string
	Protocols          []ClassicProtocol
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	ClientID           string
	ClientHost         string
	// RequireKnownMemberID: JoinGroup v4+, where a dynamic member first gets MEMBER_ID_REQUIRED.
	RequireKnownMemberID bool
	// NewMemberID is the id handed out when MemberID is empty.
	NewMemberID string
	Catalog     Catalog
	Config      Config
	Now         time.Time
	Scheduled   func(key string) bool
}

// ClassicResult is the outcome of a classic request to a streams group.
type ClassicResult struct {
	Code       int16
	MemberID   string
	Generation int32
	// Assignment is a successful SyncGroup's assignment.
	Assignment []byte
	Records    []log.Record
	Timers     []TimerAction
	// Downgrade is set when a static classic member replaced the last streams member (§5.4).
	Downgrade *Downgrade
}

func classicErr(code int16, member string) ClassicResult {
	return ClassicResult{Code: code, MemberID: member, Generation: -1}
}

func classicTimer(kind TimerKind, g, member string, ms int32) TimerAction {
	return TimerAction{Kind: kind, Group: g, Member: member, After: time.Duration(max(ms, 0)) * time.Millisecond}
}

func cancelTimer(kind TimerKind, g, member string) TimerAction {
	return TimerAction{Kind: kind, Group: g, Member: member, Cancel: true}
}

// HasClassicPath reports whether classic requests for this group id are answered by the streams
// group: it exists and is not empty (an empty one converts offline instead).
func (s *State) HasClassicPath(group string) bool {
	g := s.Groups[group]
	return g != nil && len(g.Members) > 0
}

// ClassicJoin runs a JoinGroup against a non-empty streams group (§4.2).
func (s *State) ClassicJoin(in ClassicJoinInput) ClassicResult {
	cfg := in.Config
	g := s.Groups[in.Group]
	if g == nil || len(g.Members) == 0 || !cfg.MigrationPolicy.AllowsClassicMembers() {
		return classicErr(kerr.InconsistentGroupProtocol.Code, in.MemberID) // J1: Kafka 4.4's answer
	}
	memberID := in.MemberID
	if memberID == "" {
		memberID = in.NewMemberID
	}
	known := g.Members[memberID] != nil
	staticKnown := in.InstanceID != nil && g.staticMember(*in.InstanceID) != nil
	if !known && !staticKnown && int64(len(g.Members)) >= int64(cfg.MaxSize) { // J3
		return classicErr(kerr.GroupMaxSizeReached.Code, in.MemberID)
	}
	if in.ProtocolType != "consumer" || streamMetadata(in.Protocols) == nil { // J4
		return classicErr(kerr.InconsistentGroupProtocol.Code, in.MemberID)
	}
	if in.MemberID == "" && in.InstanceID == nil && in.RequireKnownMemberID { // J5
		return classicErr(kerr.MemberIDRequired.Code, memberID)
	}
	if in.Catalog == nil { // the catalog could not be read: retriable
		return classicErr(kerr.CoordinatorNotAvailable.Code, in.MemberID)
	}
	if g.Topology == nil {
		return classicErr(kerr.InconsistentGroupProtocol.Code, in.MemberID)
	}
	configured, _, err := g.configure(g.Topology, in.Catalog)
	if err != nil {
		return classicErr(kerr.InconsistentGroupProtocol.Code, in.MemberID)
	}
	decoded, err := checkClassicMetadata(in.ProtocolType, in.Protocols, configured) // J6
	if err != nil {
		return classicErr(kerr.InconsistentGroupProtocol.Code, in.MemberID)
	}

	var recs []log.Record
	var timers []TimerAction
	view := groupView{g: g}
	var stored, replaced *Member
	if in.InstanceID != nil {
		existing := g.staticMember(*in.InstanceID)
		switch {
		case existing != nil && in.MemberID != "" && existing.ID != in.MemberID: // J7
			return classicErr(kerr.FencedInstanceID.Code, in.MemberID)
		case existing != nil && in.MemberID == "": // J8: replacement, no release check (§4.9)
			oldTarget := g.Targets[existing.ID]
			recs = append(recs, memberTombstones(g.ID, existing)...)
			repl := existing.clone()
			repl.ID, repl.Epoch, repl.PreviousEpoch = memberID, 0, 0
			view.gone, view.repl, view.replTarget = existing.ID, repl.ID, oldTarget
			timers = append(timers, cancelAllTimers(g.ID, existing.ID)...)
			stored, replaced = repl, existing
			recs = append(recs, TargetMemberRecord(g.ID, repl.ID, oldTarget))
		case existing != nil:
			stored = existing
		default:
			stored = g.Members[memberID]
		}
	} else {
		stored = g.Members[memberID]
	}
	if stored != nil && stored.Classic == nil && view.repl == "" {
		// A streams member's id: streams members talk StreamsGroupHeartbeat only.
		return classicErr(kerr.UnknownMemberID.Code, in.MemberID)
	}
	isNew := stored == nil
	if isNew {
		stored = newMember(memberID) // J9: an unknown dynamic id is accepted as a new member
	}
	m := stored.shallow()
	if in.InstanceID != nil {
		m.InstanceID = in.InstanceID
	}
	m.ClientID, m.ClientHost, m.RebalanceTimeoutMs = in.ClientID, in.ClientHost, in.RebalanceTimeoutMs
	m.TopologyEpoch = g.Topology.Epoch
	sub := decoded.Subscription
	m.ProcessID, m.UserEndpoint, m.RackID, m.ClientTags = "", nil, nil, map[string]string{}
	if !sub.Future { // a future member takes no part in the assignment until it rejoins (§4.13)
		m.ProcessID, m.RackID = sub.ProcessIDString(), decoded.Outer.Rack
		if host, port, ok, _ := sub.Endpoint(); ok {
			m.UserEndpoint = &Endpoint{Host: host, Port: uint16(port)}
		}
		for _, t := range sub.ClientTags {
			m.ClientTags[t.Key] = t.Value
		}
	}
	m.Classic = &ClassicMember{SessionTimeoutMs: in.SessionTimeoutMs, Protocols: in.Protocols}

	// J10 and §4.7: the metadata bytes change at every join and are persisted, but only a new
	// member or an attribute the assignor uses bumps the group epoch.
	fresh := isNew || view.repl != ""
	if fresh || !sameMetadata(stored, m) {
		recs = append(recs, MemberMetadataRecord(g.ID, m))
	}
	if fresh || !m.Classic.equal(stored.Classic) {
		recs = append(recs, ClassicMemberRecord(g.ID, m))
	}
	bump := isNew || stored.ProcessID != m.ProcessID || !eqPtr(stored.RackID, m.RackID) || !equalConfigs(stored.ClientTags, m.ClientTags)
	if in.InstanceID == nil && !isNew {
		bump = bump || !eqEndpoint(stored.UserEndpoint, m.UserEndpoint) || !eqPtr(stored.InstanceID, m.InstanceID)
	}
	groupEpoch := g.Epoch
	if bump {
		groupEpoch++
		recs = append(recs, GroupMetadataRecord(g, groupEpoch, g.MetadataHash, g.ValidatedTopologyEpoch, g.AssignmentConfigs))
		g.soft.changedAt = in.Now.UnixMilli()
	}
	offsets := map[Task]int64{}
	if configured.Ready() {
		for _, o := range sub.TaskOffsetSums {
			if t := streamsTask(o.Task); o.OffsetSum >= 0 && validTask(t, configured) {
				offsets[t] = o.OffsetSum
			}
		}
	}
	view.self, view.offsets, view.endOffsets = m, offsets, g.soft.taskEndOffsets[m.ID]

	// J12: the target, then this member's reconciliation from what it owns.
	targetEpoch, target := g.AssignmentEpoch, view.target(m.ID)
	now := in.Now.UnixMilli()
	delayPending := in.Scheduled != nil && in.Scheduled(TimerKey(InitialDelayTimer, g.ID, ""))
	switch {
	case g.AssignmentEpoch >= groupEpoch || delayPending:
	case assignmentHeld(g, cfg, now):
	default:
		members := view.members()
		newTargets, err := computeTargets(members, configured, cfg, assignConfigs(cfg), view.taskOffsets(), view.taskEndOffsets())
		if err != nil {
			return classicErr(kerr.UnknownServerError.Code, in.MemberID)
		}
		targets := view.targets()
		for _, id := range sortedMemberIDs(members) {
			if old, had := targets[id]; !had || !old.SameTasks(newTargets[id]) {
				recs = append(recs, TargetMemberRecord(g.ID, id, newTargets[id]))
			}
		}
		recs = append(recs, TargetMetadataRecord(g.ID, groupEpoch, now))
		target, targetEpoch = newTargets[m.ID], groupEpoch
	}
	owned := Roles{ownedActives(decoded, configured), nil, nil}
	own := ownership{owners: g.owners, members: g.Members, self: m.ID, alias: view.gone}
	n, err := reconcile(m, targetEpoch, target, &owned, own)
	if err != nil {
		return classicErr(kerr.UnknownMemberID.Code, in.MemberID)
	}
	if fresh || !sameCurrent(n, stored) {
		recs = append(recs, CurrentMemberRecord(g.ID, n))
	}
	timers = append(timers, cancelTimer(ClassicJoinTimer, g.ID, n.ID),
		classicTimer(ClassicSessionTimer, g.ID, n.ID, in.SessionTimeoutMs),
		classicTimer(ClassicSyncTimer, g.ID, n.ID, in.RebalanceTimeoutMs))

	// Soft state.
	g.soft.catalog = in.Catalog
	if g.soft.taskOffsets == nil {
		g.soft.taskOffsets, g.soft.taskEndOffsets = map[string]map[Task]int64{}, map[string]map[Task]int64{}
	}
	g.soft.taskOffsets[n.ID] = offsets
	if sub.ErrorCode == 4 && g.soft.shutdownBy == "" {
		g.soft.shutdownBy = n.ID // a classic shutdown request (§4.12)
	}
	if !eqEndpoint(stored.UserEndpoint, n.UserEndpoint) || (!n.Assigned.Equal(stored.Assigned) && n.UserEndpoint != nil) {
		g.soft.endpointEpoch++
	}
	out := ClassicResult{MemberID: n.ID, Generation: n.Epoch, Records: recs, Timers: timers}
	if replaced != nil && replaced.Classic == nil {
		// J11 (§5.4): a static classic member replacing the last streams member downgrades the
		// group with the replacement in it; the rebalance that follows is always prepared.
		after := *g
		after.Members = make(map[string]*Member, len(g.Members))
		for id, mem := range g.Members {
			if id != replaced.ID {
				after.Members[id] = mem
			}
		}
		after.Members[n.ID] = n
		if dg := downgradeOf(&after, nil, cfg.DowngradeSettings(in.Catalog, in.Now)); dg != nil {
			out.Downgrade = dg
			if dg.Converted {
				out.Records = s.Tombstones(g.ID)
				for id := range g.Members {
					out.Timers = append(out.Timers, cancelAllTimers(g.ID, id)...)
				}
				out.Timers = append(out.Timers, cancelAllTimers(g.ID, n.ID)...)
			}
		}
	}
	return out
}

func cancelAllTimers(group, member string) []TimerAction {
	var out []TimerAction
	for _, k := range []TimerKind{SessionTimer, RebalanceTimer, ClassicSessionTimer, ClassicJoinTimer, ClassicSyncTimer} {
		out = append(out, cancelTimer(k, group, member))
	}
	return out
}

// classicMember resolves a classic request's member (§4.3 S1-S4, §4.4 step 1).
func (s *State) classicMember(group, member string, instance *string) (*Group, *Member, int16) {
	g := s.Groups[group]
	if g == nil || len(g.Members) == 0 {
		return nil, nil, kerr.UnknownMemberID.Code
	}
	m := g.Members[member]
	if instance != nil {
		e := g.staticMember(*instance)
		switch {
		case e == nil:
			return nil, nil, kerr.UnknownMemberID.Code
		case e.ID != member:
			return nil, nil, kerr.FencedInstanceID.Code
		}
	}
	if m == nil || m.Classic == nil {
		return nil, nil, kerr.UnknownMemberID.Code
	}
	return g, m, 0
}

// ClassicSync runs a SyncGroup against a streams group (§4.3). protocolType and protocol are
// the request's (nil before v5).
func (s *State) ClassicSync(group, member string, instance *string, generation int32, protocolType, protocol *string, cat Catalog, cfg Config, now time.Time, scheduled func(string) bool) ClassicResult {
	g, m, code := s.classicMember(group, member, instance)
	if code != 0 {
		return classicErr(code, member)
	}
	if generation != m.Epoch { // S5
		return classicErr(kerr.IllegalGeneration.Code, member)
	}
	if (protocolType != nil && *protocolType != "consumer") || (protocol != nil && *protocol != ClassicProtocolName) { // S6
		return classicErr(kerr.InconsistentGroupProtocol.Code, member)
	}
	if g.AssignmentEpoch > m.Epoch && m.State != UnrevokedTasks { // S7
		out := classicErr(kerr.RebalanceInProgress.Code, member)
		if scheduled == nil || !scheduled(TimerKey(ClassicJoinTimer, g.ID, m.ID)) {
			out.Timers = append(out.Timers, classicTimer(ClassicJoinTimer, g.ID, m.ID, m.RebalanceTimeoutMs))
		}
		return out
	}
	decoded, err := m.Classic.decode()
	if err != nil {
		return classicErr(kerr.InconsistentGroupProtocol.Code, member)
	}
	configured, _, err := g.configure(g.Topology, cat)
	if err != nil {
		configured = nil
	}
	shutdown := g.soft.shutdownBy != ""
	a, err := classicAssignment(ClassicAssignmentInput{Member: m, Decoded: decoded, Members: g.Members, Configured: configured,
		Shutdown: shutdown, Now: now, TaskOffsetInterval: cfg.TaskOffsetInterval})
	if err != nil {
		return classicErr(kerr.UnknownServerError.Code, member)
	}
	if shutdown {
		if g.soft.shutdownSent == nil {
			g.soft.shutdownSent = map[string]bool{}
		}
		g.soft.shutdownSent[m.ID] = true
	}
	return ClassicResult{MemberID: m.ID, Generation: m.Epoch, Assignment: a, Timers: []TimerAction{
		cancelTimer(ClassicSyncTimer, g.ID, m.ID), classicTimer(ClassicSessionTimer, g.ID, m.ID, m.Classic.SessionTimeoutMs)}}
}

// ClassicHeartbeat runs a Heartbeat against a streams group (§4.4). Besides §4.4's reasons, a
// member is prompted to rejoin when the group epoch is ahead of the target and nothing delays
// the next one (no initial delay pending, the assignment interval elapsed): a target is
// computed only by a join or a streams member's heartbeat, so in a group of classic members
// alone (a downgrade refused: policy, size, a description held by the plugin) the tasks of a
// member that left or expired would otherwise stay unassigned for good.
func (s *State) ClassicHeartbeat(group, member string, instance *string, generation int32, cfg Config, now time.Time, scheduled func(string) bool) ClassicResult {
	g, m, code := s.classicMember(group, member, instance)
	if code != 0 {
		return classicErr(code, member)
	}
	if generation != m.Epoch {
		return classicErr(kerr.IllegalGeneration.Code, member)
	}
	out := ClassicResult{MemberID: m.ID, Generation: m.Epoch, Timers: []TimerAction{classicTimer(ClassicSessionTimer, g.ID, m.ID, m.Classic.SessionTimeoutMs)}}
	shutdownPending := g.soft.shutdownBy != "" && !g.soft.shutdownSent[m.ID]
	targetDue := g.Epoch > g.AssignmentEpoch && (scheduled == nil || !scheduled(TimerKey(InitialDelayTimer, g.ID, ""))) &&
		!assignmentHeld(g, cfg, now.UnixMilli())
	if m.Epoch < g.AssignmentEpoch || targetDue || m.State == UnrevokedTasks || (m.State == UnreleasedTasks && g.grantable(m)) || shutdownPending {
		out.Code = kerr.RebalanceInProgress.Code
		if scheduled == nil || !scheduled(TimerKey(ClassicJoinTimer, g.ID, m.ID)) {
			out.Timers = append(out.Timers, classicTimer(ClassicJoinTimer, g.ID, m.ID, m.RebalanceTimeoutMs))
		}
	}
	return out
}

// grantable reports whether a task the member waits for has been released (§4.4 step 3).
func (g *Group) grantable(m *Member) bool {
	own := ownership{owners: g.owners, members: g.Members, self: m.ID}
	target := g.Targets[m.ID]
	for role := range target {
		for t := range target[role] {
			if _, ok := m.Assigned[role][t]; ok {
				continue
			}
			if !own.blocked(Role(role), t, m) {
				return true
			}
		}
	}
	return false
}

// ClassicLeaveIdentity is one member a LeaveGroup names.
type ClassicLeaveIdentity struct {
	MemberID   string
	InstanceID *string
}

// ClassicLeave runs a LeaveGroup against a streams group with classic members (§4.5): every
// valid classic identity is removed in one event with one epoch bump; identities naming a
// streams member or nobody get UNKNOWN_MEMBER_ID, a mismatched instance FENCED_INSTANCE_ID.
func (s *State) ClassicLeave(group string, ids []ClassicLeaveIdentity, ds DowngradeSettings) (codes []int16, recs []log.Record, timers []TimerAction, dg *Downgrade) {
	g := s.Groups[group]
	codes = make([]int16, len(ids))
	removed := map[string]bool{}
	var order []string
	for i, id := range ids {
		var m *Member
		if id.InstanceID != nil {
			m = g.staticMember(*id.InstanceID)
			if m != nil && id.MemberID != "" && m.ID != id.MemberID {
				codes[i] = kerr.FencedInstanceID.Code
				continue
			}
		} else {
			m = g.Members[id.MemberID]
		}
		if m == nil || m.Classic == nil {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		if !removed[m.ID] {
			removed[m.ID] = true
			order = append(order, m.ID)
		}
	}
	if len(order) == 0 {
		return codes, nil, nil, nil
	}
	recs, timers, dg = s.removeMembers(g, order, ds)
	return codes, recs, timers, dg
}

// ClassicFence is the expiry of a classic member's session, join or sync timer (§4.8).
func (s *State) ClassicFence(group, member string, ds DowngradeSettings) ([]log.Record, []TimerAction, *Downgrade) {
	g := s.Groups[group]
	if g == nil {
		return nil, nil, nil
	}
	if m := g.Members[member]; m == nil || m.Classic == nil {
		return nil, nil, nil
	}
	return s.removeMembers(g, []string{member}, ds)
}
