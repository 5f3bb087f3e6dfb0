package streams

import (
	"reflect"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tests closing gaps a mutation sweep of the state machine's decisions found (docs/developing.md,
// "Mutation sweeps", test/mutate/streams.json): each asserts what a Streams client or an admin
// sees: heartbeat answers, StreamsGroupDescribe, commit and fetch codes, internal topics created.

// staticJoin is a join of member with instance id inst on its own process.
func staticJoin(group, member, inst string, t *kmsg.StreamsGroupHeartbeatRequestTopology) *kmsg.StreamsGroupHeartbeatRequest {
	r := join(group, member, t)
	r.InstanceID = &inst
	return r
}

// A static member that leaves temporarily (epoch -2) while it still has to revoke tasks gives
// them up: the member waiting for them gets them at its next heartbeat instead of waiting for
// the static member to come back or time out.
func TestStaticTemporaryLeaveReleasesTasksPendingRevocation(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	mustOK(t, e.hb(staticJoin("g", "a", "inst-a", tp)))
	e.now = e.now.Add(2 * time.Second)
	rb := e.hb(join("g", "b", tp))
	mustOK(t, rb)
	if len(rb.ActiveTasks) != 0 {
		t.Fatalf("b got tasks a still owns: %v", wireTasks(rb.ActiveTasks))
	}
	ha := beat("g", "a", e.member("g", "a").Epoch)
	ha.InstanceID = ptr("inst-a")
	ra := e.hb(ha)
	mustOK(t, ra)
	if !reflect.DeepEqual(wireTasks(ra.ActiveTasks), map[string][]int32{"s": ps(0, 2)}) {
		t.Fatalf("a should be told to keep only s:0,2, got %v", wireTasks(ra.ActiveTasks))
	}
	leave := beat("g", "a", -2)
	leave.InstanceID = ptr("inst-a")
	mustOK(t, e.hb(leave))
	rb = e.hb(beat("g", "b", rb.MemberEpoch))
	mustOK(t, rb)
	if !reflect.DeepEqual(wireTasks(rb.ActiveTasks), map[string][]int32{"s": ps(1, 3)}) {
		t.Fatalf("after a's temporary leave b should get s:1,3, got %v", wireTasks(rb.ActiveTasks))
	}
}

// A static member rejoining under a new member id inherits its predecessor's target: its next
// regular heartbeat keeps the tasks the join answered with, and StreamsGroupDescribe shows them
// as its target assignment too.
func TestStaticReplacementKeepsItsTasksOnTheNextHeartbeat(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	mustOK(t, e.hb(staticJoin("g", "a", "inst", tp)))
	leave := beat("g", "a", -2)
	leave.InstanceID = ptr("inst")
	mustOK(t, e.hb(leave))
	e.now = e.now.Add(2 * time.Second)
	j := staticJoin("g", "a2", "inst", tp)
	j.ProcessID = ptr("process-a") // same process: no group epoch bump
	r := e.hb(j)
	mustOK(t, r)
	all := map[string][]int32{"s": ps(0, 1, 2, 3)}
	if !reflect.DeepEqual(wireTasks(r.ActiveTasks), all) {
		t.Fatalf("replacement join got %v, want %v", wireTasks(r.ActiveTasks), all)
	}
	e.now = e.now.Add(2 * time.Second)
	h := owning(beat("g", "a2", r.MemberEpoch), all, nil, nil)
	h.InstanceID = ptr("inst")
	r2 := e.hb(h)
	mustOK(t, r2)
	if r2.MemberEpoch != r.MemberEpoch || r2.ActiveTasks != nil {
		t.Fatalf("next heartbeat changed the replacement's assignment: epoch %d->%d, active %v", r.MemberEpoch, r2.MemberEpoch, wireTasks(r2.ActiveTasks))
	}
	d := e.s.Describe("g", false, e.cat, e.cfg, false)
	if len(d.Members) != 1 || !reflect.DeepEqual(d.Members[0].TargetAssignment, d.Members[0].Assignment) ||
		!reflect.DeepEqual(wireTasks(d.Members[0].TargetAssignment.ActiveTasks), all) {
		t.Fatalf("describe: %+v", d.Members)
	}
}

func ptr[T any](v T) *T { return &v }

// The member epoch check at its edges: one above the member's epoch is fenced like any greater
// epoch, and an epoch below the previous one is fenced even with owned tasks the member holds
// (only the previous epoch is forgiven, for a lost answer).
func TestMemberEpochCheckAtItsEdges(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", fooBar)))
	mustOK(t, e.hb(join("g", "m2", fooBar)))
	e.now = e.now.Add(2 * time.Second)
	r := e.hb(beat("g", "m", 2))
	mustOK(t, r)
	held := wireTasks(r.ActiveTasks)
	mustOK(t, e.hb(owning(beat("g", "m", 2), held, nil, nil)))
	if m := e.member("g", "m"); m.Epoch != 3 || m.PreviousEpoch != 2 {
		t.Fatalf("setup: member at %d, previous %d", m.Epoch, m.PreviousEpoch)
	}
	mustErr(t, e.hb(beat("g", "m", 4)), kerr.FencedMemberEpoch.Code,
		"The streams group member has a greater member epoch (4) than the one known by the group coordinator (3). The member must abandon all its partitions and rejoin.")
	mustErr(t, e.hb(owning(beat("g", "m", 1), held, nil, nil)), kerr.FencedMemberEpoch.Code,
		"The streams group member has a smaller member epoch (1) than the one known by the group coordinator (3). The member must abandon all its partitions and rejoin.")
}

// A static member that comes back on another process (a replacement with a new process id)
// changes the group: the group epoch bumps and the answer carries the new epoch.
func TestStaticReplacementOnAnotherProcessBumpsTheGroupEpoch(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	mustOK(t, e.hb(staticJoin("g", "a", "inst", tp)))
	before := e.s.Describe("g", false, e.cat, e.cfg, false).Epoch
	leave := beat("g", "a", -2)
	leave.InstanceID = ptr("inst")
	mustOK(t, e.hb(leave))
	e.now = e.now.Add(2 * time.Second)
	r := e.hb(staticJoin("g", "a2", "inst", tp)) // process "process-a2", not "process-a"
	mustOK(t, r)
	if d := e.s.Describe("g", false, e.cat, e.cfg, false); d.Epoch != before+1 || r.MemberEpoch != before+1 {
		t.Fatalf("group epoch %d -> %d, member epoch %d; want a bump to %d", before, d.Epoch, r.MemberEpoch, before+1)
	}
}

// A member that joined with the classic protocol (online migration) cannot heartbeat with the
// streams protocol under its id: UNKNOWN_MEMBER_ID, even at its own epoch.
func TestClassicMemberStreamsHeartbeatIsUnknownMember(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}))))
	epoch := e.member("g", "m").Epoch
	c := &Member{ID: "c", ProcessID: "pc", RebalanceTimeoutMs: 1000, Epoch: epoch, PreviousEpoch: epoch, State: Stable,
		Classic: &ClassicMember{SessionTimeoutMs: 45000, Protocols: []ClassicProtocol{{Name: "stream"}}}}
	e.apply([]logRecord{MemberMetadataRecord("g", c), ClassicMemberRecord("g", c), CurrentMemberRecord("g", c)}, nil)
	mustErr(t, e.hb(beat("g", "c", epoch)), kerr.UnknownMemberID.Code, "Member c is not a member of group g.")
}

