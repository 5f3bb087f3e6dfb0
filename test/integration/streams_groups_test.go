package integration

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Settings that keep streams timing short enough for tests (Kafka's bounds are widened to
// allow them, which is what an operator would do too).
var streamsTestSettings = []string{
	"group.streams.min.session.timeout.ms=1000", "group.streams.session.timeout.ms=3000",
	"group.streams.min.heartbeat.interval.ms=100", "group.streams.heartbeat.interval.ms=500",
	"group.streams.initial.rebalance.delay.ms=300",
}

func startStreamsDaemon(t *testing.T, extra ...string) *daemon {
	return startDaemon(t, append(append([]string{}, streamsTestSettings...), extra...)...)
}

func streamsHeartbeatRaw(t *testing.T, c *rawConn, corr int32, req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
	t.Helper()
	c.write(frame(req, 1, corr, nil, nil))
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	c.read(resp, 1, corr)
	return resp
}

// §1-§2 over the wire: validation errors, unknown groups and members, describe of absent
// groups, and the v0/v1 response difference.
func TestStreamsSpec12_WireValidationAndErrors(t *testing.T) {
	t.Parallel()
	// Kafka's answer to a join whose internal topics are missing (the default creates them first,
	// TestStreamsJoinIsAnsweredWithTasksWhenInternalTopicsAreMissing).
	d := startStreamsDaemon(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.join.creates.internal.topics=false")
	createStreamsTopics(t, d.Addr, 4, "wire-in-0")
	c := dialRaw(t, d.Addr)
	join := func(member string) *kmsg.StreamsGroupHeartbeatRequest {
		r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.Topology = "wire", member, 1000, streamsTopology("wire-in", 1)()
		r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		return r
	}
	r := streamsHeartbeatRaw(t, c, 1, join(""))
	if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || *r.ErrorMessage != "MemberId can't be empty." {
		t.Fatalf("blank member: %+v", r)
	}
	beat := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	beat.Group, beat.MemberID, beat.MemberEpoch, beat.RebalanceTimeoutMillis = "nope", "m", 3, -1
	if r := streamsHeartbeatRaw(t, c, 2, beat); r.ErrorCode != kerr.GroupIDNotFound.Code || *r.ErrorMessage != "Streams group nope not found." {
		t.Fatalf("unknown group: %+v", r)
	}
	// First join: the changelog is created in the catalog, so the join reports it missing and
	// the next heartbeat gets the tasks (spec §5.5).
	r = streamsHeartbeatRaw(t, c, 3, join("m1"))
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || len(r.Status) != 1 || r.Status[0].StatusCode != 3 || r.AcceptableRecoveryLag != 10000 || r.HeartbeatIntervalMillis != 500 {
		t.Fatalf("join: %+v", r)
	}
	time.Sleep(1100 * time.Millisecond) // assignment interval
	beat.Group, beat.MemberID, beat.MemberEpoch = "wire", "m1", r.MemberEpoch
	r = streamsHeartbeatRaw(t, c, 4, beat)
	if r.ErrorCode != 0 || r.MemberEpoch != 3 || len(r.Status) != 0 || len(r.ActiveTasks) != 1 || len(r.ActiveTasks[0].Partitions) != 4 {
		t.Fatalf("after internal topic creation: %+v", r)
	}
	// v0: the int64 recovery lag is not on the wire; the legacy int32 is 0.
	beat.MemberEpoch = r.MemberEpoch
	c.write(frame(beat, 0, 5, nil, nil))
	r0 := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	c.read(r0, 0, 5)
	if r0.ErrorCode != 0 || r0.AcceptableRecoveryLagLegacy != 0 || r0.AcceptableRecoveryLag != -1 || r0.TaskOffsetIntervalMillis != 60000 {
		t.Fatalf("v0: %+v", r0)
	}
	beat.MemberID = "m2"
	if r := streamsHeartbeatRaw(t, c, 6, beat); r.ErrorCode != kerr.UnknownMemberID.Code || *r.ErrorMessage != "Member m2 is not a member of group wire." {
		t.Fatalf("unknown member: %+v", r)
	}
	// §11.5 over the wire: OffsetCommit v9 and OffsetFetch v9 check the member epoch.
	commit := func(corr, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = "wire", "m1", epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "wire-in-0"
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = 0, 42
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{p}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		c.write(frame(req, 9, corr, nil, nil))
		resp := kmsg.NewPtrOffsetCommitResponse()
		c.read(resp, 9, corr)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(20, 3); code != 0 {
		t.Fatalf("member commit: %d", code)
	}
	if code := commit(21, 4); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit with a newer epoch: %d", code)
	}
	fetch := func(corr, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.MemberID, g.MemberEpoch = "wire", strp("m1"), epoch
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
		c.write(frame(req, 9, corr, nil, nil))
		resp := kmsg.NewPtrOffsetFetchResponse()
		c.read(resp, 9, corr)
		return resp.Groups[0].ErrorCode
	}
	if code := fetch(22, 3); code != 0 {
		t.Fatalf("member fetch: %d", code)
	}
	if code := fetch(23, 2); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("fetch with a stale epoch: %d", code)
	}
	if g := describeStreams(t, d.Addr, "nope"); g.ErrorCode != kerr.GroupIDNotFound.Code || *g.ErrorMessage != "Group nope not found." {
		t.Fatalf("describe absent: %+v", g)
	}
	g := describeStreams(t, d.Addr, "wire")
	if g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != 3 || g.AssignmentEpoch != 3 || len(g.Members) != 1 || g.AuthorizedOperations != 3400 ||
		g.AssignorName == nil || *g.AssignorName != "sticky" || g.Topology == nil || len(g.Topology.Subtopologies[0].StateChangelogTopics) != 1 ||
		g.Topology.Subtopologies[0].StateChangelogTopics[0].NumPartitions != 4 || g.Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("describe: %+v", g)
	}
}

