package streams

import (
	"fmt"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
)

// The six record kinds of a streams group (spec §10.1). Every value is version 0 and holds
// every field, so the latest value of a key is self-contained.

func groupKey(kind records.Kind, group string) []byte {
	return records.NewKey(kind).String(group).Build()
}

func memberKey(kind records.Kind, group, member string) []byte {
	return records.NewKey(kind).String(group).String(member).Build()
}

// GroupMetadataRecord is GroupMetadata (spec type 17).
func GroupMetadataRecord(g *Group, epoch int32, hash int64, validated int32, configs map[string]string) log.Record {
	b := records.NewValue(0).Int32(epoch).Int64(hash).Int32(validated).Int32(int32(len(configs)))
	for _, k := range sortedKeys(configs) {
		b.String(k).String(configs[k])
	}
	b.Int32(g.StoredDescriptionEpoch).Int32(g.FailedDescriptionEpoch)
	return log.Record{Key: groupKey(records.KindStreamsGroupMetadata, g.ID), Value: b.Build()}
}

// MemberMetadataRecord is MemberMetadata (spec type 19).
func MemberMetadataRecord(group string, m *Member) log.Record {
	b := records.NewValue(0).NullableString(m.InstanceID).NullableString(m.RackID).String(m.ClientID).String(m.ClientHost).
		Int32(m.RebalanceTimeoutMs).Int32(m.TopologyEpoch).String(m.ProcessID)
	if m.UserEndpoint != nil && m.UserEndpoint.Host != "" {
		b.Bool(true).String(m.UserEndpoint.Host).Int32(int32(m.UserEndpoint.Port))
	} else {
		b.Bool(false)
	}
	b.Int32(int32(len(m.ClientTags)))
	for _, k := range sortedKeys(m.ClientTags) {
		b.String(k).String(m.ClientTags[k])
	}
	return log.Record{Key: memberKey(records.KindStreamsMemberMetadata, group, m.ID), Value: b.Build()}
}

// TargetMetadataRecord is TargetAssignmentMetadata (spec type 20).
func TargetMetadataRecord(group string, epoch int32, timestamp int64) log.Record {
	return log.Record{Key: groupKey(records.KindStreamsTargetMetadata, group), Value: records.NewValue(0).Int32(epoch).Int64(timestamp).Build()}
}

// TargetMemberRecord is TargetAssignmentMember (spec type 21).
func TargetMemberRecord(group, member string, target Roles) log.Record {
	b := records.NewValue(0)
	for role := range target {
		appendTasks(b, target[role], false)
	}
	return log.Record{Key: memberKey(records.KindStreamsTargetMember, group, member), Value: b.Build()}
}

// CurrentMemberRecord is CurrentMemberAssignment (spec type 22).
func CurrentMemberRecord(group string, m *Member) log.Record {
	b := records.NewValue(0).Int32(m.Epoch).Int32(m.PreviousEpoch).Int16(int16(m.State))
	for role := range m.Assigned {
		appendTasks(b, m.Assigned[role], Role(role) == Active)
	}
	for role := range m.Pending {
		appendTasks(b, m.Pending[role], Role(role) == Active)
	}
	return log.Record{Key: memberKey(records.KindStreamsCurrentMember, group, m.ID), Value: b.Build()}
}

// TopologyRecord is Topology (spec type 23).
func TopologyRecord(group string, t *Topology) log.Record {
	b := records.NewValue(0).Int32(t.Epoch).Int32(int32(len(t.Subtopologies)))
	for _, s := range t.Subtopologies {
		b.String(s.ID)
		appendStrings(b, s.SourceTopics)
		appendStrings(b, s.SourceTopicRegex)
		appendTopicInfos(b, s.Changelogs)
		appendStrings(b, s.RepartitionSinks)
		appendTopicInfos(b, s.RepartitionSources)
		b.Int32(int32(len(s.Copartition)))
		for _, c := range s.Copartition {
			appendInt16s(b, c.SourceTopics)
			appendInt16s(b, c.SourceTopicRegex)
			appendInt16s(b, c.RepartitionSourceTopics)
		}
	}
	return log.Record{Key: groupKey(records.KindStreamsTopology, group), Value: b.Build()}
}

