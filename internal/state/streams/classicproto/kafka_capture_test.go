package classicproto

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaCapture is testdata/kafka-streams-4.4-wordcount.json: the classic-protocol bytes of a real
// Kafka Streams 4.4 word count (2 instances, one standby replica), as the reference broker
// stored them. test/e2e/classic_capture_test.go writes it; its "comment" says how.
type kafkaCapture struct {
	ApplicationID      string `json:"application_id"`
	InputTopic         string `json:"input_topic"`
	InputPartitions    int    `json:"input_partitions"`
	NumStandbyReplicas int    `json:"num_standby_replicas"`
	ProtocolType       string `json:"protocol_type"`
	Protocol           string `json:"protocol"`
	Members            []struct {
		ApplicationServer string `json:"application_server"`
		MemberID          string `json:"member_id"`
		ClientID          string `json:"client_id"`
		Metadata          string `json:"metadata"`
		Assignment        string `json:"assignment"`
	} `json:"members"`
}

// capturedMember is one member of the capture, decoded.
type capturedMember struct {
	endpoint, memberID, clientID string
	metadata, assignment         []byte
	member                       Member
	partitions                   []TopicPartition
	outerAssignment              kmsg.ConsumerMemberAssignment
	info                         Assignment
}

func loadKafkaCapture(t *testing.T) (kafkaCapture, []capturedMember) {
	t.Helper()
	b, err := os.ReadFile("testdata/kafka-streams-4.4-wordcount.json")
	if err != nil {
		t.Fatal(err)
	}
	var c kafkaCapture
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Members) != 2 {
		t.Fatalf("the capture has %d members, want the word count's 2 instances", len(c.Members))
	}
	var out []capturedMember
	for _, m := range c.Members {
		cm := capturedMember{endpoint: m.ApplicationServer, memberID: m.MemberID, clientID: m.ClientID}
		if cm.metadata, err = hex.DecodeString(m.Metadata); err != nil {
			t.Fatal(err)
		}
		if cm.assignment, err = hex.DecodeString(m.Assignment); err != nil {
			t.Fatal(err)
		}
		if cm.member, err = DecodeMember(cm.metadata); err != nil {
			t.Fatalf("%s: the subscription Kafka Streams sent does not decode: %v", m.ApplicationServer, err)
		}
		var empty bool
		if cm.partitions, cm.info, empty, err = DecodeMemberAssignment(cm.assignment); err != nil || empty {
			t.Fatalf("%s: the Java leader's assignment does not decode: empty=%v %v", m.ApplicationServer, empty, err)
		}
		if err := cm.outerAssignment.ReadFrom(cm.assignment); err != nil {
			t.Fatal(err)
		}
		out = append(out, cm)
	}
	return c, out
}

// The word count's tasks: subtopology 0 reads the input topic (stateless), subtopology 1 the
// repartition topic of the "counts" store (stateful), one task per partition.
func wordCountTask(c kafkaCapture, p TopicPartition) (TaskID, bool) {
	switch p.Topic {
	case c.InputTopic:
		return TaskID{Subtopology: 0, Partition: p.Partition}, true
	case repartitionTopic(c):
		return TaskID{Subtopology: 1, Partition: p.Partition}, true
	}
	return TaskID{}, false
}

func repartitionTopic(c kafkaCapture) string { return c.ApplicationID + "-counts-repartition" }

