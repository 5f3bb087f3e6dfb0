package integration

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration details Kafka 4.4's GroupMetadataManager has and these tests hold
// coordinatord to (docs/consumer-groups.md, "Online migration"): the join timeout of a classic
// member told to rejoin, the downgrade a static classic member makes when it replaces the last
// consumer-protocol member, and downgrades decided right after a restart. Each simulated member
// has a franz-go client of its own (a JoinGroup may hold its connection).

// wireMember is one simulated member speaking the group protocol request by request.
type wireMember struct {
	t  *testing.T
	cl *kgo.Client
	// classic side
	id    string
	gen   int32
	owned []int32
	// consumer side
	epoch int32
}

func (d *daemon) wireMember(t *testing.T) *wireMember {
	return &wireMember{t: t, cl: d.client(kgo.RequestRetries(0))}
}

func (w *wireMember) do(req kmsg.Request) kmsg.Response {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := w.cl.Request(ctx, req)
	if err != nil {
		w.t.Fatalf("%T: %v", req, err)
	}
	return resp
}

func classicMetadata(topic string, gen int32, owned []int32) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics, md.Generation = 3, []string{topic}, gen
	if len(owned) > 0 {
		md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: topic, Partitions: owned}}
	}
	return md.AppendTo(nil)
}

// join sends a cooperative-sticky JoinGroup reporting what the member owns.
func (w *wireMember) join(group, topic string, instance *string, sessionMs, rebalanceMs int32) *kmsg.JoinGroupResponse {
	w.t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID, req.ProtocolType = group, w.id, instance, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = sessionMs, rebalanceMs
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: classicMetadata(topic, w.gen, w.owned)}}
	resp := w.do(req).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode == 0 || resp.ErrorCode == kerr.MemberIDRequired.Code {
		w.id = resp.MemberID
	}
	if resp.ErrorCode == 0 {
		w.gen = resp.Generation
	}
	return resp
}

func decodePartitions(t *testing.T, topic string, b []byte) []int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("assignment bytes %x: %v", b, err)
	}
	out := []int32{}
	for _, tp := range a.Topics {
		if tp.Topic != topic {
			t.Fatalf("assignment of topic %q", tp.Topic)
		}
		out = append(out, tp.Partitions...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// sync sends SyncGroup (as leader, the given assignment for itself) and keeps what it is given.
func (w *wireMember) sync(group, topic string, mine []int32) *kmsg.SyncGroupResponse {
	w.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = group, w.id, w.gen
	pt, pn := "consumer", "cooperative-sticky"
	req.ProtocolType, req.Protocol = &pt, &pn
	if mine != nil {
		a := kmsg.NewConsumerMemberAssignment()
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: mine}}
		req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: w.id, MemberAssignment: a.AppendTo(nil)}}
	}
	resp := w.do(req).(*kmsg.SyncGroupResponse)
	if resp.ErrorCode == 0 {
		w.owned = decodePartitions(w.t, topic, resp.MemberAssignment)
	}
	return resp
}

func (w *wireMember) beat(group string) int16 {
	w.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, w.id, w.gen
	return w.do(req).(*kmsg.HeartbeatResponse).ErrorCode
}