// A joining member's topology is refused with INVALID_REQUEST when its epoch is negative or a
// subtopology id repeats; the group is not created.
func TestJoinRefusesMalformedTopology(t *testing.T) {
	e := newEnv(t, topics("foo", 2, "bar", 2), roundRobin{"sticky"})
	mustErr(t, e.hb(join("g", "m", topo(-1, sub{id: "s", sources: []string{"foo"}}))), kerr.InvalidRequest.Code, "Topology epoch must be non-negative.")
	mustErr(t, e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}, sub{id: "s", sources: []string{"bar"}}))),
		kerr.InvalidRequest.Code, "Subtopology s is defined more than once.")
	if _, ok := e.s.Groups["g"]; ok {
		t.Fatal("a refused join created the group")
	}
}

// A topology whose partition counts cannot be resolved is STREAMS_INVALID_TOPOLOGY (not a
// generic INVALID_REQUEST): the Streams client treats it as a fatal topology error.
func TestUnresolvableTopologyIsStreamsInvalidTopology(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}, repSources: []string{"never-a-sink"}})
	mustErr(t, e.hb(join("g", "m", tp)), kerr.StreamsInvalidTopology.Code,
		"Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic.")
}

// A member whose stored state is unknown (a record from a newer version) must give everything
// up: a heartbeat still listing tasks is FENCED_MEMBER_EPOCH, so the client rejoins.
func TestUnknownMemberStateHeartbeatIsFenced(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}))))
	m := e.member("g", "m").clone()
	m.State = UnknownState
	e.apply([]logRecord{CurrentMemberRecord("g", m)}, nil)
	r := e.hb(owning(beat("g", "m", m.Epoch), map[string][]int32{"s": ps(0, 1)}, nil, nil))
	mustErr(t, r, kerr.FencedMemberEpoch.Code, errUnknownState{}.Error())
}

