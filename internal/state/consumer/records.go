package consumer

import (
	"fmt"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
)

// The five record kinds of a consumer group. Every value is version 0 and holds every field,
// so the latest value of a key is self-contained.

func groupKey(kind records.Kind, group string) []byte {
	return records.NewKey(kind).String(group).Build()
}

func memberKey(kind records.Kind, group, member string) []byte {
	return records.NewKey(kind).String(group).String(member).Build()
}

// GroupMetadataRecord is the group epoch and the metadata hash it was computed at.
func GroupMetadataRecord(group string, epoch int32, hash int64) log.Record {
	return log.Record{Key: groupKey(records.KindConsumerGroupMetadata, group), Value: records.NewValue(0).Int32(epoch).Int64(hash).Build()}
}

// MemberMetadataRecord is a member's metadata and subscription.
func MemberMetadataRecord(group string, m *Member) log.Record {
	b := records.NewValue(0).NullableString(m.InstanceID).NullableString(m.RackID).String(m.ClientID).String(m.ClientHost).
		Int32(m.RebalanceTimeoutMs).Int32(int32(len(m.SubscribedTopicNames)))
	for _, n := range m.SubscribedTopicNames {
		b.String(n)
	}
	b.String(m.SubscribedTopicRegex).String(m.ServerAssignor)
	return log.Record{Key: memberKey(records.KindConsumerMemberMetadata, group, m.ID), Value: b.Build()}
}

// TargetMetadataRecord is the target assignment's epoch and computation time.
func TargetMetadataRecord(group string, epoch int32, timestamp int64) log.Record {
	return log.Record{Key: groupKey(records.KindConsumerTargetMetadata, group), Value: records.NewValue(0).Int32(epoch).Int64(timestamp).Build()}
}

// TargetMemberRecord is a member's target assignment.
func TargetMemberRecord(group, member string, target Parts) log.Record {
	b := records.NewValue(0)
	appendParts(b, target)
	return log.Record{Key: memberKey(records.KindConsumerTargetMember, group, member), Value: b.Build()}
}

// CurrentMemberRecord is a member's epochs, state and current assignment.
func CurrentMemberRecord(group string, m *Member) log.Record {
	b := records.NewValue(0).Int32(m.Epoch).Int32(m.PreviousEpoch).Int16(int16(m.State))
	appendParts(b, m.Assigned)
	appendParts(b, m.Pending)
	return log.Record{Key: memberKey(records.KindConsumerCurrentMember, group, m.ID), Value: b.Build()}
}

func groupTombstone(group string) log.Record {
	return log.Record{Key: groupKey(records.KindConsumerGroupMetadata, group)}
}
func memberTombstone(group, member string) log.Record {
	return log.Record{Key: memberKey(records.KindConsumerMemberMetadata, group, member)}
}
func targetMetadataTombstone(group string) log.Record {
	return log.Record{Key: groupKey(records.KindConsumerTargetMetadata, group)}
}
func targetMemberTombstone(group, member string) log.Record {
	return log.Record{Key: memberKey(records.KindConsumerTargetMember, group, member)}
}
func currentTombstone(group, member string) log.Record {
	return log.Record{Key: memberKey(records.KindConsumerCurrentMember, group, member)}
}

// memberTombstones remove a member, current assignment (and classic metadata) first, as Replay
// requires.
func memberTombstones(g *Group, member string) []log.Record {
	out := []log.Record{currentTombstone(g.ID, member), targetMemberTombstone(g.ID, member)}
	if m := g.Members[member]; m != nil && m.Classic != nil {
		out = append(out, classicTombstone(g.ID, member))
	}
	return append(out, memberTombstone(g.ID, member))
}

// Tombstones delete an empty group: its members' records (none for an empty group) and then
// the group-level records.
func (s *State) Tombstones(group string) []log.Record {
	g := s.Groups[group]
	if g == nil {
		return nil
	}
	var out []log.Record
	for _, id := range sortedIDs(g.Members) {
		out = append(out, memberTombstones(g, id)...)
	}
	return append(out, targetMetadataTombstone(group), groupTombstone(group))
}

