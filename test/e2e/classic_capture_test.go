package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
)

// capturedFile is where TestCaptureClassicStreamsBytes writes, read by the golden tests of
// internal/state/streams/classicproto and internal/state/streams.
const capturedFile = "../../internal/state/streams/classicproto/testdata/kafka-streams-4.4-wordcount.json"

// The capture's fixed names: the broker is fresh, and the bytes (topic names inside) stay the same
// from one capture to the next.
const (
	captureApp = "wordcount-golden"
	captureIn  = "wordcount-golden-in"
	captureOut = "wordcount-golden-out"
)

// Captured is the file's layout (the golden tests have their own copy of it).
type Captured struct {
	Comment            string           `json:"comment"`
	KafkaStreams       string           `json:"kafka_streams"`
	ApplicationID      string           `json:"application_id"`
	InputTopic         string           `json:"input_topic"`
	OutputTopic        string           `json:"output_topic"`
	InputPartitions    int              `json:"input_partitions"`
	NumStandbyReplicas int              `json:"num_standby_replicas"`
	GroupState         string           `json:"group_state"`
	ProtocolType       string           `json:"protocol_type"`
	Protocol           string           `json:"protocol"`
	Members            []CapturedMember `json:"members"`
}

// CapturedMember is one member as DescribeGroups v5 showed it; Metadata is its JoinGroup
// subscription, Assignment what the Java leader's StreamsPartitionAssignor gave it, both hex.
type CapturedMember struct {
	ApplicationServer string `json:"application_server"`
	MemberID          string `json:"member_id"`
	ClientID          string `json:"client_id"`
	Metadata          string `json:"metadata"`
	Assignment        string `json:"assignment"`
}

// TestCaptureClassicStreamsBytes re-captures the classic-protocol bytes of a real Kafka Streams
// 4.4 application (the word count, 2 instances, group.protocol=classic, an application.server
// each, one standby replica) straight from the reference broker, which runs the group as an
// ordinary classic group: the members' subscriptions are what the Java client sent, the
// assignments what the Java leader computed. Not a test of coordinatord; run it only to
// refresh the golden file:
//
//	test/kafka/kafka.sh fetch && CAPTURE_CLASSICPROTO=1 E2E=1 go test -count=1 -v -run TestCaptureClassicStreamsBytes ./test/e2e
//
// Instance B is stopped and restarted on its state directory once both processed input, so that
// the captured subscriptions carry real task offset sums (B's from its checkpoint files, A's
// running actives as -2).
func TestCaptureClassicStreamsBytes(t *testing.T) {
	requireE2E(t)
	if os.Getenv("CAPTURE_CLASSICPROTO") == "" {
		t.Skip("set CAPTURE_CLASSICPROTO=1 to re-capture " + capturedFile)
	}
	wordCountClasspath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cl := newClient(t, upstreamAddr)
	adm := kadm.NewClient(cl)
	const partitions, standbys = 4, 1
	for _, topic := range []string{captureIn, captureOut} {
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
			t.Fatalf("creating %s (the capture needs a fresh broker): %v", topic, err)
		}
	}
	endpoints := map[string]string{"a": "instance-a.test:7101", "b": "instance-b.test:7102"}
	settings := func(name string) []string {
		return []string{"at_least_once", "application.server=" + endpoints[name], fmt.Sprint("num.standby.replicas=", standbys)}
	}
	stateB := t.TempDir()
	expected := map[string]int64{}
	produce := func(batch int) {
		r := &wordCountRun{in: captureIn, cl: cl, expected: expected}
		r.produce(t, ctx, batch)
	}

	a := startWordCountIn(t, t.TempDir(), "capture-a", upstreamAddr, captureApp, captureIn, captureOut, "classic", settings("a")...)
	a.waitState("RUNNING", 90*time.Second)
	produce(1)
	b := startWordCountIn(t, stateB, "capture-b", upstreamAddr, captureApp, captureIn, captureOut, "classic", settings("b")...)
	b.waitState("RUNNING", 90*time.Second)
	produce(2)
	waitCounts(t, ctx, upstreamAddr, captureOut, expected)
	waitSettled(t, ctx, cl, 2, partitions)
	b.stop()
	waitSettled(t, ctx, cl, 1, partitions)
	b = startWordCountIn(t, stateB, "capture-b2", upstreamAddr, captureApp, captureIn, captureOut, "classic", settings("b")...)
	b.waitState("RUNNING", 90*time.Second)
	grp := waitSettled(t, ctx, cl, 2, partitions)

	c := Captured{
		Comment: "Captured by TestCaptureClassicStreamsBytes (test/e2e/classic_capture_test.go) from Apache Kafka 4.4.0's broker " +
			"with DescribeGroups v5: the word count of test/e2e/streamsapp, 2 instances, group.protocol=classic, " +
			"num.standby.replicas=1, instance b restarted on its state directory before the capture. Re-capture: " +
			"test/kafka/kafka.sh fetch && CAPTURE_CLASSICPROTO=1 E2E=1 go test -count=1 -v -run TestCaptureClassicStreamsBytes ./test/e2e",
		KafkaStreams: "4.4.0", ApplicationID: captureApp, InputTopic: captureIn, OutputTopic: captureOut,
		InputPartitions: partitions, NumStandbyReplicas: standbys,
		GroupState: grp.State, ProtocolType: grp.ProtocolType, Protocol: grp.Protocol,
	}
	for _, m := range grp.Members {
		dm, err := classicproto.DecodeMember(m.ProtocolMetadata)
		if err != nil {
			t.Fatalf("member %s metadata: %v", m.MemberID, err)
		}
		c.Members = append(c.Members, CapturedMember{
			ApplicationServer: dm.Subscription.UserEndPoint, MemberID: m.MemberID, ClientID: m.ClientID,
			Metadata: hex.EncodeToString(m.ProtocolMetadata), Assignment: hex.EncodeToString(m.MemberAssignment),
		})
	}
	sort.Slice(c.Members, func(i, j int) bool { return c.Members[i].ApplicationServer < c.Members[j].ApplicationServer })
	if c.Members[0].ApplicationServer != endpoints["a"] || c.Members[1].ApplicationServer != endpoints["b"] {
		t.Fatalf("captured endpoints %s, %s; want %s, %s", c.Members[0].ApplicationServer, c.Members[1].ApplicationServer, endpoints["a"], endpoints["b"])
	}
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Clean(capturedFile), append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", capturedFile)
	b.stop()
	a.stop()
}

// waitSettled waits until the application's classic group is Stable with n members whose
// assignments hold every task of both subtopologies exactly once between them: the follow-up
// rebalance of a cooperative hand-over is over.
func waitSettled(t *testing.T, ctx context.Context, cl *kgo.Client, n, partitions int) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	var last string
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{captureApp}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Groups) == 1 {
			g := resp.Groups[0]
			last = fmt.Sprintf("state %s, %d members", g.State, len(g.Members))
			if g.State == "Stable" && len(g.Members) == n && tasksOnce(g.Members, 2*partitions) {
				return g
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the group never settled with %d members (last: %s)", n, last)
	return kmsg.DescribeGroupsResponseGroup{}
}

func tasksOnce(members []kmsg.DescribeGroupsResponseGroupMember, want int) bool {
	seen := map[classicproto.TaskID]bool{}
	for _, m := range members {
		_, info, empty, err := classicproto.DecodeMemberAssignment(m.MemberAssignment)
		if err != nil || empty {
			return false
		}
		for _, task := range info.Active {
			if seen[task] {
				return false
			}
			seen[task] = true
		}
	}
	return len(seen) == want
}