// The done-when bar: 50 members over 2 subtopologies x 64 partitions with 1 standby converge
// to a full, valid, balanced assignment and stay stable, with no task ever active on two
// members at once.
func TestStreamsFiftyMembersConvergeAndStayStable(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.num.standby.replicas=1", "group.streams.session.timeout.ms=10000")
	createStreamsTopics(t, d.Addr, 64, "big-in-0", "big-in-1")
	app := newStreamsApp(t, d.Addr, "big", streamsTopology("big-in", 2))
	app.interval = 250 * time.Millisecond
	defer app.stopAll()
	var live []*simMember
	for i := 0; i < 50; i++ {
		m := app.newMember(fmt.Sprintf("member-%02d", i), fmt.Sprintf("process-%02d", i), nil)
		m.start()
		live = append(live, m)
	}
	app.waitConverged(live, 2, 64, 1, 60*time.Second)
	before := assignmentOf(live)
	time.Sleep(3 * time.Second)
	app.checkInvariant()
	if after := assignmentOf(live); !reflect.DeepEqual(before, after) {
		t.Fatal("assignment changed while nothing happened")
	}
	g := describeStreams(t, d.Addr, "big")
	if g.State != "Stable" || g.Epoch != g.AssignmentEpoch || len(g.Members) != 50 {
		t.Fatalf("describe: state %s epoch %d assignment %d members %d", g.State, g.Epoch, g.AssignmentEpoch, len(g.Members))
	}
	for _, m := range g.Members {
		if m.MemberEpoch != g.AssignmentEpoch || !reflect.DeepEqual(m.Assignment, m.TargetAssignment) {
			t.Fatalf("member %s at %d, assignment differs from target", m.MemberID, m.MemberEpoch)
		}
	}
	for _, m := range live {
		if len(m.errors) > 0 {
			t.Fatalf("member %s saw errors %v", m.id, m.errors)
		}
	}
}