// rejoin is what a cooperative client does when told to: JoinGroup with what it owns, then
// SyncGroup, keeping what the group gives it.
func (w *wireMember) rejoin(group, topic string, sessionMs, rebalanceMs int32) {
	w.t.Helper()
	if j := w.join(group, topic, nil, sessionMs, rebalanceMs); j.ErrorCode != 0 {
		w.t.Fatalf("rejoin: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	if s := w.sync(group, topic, nil); s.ErrorCode != 0 {
		w.t.Fatalf("sync after the rejoin: %v", kerr.ErrorForCode(s.ErrorCode))
	}
}

// stableClassic makes the member the only member of a stable classic group holding every partition.
func (w *wireMember) stableClassic(group, topic string, partitions int32, sessionMs, rebalanceMs int32) {
	w.t.Helper()
	if j := w.join(group, topic, nil, sessionMs, rebalanceMs); j.ErrorCode != kerr.MemberIDRequired.Code {
		w.t.Fatalf("first JoinGroup: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	if j := w.join(group, topic, nil, sessionMs, rebalanceMs); j.ErrorCode != 0 || j.LeaderID != w.id {
		w.t.Fatalf("JoinGroup: %v, leader %q", kerr.ErrorForCode(j.ErrorCode), j.LeaderID)
	}
	all := make([]int32, partitions)
	for i := range all {
		all[i] = int32(i)
	}
	if s := w.sync(group, topic, all); s.ErrorCode != 0 || len(w.owned) != int(partitions) {
		w.t.Fatalf("SyncGroup: %v, owned %v", kerr.ErrorForCode(s.ErrorCode), w.owned)
	}
}

// hb sends a ConsumerGroupHeartbeat reporting what the member owns; epoch 0 joins.
func (w *wireMember) hb(group, member string, instance *string, topic string, tid [16]byte, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
	w.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID, req.MemberEpoch = group, member, instance, epoch
	req.RebalanceTimeoutMillis = -1
	if epoch == 0 {
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 10000, []string{topic}
	}
	if epoch >= 0 {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if len(w.owned) > 0 && epoch > 0 {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tid, Partitions: w.owned})
		}
	}
	resp := w.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		w.t.Fatalf("ConsumerGroupHeartbeat: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	w.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		w.owned = []int32{}
		for _, tp := range resp.Assignment.Topics {
			w.owned = append(w.owned, tp.Partitions...)
		}
		sort.Slice(w.owned, func(i, j int) bool { return w.owned[i] < w.owned[j] })
	}
	return resp
}

func describeConsumerGroup(t *testing.T, w *wireMember, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	return w.do(req).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
}

func describeClassicGroup(t *testing.T, w *wireMember, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	return w.do(req).(*kmsg.DescribeGroupsResponse).Groups[0]
}

// settle runs the classic member c (rejoining when told) and the consumer member a until each
// holds half the partitions and the consumer group is Stable.
func settle(t *testing.T, c, a *wireMember, group, aID string, aInstance *string, topic string, tid [16]byte, partitions int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		switch code := c.beat(group); code {
		case 0:
		case kerr.RebalanceInProgress.Code:
			c.rejoin(group, topic, 10000, 10000)
		default:
			t.Fatalf("classic Heartbeat: %v", kerr.ErrorForCode(code))
		}
		a.hb(group, aID, aInstance, topic, tid, a.epoch)
		if len(c.owned) == partitions/2 && len(a.owned) == partitions/2 && c.beat(group) == 0 &&
			describeConsumerGroup(t, a, group).State == "Stable" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no settlement: classic %v, consumer %v", c.owned, a.owned)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A classic member inside a consumer group that is told to rejoin (its Heartbeat answered
// REBALANCE_IN_PROGRESS) and keeps heartbeating without a JoinGroup is fenced once its rebalance
// timeout has passed since the first such answer, as Kafka's
// scheduleConsumerGroupJoinTimeoutIfAbsent does, although its session never lapses: the group
// epoch goes up by one and the consumer-protocol member gets every partition.
func TestConsumerClassicMemberNotRejoiningIsFencedByItsJoinTimeout(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, append([]string{"group.initial.rebalance.delay.ms=0", "group.consumer.assignment.interval.ms=0"}, consumerKeys...)...)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 4)
	tid := topicID(t, adm, "t")
	c, a := d.wireMember(t), d.wireMember(t)
	// A 3 s rebalance timeout, a 10 s session kept alive by heartbeats every 200 ms.
	c.stableClassic("g", "t", 4, 10000, 3000)
	const aID = "a-member-id-0000000000"
	a.hb("g", aID, nil, "t", tid, 0) // the upgrade; c must give up two partitions
	before := describeConsumerGroup(t, a, "g")
	if before.ErrorCode != 0 || len(before.Members) != 2 {
		t.Fatalf("after the upgrade: %+v", before)
	}
	var told time.Time
	deadline := time.Now().Add(30 * time.Second)
	for {
		code := c.beat("g")
		if code == kerr.UnknownMemberID.Code {
			break
		}
		if code != kerr.RebalanceInProgress.Code {
			t.Fatalf("classic Heartbeat: %v, want REBALANCE_IN_PROGRESS until it is fenced", kerr.ErrorForCode(code))
		}
		if told.IsZero() {
			told = time.Now()
		}
		a.hb("g", aID, nil, "t", tid, a.epoch)
		if time.Now().After(deadline) {
			t.Fatal("the classic member that never rejoined is still in the group 30 s after it was told to rejoin")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if since := time.Since(told); since < 3*time.Second {
		t.Fatalf("fenced %v after the first REBALANCE_IN_PROGRESS, before its 3 s rebalance timeout", since)
	}
	after := describeConsumerGroup(t, a, "g")
	if len(after.Members) != 1 || after.Members[0].MemberID != aID || after.Epoch != before.Epoch+1 {
		t.Fatalf("after the join timeout: epoch %d (was %d), members %+v", after.Epoch, before.Epoch, after.Members)
	}
	for deadline := time.Now().Add(10 * time.Second); len(a.owned) != 4; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer member holds %v after the classic member was fenced", a.owned)
		}
		a.hb("g", aID, nil, "t", tid, a.epoch)
	}
	if l, err := adm.ListGroups(ctxT(t)); err != nil || l["g"].GroupType != "consumer" {
		t.Fatalf("the group after the fence: %+v %v", l["g"], err)
	}
}

