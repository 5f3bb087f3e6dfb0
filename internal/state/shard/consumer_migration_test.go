package shard

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cmeta is a classic consumer's JoinGroup metadata (ConsumerMemberMetadata v3).
func cmeta(gen int32, owned ...int32) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics, md.Generation = 3, []string{"foo"}, gen
	if len(owned) > 0 {
		md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "foo", Partitions: owned}}
	}
	return md.AppendTo(nil)
}

func cjoinReq(member string, gen int32, owned ...int32) classic.JoinRequest {
	return classic.JoinRequest{Group: "g", MemberID: member, ClientID: "client", ClientHost: "/127.0.0.1",
		SessionTimeoutMs: 10000, RebalanceTimeout: 20000, ProtocolType: "consumer",
		Protocols: []classic.Protocol{{Name: "cooperative-sticky", Metadata: cmeta(gen, owned...)}}, Version: 9}
}

func (h *consumerHarness) cjoin(req classic.JoinRequest) *classic.JoinResult {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), JoinGroupWith(classic.DefaultConfig(), req, StreamsContext{Catalog: h.cat}))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(*classic.JoinResult)
}

var ptConsumer, pnCoop = "consumer", "cooperative-sticky"

func (h *consumerHarness) csync(member string, gen int32, assignments map[string][]byte) *classic.SyncResult {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), SyncGroupWith(classic.DefaultConfig(), classic.SyncRequest{Group: "g", MemberID: member, Generation: gen, Assignments: assignments, Version: 5, ProtocolType: &ptConsumer, Protocol: &pnCoop}, StreamsContext{Catalog: h.cat}))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(*classic.SyncResult)
}

func (h *consumerHarness) cbeat(member string, gen int32) int16 {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), Heartbeat(classic.DefaultConfig(), "g", member, nil, gen))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(HeartbeatResult).Code
}

func decodeAssignment(t *testing.T, b []byte) []int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("assignment bytes: %v", err)
	}
	var out []int32
	for _, tp := range a.Topics {
		if tp.Topic != "foo" {
			t.Fatalf("topic %q", tp.Topic)
		}
		out = append(out, tp.Partitions...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// checkOwners fails when a partition is held (assigned or pending revocation) by two members
// of the consumer group.
func (h *consumerHarness) checkOwners() {
	h.t.Helper()
	v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		g := m.Consumer.Groups["g"]
		if g == nil {
			return "", nil
		}
		seen := map[consumer.TP]string{}
		for id, mem := range g.Members {
			for _, set := range []consumer.Parts{mem.Assigned, mem.Pending} {
				for tp := range set {
					if o, ok := seen[tp]; ok && o != id {
						return "partition held by " + o + " and " + id, nil
					}
					seen[tp] = id
				}
			}
		}
		return "", nil
	})
	if s := v.(string); s != "" {
		h.t.Fatal(s)
	}
}

// stableClassicCG builds a stable classic group "g" whose one member c1 holds foo 0-3 and
// has committed offset 7 of foo-0; it returns c1's member id and generation.
func stableClassicCG(t *testing.T, h *consumerHarness) (string, int32) {
	r := h.cjoin(cjoinReq("", -1))
	if r.Code != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %d", r.Code)
	}
	id := r.MemberID
	done := make(chan *classic.JoinResult, 1)
	go func() { done <- h.cjoin(cjoinReq(id, -1)) }()
	time.Sleep(4 * time.Second) // past the initial rebalance delay
	r = <-done
	if r.Code != 0 || r.Leader != id {
		t.Fatalf("join: %+v", r)
	}
	all := kmsg.NewConsumerMemberAssignment()
	all.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "foo", Partitions: []int32{0, 1, 2, 3}}}
	if s := h.csync(id, r.Generation, map[string][]byte{id: all.AppendTo(nil)}); s.Code != 0 {
		t.Fatalf("sync: %d", s.Code)
	}
	codes, _ := h.s.Write(context.Background(), CommitOffsets(CommitRequest{Group: "g", Generation: r.Generation, MemberID: id, Version: 8, MaxMetadata: 4096,
		Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "foo", Partition: 0}, Offset: 7, RetentionMs: -1}}}))
	if c := codes.([]int16)[0]; c != 0 {
		t.Fatalf("classic commit: %d", c)
	}
	return id, r.Generation
}