func appendParts(b *records.Builder, p Parts) {
	list := p.Sorted()
	b.Int32(int32(len(list)))
	for _, t := range list {
		b.UUID(t.Topic).Int32(int32(len(t.Partitions)))
		for _, q := range t.Partitions {
			b.Int32(q)
		}
	}
}

func readParts(r *records.Reader) (Parts, error) {
	n := r.Int32()
	if err := r.Err(); err != nil {
		return nil, err
	}
	if n < 0 || n > 1<<20 {
		return nil, fmt.Errorf("topic count %d", n)
	}
	out := Parts{}
	for range n {
		id := r.UUID()
		np := r.Int32()
		if err := r.Err(); err != nil {
			return nil, err
		}
		if np < 0 || np > 1<<24 {
			return nil, fmt.Errorf("partition count %d", np)
		}
		for range np {
			out[TP{Topic: id, Partition: r.Int32()}] = struct{}{}
		}
	}
	return out, r.Err()
}

// Replay applies one consumer group record.
func (s *State) Replay(rec log.Record) error {
	kind, err := records.KindOf(rec.Key)
	if err != nil {
		return err
	}
	r, err := records.ReadKey(rec.Key, kind)
	if err != nil {
		return err
	}
	groupID := r.String()
	var memberID string
	switch kind {
	case records.KindConsumerMemberMetadata, records.KindConsumerTargetMember, records.KindConsumerCurrentMember, records.KindConsumerClassicMember:
		memberID = r.String()
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%s key: %w", kind, err)
	}
	g := s.Groups[groupID]
	if rec.Tombstone() {
		if g == nil {
			return nil
		}
		return s.replayTombstone(g, kind, memberID)
	}
	version, v, err := records.ReadValue(rec.Value)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, groupID, err)
	}
	if err := records.CheckVersion(kind, version, 0); err != nil {
		return fmt.Errorf("group %s: %w", groupID, err)
	}
	if g == nil {
		g = newGroup(groupID)
		s.Groups[groupID] = g
	}
	member := func() *Member {
		m := g.Members[memberID]
		if m == nil {
			m = newMember(memberID)
			g.Members[memberID] = m
		}
		return m
	}
	switch kind {
	case records.KindConsumerGroupMetadata:
		g.Epoch, g.MetadataHash = v.Int32(), v.Int64()
		g.hasMetadata = true
	case records.KindConsumerMemberMetadata:
		m := member()
		g.unindex(m)
		m.InstanceID, m.RackID, m.ClientID, m.ClientHost = v.NullableString(), v.NullableString(), v.String(), v.String()
		m.RebalanceTimeoutMs = v.Int32()
		n := v.Int32()
		if err := v.Err(); err != nil || n < 0 || n > 1<<20 {
			return fmt.Errorf("%s %s/%s: bad topic list", kind, groupID, memberID)
		}
		m.SubscribedTopicNames = make([]string, 0, n)
		for range n {
			m.SubscribedTopicNames = append(m.SubscribedTopicNames, v.String())
		}
		m.SubscribedTopicRegex, m.ServerAssignor = v.String(), v.String()
		m.hasMetadata = true
		g.index(m)
	case records.KindConsumerTargetMetadata:
		g.AssignmentEpoch, g.AssignmentTime = v.Int32(), v.Int64()
	case records.KindConsumerClassicMember:
		info, err := readClassicInfo(v)
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", kind, groupID, memberID, err)
		}
		member().Classic = info
	case records.KindConsumerTargetMember:
		t, err := readParts(v)
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", kind, groupID, memberID, err)
		}
		g.Targets[memberID] = t
	case records.KindConsumerCurrentMember:
		m := member()
		m.Epoch, m.PreviousEpoch = v.Int32(), v.Int32()
		switch st := MemberState(v.Int16()); st {
		case Stable, UnrevokedPartitions, UnreleasedPartitions:
			m.State = st
		default:
			m.State = UnknownState
		}
		assigned, err := readParts(v)
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", kind, groupID, memberID, err)
		}
		pending, err := readParts(v)
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", kind, groupID, memberID, err)
		}
		g.unown(m)
		m.Assigned, m.Pending = assigned, pending
		g.own(m)
		m.hasCurrent = true
	default:
		return fmt.Errorf("not a consumer group record kind: %s", kind)
	}
	if err := v.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", kind, groupID, err)
	}
	return nil
}

