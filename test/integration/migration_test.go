package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration between the classic protocol and the streams protocol (issue 14, spec
// online-migration). Classic Kafka Streams members are simulated on raw connections with the
// bytes a StreamsPartitionAssignor sends (classicproto).

// classicStreamsJoin is a JoinGroup of a classic Streams thread: protocol type consumer, one
// protocol named "stream" carrying a v3 consumer subscription around SubscriptionInfo v11.
func classicStreamsJoin(t *testing.T, group, member string, topics []string, process byte, owned ...int32) *kmsg.JoinGroupRequest {
	t.Helper()
	sub := classicproto.Subscription{Version: 11, LatestSupportedVersion: 11, ProcessID: [16]byte{15: process},
		UserEndPoint: "host" + string('A'+rune(process)) + ":8080", UniqueField: 1}
	user, err := sub.Encode()
	if err != nil {
		t.Fatal(err)
	}
	meta := kmsg.ConsumerMemberMetadata{Version: 3, Topics: topics, UserData: user, Generation: -1}
	if len(owned) > 0 {
		meta.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: topics[0], Partitions: owned}}
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID = group, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 5000
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "stream", meta.AppendTo(nil)
	req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return req
}

// stableClassicStreams forms a Stable one-member classic group of a classic Streams thread.
func stableClassicStreams(t *testing.T, d *daemon, group string, topics []string) (string, int32) {
	t.Helper()
	r := join(t, d, 3, classicStreamsJoin(t, group, "", topics, 0))
	wantCode(t, "classic join", r.ErrorCode, 0)
	if r.Protocol == nil || *r.Protocol != "stream" {
		t.Fatalf("classic join selected %v", r.Protocol)
	}
	s := syncG(t, d, 3, group, r.MemberID, nil, r.Generation, map[string]string{r.MemberID: "assignment"})
	wantCode(t, "classic sync", s.ErrorCode, 0)
	return r.MemberID, r.Generation
}

// policyIsKafka44 checks Apache Kafka 4.4's answers, which group.streams.migration.policy=disabled
// must give (spec §8, §10 scenarios 1 and 37): a streams join to a running classic group gets
// GROUP_ID_NOT_FOUND "... is not a streams group" and leaves the classic group working; a classic
// JoinGroup to a running streams group gets INCONSISTENT_GROUP_PROTOCOL; empty groups still
// convert both ways (offline migration).
func policyIsKafka44(t *testing.T, d *daemon, classicGroup, streamsGroup string) {
	t.Helper()
	createStreamsTopics(t, d.Addr, 4, classicGroup+"-in-0", streamsGroup+"-in-0")
	member, gen := stableClassicStreams(t, d, classicGroup, []string{classicGroup + "-in-0"})

	c := dialRaw(t, d.Addr)
	up := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	up.Group, up.MemberID, up.RebalanceTimeoutMillis, up.Topology = classicGroup, "c", 1000, streamsTopology(classicGroup+"-in", 1)()
	up.ActiveTasks, up.StandbyTasks, up.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	r := streamsHeartbeatRaw(t, c, 1, up)
	if r.ErrorCode != kerr.GroupIDNotFound.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Group "+classicGroup+" is not a streams group." {
		t.Fatalf("streams join to a running classic group: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	wantCode(t, "classic heartbeat after the refused upgrade", heartbeatG(t, d, 3, classicGroup, member, nil, gen), 0)

	s, _ := joinTopo(t, d.Addr, streamsGroup, "m1")
	jr := join(t, d, 3, classicStreamsJoin(t, streamsGroup, "", []string{streamsGroup + "-in-0"}, 1))
	wantCode(t, "classic join to a running streams group", jr.ErrorCode, kerr.InconsistentGroupProtocol.Code)

	// Offline migration is not affected by the policy.
	if lr := s.leave(); lr.ErrorCode != 0 {
		t.Fatalf("streams leave: %+v", lr)
	}
	jr = join(t, d, 3, classicStreamsJoin(t, streamsGroup, "", []string{streamsGroup + "-in-0"}, 1))
	wantCode(t, "classic join to an empty streams group", jr.ErrorCode, 0)

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = classicGroup, member
	wantCode(t, "classic leave", rawCall(t, d, leave, 0, kmsg.NewPtrLeaveGroupResponse()).ErrorCode, 0)
	up.MemberID = "c2"
	if r := streamsHeartbeatRaw(t, c, 2, up); r.ErrorCode != 0 {
		t.Fatalf("streams join to an empty classic group: %d %v", r.ErrorCode, r.ErrorMessage)
	}
}

func TestMigrationPolicyDisabledIsKafka44(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.migration.policy=DISABLED", "group.streams.initial.rebalance.delay.ms=0")
	policyIsKafka44(t, d, "app", "sg")
}

// The group config streams.migration.policy overrides the broker key for one group; an unknown
// value is refused with INVALID_CONFIG.
func TestMigrationPolicyGroupOverride(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.initial.rebalance.delay.ms=0")
	cl := d.client()
	if code, msg := alterGroupConfigs(t, cl, "app", false, setGroupConfig("streams.migration.policy", "sideways")); code != kerr.InvalidConfig.Code {
		t.Fatalf("unknown policy: %d %s", code, msg)
	}
	for _, g := range []string{"app", "sg"} {
		if code, msg := alterGroupConfigs(t, cl, g, false, setGroupConfig("streams.migration.policy", "Disabled")); code != 0 {
			t.Fatalf("set policy on %s: %d %s", g, code, msg)
		}
	}
	policyIsKafka44(t, d, "app", "sg")
}

// seedTopology is the seed's application: one stateful subtopology "0" reading "input", its
// store's changelog "app-store-changelog".
func seedTopology() *kmsg.StreamsGroupHeartbeatRequestTopology {
	topo := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	st.SubtopologyID, st.SourceTopics = "0", []string{"input"}
	cl := kmsg.NewTopicInfo()
	cl.Topic = "app-store-changelog"
	st.StateChangelogTopics = []kmsg.TopicInfo{cl}
	topo.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}
	return &topo
}