// A member with an endpoint whose tasks change moves the endpoint information epoch, so the
// other instances (and the member itself) learn where the tasks went.
func TestTaskMoveOfAnEndpointMemberMovesTheEndpointEpoch(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	withEndpoint := func(member, host string) *kmsg.StreamsGroupHeartbeatRequest {
		j := join("g", member, tp)
		j.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: host, Port: 9092}
		return j
	}
	r1 := e.hb(withEndpoint("m1", "host1"))
	mustOK(t, r1)
	e.now = e.now.Add(2 * time.Second)
	r2 := e.hb(withEndpoint("m2", "host2"))
	mustOK(t, r2)
	h := beat("g", "m1", r1.MemberEpoch)
	h.EndpointInformationEpoch = r2.EndpointInformationEpoch
	r := e.hb(h) // m1 is told to give up s:1,3
	mustOK(t, r)
	if r.EndpointInformationEpoch != r2.EndpointInformationEpoch+1 || len(r.PartitionsByUserEndpoint) != 2 {
		t.Fatalf("endpoint epoch %d -> %d, endpoints %+v", r2.EndpointInformationEpoch, r.EndpointInformationEpoch, r.PartitionsByUserEndpoint)
	}
	self := r.PartitionsByUserEndpoint[1]
	if self.UserEndpoint.Host != "host1" || !reflect.DeepEqual(self.ActivePartitions[0].Partitions, ps(0, 2)) {
		t.Fatalf("m1's endpoint entry %+v", self)
	}
}

// A member whose endpoint information epoch differs from the group's in either direction (a
// higher one after a coordinator failover reset the group's) gets the endpoints again.
func TestHigherEndpointEpochGetsTheEndpoints(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	j := join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}))
	j.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "h", Port: 1}
	r := e.hb(j)
	mustOK(t, r)
	h := beat("g", "m", r.MemberEpoch)
	h.EndpointInformationEpoch = 7
	r = e.hb(h)
	mustOK(t, r)
	if r.EndpointInformationEpoch != 0 || len(r.PartitionsByUserEndpoint) != 1 {
		t.Fatalf("endpoint epoch %d, endpoints %+v", r.EndpointInformationEpoch, r.PartitionsByUserEndpoint)
	}
}

// An OffsetFetch naming no member but a member epoch is checked as a member's: UNKNOWN_MEMBER_ID.
func TestOffsetFetchWithEpochButNoMemberIsUnknownMember(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}))))
	if code, owned := e.s.ValidateFetch("g", nil, e.member("g", "m").Epoch); code != kerr.UnknownMemberID.Code || !owned {
		t.Fatalf("got %d owned %v", code, owned)
	}
}

// A member settled at the target is told the reconciliation interval while another member has
// not reconciled yet, even when the target is older than one configured interval.
func TestSettledMemberHearsShortIntervalWhileAnotherReconciles(t *testing.T) {
	f := &fixed{out: assign.Output{"m1": {Active: assign.TaskSet{"s": ps(0, 1)}}}}
	e := newEnv(t, topics("foo", 2), f)
	e.cfg.ReconcilingHeartbeatInterval = 500 * time.Millisecond
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	mustOK(t, e.hb(join("g", "m1", tp)))
	e.now = e.now.Add(10 * time.Second)
	f.out = assign.Output{"m1": {Active: assign.TaskSet{"s": ps(0, 1)}}, "m2": {}}
	r := e.hb(join("g", "m2", tp)) // m2 gets nothing and is settled; m1 has not heard of the new epoch
	mustOK(t, r)
	e.now = e.now.Add(10 * time.Second)
	r = e.hb(beat("g", "m2", r.MemberEpoch))
	mustOK(t, r)
	if r.HeartbeatIntervalMillis != 500 {
		t.Fatalf("interval %d while m1 is behind the target, want 500", r.HeartbeatIntervalMillis)
	}
}

