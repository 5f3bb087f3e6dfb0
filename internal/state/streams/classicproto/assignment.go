package classicproto

import (
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Assignment is Kafka Streams' AssignmentInfo (spec §2.2), the user data of a classic Streams
// member's SyncGroup assignment.
type Assignment struct {
	Version                  int32
	CommonlySupportedVersion int32 // versions 3+
	// Active has one entry per assigned partition, in the order of the partitions of the
	// consumer-protocol assignment (spec §2.4): the client zips the two lists by position.
	Active  []TaskID
	Standby []StandbyTask
	// ActiveByHost (versions 2+) and StandbyByHost (versions 6+) are the interactive-query maps.
	ActiveByHost    []HostPartitions
	StandbyByHost   []HostPartitions
	ErrCode         int32 // versions 4+
	NextRebalanceMs int64 // versions 7+
}

// StandbyTask is one standby (or warm-up) task with its partitions.
type StandbyTask struct {
	Task       TaskID
	Partitions []TopicPartition
}

// HostPartitions is one user endpoint's partitions.
type HostPartitions struct {
	Host       string
	Port       int32
	Partitions []TopicPartition
}

// AssignmentVersions picks the AssignmentInfo versions for a member from the SubscriptionInfo
// of its latest JoinGroup (spec §2.5): its own used version, capped at LatestVersion for a
// future member; commonly supported = min(LatestVersion, its latest supported version).
func AssignmentVersions(s Subscription) (used, commonly int32) {
	commonly = min(LatestVersion, s.LatestSupportedVersion)
	if s.Version > LatestVersion {
		return commonly, commonly
	}
	return s.Version, commonly
}

// OuterVersion is the consumer-protocol assignment version for a member: its subscription's
// version clamped to 0..3, as Kafka does for KIP-848 migrations.
func OuterVersion(subscriptionVersion int16) int16 { return max(0, min(3, subscriptionVersion)) }

// Encode writes the AssignmentInfo at a.Version (1..11). Maps come out in a canonical order —
// standby tasks, hosts and partitions ascending, dictionary indexes 0, 1, … in ascending topic
// order — which the client does not need (it builds hash maps) but tests and replays do.
func (a Assignment) Encode() ([]byte, error) { return a.canonical().encodeInOrder() }

// canonical is a with its map entries in Encode's order; the active list keeps its order, which
// is the partitions'.
func (a Assignment) canonical() Assignment {
	a.Standby = slices.Clone(a.Standby)
	for i := range a.Standby {
		a.Standby[i].Partitions = sortedTPs(a.Standby[i].Partitions)
	}
	sort.Slice(a.Standby, func(i, j int) bool { return taskLess(a.Standby[i].Task, a.Standby[j].Task) })
	a.ActiveByHost, a.StandbyByHost = sortedHosts(a.ActiveByHost), sortedHosts(a.StandbyByHost)
	return a
}

// encodeInOrder writes the entries in the order a holds them (Java writes its HashMaps' order,
// which the golden tests reproduce this way); only the topic dictionary is always ascending.
func (a Assignment) encodeInOrder() ([]byte, error) {
	v := a.Version
	if v < 1 || v > LatestVersion {
		return nil, fmt.Errorf("AssignmentInfo version %d outside 1..%d", v, LatestVersion)
	}
	w := &writer{}
	w.int32(v)
	if v >= minLatestSupported {
		w.int32(a.CommonlySupportedVersion)
	}
	w.count(len(a.Active))
	for _, t := range a.Active {
		w.taskID(t, v)
	}
	w.count(len(a.Standby))
	for _, s := range a.Standby {
		w.taskID(s.Task, v)
		if err := w.plainPartitions(s.Partitions); err != nil {
			return nil, err
		}
	}
	active, stby := a.ActiveByHost, a.StandbyByHost
	switch {
	case v >= 6:
		dict := w.dictionary(active, stby)
		if err := w.dictHosts(active, dict); err != nil {
			return nil, err
		}
		if err := w.dictHosts(stby, dict); err != nil {
			return nil, err
		}
	case v == 5:
		dict := w.dictionary(active)
		if err := w.dictHosts(active, dict); err != nil {
			return nil, err
		}
	case v >= 2:
		w.count(len(active))
		for _, h := range active {
			if err := w.utf(h.Host, "host"); err != nil {
				return nil, err
			}
			w.int32(h.Port)
			if err := w.plainPartitions(h.Partitions); err != nil {
				return nil, err
			}
		}
	}
	if v >= 4 {
		w.int32(a.ErrCode)
	}
	if v >= 7 {
		w.int64(a.NextRebalanceMs)
	}
	return w.b, nil
}

func (w *writer) taskID(t TaskID, version int32) {
	w.int32(t.Subtopology)
	w.int32(t.Partition)
	if version >= minFlatOffsetSums {
		w.javaChars(t.NamedTopology)
	}
}

func sortedTPs(ps []TopicPartition) []TopicPartition {
	out := slices.Clone(ps)
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i], out[j]) })
	return out
}