// §4.6 session timeout: a member that crashes is removed and its tasks move to the others.
func TestStreamsMemberCrashSessionTimeout(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.num.standby.replicas=1")
	createStreamsTopics(t, d.Addr, 8, "crash-in-0", "crash-in-1")
	app := newStreamsApp(t, d.Addr, "crash", streamsTopology("crash-in", 2))
	defer app.stopAll()
	var live []*simMember
	for i := 0; i < 5; i++ {
		m := app.newMember(fmt.Sprintf("m%d", i), fmt.Sprintf("p%d", i), nil)
		m.start()
		live = append(live, m)
	}
	app.waitConverged(live, 2, 8, 1, 30*time.Second)
	epoch := describeStreams(t, d.Addr, "crash").Epoch
	live[2].crash()
	live = append(live[:2], live[3:]...)
	app.waitConverged(live, 2, 8, 1, 20*time.Second)
	g := describeStreams(t, d.Addr, "crash")
	if len(g.Members) != 4 || g.Epoch <= epoch {
		t.Fatalf("after the crash: %d members, epoch %d (was %d)", len(g.Members), g.Epoch, epoch)
	}
	app.checkInvariant()
}

// A rolling restart: each member in turn leaves (-1) and a new incarnation joins; the group
// converges after each step and no task is ever active twice.
func TestStreamsRollingRestart(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.num.standby.replicas=1")
	createStreamsTopics(t, d.Addr, 6, "roll-in-0", "roll-in-1")
	app := newStreamsApp(t, d.Addr, "roll", streamsTopology("roll-in", 2))
	defer app.stopAll()
	var live []*simMember
	for i := 0; i < 4; i++ {
		m := app.newMember(fmt.Sprintf("m%d-gen0", i), fmt.Sprintf("p%d", i), nil)
		m.start()
		live = append(live, m)
	}
	app.waitConverged(live, 2, 6, 1, 30*time.Second)
	for i := range live {
		if r := live[i].leave(); r == nil || r.ErrorCode != 0 || r.MemberEpoch != -1 {
			t.Fatalf("leave of %s: %+v", live[i].id, r)
		}
		m := app.newMember(fmt.Sprintf("m%d-gen1", i), fmt.Sprintf("p%d", i), nil)
		m.start()
		live[i] = m
		app.waitConverged(live, 2, 6, 1, 20*time.Second)
	}
	if g := describeStreams(t, d.Addr, "roll"); len(g.Members) != 4 {
		t.Fatalf("members after the rolling restart: %d", len(g.Members))
	}
	app.checkInvariant()
}

// §4.7 static membership: a static member that leaves temporarily (-2) and comes back with a
// new member id gets its old tasks back without a rebalance; the others are untouched.
func TestStreamsStaticMemberRestart(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t)
	createStreamsTopics(t, d.Addr, 6, "static-in-0")
	app := newStreamsApp(t, d.Addr, "static", streamsTopology("static-in", 1))
	defer app.stopAll()
	var live []*simMember
	for i := 0; i < 3; i++ {
		inst := fmt.Sprintf("instance-%d", i)
		m := app.newMember(fmt.Sprintf("m%d-a", i), fmt.Sprintf("p%d", i), &inst)
		m.start()
		live = append(live, m)
	}
	app.waitConverged(live, 1, 6, 0, 30*time.Second)
	before := describeStreams(t, d.Addr, "static")
	had, _, _, _ := live[1].snapshot()
	if r := live[1].leave(); r == nil || r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("temporary leave: %+v", r)
	}
	time.Sleep(500 * time.Millisecond)
	if g := describeStreams(t, d.Addr, "static"); g.Epoch != before.Epoch || len(g.Members) != 3 {
		t.Fatalf("a temporary leave rebalanced: epoch %d → %d, members %d", before.Epoch, g.Epoch, len(g.Members))
	}
	inst := "instance-1"
	m := app.newMember("m1-b", "p1", &inst)
	m.start()
	live[1] = m
	app.waitConverged(live, 1, 6, 0, 10*time.Second)
	got, _, _, _ := m.snapshot()
	if !reflect.DeepEqual(had, got) {
		t.Fatalf("returning instance got %v, had %v", got, had)
	}
	if g := describeStreams(t, d.Addr, "static"); g.Epoch != before.Epoch {
		t.Fatalf("rejoin bumped the group epoch %d → %d", before.Epoch, g.Epoch)
	}
	app.checkInvariant()
}