// Every field of the subscriptions a real Kafka Streams 4.4 client sent, against what the
// application was, and byte for byte through the encoder.
func TestKafkaStreamsSubscriptionCaptured(t *testing.T) {
	c, members := loadKafkaCapture(t)
	if c.ProtocolType != "consumer" || c.Protocol != "stream" {
		t.Fatalf("protocol %s/%s, want consumer/stream", c.ProtocolType, c.Protocol)
	}
	wantTopics := []string{repartitionTopic(c), c.InputTopic}
	sort.Strings(wantTopics)
	processes := map[string]bool{}
	for _, m := range members {
		o, s := m.member.Outer, m.member.Subscription
		t.Logf("%s: outer v%d generation %d owned %v; SubscriptionInfo v%d/%d process %s uniqueField %d sums %v",
			m.endpoint, o.Version, o.Generation, o.OwnedPartitions, s.Version, s.LatestSupportedVersion, s.ProcessIDString(), s.UniqueField, s.TaskOffsetSums)
		if o.Version != 3 || !reflect.DeepEqual(o.Topics, wantTopics) || o.Rack != nil || o.Generation < 1 {
			t.Errorf("%s: consumer protocol subscription v%d topics %v rack %v generation %d; want v3, %v, no rack, the member's last generation",
				m.endpoint, o.Version, o.Topics, o.Rack, o.Generation, wantTopics)
		}
		if s.Version != 11 || s.LatestSupportedVersion != 11 || s.Future {
			t.Errorf("%s: SubscriptionInfo v%d latest %d, want 11/11", m.endpoint, s.Version, s.LatestSupportedVersion)
		}
		// The process id is random, but Kafka Streams names its consumer after it.
		pid := s.ProcessIDString()
		if s.ProcessID == ([16]byte{}) || !strings.HasPrefix(m.clientID, c.ApplicationID+"-"+pid+"-StreamThread-1-consumer") ||
			!strings.HasPrefix(m.memberID, m.clientID+"-") {
			t.Errorf("%s: process id %s does not name client %s / member %s", m.endpoint, pid, m.clientID, m.memberID)
		}
		processes[pid] = true
		if host, port, ok, err := s.Endpoint(); !ok || err != nil || fmt.Sprintf("%s:%d", host, port) != m.endpoint {
			t.Errorf("%s: user endpoint %q parses as %s:%d %v %v", m.endpoint, s.UserEndPoint, host, port, ok, err)
		}
		if s.ErrorCode != ErrNone || len(s.ClientTags) != 0 || s.PrevTasks != nil || s.StandbyTasks != nil {
			t.Errorf("%s: error code %d, client tags %v, v1-6 task sets %v %v; want none", m.endpoint, s.ErrorCode, s.ClientTags, s.PrevTasks, s.StandbyTasks)
		}
		// Offset sums: only the stateful subtopology's tasks, each once; -2 exactly for the tasks
		// whose partitions the member owned (its running actives), a real sum for the others.
		seen := map[TaskID]bool{}
		for _, o := range s.TaskOffsetSums {
			if o.Task.Subtopology != 1 || o.Task.Partition < 0 || int(o.Task.Partition) >= c.InputPartitions || o.Task.NamedTopology != "" || seen[o.Task] {
				t.Errorf("%s: offset sum for task %s, which is not a stateful task of the word count (or is repeated)", m.endpoint, o.Task)
			}
			seen[o.Task] = true
			if o.OffsetSum < 0 && o.OffsetSum != OffsetSumRunning {
				t.Errorf("%s: task %s offset sum %d", m.endpoint, o.Task, o.OffsetSum)
			}
		}
		var ownedStateful []TaskID
		for _, op := range o.OwnedPartitions {
			for _, p := range op.Partitions {
				task, ok := wordCountTask(c, TopicPartition{op.Topic, p})
				if !ok {
					t.Errorf("%s: owns %s-%d outside the topology", m.endpoint, op.Topic, p)
				}
				if task.Subtopology == 1 {
					ownedStateful = append(ownedStateful, task)
				}
			}
		}
		running := s.RunningActiveTasks()
		sortTasks(running)
		sortTasks(ownedStateful)
		if !slices.Equal(running, ownedStateful) {
			t.Errorf("%s: running actives %v, want the stateful tasks of its owned partitions %v", m.endpoint, running, ownedStateful)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", m.endpoint, err)
		}
		// Byte for byte: the encoder writes what Java wrote, inner and outer.
		if got, err := s.Encode(); err != nil || !bytes.Equal(got, o.UserData) {
			t.Errorf("%s: SubscriptionInfo re-encoded\n got %x %v\nwant %x", m.endpoint, got, err, o.UserData)
		}
		if got := o.AppendTo(nil); !bytes.Equal(got, m.metadata) {
			t.Errorf("%s: subscription re-encoded\n got %x\nwant %x", m.endpoint, got, m.metadata)
		}
	}
	if len(processes) != 2 {
		t.Errorf("the two instances share process id %v", processes)
	}
}

