package consumer

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration between the classic protocol and the consumer protocol, as Kafka 4.4's
// GroupMetadataManager does it: classic members live inside a consumer group as members with
// classic metadata; their JoinGroup runs the same reconciliation as a heartbeat, with the owned
// partitions their subscription reports, and SyncGroup hands out what reconciliation assigned.

// ClassicProtocol is one protocol of a classic member's JoinGroup.
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// ClassicInfo is what a classic-protocol member keeps beyond a consumer member's metadata.
type ClassicInfo struct {
	SessionTimeoutMs int32
	Protocols        []ClassicProtocol
}

func (c *ClassicInfo) equal(o *ClassicInfo) bool {
	if c == nil || o == nil {
		return c == nil && o == nil
	}
	if c.SessionTimeoutMs != o.SessionTimeoutMs || len(c.Protocols) != len(o.Protocols) {
		return false
	}
	for i := range c.Protocols {
		if c.Protocols[i].Name != o.Protocols[i].Name || !bytes.Equal(c.Protocols[i].Metadata, o.Protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// ClassicMemberRecord is a classic-protocol member's session timeout and protocols.
func ClassicMemberRecord(group, member string, c *ClassicInfo) log.Record {
	b := records.NewValue(0).Int32(c.SessionTimeoutMs).Int32(int32(len(c.Protocols)))
	for _, p := range c.Protocols {
		b.String(p.Name).Bytes(p.Metadata)
	}
	return log.Record{Key: memberKey(records.KindConsumerClassicMember, group, member), Value: b.Build()}
}

func classicTombstone(group, member string) log.Record {
	return log.Record{Key: memberKey(records.KindConsumerClassicMember, group, member)}
}

func readClassicInfo(v *records.Reader) (*ClassicInfo, error) {
	c := &ClassicInfo{SessionTimeoutMs: v.Int32()}
	n := v.Int32()
	if err := v.Err(); err != nil || n < 0 || n > 1<<10 {
		return nil, fmt.Errorf("bad protocol list")
	}
	for range n {
		c.Protocols = append(c.Protocols, ClassicProtocol{Name: v.String(), Metadata: v.Bytes()})
	}
	return c, v.Err()
}

// Subscription decodes a classic consumer member's first protocol (Kafka reads the first one
// too): subscribed topics, sorted and deduplicated, and the partitions it says it owns.
func Subscription(ps []ClassicProtocol) (topics []string, owned map[string][]int32, generation int32, ok bool) {
	if len(ps) == 0 {
		return nil, nil, -1, false
	}
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(ps[0].Metadata); err != nil {
		return nil, nil, -1, false
	}
	topics = append([]string(nil), md.Topics...)
	sort.Strings(topics)
	owned = map[string][]int32{}
	for _, t := range md.OwnedPartitions {
		owned[t.Topic] = append(owned[t.Topic], t.Partitions...)
	}
	generation = -1
	if md.Version >= 2 {
		generation = md.Generation
	}
	return dedup(topics), owned, generation, true
}

// EncodeAssignment is a partition set as a classic consumer's SyncGroup assignment bytes
// (ConsumerMemberAssignment), topics by name; partitions of topics the catalog no longer
// knows are left out.
func EncodeAssignment(p Parts, cat Catalog) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 3
	for _, t := range p.Sorted() {
		var name string
		if cat != nil {
			if tp, ok := cat.TopicByID(t.Topic); ok {
				name = tp.Name
			}
		}
		if name == "" {
			continue
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = name, t.Partitions
		a.Topics = append(a.Topics, at)
	}
	sort.Slice(a.Topics, func(i, j int) bool { return a.Topics[i].Topic < a.Topics[j].Topic })
	return a.AppendTo(nil)
}

// DecodeAssignment reads a classic consumer's assignment bytes into a partition set, topics
// resolved by name through the catalog; false when the bytes are not a consumer assignment.
func DecodeAssignment(b []byte, cat Catalog) (Parts, bool) {
	out := Parts{}
	if len(b) == 0 {
		return out, true
	}
	if cat == nil {
		return nil, false
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, false
	}
	for _, t := range a.Topics {
		tp, ok := cat.Topic(t.Topic)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			if p >= 0 && p < tp.Partitions {
				out[TP{Topic: tp.ID, Partition: p}] = struct{}{}
			}
		}
	}
	return out, true
}

// ClassicJoinInput is a JoinGroup addressed to a non-empty consumer group.
type ClassicJoinInput struct {
	Group, MemberID    string
	InstanceID         *string
	ProtocolType       string
	Protocols          []ClassicProtocol
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	ClientID           string
	ClientHost         string
	// RequireKnownMemberID: JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and NewMemberID.
	RequireKnownMemberID bool
	NewMemberID          string
	Catalog              Catalog
	Config               Config
	// ClassicMaxSize is group.max.size, which a downgrade must fit (0: no bound).
	ClassicMaxSize int32
	Now            time.Time
}

// ClassicJoinOutput is the JoinGroup answer (Code 0: Generation is the member epoch).
type ClassicJoinOutput struct {
	Code       int16
	MemberID   string
	Generation int32
	Protocol   string
	Records    []log.Record
	Timers     []TimerAction
	// Member is the member as the records leave it.
	Member *Member
	// Downgrade is set when the join turns the group into a classic group; Records are then
	// empty and the caller writes the classic group the downgrade describes.
	Downgrade *ReplacementDowngrade
}

// ReplacementDowngrade is Kafka 4.4's downgrade of a consumer group whose last
// consumer-protocol member is replaced by a static member joining with the classic protocol
// (validateOnlineDowngradeWithReplacedMember): the classic group takes the consumer group's
// epoch as its generation and its members with their assignments, the joiner last in place of
// the member it replaces. It is Stable, so the members go on without a rebalance, unless the
// target assignment was stale (the group epoch ahead of the target epoch, or bumped by the
// joiner's subscription): then it prepares a rebalance, as Kafka does.
type ReplacementDowngrade struct {
	Epoch     int32
	Rebalance bool
	Members   []*Member
	// Timers cancels the consumer group's member timers.
	Timers []TimerAction
}

// replacedByClassicJoin is the consumer-protocol member a static member's JoinGroup replaces
// when that downgrades the group: every other member speaks the classic protocol, the policy
// allows a downgrade and the group fits group.max.size (Kafka's
// validateOnlineDowngradeWithReplacedMember); nil otherwise.
func (g *Group) replacedByClassicJoin(in ClassicJoinInput) *Member {
	if in.InstanceID == nil {
		return nil
	}
	replaced := g.staticMember(*in.InstanceID)
	if replaced == nil || replaced.Classic != nil || !DowngradeAllowed(in.Config.Policy()) {
		return nil
	}
	if in.ClassicMaxSize > 0 && int64(len(g.Members)) > int64(in.ClassicMaxSize) {
		return nil
	}
	for id, m := range g.Members {
		if id != replaced.ID && m.Classic == nil {
			return nil
		}
	}
	return replaced
}

// ClassicJoin runs a classic member's JoinGroup in a consumer group: a new member joins at
// epoch 0, a known one re-reports its subscription and owned partitions, and either is
// reconciled toward its target exactly as a ConsumerGroupHeartbeat would be.
func (s *State) ClassicJoin(in ClassicJoinInput) ClassicJoinOutput {
	g := s.Groups[in.Group]
	fail := func(code int16) ClassicJoinOutput {
		return ClassicJoinOutput{Code: code, MemberID: in.MemberID, Generation: -1}
	}
	if g == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	if in.ProtocolType != "consumer" || len(in.Protocols) == 0 {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	topics, ownedNames, generation, ok := Subscription(in.Protocols)
	if !ok {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	memberID := in.MemberID
	if memberID == "" {
		if g.full(in.Config, "", in.InstanceID) {
			return fail(kerr.GroupMaxSizeReached.Code)
		}
		if in.RequireKnownMemberID && in.InstanceID == nil {
			return ClassicJoinOutput{Code: kerr.MemberIDRequired.Code, MemberID: in.NewMemberID, Generation: -1}
		}
		memberID = in.NewMemberID
	}
	stored := g.Members[memberID]
	if stored != nil && stored.Classic == nil {
		return fail(kerr.UnknownMemberID.Code) // a consumer-protocol member cannot send JoinGroup
	}
	replaced := g.replacedByClassicJoin(in)
	// As in Kafka, a member id the group does not know joins as a new member.
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID = in.Group, memberID, in.InstanceID
	req.RebalanceTimeoutMillis = in.RebalanceTimeoutMs
	req.SubscribedTopicNames = topics
	if req.SubscribedTopicNames == nil {
		req.SubscribedTopicNames = []string{}
	}
	if stored != nil {
		req.MemberEpoch = stored.Epoch
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if generation >= 0 && generation != stored.Epoch {
			// Owned partitions reported for another generation cannot be trusted: assume the
			// member still holds everything it was given, so nothing it holds moves on.
			for _, t := range stored.Assigned.union(stored.Pending).Sorted() {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.Topic, Partitions: t.Partitions})
			}
		} else {
			for name, ps := range ownedNames {
				if tp, ok := in.Catalog.Topic(name); ok {
					req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.ID, Partitions: ps})
				}
			}
		}
	}
	out, n := s.heartbeatMember(HeartbeatInput{
		Req: req, ClientID: in.ClientID, ClientHost: in.ClientHost, Catalog: in.Catalog, Config: in.Config, Now: in.Now,
		classic:    &ClassicInfo{SessionTimeoutMs: in.SessionTimeoutMs, Protocols: in.Protocols},
		keepTarget: replaced != nil,
	})
	if code := out.Response.ErrorCode; code != 0 {
		if code == kerr.FencedMemberEpoch.Code {
			code = kerr.IllegalGeneration.Code
		}
		return fail(code)
	}
	if replaced != nil {
		return g.downgradeByReplacement(in, replaced, n, out.groupEpoch)
	}
	classicSession(out.Timers, in.SessionTimeoutMs)
	out.Timers = append(out.Timers, TimerAction{Kind: JoinTimer, Group: in.Group, Member: n.ID, Cancel: true},
		TimerAction{Kind: SyncTimer, Group: in.Group, Member: n.ID, After: time.Duration(max(n.RebalanceTimeoutMs, 0)) * time.Millisecond})
	return ClassicJoinOutput{MemberID: n.ID, Generation: n.Epoch, Protocol: in.Protocols[0].Name, Records: out.Records, Timers: out.Timers, Member: n}
}