// kill -9 of the daemon in the middle of a rebalance: after the restart the members carry on
// from the persisted epochs (no member is fenced) and the group converges.
func TestStreamsKillDaemonMidRebalance(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.num.standby.replicas=1", "group.streams.session.timeout.ms=10000")
	t.Cleanup(func() {
		if t.Failed() { // the daemon's warnings across the kill say what the restart made of the group
			for _, l := range d.allLogs() {
				if l["level"] != "info" && l["level"] != "debug" {
					t.Logf("coordinatord: %v", l)
				}
			}
		}
	})
	createStreamsTopics(t, d.Addr, 16, "kill-in-0", "kill-in-1")
	app := newStreamsApp(t, d.Addr, "kill", streamsTopology("kill-in", 2))
	defer app.stopAll()
	var live []*simMember
	for i := 0; i < 8; i++ {
		m := app.newMember(fmt.Sprintf("m%d", i), fmt.Sprintf("p%d", i), nil)
		m.start()
		live = append(live, m)
	}
	app.waitConverged(live, 2, 16, 1, 30*time.Second)
	for i := 8; i < 12; i++ {
		m := app.newMember(fmt.Sprintf("m%d", i), fmt.Sprintf("p%d", i), nil)
		m.start()
		live = append(live, m)
	}
	// Wait until the rebalance is under way, then kill.
	deadline := time.Now().Add(10 * time.Second)
	for {
		g := describeStreams(t, d.Addr, "kill")
		if len(g.Members) == 12 && g.State != "Stable" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rebalance in progress seen (state %s, %d members)", g.State, len(g.Members))
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill()
	time.Sleep(300 * time.Millisecond)
	d.start(append(append([]string{}, streamsTestSettings...), "group.streams.num.standby.replicas=1", "group.streams.session.timeout.ms=10000")...)
	app.setAddr(d.Addr)
	app.waitConverged(live, 2, 16, 1, 30*time.Second)
	for _, m := range live {
		m.mu.Lock()
		errs := m.errors
		m.mu.Unlock()
		if errs[kerr.FencedMemberEpoch.Code] > 0 || errs[kerr.UnknownMemberID.Code] > 0 {
			t.Fatalf("member %s was fenced across the restart: %v", m.id, errs)
		}
	}
	if g := describeStreams(t, d.Addr, "kill"); len(g.Members) != 12 {
		t.Fatalf("members after restart: %d", len(g.Members))
	}
	app.checkInvariant()
}

// §11.1-§11.3: ListGroups, DescribeGroups and DeleteGroups see a streams group.
func TestStreamsSpec11_OtherGroupAPIs(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t)
	createStreamsTopics(t, d.Addr, 2, "other-in-0")
	app := newStreamsApp(t, d.Addr, "other", streamsTopology("other-in", 1))
	defer app.stopAll()
	m := app.newMember("m0", "p0", nil)
	m.start()
	app.waitConverged([]*simMember{m}, 1, 2, 0, 20*time.Second)
	c := dialRaw(t, d.Addr)

	list := func(corr int32, states, types []string) []kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter, req.TypesFilter = states, types
		c.write(frame(req, 5, corr, nil, nil))
		resp := kmsg.NewPtrListGroupsResponse()
		c.read(resp, 5, corr)
		return resp.Groups
	}
	gs := list(1, nil, []string{"STREAMS"})
	if len(gs) != 1 || gs[0].Group != "other" || gs[0].ProtocolType != "streams" || gs[0].GroupState != "Stable" || gs[0].GroupType != "streams" {
		t.Fatalf("list: %+v", gs)
	}
	if gs := list(2, []string{"stable"}, nil); len(gs) != 1 {
		t.Fatalf("state filter stable: %+v", gs)
	}
	if gs := list(3, []string{"empty"}, nil); len(gs) != 0 {
		t.Fatalf("state filter empty: %+v", gs)
	}
	if gs := list(4, nil, []string{"classic"}); len(gs) != 0 {
		t.Fatalf("type filter classic: %+v", gs)
	}

	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{"other"}
	c.write(frame(dreq, 6, 5, nil, nil))
	dresp := kmsg.NewPtrDescribeGroupsResponse()
	c.read(dresp, 6, 5)
	if g := dresp.Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.State != "Dead" || g.ErrorMessage == nil || *g.ErrorMessage != "Group other is not a classic group." {
		t.Fatalf("describe groups: %+v", g)
	}

	del := func(corr int32) kmsg.DeleteGroupsResponseGroup {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"other"}
		c.write(frame(req, 2, corr, nil, nil))
		resp := kmsg.NewPtrDeleteGroupsResponse()
		c.read(resp, 2, corr)
		return resp.Groups[0]
	}
	if g := del(6); g.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete non-empty: %+v", g)
	}
	if r := m.leave(); r == nil || r.ErrorCode != 0 {
		t.Fatalf("leave: %+v", r)
	}
	if gs := list(7, []string{"Empty"}, []string{"streams"}); len(gs) != 1 {
		t.Fatalf("empty group not listed: %+v", gs)
	}
	if g := del(8); g.ErrorCode != 0 {
		t.Fatalf("delete empty: %+v", g)
	}
	if g := describeStreams(t, d.Addr, "other"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("group still described after delete: %+v", g)
	}
	// Deleted means gone for good: a restart replays the tombstones.
	d.stop()
	d.start(streamsTestSettings...)
	if g := describeStreams(t, d.Addr, "other"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("group back after restart: %+v", g)
	}
}

