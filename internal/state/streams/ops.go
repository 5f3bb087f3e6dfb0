package streams

import (
	"sort"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitialDelayExpired computes the target assignment once the initial rebalance delay is
// over (spec §4.6): at the current group epoch, with the group's stored assignment configs;
// nothing if the group became empty or its topology cannot be configured.
func (s *State) InitialDelayExpired(group string, cat Catalog, cfg Config, now time.Time) []log.Record {
	g := s.Groups[group]
	if g != nil && g.soft.catalog != nil {
		cat = g.soft.catalog // newer than the snapshot the timer was armed with
	}
	if g == nil || len(g.Members) == 0 || g.Topology == nil || cat == nil {
		return nil
	}
	configured, err := Configure(g.Topology, cat)
	if err != nil {
		return nil
	}
	targets, err := computeTargets(g.Members, configured, cfg, configsFromStored(cfg, g.AssignmentConfigs), g.soft.taskOffsets, g.soft.taskEndOffsets)
	if err != nil {
		return nil
	}
	var recs []log.Record
	for _, id := range sortedMemberIDs(g.Members) {
		if old, had := g.Targets[id]; !had || !old.SameTasks(targets[id]) {
			recs = append(recs, TargetMemberRecord(g.ID, id, targets[id]))
		}
	}
	return append(recs, TargetMetadataRecord(g.ID, g.Epoch, now.UnixMilli()))
}

// LoadedTimers are the timers to arm after a load (spec §4.6): a session timer for every
// member and a rebalance timer for every member in UNREVOKED_TASKS. The initial-delay timer
// is not restored. cfg gives a group's configuration (its group-level overrides applied).
func (s *State) LoadedTimers(cfgFor func(group string) Config) []TimerAction {
	var out []TimerAction
	for _, g := range s.Groups {
		cfg := cfgFor(g.ID)
		for _, m := range g.Members {
			if m.Classic != nil { // its own session timeout, restarting at load (online-migration §7.7)
				out = append(out, classicTimer(ClassicSessionTimer, g.ID, m.ID, m.Classic.SessionTimeoutMs))
				continue
			}
			out = append(out, TimerAction{Kind: SessionTimer, Group: g.ID, Member: m.ID, After: cfg.SessionTimeout})
			if m.State == UnrevokedTasks {
				out = append(out, TimerAction{Kind: RebalanceTimer, Group: g.ID, Member: m.ID, Epoch: m.Epoch, After: time.Duration(max(m.RebalanceTimeoutMs, 0)) * time.Millisecond})
			}
		}
	}
	return out
}

// AuthorizedOperationsAll is READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS and ALTER_CONFIGS: what a
// principal may do on a group without an authorizer (spec §9).
const AuthorizedOperationsAll = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

// Describe answers StreamsGroupDescribe for one group (spec §9). foreign reports whether
// another group type owns the id.
func (s *State) Describe(group string, includeOps bool, cat Catalog, cfg Config, foreign bool) kmsg.StreamsGroupDescribeResponseGroup {
	out := kmsg.NewStreamsGroupDescribeResponseGroup()
	out.Group = group
	g := s.Groups[group]
	if g == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "Group " + group + " not found."
		if foreign {
			msg = "Group " + group + " is not a streams group."
		}
		out.ErrorMessage = &msg
		return out
	}
	out.State = g.State().String()
	out.Epoch, out.AssignmentEpoch = g.Epoch, g.AssignmentEpoch
	name := cfg.AssignorName()
	out.AssignorName = &name
	if includeOps {
		out.AuthorizedOperations = AuthorizedOperationsAll
	}
	if g.Topology != nil {
		// A group that its last heartbeat found not ready shows its topology as stored, even if
		// the catalog has caught up since (internal topics created by that heartbeat): the
		// configured view appears once a heartbeat has validated it, as in Kafka.
		view := cat
		if g.State() == NotReady {
			view = nil
		}
		out.Topology = describeTopology(g.Topology, view)
	}
	out.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{}
	for _, id := range sortedMemberIDs(g.Members) {
		m := g.Members[id]
		dm := kmsg.NewStreamsGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.InstanceID, dm.RackID = m.ID, m.Epoch, m.InstanceID, m.RackID
		dm.ClientID, dm.ClientHost, dm.TopologyEpoch, dm.ProcessID = m.ClientID, m.ClientHost, m.TopologyEpoch, m.ProcessID
		if m.UserEndpoint != nil {
			dm.UserEndpoint = &kmsg.StreamsGroupDescribeResponseGroupMemberUserEndpoint{Host: m.UserEndpoint.Host, Port: m.UserEndpoint.Port}
		}
		dm.ClientTags = []kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{}
		for _, k := range sortedKeys(m.ClientTags) {
			t := kmsg.NewStreamsGroupDescribeResponseGroupMemberClientTag()
			t.Key, t.Value = k, m.ClientTags[k]
			dm.ClientTags = append(dm.ClientTags, t)
		}
		dm.TaskOffsets, dm.TaskEndOffsets = offsetsToWire(g.soft.taskOffsets[id]), offsetsToWire(g.soft.taskEndOffsets[id])
		dm.Assignment = assignmentToWire(m.Assigned)
		dm.TargetAssignment = assignmentToWire(g.Targets[id])
		dm.IsClassic = m.Classic != nil
		out.Members = append(out.Members, dm)
	}
	return out
}