// A static member that restarts with the classic protocol (JoinGroup with its instance id, no
// member id) while it was the consumer group's last consumer-protocol member downgrades the
// group as Kafka 4.4 does (validateOnlineDowngradeWithReplacedMember): it is answered at its
// epoch, which is the generation of the classic group the consumer group becomes, Stable (the
// target was current: no rebalance), and its SyncGroup hands it the partitions the member it
// replaced held; the other classic member goes on heartbeating, and the committed offsets stay.
func TestConsumerDowngradeByStaticClassicReplacement(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, append([]string{"group.initial.rebalance.delay.ms=0", "group.consumer.assignment.interval.ms=0"}, consumerKeys...)...)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 4)
	tid := topicID(t, adm, "t")
	c, a := d.wireMember(t), d.wireMember(t)
	c.stableClassic("g", "t", 4, 10000, 10000)
	inst := "instance-a"
	const aID = "a-member-id-0000000000"
	a.hb("g", aID, &inst, "t", tid, 0)
	settle(t, c, a, "g", aID, &inst, "t", tid, 4)
	held := append([]int32(nil), a.owned...)
	epoch := describeConsumerGroup(t, a, "g").Epoch

	// The consumer member commits (v9, its member epoch) before it goes.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "g", aID, a.epoch
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", TopicID: tid, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: held[0], Offset: 42, LeaderEpoch: -1}}}}
	if r := a.do(commit).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}

	// The same instance comes back as a classic consumer on a connection of its own.
	b := d.wireMember(t)
	j := b.join("g", "t", &inst, 10000, 10000)
	if j.ErrorCode != 0 || j.MemberID == "" || j.MemberID == aID || j.Generation != epoch || j.LeaderID != "" || len(j.Members) != 0 ||
		j.ProtocolType == nil || *j.ProtocolType != "consumer" || j.Protocol == nil || *j.Protocol != "cooperative-sticky" {
		t.Fatalf("the replacing JoinGroup: %+v (group epoch %d)", j, epoch)
	}
	l, err := adm.ListGroups(ctxT(t))
	if err != nil || l["g"].GroupType != "classic" || l["g"].State != "Stable" {
		t.Fatalf("after the replacement: %+v %v, want a Stable classic group", l["g"], err)
	}
	if s := b.sync("g", "t", nil); s.ErrorCode != 0 || !reflect.DeepEqual(b.owned, held) {
		t.Fatalf("the replacement's SyncGroup: %v, assignment %v, want the replaced member's %v", kerr.ErrorForCode(s.ErrorCode), b.owned, held)
	}
	if code := c.beat("g"); code != 0 {
		t.Fatalf("the other classic member's Heartbeat: %v", kerr.ErrorForCode(code))
	}
	desc := describeClassicGroup(t, c, "g")
	got := map[string][]int32{}
	for _, m := range desc.Members {
		got[m.MemberID] = decodePartitions(t, "t", m.MemberAssignment)
	}
	if desc.State != "Stable" || len(got) != 2 || !reflect.DeepEqual(got[b.id], held) || !reflect.DeepEqual(got[c.id], c.owned) {
		t.Fatalf("DescribeGroups: state %s, assignments %v; want %s %v and %s %v", desc.State, got, b.id, held, c.id, c.owned)
	}
	offs, err := adm.FetchOffsets(ctxT(t), "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("t", held[0]); !ok || o.At != 42 {
		t.Fatalf("offset of t/%d after the downgrade: %+v %v", held[0], o, ok)
	}
}