// §5.5: an internal topic the catalog refuses to create is reported in the status detail.
func TestStreamsSpec5_5_InternalTopicCreationFailure(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.initial.rebalance.delay.ms=0")
	createStreamsTopics(t, d.Addr, 2, "fail-in", "fail_x-changelog")
	c := dialRaw(t, d.Addr)
	tp := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	st.SubtopologyID, st.SourceTopics = "0", []string{"fail-in"}
	cl := kmsg.NewTopicInfo()
	cl.Topic = "fail.x-changelog" // collides with fail_x-changelog
	st.StateChangelogTopics = []kmsg.TopicInfo{cl}
	tp.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.Topology = "fail", "m", 1000, &tp
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	resp := streamsHeartbeatRaw(t, c, 1, r)
	want := "Internal topics are missing: fail.x-changelog; Creation failed: fail.x-changelog (INVALID_TOPIC_EXCEPTION)."
	if resp.ErrorCode != 0 || len(resp.Status) != 1 || resp.Status[0].StatusCode != 3 || resp.Status[0].StatusDetail != want {
		t.Fatalf("status %+v", resp.Status)
	}
	if g := describeStreams(t, d.Addr, "fail"); g.State != "NotReady" {
		t.Fatalf("state %s", g.State)
	}
}

// Issue 10 defect 1 (spec §6.7) on the real binary: with the highavailability assignor, three
// processes run 8 stateful tasks with one standby; a fourth process joins and reports caught-up
// offsets for everything it holds. It first gets warm-ups, then those tasks as actives, and the
// group is balanced (2 actives each, one standby per task on another process) within a bounded
// number of heartbeat rounds, with no task ever active on two members. Rounds are counted, not
// timed: every member heartbeats once per round and the assignment interval is 0.
func TestStreamsHighAvailabilityMovesActivesToNewProcess(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.assignors=highavailability", "group.streams.num.standby.replicas=1",
		"group.streams.assignment.interval.ms=0", "group.streams.session.timeout.ms=60000")
	createStreamsTopics(t, d.Addr, 8, "ha-in-0")
	app := newStreamsApp(t, d.Addr, "ha", streamsTopology("ha-in", 1))
	var live []*simMember
	round := func() {
		for _, m := range live {
			m.heartbeat()
		}
		app.checkInvariant()
	}
	untilConverged := func(limit int) int {
		t.Helper()
		why := ""
		for r := 1; r <= limit; r++ {
			round()
			var ok bool
			if ok, why = app.converged(live, 1, 8, 1); ok {
				return r
			}
		}
		for _, m := range live {
			a, s, e, _ := m.snapshot()
			t.Logf("%s: epoch %d errors %v active %v standby %v warm-up %v", m.id, e, m.errors, a, s, m.owned[2])
		}
		t.Fatalf("not converged after %d rounds: %s", limit, why)
		return 0
	}
	for _, id := range []string{"a", "b", "c"} { // they report their restored state too
		m := app.newMember(id, "process-"+id, nil)
		m.caughtUp = true
		live = append(live, m)
	}
	// The three join within the initial rebalance delay, so the first target spreads the tasks
	// over them directly (nobody holds a task yet); wait for that timer before counting rounds.
	round()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if g := describeStreams(t, d.Addr, "ha"); g.AssignmentEpoch == g.Epoch && len(g.Members) == 3 && len(g.Members[0].TargetAssignment.ActiveTasks) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the initial rebalance delay never ended")
		}
	}
	untilConverged(10)
	nd := app.newMember("d", "process-d", nil)
	nd.caughtUp = true
	live = append(live, nd)
	rounds := untilConverged(10)
	if nd.firstWarmup == 0 || nd.firstActive <= nd.firstWarmup {
		t.Fatalf("d first held a warm-up on beat %d and an active on beat %d; want warm-ups first", nd.firstWarmup, nd.firstActive)
	}
	for _, m := range live {
		if a, _, _, _ := m.snapshot(); len(a) != 2 {
			t.Fatalf("%s holds %d active tasks, want 2", m.id, len(a))
		}
		if len(m.errors) != 0 {
			t.Fatalf("%s got errors %v", m.id, m.errors)
		}
	}
	if g := describeStreams(t, d.Addr, "ha"); g.State != "Stable" || *g.AssignorName != "highavailability" {
		t.Fatalf("describe: state %s assignor %s", g.State, *g.AssignorName)
	}
	t.Logf("balanced %d rounds after d joined", rounds)
}

// Issue 10, defect 7 for streams groups: the session timers a restarted coordinator re-arms
// follow the configured group.streams.session.timeout.ms (3 s here), not Kafka's default
// (45 s): a member that died with the old process is removed within seconds of the restart.
func TestStreamsRestartRearmsConfiguredSessionTimeout(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t)
	createStreamsTopics(t, d.Addr, 2, "rearm-in-0")
	app := newStreamsApp(t, d.Addr, "rearm", streamsTopology("rearm-in", 1))
	defer app.stopAll()
	m := app.newMember("m0", "p0", nil)
	m.start()
	app.waitConverged([]*simMember{m}, 1, 2, 0, 30*time.Second)
	m.crash()
	d.kill()
	d.start(streamsTestSettings...)
	deadline := time.Now().Add(20 * time.Second) // well under the 45 s default
	for len(describeStreams(t, d.Addr, "rearm").Members) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the member of a restarted group outlived the configured session timeout")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
