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

// A scale-out from one member to three: while tasks change hands, and for one configured
// interval after each new target assignment, every member is told the reconciliation interval,
// so the hand-over does not wait for whole heartbeat intervals; once the group is stable and
// its assignment that old, each member is told the configured interval again.
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
	if r.HeartbeatIntervalMillis != short || len(m1.active["s"]) != 6 {
		t.Fatalf("a lone member gets every task and the new assignment's interval: interval %d, tasks %v", r.HeartbeatIntervalMillis, m1.active)
	}
	e.now = e.now.Add(4900 * time.Millisecond)
	if r = m1.beat(e); r.HeartbeatIntervalMillis != short {
		t.Fatalf("4.9 s after the assignment: interval %d, want %d", r.HeartbeatIntervalMillis, short)
	}
	e.now = e.now.Add(100 * time.Millisecond)
	if r = m1.beat(e); r.HeartbeatIntervalMillis != long {
		t.Fatalf("stable group, assignment 5 s old: interval %d, want %d", r.HeartbeatIntervalMillis, long)
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

	// Every member heartbeats at the interval it was told until the group is stable and its
	// assignment older than the configured interval; the answer is short exactly until then.
	members := []*client{m1, m2, m3}
	longRounds := 0
	for round := 0; round < 60 && longRounds < 2; round++ {
		e.now = e.now.Add(short * time.Millisecond)
		allLong := true
		for _, c := range members {
			r := c.beat(e)
			g := e.s.Groups["g"]
			st := g.State()
			recent := e.now.UnixMilli() < g.AssignmentTimestamp+long
			want := int32(long)
			if st == Assigning || st == Reconciling || delayed(r) || recent {
				want = short
			}
			if r.HeartbeatIntervalMillis != want {
				t.Fatalf("round %d, %s: interval %d with the group %s (delayed %v, assignment %d ms old), want %d", round, c.id, r.HeartbeatIntervalMillis, st, delayed(r), e.now.UnixMilli()-g.AssignmentTimestamp, want)
			}
			allLong = allLong && want == long
		}
		if allLong {
			longRounds++
		}
	}
	if longRounds < 2 {
		t.Fatalf("the group never settled: %s", e.s.Groups["g"].State())
	}
	for _, c := range members {
		if len(c.active["s"]) != 2 {
			t.Fatalf("%s holds %v, want 2 tasks each", c.id, c.active)
		}
	}
}

// The owner of every task hears of a join at its next heartbeat. Within one configured interval
// of the group's last assignment it heartbeats at the reconciliation interval, so a member that
// joins soon after another (a deployment's instances starting one after another) has its tasks
// released within that, not within the configured interval.
func TestJoinSoonAfterAnAssignmentReachesTheOwnerAtTheShortInterval(t *testing.T) {
	e := newEnv(t, topics("in", 6), roundRobin{"sticky"})
	e.cfg.ReconcilingHeartbeatInterval = 500 * time.Millisecond
	tp := topo(0, sub{id: "s", sources: []string{"in"}})
	r := e.hb(join("g", "m1", tp))
	m1 := &client{id: "m1", epoch: r.MemberEpoch, active: wireTasks(r.ActiveTasks)}
	e.now = e.now.Add(500 * time.Millisecond)
	if r := m1.beat(e); r.HeartbeatIntervalMillis != 500 {
		t.Fatalf("m1 acknowledges its tasks: interval %d, want 500", r.HeartbeatIntervalMillis)
	}
	e.now = e.now.Add(1500 * time.Millisecond)
	r = e.hb(join("g", "m2", tp))
	mustOK(t, r)
	e.now = e.now.Add(500 * time.Millisecond) // m1's next heartbeat, as it was told
	if r := m1.beat(e); len(m1.active["s"]) != 3 || r.HeartbeatIntervalMillis != 500 {
		t.Fatalf("m1 2.5 s after its join: tasks %v, interval %d; want 3 tasks revoked at once", m1.active, r.HeartbeatIntervalMillis)
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

// A Kafka Streams 4.4 client fails the application once a missing source topic has been
// reported for twice the last interval it was told. An application started just before its
// source topic is created, or whose source topic is re-created, gets the configured interval
// with MISSING_SOURCE_TOPICS, so that grace is Kafka's 10 s, not 1 s; once the topic is there
// the hand-over gets the reconciliation interval again.
func TestMissingSourceTopicsAreAnsweredTheConfiguredInterval(t *testing.T) {
	e := newEnv(t, topics("other", 1), roundRobin{"sticky"})
	e.cfg.ReconcilingHeartbeatInterval = 500 * time.Millisecond
	tp := topo(0, sub{id: "s", sources: []string{"in"}})
	missing := func(r *kmsg.StreamsGroupHeartbeatResponse) bool {
		for _, s := range r.Status {
			if s.StatusCode == StatusMissingSourceTopics {
				return true
			}
		}
		return false
	}
	r := e.hb(join("g", "m1", tp))
	mustOK(t, r)
	if !missing(r) || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("join without the source topic: interval %d, status %+v; want 5000 with MISSING_SOURCE_TOPICS", r.HeartbeatIntervalMillis, r.Status)
	}
	m1 := &client{id: "m1", epoch: r.MemberEpoch}
	e.now = e.now.Add(500 * time.Millisecond)
	if r = m1.beat(e); !missing(r) || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("still missing: interval %d, status %+v; want 5000 with MISSING_SOURCE_TOPICS", r.HeartbeatIntervalMillis, r.Status)
	}
	e.cat["in"] = topics("in", 4)["in"]
	e.now = e.now.Add(5 * time.Second)
	if r = m1.beat(e); missing(r) || len(m1.active["s"]) != 4 || r.HeartbeatIntervalMillis != 500 {
		t.Fatalf("source topic created: interval %d, tasks %v, status %+v; want 500 and every task", r.HeartbeatIntervalMillis, m1.active, r.Status)
	}
	delete(e.cat, "in")
	e.now = e.now.Add(1100 * time.Millisecond) // past the assignment interval

	if r = m1.beat(e); !missing(r) || len(m1.active["s"]) != 0 || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("source topic deleted: interval %d, tasks %v, status %+v; want 5000, no task, MISSING_SOURCE_TOPICS", r.HeartbeatIntervalMillis, m1.active, r.Status)
	}
}
