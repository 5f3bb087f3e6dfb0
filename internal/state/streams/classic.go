package streams

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
)

// Classic members (spec online-migration §4): Kafka Streams threads that still talk the classic
// protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) inside a streams group. They are ordinary
// members — member, target and current-assignment records, reconciled by the same engine — plus
// the classic part below.

// ClassicProtocolName is the protocol a classic Streams member offers (StreamsPartitionAssignor).
const ClassicProtocolName = "stream"

// ClassicMember is the classic-protocol part of a member: what its last JoinGroup carried.
// Never changed in place; a change replaces it.
type ClassicMember struct {
	SessionTimeoutMs int32
	Protocols        []ClassicProtocol
}

// ClassicProtocol is one protocol of a JoinGroup.
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// streamMetadata is the metadata of the "stream" protocol, nil when absent.
func streamMetadata(ps []ClassicProtocol) []byte {
	for _, p := range ps {
		if p.Name == ClassicProtocolName {
			return p.Metadata
		}
	}
	return nil
}

// decode decodes and validates the member's "stream" metadata (spec §1.6 rules 1-4, 6).
func (c *ClassicMember) decode() (classicproto.Member, error) {
	md := streamMetadata(c.Protocols)
	if md == nil {
		return classicproto.Member{}, fmt.Errorf("no %q protocol", ClassicProtocolName)
	}
	return classicproto.DecodeMember(md)
}

