package streams

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// client is a Streams member as the Java client behaves: it holds what the last answer
// assigned, gives up revoked tasks at once and reports what it holds in its next heartbeat.
type client struct {
	id     string
	epoch  int32
	active map[string][]int32
}

func (c *client) beat(e *env) *kmsg.StreamsGroupHeartbeatResponse {
	e.t.Helper()
	r := e.hb(owning(beat("g", c.id, c.epoch), c.active, nil, nil))
	mustOK(e.t, r)
	c.epoch = r.MemberEpoch
	if r.ActiveTasks != nil {
		c.active = wireTasks(r.ActiveTasks)
	}
	return r
}

func delayed(r *kmsg.StreamsGroupHeartbeatResponse) bool {
	for _, s := range r.Status {
		if s.StatusCode == StatusAssignmentDelayed {
			return true
		}
	}
	return false
}

// A scale-out from one member to three: while tasks change hands every member is told the
// reconciliation interval, so the hand-over does not wait for whole heartbeat intervals; once
// the group is stable each member is told the configured interval again.
func TestHandOverIsAnsweredTheReconciliationInterval(t *testing.T) {
	e := newEnv(t, topics("in", 6), roundRobin{"sticky"})
	e.cfg.ReconcilingHeartbeatInterval = 500 * time.Millisecond
	tp := topo(0, sub{id: "s", sources: []string{"in"}})
	const short, long = 500, 5000

	first := func(id string) (*client, *kmsg.StreamsGroupHeartbeatResponse) {
		r := e.hb(join("g", id, tp))
		mustOK(t, r)
		return &client{id: id, epoch: r.MemberEpoch, active: wireTasks(r.ActiveTasks)}, r
	}
	m1, r := first("m1")
	if r.HeartbeatIntervalMillis != long || len(m1.active["s"]) != 6 {
		t.Fatalf("a lone member with every task is stable at once: interval %d, tasks %v", r.HeartbeatIntervalMillis, m1.active)
	}
	if r = m1.beat(e); r.HeartbeatIntervalMillis != long {
		t.Fatalf("stable group: interval %d, want %d", r.HeartbeatIntervalMillis, long)
	}

	e.now = e.now.Add(2 * time.Second)
	m2, r := first("m2")
	if r.HeartbeatIntervalMillis != short || len(m2.active["s"]) != 0 {
		t.Fatalf("m2 waits for m1's tasks: interval %d, tasks %v", r.HeartbeatIntervalMillis, m2.active)
	}
	m3, r := first("m3")
	if r.HeartbeatIntervalMillis != short || !delayed(r) {
		t.Fatalf("m3's assignment is delayed: interval %d, status %+v", r.HeartbeatIntervalMillis, r.Status)
	}
	if r = m1.beat(e); r.HeartbeatIntervalMillis != short || len(m1.active["s"]) == 6 {
		t.Fatalf("m1 learns of its revocation: interval %d, tasks %v", r.HeartbeatIntervalMillis, m1.active)
	}

	// Every member heartbeats at the interval it was told until the group is stable; the
	// answer is short exactly while a hand-over is in progress.
	members := []*client{m1, m2, m3}
	stableRounds := 0
	for round := 0; round < 40 && stableRounds < 2; round++ {
		e.now = e.now.Add(short * time.Millisecond)
		for _, c := range members {
			r := c.beat(e)
			g := e.s.Groups["g"]
			st := g.State()
			handOver := st == Assigning || st == Reconciling || delayed(r)
			want := int32(long)
			if handOver {
				want = short
			}
			if r.HeartbeatIntervalMillis != want {
				t.Fatalf("round %d, %s: interval %d with the group %s (delayed %v), want %d", round, c.id, r.HeartbeatIntervalMillis, st, delayed(r), want)
			}
		}
		if e.s.Groups["g"].State() == StableGroup {
			stableRounds++
		}
	}
	if stableRounds < 2 {
		t.Fatalf("the group never became stable: %s", e.s.Groups["g"].State())
	}
	for _, c := range members {
		if len(c.active["s"]) != 2 {
			t.Fatalf("%s holds %v, want 2 tasks each", c.id, c.active)
		}
	}
}

// With the reconciliation interval off (0, what the conformance harness sets) or not shorter
// than the configured interval, every answer carries the configured interval, as Kafka's.
func TestReconciliationIntervalOffAnswersTheConfiguredInterval(t *testing.T) {
	for _, d := range []time.Duration{0, 5 * time.Second, 7 * time.Second} {
		e := newEnv(t, topics("in", 6), roundRobin{"sticky"})
		e.cfg.ReconcilingHeartbeatInterval = d
		tp := topo(0, sub{id: "s", sources: []string{"in"}})
		mustOK(t, e.hb(join("g", "m1", tp)))
		e.now = e.now.Add(2 * time.Second)
		for _, r := range []*kmsg.StreamsGroupHeartbeatResponse{e.hb(join("g", "m2", tp)), e.hb(join("g", "m3", tp)), e.hb(beat("g", "m1", e.member("g", "m1").Epoch))} {
			if r.HeartbeatIntervalMillis != 5000 {
				t.Fatalf("reconciliation interval %s: answered %d, want 5000", d, r.HeartbeatIntervalMillis)
			}
		}
	}
}
