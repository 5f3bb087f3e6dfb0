package integration

import (
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online migration on the wire: a classic member (raw JoinGroup/SyncGroup/Heartbeat, the
// cooperative protocol) holds every partition of a classic group; a ConsumerGroupHeartbeat
// member joins and converts the group; the two settle on two partitions each, and after every
// response no partition is held by both; when the consumer-protocol member leaves, the group is
// a classic group again and the classic member rebalances alone.
func TestConsumerMigrationRawClassicAndConsumerMembers(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, append([]string{"group.initial.rebalance.delay.ms=0", "group.consumer.assignment.interval.ms=0"}, consumerKeys...)...)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 4)
	c := dialRaw(t, d.Addr)
	corr := int32(0)
	call := func(req kmsg.Request, resp kmsg.Response, v int16) {
		t.Helper()
		corr++
		c.write(frame(req, v, corr, strPtrT("migration"), nil))
		c.read(resp, v, corr)
	}

	// Classic side: the member's view of what it owns.
	var c1 string
	var gen int32
	var c1Owned []int32
	meta := func(owned []int32) []byte {
		md := kmsg.NewConsumerMemberMetadata()
		md.Version, md.Topics, md.Generation = 3, []string{"t"}, gen
		if len(owned) > 0 {
			md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: owned}}
		}
		return md.AppendTo(nil)
	}
	join := func() *kmsg.JoinGroupResponse {
		t.Helper()
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "g", c1, 10000, 10000, "consumer"
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: meta(c1Owned)}}
		resp := kmsg.NewPtrJoinGroupResponse()
		call(req, resp, 9)
		return resp
	}
	sync := func(assign map[string][]int32) []int32 {
		t.Helper()
		req := kmsg.NewPtrSyncGroupRequest()
		req.Group, req.MemberID, req.Generation = "g", c1, gen
		pt, pn := "consumer", "cooperative-sticky"
		req.ProtocolType, req.Protocol = &pt, &pn
		for id, ps := range assign {
			a := kmsg.NewConsumerMemberAssignment()
			a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: ps}}
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a.AppendTo(nil)})
		}
		resp := kmsg.NewPtrSyncGroupResponse()
		call(req, resp, 5)
		if resp.ErrorCode != 0 {
			t.Fatalf("SyncGroup: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(resp.MemberAssignment); err != nil {
			t.Fatalf("assignment bytes: %v", err)
		}
		var out []int32
		for _, tp := range a.Topics {
			out = append(out, tp.Partitions...)
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	beat := func() int16 {
		t.Helper()
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = "g", c1, gen
		resp := kmsg.NewPtrHeartbeatResponse()
		call(req, resp, 4)
		return resp.ErrorCode
	}
	// rejoin is what a cooperative client does on REBALANCE_IN_PROGRESS: JoinGroup reporting
	// what it owns, SyncGroup, and give up whatever the new assignment lacks.
	rejoin := func(assign map[string][]int32) {
		t.Helper()
		j := join()
		if j.ErrorCode != 0 {
			t.Fatalf("JoinGroup: %v", kerr.ErrorForCode(j.ErrorCode))
		}
		gen = j.Generation
		if j.LeaderID == c1 && assign == nil {
			assign = map[string][]int32{c1: c1Owned}
		}
		c1Owned = sync(assign)
	}

	// Consumer side.
	var aEpoch int32
	var aOwned []int32
	hb := func(epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = "g", "a-member-id-0000000000", epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 10000, []string{"t"}
		}
		if epoch >= 0 {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			if len(aOwned) > 0 {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicID(t, adm, "t"), Partitions: aOwned})
			}
		} else {
			req.RebalanceTimeoutMillis = -1
		}
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		call(req, resp, 1)
		if resp.ErrorCode != 0 {
			t.Fatalf("ConsumerGroupHeartbeat: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
		}
		aEpoch = resp.MemberEpoch
		if resp.Assignment != nil {
			aOwned = nil
			for _, tp := range resp.Assignment.Topics {
				aOwned = append(aOwned, tp.Partitions...)
			}
		}
		return resp
	}
	disjoint := func(step string) {
		t.Helper()
		for _, p := range c1Owned {
			for _, q := range aOwned {
				if p == q {
					t.Fatalf("%s: partition %d held by the classic member %v and the consumer member %v", step, p, c1Owned, aOwned)
				}
			}
		}
	}

	// A stable classic group: c1 takes every partition.
	j := join()
	if j.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first JoinGroup: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	c1 = j.MemberID
	rejoin(map[string][]int32{c1: {0, 1, 2, 3}})
	if len(c1Owned) != 4 {
		t.Fatalf("classic assignment %v", c1Owned)
	}

	// The upgrade, then both reconcile until each has two partitions.
	hb(0)
	disjoint("upgrade")
	if l, err := adm.ListGroups(ctxT(t)); err != nil || l["g"].GroupType != "consumer" {
		t.Fatalf("after the upgrade: %+v %v", l["g"], err)
	}
	// The operator's log line names the protocol the group moved to.
	d.waitLogged("converted classic group to consumer group", func(l map[string]any) bool { return l["group"] == "g" })
	deadline := time.Now().Add(20 * time.Second)
	for {
		switch code := beat(); code {
		case 0:
		case kerr.RebalanceInProgress.Code:
			rejoin(nil)
		default:
			t.Fatalf("Heartbeat: %v", kerr.ErrorForCode(code))
		}
		disjoint("classic member")
		hb(aEpoch)
		disjoint("consumer member")
		if len(c1Owned) == 2 && len(aOwned) == 2 && beat() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no settlement: classic %v, consumer %v", c1Owned, aOwned)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The downgrade: the consumer-protocol member leaves; c1 rebalances the classic group alone.
	hb(-1)
	aOwned = nil
	if l, err := adm.ListGroups(ctxT(t)); err != nil || l["g"].GroupType != "classic" || l["g"].State != "PreparingRebalance" {
		t.Fatalf("after the downgrade: %+v %v", l["g"], err)
	}
	d.waitLogged("converted consumer group to classic group, rebalance prepared", func(l map[string]any) bool { return l["group"] == "g" })
	if code := beat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("Heartbeat after the downgrade: %v", kerr.ErrorForCode(code))
	}
	rejoin(map[string][]int32{c1: {0, 1, 2, 3}})
	if len(c1Owned) != 4 || beat() != 0 {
		t.Fatalf("classic member alone: %v", c1Owned)
	}
}

func strPtrT(s string) *string { return &s }

func topicID(t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	md, err := adm.Metadata(ctxT(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	return md.Topics[topic].ID
}