// A downgrade decided right after a restart, before any member of the group has sent a
// request, by a LeaveGroup of the consumer-protocol member or by its session timeout, writes
// the classic member's real assignment (DescribeGroups shows it) although no request brought a
// catalog to it.
func TestConsumerDowngradeAfterRestartKeepsAssignments(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"LeaveGroup", "session timeout"} {
		t.Run(how, func(t *testing.T) {
			d := startDaemon(t, append([]string{"group.initial.rebalance.delay.ms=0", "group.consumer.assignment.interval.ms=0"}, consumerKeys...)...)
			adm := kadm.NewClient(d.client())
			createTopic(t, adm, "t", 4)
			tid := topicID(t, adm, "t")
			c, a := d.wireMember(t), d.wireMember(t)
			c.stableClassic("g", "t", 4, 30000, 10000)
			const aID = "a-member-id-0000000000"
			a.hb("g", aID, nil, "t", tid, 0)
			settle(t, c, a, "g", aID, nil, "t", tid, 4)
			owned := append([]int32(nil), c.owned...)

			if code := d.stop(); code != 0 {
				t.Fatalf("coordinatord exited %d on SIGTERM", code)
			}
			d.start(append([]string{"group.initial.rebalance.delay.ms=0", "group.consumer.assignment.interval.ms=0"}, consumerKeys...)...)
			admin := d.wireMember(t)
			if how == "LeaveGroup" {
				leave := kmsg.NewPtrLeaveGroupRequest()
				leave.Group = "g"
				leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: aID}}
				if r := admin.do(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
					t.Fatalf("LeaveGroup: %+v", r)
				}
			}
			// Otherwise a's 8 s session lapses; c's 30 s one does not, nobody heartbeats.
			var desc kmsg.DescribeGroupsResponseGroup
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				desc = describeClassicGroup(t, admin, "g")
				if desc.ErrorCode == 0 && desc.ProtocolType == "consumer" && len(desc.Members) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no downgrade after %s: %+v", how, desc)
				}
			}
			if desc.State != "PreparingRebalance" || desc.Members[0].MemberID != c.id {
				t.Fatalf("the classic group after %s: state %s, members %+v", how, desc.State, desc.Members)
			}
			if got := decodePartitions(t, "t", desc.Members[0].MemberAssignment); !reflect.DeepEqual(got, owned) {
				t.Fatalf("the classic member's assignment after a downgrade by %s after a restart: %v, want %v", how, got, owned)
			}
		})
	}
}
