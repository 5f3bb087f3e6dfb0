package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Kafka Streams application started a moment before its source topic is created (a
// deployment creating topics and starting applications side by side) waits for it: the 4.4
// client fails the application only once the group has reported the topic missing for twice
// the heartbeat interval it was last told, 10 s against Kafka. coordinatord answered such a
// member its 500 ms reconciliation interval, so the application died after 1 s.
func TestGateway_StreamsAppWaitsForASourceTopicCreatedAfterItStarted(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "group.streams.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := &wordCountRun{appID: "late-src-" + strconv.FormatInt(time.Now().UnixNano(), 36), cl: newClient(t, g.Addr), expected: map[string]int64{}}
	r.in, r.out = r.appID+"-in", r.appID+"-out"
	adm := kadm.NewClient(r.cl)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, r.out); err != nil {
		t.Fatal(err)
	}
	a := startWordCount(t, "late-src", g.Addr, r.appID, r.in, r.out, "streams")
	a.waitLogged("Source topics "+r.in+" are missing", 90*time.Second)
	// The operator's topic comes 3 s after the application first heard it is missing.
	select {
	case <-a.exited:
		t.Fatalf("the application gave up on its missing source topic within 3 s:\n%s", a.output())
	case <-time.After(3 * time.Second):
	}
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, r.in); err != nil {
		t.Fatal(err)
	}
	a.waitState("RUNNING", 60*time.Second)
	r.produce(t, ctx, 1)
	waitCounts(t, ctx, g.Addr, r.out, r.expected)
}

// waitLogged waits until the instance's output (its client log included) has text.
func (a *streamsApp) waitLogged(text string, within time.Duration) {
	a.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(a.out.Name()); err == nil && strings.Contains(string(b), text) {
			return
		}
		select {
		case <-a.exited:
			a.t.Fatalf("%s exited before logging %q", a.name, text)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%s did not log %q within %s", a.name, text, within)
		}
	}
}

// An online upgrade the operator abandons: the word count (exactly_once_v2) runs as two classic
// instances, a third starts with group.protocol=streams and turns the group into a streams
// group, then that instance is stopped again. With group.streams.migration.policy=upgrade (or a
// topology description held by the plugin, which refuses the downgrade the same way) the group
// stays a streams group of the two classic instances; they must take over the tasks the streams
// instance held. They were never asked to rejoin, so those tasks were processed by nobody (the
// group stayed Assigning, its target one epoch behind) until an instance restarted.
func TestGateway_StreamsUpgradeAbandonedWithoutDowngradeKeepsEveryTaskRunning(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t)
	g := startGateway(t, "group.initial.rebalance.delay.ms=0", "group.streams.initial.rebalance.delay.ms=0",
		"group.streams.assignment.interval.ms=0", "group.streams.migration.policy=upgrade")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r, start, input, caughtUp := rollingWordCount(t, ctx, g.Addr)
	c1, c2 := start("classic-1", "classic"), start("classic-2", "classic")
	caughtUp("2 classic instances")
	s3 := start("streams-3", "streams")
	waitStreamsMembers(t, ctx, r.cl, r.appID, 3, 2)
	waitEveryMemberHolds(t, ctx, r.cl, r.appID, 3, "active", func(a kmsg.StreamsAssignment) []kmsg.TaskIDs { return a.ActiveTasks })
	caughtUp("a streams instance joined the classic ones")
	s3.stop()
	waitStreamsMembers(t, ctx, r.cl, r.appID, 2, 2)
	caughtUp("the streams instance stopped, the group stays a streams group")
	expected, batches := input.finish(t)
	waitCommittedCounts(t, ctx, g.Addr, r.out, expected)
	t.Logf("exact counts of %d batches", batches)
	c1.stop()
	c2.stop()
	checkNoTaskProcessedTwice(t, c1, c2, s3)
}
