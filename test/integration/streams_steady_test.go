package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A steady StreamsGroupHeartbeat repeated on the connection that got its answer is answered
// there without a round trip through the group's shard (a runtime ticket, as for consumer
// heartbeats: consumer_steady_test.go). These tests check what a Streams member would notice
// if that answer were stale or its session deadline were lost.

// sgConn is one Streams member's connection.
type sgConn struct {
	*rawConn
	corr int32
}

func dialSG(t *testing.T, d *daemon) *sgConn { return &sgConn{rawConn: dialRaw(t, d.Addr)} }

func (c *sgConn) send(req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
	c.t.Helper()
	c.corr++
	c.write(frame(req, 1, c.corr, nil, nil))
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	c.read(resp, 1, c.corr)
	return resp
}

func (c *sgConn) join(group, member, topic string) *kmsg.StreamsGroupHeartbeatResponse {
	c.t.Helper()
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.Topology = group, member, 10000, streamsTopology(topic, 1)()
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	resp := c.send(r)
	wantSGCode(c.t, "join of "+member, resp, 0)
	return resp
}

// steady is a heartbeat that changes nothing: the member epoch, every other field null.
func (c *sgConn) steady(group, member string, epoch int32) *kmsg.StreamsGroupHeartbeatResponse {
	c.t.Helper()
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, member, epoch, -1
	return c.send(r)
}

// owning reports the member's active tasks (a hand-over's acknowledgement).
func (c *sgConn) owning(group, member string, epoch int32, active []kmsg.TaskIDs) *kmsg.StreamsGroupHeartbeatResponse {
	c.t.Helper()
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, member, epoch, -1
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = active, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	return c.send(r)
}

func wantSGCode(t testing.TB, what string, resp *kmsg.StreamsGroupHeartbeatResponse, want int16) {
	t.Helper()
	wantErrorCode(t, what, resp.ErrorCode, resp.ErrorMessage, want)
}

// settledStreamsMember starts a daemon with the streams test settings and sets, creates topic's
// first partition set, and joins member a to group on a connection of its own; a reports the
// tasks it got (returned with its epoch), so it is settled.
func settledStreamsMember(t *testing.T, group, topic string, partitions int32, sets ...string) (*daemon, *sgConn, int32, []kmsg.TaskIDs) {
	t.Helper()
	d := startStreamsDaemon(t, append([]string{"group.streams.initial.rebalance.delay.ms=0"}, sets...)...)
	createStreamsTopics(t, d.Addr, partitions, topic+"-0")
	c := dialSG(t, d)
	joined := c.join(group, "a", topic)
	if activeCount(joined.ActiveTasks) != int(partitions) {
		t.Fatalf("a holds %d tasks after its join, want %d", activeCount(joined.ActiveTasks), partitions)
	}
	wantSGCode(t, "a reports its tasks", c.owning(group, "a", joined.MemberEpoch, joined.ActiveTasks), 0)
	return d, c, joined.MemberEpoch, joined.ActiveTasks
}

func activeCount(l []kmsg.TaskIDs) int {
	n := 0
	for _, t := range l {
		n += len(t.Partitions)
	}
	return n
}

// A member's connection holds the steady answer for epoch E; a second member joins and the
// first one hands tasks over on another connection, moving to a later epoch. A heartbeat at E
// on the first connection must be fenced, not answered from the old steady answer, and the
// member at its new epoch is served there again.
func TestStreamsSteadyAnswerNotReusedAfterEpochMoved(t *testing.T) {
	t.Parallel()
	const group, topic = "steady-streams-fence", "ssf-in"
	d, first, e, active := settledStreamsMember(t, group, topic, 4, "group.streams.reconciliation.heartbeat.interval.ms=0")
	second := dialSG(t, d)
	for i := 0; i < 3; i++ { // the first steady answer is kept on the connection, the others reuse it
		resp := first.steady(group, "a", e)
		wantSGCode(t, "steady heartbeat", resp, 0)
		if resp.MemberEpoch != e {
			t.Fatalf("steady heartbeat moved the epoch to %d from %d", resp.MemberEpoch, e)
		}
	}
	dialSG(t, d).join(group, "b", topic)
	moved := e
	for deadline := time.Now().Add(20 * time.Second); moved == e; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("member a stayed at epoch %d after a second member joined", e)
		}
		resp := second.owning(group, "a", moved, active)
		wantSGCode(t, "heartbeat on the second connection", resp, 0)
		if resp.ActiveTasks != nil {
			active = resp.ActiveTasks
		}
		moved = resp.MemberEpoch
	}
	wantSGCode(t, "heartbeat at the old epoch on the first connection", first.steady(group, "a", e), kerr.FencedMemberEpoch.Code)
	wantSGCode(t, "heartbeat at the new epoch on the first connection", first.steady(group, "a", moved), 0)
}