// Tombstones.
func groupMetadataTombstone(group string) log.Record {
	return log.Record{Key: groupKey(records.KindStreamsGroupMetadata, group)}
}
func memberMetadataTombstone(group, member string) log.Record {
	return log.Record{Key: memberKey(records.KindStreamsMemberMetadata, group, member)}
}
func targetMetadataTombstone(group string) log.Record {
	return log.Record{Key: groupKey(records.KindStreamsTargetMetadata, group)}
}
func targetMemberTombstone(group, member string) log.Record {
	return log.Record{Key: memberKey(records.KindStreamsTargetMember, group, member)}
}
func currentMemberTombstone(group, member string) log.Record {
	return log.Record{Key: memberKey(records.KindStreamsCurrentMember, group, member)}
}
func topologyTombstone(group string) log.Record {
	return log.Record{Key: groupKey(records.KindStreamsTopology, group)}
}

func appendTasks(b *records.Builder, m map[Task]int32, withEpochs bool) {
	list := sortedTasks(m)
	b.Int32(int32(len(list)))
	for _, s := range list {
		b.String(s.ID).Int32(int32(len(s.Partitions)))
		for i, p := range s.Partitions {
			b.Int32(p)
			if withEpochs {
				b.Int32(s.Epochs[i])
			}
		}
	}
}

func readTasks(r *records.Reader, withEpochs bool, memberEpoch int32) (map[Task]int32, error) {
	n := r.Int32()
	if err := r.Err(); err != nil {
		return nil, err
	}
	if n < 0 || n > 1<<20 {
		return nil, fmt.Errorf("subtopology count %d", n)
	}
	var out map[Task]int32
	for i := int32(0); i < n; i++ {
		id := r.String()
		np := r.Int32()
		if err := r.Err(); err != nil {
			return nil, err
		}
		if np < 0 || np > 1<<24 {
			return nil, fmt.Errorf("partition count %d", np)
		}
		for j := int32(0); j < np; j++ {
			p := r.Int32()
			e := int32(0)
			if withEpochs {
				e = r.Int32()
			}
			if out == nil {
				out = map[Task]int32{}
			}
			out[Task{Subtopology: id, Partition: p}] = e
		}
	}
	return out, r.Err()
}

func appendStrings(b *records.Builder, ss []string) {
	b.Int32(int32(len(ss)))
	for _, s := range ss {
		b.String(s)
	}
}

func readStrings(r *records.Reader) []string {
	n := r.Int32()
	if r.Err() != nil || n < 0 || n > 1<<20 {
		return []string{}
	}
	out := make([]string, 0, n)
	for i := int32(0); i < n; i++ {
		out = append(out, r.String())
	}
	return out
}

func appendInt16s(b *records.Builder, vs []int16) {
	b.Int32(int32(len(vs)))
	for _, v := range vs {
		b.Int16(v)
	}
}

func readInt16s(r *records.Reader) []int16 {
	n := r.Int32()
	if r.Err() != nil || n < 0 || n > 1<<20 {
		return []int16{}
	}
	out := make([]int16, 0, n)
	for i := int32(0); i < n; i++ {
		out = append(out, r.Int16())
	}
	return out
}

func appendTopicInfos(b *records.Builder, ts []TopicInfo) {
	b.Int32(int32(len(ts)))
	for _, t := range ts {
		b.String(t.Name).Int32(t.Partitions).Int16(t.ReplicationFactor).Int32(int32(len(t.Configs)))
		for _, kv := range t.Configs {
			b.String(kv.Key).String(kv.Value)
		}
	}
}

