package integration

import (
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
	d := startStreamsDaemon(t, "group.streams.migration.policy=DISABLED", "group.streams.initial.rebalance.delay.ms=0")
	policyIsKafka44(t, d, "app", "sg")
}

// The group config streams.migration.policy overrides the broker key for one group; an unknown
// value is refused with INVALID_CONFIG.
func TestMigrationPolicyGroupOverride(t *testing.T) {
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