func (h *consumerHarness) classicState() (classic.GroupState, int32, bool) {
	v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		g := m.Classic.Group("g")
		if g == nil {
			return [3]int32{-1, 0, 0}, nil
		}
		return [3]int32{int32(g.State), g.Generation, int32(len(g.Members))}, nil
	})
	a := v.([3]int32)
	return classic.GroupState(a[0]), a[1], a[0] >= 0 && a[2] > 0
}

// Upgrade: a consumer-protocol member joining a live classic group converts it in one batch;
// the classic member keeps its partitions until it rejoins and gives up what the new target
// moves, then the newcomer gets them: no partition is held by two members at any step, the
// offsets survive, and a restart keeps the classic member's metadata.
func TestConsumerUpgradeFromClassicGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		c1, gen := stableClassicCG(t, h)

		a := h.hb(consumerJoin("g", "a"))
		if a.ErrorCode != 0 {
			t.Fatalf("consumer join on a live classic group: %d %v", a.ErrorCode, a.ErrorMessage)
		}
		if a.Assignment == nil || len(a.Assignment.Topics) != 0 {
			t.Fatalf("a gets nothing while c1 still holds every partition: %+v", a.Assignment)
		}
		if _, _, live := h.classicState(); live || h.members("g") != 2 {
			t.Fatalf("conversion: classic group left %v, consumer members %d", live, h.members("g"))
		}
		got, _ := h.s.Read(context.Background(), FetchOffsets("g", []offsets.TopicPartition{{Topic: "foo", Partition: 0}}))
		if f := got.([]FetchPartition)[0]; !f.Found || f.Committed.Offset != 7 {
			t.Fatalf("offsets after the upgrade: %+v", f)
		}
		h.checkOwners()
		dv, _ := h.s.Write(context.Background(), ConsumerDescribe([]string{"g"}, false, h.cat, h.cfg))
		types := map[string]int8{}
		for _, dm := range dv.([]kmsg.ConsumerGroupDescribeResponseGroup)[0].Members {
			types[dm.MemberID] = dm.MemberType
		}
		if types[c1] != consumer.MemberTypeClassic || types["a"] != consumer.MemberTypeConsumer {
			t.Fatalf("describe member types: %v", types)
		}
		h.restart()

		// c1's heartbeat at its classic generation, which is its member epoch now.
		if code := h.cbeat(c1, gen); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("c1 heartbeat after the upgrade: %d, want REBALANCE_IN_PROGRESS", code)
		}
		if code := h.cbeat(c1, gen+5); code != kerr.IllegalGeneration.Code {
			t.Fatalf("c1 heartbeat at a wrong generation: %d", code)
		}
		j := h.cjoin(cjoinReq(c1, gen, 0, 1, 2, 3))
		if j.Code != 0 || j.MemberID != c1 || len(j.Members) != 0 || *j.Protocol != "cooperative-sticky" || *j.ProtocolType != "consumer" {
			t.Fatalf("c1 rejoin: %+v", j)
		}
		s := h.csync(c1, j.Generation, nil)
		kept := decodeAssignment(t, s.Assignment)
		if s.Code != 0 || len(kept) != 2 {
			t.Fatalf("c1 sync while revoking: %d %v, want the 2 partitions it keeps", s.Code, kept)
		}
		h.checkOwners()
		if code := h.cbeat(c1, j.Generation); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("c1 heartbeat with a revocation owed: %d", code)
		}
		j = h.cjoin(cjoinReq(c1, j.Generation, kept...))
		if j.Code != 0 {
			t.Fatalf("c1 second rejoin: %d", j.Code)
		}
		s = h.csync(c1, j.Generation, nil)
		if got := decodeAssignment(t, s.Assignment); s.Code != 0 || len(got) != 2 {
			t.Fatalf("c1 settled: %v", got)
		}
		if code := h.cbeat(c1, j.Generation); code != 0 {
			t.Fatalf("c1 heartbeat once reconciled: %d", code)
		}
		a = h.hb(consumerBeat("g", "a", a.MemberEpoch, a.Assignment))
		if a.Assignment == nil || len(a.Assignment.Topics) != 1 || len(a.Assignment.Topics[0].Partitions) != 2 {
			t.Fatalf("a gets the released partitions: %+v", a.Assignment)
		}
		h.checkOwners()
	})
}