// downgradeByReplacement answers a JoinGroup whose static member replaces the group's last
// consumer-protocol member, as Kafka 4.4 does: with a current target the joiner was reconciled
// against the replaced member's target (n) and is answered at its epoch; with a stale one Kafka
// reconciles nothing, so the joiner is answered at the replacement's epoch 0 and holds what the
// replaced member held until the classic rebalance. The other members keep their current
// assignments (Kafka writes their targets, which differ only for a member still reconciling:
// see docs/conformance.md).
func (g *Group) downgradeByReplacement(in ClassicJoinInput, replaced, n *Member, groupEpoch int32) ClassicJoinOutput {
	stale := groupEpoch > g.AssignmentEpoch
	joiner := n
	if stale {
		joiner = n.shallow()
		joiner.Epoch, joiner.PreviousEpoch, joiner.State = 0, 0, Stable
		joiner.Assigned, joiner.Pending = replaced.Assigned, Parts{}
	}
	d := &ReplacementDowngrade{Epoch: g.Epoch, Rebalance: stale}
	for _, id := range sortedIDs(g.Members) {
		if id != replaced.ID {
			d.Members = append(d.Members, g.Members[id])
		}
		d.Timers = append(d.Timers, memberTimerCancels(g.ID, id)...)
	}
	d.Members = append(d.Members, joiner)
	return ClassicJoinOutput{MemberID: joiner.ID, Generation: joiner.Epoch, Protocol: in.Protocols[0].Name, Member: joiner, Downgrade: d}
}

