package integration

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The seed's A/B/C situation (spec online-migration §9.2) over the wire with the highavailability
// assignor instead of scripted targets: classic members A and B own tasks 0-5, C joins with the
// streams protocol, and all three then follow the protocol (classic members heartbeat, rejoin on
// REBALANCE_IN_PROGRESS reporting what they own, and sync; C heartbeats reporting what it owns
// and that its warm-ups have caught up) until nothing changes. The exact targets are the
// assignor's business; what is checked at every response is safety — no task active on two
// members — and validity — no member holds a task both active and standby — and at the end that
// every task is active somewhere, that at least one task reached C through a warm-up (held by C
// as a warm-up while a classic member ran it, then active on C), that the group is Stable, and
// that C's leave returns the group to a classic group that A and B rebalance.
func TestMigrationSeedWalkThroughHighAvailability(t *testing.T) {
	t.Parallel()
	d := startHooksDaemon(t, append(append([]string{}, streamsTestSettings...), "group.streams.session.timeout.ms=45000",
		"group.streams.assignors=highavailability", "group.streams.assignment.interval.ms=0", "group.streams.initial.rebalance.delay.ms=0",
		"group.streams.num.standby.replicas=1", "group.initial.rebalance.delay.ms=1000")...)
	createStreamsTopics(t, d.Addr, 6, "input", "app-store-changelog")
	topics := []string{"input"}

	joins := make(chan *kmsg.JoinGroupResponse, 2)
	for _, p := range []byte{0, 1} {
		go func() {
			req := classicStreamsJoin(t, "app", "", topics, p)
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 300000
			joins <- join(t, d, 3, req)
		}()
	}
	j1, j2 := <-joins, <-joins
	wantCode(t, "classic join", j1.ErrorCode, 0)
	wantCode(t, "classic join", j2.ErrorCode, 0)
	leader, follower := j1, j2
	if j2.LeaderID == j2.MemberID {
		leader, follower = j2, j1
	}
	idA, idB := leader.MemberID, follower.MemberID
	proc := map[string]byte{idA: 0, idB: 1} // the process ids only need to differ
	gen := map[string]int32{idA: leader.Generation, idB: leader.Generation}
	assignments := map[string]string{idA: seedAssignment(t, []int32{0, 2, 4}, []int32{1, 3, 5}), idB: seedAssignment(t, []int32{1, 3, 5}, []int32{0, 2, 4})}
	syncs := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { syncs <- syncG(t, d, 3, "app", idB, nil, gen[idB], nil) }()
	wantCode(t, "leader sync", syncG(t, d, 3, "app", idA, nil, gen[idA], assignments).ErrorCode, 0)
	wantCode(t, "follower sync", (<-syncs).ErrorCode, 0)

	active := map[string][]int32{idA: {0, 2, 4}, idB: {1, 3, 5}, "C": nil}
	standby := map[string][]int32{idA: {1, 3, 5}, idB: {0, 2, 4}}
	warmup := map[string][]int32{}
	check := func(step string) {
		t.Helper()
		owner := map[int32]string{}
		for m, tasks := range active {
			for _, task := range tasks {
				if o, ok := owner[task]; ok {
					t.Fatalf("%s: task %d active on %s and %s (active %v)", step, task, o, m, active)
				}
				owner[task] = m
			}
			for _, s := range append(slices.Clone(standby[m]), warmup[m]...) {
				if slices.Contains(tasks, s) {
					t.Fatalf("%s: member %s holds task %d active and standby/warm-up (active %v standby %v warmup %v)", step, m, s, active, standby, warmup)
				}
			}
		}
	}
	ids := func(ps []int32) []kmsg.TaskIDs {
		out := []kmsg.TaskIDs{}
		if len(ps) > 0 {
			out = append(out, kmsg.TaskIDs{SubtopologyID: "0", Partitions: ps})
		}
		return out
	}
	caughtUp := func(ps ...[]int32) []kmsg.TaskOffset {
		var out []kmsg.TaskOffset
		for _, l := range ps {
			for _, p := range l {
				out = append(out, kmsg.TaskOffset{SubtopologyID: "0", Partition: p, Offset: 1000})
			}
		}
		return out
	}

	// classicStep is one Heartbeat of a classic member and, on REBALANCE_IN_PROGRESS, its rejoin
	// (owning what it holds) and SyncGroup; it reports whether the member's tasks changed.
	classicStep := func(step, id string) bool {
		t.Helper()
		code := heartbeatG(t, d, 4, "app", id, nil, gen[id])
		if code == 0 {
			return false
		}
		wantCode(t, step+" heartbeat", code, kerr.RebalanceInProgress.Code)
		req := classicStreamsJoin(t, "app", id, topics, proc[id], active[id]...)
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 300000
		r := join(t, d, 9, req)
		wantCode(t, step+" join", r.ErrorCode, 0)
		if r.Generation < gen[id] {
			t.Fatalf("%s: generation went back from %d to %d", step, gen[id], r.Generation)
		}
		gen[id] = r.Generation
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.Group, sreq.MemberID, sreq.Generation = "app", id, r.Generation
		sreq.ProtocolType, sreq.Protocol = strp("consumer"), strp("stream")
		ps, st := decodeSeedSync(t, step, rawCall(t, d, sreq, 5, kmsg.NewPtrSyncGroupResponse()))
		slices.Sort(ps)
		changed := !slices.Equal(ps, active[id]) || !slices.Equal(st, standby[id])
		active[id], standby[id] = ps, st
		check(step)
		return changed
	}

	c := dialRaw(t, d.Addr)
	corr := int32(0)
	up := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	up.Group, up.MemberID, up.RebalanceTimeoutMillis, up.ProcessID = "app", "C", 300000, strp("pC")
	up.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "hostC", Port: 8080}
	up.ActiveTasks, up.StandbyTasks, up.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	up.Topology = seedTopology()
	epoch := int32(0)
	// The highavailability assignor moves a stateful task to C only through a warm-up: C first
	// holds it as a warm-up while a classic member keeps it active, and gets it active once it
	// reports the warm-up caught up.
	warmedWhileActiveOn := map[int32]string{}
	var handedOver []int32
	// streamsStep is one heartbeat of C, reporting what it holds; the answer's tasks, when
	// present, are what it holds from then on.
	streamsStep := func(step string, req *kmsg.StreamsGroupHeartbeatRequest) bool {
		t.Helper()
		corr++
		r := streamsHeartbeatRaw(t, c, corr, req)
		if r.ErrorCode != 0 {
			t.Fatalf("%s: %+v", step, r)
		}
		if r.MemberEpoch < epoch {
			t.Fatalf("%s: epoch went back from %d to %d", step, epoch, r.MemberEpoch)
		}
		epoch = r.MemberEpoch
		if r.ActiveTasks == nil {
			return false
		}
		a, s, w := seedTasks(r.ActiveTasks), seedTasks(r.StandbyTasks), seedTasks(r.WarmupTasks)
		slices.Sort(a)
		slices.Sort(s)
		slices.Sort(w)
		changed := !slices.Equal(a, active["C"]) || !slices.Equal(s, standby["C"]) || !slices.Equal(w, warmup["C"])
		active["C"], standby["C"], warmup["C"] = a, s, w
		check(step)
		for _, task := range w {
			if _, seen := warmedWhileActiveOn[task]; !seen {
				for m, tasks := range active {
					if m != "C" && slices.Contains(tasks, task) {
						warmedWhileActiveOn[task] = m
					}
				}
			}
		}
		for _, task := range a {
			if from, ok := warmedWhileActiveOn[task]; ok && !slices.Contains(handedOver, task) {
				handedOver = append(handedOver, task)
				t.Logf("%s: task %d, warmed up on C while active on %s, is now active on C", step, task, from)
			}
		}
		return changed
	}
	streamsStep("C joins", up)
	d.waitLogged("converted classic group to streams group", func(l map[string]any) bool { return l["group"] == "app" })
	if epoch != leader.Generation+1 {
		t.Fatalf("C's first epoch %d, want the classic generation %d + 1", epoch, leader.Generation)
	}

	quiet := 0
	for round := 1; quiet < 3; round++ {
		if round > 60 {
			t.Fatalf("no stable assignment after 60 rounds: active %v standby %v warmup %v", active, standby, warmup)
		}
		changed := classicStep(fmt.Sprintf("round %d A", round), idA)
		changed = classicStep(fmt.Sprintf("round %d B", round), idB) || changed
		hb := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "app", "C", epoch, -1
		hb.ActiveTasks, hb.StandbyTasks, hb.WarmupTasks = ids(active["C"]), ids(standby["C"]), ids(warmup["C"])
		hb.TaskOffsets = caughtUp(standby["C"], warmup["C"])
		hb.TaskEndOffsets = caughtUp(standby["C"], warmup["C"])
		changed = streamsStep(fmt.Sprintf("round %d C", round), hb) || changed
		if changed {
			quiet = 0
		} else {
			quiet++
		}
	}
	var all []int32
	for _, tasks := range active {
		all = append(all, tasks...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("stable, but not every task is active exactly once: %v", active)
	}
	if len(handedOver) == 0 {
		t.Fatalf("no task reached C through a warm-up (warm-ups seen while a classic member ran the task: %v); active %v", warmedWhileActiveOn, active)
	}
	if dg := describeStreams(t, d.Addr, "app"); dg.State != "Stable" || len(dg.Members) != 3 {
		t.Fatalf("after the walk-through: %+v", dg)
	}
	t.Logf("stable at epoch %d: active %v standby %v warmup %v", epoch, active, standby, warmup)

	// C leaves: a classic group again, and A and B rebalance it at the next generation.
	leave := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	leave.Group, leave.MemberID, leave.MemberEpoch = "app", "C", -1
	corr++
	if r := streamsHeartbeatRaw(t, c, corr, leave); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("C's leave: %+v", r)
	}
	d.waitLogged("converted streams group to classic group, rebalance prepared", func(l map[string]any) bool { return l["group"] == "app" })
	wantCode(t, "A after the downgrade", heartbeatG(t, d, 4, "app", idA, nil, gen[idA]), kerr.RebalanceInProgress.Code)
	rejoins := make(chan *kmsg.JoinGroupResponse, 2)
	for _, id := range []string{idA, idB} {
		go func() {
			req := classicStreamsJoin(t, "app", id, topics, proc[id], active[id]...)
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 300000
			rejoins <- join(t, d, 9, req)
		}()
	}
	for range 2 {
		if r := <-rejoins; r.ErrorCode != 0 || r.Generation != epoch+1 {
			t.Fatalf("rejoin after the downgrade: %+v (streams epoch was %d)", r, epoch)
		}
	}
}