func readTopicInfos(r *records.Reader) []TopicInfo {
	n := r.Int32()
	if r.Err() != nil || n < 0 || n > 1<<20 {
		return []TopicInfo{}
	}
	out := make([]TopicInfo, 0, n)
	for i := int32(0); i < n; i++ {
		t := TopicInfo{Name: r.String(), Partitions: r.Int32(), ReplicationFactor: r.Int16()}
		nc := r.Int32()
		if r.Err() != nil || nc < 0 || nc > 1<<20 {
			return out
		}
		t.Configs = make([]KV, 0, nc)
		for j := int32(0); j < nc; j++ {
			t.Configs = append(t.Configs, KV{Key: r.String(), Value: r.String()})
		}
		out = append(out, t)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Replay applies one streams record (spec §10.2).
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
	case records.KindStreamsMemberMetadata, records.KindStreamsTargetMember, records.KindStreamsCurrentMember, records.KindStreamsClassicMember:
		memberID = r.String()
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%s key: %w", kind, err)
	}
	g := s.Groups[groupID]
	if rec.Tombstone() {
		if g == nil {
			return nil // tombstones of unknown groups are ignored
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
			g.countStable(m, 1)
		}
		return m
	}
	switch kind {
	case records.KindStreamsGroupMetadata:
		g.Epoch, g.MetadataHash, g.ValidatedTopologyEpoch = v.Int32(), v.Int64(), v.Int32()
		n := v.Int32()
		if v.Err() == nil && n >= 0 && n < 1<<20 {
			g.AssignmentConfigs = make(map[string]string, n)
			for i := int32(0); i < n; i++ {
				k := v.String()
				g.AssignmentConfigs[k] = v.String()
			}
		}
		g.StoredDescriptionEpoch, g.FailedDescriptionEpoch = v.Int32(), v.Int32()
		g.hasMetadata = true
	case records.KindStreamsMemberMetadata:
		m := member()
		g.unindexInstance(m)
		m.InstanceID, m.RackID, m.ClientID, m.ClientHost = v.NullableString(), v.NullableString(), v.String(), v.String()
		if m.InstanceID != nil {
			g.instances[*m.InstanceID] = m.ID
		}
		m.RebalanceTimeoutMs, m.TopologyEpoch, m.ProcessID = v.Int32(), v.Int32(), v.String()
		m.UserEndpoint = nil
		if v.Bool() {
			m.UserEndpoint = &Endpoint{Host: v.String(), Port: uint16(v.Int32())}
		}
		n := v.Int32()
		m.ClientTags = map[string]string{}
		if v.Err() == nil && n >= 0 && n < 1<<20 {
			for i := int32(0); i < n; i++ {
				k := v.String()
				m.ClientTags[k] = v.String()
			}
		}
		m.hasMetadata = true
	case records.KindStreamsTargetMetadata:
		g.AssignmentEpoch, g.AssignmentTimestamp = v.Int32(), v.Int64()
	case records.KindStreamsClassicMember:
		c, err := readClassicMember(v)
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", kind, groupID, memberID, err)
		}
		member().Classic = c
	case records.KindStreamsTargetMember:
		var t Roles
		for role := range t {
			if t[role], err = readTasks(v, false, 0); err != nil {
				return fmt.Errorf("%s %s/%s: %w", kind, groupID, memberID, err)
			}
		}
		if old, ok := g.Targets[memberID]; ok && hasWarmups(old) {
			g.warmTargets--
		}
		if hasWarmups(t) {
			g.warmTargets++
		}
		g.Targets[memberID] = t
	case records.KindStreamsCurrentMember:
		m := member()
		g.countStable(m, -1)
		m.Epoch, m.PreviousEpoch = v.Int32(), v.Int32()
		switch st := MemberState(v.Int16()); st {
		case Stable, UnrevokedTasks, UnreleasedTasks:
			m.State = st
		default:
			m.State = UnknownState
		}
		g.countStable(m, 1)
		var assigned, pending Roles
		for role := range assigned {
			if assigned[role], err = readTasks(v, Role(role) == Active, m.Epoch); err != nil {
				return fmt.Errorf("%s %s/%s: %w", kind, groupID, memberID, err)
			}
		}
		for role := range pending {
			if pending[role], err = readTasks(v, Role(role) == Active, m.Epoch); err != nil {
				return fmt.Errorf("%s %s/%s: %w", kind, groupID, memberID, err)
			}
		}
		g.owners.remove(m)
		m.Assigned, m.Pending = assigned, pending
		g.owners.add(m)
		m.hasCurrent = true
	case records.KindStreamsTopology:
		t := &Topology{Epoch: v.Int32()}
		n := v.Int32()
		if v.Err() == nil && n >= 0 && n < 1<<20 {
			t.Subtopologies = make([]Subtopology, 0, n)
			for i := int32(0); i < n; i++ {
				st := Subtopology{ID: v.String()}
				st.SourceTopics = readStrings(v)
				st.SourceTopicRegex = readStrings(v)
				st.Changelogs = readTopicInfos(v)
				st.RepartitionSinks = readStrings(v)
				st.RepartitionSources = readTopicInfos(v)
				nc := v.Int32()
				st.Copartition = []CopartitionGroup{}
				for j := int32(0); v.Err() == nil && j < nc && nc < 1<<20; j++ {
					st.Copartition = append(st.Copartition, CopartitionGroup{
						SourceTopics: readInt16s(v), SourceTopicRegex: readInt16s(v), RepartitionSourceTopics: readInt16s(v),
					})
				}
				t.Subtopologies = append(t.Subtopologies, st)
			}
		}
		g.Topology = t
	default:
		return fmt.Errorf("not a streams record kind: %s", kind)
	}
	if err := v.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", kind, groupID, err)
	}
	return nil
}