// classicSession gives a classic member its own session timeout instead of the group's.
func classicSession(timers []TimerAction, ms int32) {
	for i := range timers {
		if timers[i].Kind == SessionTimer && !timers[i].Cancel {
			timers[i].After = time.Duration(ms) * time.Millisecond
		}
	}
}

func (p Parts) union(o Parts) Parts {
	out := Parts{}
	for tp := range p {
		out[tp] = struct{}{}
	}
	for tp := range o {
		out[tp] = struct{}{}
	}
	return out
}

// classicMember finds a classic member of a consumer group for SyncGroup and Heartbeat.
func (s *State) classicMember(group, member string, instance *string, generation int32) (*Group, *Member, int16) {
	g := s.Groups[group]
	if g == nil {
		return nil, nil, kerr.UnknownMemberID.Code
	}
	m := g.Members[member]
	if m == nil || m.Classic == nil {
		return nil, nil, kerr.UnknownMemberID.Code
	}
	if instance != nil && (m.InstanceID == nil || *m.InstanceID != *instance) {
		return nil, nil, kerr.FencedInstanceID.Code
	}
	if generation != m.Epoch {
		return nil, nil, kerr.IllegalGeneration.Code
	}
	return g, m, 0
}

// ClassicSync answers a classic member's SyncGroup from its current assignment (what
// reconciliation let it have: never a partition another member still holds) as
// ConsumerMemberAssignment bytes; the leader's assignments, if any, are ignored.
func (s *State) ClassicSync(group, member string, instance *string, generation int32, protocolType, protocol *string, cat Catalog) (code int16, assignment []byte, name string, timers []TimerAction) {
	_, m, code := s.classicMember(group, member, instance, generation)
	if code != 0 {
		return code, nil, "", nil
	}
	s.NoteCatalog(group, cat)
	if (protocolType != nil && *protocolType != "consumer") || (protocol != nil && *protocol != m.Classic.Protocols[0].Name) {
		return kerr.InconsistentGroupProtocol.Code, nil, "", nil
	}
	timers = []TimerAction{{Kind: SessionTimer, Group: group, Member: member, After: time.Duration(m.Classic.SessionTimeoutMs) * time.Millisecond},
		{Kind: SyncTimer, Group: group, Member: member, Cancel: true}}
	return 0, EncodeAssignment(m.Assigned, cat), m.Classic.Protocols[0].Name, timers
}