// Warm-up tasks are listed among an endpoint's standby partitions (IQ reads them like standbys).
func TestWarmupsAreEndpointStandbyPartitions(t *testing.T) {
	f := &fixed{out: assign.Output{"m": {Active: assign.TaskSet{"s": ps(0)}, Warmup: assign.TaskSet{"s": ps(1)}}}}
	e := newEnv(t, topics("foo", 2), f)
	j := join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}, changelogs: []string{"cl"}}))
	j.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "h", Port: 1}
	e.cat["cl"] = &metaTopic{Name: "cl", Partitions: 2}
	r := e.hb(j)
	mustOK(t, r)
	if !reflect.DeepEqual(wireTasks(r.WarmupTasks), map[string][]int32{"s": ps(1)}) || len(r.PartitionsByUserEndpoint) != 1 {
		t.Fatalf("setup: warm-ups %v, endpoints %+v", wireTasks(r.WarmupTasks), r.PartitionsByUserEndpoint)
	}
	sp := r.PartitionsByUserEndpoint[0].StandbyPartitions
	if len(sp) != 1 || sp[0].Topic != "foo" || !reflect.DeepEqual(sp[0].Partitions, ps(1)) {
		t.Fatalf("standby partitions %+v, want foo [1]", sp)
	}
}

// After a load, a member that still has tasks to revoke gets its rebalance timer back (it is
// fenced if it never acknowledges), and a settled member gets none.
func TestLoadedTimersRearmRebalanceTimerOfRevokingMember(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	mustOK(t, e.hb(join("g", "m1", tp)))
	e.now = e.now.Add(2 * time.Second)
	mustOK(t, e.hb(join("g", "m2", tp)))
	mustOK(t, e.hb(beat("g", "m1", e.member("g", "m1").Epoch)))
	if e.member("g", "m1").State != UnrevokedTasks || e.member("g", "m2").State == UnrevokedTasks {
		t.Fatalf("setup: m1 %s, m2 %s", e.member("g", "m1").State, e.member("g", "m2").State)
	}
	loaded := New()
	for _, r := range e.log {
		if err := loaded.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	rebalance := map[string]int32{}
	for _, a := range loaded.LoadedTimers(func(string) Config { return e.cfg }) {
		if a.Kind == RebalanceTimer {
			rebalance[a.Member] = a.Epoch
		}
	}
	if want := map[string]int32{"m1": e.member("g", "m1").Epoch}; !reflect.DeepEqual(rebalance, want) {
		t.Fatalf("rebalance timers %v, want %v", rebalance, want)
	}
}

// An emptied group no longer holds its topics against OffsetDelete.
func TestEmptyGroupDoesNotSubscribe(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}))))
	if !e.s.Subscribed("g", "foo") {
		t.Fatal("a member's group does not subscribe to its source topic")
	}
	mustOK(t, e.hb(beat("g", "m", -1)))
	if e.s.Subscribed("g", "foo") {
		t.Fatal("an empty group still subscribes to its source topic")
	}
}

// Reconciliation cases the sweep found unguarded. The member reconcile returns is what the
// heartbeat answer carries: its epoch, its task lists and whether it waits (UNRELEASED_TASKS)
// or must revoke first (UNREVOKED_TASKS).

// A promotion while another task is still being revoked keeps the standby until the active
// can be granted: the member never holds neither copy.
func TestPromotionWaitingOnRevocationKeepsTheStandby(t *testing.T) {
	m := member("m", "p", 10, Stable, roles(10, tm{"s": ps(1)}, tm{"s": ps(0)}, nil), Roles{})
	n, _ := reconcile(m, 11, roles(0, tm{"s": ps(0)}, nil, nil), nil, own(m))
	if n.State != UnrevokedTasks || n.Epoch != 10 || len(n.Assigned[Active]) != 0 ||
		!reflect.DeepEqual(tasksOf(n.Assigned[Standby]), tm{"s": ps(0)}) || !reflect.DeepEqual(tasksOf(n.Pending[Active]), tm{"s": ps(1)}) {
		t.Fatalf("%s epoch %d assigned %+v pending %+v", n.State, n.Epoch, n.Assigned, n.Pending)
	}
}

