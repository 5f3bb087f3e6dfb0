package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitStreamsMembers waits (at most 90 s) until the streams group has n members of which classic
// use the classic protocol (StreamsGroupDescribe's IsClassic).
func waitStreamsMembers(t *testing.T, ctx context.Context, cl *kgo.Client, group string, n, classic int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl.Broker(nodeID))
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
			c := 0
			for _, m := range resp.Groups[0].Members {
				if m.IsClassic {
					c++
				}
			}
			last = fmt.Sprintf("%d members, %d classic, state %s", len(resp.Groups[0].Members), c, resp.Groups[0].State)
			if len(resp.Groups[0].Members) == n && c == classic {
				return
			}
		} else if err == nil && len(resp.Groups) == 1 {
			last = fmt.Sprintf("error %d", resp.Groups[0].ErrorCode)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("streams group %s: want %d members (%d classic), last seen %s", group, n, classic, last)
}

// Issue 14 with real applications: the word count runs as two instances with
// group.protocol=classic; a third starts with group.protocol=streams (the seed's situation), which
// turns the running classic group into a streams group; the classic instances are restarted one
// by one with the streams protocol; then all three are restarted one by one back to the classic
// protocol, the last streams instance's leave turning the group back into a classic group. Input
// flows throughout and every input is reflected in the output (at-least-once).
func TestGateway_StreamsWordCountOnlineMigration(t *testing.T) {
	requireE2E(t)
	wordCountClasspath(t)
	g := startGateway(t, "group.initial.rebalance.delay.ms=0", "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	batch := 0
	produce := func() { batch++; r.produce(t, ctx, batch) }
	start := func(name, protocol string) *streamsApp {
		a := startWordCount(t, name, g.Addr, r.appID, r.in, r.out, protocol)
		a.waitState("RUNNING", 90*time.Second)
		return a
	}

	c1, c2 := start("classic-1", "classic"), start("classic-2", "classic")
	produce()
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)

	s3 := start("streams-3", "streams")
	waitStreamsMembers(t, ctx, r.cl, r.appID, 3, 2)
	produce()
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)

	c1.stop()
	s1 := start("streams-1", "streams")
	produce()
	c2.stop()
	s2 := start("streams-2", "streams")
	produce()
	// Stopped classic instances do not leave; their sessions (10 s) expire.
	waitStreamsMembers(t, ctx, r.cl, r.appID, 3, 0)
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)

	s1.stop()
	k1 := start("classic-1b", "classic")
	produce()
	s2.stop()
	k2 := start("classic-2b", "classic")
	produce()
	waitStreamsMembers(t, ctx, r.cl, r.appID, 3, 2)
	s3.stop() // the last streams member leaves: the group is a classic group again
	k3 := start("classic-3b", "classic")
	produce()
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)
	described, err := kadm.NewClient(r.cl).DescribeGroups(ctx, r.appID)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[r.appID]; d.ProtocolType != "consumer" || len(d.Members) != 3 {
		t.Fatalf("the application's group after the rolling downgrade: %+v", d)
	}
	k1.stop()
	k2.stop()
	k3.stop()
}