// ClassicHeartbeat answers a classic member's Heartbeat as Kafka 4.4's
// classicGroupHeartbeatToConsumerGroup does: REBALANCE_IN_PROGRESS when the member is behind
// the target epoch, owes a revocation, or waits for partitions that are free by now, so that
// it rejoins; the first such answer arms its join timer (the rebalance timeout; later answers
// leave it running), which removes the member unless a JoinGroup comes first.
//
// Unlike Kafka 4.4 it also does so when the group has classic members only, its epoch is ahead
// of the target and a target is due (assignmentDue): only a heartbeat or a join computes one, so
// in a group left with classic members alone (the last consumer-protocol member gone while the
// policy refuses the downgrade) Kafka leaves the departed member's partitions unassigned for
// good. While a consumer-protocol member remains its heartbeat computes the target, as in Kafka.
func (s *State) ClassicHeartbeat(group, member string, instance *string, generation int32, cfg Config, now time.Time) (int16, []TimerAction) {
	g, m, code := s.classicMember(group, member, instance, generation)
	if code != 0 {
		return code, nil
	}
	timers := []TimerAction{{Kind: SessionTimer, Group: group, Member: member, After: time.Duration(m.Classic.SessionTimeoutMs) * time.Millisecond}}
	targetDue := g.Epoch > g.AssignmentEpoch && g.classicOnly() && assignmentDue(g, cfg, now.UnixMilli())
	if m.Epoch < g.AssignmentEpoch || targetDue || m.State == UnrevokedPartitions || (m.State == UnreleasedPartitions && !g.waitingOnUnreleased(m)) {
		timers = append(timers, TimerAction{Kind: JoinTimer, Group: group, Member: member, IfAbsent: true,
			After: time.Duration(max(m.RebalanceTimeoutMs, 0)) * time.Millisecond})
		return kerr.RebalanceInProgress.Code, timers
	}
	return 0, timers
}

