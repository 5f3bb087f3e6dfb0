package consumer

import (
	"fmt"
	"github.com/coordinatord/coordinatord/internal/state/assigntiming"
	"hash/fnv"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Catalog is the topic catalog a heartbeat resolves subscriptions against (*meta.Snapshot).
type Catalog interface {
	Topic(name string) (*meta.Topic, bool)
	TopicByID(id [16]byte) (*meta.Topic, bool)
	Topics() []*meta.Topic
}

// TimerKind names the consumer group timers.
type TimerKind int

const (
	SessionTimer TimerKind = iota
	RebalanceTimer
	// SyncTimer removes a classic member that sent JoinGroup but no SyncGroup within its
	// rebalance timeout (Kafka's scheduleConsumerGroupSyncTimeout). Not re-armed after a load,
	// as Kafka does not either: the member's session timer still bounds it.
	SyncTimer
	// JoinTimer removes a classic member told to rejoin (a Heartbeat answered
	// REBALANCE_IN_PROGRESS) that sends no JoinGroup within its rebalance timeout, counted from
	// the first such answer (Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent). Not re-armed
	// after a load, as Kafka does not either.
	JoinTimer
)

// TimerAction asks the shard to arm or cancel a timer.
type TimerAction struct {
	Kind   TimerKind
	Group  string
	Member string
	Epoch  int32 // rebalance timer: the member epoch it was armed at
	After  time.Duration
	Cancel bool
	// IfAbsent leaves an armed timer with the same key as it is.
	IfAbsent bool
	// key, when set, is Key() worked out beforehand (a member's cached session timer key).
	key string
}

const sessionPrefix = "consumer-session\x00"

// TimerKey is the runtime timer key of a consumer group timer.
func TimerKey(kind TimerKind, group, member string) string {
	switch kind {
	case SessionTimer:
		return sessionPrefix + group + "\x00" + member
	case SyncTimer:
		return "consumer-sync\x00" + group + "\x00" + member
	case JoinTimer:
		return "consumer-join\x00" + group + "\x00" + member
	}
	return "consumer-rebalance\x00" + group + "\x00" + member
}

// Key is the action's timer key.
func (a TimerAction) Key() string {
	if a.key != "" {
		return a.key
	}
	return TimerKey(a.Kind, a.Group, a.Member)
}

// HeartbeatInput is one ConsumerGroupHeartbeat that passed ValidateRequest.
type HeartbeatInput struct {
	Req        *kmsg.ConsumerGroupHeartbeatRequest
	ClientID   string
	ClientHost string
	Catalog    Catalog
	Config     Config
	Now        time.Time
	// NewMemberID is the id given to a v0 joiner that sent none (the server generates it).
	NewMemberID string
	// Describable reports whether the heartbeating client may describe a topic; nil: every
	// topic. A regex resolved by this heartbeat keeps only such topics, as Kafka 4.4 filters a
	// regex refresh by the principal of the heartbeat that triggered it.
	Describable func(topic string) bool
	// Foreign reports whether another group type owns the id, whether that group is an empty
	// classic group a join converts, and the records that delete it.
	Foreign func(group string) (owned, convertible bool, tombstones []log.Record)

	// classic is the classic-protocol metadata of a JoinGroup run as a heartbeat; nil for a
	// ConsumerGroupHeartbeat (which makes a classic member a consumer-protocol one).
	classic *ClassicInfo
	// keepTarget: reconcile against the target as it is, never compute a new one (a JoinGroup
	// that downgrades the group, as Kafka's classicGroupJoinToConsumerGroup does then).
	keepTarget bool
}

// HeartbeatOutput is the outcome of a heartbeat.
type HeartbeatOutput struct {
	Response *kmsg.ConsumerGroupHeartbeatResponse
	Records  []log.Record
	Timers   []TimerAction
	// Ticket, when set, lets the caller answer a repeat of this exact request with Response,
	// without the shard, while the group's shard finds Ticket valid (runtime.Shard.Valid with Session); set by the shard's
	// operation for a steady heartbeat only.
	Ticket  *runtime.Ticket
	Session time.Duration

	// groupEpoch is the group epoch the records leave.
	groupEpoch int32
}

// ErrorResponse is a heartbeat error response.
func ErrorResponse(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	r.ErrorCode = code
	if msg != "" {
		r.ErrorMessage = &msg
	}
	return r
}

func fail(err *kerr.Error, format string, args ...any) HeartbeatOutput {
	return HeartbeatOutput{Response: ErrorResponse(err.Code, fmt.Sprintf(format, args...))}
}

// ValidateRequest applies Kafka 4.4's request checks that need no group state, in its order.
// It returns 0 when the request may go to the shard.
func ValidateRequest(req *kmsg.ConsumerGroupHeartbeatRequest, cfg Config) (int16, string) {
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	inv := kerr.InvalidRequest.Code
	// v1 (KIP-1082) members generate their id; a v0 joiner may leave it to the server.
	if (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == -1) && blank(req.MemberID) {
		return inv, "MemberId can't be empty."
	}
	switch {
	case blank(req.Group):
		return inv, "GroupId can't be empty."
	case req.InstanceID != nil && blank(*req.InstanceID):
		return inv, "InstanceId can't be empty."
	case req.RackID != nil && blank(*req.RackID):
		return inv, "RackId can't be empty."
	}
	switch {
	case req.MemberEpoch == 0:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return inv, "RebalanceTimeoutMs must be provided in first request."
		case req.Topics == nil || len(req.Topics) > 0:
			return inv, "TopicPartitions must be empty when (re-)joining."
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return inv, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
		}
	case req.MemberEpoch == -2 && req.InstanceID == nil:
		return inv, "InstanceId can't be null."
	case req.MemberEpoch < -2:
		return inv, "MemberEpoch is invalid."
	}
	if req.ServerAssignor != nil && !cfg.HasAssignor(*req.ServerAssignor) {
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %s.", *req.ServerAssignor, strings.Join(cfg.Assignors, ", "))
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compile(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %s.", *req.SubscribedTopicRegex, err)
		}
	}
	return 0, ""
}