func (c *ClassicMember) equal(o *ClassicMember) bool {
	if c == nil || o == nil {
		return c == nil && o == nil
	}
	if c.SessionTimeoutMs != o.SessionTimeoutMs || len(c.Protocols) != len(o.Protocols) {
		return false
	}
	for i := range c.Protocols {
		if c.Protocols[i].Name != o.Protocols[i].Name || string(c.Protocols[i].Metadata) != string(o.Protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// ClassicMemberRecord is the classic part of a member (spec §7.5, record kind 30).
func ClassicMemberRecord(group string, m *Member) log.Record {
	b := records.NewValue(0).Int32(m.Classic.SessionTimeoutMs).Int32(int32(len(m.Classic.Protocols)))
	for _, p := range m.Classic.Protocols {
		b.String(p.Name).Bytes(p.Metadata)
	}
	return log.Record{Key: memberKey(records.KindStreamsClassicMember, group, m.ID), Value: b.Build()}
}

func classicMemberTombstone(group, member string) log.Record {
	return log.Record{Key: memberKey(records.KindStreamsClassicMember, group, member)}
}

func readClassicMember(v *records.Reader) (*ClassicMember, error) {
	c := &ClassicMember{SessionTimeoutMs: v.Int32()}
	n := v.Int32()
	if err := v.Err(); err != nil {
		return nil, err
	}
	if n < 0 || n > 1<<16 {
		return nil, fmt.Errorf("protocol count %d", n)
	}
	c.Protocols = make([]ClassicProtocol, 0, n)
	for i := int32(0); i < n; i++ {
		c.Protocols = append(c.Protocols, ClassicProtocol{Name: v.String(), Metadata: v.Bytes()})
	}
	return c, v.Err()
}

// memberTombstones are the records removing a member: current assignment before target and
// metadata (the replay preconditions of streams-groups §10.2), the classic part with them.
func memberTombstones(group string, m *Member) []log.Record {
	recs := []log.Record{currentMemberTombstone(group, m.ID), targetMemberTombstone(group, m.ID)}
	if m.Classic != nil {
		recs = append(recs, classicMemberTombstone(group, m.ID))
	}
	return append(recs, memberMetadataTombstone(group, m.ID))
}

// IsClassic reports whether the member talks the classic protocol.
func (m *Member) IsClassic() bool { return m.Classic != nil }

// ClassicMembers counts a group's classic members.
func (g *Group) ClassicMembers() int {
	n := 0
	for _, m := range g.Members {
		if m.Classic != nil {
			n++
		}
	}
	return n
}

// Task <-> topic partition mapping (spec §2.3).

// subtopologyInt is the classic protocol's int32 id of a subtopology; ok is false for ids that
// are not canonical decimal int32 strings.
func subtopologyInt(id string) (int32, bool) {
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil || strconv.FormatInt(n, 10) != id {
		return 0, false
	}
	return int32(n), true
}

// topicOwners maps every input topic of the configured topology to its subtopology.
func topicOwners(c *Configured) map[string]string {
	out := map[string]string{}
	for _, st := range c.Subtopologies {
		for t := range st.TopicCounts {
			out[t] = st.ID
		}
	}
	return out
}

// partitionsOf lists the input partitions of tasks, sorted by topic then partition.
func partitionsOf(tasks map[Task]int32, c *Configured) []classicproto.TopicPartition {
	var out []classicproto.TopicPartition
	for t := range tasks {
		st := c.subtopology(t.Subtopology)
		if st == nil {
			continue
		}
		for topic, n := range st.TopicCounts {
			if t.Partition < n {
				out = append(out, classicproto.TopicPartition{Topic: topic, Partition: t.Partition})
			}
		}
	}
	classicproto.SortPartitions(out)
	return out
}

func classicTaskID(t Task) classicproto.TaskID {
	n, _ := subtopologyInt(t.Subtopology)
	return classicproto.TaskID{Subtopology: n, Partition: t.Partition}
}

func streamsTask(t classicproto.TaskID) Task {
	return Task{Subtopology: strconv.FormatInt(int64(t.Subtopology), 10), Partition: t.Partition}
}

// validTask reports whether the configured topology has the task.
func validTask(t Task, c *Configured) bool {
	st := c.subtopology(t.Subtopology)
	return st != nil && t.Partition >= 0 && t.Partition < st.Tasks
}

// ownedActives are the active tasks a classic member owns by its JoinGroup (spec §1.5): the tasks
// of its owned partitions plus those it reports running (offset sum -2, or v1-6 prevTasks).
func ownedActives(cm classicproto.Member, c *Configured) map[Task]int32 {
	out := map[Task]int32{}
	owners := topicOwners(c)
	for _, op := range cm.Outer.OwnedPartitions {
		sub, ok := owners[op.Topic]
		if !ok {
			continue
		}
		for _, p := range op.Partitions {
			if t := (Task{Subtopology: sub, Partition: p}); validTask(t, c) {
				out[t] = 0
			}
		}
	}
	for _, ct := range cm.Subscription.RunningActiveTasks() {
		if t := streamsTask(ct); validTask(t, c) {
			out[t] = 0
		}
	}
	return out
}

// checkClassicTopics is spec §1.6 rule 5: the subscription's topics are exactly the input topics
// of the group's topology.
func checkClassicTopics(topics []string, c *Configured) error {
	want := topicOwners(c)
	got := map[string]bool{}
	for _, t := range topics {
		got[t] = true
	}
	if len(got) != len(want) {
		return fmt.Errorf("subscribed topics %v are not the topology's input topics", sortedSet(got))
	}
	for t := range want {
		if !got[t] {
			return fmt.Errorf("subscribed topics %v lack the topology's input topic %s", sortedSet(got), t)
		}
	}
	return nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkClassicMetadata is the whole of spec §1.6 for one member against the configured topology;
// a future SubscriptionInfo (version > 11) passes (§4.13).
func checkClassicMetadata(protocolType string, ps []ClassicProtocol, c *Configured) (classicproto.Member, error) {
	if protocolType != "consumer" {
		return classicproto.Member{}, fmt.Errorf("protocol type %q is not consumer", protocolType)
	}
	cm, err := (&ClassicMember{Protocols: ps}).decode()
	if err != nil {
		return classicproto.Member{}, err
	}
	if cm.Subscription.Future {
		return cm, nil
	}
	if err := checkClassicTopics(cm.Outer.Topics, c); err != nil {
		return classicproto.Member{}, err
	}
	return cm, nil
}

// ClassicAssignmentInput is what the SyncGroup answer of one classic member is built from.
type ClassicAssignmentInput struct {
	Member     *Member
	Decoded    classicproto.Member
	Members    map[string]*Member // every member of the group, for the host maps
	Configured *Configured
	Shutdown   bool
	Now        time.Time
	// TaskOffsetInterval is the follow-up rejoin period while the member holds warm-ups.
	TaskOffsetInterval time.Duration
}

// classicAssignment builds the consumer-protocol assignment with AssignmentInfo that a classic
// member receives from SyncGroup (spec §2.4-§2.6).
func classicAssignment(in ClassicAssignmentInput) ([]byte, error) {
	sub := in.Decoded.Subscription
	used, commonly := classicproto.AssignmentVersions(sub)
	info := classicproto.Assignment{Version: used, CommonlySupportedVersion: commonly, NextRebalanceMs: classicproto.NoFollowUp}
	outer := classicproto.OuterVersion(in.Decoded.Outer.Version)
	switch {
	case in.Shutdown:
		info.ErrCode = classicproto.ErrShutdown
		return classicproto.EncodeMemberAssignment(outer, nil, info)
	case sub.Future || !in.Configured.Ready():
		return classicproto.EncodeMemberAssignment(outer, nil, info)
	}
	m := in.Member
	parts := partitionsOf(m.Assigned[Active], in.Configured)
	owners := topicOwners(in.Configured)
	for _, p := range parts {
		info.Active = append(info.Active, classicTaskID(Task{Subtopology: owners[p.Topic], Partition: p.Partition}))
	}
	standby := map[Task]int32{}
	for _, r := range []Role{Standby, Warmup} {
		for t := range m.Assigned[r] {
			standby[t] = 0
		}
	}
	for _, s := range sortedTasks(standby) {
		for _, p := range s.Partitions {
			t := Task{Subtopology: s.ID, Partition: p}
			info.Standby = append(info.Standby, classicproto.StandbyTask{Task: classicTaskID(t), Partitions: partitionsOf(map[Task]int32{t: 0}, in.Configured)})
		}
	}
	if used >= 2 {
		info.ActiveByHost, info.StandbyByHost = classicHostMaps(in.Members, in.Configured)
	}
	if len(m.Assigned[Warmup]) > 0 && in.TaskOffsetInterval > 0 {
		info.NextRebalanceMs = in.Now.Add(in.TaskOffsetInterval).UnixMilli()
	}
	return classicproto.EncodeMemberAssignment(outer, parts, info)
}

// classicHostMaps are the interactive-query maps of AssignmentInfo (spec §2.4 step 4): one key
// per distinct endpoint of any member, even with empty sets.
func classicHostMaps(members map[string]*Member, c *Configured) (active, standby []classicproto.HostPartitions) {
	type hp struct {
		host string
		port int32
	}
	act, stb := map[hp]map[Task]int32{}, map[hp]map[Task]int32{}
	for _, m := range members {
		if m.UserEndpoint == nil {
			continue
		}
		k := hp{m.UserEndpoint.Host, int32(m.UserEndpoint.Port)}
		if act[k] == nil {
			act[k], stb[k] = map[Task]int32{}, map[Task]int32{}
		}
		for t := range m.Assigned[Active] {
			act[k][t] = 0
		}
		for _, r := range []Role{Standby, Warmup} {
			for t := range m.Assigned[r] {
				stb[k][t] = 0
			}
		}
	}
	for k := range act {
		active = append(active, classicproto.HostPartitions{Host: k.host, Port: k.port, Partitions: partitionsOf(act[k], c)})
		standby = append(standby, classicproto.HostPartitions{Host: k.host, Port: k.port, Partitions: partitionsOf(stb[k], c)})
	}
	return active, standby
}
