package integration

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wordCountTopology is the shape of Kafka Streams' word count: subtopology 0 reads the input and
// writes a repartition topic, subtopology 1 reads it and keeps a store with a changelog. Neither
// internal topic exists before the first member joins.
func wordCountTopology(prefix string) func() *kmsg.StreamsGroupHeartbeatRequestTopology {
	return func() *kmsg.StreamsGroupHeartbeatRequestTopology {
		tp := kmsg.NewStreamsGroupHeartbeatRequestTopology()
		s0 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		s0.SubtopologyID, s0.SourceTopics, s0.RepartitionSinkTopics = "0", []string{prefix + "-in"}, []string{prefix + "-rp"}
		s1 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		rp := kmsg.NewTopicInfo()
		rp.Topic = prefix + "-rp"
		cl := kmsg.NewTopicInfo()
		cl.Topic = prefix + "-counts-changelog"
		s1.SubtopologyID, s1.RepartitionSourceTopics, s1.StateChangelogTopics = "1", []kmsg.TopicInfo{rp}, []kmsg.TopicInfo{cl}
		tp.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s0, s1}
		return &tp
	}
}

func topicPartitions(t *testing.T, d *daemon, names ...string) map[string]int {
	t.Helper()
	td, err := kadm.NewClient(d.client()).ListTopics(context.Background(), names...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for n, d := range td {
		if d.Err == nil {
			out[n] = len(d.Partitions)
		}
	}
	return out
}

// A Kafka Streams application's first member gets its tasks in the answer to its join, not a
// heartbeat interval (5 s by default) later: the join creates the missing repartition and
// changelog topics before it is answered. Kafka 4.4 answers MISSING_INTERNAL_TOPICS instead, and
// the member's immediate follow-up heartbeat then finds the assignment interval (1 s) not yet
// elapsed, so its tasks come only with the heartbeat after the next interval. Counted in
// heartbeats: the first one carries every task.
func TestStreamsJoinIsAnsweredWithTasksWhenInternalTopicsAreMissing(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=1000")
	createStreamsTopics(t, d.Addr, 4, "wc-in")
	app := newStreamsApp(t, d.Addr, "wc", wordCountTopology("wc"))
	m := app.newMember("m1", "p1", nil)
	m.heartbeat()
	r := m.last
	if r == nil || r.ErrorCode != 0 || len(r.Status) != 0 || m.firstActive != 1 {
		t.Fatalf("join answer: %+v (first active tasks at heartbeat %d)", r, m.firstActive)
	}
	if act, _, _, _ := m.snapshot(); len(act) != 8 {
		t.Fatalf("join answer carries %d active tasks, want all 8 (2 subtopologies x 4 partitions): %v", len(act), act)
	}
	// The internal topics exist with the input's partition count (spec §5.3).
	if got := topicPartitions(t, d, "wc-rp", "wc-counts-changelog"); got["wc-rp"] != 4 || got["wc-counts-changelog"] != 4 {
		t.Fatalf("internal topics: %v", got)
	}
	if g := describeStreams(t, d.Addr, "wc"); g.State != "Stable" || len(g.Members) != 1 {
		t.Fatalf("describe: state %s, %d members", g.State, len(g.Members))
	}
}

// With group.streams.join.creates.internal.topics=false the join is answered as Kafka 4.4
// answers it: MISSING_INTERNAL_TOPICS and no tasks, the topics created meanwhile.
func TestStreamsJoinAnswersMissingInternalTopicsAsKafkaWhenOff(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.join.creates.internal.topics=false")
	createStreamsTopics(t, d.Addr, 4, "wk-in")
	app := newStreamsApp(t, d.Addr, "wk", wordCountTopology("wk"))
	m := app.newMember("m1", "p1", nil)
	m.heartbeat()
	r := m.last
	if r == nil || r.ErrorCode != 0 || len(r.Status) != 1 || r.Status[0].StatusCode != 3 || m.firstActive != 0 {
		t.Fatalf("join answer: %+v", r)
	}
	if got := topicPartitions(t, d, "wk-rp", "wk-counts-changelog"); got["wk-rp"] != 4 || got["wk-counts-changelog"] != 4 {
		t.Fatalf("internal topics: %v", got)
	}
}

// A member whose topology the group refuses (a different topology at the same epoch) creates
// no topics: its join is refused, as before, and its changelog does not appear.
func TestStreamsRefusedTopologyCreatesNoInternalTopics(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.initial.rebalance.delay.ms=0")
	createStreamsTopics(t, d.Addr, 4, "rf-in")
	app := newStreamsApp(t, d.Addr, "rf", wordCountTopology("rf"))
	m := app.newMember("m1", "p1", nil)
	m.heartbeat()
	if m.last == nil || m.last.ErrorCode != 0 {
		t.Fatalf("first join: %+v", m.last)
	}
	// Same input, other internal topics: every topic it names could be created.
	otherTopology := func() *kmsg.StreamsGroupHeartbeatRequestTopology {
		tp := wordCountTopology("rf-other")()
		tp.Subtopologies[0].SourceTopics = []string{"rf-in"}
		return tp
	}
	other := newStreamsApp(t, d.Addr, "rf", otherTopology)
	o := other.newMember("m2", "p2", nil)
	o.heartbeat()
	if o.last == nil || o.last.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("join with another topology: %+v", o.last)
	}
	if got := topicPartitions(t, d, "rf-other-rp", "rf-other-counts-changelog"); len(got) != 0 {
		t.Fatalf("a refused topology created topics: %v", got)
	}
}