// A classic group that is rebalancing is upgraded too, as Kafka 4.4 does it: each member comes
// over with the assignment of its last SyncGroup (none for one that never synced), and a
// JoinGroup parked in the rebalance is answered REBALANCE_IN_PROGRESS so that its member
// rejoins the consumer group.
func TestConsumerUpgradeFromRebalancingClassicGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		c1, _ := stableClassicCG(t, h)
		r := h.cjoin(cjoinReq("", -1))
		if r.Code != kerr.MemberIDRequired.Code {
			t.Fatalf("c2's first join: %+v", r)
		}
		c2 := r.MemberID
		parked := make(chan *classic.JoinResult, 1)
		go func() { parked <- h.cjoin(cjoinReq(c2, -1)) }()
		synctest.Wait()
		if st, _, _ := h.classicState(); st != classic.PreparingRebalance {
			t.Fatalf("c2's join must start a rebalance: state %v", st)
		}

		a := h.hb(consumerJoin("g", "a"))
		if a.ErrorCode != 0 {
			t.Fatalf("consumer join on a rebalancing classic group: %d %v", a.ErrorCode, a.ErrorMessage)
		}
		synctest.Wait() // the parked join is answered once the conversion is durable
		select {
		case j := <-parked:
			if j.Code != kerr.RebalanceInProgress.Code {
				t.Fatalf("c2's parked join: %+v, want REBALANCE_IN_PROGRESS", j)
			}
		default:
			t.Fatal("c2's join is still parked after the upgrade")
		}
		if _, _, live := h.classicState(); live || h.members("g") != 3 {
			t.Fatalf("conversion: classic group left %v, consumer members %d", live, h.members("g"))
		}
		h.checkOwners()
		v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
			g := m.Consumer.Groups["g"]
			return [2]int{len(g.Members[c1].Assigned), len(g.Members[c2].Assigned)}, nil
		})
		if n := v.([2]int); n != [2]int{4, 0} {
			t.Fatalf("partitions after the conversion (c1, c2): %v, want c1's last assignment and nothing for c2", n)
		}
		// c2 rejoins the consumer group as a classic member.
		j := h.cjoin(cjoinReq(c2, -1))
		if j.Code != 0 || j.MemberID != c2 {
			t.Fatalf("c2 rejoins: %+v", j)
		}
		h.checkOwners()
	})
}

// The policy gates the upgrade: under downgrade or disabled a consumer heartbeat on a live
// classic group is refused as Kafka refuses it, and the classic group is untouched.
func TestConsumerUpgradeRefusedByPolicy(t *testing.T) {
	underPolicies(t, []string{"downgrade", "disabled"}, func(t *testing.T, h *consumerHarness, policy string) {
		stableClassicCG(t, h)
		a := h.hb(consumerJoin("g", "a"))
		if a.ErrorCode != kerr.GroupIDNotFound.Code || *a.ErrorMessage != "Cannot upgrade classic group g to consumer group because online upgrade is disabled." {
			t.Fatalf("join under %s: %d %v", policy, a.ErrorCode, a.ErrorMessage)
		}
		if st, _, live := h.classicState(); !live || st != classic.Stable {
			t.Fatalf("classic group after a refused upgrade: %v %v", st, live)
		}
	})
}

// group.consumer.max.size bounds the upgrade as in Kafka: a classic group as large as the bound
// converts, then the joiner is refused GROUP_MAX_SIZE_REACHED and nothing is written.
func TestConsumerUpgradeBoundedByMaxSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		h.cfg.MaxSize = 1
		h.restart()
		stableClassicCG(t, h)
		if a := h.hb(consumerJoin("g", "a")); a.ErrorCode != kerr.GroupMaxSizeReached.Code {
			t.Fatalf("join of a classic group of 1 under max size 1: %d %v, want GROUP_MAX_SIZE_REACHED", a.ErrorCode, a.ErrorMessage)
		}
		if st, _, live := h.classicState(); !live || st != classic.Stable || h.members("g") != -1 {
			t.Fatalf("the classic group after the refused joiner: %v %v, consumer members %d", st, live, h.members("g"))
		}
	})
}

