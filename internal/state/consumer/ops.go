package consumer

import (
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LoadedTimers are the timers a freshly loaded shard arms: every member's session timer (a
// full session from now, as Kafka does on load) and the rebalance timer of members that owe a
// revocation. A target held back by the assignment interval is computed by the next heartbeat
// (the catalog it needs comes with it).
func (s *State) LoadedTimers(cfgFor func(group string) Config) []TimerAction {
	var out []TimerAction
	for _, g := range s.Groups {
		cfg := cfgFor(g.ID)
		for _, m := range g.Members {
			session := cfg.SessionTimeout
			if m.Classic != nil {
				session = time.Duration(m.Classic.SessionTimeoutMs) * time.Millisecond
			}
			out = append(out, TimerAction{Kind: SessionTimer, Group: g.ID, Member: m.ID, After: session})
			if m.State == UnrevokedPartitions {
				out = append(out, TimerAction{Kind: RebalanceTimer, Group: g.ID, Member: m.ID, Epoch: m.Epoch, After: time.Duration(max(m.RebalanceTimeoutMs, 0)) * time.Millisecond})
			}
		}
	}
	return out
}

// AuthorizedOperationsAll is READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS and ALTER_CONFIGS: what a
// principal may do on a group without an authorizer.
const AuthorizedOperationsAll = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

// MemberTypeConsumer is ConsumerGroupDescribe v1's MemberType of a consumer-protocol member.
const MemberTypeConsumer = 1

// MemberTypeClassic is the MemberType of a classic-protocol member (online migration).
const MemberTypeClassic = 0

// Describe answers ConsumerGroupDescribe for one group. foreign reports whether another group
// type owns the id.
func (s *State) Describe(group string, includeOps bool, cat Catalog, cfg Config, foreign bool) kmsg.ConsumerGroupDescribeResponseGroup {
	out := kmsg.NewConsumerGroupDescribeResponseGroup()
	out.Group = group
	g := s.Groups[group]
	if g == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "Group " + group + " not found."
		if foreign {
			msg = "Group " + group + " is not a consumer group."
		}
		out.ErrorMessage = &msg
		return out
	}
	out.State = g.State().String()
	out.Epoch, out.AssignmentEpoch = g.Epoch, g.AssignmentEpoch
	out.AssignorName = preferredAssignor(g.Members, cfg)
	if includeOps {
		out.AuthorizedOperations = AuthorizedOperationsAll
	}
	out.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
	for _, id := range sortedIDs(g.Members) {
		m := g.Members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.ID, m.InstanceID, m.RackID, m.Epoch
		dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
		dm.SubscribedTopics = append([]string{}, m.SubscribedTopicNames...)
		r := m.SubscribedTopicRegex // Kafka describes "no regex" as ""
		dm.SubscribedTopicRegex = &r
		dm.Assignment = describeParts(m.Assigned, cat)
		dm.TargetAssignment = describeParts(g.Targets[id], cat)
		dm.MemberType = MemberTypeConsumer
		if m.Classic != nil {
			dm.MemberType = MemberTypeClassic
		}
		out.Members = append(out.Members, dm)
	}
	return out
}

// describeParts lists partitions with their topic names; partitions of topics the catalog no
// longer has are left out, as Kafka does.
func describeParts(p Parts, cat Catalog) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, t := range p.Sorted() {
		if cat == nil {
			continue
		}
		tp, ok := cat.TopicByID(t.Topic)
		if !ok {
			continue
		}
		w := kmsg.NewAssignmentTopicPartition()
		w.TopicID, w.Topic, w.Partitions = t.Topic, tp.Name, t.Partitions
		a.TopicPartitions = append(a.TopicPartitions, w)
	}
	return a
}

// DeleteGroup is DeleteGroups for a consumer group: the records deleting an empty one, or
// NON_EMPTY_GROUP, or GROUP_ID_NOT_FOUND.
func (s *State) DeleteGroup(group string) (code int16, recs []log.Record) {
	g := s.Groups[group]
	if g == nil {
		return kerr.GroupIDNotFound.Code, nil
	}
	if len(g.Members) > 0 {
		return kerr.NonEmptyGroup.Code, nil
	}
	return 0, s.Tombstones(group)
}