func (s *State) replayTombstone(g *Group, kind records.Kind, memberID string) error {
	switch kind {
	case records.KindStreamsGroupMetadata:
		if len(g.Members) > 0 {
			return fmt.Errorf("streams group %s: group tombstone while %d members exist", g.ID, len(g.Members))
		}
		delete(s.Groups, g.ID)
	case records.KindStreamsMemberMetadata:
		m := g.Members[memberID]
		if m == nil {
			return nil
		}
		if m.hasCurrent {
			return fmt.Errorf("streams group %s: member %s metadata tombstone before its current assignment tombstone", g.ID, memberID)
		}
		if _, ok := g.Targets[memberID]; ok {
			return fmt.Errorf("streams group %s: member %s metadata tombstone before its target assignment tombstone", g.ID, memberID)
		}
		if m.Classic != nil {
			return fmt.Errorf("streams group %s: member %s metadata tombstone before its classic metadata tombstone", g.ID, memberID)
		}
		g.unindexInstance(m)
		g.countStable(m, -1)
		delete(g.Members, memberID)
		delete(g.soft.taskOffsets, memberID)
		delete(g.soft.taskEndOffsets, memberID)
		if len(g.Members) == 0 {
			g.soft.shutdownBy, g.soft.shutdownSent = "", nil // cleared when the group becomes empty (spec §4.8)
		}
	case records.KindStreamsTargetMetadata:
		g.AssignmentEpoch, g.AssignmentTimestamp = -1, 0
	case records.KindStreamsTargetMember:
		if old, ok := g.Targets[memberID]; ok && hasWarmups(old) {
			g.warmTargets--
		}
		delete(g.Targets, memberID)
	case records.KindStreamsCurrentMember:
		if m := g.Members[memberID]; m != nil {
			g.owners.remove(m)
			g.countStable(m, -1)
			m.Epoch, m.PreviousEpoch = -1, -1
			g.countStable(m, 1)
			m.Assigned, m.Pending = Roles{}, Roles{}
			m.hasCurrent = false
		}
	case records.KindStreamsClassicMember:
		if m := g.Members[memberID]; m != nil {
			m.Classic = nil
		}
	case records.KindStreamsTopology:
		g.Topology = nil
	}
	return nil
}
