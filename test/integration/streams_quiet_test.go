package integration

import (
	"testing"
	"time"
)

// A second Streams member joining a settled group: Kafka holds the new target back for the
// rest of group.streams.assignment.interval.ms; coordinatord computes it once the group has
// been quiet for group.streams.assignment.quiet.ms, and keeps Kafka's timing with 0. The
// interval is 15 s here so that either outcome is unmistakable.
func TestStreamsQuietGroupAssignedBeforeTheInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, quiet, group string
		early              bool
	}{{"quiet 100 ms", "100", "quiet-on", true}, {"quiet off", "0", "quiet-off", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := startStreamsDaemon(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=15000",
				"group.streams.assignment.quiet.ms="+tc.quiet)
			createStreamsTopics(t, d.Addr, 4, tc.group+"-in-0")
			app := newStreamsApp(t, d.Addr, tc.group, streamsTopology(tc.group+"-in", 1))
			defer app.stopAll()
			first := app.newMember("m1", "p1", nil)
			first.start()
			app.waitConverged([]*simMember{first}, 1, 4, 0, 10*time.Second) // the first assignment is immediate
			second := app.newMember("m2", "p2", nil)
			second.start()
			end := time.Now().Add(5 * time.Second)
			balanced := false
			for !balanced && time.Now().Before(end) {
				time.Sleep(100 * time.Millisecond)
				balanced, _ = app.converged([]*simMember{first, second}, 1, 4, 0)
			}
			if balanced != tc.early {
				active, _, epoch, _ := second.snapshot()
				t.Fatalf("5 s after m2 joined, with a 15 s assignment interval: group balanced %v, want %v (m2 at epoch %d with %d active tasks)", balanced, tc.early, epoch, len(active))
			}
			app.checkInvariant()
		})
	}
}
