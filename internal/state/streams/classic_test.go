package streams

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicMeta builds the "stream" protocol of a classic Streams thread: consumer subscription v3
// around SubscriptionInfo v11 with the given offset sums.
func classicMeta(t testing.TB, topics []string, process byte, endpoint string, owned map[string][]int32, sums ...classicproto.TaskOffsetSum) []ClassicProtocol {
	t.Helper()
	sub := classicproto.Subscription{Version: 11, LatestSupportedVersion: 11, ProcessID: [16]byte{15: process}, UserEndPoint: endpoint, TaskOffsetSums: sums}
	user, err := sub.Encode()
	if err != nil {
		t.Fatal(err)
	}
	meta := kmsg.ConsumerMemberMetadata{Version: 3, Topics: topics, UserData: user, Generation: -1}
	for topic, ps := range owned {
		meta.OwnedPartitions = append(meta.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: topic, Partitions: ps})
	}
	return []ClassicProtocol{{Name: ClassicProtocolName, Metadata: meta.AppendTo(nil)}}
}

func ctasks(sub string, ps ...int32) map[Task]int32 {
	out := map[Task]int32{}
	for _, p := range ps {
		out[Task{Subtopology: sub, Partition: p}] = 0
	}
	return out
}

// The classic part of a member survives replay, and the member's tombstones remove it in the
// order replay requires.
func TestClassicMemberRecordReplay(t *testing.T) {
	s := New()
	m := &Member{ID: "a", ProcessID: "p", Classic: &ClassicMember{SessionTimeoutMs: 45000,
		Protocols: []ClassicProtocol{{Name: "stream", Metadata: []byte{1, 2}}, {Name: "other", Metadata: nil}}}}
	for _, r := range []log.Record{MemberMetadataRecord("g", m), ClassicMemberRecord("g", m)} {
		if err := s.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Groups["g"].Members["a"].Classic
	if !got.equal(m.Classic) || !s.Groups["g"].Members["a"].IsClassic() || s.Groups["g"].ClassicMembers() != 1 {
		t.Fatalf("classic part %+v", got)
	}
	if err := s.Replay(memberMetadataTombstone("g", "a")); err == nil || !strings.Contains(err.Error(), "classic") {
		t.Fatalf("a metadata tombstone before the classic tombstone must be refused, got %v", err)
	}
	for _, r := range memberTombstones("g", m) {
		if err := s.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.Groups["g"].Members) != 0 {
		t.Fatal("member not removed")
	}
}

// Spec §1.5: owned actives are the tasks of the owned partitions plus those reported running
// (offset sum -2); standby sums are ignored, as are topics and tasks outside the topology.
func TestClassicOwnedActives(t *testing.T) {
	cat := topics("input", 6, "app-store-changelog", 6)
	configured, err := Configure(seedTopology(), cat)
	if err != nil || !configured.Ready() {
		t.Fatalf("configure: %v %+v", err, configured)
	}
	ps := classicMeta(t, []string{"input"}, 0xa, "hostA:8080", map[string][]int32{"input": {0, 2}, "elsewhere": {1}},
		classicproto.TaskOffsetSum{Task: classicproto.TaskID{Subtopology: 0, Partition: 4}, OffsetSum: -2},
		classicproto.TaskOffsetSum{Task: classicproto.TaskID{Subtopology: 0, Partition: 1}, OffsetSum: 42},
		classicproto.TaskOffsetSum{Task: classicproto.TaskID{Subtopology: 0, Partition: 9}, OffsetSum: -2})
	cm, err := checkClassicMetadata("consumer", ps, configured)
	if err != nil {
		t.Fatal(err)
	}
	if got := ownedActives(cm, configured); !reflect.DeepEqual(got, ctasks("0", 0, 2, 4)) {
		t.Fatalf("owned actives %v", got)
	}
	if _, err := checkClassicMetadata("consumer", classicMeta(t, []string{"input", "other"}, 1, "", nil), configured); err == nil {
		t.Fatal("§1.6 rule 5: a subscription to other topics must be refused")
	}
	if _, err := checkClassicMetadata("consumer", classicMeta(t, []string{"input"}, 1, "hostA8080", nil), configured); err == nil {
		t.Fatal("§10 scenario 15: an unparsable endpoint must be refused")
	}
	if _, err := checkClassicMetadata("connect", ps, configured); err == nil {
		t.Fatal("protocol type connect must be refused")
	}
}

func seedTopology() *Topology {
	return &Topology{Subtopologies: []Subtopology{{ID: "0", SourceTopics: []string{"input"},
		Changelogs: []TopicInfo{{Name: "app-store-changelog"}}}}}
}

// Spec §2.7: the SyncGroup answer of member B (active 0_1, standby 0_0, endpoint hostB:8080) is
// byte for byte what Kafka's own AssignmentInfo.encode() produces, wrapped as Kafka wraps it.
func TestClassicAssignmentMatchesKafkaVector(t *testing.T) {
	cat := topics("input", 2, "app-store-changelog", 2)
	configured, _ := Configure(seedTopology(), cat)
	b := &Member{ID: "B", UserEndpoint: &Endpoint{Host: "hostB", Port: 8080}, Assigned: Roles{ctasks("0", 1), ctasks("0", 0), nil}}
	cm, err := checkClassicMetadata("consumer", classicMeta(t, []string{"input"}, 0xb, "hostB:8080", nil), configured)
	if err != nil {
		t.Fatal(err)
	}
	got, err := classicAssignment(ClassicAssignmentInput{Member: b, Decoded: cm, Members: map[string]*Member{"B": b}, Configured: configured, Now: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("0003000000010005696e7075740000000100000001000000880000000b0000000b0000000100000000000000010000000000000001000000000000000000000000000000010005696e7075740000000000000001000000000005696e707574000000010005686f73744200001f90000000010000000000000001000000010005686f73744200001f90000000010000000000000000000000007fffffffffffffff")
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
	// A pending application shutdown: nothing assigned, errCode 4 (spec §2.6).
	got, _ = classicAssignment(ClassicAssignmentInput{Member: b, Decoded: cm, Members: map[string]*Member{"B": b}, Configured: configured, Shutdown: true})
	_, info, _, err := classicproto.DecodeMemberAssignment(got)
	if err != nil || info.ErrCode != classicproto.ErrShutdown || len(info.Active) != 0 {
		t.Fatalf("shutdown assignment %+v %v", info, err)
	}
}

// Spec §10 scenario 34 and §2.4: a multi-topic subtopology lists one ACTIVE entry per partition,
// aligned with the sorted partitions; warm-ups go out as standbys and ask for a follow-up
// rejoin; every member with an endpoint is a key of the host maps, also with empty sets.
func TestClassicAssignmentMultiTopicAndHostMaps(t *testing.T) {
	topo := &Topology{Subtopologies: []Subtopology{{ID: "1", SourceTopics: []string{"left", "right"}}}}
	cat := topics("left", 4, "right", 2)
	configured, err := Configure(topo, cat)
	if err != nil || !configured.Ready() {
		t.Fatalf("configure %v %+v", err, configured)
	}
	a := &Member{ID: "A", UserEndpoint: &Endpoint{Host: "hostA", Port: 1}, Assigned: Roles{ctasks("1", 1, 3), nil, ctasks("1", 0)}}
	idle := &Member{ID: "C", UserEndpoint: &Endpoint{Host: "hostC", Port: 2}}
	cm, err := checkClassicMetadata("consumer", classicMeta(t, []string{"left", "right"}, 1, "hostA:1", nil), configured)
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_000_000)
	got, err := classicAssignment(ClassicAssignmentInput{Member: a, Decoded: cm, Members: map[string]*Member{"A": a, "C": idle},
		Configured: configured, Now: now, TaskOffsetInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	parts, info, _, err := classicproto.DecodeMemberAssignment(got)
	if err != nil {
		t.Fatal(err)
	}
	wantParts := []classicproto.TopicPartition{ctp("left", 1), ctp("left", 3), ctp("right", 1)}
	wantActive := []classicproto.TaskID{ctid(1, 1), ctid(1, 3), ctid(1, 1)}
	if !reflect.DeepEqual(parts, wantParts) || !reflect.DeepEqual(info.Active, wantActive) {
		t.Fatalf("partitions %v active %v", parts, info.Active)
	}
	if len(info.Standby) != 1 || info.Standby[0].Task != ctid(1, 0) ||
		!reflect.DeepEqual(info.Standby[0].Partitions, []classicproto.TopicPartition{ctp("left", 0), ctp("right", 0)}) {
		t.Fatalf("warm-up as standby: %+v", info.Standby)
	}
	if info.NextRebalanceMs != now.Add(time.Minute).UnixMilli() {
		t.Fatalf("nextRebalanceMs %d", info.NextRebalanceMs)
	}
	if len(info.ActiveByHost) != 2 || info.ActiveByHost[1].Host != "hostC" || len(info.ActiveByHost[1].Partitions) != 0 {
		t.Fatalf("host maps %+v", info.ActiveByHost)
	}
}

func ctp(topic string, p int32) classicproto.TopicPartition {
	return classicproto.TopicPartition{Topic: topic, Partition: p}
}

func ctid(sub, p int32) classicproto.TaskID {
	return classicproto.TaskID{Subtopology: sub, Partition: p}
}