// A classic member joining a live consumer group is taken in (whatever the policy, as Kafka),
// and gets only partitions nobody else holds.
func TestClassicMemberJoinsConsumerGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		a := h.hb(consumerJoin("g", "a"))
		r := h.cjoin(cjoinReq("", -1))
		if r.Code != kerr.MemberIDRequired.Code || r.MemberID == "" {
			t.Fatalf("v9 join without id: %+v", r)
		}
		c1 := r.MemberID
		time.Sleep(1100 * time.Millisecond) // the assignment interval
		j := h.cjoin(cjoinReq(c1, -1))
		if j.Code != 0 {
			t.Fatalf("join: %d", j.Code)
		}
		s := h.csync(c1, j.Generation, nil)
		if got := decodeAssignment(t, s.Assignment); s.Code != 0 || len(got) != 0 {
			t.Fatalf("c1 must wait for a to revoke: %v", got)
		}
		h.checkOwners()
		a = h.hb(consumerBeat("g", "a", a.MemberEpoch, a.Assignment))
		a = h.hb(consumerBeat("g", "a", a.MemberEpoch, a.Assignment)) // reports the revocation
		if code := h.cbeat(c1, j.Generation); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("c1 heartbeat with partitions to receive: %d", code)
		}
		j = h.cjoin(cjoinReq(c1, j.Generation))
		s = h.csync(c1, j.Generation, nil)
		if got := decodeAssignment(t, s.Assignment); len(got) != 2 {
			t.Fatalf("c1 after a revoked: %v (a holds %+v)", got, a.Assignment)
		}
		h.checkOwners()
		if code := h.cbeat(c1, j.Generation); code != 0 {
			t.Fatalf("c1 stable: %d", code)
		}
		// Every consumer group kind, the classic member's included, refuses a newer value.
		seen := refusesNewerValues(t, h.b.Records(0), replayIntoNewMachine)
		for k := records.KindConsumerGroupMetadata; k <= records.KindConsumerClassicMember; k++ {
			if !seen[k] {
				t.Errorf("no %s record to raise the value version of", k)
			}
		}
	})
}

// Downgrade: when the last consumer-protocol member leaves, the classic members left become a
// classic group in PreparingRebalance at the consumer group's epoch, offsets kept; under the
// upgrade policy the group stays a consumer group.
func TestConsumerDowngradeWhenLastConsumerMemberLeaves(t *testing.T) {
	underPolicies(t, []string{"bidirectional", "upgrade"}, func(t *testing.T, h *consumerHarness, policy string) {
		c1, _ := stableClassicCG(t, h)
		a := h.hb(consumerJoin("g", "a"))
		if a.ErrorCode != 0 {
			t.Fatalf("upgrade: %d", a.ErrorCode)
		}
		if l := h.hb(consumerBeat("g", "a", -1, nil)); l.ErrorCode != 0 {
			t.Fatalf("leave: %d", l.ErrorCode)
		}
		st, gen, live := h.classicState()
		if policy == "upgrade" {
			if live || h.members("g") != 1 {
				t.Fatalf("no downgrade under upgrade: classic %v, consumer members %d", live, h.members("g"))
			}
			return
		}
		if !live || st != classic.PreparingRebalance || h.members("g") != -1 {
			t.Fatalf("downgrade: classic %v state %v, consumer members %d", live, st, h.members("g"))
		}
		got, _ := h.s.Read(context.Background(), FetchOffsets("g", []offsets.TopicPartition{{Topic: "foo", Partition: 0}}))
		if f := got.([]FetchPartition)[0]; !f.Found || f.Committed.Offset != 7 {
			t.Fatalf("offsets after the downgrade: %+v", f)
		}
		av, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) { return m.Classic.Group("g").Members[0].Assignment, nil })
		if got := decodeAssignment(t, av.([]byte)); len(got) != 4 {
			t.Fatalf("c1's assignment in the classic group: %v, want the 4 partitions it still holds", got)
		}
		if code := h.cbeat(c1, gen); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("c1 heartbeat after the downgrade: %d", code)
		}
		h.restart()
		done := make(chan *classic.JoinResult, 1)
		go func() { done <- h.cjoin(cjoinReq(c1, gen)) }()
		time.Sleep(time.Second)
		if j := <-done; j.Code != 0 || j.Leader != c1 || len(j.Members) != 1 {
			t.Fatalf("c1 rejoins the classic group: %+v", j)
		}
	})
}