func (w *writer) plainPartitions(ps []TopicPartition) error {
	w.count(len(ps))
	for _, p := range ps {
		if err := w.utf(p.Topic, "topic"); err != nil {
			return err
		}
		w.int32(p.Partition)
	}
	return nil
}

func sortedHosts(hs []HostPartitions) []HostPartitions {
	out := slices.Clone(hs)
	for i := range out {
		out[i].Partitions = sortedTPs(out[i].Partitions)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].Port < out[j].Port
	})
	return out
}

func (w *writer) dictionary(maps ...[]HostPartitions) map[string]int32 {
	var topics []string
	seen := map[string]bool{}
	for _, m := range maps {
		for _, h := range m {
			for _, p := range h.Partitions {
				if !seen[p.Topic] {
					seen[p.Topic] = true
					topics = append(topics, p.Topic)
				}
			}
		}
	}
	sort.Strings(topics)
	dict := make(map[string]int32, len(topics))
	w.count(len(topics))
	for i, t := range topics {
		dict[t] = int32(i)
		w.int32(int32(i))
		// Topic names passed the catalog's name rules; the length cannot exceed writeUTF's limit.
		_ = w.utf(t, "topic")
	}
	return dict
}

func (w *writer) dictHosts(hs []HostPartitions, dict map[string]int32) error {
	w.count(len(hs))
	for _, h := range hs {
		if err := w.utf(h.Host, "host"); err != nil {
			return err
		}
		w.int32(h.Port)
		w.count(len(h.Partitions))
		for _, p := range h.Partitions {
			w.int32(dict[p.Topic])
			w.int32(p.Partition)
		}
	}
	return nil
}

// DecodeAssignment decodes AssignmentInfo bytes of versions 1..11 (spec §2.2); anything else,
// and any over-read or dictionary index without an entry, is malformed.
func DecodeAssignment(b []byte) (Assignment, error) {
	r := &reader{b: b}
	var a Assignment
	a.Version = r.int32("version")
	if r.err != nil {
		return Assignment{}, r.err
	}
	v := a.Version
	if v < 1 || v > LatestVersion {
		return Assignment{}, malformed("AssignmentInfo version %d", v)
	}
	a.CommonlySupportedVersion = -1
	if v >= minLatestSupported {
		a.CommonlySupportedVersion = r.int32("commonly supported version")
	}
	taskSize := 8
	if v >= minFlatOffsetSums {
		taskSize = 12
	}
	n := r.count(taskSize, "active tasks")
	for i := 0; i < n && r.err == nil; i++ {
		a.Active = append(a.Active, r.taskID(v))
	}
	n = r.count(taskSize+4, "standby tasks")
	for i := 0; i < n && r.err == nil; i++ {
		t := r.taskID(v)
		a.Standby = append(a.Standby, StandbyTask{Task: t, Partitions: r.plainPartitions()})
	}
	switch {
	case v >= 5:
		dict := map[int32]string{}
		n = r.count(6, "topic dictionary")
		for i := 0; i < n && r.err == nil; i++ {
			idx := r.int32("topic index")
			dict[idx] = r.utf("topic")
		}
		a.ActiveByHost = r.dictHosts(dict)
		if v >= 6 {
			a.StandbyByHost = r.dictHosts(dict)
		}
	case v >= 2:
		n = r.count(10, "partitions by host")
		for i := 0; i < n && r.err == nil; i++ {
			h := HostPartitions{Host: r.utf("host"), Port: r.int32("port")}
			h.Partitions = r.plainPartitions()
			a.ActiveByHost = append(a.ActiveByHost, h)
		}
	}
	if v >= 4 {
		a.ErrCode = r.int32("error code")
	}
	if v >= 7 {
		a.NextRebalanceMs = r.int64("next rebalance ms")
	}
	if r.err != nil {
		return Assignment{}, fmt.Errorf("AssignmentInfo v%d: %w", v, r.err)
	}
	return a, nil
}