// In-place role changes between standby and warm-up need no acknowledgement: the member moves
// to the target epoch at once with the task in its new role and nothing to revoke.
func TestStandbyWarmupRoleChangesNeedNoAck(t *testing.T) {
	for _, c := range []struct {
		name         string
		from, target Roles
		role         Role
	}{
		{"standby to warm-up", roles(10, nil, tm{"s": ps(0)}, nil), roles(0, nil, nil, tm{"s": ps(0)}), Warmup},
		{"warm-up to standby", roles(10, nil, nil, tm{"s": ps(0)}), roles(0, nil, tm{"s": ps(0)}, nil), Standby},
		{"warm-up to active", roles(10, nil, nil, tm{"s": ps(0)}), roles(0, tm{"s": ps(0)}, nil, nil), Active},
	} {
		m := member("m", "p", 10, Stable, c.from, Roles{})
		n, _ := reconcile(m, 11, c.target, nil, own(m))
		if n.State != Stable || n.Epoch != 11 || !n.Pending.Empty() || !reflect.DeepEqual(tasksOf(n.Assigned[c.role]), tm{"s": ps(0)}) {
			t.Errorf("%s: %s epoch %d assigned %+v pending %+v", c.name, n.State, n.Epoch, n.Assigned, n.Pending)
		}
	}
}

// An active task is not granted while any member still holds it, the member itself included
// (its own earlier revocation not yet acknowledged in the records), nor while another member of
// the same process holds it as a standby (as Kafka's CurrentAssignmentBuilder).
func TestActiveTaskWaitsForEveryHolder(t *testing.T) {
	// m revoked s:1 and acknowledges now; the new target gives s:1 back.
	m := member("m", "p", 10, UnrevokedTasks, roles(10, tm{"s": ps(0)}, nil, nil), roles(10, tm{"s": ps(1)}, nil, nil))
	n, _ := reconcile(m, 12, roles(0, tm{"s": ps(0, 1)}, nil, nil), ownedRoles(tm{"s": ps(0)}, nil, nil), own(m))
	if n.State != UnreleasedTasks || !reflect.DeepEqual(tasksOf(n.Assigned[Active]), tm{"s": ps(0)}) {
		t.Fatalf("own pending revocation: %s assigned %+v", n.State, n.Assigned)
	}
	// The same for a standby the member itself is still giving up.
	m = member("m", "p", 10, UnrevokedTasks, roles(10, nil, tm{"s": ps(0)}, nil), roles(10, nil, tm{"s": ps(1)}, nil))
	n, _ = reconcile(m, 12, roles(0, nil, tm{"s": ps(0, 1)}, nil), ownedRoles(nil, tm{"s": ps(0)}, nil), own(m))
	if n.State != UnreleasedTasks || !reflect.DeepEqual(tasksOf(n.Assigned[Standby]), tm{"s": ps(0)}) {
		t.Fatalf("own pending standby revocation: %s assigned %+v", n.State, n.Assigned)
	}
	m = member("m", "p", 10, Stable, Roles{}, Roles{})
	sib := member("sib", "p", 10, Stable, roles(10, nil, tm{"s": ps(0)}, nil), Roles{})
	n, _ = reconcile(m, 11, roles(0, tm{"s": ps(0)}, nil, nil), ownedRoles(nil, nil, nil), own(m, sib))
	if n.State != UnreleasedTasks || len(n.Assigned[Active]) != 0 {
		t.Fatalf("standby on the same process: %s assigned %+v", n.State, n.Assigned)
	}
}

// A member whose epoch moved on while it still revokes a task may commit that task's offsets
// with the older epoch the task was assigned at (a Streams client commits before it gives the
// task up): accepted, not STALE_MEMBER_EPOCH.
func TestCommitOfTaskPendingRevocationWithItsEpoch(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}))))
	m := e.member("g", "m").clone()
	m.Epoch, m.PreviousEpoch, m.State = 11, 10, UnrevokedTasks
	m.Assigned, m.Pending = roles(10, tm{"s": ps(0)}, nil, nil), roles(10, tm{"s": ps(2)}, nil, nil)
	e.apply([]logRecord{CurrentMemberRecord("g", m)}, nil)
	if code, _ := e.s.ValidateCommit("g", "m", nil, 10, 9, false, []CommitPartition{{"foo", 2}}); code != 0 {
		t.Fatalf("commit of a task pending revocation at its epoch: %d", code)
	}
	if code, _ := e.s.ValidateCommit("g", "m", nil, 9, 9, false, []CommitPartition{{"foo", 2}}); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit older than the task's epoch: %d", code)
	}
}

// A rejoin (epoch 0) without a user endpoint removes the member's endpoint, and an endpoint
// with an empty host is no endpoint: neither is listed to the other instances.
func TestRejoinWithoutEndpointRemovesIt(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	j := join("g", "m", tp)
	j.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "h", Port: 1}
	mustOK(t, e.hb(j))
	r := e.hb(join("g", "m", tp))
	mustOK(t, r)
	if len(r.PartitionsByUserEndpoint) != 0 || e.s.Describe("g", false, e.cat, e.cfg, false).Members[0].UserEndpoint != nil {
		t.Fatalf("endpoint kept after a rejoin without one: %+v", r.PartitionsByUserEndpoint)
	}
	j = join("g", "m2", tp)
	j.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "", Port: 1}
	r = e.hb(j)
	mustOK(t, r)
	if len(r.PartitionsByUserEndpoint) != 0 {
		t.Fatalf("an empty host is listed as an endpoint: %+v", r.PartitionsByUserEndpoint)
	}
}