// A classic static member taking over the instance id a consumer-protocol static member left
// with epoch -2 inherits its partitions and stays a classic member across a restart.
func TestClassicStaticMemberReplacesConsumerStaticMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		inst := "i1"
		req := consumerJoin("g", "s1")
		req.InstanceID = &inst
		h.hb(consumerJoin("g", "other"))
		h.hb(req)
		leave := consumerBeat("g", "s1", -2, nil)
		leave.InstanceID = &inst
		h.hb(leave)
		j := cjoinReq("", -1)
		j.InstanceID = &inst
		r := h.cjoin(j)
		if r.Code != 0 || r.MemberID == "s1" {
			t.Fatalf("classic static join: %+v", r)
		}
		h.restart()
		if code := h.cbeat(r.MemberID, r.Generation); code != 0 && code != kerr.RebalanceInProgress.Code {
			t.Fatalf("the replacement is no classic member after a restart: %d", code)
		}
		h.checkOwners()
	})
}

// A static classic member restarting (a JoinGroup with a new member id and its instance id) in
// a consumer group replaces its old member at once, as the classic protocol does and Kafka 4.4
// does inside a consumer group: no UNRELEASED_INSTANCE_ID, the new member inherits the old
// one's partitions, and the old member id is gone. So does a consumer-protocol member taking
// the instance id over from a classic one.
func TestClassicStaticMemberRestartsInConsumerGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		h.cfg.MaxSize = 2 // full with its two members: a replacement is no new member
		h.restart()
		h.hb(consumerJoin("g", "other"))
		inst := "i1"
		first := cjoinReq("", -1)
		first.InstanceID = &inst
		r := h.cjoin(first)
		if r.Code != 0 {
			t.Fatalf("classic static join: %+v", r)
		}
		old := r.MemberID
		held := func(id string) int {
			v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
				g := m.Consumer.Groups["g"]
				if g.Members[id] == nil {
					return -1, nil
				}
				return len(g.Members[id].Assigned) + len(g.Targets[id]), nil
			})
			return v.(int)
		}
		before := held(old)

		again := cjoinReq("", -1)
		again.InstanceID = &inst
		r = h.cjoin(again)
		if r.Code != 0 || r.MemberID == old {
			t.Fatalf("the static member's restart: code %d member %q (old %q), want a new member", r.Code, r.MemberID, old)
		}
		if held(old) != -1 || h.members("g") != 2 {
			t.Fatalf("after the replacement: old member still there (%d) or members %d", held(old), h.members("g"))
		}
		if got := held(r.MemberID); got != before {
			t.Fatalf("the replacement holds %d (assigned + target), the replaced member held %d", got, before)
		}
		if code := h.cbeat(old, r.Generation); code != kerr.UnknownMemberID.Code {
			t.Fatalf("the replaced member's heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
		}
		h.checkOwners()

		// A consumer-protocol member taking over an instance id a classic member holds replaces
		// it the same way (Kafka checks for an unreleased instance id only between two
		// consumer-protocol members).
		classicHolder := r.MemberID
		before = held(classicHolder)
		s := consumerJoin("g", "s")
		s.InstanceID = &inst
		if resp := h.hb(s); resp.ErrorCode != 0 {
			t.Fatalf("a consumer-protocol member taking over the classic member's instance id: %d %v", resp.ErrorCode, resp.ErrorMessage)
		}
		if held(classicHolder) != -1 || h.members("g") != 2 || held("s") != before {
			t.Fatalf("after the consumer-protocol replacement: classic member %d, members %d, s holds %d (want %d)", held(classicHolder), h.members("g"), held("s"), before)
		}
		h.checkOwners()
	})
}

