package integration

import (
	"testing"
	"time"
)

// A member joining a settled consumer group: Kafka holds the new target back for the rest of
// group.consumer.assignment.interval.ms; coordinatord computes it at the first heartbeat that
// changes nothing once the group has been quiet for group.consumer.assignment.quiet.ms, and
// keeps Kafka's timing with 0. The interval is 15 s here so that either outcome is unmistakable.
func TestConsumerQuietGroupAssignedBeforeTheInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		quiet string
		early bool
	}{{"quiet 100 ms", "100", true}, {"quiet off", "0", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, append([]string{"group.consumer.assignment.interval.ms=15000",
				"group.consumer.assignment.quiet.ms=" + tc.quiet}, consumerKeys...)...)
			const group, a, b = "quiet-join", "member-a-0000000011", "member-b-0000000012"
			ca, epoch := joinCG(t, d, group, a) // the group's first assignment is immediate
			joinCG(t, d, group, b)
			// a's heartbeats change nothing; its epoch follows the group's target (its own
			// target stays empty: the subscribed topic does not exist).
			end := time.Now().Add(5 * time.Second)
			moved := epoch
			for moved == epoch && time.Now().Before(end) {
				time.Sleep(50 * time.Millisecond)
				resp := ca.heartbeat(group, a, moved, false)
				wantCGCode(t, "steady heartbeat", resp, 0)
				moved = resp.MemberEpoch
			}
			if got := moved != epoch; got != tc.early {
				t.Fatalf("member a at epoch %d (joined at %d) 5 s after b joined, with a 15 s assignment interval: new target computed %v, want %v", moved, epoch, got, tc.early)
			}
		})
	}
}