// Every field of the AssignmentInfo the Java leader computed, against the application and the
// members' subscriptions.
func TestKafkaStreamsAssignmentCaptured(t *testing.T) {
	c, members := loadKafkaCapture(t)
	repartition := repartitionTopic(c)
	active := map[TaskID]string{}
	standby := map[TaskID][]string{}
	for _, m := range members {
		a := m.info
		t.Logf("%s: outer v%d %v; AssignmentInfo v%d/%d active %v standby %v activeByHost %v standbyByHost %v err %d next %d",
			m.endpoint, m.outerAssignment.Version, m.partitions, a.Version, a.CommonlySupportedVersion, a.Active, a.Standby, a.ActiveByHost, a.StandbyByHost, a.ErrCode, a.NextRebalanceMs)
		if m.outerAssignment.Version != 3 {
			t.Errorf("%s: consumer protocol assignment v%d, want 3", m.endpoint, m.outerAssignment.Version)
		}
		if a.Version != 11 || a.CommonlySupportedVersion != 11 || a.ErrCode != ErrNone || a.NextRebalanceMs != NoFollowUp {
			t.Errorf("%s: AssignmentInfo v%d commonly %d err %d next %d; want v11/11, no error, no follow-up", m.endpoint, a.Version, a.CommonlySupportedVersion, a.ErrCode, a.NextRebalanceMs)
		}
		// The active list zips with the assignment's partitions, sorted by topic then partition.
		if !slices.IsSortedFunc(m.partitions, cmpTP) || len(a.Active) != len(m.partitions) {
			t.Fatalf("%s: partitions %v, active tasks %v: not one task per sorted partition", m.endpoint, m.partitions, a.Active)
		}
		for i, p := range m.partitions {
			want, ok := wordCountTask(c, p)
			if !ok || a.Active[i] != want {
				t.Errorf("%s: active[%d] = %s for partition %s-%d, want %s", m.endpoint, i, a.Active[i], p.Topic, p.Partition, want)
			}
			if prev, dup := active[a.Active[i]]; dup && prev != m.endpoint {
				t.Errorf("task %s active on %s and %s", a.Active[i], prev, m.endpoint)
			}
			active[a.Active[i]] = m.endpoint
		}
		for _, s := range a.Standby {
			want := []TopicPartition{{repartition, s.Task.Partition}}
			if s.Task.Subtopology != 1 || !reflect.DeepEqual(s.Partitions, want) || active[s.Task] == m.endpoint {
				t.Errorf("%s: standby %s with %v; want a stateful task it is not active for, with partition %v", m.endpoint, s.Task, s.Partitions, want)
			}
			standby[s.Task] = append(standby[s.Task], m.endpoint)
		}
		// Interactive queries: both instances' endpoints, each with its own partitions, the same
		// maps in both members' assignments.
		if len(a.ActiveByHost) != 2 || len(a.StandbyByHost) != 2 {
			t.Fatalf("%s: host maps %v %v, want both instances", m.endpoint, a.ActiveByHost, a.StandbyByHost)
		}
		for _, other := range members {
			host, port, _, _ := other.member.Subscription.Endpoint()
			want := HostPartitions{Host: host, Port: port, Partitions: sortedTPs(other.partitions)}
			if got := hostEntry(a.ActiveByHost, host, port); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: activeByHost[%s:%d] = %v, want %v", m.endpoint, host, port, got, want)
			}
			var otherStandby []TopicPartition
			for _, s := range other.info.Standby {
				otherStandby = append(otherStandby, s.Partitions...)
			}
			want.Partitions = sortedTPs(otherStandby)
			if got := hostEntry(a.StandbyByHost, host, port); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: standbyByHost[%s:%d] = %v, want %v", m.endpoint, host, port, got, want)
			}
		}
	}
	if len(active) != 2*c.InputPartitions {
		t.Errorf("active tasks %v, want all %d tasks of both subtopologies", active, 2*c.InputPartitions)
	}
	for p := range c.InputPartitions {
		task := TaskID{Subtopology: 1, Partition: int32(p)}
		if len(standby[task]) != c.NumStandbyReplicas {
			t.Errorf("stateful task %s has standbys on %v, want %d", task, standby[task], c.NumStandbyReplicas)
		}
	}
}

// The encoder against the Java bytes. Java writes the standby tasks, the hosts and each one's
// partitions in HashMap/HashSet iteration order, and its decoder reads them back into HashMaps
// and HashSets; coordinatord writes them sorted (docs/conformance.md, "AssignmentInfo map
// order"). In Java's order the encoder writes Java's bytes to the byte; in its own order the
// same number of bytes with the same content.
func TestKafkaStreamsAssignmentEncodesAsJava(t *testing.T) {
	_, members := loadKafkaCapture(t)
	for _, m := range members {
		java := m.outerAssignment.UserData
		inJavaOrder, err := m.info.encodeInOrder()
		if err != nil || !bytes.Equal(inJavaOrder, java) {
			t.Errorf("%s: AssignmentInfo in Java's order\n got %x %v\nwant %x", m.endpoint, inJavaOrder, err, java)
		}
		got, err := m.info.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(java) {
			t.Errorf("%s: coordinatord writes %d bytes for Java's %d-byte AssignmentInfo\n got %x\nwant %x", m.endpoint, len(got), len(java), got, java)
		}
		back, err := DecodeAssignment(got)
		if err != nil {
			t.Fatal(err)
		}
		if want := m.info.canonical(); !reflect.DeepEqual(back, want) {
			t.Errorf("%s: coordinatord's encoding decodes as\n%+v\nwant\n%+v", m.endpoint, back, want)
		}
		// The outer layer, the active list (zipped with the partitions) and everything before the
		// first map are the same bytes in either order.
		outer, err := EncodeMemberAssignment(m.outerAssignment.Version, m.partitions, m.info)
		prefix := len(m.assignment) - len(java) + 4 + 4 + 4 + len(m.info.Active)*(4+4+4)
		if err != nil || len(outer) != len(m.assignment) || !bytes.Equal(outer[:prefix], m.assignment[:prefix]) {
			t.Errorf("%s: consumer protocol assignment\n got %x %v\nwant %x", m.endpoint, outer, err, m.assignment)
		}
	}
}

func hostEntry(hs []HostPartitions, host string, port int32) HostPartitions {
	for _, h := range hs {
		if h.Host == host && h.Port == port {
			h.Partitions = sortedTPs(h.Partitions)
			return h
		}
	}
	return HostPartitions{}
}

func sortTasks(ts []TaskID) { sort.Slice(ts, func(i, j int) bool { return taskLess(ts[i], ts[j]) }) }

func cmpTP(a, b TopicPartition) int {
	switch {
	case tpLess(a, b):
		return -1
	case tpLess(b, a):
		return 1
	}
	return 0
}
