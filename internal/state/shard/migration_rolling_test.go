package shard

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"testing/synctest"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A simulated application instance (one stream thread) of the rolling-upgrade test: it talks
// the classic or the streams protocol and holds the active tasks its last answer gave it, as a
// cooperative client does (it drops revoked tasks and starts new ones when it processes an
// answer).
type simInstance struct {
	process byte
	classic bool
	id      string
	gen     int32 // classic generation or streams member epoch
	active  []int32
	standby []int32
	warmup  []int32
}

type rollingSim struct {
	h         *migrationHarness
	instances []*simInstance
	steps     int
}

const rollingPartitions = 20

// checkExclusive is the invariant checked after every response: no task is active on two
// instances at once.
func (s *rollingSim) checkExclusive(after string) {
	s.steps++
	holder := map[int32]string{}
	for _, in := range s.instances {
		for _, p := range in.active {
			if other, ok := holder[p]; ok {
				s.h.t.Fatalf("after %s: task 0_%d active on %s and %s", after, p, other, in.id)
			}
			holder[p] = in.id
		}
	}
}

func (s *rollingSim) member(in *simInstance) classicStreamsMember {
	return classicStreamsMember{id: in.id, process: in.process}
}

func toTaskIDs(ps []int32) []kmsg.TaskIDs {
	if len(ps) == 0 {
		return []kmsg.TaskIDs{}
	}
	return []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: ps}}
}

