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

// joinCG joins member to group on a connection of its own and returns it with the member's epoch.
func joinCG(t *testing.T, d *daemon, group, member string) (*cgConn, int32) {
	t.Helper()
	c := dialCG(t, d)
	joined := c.heartbeat(group, member, 0, true)
	wantCGCode(t, "join", joined, 0)
	return c, joined.MemberEpoch
}

func wantCGCode(t *testing.T, what string, resp *kmsg.ConsumerGroupHeartbeatResponse, want int16) {
	t.Helper()
	wantErrorCode(t, what, resp.ErrorCode, resp.ErrorMessage, want)
}

// wantErrorCode fails the test unless an answer's error code is want, naming both and the
// answer's message.
func wantErrorCode(t testing.TB, what string, code int16, message *string, want int16) {
	t.Helper()
	if code != want {
		msg := ""
		if message != nil {
			msg = *message
		}
		t.Fatalf("%s: error %v (%s), want %v", what, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(want))
	}
}

// A member's connection holds the steady answer for epoch E; the member's epoch then moves on
// (another member joined, and the member heartbeated on a second connection). A heartbeat at E
// on the first connection must be fenced, as Kafka fences it, not answered from the old
// steady answer.
func TestConsumerSteadyAnswerNotReusedAfterEpochMoved(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, consumerKeys...)
	const group, a, b = "steady-fence", "member-a-0000000001", "member-b-0000000002"
	first, e := joinCG(t, d, group, a)
	second := dialCG(t, d)
	for i := 0; i < 3; i++ { // the first steady answer is kept on the connection, the others reuse it
		resp := first.heartbeat(group, a, e, false)
		wantCGCode(t, "steady heartbeat", resp, 0)
		if resp.MemberEpoch != e {
			t.Fatalf("steady heartbeat moved the epoch to %d from %d", resp.MemberEpoch, e)
		}
	}
	joinCG(t, d, group, b)
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
	const group, a = "steady-session", "member-a-0000000003"
	c, e := joinCG(t, d, group, a)
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

// hbConn is one classic member's connection, sending Heartbeat v4 frames.
type hbConn struct {
	*rawConn
	corr int32
}

func (c *hbConn) heartbeat(group, member string, gen int32) int16 {
	c.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	c.corr++
	c.write(frame(req, 4, c.corr, strp("sim"), nil))
	resp := kmsg.NewPtrHeartbeatResponse()
	c.read(resp, 4, c.corr)
	return resp.ErrorCode
}

// A classic member whose connection holds its steady Heartbeat answer still learns of a
// rebalance: once another member joins, the same heartbeat gets REBALANCE_IN_PROGRESS.
func TestClassicSteadyAnswerNotReusedAfterRebalanceStarts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	const group = "steady-classic"
	member, gen := stableRaw(t, d, group, nil)
	c := &hbConn{rawConn: dialRaw(t, d.Addr)}
	for i := 0; i < 3; i++ {
		wantCode(t, "steady heartbeat", c.heartbeat(group, member, gen), 0)
	}
	c.rebalanceSeen(t, d, group, member, gen, func() {})
}

// rebalanceSeen has a second member join group and heartbeats as member on c, running before
// ahead of each heartbeat, until the heartbeat reports REBALANCE_IN_PROGRESS.
func (c *hbConn) rebalanceSeen(t *testing.T, d *daemon, group, member string, gen int32, before func()) {
	t.Helper()
	// The second member's JoinGroup is parked until the rebalance ends, so it is sent and never
	// read here.
	joiner := dialRaw(t, d.Addr)
	joiner.write(frame(joinReq(group, "", nil), 3, 1, strp("sim"), nil))
	deadline := time.Now().Add(20 * time.Second)
	for {
		before()
		code := c.heartbeat(group, member, gen)
		if code == kerr.RebalanceInProgress.Code {
			return
		}
		wantCode(t, "heartbeat before the join is seen", code, 0)
		if time.Now().After(deadline) {
			t.Fatal("the member's heartbeat never reported the rebalance a second member started")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Steady classic heartbeats answered on their connection keep the member alive past several
// session timeouts; a member that stops is removed when its session expires.
func TestClassicSessionExpiryWithSteadyHeartbeats(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
	const group = "steady-classic-session"
	jr := joinReq(group, "", nil)
	jr.SessionTimeoutMillis = 2000
	r := join(t, d, 3, jr)
	wantCode(t, "join", r.ErrorCode, 0)
	wantCode(t, "sync", syncG(t, d, 3, group, r.MemberID, nil, r.Generation, map[string]string{r.MemberID: "A"}).ErrorCode, 0)
	c := &hbConn{rawConn: dialRaw(t, d.Addr)}
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
		wantCode(t, "steady heartbeat", c.heartbeat(group, r.MemberID, r.Generation), 0)
		time.Sleep(100 * time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code := c.heartbeat(group, r.MemberID, r.Generation)
		if code == kerr.UnknownMemberID.Code {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member's session never expired: heartbeat %v", kerr.ErrorForCode(code))
		}
		time.Sleep(3 * time.Second) // longer than the session: the member has stopped
	}
}

// A group config change reaches a member whose connection holds its steady answer: the next
// steady heartbeat there carries the group's new heartbeat interval.
func TestConsumerSteadyAnswerFollowsGroupConfigChange(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.consumer.min.heartbeat.interval.ms=100", "group.consumer.heartbeat.interval.ms=200")
	cl := d.client()
	defer cl.Close()
	const group, a = "steady-config", "member-a-0000000004"
	c, epoch := joinCG(t, d, group, a)
	for i := 0; i < 3; i++ {
		if resp := c.heartbeat(group, a, epoch, false); resp.ErrorCode != 0 || resp.HeartbeatIntervalMillis != 200 {
			t.Fatalf("steady heartbeat: %v, interval %d ms, want 200", kerr.ErrorForCode(resp.ErrorCode), resp.HeartbeatIntervalMillis)
		}
	}
	if code, msg := alterGroupConfigs(t, cl, group, false, setGroupConfig("consumer.heartbeat.interval.ms", "300")); code != 0 {
		t.Fatalf("set the group's heartbeat interval: %d %q", code, msg)
	}
	if resp := c.heartbeat(group, a, epoch, false); resp.ErrorCode != 0 || resp.HeartbeatIntervalMillis != 300 {
		t.Fatalf("steady heartbeat after the change: %v, interval %d ms, want the group's 300", kerr.ErrorForCode(resp.ErrorCode), resp.HeartbeatIntervalMillis)
	}
}

// A topic the member subscribes to appearing reaches a member whose connection holds its steady
// answer: its steady heartbeats there soon carry an assignment of the new topic's partitions.
func TestConsumerSteadyAnswerFollowsNewSubscribedTopic(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, consumerKeys...)
	adm := kadm.NewClient(d.client())
	const group, a = "steady-topic", "member-a-0000000005"
	c, epoch := joinCG(t, d, group, a)
	for i := 0; i < 3; i++ {
		wantCGCode(t, "steady heartbeat", c.heartbeat(group, a, epoch, false), 0)
	}
	createTopic(t, adm, "no-such-topic", 3) // the topic the member subscribed to
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := c.heartbeat(group, a, epoch, false)
		wantCGCode(t, "steady heartbeat after the topic appeared", resp, 0)
		epoch = resp.MemberEpoch
		if resp.Assignment != nil && len(resp.Assignment.Topics) == 1 && len(resp.Assignment.Topics[0].Partitions) == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no assignment of the new topic reached the member: epoch %d, assignment %+v", epoch, resp.Assignment)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