func assignmentToWire(r Roles) kmsg.StreamsAssignment {
	a := kmsg.NewStreamsAssignment()
	a.ActiveTasks, a.StandbyTasks, a.WarmupTasks = TasksToWire(r[Active]), TasksToWire(r[Standby]), TasksToWire(r[Warmup])
	return a
}

func offsetsToWire(m map[Task]int64) []kmsg.TaskOffset {
	out := []kmsg.TaskOffset{}
	for t, o := range m {
		w := kmsg.NewTaskOffset()
		w.SubtopologyID, w.Partition, w.Offset = t.Subtopology, t.Partition, o
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SubtopologyID != out[j].SubtopologyID {
			return out[i].SubtopologyID < out[j].SubtopologyID
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func topicInfosToWire(ts []TopicInfo) []kmsg.TopicInfo {
	out := []kmsg.TopicInfo{}
	for _, t := range ts {
		w := kmsg.NewTopicInfo()
		w.Topic, w.NumPartitions, w.ReplicationFactor = t.Name, t.Partitions, t.ReplicationFactor
		for _, kv := range t.Configs {
			c := kmsg.NewTopicInfoConfig()
			c.Key, c.Value = kv.Key, kv.Value
			w.Configs = append(w.Configs, c)
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// describeTopology is the configured view when the topology is ready, else the stored one.
func describeTopology(t *Topology, cat Catalog) *kmsg.StreamsGroupDescribeResponseGroupTopology {
	out := kmsg.NewStreamsGroupDescribeResponseGroupTopology()
	out.Epoch = t.Epoch
	// The field is nullable on the wire: a topology without subtopologies is [] there (as
	// Kafka sends it), never null.
	out.Subtopologies = []kmsg.StreamsGroupDescribeResponseGroupTopologySubtopology{}
	var configured *Configured
	if cat != nil {
		configured, _ = Configure(t, cat)
	}
	if configured.Ready() {
		for _, cs := range configured.Subtopologies {
			st := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
			st.SubtopologyID, st.SourceTopics, st.RepartitionSinkTopics = cs.ID, cs.SourceTopics, cs.RepartitionSinks
			st.StateChangelogTopics, st.RepartitionSourceTopics = topicInfosToWire(cs.Changelogs), topicInfosToWire(cs.RepartitionSources)
			out.Subtopologies = append(out.Subtopologies, st)
		}
		return &out
	}
	subs := append([]Subtopology{}, t.Subtopologies...)
	sort.Slice(subs, func(i, j int) bool { return subs[i].ID < subs[j].ID })
	for _, s := range subs {
		st := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
		st.SubtopologyID, st.SourceTopics, st.RepartitionSinkTopics = s.ID, sortedCopy(s.SourceTopics), sortedCopy(s.RepartitionSinks)
		st.StateChangelogTopics, st.RepartitionSourceTopics = topicInfosToWire(s.Changelogs), topicInfosToWire(s.RepartitionSources)
		out.Subtopologies = append(out.Subtopologies, st)
	}
	return &out
}

// ListedState is the ListGroups state of a streams group (spec §11.1), or "" if absent.
func (s *State) ListedState(group string) string {
	if g := s.Groups[group]; g != nil {
		return g.State().String()
	}
	return ""
}

// ListedStateFilter is the lower-case name ListGroups' state filter matches (spec §4.3).
func ListedStateFilter(state string) string {
	switch state {
	case "NotReady":
		return "not_ready"
	}
	return lower(state)
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// DeleteGroup validates a DeleteGroups of a streams group (spec §11.3) and returns its
// tombstones in Kafka's order, without the committed offsets (the caller adds those first).
// The initial-delay timer is to be cancelled.
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

// Tombstones are the records that delete a group (spec §10.3), for a deletion or a conversion.
func (s *State) Tombstones(group string) []log.Record {
	g := s.Groups[group]
	if g == nil {
		return nil
	}
	ids := sortedMemberIDs(g.Members)
	var recs []log.Record
	for _, id := range ids {
		recs = append(recs, currentMemberTombstone(group, id))
	}
	targetIDs := make([]string, 0, len(g.Targets))
	for id := range g.Targets {
		targetIDs = append(targetIDs, id)
	}
	sort.Strings(targetIDs)
	for _, id := range targetIDs {
		recs = append(recs, targetMemberTombstone(group, id))
	}
	recs = append(recs, targetMetadataTombstone(group))
	for _, id := range ids {
		if g.Members[id].Classic != nil {
			recs = append(recs, classicMemberTombstone(group, id))
		}
		recs = append(recs, memberMetadataTombstone(group, id))
	}
	return append(recs, groupMetadataTombstone(group), topologyTombstone(group))
}

// CommitPartition is a partition of an offset commit, for validation.
type CommitPartition struct {
	Topic     string
	Partition int32
}

// ValidateCommit applies spec §11.5 to an OffsetCommit (txn=false) or TxnOffsetCommit
// (txn=true). owned is false when no streams group has this id.
func (s *State) ValidateCommit(group, member string, instance *string, epoch int32, version int16, txn bool, parts []CommitPartition) (code int16, owned bool) {
	g := s.Groups[group]
	if g == nil {
		return 0, false
	}
	if txn && member == "" && epoch < 0 && instance == nil {
		return 0, true
	}
	if epoch < 0 && len(g.Members) == 0 {
		return 0, true
	}
	m := g.Members[member]
	if m == nil {
		return kerr.UnknownMemberID.Code, true
	}
	stale := kerr.StaleMemberEpoch.Code // the TxnOffsetCommit handler maps it for versions < 6
	if m.Classic != nil {
		// Classic clients commit with their generation at any version and understand
		// ILLEGAL_GENERATION, not STALE_MEMBER_EPOCH (spec online-migration §4.10).
		stale = kerr.IllegalGeneration.Code
	} else if !txn && version < 9 {
		return kerr.UnsupportedVersion.Code, true
	}
	switch {
	case epoch == m.Epoch:
		return 0, true
	case epoch > m.Epoch:
		return stale, true
	}
	if g.Topology == nil {
		return stale, true
	}
	for _, p := range parts {
		sub, ok := g.Topology.subtopologyOf(p.Topic)
		if !ok {
			return stale, true
		}
		t := Task{Subtopology: sub, Partition: p.Partition}
		te, ok := m.Assigned[Active][t]
		if !ok {
			te, ok = m.Pending[Active][t]
		}
		if !ok || epoch < te {
			return stale, true
		}
	}
	return 0, true
}

// ValidateFetch applies spec §11.5 to an OffsetFetch naming a member. owned is false when no
// streams group has this id.
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
		if m.Classic != nil { // classic clients know ILLEGAL_GENERATION (spec online-migration §4.10)
			return kerr.IllegalGeneration.Code, true
		}
		return kerr.StaleMemberEpoch.Code, true
	}
	return 0, true
}

// Subscribed reports whether a non-empty streams group reads a topic (OffsetDelete, §11.4).
func (s *State) Subscribed(group, topic string) bool {
	g := s.Groups[group]
	if g == nil || len(g.Members) == 0 || g.Topology == nil {
		return false
	}
	_, ok := g.Topology.subtopologyOf(topic)
	return ok
}

// IsEmpty reports whether a streams group exists and has no members.
func (s *State) IsEmpty(group string) bool {
	g := s.Groups[group]
	return g != nil && len(g.Members) == 0
}