// compile compiles a subscription regex as Kafka's RE2J full match; the error is RE2's
// description (which is also RE2J's), without Go's prefix.
func compile(expr string) (*regexp.Regexp, error) {
	if _, err := syntax.Parse(expr, syntax.Perl); err != nil {
		if se, ok := err.(*syntax.Error); ok {
			return nil, fmt.Errorf("%s", se.Code)
		}
		return nil, err
	}
	return regexp.Compile("^(?:" + expr + ")$")
}

// Heartbeat runs a ConsumerGroupHeartbeat that passed ValidateRequest.
func (s *State) Heartbeat(in HeartbeatInput) HeartbeatOutput {
	if in.Req.MemberEpoch < 0 {
		return s.leave(in)
	}
	return s.heartbeat(in)
}

func (s *State) foreign(in HeartbeatInput) (owned, convertible bool, tombs []log.Record) {
	if in.Foreign == nil {
		return false, false, nil
	}
	return in.Foreign(in.Req.Group)
}

func (s *State) leave(in HeartbeatInput) HeartbeatOutput {
	req := in.Req
	g := s.Groups[req.Group]
	if g == nil {
		if owned, _, _ := s.foreign(in); owned {
			return fail(kerr.GroupIDNotFound, "Group %s is not a consumer group.", req.Group)
		}
		return fail(kerr.GroupIDNotFound, "Group %s not found.", req.Group)
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
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberID, resp.MemberEpoch = &req.MemberID, req.MemberEpoch
	if req.MemberEpoch == -2 {
		// A static member leaving temporarily keeps its partitions (nobody else gets them)
		// until it comes back or its session times out.
		n := m.shallow()
		n.Epoch = -2
		return HeartbeatOutput{Response: resp, Records: []log.Record{CurrentMemberRecord(g.ID, n)}}
	}
	recs, timers := fenceRecords(g, m.ID)
	return HeartbeatOutput{Response: resp, Records: recs, Timers: timers}
}

// fenceRecords remove a member and bump the group epoch so the others get its partitions. The
// last member leaving also moves the (empty) target to the new epoch, with no computation time,
// so that the next member to join is assigned at once.
//
// As in Kafka, the new epoch carries the hash of the subscriptions without the member, so the
// survivors' next heartbeats do not find a topic only it subscribed to gone and bump again. The
// catalog is the last snapshot a heartbeat of the group read (a timer has none of its own): if
// the catalog changed since, the next heartbeat sees that and bumps, as it would anyway.
func fenceRecords(g *Group, member string) ([]log.Record, []TimerAction) {
	hash := g.MetadataHash
	if g.soft.snap != nil {
		hash = metadataHash(g.subscribedTopics(g.soft.snap, nil, g.Members[member]))
	}
	recs := append(memberTombstones(g, member), GroupMetadataRecord(g.ID, g.Epoch+1, hash))
	if len(g.Members) == 1 {
		recs = append(recs, TargetMetadataRecord(g.ID, g.Epoch+1, 0))
	}
	return recs, memberTimerCancels(g.ID, member)
}

// memberTimerCancels cancel every timer a member may have armed.
func memberTimerCancels(group, member string) []TimerAction {
	return []TimerAction{
		{Kind: SessionTimer, Group: group, Member: member, Cancel: true},
		{Kind: RebalanceTimer, Group: group, Member: member, Cancel: true},
		{Kind: SyncTimer, Group: group, Member: member, Cancel: true},
		{Kind: JoinTimer, Group: group, Member: member, Cancel: true},
	}
}

// Fence is the expiry of a session or rebalance timer: it removes the member if it still
// exists (and, for a rebalance timer, is still at the epoch the timer was armed at).
func (s *State) Fence(group, member string, epoch int32, checkEpoch bool) ([]log.Record, []TimerAction) {
	g := s.Groups[group]
	if g == nil {
		return nil, nil
	}
	m := g.Members[member]
	if m == nil || (checkEpoch && m.Epoch != epoch) {
		return nil, nil
	}
	return fenceRecords(g, member)
}

func eqPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func sameMetadata(a, b *Member) bool {
	return eqPtr(a.InstanceID, b.InstanceID) && eqPtr(a.RackID, b.RackID) && a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		a.RebalanceTimeoutMs == b.RebalanceTimeoutMs && sameSubscription(a, b) && a.ServerAssignor == b.ServerAssignor
}

func sameSubscription(a, b *Member) bool {
	if a.SubscribedTopicRegex != b.SubscribedTopicRegex || len(a.SubscribedTopicNames) != len(b.SubscribedTopicNames) {
		return false
	}
	for i := range a.SubscribedTopicNames {
		if a.SubscribedTopicNames[i] != b.SubscribedTopicNames[i] {
			return false
		}
	}
	return true
}

func ownedFromWire(l []kmsg.ConsumerGroupHeartbeatRequestTopic) Parts {
	if l == nil {
		return nil
	}
	out := Parts{}
	for _, t := range l {
		for _, p := range t.Partitions {
			out[TP{Topic: t.TopicID, Partition: p}] = struct{}{}
		}
	}
	return out
}

func subset(owned, assigned Parts) bool {
	for tp := range owned {
		if !assigned.has(tp) {
			return false
		}
	}
	return true
}

func (s *State) heartbeat(in HeartbeatInput) HeartbeatOutput {
	out, _ := s.heartbeatMember(in)
	return out
}

// heartbeatMember is heartbeat that also returns the member as the records leave it (nil on
// error): the classic-protocol path of online migration answers from it.
func (s *State) heartbeatMember(in HeartbeatInput) (HeartbeatOutput, *Member) {
	req, cfg := in.Req, in.Config
	var recs []log.Record
	var timers []TimerAction
	g := s.Groups[req.Group]
	if g == nil {
		if owned, convertible, tombs := s.foreign(in); owned {
			if req.MemberEpoch != 0 || !convertible {
				return fail(kerr.GroupIDNotFound, "Group %s is not a consumer group.", req.Group), nil
			}
			recs = append(recs, tombs...)
		}
		if req.MemberEpoch != 0 {
			return fail(kerr.GroupIDNotFound, "Consumer group %s not found.", req.Group), nil
		}
		g = newGroup(req.Group) // lives only in this operation until its records are replayed
	}
	if s.Groups[req.Group] != nil { // a group this heartbeat creates is noted by its next one
		s.NoteCatalog(req.Group, in.Catalog)
	}
	// Only this operation's resolutions may use this client's filter.
	g.describable = in.Describable
	defer func() { g.describable = nil }()
	memberID := req.MemberID
	if memberID == "" {
		memberID = in.NewMemberID
	}
	if g.full(cfg, req.MemberID, req.InstanceID) {
		return fail(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", cfg.MaxSize), nil
	}

	// Member resolution.
	var stored *Member
	view := groupView{g: g}
	if req.InstanceID == nil {
		stored = g.Members[memberID]
		if stored == nil && req.MemberEpoch != 0 {
			return fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, req.Group), nil
		}
	} else {
		existing := g.staticMember(*req.InstanceID)
		if req.MemberEpoch == 0 {
			switch {
			case existing == nil:
				stored = g.Members[memberID]
			case existing.Epoch != -2 && in.classic == nil && existing.Classic == nil:
				// Between consumer-protocol members only: a classic member, joining or held,
				// is replaced at once, as the classic protocol replaces a static member that
				// rejoins with a new member id (Kafka 4.4 does the same in a consumer group).
				return fail(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, *req.InstanceID, existing.ID), nil
			default:
				// Replacement: the new member id inherits the old one's partitions and target.
				oldTarget := g.Targets[existing.ID]
				recs = append(recs, memberTombstones(g, existing.ID)...)
				repl := existing.shallow()
				repl.ID, repl.Epoch, repl.PreviousEpoch = memberID, 0, 0
				// The replacement's classic metadata (if any) is written below like a new
				// member's; the replaced one's went with its tombstones.
				repl.Classic = nil
				recs = append(recs, MemberMetadataRecord(g.ID, repl), TargetMemberRecord(g.ID, repl.ID, oldTarget), CurrentMemberRecord(g.ID, repl))
				view.gone, view.repl, view.replTarget = existing.ID, repl.ID, oldTarget
				timers = append(timers, memberTimerCancels(g.ID, existing.ID)...)
				stored = repl
			}
		} else {
			switch {
			case existing == nil:
				return fail(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID), nil
			case existing.ID != memberID:
				return fail(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, *req.InstanceID, existing.ID), nil
			}
			stored = existing
		}
	}
	owned := ownedFromWire(req.Topics)
	if req.MemberEpoch > 0 {
		switch {
		case req.MemberEpoch > stored.Epoch:
			return fail(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, stored.Epoch), nil
		case req.MemberEpoch < stored.Epoch:
			// The answer carrying the newer epoch may have been lost: the previous epoch with a
			// subset of the current partitions is accepted.
			if req.MemberEpoch != stored.PreviousEpoch || req.Topics == nil || !subset(owned, stored.Assigned) {
				return fail(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, stored.Epoch), nil
			}
		}
	}
	isNew := stored == nil
	if isNew {
		stored = newMember(memberID)
	}

	// The member as this heartbeat updates it. A heartbeat that changes none of its fields (a
	// steady one sends them as null) uses the stored member itself: nothing below writes to m,
	// and copying it was one allocation of every steady heartbeat.
	m := stored
	if isNew || !unchangedBy(stored, in) {
		m = stored.shallow()
		updateMember(m, in)
	}
	bump := false
	var memberRec []log.Record
	if isNew || !sameMetadata(stored, m) {
		memberRec = append(memberRec, MemberMetadataRecord(g.ID, m))
	}
	if m.Classic != nil && (isNew || !m.Classic.equal(stored.Classic)) {
		memberRec = append(memberRec, ClassicMemberRecord(g.ID, m.ID, m.Classic))
	} else if m.Classic == nil && stored.Classic != nil {
		memberRec = append(memberRec, classicTombstone(g.ID, m.ID))
	}
	if isNew || !sameMetadata(stored, m) {
		if !eqPtr(stored.RackID, m.RackID) || (isNew || !sameSubscription(stored, m)) && !onlyNewIdleRegex(g, stored, m, in.Catalog) {
			bump = true
		}
	}
	view.self = m

	// Subscribed topics and their metadata: a topic appearing, vanishing or growing changes
	// the hash, and that bumps the group epoch so the next assignment covers it.
	hash := view.subscriptionHash(in.Catalog, s, stored, isNew)
	if hash != g.MetadataHash {
		bump = true
	}
	groupEpoch := g.Epoch
	var groupRec []log.Record
	now := in.Now.UnixMilli()
	if bump {
		groupEpoch++
		groupRec = append(groupRec, GroupMetadataRecord(g.ID, groupEpoch, hash))
		g.changedAt = now
	}

	// Target assignment, at most once per assignment interval (the first one at once), or
	// sooner once the group has been quiet (see assignmentDue). As in Kafka, a target held back
	// is computed by a later heartbeat, of any member; nothing computes it without one.
	targetEpoch := g.AssignmentEpoch
	target := view.target(m.ID)
	var targetRecs []log.Record
	if groupEpoch > g.AssignmentEpoch && !in.keepTarget && assignmentDue(g, cfg, now) {
		members := view.members()
		targets, err := computeTargets(members, view.targets(), preferredAssignor(members, cfg), in.Catalog, g, s)
		if err != nil {
			return fail(kerr.UnknownServerError, ""), nil
		}
		old := view.targets()
		for _, id := range sortedIDs(members) {
			if prev, had := old[id]; !had || !prev.Equal(targets[id]) {
				targetRecs = append(targetRecs, TargetMemberRecord(g.ID, id, targets[id]))
			}
		}
		targetRecs = append(targetRecs, TargetMetadataRecord(g.ID, groupEpoch, now))
		target, targetEpoch = targets[m.ID], groupEpoch
	}

	// Reconciliation.
	if req.MemberEpoch == 0 {
		owned = Parts{} // a (re)joining member owns nothing
	}
	own := ownership{g: g, self: m.ID, alias: view.gone}
	n, err := reconcile(m, targetEpoch, target, owned, req.Topics != nil || req.MemberEpoch == 0, own)
	if err != nil {
		return fail(kerr.FencedMemberEpoch, "%s", err.Error()), nil
	}
	var currentRec []log.Record
	if isNew || !sameCurrent(n, stored) {
		currentRec = append(currentRec, CurrentMemberRecord(g.ID, n))
		if n.Classic != nil {
			// As in Kafka, a classic member owing a revocation is bounded by the join and sync
			// timers of its rejoin, not by the consumer protocol's rebalance timer.
			timers = append(timers, TimerAction{Kind: RebalanceTimer, Group: g.ID, Member: n.ID, Cancel: true})
		} else if n.State == UnrevokedPartitions {
			timers = append(timers, TimerAction{Kind: RebalanceTimer, Group: g.ID, Member: n.ID, Epoch: n.Epoch, After: time.Duration(max(n.RebalanceTimeoutMs, 0)) * time.Millisecond})
		} else {
			timers = append(timers, TimerAction{Kind: RebalanceTimer, Group: g.ID, Member: n.ID, Cancel: true})
		}
	}
	// n, m and stored share the member id; stored is the group's member, where the key cache
	// outlives this heartbeat.
	timers = append(timers, TimerAction{Kind: SessionTimer, Group: g.ID, Member: n.ID, After: cfg.SessionTimeout, key: stored.sessionTimerKey(g.ID)})

	recs = append(recs, memberRec...)
	recs = append(recs, groupRec...)
	recs = append(recs, targetRecs...)
	recs = append(recs, currentRec...)

	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	// A member's ID is never written once the member is in a group or a record (a replacement
	// renames its own fresh copy above), so the answer may point at it instead of at a copy.
	resp.MemberID, resp.MemberEpoch = &m.ID, n.Epoch
	resp.HeartbeatIntervalMillis = int32(cfg.HeartbeatInterval.Milliseconds())
	// A full request (a join, or every field a member sends after an error) gets the whole
	// assignment; otherwise only a changed one is sent.
	full := req.MemberEpoch == 0 || (req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || !n.Assigned.Equal(stored.Assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		for _, t := range n.Assigned.Sorted() {
			wt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			wt.TopicID, wt.Partitions = t.Topic, t.Partitions
			a.Topics = append(a.Topics, wt)
		}
		resp.Assignment = &a
	}
	return HeartbeatOutput{Response: resp, Records: recs, Timers: timers, groupEpoch: groupEpoch}, n
}

// onlyNewIdleRegex reports whether the only change of m's subscription is a regex that no
// other member of the group uses and that matches no topic. Kafka 4.4 resolves a regex new to
// the group in the background and bumps the group epoch only if the resolution finds topics;
// a regex matching nothing leaves the epoch alone (the member joins at the current epoch with
// nothing). Here the regex is resolved now, so its emptiness is known now; the topics it
// comes to match later change the metadata hash, which bumps then, as Kafka's refresh does.
// A group's first member joining so stays at the new group's epoch 1, as on Kafka 4.4. Names
// changed, or a regex dropped or replaced (its topics may be in the member's target), still
// bump.
func onlyNewIdleRegex(g *Group, stored, m *Member, cat Catalog) bool {
	if m.SubscribedTopicRegex == "" || stored.SubscribedTopicRegex != "" || g.regexes[m.SubscribedTopicRegex] > 0 {
		return false
	}
	if len(stored.SubscribedTopicNames) != len(m.SubscribedTopicNames) {
		return false
	}
	for i := range m.SubscribedTopicNames {
		if stored.SubscribedTopicNames[i] != m.SubscribedTopicNames[i] {
			return false
		}
	}
	return cat != nil && len(g.resolve(m.SubscribedTopicRegex, cat)) == 0
}

// updateMember writes a heartbeat's fields to m, a copy of the stored member.
func updateMember(m *Member, in HeartbeatInput) {
	req := in.Req
	if req.InstanceID != nil {
		m.InstanceID = req.InstanceID
	}
	if req.RackID != nil {
		m.RackID = req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		m.ServerAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		names := append([]string(nil), req.SubscribedTopicNames...)
		sort.Strings(names)
		m.SubscribedTopicNames = dedup(names)
	}
	if req.SubscribedTopicRegex != nil {
		m.SubscribedTopicRegex = *req.SubscribedTopicRegex
	}
	m.ClientID, m.ClientHost = in.ClientID, in.ClientHost
	m.Classic = in.classic
}

// unchangedBy reports whether updateMember would leave a copy of m equal to m (what
// sameMetadata and the classic checks compare), without making the copy.
func unchangedBy(m *Member, in HeartbeatInput) bool {
	req := in.Req
	return in.classic == nil && m.Classic == nil && m.ClientID == in.ClientID && m.ClientHost == in.ClientHost &&
		(req.InstanceID == nil || eqPtr(req.InstanceID, m.InstanceID)) &&
		(req.RackID == nil || eqPtr(req.RackID, m.RackID)) &&
		(req.RebalanceTimeoutMillis == -1 || req.RebalanceTimeoutMillis == m.RebalanceTimeoutMs) &&
		(req.ServerAssignor == nil || *req.ServerAssignor == m.ServerAssignor) &&
		(req.SubscribedTopicNames == nil || sameSortedNames(req.SubscribedTopicNames, m.SubscribedTopicNames)) &&
		(req.SubscribedTopicRegex == nil || *req.SubscribedTopicRegex == m.SubscribedTopicRegex)
}

// sameSortedNames reports whether names, sorted and deduplicated, are have (which is sorted and
// deduplicated). Only names already in strictly increasing order are recognised: any other
// order is left to updateMember, which sorts a copy.
func sameSortedNames(names, have []string) bool {
	if len(names) != len(have) {
		return false
	}
	for i := range names {
		if names[i] != have[i] || (i > 0 && names[i] <= names[i-1]) {
			return false
		}
	}
	return true
}

// assignmentDue reports whether the group may compute a target now (the interval, or the quiet
// time of coordinatord: assigntiming).
func assignmentDue(g *Group, cfg Config, now int64) bool {
	return assigntiming.Due(g.AssignmentTime, g.changedAt, now, cfg.AssignmentInterval, cfg.AssignmentQuiet)
}

func dedup(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// groupView is the group with one heartbeat's changes applied: a static member replaced (gone
// by repl, who inherits its target) and the heartbeating member's new metadata (self).
type groupView struct {
	g          *Group
	gone, repl string
	replTarget Parts
	self       *Member
}

func (v *groupView) target(id string) Parts {
	if v.repl != "" && id == v.repl {
		return v.replTarget
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

func (v *groupView) targets() map[string]Parts {
	out := make(map[string]Parts, len(v.g.Targets)+1)
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

// subscriptionHash is metadataHash of the view's subscribed topics. A steady member's heartbeat
// (same subscription, nobody replaced) reuses the hash the group's subscriptions gave against
// the same catalog snapshot: the hash is a function of the snapshot and the subscription
// indexes alone, and rebuilding the topic set on every heartbeat was a tenth of a consumer
// heartbeat's CPU.
func (v *groupView) subscriptionHash(cat Catalog, s *State, stored *Member, isNew bool) int64 {
	snap, _ := cat.(*meta.Snapshot)
	steady := snap != nil && !isNew && v.gone == "" && stored.hasMetadata && v.g.Members[stored.ID] == stored &&
		sameSubscription(stored, v.self)
	g := v.g
	if snap != nil && g.soft.snap != snap {
		g.soft = soft{snap: snap, resolved: map[string][]string{}} // fenceRecords reads it too
	}
	if steady && g.soft.hashed && g.soft.hashedGen == g.subscriptionsGen {
		return g.soft.hash
	}
	hash := metadataHash(v.subscribedTopics(cat, s))
	if steady {
		g.soft.hash, g.soft.hashed, g.soft.hashedGen = hash, true, g.subscriptionsGen
	}
	return hash
}

// subscribedTopics are the existing topics any member of the view subscribes to, by name
// or by regex, with the heartbeating member's new subscription in place of its stored one.
// A static member rejoining under its own member id replaces itself (gone is its own id):
// its stored subscription is left out once, not twice.
func (v *groupView) subscribedTopics(cat Catalog, s *State) map[string]*meta.Topic {
	if v.gone == "" || v.gone == v.self.ID {
		return v.g.subscribedTopics(cat, v.self, v.g.Members[v.self.ID])
	}
	return v.g.subscribedTopics(cat, v.self, v.g.Members[v.self.ID], v.g.Members[v.gone])
}

// subscribedTopics are the existing topics the group's members subscribe to, by name or by
// regex, with the subscriptions of without left out and with's added. It reads the group's
// subscription indexes, so it costs O(subscribed topics), not O(members).
func (g *Group) subscribedTopics(cat Catalog, with *Member, without ...*Member) map[string]*meta.Topic {
	names := make(map[string]int, len(g.names)+1)
	for n, c := range g.names {
		names[n] = c
	}
	regexes := make(map[string]int, len(g.regexes)+1)
	for r, c := range g.regexes {
		regexes[r] = c
	}
	for _, m := range without {
		if m == nil || !m.hasMetadata {
			continue
		}
		for _, n := range m.SubscribedTopicNames {
			names[n]--
		}
		if m.SubscribedTopicRegex != "" {
			regexes[m.SubscribedTopicRegex]--
		}
	}
	if with != nil {
		for _, n := range with.SubscribedTopicNames {
			names[n]++
		}
		if with.SubscribedTopicRegex != "" {
			regexes[with.SubscribedTopicRegex]++
		}
	}
	out := map[string]*meta.Topic{}
	if cat == nil {
		return out
	}
	for n, c := range names {
		if c <= 0 {
			continue
		}
		if t, ok := cat.Topic(n); ok {
			out[n] = t
		}
	}
	for r, c := range regexes {
		if c <= 0 {
			continue
		}
		for _, n := range g.resolve(r, cat) {
			if t, ok := cat.Topic(n); ok {
				out[n] = t
			}
		}
	}
	return out
}

// resolve lists the topics a regex matches and the heartbeating client may describe, cached
// per catalog snapshot: as in Kafka, a resolution holds for the whole group until the topics
// change, whichever member's heartbeat made it.
func (g *Group) resolve(expr string, cat Catalog) []string {
	snap, _ := cat.(*meta.Snapshot)
	if snap != nil && g.soft.snap == snap {
		if l, ok := g.soft.resolved[expr]; ok {
			return l
		}
	} else if snap != nil {
		g.soft = soft{snap: snap, resolved: map[string][]string{}}
	}
	re, err := compile(expr)
	var out []string
	if err == nil {
		for _, t := range cat.Topics() {
			if re.MatchString(t.Name) && (g.describable == nil || g.describable(t.Name)) {
				out = append(out, t.Name)
			}
		}
		sort.Strings(out)
	}
	if snap != nil {
		g.soft.resolved[expr] = out
	}
	return out
}

// memberTopics are the ids of the existing topics one member subscribes to.
func memberTopics(m *Member, cat Catalog, g *Group) [][16]byte {
	seen := map[[16]byte]bool{}
	var out [][16]byte
	addName := func(n string) {
		if t, ok := cat.Topic(n); ok && !seen[t.ID] {
			seen[t.ID] = true
			out = append(out, t.ID)
		}
	}
	for _, n := range m.SubscribedTopicNames {
		addName(n)
	}
	if m.SubscribedTopicRegex != "" {
		for _, n := range g.resolve(m.SubscribedTopicRegex, cat) {
			addName(n)
		}
	}
	return out
}

// metadataHash hashes the subscribed topics that exist: name, id and partition count.
func metadataHash(topics map[string]*meta.Topic) int64 {
	if len(topics) == 0 {
		return 0
	}
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	h := fnv.New64a()
	for _, n := range names {
		t := topics[n]
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(t.ID[:])
		h.Write([]byte{byte(t.Partitions >> 24), byte(t.Partitions >> 16), byte(t.Partitions >> 8), byte(t.Partitions)})
	}
	return int64(h.Sum64())
}

// preferredAssignor is the server assignor most members name (ties: the smaller name), or the
// default when none names one, as Kafka's ConsumerGroup picks it.
func preferredAssignor(members map[string]*Member, cfg Config) string {
	counts := map[string]int{}
	for _, m := range members {
		if m.ServerAssignor != "" {
			counts[m.ServerAssignor]++
		}
	}
	best, n := "", 0
	for a, c := range counts {
		if c > n || (c == n && a < best) {
			best, n = a, c
		}
	}
	if best == "" || !cfg.HasAssignor(best) {
		return cfg.DefaultAssignor()
	}
	return best
}

func computeTargets(members map[string]*Member, prev map[string]Parts, assignor string, cat Catalog, g *Group, s *State) (map[string]Parts, error) {
	in := AssignInput{Topics: map[[16]byte]int32{}}
	// Large groups mostly share a handful of subscriptions: each is resolved once and its
	// members share the slice, which the assignors then resolve once too.
	resolved := map[string][][16]byte{}
	var key []byte
	for _, id := range sortedIDs(members) {
		m := members[id]
		key = key[:0]
		for _, n := range m.SubscribedTopicNames {
			key = append(append(key, n...), 0)
		}
		key = append(append(key, 1), m.SubscribedTopicRegex...)
		topics, ok := resolved[string(key)]
		if !ok && cat != nil {
			topics = memberTopics(m, cat, g)
			for _, t := range topics {
				if tp, ok := cat.TopicByID(t); ok {
					in.Topics[t] = tp.Partitions
				}
			}
			resolved[string(key)] = topics
		}
		am := AssignMember{ID: id, Topics: topics, Previous: prev[id]}
		if m.InstanceID != nil {
			am.InstanceID = *m.InstanceID
		}
		in.Members = append(in.Members, am)
	}
	return Assign(assignor, in)
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Steady reports whether a heartbeat of member that changed nothing is answered the same until
// some other operation changes the shard, so its answer may be repeated off the shard (a
// runtime.Ticket): the group's target is computed for its epoch (a target held back by the
// assignment interval is released only by time, in the next heartbeat of any member), the
// member speaks the consumer protocol, and no member subscribes by regex (a regex resolves
// through the heartbeating client's topic ACLs, which change without any record here).
func (s *State) Steady(group, member string) bool {
	g := s.Groups[group]
	if g == nil || g.Epoch != g.AssignmentEpoch || len(g.regexes) > 0 {
		return false
	}
	m := g.Members[member]
	return m != nil && m.Classic == nil && m.SubscribedTopicRegex == ""
}

// SteadyRequest reports whether req is a steady heartbeat: an established member's epoch and
// nothing else (every field a member sends only when it changes is null). Only such a request
// is answered from a ticket.
func SteadyRequest(req *kmsg.ConsumerGroupHeartbeatRequest) bool {
	return req.MemberEpoch > 0 && req.MemberID != "" && req.RackID == nil && req.RebalanceTimeoutMillis == -1 &&
		req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil && req.ServerAssignor == nil && req.Topics == nil
}