// Steady heartbeats answered on their connection keep the member alive past several session
// timeouts, and a member that stops heartbeating is still removed when its session expires.
func TestStreamsSessionExpiryWithSteadyHeartbeats(t *testing.T) {
	t.Parallel()
	const group, topic = "steady-streams-session", "sss-in"
	d, c, e, _ := settledStreamsMember(t, group, topic, 2, "group.streams.session.timeout.ms=2000")
	// Three session timeouts of heartbeats every 100 ms: a session deadline the repeated answers
	// did not move would fence the member after the first 2 s.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		wantSGCode(t, "steady heartbeat", c.steady(group, "a", e), 0)
	}
	if g := describeStreams(t, d.Addr, group); len(g.Members) != 1 {
		t.Fatalf("while heartbeating: %d members", len(g.Members))
	}
	time.Sleep(4 * time.Second)
	if g := describeStreams(t, d.Addr, group); len(g.Members) != 0 {
		t.Fatalf("4 s after its last heartbeat with a 2 s session: %d members", len(g.Members))
	}
	wantSGCode(t, "heartbeat after the session expired", c.steady(group, "a", e), kerr.UnknownMemberID.Code)
}

// For a while after an assignment a member is told the shorter reconciliation interval; a
// steady answer repeated on its connection must not keep telling it so once that window is
// over (the window ends with time alone, nothing runs on the shard).
func TestStreamsSteadyAnswerFollowsTheReconciliationWindow(t *testing.T) {
	t.Parallel()
	const group, topic = "steady-streams-window", "ssw-in"
	_, c, e, _ := settledStreamsMember(t, group, topic, 2, "group.streams.heartbeat.interval.ms=1500",
		"group.streams.reconciliation.heartbeat.interval.ms=100")
	var seen []int32
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		resp := c.steady(group, "a", e)
		wantSGCode(t, "steady heartbeat", resp, 0)
		if len(seen) == 0 || seen[len(seen)-1] != resp.HeartbeatIntervalMillis {
			seen = append(seen, resp.HeartbeatIntervalMillis)
		}
	}
	if fmt.Sprint(seen) != "[100 1500]" {
		t.Fatalf("intervals answered in the 3 s after the assignment: %v, want 100 (the window) then 1500", seen)
	}
}

// A target held back by the assignment interval is released by time alone, at the next
// heartbeat of any member: a member whose steady answers were repeated from its connection
// while the target was held would never release it. Here the new member stays silent after
// its join, so only the settled member's steady heartbeats can compute the target (the quiet
// time lets the first one after 100 ms do it, well before the 15 s interval).
func TestStreamsSteadyAnswerNotKeptWhileTheTargetIsHeld(t *testing.T) {
	t.Parallel()
	const group, topic = "steady-streams-held", "ssh-in"
	d, c, e, _ := settledStreamsMember(t, group, topic, 4, "group.streams.assignment.interval.ms=15000",
		"group.streams.assignment.quiet.ms=100", "group.streams.session.timeout.ms=10000")
	for i := 0; i < 3; i++ {
		wantSGCode(t, "steady heartbeat", c.steady(group, "a", e), 0)
	}
	dialSG(t, d).join(group, "b", topic) // and never heartbeats again
	for end := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp := c.steady(group, "a", e)
		wantSGCode(t, "steady heartbeat after b joined", resp, 0)
		if resp.ActiveTasks != nil {
			if n := activeCount(resp.ActiveTasks); n != 2 {
				t.Fatalf("a told to keep %d tasks, want 2 (half of 4)", n)
			}
			return
		}
		if time.Now().After(end) {
			t.Fatal("a heard nothing of b's join for 3 s: the held target was never computed")
		}
	}
}