// A classic member that joins a consumer group but sends no SyncGroup within its rebalance
// timeout is removed, as Kafka's consumer group sync timeout does, although its heartbeats keep
// its session alive; a member that syncs is kept.
func TestClassicMemberRemovedWithoutSyncGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		h.hb(consumerJoin("g", "a"))
		idle := cjoinReq("idle", -1)
		idle.Version = 3 // no MEMBER_ID_REQUIRED round trip
		synced := cjoinReq("synced", -1)
		synced.Version = 3
		ji, js := h.cjoin(idle), h.cjoin(synced)
		if ji.Code != 0 || js.Code != 0 {
			t.Fatalf("joins: %d %d", ji.Code, js.Code)
		}
		if s := h.csync(js.MemberID, js.Generation, nil); s.Code != 0 {
			t.Fatalf("sync: %d", s.Code)
		}
		present := func(id string) bool {
			v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) { return m.Consumer.Groups["g"].Members[id] != nil, nil })
			return v.(bool)
		}
		// 25 s: past the 20 s rebalance timeout, each gap within the classic 10 s session (a's
		// is 45 s, so the group stays a consumer group).
		for range 5 {
			time.Sleep(5 * time.Second)
			h.cbeat(ji.MemberID, ji.Generation)
			h.cbeat(js.MemberID, js.Generation)
		}
		synctest.Wait()
		if present(ji.MemberID) {
			t.Fatal("the classic member that never synced is still in the group after its rebalance timeout")
		}
		if !present(js.MemberID) {
			t.Fatal("the classic member that synced was removed")
		}
	})
}

// The downgrade also follows a consumer-protocol member fenced by its session timer (the classic
// member keeps its own session alive) and one removed by LeaveGroup, and writes the classic
// member's assignment although neither brings a catalog.
func TestConsumerDowngradeAfterFenceOrLeaveGroup(t *testing.T) {
	for _, how := range []string{"session timeout", "LeaveGroup"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newConsumerHarness(t)
				defer h.close()
				c1, gen := stableClassicCG(t, h)
				if a := h.hb(consumerJoin("g", "a")); a.ErrorCode != 0 {
					t.Fatalf("upgrade: %d", a.ErrorCode)
				}
				owned := []int32{0, 1, 2, 3}
				if how == "LeaveGroup" {
					v, _ := h.s.Write(context.Background(), LeaveGroup(classic.DefaultConfig(), "g", []classic.LeaveMember{{MemberID: "a"}}))
					if r := v.(LeaveResult); r.Members[0] != 0 {
						t.Fatalf("LeaveGroup: %+v", r)
					}
				} else {
					for range 10 { // 50 s: past a's 45 s session, within c1's 10 s between heartbeats
						time.Sleep(5 * time.Second)
						code := h.cbeat(c1, gen)
						if _, _, downgraded := h.classicState(); downgraded {
							break
						}
						if code == kerr.RebalanceInProgress.Code {
							// Told to rejoin, c1 does (its join timer would remove it otherwise),
							// reporting what it holds, and keeps what its SyncGroup gives it.
							r := h.cjoin(cjoinReq(c1, gen, owned...))
							if r.Code != 0 {
								t.Fatalf("rejoin: %d", r.Code)
							}
							gen = r.Generation
							s := h.csync(c1, gen, nil)
							if s.Code != 0 {
								t.Fatalf("sync: %d", s.Code)
							}
							owned = decodeAssignment(t, s.Assignment)
						}
					}
					synctest.Wait()
				}
				if st, g2, live := h.classicState(); !live || st != classic.PreparingRebalance || g2 < gen || h.members("g") != -1 {
					t.Fatalf("downgrade after %s: classic %v state %v generation %d, consumer members %d", how, live, st, g2, h.members("g"))
				}
				// No request brought a catalog to this downgrade: the one the group's last
				// heartbeat used names c1's partitions (a subscription by topic names, no regex).
				av, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) { return m.Classic.Group("g").Members[0].Assignment, nil })
				if got := decodeAssignment(t, av.([]byte)); !reflect.DeepEqual(got, owned) {
					t.Fatalf("c1's assignment in the classic group after %s: %v, want the partitions it still holds, %v", how, got, owned)
				}
			})
		})
	}
}