// A streams member may take over the instance id of a classic member (online migration) without
// that member releasing it first: classic members never send epoch -2.
func TestStreamsJoinReplacesClassicStaticMember(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	mustOK(t, e.hb(join("g", "m", tp)))
	epoch := e.member("g", "m").Epoch
	c := &Member{ID: "c", ProcessID: "pc", InstanceID: ptr("inst"), RebalanceTimeoutMs: 1000, Epoch: epoch, PreviousEpoch: epoch, State: Stable,
		Classic: &ClassicMember{SessionTimeoutMs: 45000, Protocols: []ClassicProtocol{{Name: "stream"}}}}
	e.apply([]logRecord{MemberMetadataRecord("g", c), ClassicMemberRecord("g", c), CurrentMemberRecord("g", c)}, nil)
	r := e.hb(staticJoin("g", "s", "inst", tp))
	mustOK(t, r)
	if g := e.s.Groups["g"]; g.Members["c"] != nil || g.Members["s"] == nil || g.Members["s"].Classic != nil {
		t.Fatal("the classic member was not replaced by the streams member")
	}
}

// A dynamic member's metadata change of any kind (here its user endpoint) bumps the group
// epoch, so the answer carries the new epoch; only static members are exempt for some fields.
func TestDynamicMemberMetadataChangeBumps(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	r := e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}})))
	mustOK(t, r)
	e.now = e.now.Add(2 * time.Second)
	h := beat("g", "m", r.MemberEpoch)
	h.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "h", Port: 1}
	r2 := e.hb(h)
	mustOK(t, r2)
	if r2.MemberEpoch != r.MemberEpoch+1 || e.s.Groups["g"].Epoch != r.MemberEpoch+1 {
		t.Fatalf("endpoint change: member epoch %d -> %d, group epoch %d", r.MemberEpoch, r2.MemberEpoch, e.s.Groups["g"].Epoch)
	}
}

// An error answer carries an empty status list, never null, as Kafka's does.
func TestErrorAnswerHasEmptyStatusList(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	r := e.hb(beat("g", "m", 3))
	if r.ErrorCode != kerr.GroupIDNotFound.Code || r.Status == nil {
		t.Fatalf("error %d, status %#v", r.ErrorCode, r.Status)
	}
}

// The description epochs a heartbeat reports (for the KIP-1331 "push your description" flag) are
// those after it: the join that creates the group reports the topology it stored.
func TestCreatingJoinReportsItsTopologyEpoch(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	out := e.s.Heartbeat(HeartbeatInput{Req: join("g", "m", topo(4, sub{id: "s", sources: []string{"foo"}})), Version: 1,
		Catalog: e.cat, Config: e.cfg, Now: e.now})
	mustOK(t, out.Response)
	if out.Description.Topology != 4 {
		t.Fatalf("description epochs %+v, want topology epoch 4", out.Description)
	}
}

// Commit checks around the member: a transactional commit naming an instance id is checked like
// a member's (no admin exemption), and a classic member (online migration) that commits with a
// wrong generation hears ILLEGAL_GENERATION at any OffsetCommit version, not STALE_MEMBER_EPOCH
// or UNSUPPORTED_VERSION (and ILLEGAL_GENERATION from OffsetFetch too).
func TestCommitChecksForInstanceAndClassicMembers(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}))))
	parts := []CommitPartition{{"foo", 0}}
	if code, _ := e.s.ValidateCommit("g", "", ptr("inst"), -1, 3, true, parts); code != kerr.UnknownMemberID.Code {
		t.Fatalf("transactional commit with an instance id and no member: %d", code)
	}
	epoch := e.member("g", "m").Epoch
	c := &Member{ID: "c", ProcessID: "pc", RebalanceTimeoutMs: 1000, Epoch: epoch, PreviousEpoch: epoch, State: Stable,
		Classic: &ClassicMember{SessionTimeoutMs: 45000, Protocols: []ClassicProtocol{{Name: "stream"}}}}
	e.apply([]logRecord{MemberMetadataRecord("g", c), ClassicMemberRecord("g", c), CurrentMemberRecord("g", c)}, nil)
	if code, _ := e.s.ValidateCommit("g", "c", nil, epoch+1, 8, false, parts); code != kerr.IllegalGeneration.Code {
		t.Fatalf("classic member's commit with a newer generation: %d", code)
	}
	if code, _ := e.s.ValidateCommit("g", "c", nil, epoch, 8, false, parts); code != 0 {
		t.Fatalf("classic member's commit at its generation: %d", code)
	}
	if code, _ := e.s.ValidateFetch("g", ptr("c"), epoch+1); code != kerr.IllegalGeneration.Code {
		t.Fatalf("classic member's fetch with a newer generation: %d", code)
	}
}