// waitingOnUnreleased reports whether a partition of the member's target that it does not
// have yet is still held by another member (Kafka's waitingOnUnreleasedPartition).
func (g *Group) waitingOnUnreleased(m *Member) bool {
	for tp := range g.Targets[m.ID] {
		if m.Assigned.has(tp) {
			continue
		}
		if owner, held := g.owners[tp]; held && owner != m.ID {
			return true
		}
	}
	return false
}

// ClassicView is a non-empty classic group as an upgrade reads it.
type ClassicView struct {
	Generation int32
	// ProtocolType and Protocol are the group's; Protocol nil while none is selected.
	ProtocolType string
	Protocol     *string
	Members      []ClassicMemberView
}

// ClassicMemberView is one member of a classic group.
type ClassicMemberView struct {
	ID                 string
	InstanceID         *string
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	SessionTimeoutMs   int32
	Protocols          []ClassicProtocol
	Assignment         []byte
}

// UpgradeRefusal says why a non-empty classic group is not converted by a consumer heartbeat
// (reason, for the migration log) and the GROUP_ID_NOT_FOUND message Kafka 4.4's
// validateOnlineUpgrade answers the heartbeat with; both "" when it may be. A rebalancing group
// converts as a stable one does (Kafka 4.4 does not look at the state): its members come with
// their last SyncGroup's assignment, and the caller answers their parked JoinGroup/SyncGroup
// REBALANCE_IN_PROGRESS.
func UpgradeRefusal(group string, v *ClassicView, policy string, cfg Config) (reason, message string) {
	prefix := "Cannot upgrade classic group " + group + " to consumer group because "
	switch {
	case policy != "bidirectional" && policy != "upgrade":
		return "group.consumer.migration.policy " + policy + " does not allow upgrades", prefix + "online upgrade is disabled."
	case v.ProtocolType != "consumer":
		return fmt.Sprintf("its protocol type is %q, not consumer", v.ProtocolType), prefix + "the group does not use the consumer embedded protocol."
	case int64(len(v.Members)) > int64(cfg.MaxSize):
		// At exactly the bound the group converts and the joiner is the one refused
		// (GROUP_MAX_SIZE_REACHED, nothing written), as in Kafka.
		return fmt.Sprintf("its %d members exceed group.consumer.max.size %d", len(v.Members), cfg.MaxSize),
			prefix + "the group size exceeds the consumer group maximum size."
	}
	return "", ""
}

