package streams

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
)

// The SyncGroup answers coordinatord builds for the classic members of a real Kafka Streams 4.4
// word count (classicproto/testdata/kafka-streams-4.4-wordcount.json, captured from the
// reference broker, whose assignments the Java leader computed), given the same tasks on the
// same members: Java's bytes, with the map entries Java writes in HashMap order in sorted order
// (classicproto's TestKafkaStreamsAssignmentEncodesAsJava; docs/conformance.md).
func TestClassicAssignmentMatchesKafkaStreamsCapture(t *testing.T) {
	raw, err := os.ReadFile("classicproto/testdata/kafka-streams-4.4-wordcount.json")
	if err != nil {
		t.Fatal(err)
	}
	var capture struct {
		ApplicationID   string `json:"application_id"`
		InputTopic      string `json:"input_topic"`
		InputPartitions int    `json:"input_partitions"`
		Members         []struct {
			MemberID   string `json:"member_id"`
			Metadata   string `json:"metadata"`
			Assignment string `json:"assignment"`
		} `json:"members"`
	}
	if err := json.Unmarshal(raw, &capture); err != nil {
		t.Fatal(err)
	}
	app, n := capture.ApplicationID, capture.InputPartitions
	repartition, changelog := app+"-counts-repartition", app+"-counts-changelog"
	topo := &Topology{Subtopologies: []Subtopology{
		{ID: "0", SourceTopics: []string{capture.InputTopic}, RepartitionSinks: []string{repartition}},
		{ID: "1", RepartitionSources: []TopicInfo{{Name: repartition}}, Changelogs: []TopicInfo{{Name: changelog}}},
	}}
	configured, err := Configure(topo, topics(capture.InputTopic, n, repartition, n, changelog, n))
	if err != nil || !configured.Ready() {
		t.Fatalf("configure the word count: %v %+v", err, configured)
	}

	type java struct {
		decoded classicproto.Member
		bytes   []byte
		parts   []classicproto.TopicPartition
		info    classicproto.Assignment
	}
	members := map[string]*Member{}
	javas := map[string]java{}
	for _, c := range capture.Members {
		meta, _ := hex.DecodeString(c.Metadata)
		j := java{}
		j.bytes, _ = hex.DecodeString(c.Assignment)
		ps := []ClassicProtocol{{Name: ClassicProtocolName, Metadata: meta}}
		// The real subscription passes coordinatord's checks against the word count's topology.
		if j.decoded, err = checkClassicMetadata("consumer", ps, configured); err != nil {
			t.Fatalf("%s: %v", c.MemberID, err)
		}
		if j.parts, j.info, _, err = classicproto.DecodeMemberAssignment(j.bytes); err != nil {
			t.Fatal(err)
		}
		host, port, _, _ := j.decoded.Subscription.Endpoint()
		m := &Member{ID: c.MemberID, ProcessID: j.decoded.Subscription.ProcessIDString(), UserEndpoint: &Endpoint{Host: host, Port: uint16(port)},
			Classic: &ClassicMember{SessionTimeoutMs: 10000, Protocols: ps}, Assigned: Roles{{}, {}, {}}}
		// The tasks the Java leader gave this member, as coordinatord's target would hold them.
		for _, task := range j.info.Active {
			m.Assigned[Active][streamsTask(task)] = 0
		}
		for _, s := range j.info.Standby {
			m.Assigned[Standby][streamsTask(s.Task)] = 0
		}
		members[c.MemberID], javas[c.MemberID] = m, j
	}
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		j := javas[id]
		got, err := classicAssignment(ClassicAssignmentInput{Member: members[id], Decoded: j.decoded, Members: members, Configured: configured, Now: time.Unix(0, 0)})
		if err != nil {
			t.Fatal(err)
		}
		// Java's assignment, its map entries in sorted order.
		want, err := classicproto.EncodeMemberAssignment(3, j.parts, j.info)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(j.bytes) || !bytes.Equal(got, want) {
			t.Errorf("%s: coordinatord's SyncGroup assignment\n got %x\nwant %x\nJava %x", id, got, want, j.bytes)
		}
		parts, info, _, err := classicproto.DecodeMemberAssignment(got)
		if err != nil || !reflect.DeepEqual(parts, j.parts) || !reflect.DeepEqual(info.Active, j.info.Active) {
			t.Errorf("%s: partitions %v active %v, Java %v %v (%v)", id, parts, info.Active, j.parts, j.info.Active, err)
		}
	}
}