// streamsRound sends one heartbeat of a streams instance.
func (s *rollingSim) streamsRound(in *simInstance) {
	r := streamsBeat("app", in.id, in.gen)
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = toTaskIDs(in.active), toTaskIDs(in.standby), toTaskIDs(in.warmup)
	resp := s.h.hb(r)
	if resp.ErrorCode != 0 {
		s.h.t.Fatalf("%s heartbeat: %v %v", in.id, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	in.gen = resp.MemberEpoch
	if resp.ActiveTasks != nil {
		in.active, in.standby, in.warmup = partitionsOf(resp.ActiveTasks), partitionsOf(resp.StandbyTasks), partitionsOf(resp.WarmupTasks)
	}
	s.checkExclusive(in.id + " heartbeat")
}

// classicJoin sends a classic instance's Heartbeat and, when prompted, its JoinGroup; it
// reports whether a SyncGroup is to follow. The instance keeps running what it holds until it
// processes the SyncGroup answer.
func (s *rollingSim) classicJoin(in *simInstance) bool {
	h := s.h
	if in.gen != 0 { // a freshly started instance joins first
		code := h.cbeat(s.member(in), in.gen)
		switch code {
		case 0:
			return false
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
		default:
			h.t.Fatalf("%s heartbeat: %v", in.id, kerr.ErrorForCode(code))
		}
	}
	j := h.cjoin(s.member(in), in.active...)
	if j.Code != 0 {
		h.t.Fatalf("%s join: %v", in.id, kerr.ErrorForCode(j.Code))
	}
	in.gen = j.Generation
	s.checkExclusive(in.id + " join")
	return true
}

func (s *rollingSim) classicSync(in *simInstance) {
	h := s.h
	c, ps, _, stb := h.csync(s.member(in), in.gen)
	switch c {
	case 0:
		in.active, in.standby = ps, stb
	case kerr.RebalanceInProgress.Code:
		return
	default:
		h.t.Fatalf("%s sync: %v", in.id, kerr.ErrorForCode(c))
	}
	s.checkExclusive(in.id + " sync")
}

// settle runs rounds until the streams group is Stable. In each round every classic instance
// that is prompted joins, then the streams instances heartbeat, then the classic ones sync, so
// other members act between a classic member's JoinGroup and its SyncGroup, as they can.
func (s *rollingSim) settle(what string) {
	for round := 0; round < 40; round++ {
		var syncing []*simInstance
		for _, in := range s.instances {
			if in.classic && s.classicJoin(in) {
				syncing = append(syncing, in)
			}
		}
		for _, in := range s.instances {
			if !in.classic {
				s.streamsRound(in)
			}
		}
		for _, in := range syncing {
			s.classicSync(in)
		}
		if g := s.h.describe(); g.State == "Stable" {
			return
		}
	}
	s.h.t.Fatalf("%s: the group did not settle: %+v", what, s.h.describe())
}

func (h *migrationHarness) describe() kmsg.StreamsGroupDescribeResponseGroup {
	v, err := h.s.Write(context.Background(), StreamsDescribe([]string{"app"}, false, h.cat, h.cfg))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.([]kmsg.StreamsGroupDescribeResponseGroup)[0]
}

func streamsJoinAs(in *simInstance) *kmsg.StreamsGroupHeartbeatRequest {
	r := joinC()
	r.MemberID = in.id
	pid := classicproto.Subscription{ProcessID: [16]byte{15: in.process}}.ProcessIDString()
	r.ProcessID = &pid
	r.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: fmt.Sprintf("host%d", in.process), Port: 8080}
	return r
}

// The rolling test (spec online-migration §10 scenario 36's shape, with the real sticky
// assignor and one standby per task): ten classic instances are restarted one by one with the
// streams protocol, then one by one back; no task is ever active on two instances (checked after
// every answer), the group ends as a classic group, and the offsets committed at the start stay.
func TestMigrationRollingUpgradeAndDowngradeOfTenInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, assign.Sticky{})
		h.cfg.NumStandbyReplicas = 1
		h.cat["input"].Partitions, h.cat["app-store-changelog"].Partitions = rollingPartitions, rollingPartitions
		h.restart() // the shard reads its configuration at start
		s := &rollingSim{h: h}
		proto := "stream"
		g := &classic.Group{ID: "app", State: classic.Stable, Generation: 5, ProtocolType: "consumer", Protocol: &proto, Leader: "c0"}
		for i := 0; i < 10; i++ {
			in := &simInstance{process: byte(i + 1), classic: true, id: fmt.Sprintf("c%d", i), gen: 5}
			for p := int32(i); p < rollingPartitions; p += 10 {
				in.active = append(in.active, p)
			}
			s.instances = append(s.instances, in)
			g.Members = append(g.Members, &classic.Member{ID: in.id, ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
				Protocols: s.member(in).protocols(t, in.active, in.active, nil), Assignment: storedAssignment(t, in.active, nil)})
		}
		h.writeClassic(g)
		for p := int32(0); p < rollingPartitions; p++ {
			if c := h.commit(fmt.Sprintf("c%d", p%10), 5, p); c != 0 {
				t.Fatalf("commit: %v", kerr.ErrorForCode(c))
			}
		}
		s.checkExclusive("start")

		// Rolling upgrade, one instance at a time: the new instance (streams protocol) starts,
		// then the old one (classic) stops with a LeaveGroup. Starting first makes the assignor
		// move tasks off running classic instances, which must revoke before anyone receives.
		remove := func(in *simInstance) {
			s.instances = slices.DeleteFunc(s.instances, func(x *simInstance) bool { return x == in })
		}
		for i := 0; i < 10; i++ {
			old := s.instances[0]
			in := &simInstance{process: byte(50 + i), id: fmt.Sprintf("s%d", i)}
			s.instances = append(s.instances, in)
			r := h.hb(streamsJoinAs(in))
			if r.ErrorCode != 0 {
				t.Fatalf("streams join of %s: %v %v", in.id, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
			}
			in.gen, in.active, in.standby, in.warmup = r.MemberEpoch, partitionsOf(r.ActiveTasks), partitionsOf(r.StandbyTasks), partitionsOf(r.WarmupTasks)
			s.checkExclusive(in.id + " join")
			s.settle("start of " + in.id)
			v, err := h.s.Write(context.Background(), LeaveGroup(h.ccfg, "app", []classic.LeaveMember{{MemberID: old.id}}))
			if err != nil || v.(LeaveResult).Code != 0 || v.(LeaveResult).Members[0] != 0 {
				t.Fatalf("leave %s: %v %+v", old.id, err, v)
			}
			remove(old)
			s.settle("stop of " + old.id)
		}
		if g := h.describe(); len(g.Members) != 10 {
			t.Fatalf("after the upgrade: %+v", g)
		} else {
			for _, m := range g.Members {
				if m.IsClassic {
					t.Fatalf("classic member left after the rolling upgrade: %s", m.MemberID)
				}
			}
		}

		// Rolling downgrade the same way: a classic instance starts, a streams instance leaves.
		for i := 0; i < 10; i++ {
			old := s.instances[0]
			in := &simInstance{process: byte(100 + i), classic: true, id: fmt.Sprintf("k%d", i)}
			s.instances = append(s.instances, in)
			s.settle("start of " + in.id)
			if r := h.hb(streamsBeat("app", old.id, -1)); r.ErrorCode != 0 {
				t.Fatalf("leave %s: %+v", old.id, r)
			}
			remove(old)
			if i < 9 {
				s.settle("stop of " + old.id)
			}
		}
		cg, sg := h.groupTypes()
		if sg || cg == nil || cg.State != classic.PreparingRebalance || len(cg.Members) != 10 {
			t.Fatalf("after the last streams member left: classic %+v streams %v", cg, sg)
		}
		// The classic rebalance: everyone rejoins, the leader keeps what each owns and deals
		// out the rest, as a cooperative StreamsPartitionAssignor would.
		var chans []<-chan *classic.JoinResult
		for _, in := range s.instances {
			chans = append(chans, h.cjoinAsync(s.member(in), in.active...))
		}
		var leader *classic.JoinResult
		for i, ch := range chans {
			r := <-ch
			if r.Code != 0 {
				t.Fatalf("classic rejoin of %s: %v", s.instances[i].id, kerr.ErrorForCode(r.Code))
			}
			s.instances[i].gen = r.Generation
			if len(r.Members) > 0 {
				leader = r
			}
		}
		if leader == nil || len(leader.Members) != 10 {
			t.Fatalf("classic rebalance leader: %+v", leader)
		}
		owned := map[int32]bool{}
		plan := map[string][]int32{}
		for _, in := range s.instances {
			plan[in.id] = slices.Clone(in.active)
			for _, p := range in.active {
				owned[p] = true
			}
		}
		ids := make([]string, 0, len(plan))
		for id := range plan {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		next := 0
		for p := int32(0); p < rollingPartitions; p++ {
			if !owned[p] {
				plan[ids[next%len(ids)]] = append(plan[ids[next%len(ids)]], p)
				next++
			}
		}
		assignments := map[string][]byte{}
		for id, ps := range plan {
			slices.Sort(ps)
			assignments[id] = storedAssignment(t, ps, nil)
		}
		pt, pn := "consumer", "stream"
		for _, in := range s.instances {
			req := classic.SyncRequest{Group: "app", MemberID: in.id, Generation: in.gen, ProtocolType: &pt, Protocol: &pn, Version: 5}
			if in.id == leader.Leader {
				req.Assignments = assignments
			}
			go func() { _, _ = h.s.Write(context.Background(), SyncGroupWith(h.ccfg, req, h.sx())) }()
		}
		synctest.Wait()
		for _, in := range s.instances {
			in.active = plan[in.id]
		}
		s.checkExclusive("classic rebalance")
		cg, _ = h.groupTypes()
		if cg.State != classic.Stable || len(cg.Members) != 10 {
			t.Fatalf("final classic group %+v", cg)
		}
		for p := int32(0); p < rollingPartitions; p++ {
			v, _ := h.s.Read(context.Background(), FetchOffsets("app", []offsets.TopicPartition{{Topic: "input", Partition: p}}))
			if f := v.([]FetchPartition)[0]; !f.Found || f.Committed.Offset != 7 {
				t.Fatalf("offset of input-%d after the migrations: %+v", p, f)
			}
		}
		t.Logf("%d answers checked", s.steps)
	})
}