// UpgradeRecords are the records that turn a stable classic group into a consumer group (after
// the classic group's tombstone, which the caller puts first): group and target epoch the
// classic generation, each member at that epoch with the subscription its metadata carries and
// the assignment its SyncGroup gave it as both target and current assignment, so no partition
// moves by the conversion itself. It fails (false) when a member's bytes are not the consumer
// protocol's.
func UpgradeRecords(group string, v *ClassicView, cat Catalog) ([]log.Record, []TimerAction, bool) {
	gen := max(v.Generation, 1)
	recs := []log.Record{GroupMetadataRecord(group, gen, 0)}
	var timers []TimerAction
	ms := append([]ClassicMemberView(nil), v.Members...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	for _, cm := range ms {
		ps := cm.Protocols
		if v.Protocol != nil {
			// The selected protocol's metadata first: it is the one the assignment came from.
			for i, p := range ps {
				if p.Name == *v.Protocol && i > 0 {
					ps = append([]ClassicProtocol{p}, append(append([]ClassicProtocol(nil), ps[:i]...), ps[i+1:]...)...)
					break
				}
			}
		}
		topics, _, _, ok := Subscription(ps)
		if !ok {
			return nil, nil, false
		}
		assigned, ok := DecodeAssignment(cm.Assignment, cat)
		if !ok {
			return nil, nil, false
		}
		m := newMember(cm.ID)
		m.InstanceID, m.ClientID, m.ClientHost, m.RebalanceTimeoutMs = cm.InstanceID, cm.ClientID, cm.ClientHost, cm.RebalanceTimeoutMs
		m.SubscribedTopicNames = topics
		if m.SubscribedTopicNames == nil {
			m.SubscribedTopicNames = []string{}
		}
		m.Epoch, m.PreviousEpoch, m.State, m.Assigned, m.Pending = gen, gen-1, Stable, assigned, Parts{}
		m.Classic = &ClassicInfo{SessionTimeoutMs: cm.SessionTimeoutMs, Protocols: ps}
		recs = append(recs, MemberMetadataRecord(group, m), ClassicMemberRecord(group, m.ID, m.Classic),
			TargetMemberRecord(group, m.ID, assigned), CurrentMemberRecord(group, m))
		timers = append(timers, TimerAction{Kind: SessionTimer, Group: group, Member: m.ID, After: time.Duration(cm.SessionTimeoutMs) * time.Millisecond})
	}
	// No computation time: the joining member's heartbeat computes the new target at once.
	recs = append(recs, TargetMetadataRecord(group, gen, 0))
	return recs, timers, true
}

// HeartbeatAfter runs a heartbeat on the group the given records build (an upgrade's batch),
// without touching s: the output's records are the batch followed by the heartbeat's.
func HeartbeatAfter(batch []log.Record, in HeartbeatInput) (HeartbeatOutput, error) {
	tmp := New()
	for _, r := range batch {
		if err := tmp.Replay(r); err != nil {
			return HeartbeatOutput{}, err
		}
	}
	in.Foreign = nil
	out := tmp.Heartbeat(in)
	if out.Response.ErrorCode != 0 {
		return out, nil
	}
	out.Records = append(append([]log.Record(nil), batch...), out.Records...)
	return out, nil
}

// DowngradeCandidate is a consumer group that a removal leaves with classic members only.
type DowngradeCandidate struct {
	Epoch   int32
	Members []*Member
}

// Downgradable reports whether removing the given members leaves only classic members (at
// least one), as Kafka 4.4's validateOnlineDowngradeWithFencedMembers: whichever protocol the
// removed members spoke, so a group of classic members whose downgrade group.max.size refused
// converts once one of them goes and the rest fit; nil otherwise.
func (s *State) Downgradable(group string, removed []string) *DowngradeCandidate {
	g := s.Groups[group]
	if g == nil {
		return nil
	}
	gone := map[string]bool{}
	for _, id := range removed {
		if g.Members[id] != nil {
			gone[id] = true
		}
	}
	if len(gone) == 0 {
		return nil
	}
	c := &DowngradeCandidate{Epoch: g.Epoch}
	for _, id := range sortedIDs(g.Members) {
		if gone[id] {
			continue
		}
		m := g.Members[id]
		if m.Classic == nil {
			return nil
		}
		c.Members = append(c.Members, m)
	}
	if len(c.Members) == 0 {
		return nil
	}
	return c
}

// DowngradeAllowed is Kafka's policy check of a downgrade.
func DowngradeAllowed(policy string) bool { return policy == "bidirectional" || policy == "downgrade" }

// GroupTombstones delete a whole group, its members included, and the timers to cancel.
func (s *State) GroupTombstones(group string) ([]log.Record, []TimerAction) {
	g := s.Groups[group]
	if g == nil {
		return nil, nil
	}
	var timers []TimerAction
	for _, id := range sortedIDs(g.Members) {
		timers = append(timers, memberTimerCancels(group, id)...)
	}
	return s.Tombstones(group), timers
}

// Snapshot is the last catalog a request of the group brought (nil when none since the load),
// for work that starts without a request, such as a downgrade decided by a timer.
func (s *State) Snapshot(group string) Catalog {
	if s.Groups[group] == nil {
		return nil
	}
	if cat := s.catalogs[group]; cat != nil {
		return cat
	}
	if g := s.Groups[group]; g.soft.snap != nil {
		return g.soft.snap
	}
	return nil
}

// classicOnly reports whether every member of the group uses the classic protocol.
func (g *Group) classicOnly() bool {
	for _, m := range g.Members {
		if m.Classic == nil {
			return false
		}
	}
	return true
}