func (s *State) replayTombstone(g *Group, kind records.Kind, memberID string) error {
	switch kind {
	case records.KindConsumerGroupMetadata:
		if len(g.Members) > 0 {
			return fmt.Errorf("consumer group %s: group tombstone while %d members exist", g.ID, len(g.Members))
		}
		delete(s.Groups, g.ID)
		delete(s.catalogs, g.ID)
	case records.KindConsumerMemberMetadata:
		m := g.Members[memberID]
		if m == nil {
			return nil
		}
		if m.hasCurrent {
			return fmt.Errorf("consumer group %s: member %s metadata tombstone before its current assignment tombstone", g.ID, memberID)
		}
		if _, ok := g.Targets[memberID]; ok {
			return fmt.Errorf("consumer group %s: member %s metadata tombstone before its target assignment tombstone", g.ID, memberID)
		}
		if m.Classic != nil {
			return fmt.Errorf("consumer group %s: member %s metadata tombstone before its classic member tombstone", g.ID, memberID)
		}
		g.unindex(m)
		delete(g.Members, memberID)
	case records.KindConsumerTargetMetadata:
		g.AssignmentEpoch, g.AssignmentTime = 0, 0
	case records.KindConsumerTargetMember:
		delete(g.Targets, memberID)
	case records.KindConsumerClassicMember:
		if m := g.Members[memberID]; m != nil {
			m.Classic = nil
		}
	case records.KindConsumerCurrentMember:
		if m := g.Members[memberID]; m != nil {
			g.unown(m)
			m.Epoch, m.PreviousEpoch = 0, 0
			m.Assigned, m.Pending = nil, nil
			m.hasCurrent = false
		}
	}
	return nil
}

// own and unown keep the partition-owner index; index and unindex the instance and
// subscription indexes.
func (g *Group) own(m *Member) {
	for tp := range m.Assigned {
		g.owners[tp] = m.ID
	}
	for tp := range m.Pending {
		g.owners[tp] = m.ID
	}
}

func (g *Group) unown(m *Member) {
	for tp := range m.Assigned {
		if g.owners[tp] == m.ID {
			delete(g.owners, tp)
		}
	}
	for tp := range m.Pending {
		if g.owners[tp] == m.ID {
			delete(g.owners, tp)
		}
	}
}

func (g *Group) index(m *Member) {
	g.subscriptionsGen++
	if m.InstanceID != nil {
		g.instances[*m.InstanceID] = m.ID
	}
	for _, n := range m.SubscribedTopicNames {
		g.names[n]++
	}
	if m.SubscribedTopicRegex != "" {
		g.regexes[m.SubscribedTopicRegex]++
	}
}

func (g *Group) unindex(m *Member) {
	if !m.hasMetadata {
		return
	}
	g.subscriptionsGen++
	if m.InstanceID != nil && g.instances[*m.InstanceID] == m.ID {
		delete(g.instances, *m.InstanceID)
	}
	for _, n := range m.SubscribedTopicNames {
		if g.names[n]--; g.names[n] <= 0 {
			delete(g.names, n)
		}
	}
	if r := m.SubscribedTopicRegex; r != "" {
		if g.regexes[r]--; g.regexes[r] <= 0 {
			delete(g.regexes, r)
		}
	}
}