// A static classic member replacing the last consumer-protocol member with a different
// subscription makes the target stale (the group epoch goes up): as in Kafka 4.4 the classic
// group then prepares a rebalance at the consumer group's epoch and the joiner, reconciled to
// nothing, is answered at the replacement's epoch 0. Under the upgrade policy the replacement
// happens and the group stays a consumer group.
func TestDowngradeByStaticClassicReplacementStaleOrRefused(t *testing.T) {
	underPolicies(t, []string{"bidirectional", "upgrade"}, func(t *testing.T, h *consumerHarness, policy string) {
		inst := "i1"
		a := consumerJoin("g", "a")
		a.InstanceID = &inst
		if r := h.hb(a); r.ErrorCode != 0 || r.MemberEpoch != 2 {
			t.Fatalf("static consumer member: %+v", r)
		}
		j := cjoinReq("", -1)
		j.InstanceID = &inst
		md := kmsg.NewConsumerMemberMetadata()
		md.Version, md.Topics, md.Generation = 3, []string{"bar", "foo"}, -1
		j.Protocols = []classic.Protocol{{Name: "cooperative-sticky", Metadata: md.AppendTo(nil)}}
		r := h.cjoin(j)
		if r.Code != 0 {
			t.Fatalf("the replacing join: %+v", r)
		}
		st, gen, live := h.classicState()
		if policy == "upgrade" {
			if live || h.members("g") != 1 {
				t.Fatalf("under the upgrade policy: classic group %v, consumer members %d", live, h.members("g"))
			}
			return
		}
		if !live || st != classic.PreparingRebalance || gen != 2 || r.Generation != 0 || h.members("g") != -1 {
			t.Fatalf("stale downgrade: classic %v state %v generation %d, joiner at %d, consumer members %d", live, st, gen, r.Generation, h.members("g"))
		}
	})
}

// As Kafka 4.4's validateOnlineDowngradeWithFencedMembers, a consumer group left with classic
// members only whose downgrade group.max.size refused converts when one of those classic
// members goes and the rest fit.
func TestDowngradeWhenAClassicMemberLeavesAGroupThatNowFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		h.classicCfg = classic.DefaultConfig()
		h.classicCfg.MaxSize = 1
		h.restart()
		h.hb(consumerJoin("g", "a"))
		var ids []string
		for range 2 {
			j := cjoinReq("", -1)
			j.Version = 3 // no MEMBER_ID_REQUIRED round trip
			r := h.cjoin(j)
			if r.Code != 0 {
				t.Fatalf("classic join: %+v", r)
			}
			ids = append(ids, r.MemberID)
		}
		leave := consumerBeat("g", "a", -1, nil)
		if r := h.hb(leave); r.ErrorCode != 0 {
			t.Fatalf("leave: %+v", r)
		}
		if _, _, live := h.classicState(); live || h.members("g") != 2 {
			t.Fatalf("two classic members over group.max.size 1: classic group %v, consumer members %d", live, h.members("g"))
		}
		v, _ := h.s.Write(context.Background(), LeaveGroup(classic.DefaultConfig(), "g", []classic.LeaveMember{{MemberID: ids[1]}}))
		if r := v.(LeaveResult); r.Members[0] != 0 {
			t.Fatalf("LeaveGroup: %+v", r)
		}
		st, _, live := h.classicState()
		if !live || st != classic.PreparingRebalance || h.members("g") != -1 {
			t.Fatalf("after the classic member left: classic group %v (%v), consumer members %d", live, st, h.members("g"))
		}
	})
}

// underPolicies runs test once for each of policies (group.consumer.migration.policy), each in a
// synctest bubble of its own with a new shard whose machines take that policy.
func underPolicies(t *testing.T, policies []string, test func(t *testing.T, h *consumerHarness, policy string)) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newConsumerHarness(t)
				defer h.close()
				h.cfg.MigrationPolicy = policy
				h.restart() // the shard's machines take h.cfg
				test(t, h, policy)
			})
		})
	}
}