// A group that stays a streams group when its last streams-protocol member goes (here the
// policy is upgrade; a topology description held by the plugin does the same) is left with
// classic members only. The member's departure bumps the group epoch, and nothing but a
// classic member's rejoin computes the next target then: its tasks must reach the classic
// instances, not stay unassigned. (Seen with a Kafka Streams application through the gateway:
// the streams instance killed, its session expired, two of the eight tasks were processed by
// nobody until a restart.)
func TestMigrationClassicMembersTakeOverWhenTheLastStreamsMemberGoesWithoutDowngrade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, assign.Sticky{}, streams.MigrationUpgrade)
		h.cat["input"].Partitions, h.cat["app-store-changelog"].Partitions = rollingPartitions, rollingPartitions
		h.restart()
		s := &rollingSim{h: h}
		proto := "stream"
		g := &classic.Group{ID: "app", State: classic.Stable, Generation: 5, ProtocolType: "consumer", Protocol: &proto, Leader: "c0"}
		for i := 0; i < 2; i++ {
			in := &simInstance{process: byte(i + 1), classic: true, id: fmt.Sprintf("c%d", i), gen: 5}
			for p := int32(i); p < rollingPartitions; p += 2 {
				in.active = append(in.active, p)
			}
			s.instances = append(s.instances, in)
			g.Members = append(g.Members, &classic.Member{ID: in.id, ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
				Protocols: s.member(in).protocols(t, in.active, in.active, nil), Assignment: storedAssignment(t, in.active, nil)})
		}
		h.writeClassic(g)
		in := &simInstance{process: 50, id: "s0"}
		s.instances = append(s.instances, in)
		r := h.hb(streamsJoinAs(in))
		if r.ErrorCode != 0 {
			t.Fatalf("streams join: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
		in.gen = r.MemberEpoch
		s.settle("s0 joined")
		if len(in.active) == 0 {
			t.Fatalf("s0 holds no task after the group settled: %+v", h.describe())
		}
		if r := h.hb(streamsBeat("app", "s0", -1)); r.ErrorCode != 0 {
			t.Fatalf("s0 leaves: %+v", r)
		}
		s.instances = s.instances[:2]
		if _, sg := h.groupTypes(); !sg {
			t.Fatal("with policy upgrade the group stays a streams group")
		}
		s.settle("s0 left")
		held := 0
		for _, in := range s.instances {
			held += len(in.active)
		}
		if held != rollingPartitions {
			t.Fatalf("after s0 left the classic instances run %d of %d tasks: %+v", held, rollingPartitions, h.describe())
		}
	})
}
