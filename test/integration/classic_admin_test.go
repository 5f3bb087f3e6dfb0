package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kadm's ListGroups/DescribeGroups/DeleteGroups over classic and simple groups (spec
// coordinator-apis §2.7, T47-T50).
func TestClassicKadmListDescribeDelete(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 4)
	members := []*groupMember{d.groupMember(t, "live", "t"), d.groupMember(t, "live", "t")}
	waitBalanced(t, adm, "live", members, 4)
	// A simple group: offsets committed from outside group management.
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: "t", Partition: 0, At: 7, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctxT(t), "simple", o); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	listed, err := adm.ListGroups(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if l := listed["live"]; l.ProtocolType != "consumer" || l.State != "Stable" {
		t.Fatalf("live listed as %+v", l)
	}
	if l, ok := listed["simple"]; !ok || l.ProtocolType != "" || l.State != "Empty" {
		t.Fatalf("simple listed as %+v (%v)", l, ok)
	}
	if l, _ := adm.ListGroups(ctxT(t), "STABLE"); len(l) != 1 || l["live"].Group != "live" {
		t.Fatalf("state filter: %+v", l)
	}

	described, err := adm.DescribeGroups(ctxT(t), "live", "simple", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if g := described["live"]; g.State != "Stable" || len(g.Members) != 2 || len(g.AssignedPartitions()["t"]) != 4 {
		t.Fatalf("live described %+v", g)
	}
	if g := described["simple"]; g.State != "Empty" || g.ProtocolType != "" || g.Err != nil {
		t.Fatalf("simple described %+v", g)
	}
	if g := described["missing"]; g.State != "Dead" || !errorsIs(g.Err, kerr.GroupIDNotFound) {
		t.Fatalf("missing described %+v", g)
	}

	deleted, err := adm.DeleteGroups(ctxT(t), "live", "simple", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if !errorsIs(deleted["live"].Err, kerr.NonEmptyGroup) || deleted["simple"].Err != nil || !errorsIs(deleted["missing"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("delete: live %v simple %v missing %v", deleted["live"].Err, deleted["simple"].Err, deleted["missing"].Err)
	}
	// The simple group's offsets are gone with it (T50).
	fetched, err := adm.FetchOffsets(ctxT(t), "simple")
	if err != nil || len(fetched) != 0 {
		t.Fatalf("offsets after delete: %v %v", fetched, err)
	}
	// Once every member leaves, the classic group is Empty and can be deleted with its offsets.
	members[0].cl.CommitOffsetsSync(ctxT(t), map[string]map[int32]kgo.EpochOffset{"t": {members[0].partitions()[0]: {Epoch: -1, Offset: 3}}}, nil)
	for _, m := range members {
		m.cl.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		described, _ = adm.DescribeGroups(ctxT(t), "live")
		if described["live"].State == "Empty" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group did not become Empty: %s", described["live"].State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fetched, _ := adm.FetchOffsets(ctxT(t), "live"); len(fetched) == 0 {
		t.Fatal("the member's commit was not stored")
	}
	deleted, err = adm.DeleteGroups(ctxT(t), "live")
	if err != nil || deleted["live"].Err != nil {
		t.Fatalf("delete emptied group: %v %v", err, deleted["live"].Err)
	}
	if fetched, _ := adm.FetchOffsets(ctxT(t), "live"); len(fetched) != 0 {
		t.Fatalf("offsets survived the delete: %v", fetched)
	}
	if l, _ := adm.ListGroups(ctxT(t)); len(l) != 0 {
		t.Fatalf("groups left: %v", l)
	}
}

// Static members (KIP-345, spec §2.3): a kgo member restarted with the same instance id takes
// its place without a rebalance. Every member is restarted in turn, so one of them is the
// leader (JoinGroup v9 SkipAssignment).
func TestClassicKgoStaticMemberRestartKeepsGeneration(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 6)
	ids := []string{"i0", "i1", "i2"}
	var members []*groupMember
	// The eager range balancer: with cooperative-sticky, kgo may run a follow-up round of its
	// own at any time after the members first look balanced, which would bump the generation
	// for a reason that has nothing to do with the static restart under test.
	eager := kgo.Balancers(kgo.RangeBalancer())
	for _, id := range ids {
		members = append(members, d.groupMember(t, "g", "t", kgo.InstanceID(id), eager))
	}
	for i, id := range ids {
		gen := settledGeneration(t, adm, members, 6)
		oldID, _ := members[i].cl.GroupMetadata()
		owned := members[i].partitions()
		// kgo does not leave the group on Close for a static member.
		members[i].cl.Close()
		members[i] = d.groupMember(t, "g", "t", kgo.InstanceID(id), eager)
		after := waitBalanced(t, adm, "g", members, 6)
		memberID, gen2 := members[i].cl.GroupMetadata()
		if gen2 != gen {
			t.Fatalf("%s: generation %d after a static restart, want %d (no rebalance)", id, gen2, gen)
		}
		if got := members[i].partitions(); len(got) != len(owned) || got[0] != owned[0] {
			t.Fatalf("%s: restarted static member owns %v, had %v", id, got, owned)
		}
		found := false
		for _, m := range after.Members {
			found = found || (m.MemberID == memberID && m.InstanceID != nil && *m.InstanceID == id)
			if m.MemberID == oldID {
				t.Fatalf("%s: old member id still in the group", id)
			}
		}
		if !found || memberID == oldID {
			t.Fatalf("%s: new member id %s not described (old %s)", id, memberID, oldID)
		}
	}
}

// settledGeneration waits until the group is balanced and every member has reported the same
// generation twice in a row, 300 ms apart, and returns it.
func settledGeneration(t *testing.T, adm *kadm.Client, members []*groupMember, partitions int) int32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := int32(-1)
	for time.Now().Before(deadline) {
		waitBalanced(t, adm, "g", members, partitions)
		_, gen := members[0].cl.GroupMetadata()
		same := true
		for _, m := range members[1:] {
			if _, g := m.cl.GroupMetadata(); g != gen {
				same = false
			}
		}
		if same && gen == last {
			return gen
		}
		if same {
			last = gen
		} else {
			last = -1
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatal("the group never settled")
	return 0
}

// OffsetCommit's classic rows (spec §3.2 step 4) over the wire.
func TestClassicOffsetCommitValidation(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	createTopic(t, kadm.NewClient(d.client()), "t", 1)
	commit := func(version int16, group string, gen int32, member string, instance *string) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID, req.InstanceID = group, gen, member, instance
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rawCall(t, d, req, version, kmsg.NewPtrOffsetCommitResponse()).Topics[0].Partitions[0].ErrorCode
	}
	r := join(t, d, 5, joinReq("g", "", strp("i1")))
	wantCode(t, "CompletingRebalance", commit(7, "g", r.Generation, r.MemberID, nil), kerr.RebalanceInProgress.Code)
	wantCode(t, "sync", syncG(t, d, 5, "g", r.MemberID, nil, r.Generation, nil).ErrorCode, 0)
	for v := int16(2); v <= 9; v++ {
		wantCode(t, "valid member", commit(v, "g", r.Generation, r.MemberID, nil), 0)
		wantCode(t, "wrong generation", commit(v, "g", r.Generation+1, r.MemberID, nil), kerr.IllegalGeneration.Code)
		wantCode(t, "unknown member", commit(v, "g", r.Generation, "nobody", nil), kerr.UnknownMemberID.Code)
		wantCode(t, "admin commit on a group with members", commit(v, "g", -1, "", nil), kerr.UnknownMemberID.Code)
		if v >= 7 {
			wantCode(t, "fenced instance", commit(v, "g", r.Generation, "other", strp("i1")), kerr.FencedInstanceID.Code)
			wantCode(t, "valid static", commit(v, "g", r.Generation, r.MemberID, strp("i1")), 0)
		}
	}
	// Once the member left the group is Empty: admin commits are accepted again.
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Group = "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.InstanceID = strp("i1")
	lreq.Members = append(lreq.Members, lm)
	rawCall(t, d, lreq, 3, kmsg.NewPtrLeaveGroupResponse())
	waitState(t, d, "g", "Empty")
	wantCode(t, "admin commit on Empty", commit(8, "g", -1, "", nil), 0)
	wantCode(t, "old member on Empty", commit(8, "g", r.Generation, r.MemberID, nil), kerr.UnknownMemberID.Code)
}

// A group caught mid-rebalance by kill -9: the parked JoinGroup dies with the process, but the
// restarted daemon knows the group as it was last made durable (PreparingRebalance, with the
// newcomer awaiting the barrier), re-arms its timers and completes the barrier when the old
// member rejoins.
func TestClassicGroupInRebalanceSurvivesRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	member, gen := stableRaw(t, d, "g", nil)
	go func() {
		c := dialRaw(t, d.Addr)
		c.write(frame(joinReq("g", "", nil), 3, 1, strp("sim"), nil))
		c.readFrame() // the kill closes it
	}()
	waitState(t, d, "g", "PreparingRebalance")
	d.kill()
	d.start("group.initial.rebalance.delay.ms=0")
	waitState(t, d, "g", "PreparingRebalance")
	// The old member rejoins: the barrier completes with it and the newcomer that was parked
	// when the process died (it is still a member awaiting the barrier).
	r := join(t, d, 3, joinReq("g", member, nil))
	if r.ErrorCode != 0 || r.Generation != gen+1 {
		t.Fatalf("rejoin after restart: %+v", r)
	}
}

// Kafka accepts an OffsetCommit with the empty group id (old clients' simple groups), lists the
// group "" it makes and deletes it with DeleteGroups like any other. An operator must be able to
// remove it: until it is gone, kafka-consumer-groups.sh --describe --all-groups fails on it (its
// ConsumerGroupDescribe of "" is INVALID_GROUP_ID, on Kafka as here).
func TestEmptyGroupIDCommittedThenDeleted(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	deleted, err := adm.DeleteGroups(ctxT(t), "")
	if err != nil || !errorsIs(deleted[""].Err, kerr.GroupIDNotFound) {
		t.Fatalf("deleting the group \"\" before it exists: %v %v, want GROUP_ID_NOT_FOUND", err, deleted[""].Err)
	}
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: "t", Partition: 0, At: 5, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctxT(t), "", o); err != nil || r.Error() != nil {
		t.Fatalf("commit to the group \"\": %v %v", err, r.Error())
	}
	if l, err := adm.ListGroups(ctxT(t)); err != nil || l[""].State != "Empty" {
		t.Fatalf("the group \"\" listed as %+v (%v), want Empty", l[""], err)
	}
	deleted, err = adm.DeleteGroups(ctxT(t), "")
	if err != nil || deleted[""].Err != nil {
		t.Fatalf("deleting the group \"\": %v %v, want it deleted", err, deleted[""].Err)
	}
	if l, err := adm.ListGroups(ctxT(t)); err != nil || len(l) != 0 {
		t.Fatalf("groups after deleting \"\": %v %v", l, err)
	}
	if fetched, err := adm.FetchOffsets(ctxT(t), ""); err != nil || len(fetched) != 0 {
		t.Fatalf("offsets of \"\" after its delete: %v %v", fetched, err)
	}
}
