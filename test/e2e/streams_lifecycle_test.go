package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
