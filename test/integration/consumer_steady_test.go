package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A steady ConsumerGroupHeartbeat repeated on the connection that got its answer is answered
// there without a round trip through the group's shard (a runtime ticket, docs/architecture.md).
// These tests check what a client would notice if that answer were stale or the session
// deadline were lost.

// cgConn is one member's connection, sending ConsumerGroupHeartbeat v1 frames.
type cgConn struct {
	*rawConn
	corr int32
}

func (c *cgConn) heartbeat(group, member string, epoch int32, join bool) *kmsg.ConsumerGroupHeartbeatResponse {
	c.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
	req.RebalanceTimeoutMillis = -1
	if join {
		// A topic that does not exist: the member's target is empty, so its epoch follows the
		// group's without any revocation.
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 30000, []string{"no-such-topic"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	c.corr++
	c.write(frame(req, 1, c.corr, strp("steady-test"), nil))
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	c.read(resp, 1, c.corr)
	return resp
}

func dialCG(t *testing.T, d *daemon) *cgConn { return &cgConn{rawConn: dialRaw(t, d.Addr)} }

func wantCGCode(t *testing.T, what string, resp *kmsg.ConsumerGroupHeartbeatResponse, want int16) {
	t.Helper()
	if resp.ErrorCode != want {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		t.Fatalf("%s: error %v (%s), want %v", what, kerr.ErrorForCode(resp.ErrorCode), msg, kerr.ErrorForCode(want))
	}
}

// A member's connection holds the steady answer for epoch E; the member's epoch then moves on
// (another member joined, and the member heartbeated on a second connection). A heartbeat at E
// on the first connection must be fenced, as Kafka fences it, not answered from the old
// steady answer.
func TestConsumerSteadyAnswerNotReusedAfterEpochMoved(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, consumerKeys...)
	first, second, other := dialCG(t, d), dialCG(t, d), dialCG(t, d)
	const group, a, b = "steady-fence", "member-a-0000000001", "member-b-0000000002"
	joined := first.heartbeat(group, a, 0, true)
	wantCGCode(t, "join", joined, 0)
	e := joined.MemberEpoch
	for i := 0; i < 3; i++ { // the first steady answer is kept on the connection, the others reuse it
		resp := first.heartbeat(group, a, e, false)
		wantCGCode(t, "steady heartbeat", resp, 0)
		if resp.MemberEpoch != e {
			t.Fatalf("steady heartbeat moved the epoch to %d from %d", resp.MemberEpoch, e)
		}
	}
	wantCGCode(t, "second member joining", other.heartbeat(group, b, 0, true), 0)
	// The new target is computed at most once per assignment interval: heartbeat on the second
	// connection until the member has moved to the new epoch.
	moved := e
	deadline := time.Now().Add(20 * time.Second)
	for moved == e {
		if time.Now().After(deadline) {
			t.Fatalf("member a stayed at epoch %d after a second member joined", e)
		}
		resp := second.heartbeat(group, a, moved, false)
		wantCGCode(t, "heartbeat on the second connection", resp, 0)
		moved = resp.MemberEpoch
		time.Sleep(50 * time.Millisecond)
	}
	if moved <= e {
		t.Fatalf("epoch moved from %d to %d", e, moved)
	}
	wantCGCode(t, "heartbeat at the old epoch on the first connection", first.heartbeat(group, a, e, false), kerr.FencedMemberEpoch.Code)
	// And the member at its current epoch is served on that connection again.
	wantCGCode(t, "heartbeat at the new epoch on the first connection", first.heartbeat(group, a, moved, false), 0)
}

// Steady heartbeats answered on their connection keep the member alive past several session
// timeouts, and a member that stops heartbeating is still removed when its session expires.
func TestConsumerSessionExpiryWithSteadyHeartbeats(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.consumer.min.heartbeat.interval.ms=100", "group.consumer.heartbeat.interval.ms=200",
		"group.consumer.min.session.timeout.ms=1000", "group.consumer.session.timeout.ms=2000")
	adm := kadm.NewClient(d.client())
	c := dialCG(t, d)
	const group, a = "steady-session", "member-a-0000000003"
	joined := c.heartbeat(group, a, 0, true)
	wantCGCode(t, "join", joined, 0)
	e := joined.MemberEpoch
	// Three session timeouts of heartbeats, every 100 ms: a session deadline the repeated
	// answers did not move would fence the member after the first 2 s.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
		wantCGCode(t, "steady heartbeat", c.heartbeat(group, a, e, false), 0)
		time.Sleep(100 * time.Millisecond)
	}
	described, err := adm.DescribeConsumerGroups(ctxT(t), group)
	if err != nil || len(described[group].Members) != 1 {
		t.Fatalf("while heartbeating: %+v %v", described[group], err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		described, err := adm.DescribeConsumerGroups(ctxT(t), group)
		if err == nil && described[group].State == "Empty" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member's session never expired: %+v %v", described[group], err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantCGCode(t, "heartbeat after the session expired", c.heartbeat(group, a, e, false), kerr.UnknownMemberID.Code)
}