// ValidateCommit checks an OffsetCommit or TxnOffsetCommit against a consumer group as
// Kafka's ConsumerGroup.validateOffsetCommit does; owned is false for ids no consumer group
// has.
func (s *State) ValidateCommit(group, member string, instance *string, epoch int32, version int16, txn bool) (code int16, owned bool) {
	g := s.Groups[group]
	if g == nil {
		return 0, false
	}
	if epoch < 0 && len(g.Members) == 0 {
		return 0, true // an admin commit to an empty group
	}
	if txn && member == "" && epoch < 0 && instance == nil {
		return 0, true
	}
	m := g.Members[member]
	if m == nil {
		return kerr.UnknownMemberID.Code, true
	}
	if !txn && version < 9 {
		return kerr.UnsupportedVersion.Code, true
	}
	if epoch != m.Epoch {
		return kerr.StaleMemberEpoch.Code, true
	}
	return 0, true
}

// ValidateFetch checks an OffsetFetch v9+'s member id and epoch against a consumer group.
func (s *State) ValidateFetch(group string, member *string, epoch int32) (code int16, owned bool) {
	g := s.Groups[group]
	if g == nil {
		return 0, false
	}
	if member == nil && epoch < 0 {
		return 0, true
	}
	id := ""
	if member != nil {
		id = *member
	}
	m := g.Members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code, true
	}
	if epoch != m.Epoch {
		return kerr.StaleMemberEpoch.Code, true
	}
	return 0, true
}

// Subscribed reports whether a member of the group subscribes to a topic by name or by a
// regex matching it (OffsetDelete refuses its partitions; retention keeps them).
func (s *State) Subscribed(group, topic string) bool {
	g := s.Groups[group]
	if g == nil || len(g.Members) == 0 {
		return false
	}
	if g.names[topic] > 0 {
		return true
	}
	for r := range g.regexes {
		if re, err := compile(r); err == nil && re.MatchString(topic) {
			return true
		}
	}
	return false
}

// GroupIDs lists the consumer group ids.
func (s *State) GroupIDs() []string { return sortedIDs(s.Groups) }

// LeaveIdentity is one member named by a classic LeaveGroup.
type LeaveIdentity struct {
	MemberID   string
	InstanceID *string
}

// Leave serves a classic LeaveGroup addressed to a consumer group, as Kafka 4.4 does: each
// named member (by member id, or by instance id, when the member id may be empty for an
// administrative removal) is removed whatever protocol it uses, and the group epoch goes up
// once. It returns each identity's code and member id, the records and the timers to cancel.
func (s *State) Leave(group string, members []LeaveIdentity) (codes []int16, ids []string, recs []log.Record, timers []TimerAction) {
	g := s.Groups[group]
	codes, ids = make([]int16, len(members)), make([]string, len(members))
	removed := map[string]bool{}
	for i, li := range members {
		ids[i] = li.MemberID
		var m *Member
		if li.InstanceID == nil {
			if m = g.Members[li.MemberID]; m == nil {
				codes[i] = kerr.UnknownMemberID.Code
				continue
			}
		} else {
			if m = g.staticMember(*li.InstanceID); m == nil {
				codes[i] = kerr.UnknownMemberID.Code
				continue
			}
			if li.MemberID != "" && m.ID != li.MemberID {
				codes[i] = kerr.FencedInstanceID.Code
				continue
			}
			ids[i] = m.ID
		}
		if !removed[m.ID] {
			removed[m.ID] = true
			recs = append(recs, memberTombstones(g, m.ID)...)
			timers = append(timers, memberTimerCancels(g.ID, m.ID)...)
		}
	}
	if len(removed) > 0 {
		recs = append(recs, GroupMetadataRecord(g.ID, g.Epoch+1, g.MetadataHash))
		if len(removed) == len(g.Members) {
			recs = append(recs, TargetMetadataRecord(g.ID, g.Epoch+1, 0))
		}
	}
	return codes, ids, recs, timers
}