// The first member to ask for an application shutdown is the one every status names, also when
// another asks later while leaving.
func TestShutdownStatusNamesTheFirstRequester(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	r1 := e.hb(join("g", "m1", tp))
	mustOK(t, e.hb(join("g", "m2", tp)))
	h := beat("g", "m1", r1.MemberEpoch)
	h.ShutdownApplication = true
	mustOK(t, e.hb(h))
	l := beat("g", "m2", -1)
	l.ShutdownApplication = true
	mustOK(t, e.hb(l))
	r := e.hb(beat("g", "m1", e.member("g", "m1").Epoch))
	mustOK(t, r)
	want := "Streams group member m1 encountered a fatal error and requested a shutdown for the entire application."
	for _, st := range r.Status {
		if st.StatusCode == StatusShutdownApplication {
			if st.StatusDetail != want {
				t.Fatalf("shutdown status %q, want %q", st.StatusDetail, want)
			}
			return
		}
	}
	t.Fatalf("no shutdown status: %+v", r.Status)
}

// Partition counts of internal topics (spec §5.2), seen as the topics the server creates and
// the statuses a member gets.
func TestInternalTopicPartitionCounts(t *testing.T) {
	toCreate := func(e *env) map[string]int32 {
		out := map[string]int32{}
		for _, it := range e.toCreate {
			out[it.Name] = it.Partitions
		}
		return out
	}
	t.Run("a repartition topic gets its writers' largest source count", func(t *testing.T) {
		e := newEnv(t, topics("foo", 4, "bar", 2), roundRobin{"sticky"})
		mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "a", sources: []string{"foo", "bar"}, repSinks: []string{"r"}}, sub{id: "b", repSources: []string{"r"}}))))
		if got := toCreate(e); got["r"] != 4 {
			t.Fatalf("to create %v, want r with 4", got)
		}
	})
	t.Run("a repartition topic written from a repartition topic gets its count", func(t *testing.T) {
		e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
		tp := topo(0, sub{id: "a", repSources: []string{"r0"}, repSinks: []string{"r"}}, sub{id: "b", repSources: []string{"r"}})
		tp.Subtopologies[0].RepartitionSourceTopics[0].NumPartitions = 3
		mustOK(t, e.hb(join("g", "m", tp)))
		if got := toCreate(e); got["r"] != 3 {
			t.Fatalf("to create %v, want r with 3", got)
		}
	})
	t.Run("an explicit repartition count is kept", func(t *testing.T) {
		e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
		tp := topo(0, sub{id: "a", sources: []string{"foo"}, repSinks: []string{"r"}}, sub{id: "b", repSources: []string{"r"}})
		tp.Subtopologies[1].RepartitionSourceTopics[0].NumPartitions = 7
		mustOK(t, e.hb(join("g", "m", tp)))
		if got := toCreate(e); got["r"] != 7 {
			t.Fatalf("to create %v, want r with 7", got)
		}
	})
	copartitioned := func(fixed int32) *kmsg.StreamsGroupHeartbeatRequestTopology {
		tp := topo(0, sub{id: "a", sources: []string{"bar"}, repSinks: []string{"r"}}, sub{id: "b", sources: []string{"foo"}, repSources: []string{"r"}})
		tp.Subtopologies[1].RepartitionSourceTopics[0].NumPartitions = fixed
		cg := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup()
		cg.SourceTopics, cg.RepartitionSourceTopics = []int16{0}, []int16{0}
		tp.Subtopologies[1].CopartitionGroups = append(tp.Subtopologies[1].CopartitionGroups, cg)
		return tp
	}
	t.Run("a copartitioned repartition topic takes the source count", func(t *testing.T) {
		e := newEnv(t, topics("foo", 4, "bar", 2), roundRobin{"sticky"})
		mustOK(t, e.hb(join("g", "m", copartitioned(0))))
		if got := toCreate(e); got["r"] != 4 {
			t.Fatalf("to create %v, want r with 4 (copartitioned with foo)", got)
		}
	})
	t.Run("a copartitioned repartition topic with a larger fixed count", func(t *testing.T) {
		e := newEnv(t, topics("foo", 4, "bar", 2), roundRobin{"sticky"})
		r := e.hb(join("g", "m", copartitioned(8)))
		mustOK(t, r)
		if len(r.Status) != 1 || r.Status[0].StatusCode != StatusIncorrectlyPartitionedTopics ||
			r.Status[0].StatusDetail != "Number of partitions [8] of repartition topic [r] doesn't match number of partitions [4] of the source topic." {
			t.Fatalf("status %+v", r.Status)
		}
	})
	t.Run("a subtopology without sources", func(t *testing.T) {
		e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
		mustErr(t, e.hb(join("g", "m", topo(0, sub{id: "a", sources: []string{"foo"}}, sub{id: "b"}))), kerr.StreamsInvalidTopology.Code,
			"No source topics found for subtopology b")
	})
	t.Run("repartition topics only written by each other", func(t *testing.T) {
		e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
		tp := topo(0, sub{id: "a", repSources: []string{"r1"}, repSinks: []string{"r2"}}, sub{id: "b", repSources: []string{"r2"}, repSinks: []string{"r1"}})
		mustErr(t, e.hb(join("g", "m", tp)), kerr.StreamsInvalidTopology.Code,
			"Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved.")
	})
}