func (r *reader) taskID(version int32) TaskID {
	t := TaskID{Subtopology: r.int32("task subtopology"), Partition: r.int32("task partition")}
	if version >= minFlatOffsetSums {
		t.NamedTopology = r.javaChars("named topology")
	}
	return t
}

func (r *reader) plainPartitions() []TopicPartition {
	n := r.count(6, "partitions")
	var out []TopicPartition
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, TopicPartition{Topic: r.utf("topic"), Partition: r.int32("partition")})
	}
	return out
}

func (r *reader) dictHosts(dict map[int32]string) []HostPartitions {
	n := r.count(10, "partitions by host")
	var out []HostPartitions
	for i := 0; i < n && r.err == nil; i++ {
		h := HostPartitions{Host: r.utf("host"), Port: r.int32("port")}
		k := r.count(8, "host partitions")
		for j := 0; j < k && r.err == nil; j++ {
			idx := r.int32("topic index")
			p := r.int32("partition")
			topic, ok := dict[idx]
			if !ok && r.err == nil {
				r.fail("topic index %d is not in the dictionary", idx)
			}
			h.Partitions = append(h.Partitions, TopicPartition{Topic: topic, Partition: p})
		}
		out = append(out, h)
	}
	return out
}

// EncodeMemberAssignment wraps AssignmentInfo into the consumer-protocol assignment a classic
// member receives from SyncGroup (spec §2.1): partitions grouped by topic, topics and partitions
// ascending. The client needs the partitions in the same order as info.Active; callers build both
// from one sorted list (SortPartitions).
func EncodeMemberAssignment(outerVersion int16, partitions []TopicPartition, info Assignment) ([]byte, error) {
	user, err := info.Encode()
	if err != nil {
		return nil, err
	}
	out := kmsg.ConsumerMemberAssignment{Version: outerVersion, UserData: user}
	for _, p := range sortedTPs(partitions) {
		if n := len(out.Topics); n == 0 || out.Topics[n-1].Topic != p.Topic {
			out.Topics = append(out.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: p.Topic})
		}
		last := &out.Topics[len(out.Topics)-1]
		last.Partitions = append(last.Partitions, p.Partition)
	}
	return out.AppendTo(nil), nil
}

// SortPartitions sorts partitions by topic (byte order), then partition: the order of the
// consumer-protocol assignment and therefore of AssignmentInfo's active list (spec §2.4).
func SortPartitions(ps []TopicPartition) {
	sort.Slice(ps, func(i, j int) bool { return tpLess(ps[i], ps[j]) })
}

// DecodeMemberAssignment decodes a consumer-protocol assignment and the AssignmentInfo inside.
// An empty byte array (what a classic group stores for a member that never synced) is reported
// as empty with a nil error.
func DecodeMemberAssignment(b []byte) (partitions []TopicPartition, info Assignment, empty bool, err error) {
	if len(b) == 0 {
		return nil, Assignment{}, true, nil
	}
	var outer kmsg.ConsumerMemberAssignment
	if err := outer.ReadFrom(b); err != nil || outer.Version < 0 {
		return nil, Assignment{}, false, malformed("consumer protocol assignment does not decode")
	}
	if outer.UserData == nil {
		return nil, Assignment{}, false, malformed("consumer protocol assignment carries no AssignmentInfo")
	}
	info, err = DecodeAssignment(outer.UserData)
	if err != nil {
		return nil, Assignment{}, false, err
	}
	for _, t := range outer.Topics {
		for _, p := range t.Partitions {
			partitions = append(partitions, TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return partitions, info, false, nil
}