// seedAssignment is a classic Streams assignment of input partitions with one task per
// partition of subtopology 0 (what a StreamsPartitionAssignor leader sends for the seed).
func seedAssignment(t *testing.T, active, standby []int32) string {
	t.Helper()
	info := classicproto.Assignment{Version: 11, CommonlySupportedVersion: 11, NextRebalanceMs: classicproto.NoFollowUp}
	var parts []classicproto.TopicPartition
	for _, p := range active {
		parts = append(parts, classicproto.TopicPartition{Topic: "input", Partition: p})
		info.Active = append(info.Active, classicproto.TaskID{Partition: p})
	}
	for _, p := range standby {
		info.Standby = append(info.Standby, classicproto.StandbyTask{Task: classicproto.TaskID{Partition: p},
			Partitions: []classicproto.TopicPartition{{Topic: "input", Partition: p}}})
	}
	b, err := classicproto.EncodeMemberAssignment(3, parts, info)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decodeSeedSync decodes a classic member's SyncGroup answer into input partitions, the ACTIVE
// task partitions (checked aligned) and the STANDBY task partitions.
func decodeSeedSync(t *testing.T, step string, r *kmsg.SyncGroupResponse) (ps, standby []int32) {
	t.Helper()
	wantCode(t, "step "+step+" sync", r.ErrorCode, 0)
	parts, info, _, err := classicproto.DecodeMemberAssignment(r.MemberAssignment)
	if err != nil {
		t.Fatalf("step %s: %v", step, err)
	}
	if info.Version != 11 || info.ErrCode != 0 || len(parts) != len(info.Active) {
		t.Fatalf("step %s: assignment info %+v", step, info)
	}
	for i, p := range parts {
		if p.Topic != "input" || info.Active[i] != (classicproto.TaskID{Partition: p.Partition}) {
			t.Fatalf("step %s: partition %v not aligned with task %v", step, p, info.Active[i])
		}
		ps = append(ps, p.Partition)
	}
	for _, s := range info.Standby {
		standby = append(standby, s.Task.Partition)
	}
	slices.Sort(standby)
	return ps, standby
}

// The seed's A/B/C walk-through (spec online-migration §9.2 steps 1-22) over the wire against
// the real binary, with the scripted test assignor of the testhooks build: classic members A and
// B form a classic group by JoinGroup/SyncGroup, C joins with the streams protocol, and every
// request after that is checked for its generation/epoch and assignment. The classic generation
// is whatever the group reached (g); the seed's 23/24/25 are g/g+1/g+2.
func TestMigrationSeedWalkThroughOverTheWire(t *testing.T) {
	t.Parallel()
	d := startHooksDaemon(t, append(append([]string{}, streamsTestSettings...), "group.streams.session.timeout.ms=45000",
		"group.streams.assignors=scripted", "group.streams.assignment.interval.ms=0", "group.streams.initial.rebalance.delay.ms=0",
		"group.initial.rebalance.delay.ms=1000")...)
	createStreamsTopics(t, d.Addr, 6, "input", "app-store-changelog")
	topics := []string{"input"}

	// The classic group: A and B join in one rebalance, the leader hands out the seed's
	// generation-23 assignments.
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
	g := leader.Generation
	// A is the leader's member; which process it runs decides nothing, so name them by role.
	idA, idB := leader.MemberID, follower.MemberID
	procOf := map[string]byte{}
	for _, m := range leader.Members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
			t.Fatal(err)
		}
		sub, err := classicproto.DecodeSubscription(meta.UserData)
		if err != nil {
			t.Fatal(err)
		}
		procOf[m.MemberID] = sub.ProcessID[15]
	}
	assignments := map[string]string{idA: seedAssignment(t, []int32{0, 2, 4}, []int32{1, 3, 5}), idB: seedAssignment(t, []int32{1, 3, 5}, []int32{0, 2, 4})}
	syncs := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { syncs <- syncG(t, d, 3, "app", idB, nil, g, nil) }()
	wantCode(t, "leader sync", syncG(t, d, 3, "app", idA, nil, g, assignments).ErrorCode, 0)
	wantCode(t, "follower sync", (<-syncs).ErrorCode, 0)

	target := func(a, b, c [3][]int32) map[string]map[string]map[string][]int32 {
		conv := func(r [3][]int32) map[string]map[string][]int32 {
			out := map[string]map[string][]int32{}
			for i, k := range []string{"Active", "Standby", "Warmup"} {
				if len(r[i]) > 0 {
					out[k] = map[string][]int32{"0": r[i]}
				}
			}
			return out
		}
		return map[string]map[string]map[string][]int32{idA: conv(a), idB: conv(b), "C": conv(c)}
	}
	body, _ := json.Marshal([]any{
		target([3][]int32{{0, 2, 3}, {1, 5}}, [3][]int32{{1, 4, 5}, {2, 3}}, [3][]int32{nil, {0, 4}, {2, 5}}),
		target([3][]int32{{0, 3}, {1, 5}}, [3][]int32{{1, 4, 5}, {2, 3}}, [3][]int32{{2}, {0, 4}, {5}}),
	})
	resp, err := http.Post("http://"+d.Admin+"/test/assignor", "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("post script: %v %v", err, resp)
	}
	resp.Body.Close()

	cjoin := func(step, id string, owned ...int32) int32 {
		t.Helper()
		req := classicStreamsJoin(t, "app", id, topics, procOf[id], owned...)
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 300000
		r := join(t, d, 9, req)
		wantCode(t, "step "+step+" join", r.ErrorCode, 0)
		if r.Protocol == nil || *r.Protocol != "stream" || r.LeaderID != "" || len(r.Members) != 0 {
			t.Fatalf("step %s: join answer %+v", step, r)
		}
		return r.Generation
	}
	csync := func(step, id string, gen int32, wantParts, wantStandby []int32) {
		t.Helper()
		req := kmsg.NewPtrSyncGroupRequest()
		req.Group, req.MemberID, req.Generation = "app", id, gen
		req.ProtocolType, req.Protocol = strp("consumer"), strp("stream")
		ps, st := decodeSeedSync(t, step, rawCall(t, d, req, 5, kmsg.NewPtrSyncGroupResponse()))
		if !slices.Equal(ps, wantParts) || !slices.Equal(st, wantStandby) {
			t.Fatalf("step %s: input%v STANDBY %v, want input%v STANDBY %v", step, ps, st, wantParts, wantStandby)
		}
	}
	beat := func(step, id string, gen int32, want int16) {
		t.Helper()
		wantCode(t, "step "+step+" heartbeat", heartbeatG(t, d, 4, "app", id, nil, gen), want)
	}
	wantGen := func(step string, got, want int32) {
		t.Helper()
		if got != want {
			t.Fatalf("step %s: generation %d, want %d", step, got, want)
		}
	}
	rip := kerr.RebalanceInProgress.Code

	c := dialRaw(t, d.Addr)
	up := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	up.Group, up.MemberID, up.RebalanceTimeoutMillis, up.ProcessID = "app", "C", 300000, strp("pC")
	up.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "hostC", Port: 8080}
	up.ActiveTasks, up.StandbyTasks, up.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	up.Topology = seedTopology()
	r := streamsHeartbeatRaw(t, c, 1, up)
	if r.ErrorCode != 0 || r.MemberEpoch != g+1 || len(r.ActiveTasks) != 0 || !slices.Equal(seedTasks(r.StandbyTasks), []int32{0, 4}) || !slices.Equal(seedTasks(r.WarmupTasks), []int32{2, 5}) {
		t.Fatalf("step 1: %+v", r)
	}
	d.waitLogged("converted classic group to streams group", func(l map[string]any) bool { return l["group"] == "app" })
	if dg := describeStreams(t, d.Addr, "app"); len(dg.Members) != 3 || dg.Epoch != g+1 {
		t.Fatalf("step 1 describe: %+v", dg)
	} else {
		for _, m := range dg.Members {
			if m.IsClassic != (m.MemberID != "C") {
				t.Fatalf("step 1: member %s IsClassic %v", m.MemberID, m.IsClassic)
			}
		}
	}

	beat("2", idA, g, rip)
	wantGen("3", cjoin("3", idA, 0, 2, 4), g)
	csync("4", idA, g, []int32{0, 2}, []int32{1, 3, 5})
	beat("5", idB, g, rip)
	wantGen("6", cjoin("6", idB, 1, 3, 5), g)
	csync("7", idB, g, []int32{1, 5}, []int32{2, 3, 4})
	wantGen("8", cjoin("8", idA, 0, 2), g+1)
	csync("9", idA, g+1, []int32{0, 2}, []int32{1, 3, 5})
	wantGen("10", cjoin("10", idB, 1, 5), g+1)
	csync("11", idB, g+1, []int32{1, 4, 5}, []int32{2, 3})
	beat("12", idA, g+1, rip)
	wantGen("13", cjoin("13", idA, 0, 2), g+1)
	csync("14", idA, g+1, []int32{0, 2, 3}, []int32{1, 5})

	hb := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "app", "C", g+1, -1
	hb.TaskOffsets = []kmsg.TaskOffset{{SubtopologyID: "0", Partition: 2, Offset: 1000}, {SubtopologyID: "0", Partition: 5, Offset: 0}}
	hb.TaskEndOffsets = []kmsg.TaskOffset{{SubtopologyID: "0", Partition: 2, Offset: 1000}, {SubtopologyID: "0", Partition: 5, Offset: 1 << 40}}
	if r := streamsHeartbeatRaw(t, c, 2, hb); r.ErrorCode != 0 || r.MemberEpoch != g+2 || r.ActiveTasks != nil {
		t.Fatalf("step 15: %+v", r)
	}
	beat("16", idA, g+1, rip)
	wantGen("17", cjoin("17", idA, 0, 2, 3), g+1)
	csync("18", idA, g+1, []int32{0, 3}, []int32{1, 5})
	beat("19", idB, g+1, rip)
	wantGen("19", cjoin("19", idB, 1, 4, 5), g+2)
	csync("19", idB, g+2, []int32{1, 4, 5}, []int32{2, 3})
	wantGen("20", cjoin("20", idA, 0, 3), g+2)
	csync("20", idA, g+2, []int32{0, 3}, []int32{1, 5})
	beat("21", idB, g+2, 0)
	hb.MemberEpoch, hb.TaskOffsets, hb.TaskEndOffsets = g+2, nil, nil
	r = streamsHeartbeatRaw(t, c, 3, hb)
	if r.ErrorCode != 0 || r.MemberEpoch != g+2 || !slices.Equal(seedTasks(r.ActiveTasks), []int32{2}) ||
		!slices.Equal(seedTasks(r.StandbyTasks), []int32{0, 4}) || !slices.Equal(seedTasks(r.WarmupTasks), []int32{5}) {
		t.Fatalf("step 22: %+v", r)
	}
	if dg := describeStreams(t, d.Addr, "app"); dg.State != "Stable" || dg.Epoch != g+2 {
		t.Fatalf("after step 22: %+v", dg)
	}

	// 23-25: C leaves; the group is a classic group again at generation g+2 and rebalances.
	leave := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	leave.Group, leave.MemberID, leave.MemberEpoch = "app", "C", -1
	if r := streamsHeartbeatRaw(t, c, 4, leave); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("step 23: %+v", r)
	}
	d.waitLogged("converted streams group to classic group, rebalance prepared", func(l map[string]any) bool { return l["group"] == "app" })
	if dg := describeStreams(t, d.Addr, "app"); dg.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("after step 23 the streams group must be gone: %+v", dg)
	}
	beat("24", idA, g+2, rip)
	beat("24", idB, g+2, rip)
	rejoins := make(chan *kmsg.JoinGroupResponse, 2)
	for _, id := range []string{idA, idB} {
		go func() {
			req := classicStreamsJoin(t, "app", id, topics, procOf[id])
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 300000
			rejoins <- join(t, d, 9, req)
		}()
	}
	for range 2 { // the downgrade made the smallest member id the leader (spec §5.3)
		if r := <-rejoins; r.ErrorCode != 0 || r.Generation != g+3 || r.LeaderID != min(idA, idB) {
			t.Fatalf("step 25: %+v", r)
		}
	}
}

func seedTasks(l []kmsg.TaskIDs) []int32 {
	var out []int32
	for _, t := range l {
		out = append(out, t.Partitions...)
	}
	return out
}