// A streams group left with only classic members is not turned back into a classic group while
// the description plugin may hold its topology description (stored epoch UNCERTAIN or real):
// the downgrade is declined with that reason (online-migration §5.2).
func TestDowngradeDeclinedWhileDescriptionMayBeHeld(t *testing.T) {
	for _, stored := range []int32{DescriptionUncertain, 0} {
		e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
		e.cfg.MigrationPolicy = MigrationBidirectional
		mustOK(t, e.hb(join("g", "s", topo(0, sub{id: "s", sources: []string{"foo"}}))))
		g := e.s.Groups["g"]
		e.apply([]logRecord{descriptionRecord(g, stored, DescriptionNone)}, nil)
		epoch := e.member("g", "s").Epoch
		c := &Member{ID: "c", ProcessID: "pc", RebalanceTimeoutMs: 1000, Epoch: epoch, PreviousEpoch: epoch, State: Stable,
			Classic: &ClassicMember{SessionTimeoutMs: 45000, Protocols: []ClassicProtocol{{Name: "stream"}}}}
		e.apply([]logRecord{MemberMetadataRecord("g", c), ClassicMemberRecord("g", c), CurrentMemberRecord("g", c)}, nil)
		out := e.s.Heartbeat(HeartbeatInput{Req: beat("g", "s", -1), Catalog: e.cat, Config: e.cfg, Now: e.now})
		mustOK(t, out.Response)
		if out.Downgrade == nil || out.Downgrade.Converted || out.Downgrade.Reason != "topology description held by the plugin" {
			t.Fatalf("stored %d: downgrade %+v", stored, out.Downgrade)
		}
	}
}

// The last streams member leaving a group whose classic members exactly fill group.max.size
// turns it back into a classic group; only more classic members than that decline it.
func TestDowngradeAtClassicMaxSize(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	e.cfg.MigrationPolicy, e.cfg.ClassicMaxSize = MigrationBidirectional, 1
	mustOK(t, e.hb(join("g", "s", topo(0, sub{id: "s", sources: []string{"foo"}}))))
	epoch := e.member("g", "s").Epoch
	c := &Member{ID: "c", ProcessID: "pc", RebalanceTimeoutMs: 1000, Epoch: epoch, PreviousEpoch: epoch, State: Stable,
		Classic: &ClassicMember{SessionTimeoutMs: 45000, Protocols: classicMeta(t, []string{"foo"}, 1, "", nil)}}
	e.apply([]logRecord{MemberMetadataRecord("g", c), ClassicMemberRecord("g", c), CurrentMemberRecord("g", c)}, nil)
	out := e.s.Heartbeat(HeartbeatInput{Req: beat("g", "s", -1), Catalog: e.cat, Config: e.cfg, Now: e.now})
	mustOK(t, out.Response)
	if out.Downgrade == nil || !out.Downgrade.Converted {
		t.Fatalf("downgrade %+v, want the group converted", out.Downgrade)
	}
}
