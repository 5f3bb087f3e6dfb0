package integration

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicJoin sends a JoinGroup v4 for a new member on a fresh connection.
func classicJoin(t *testing.T, addr, group string) *kmsg.JoinGroupResponse {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = group, 10000, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 1}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	c.write(frame(req, 4, 1, strp("c"), nil))
	resp := kmsg.NewPtrJoinGroupResponse()
	c.read(resp, 4, 1)
	return resp
}

// topology-description §6.6 and streams-groups §11.2: a classic JoinGroup on an empty streams
// group whose description the plugin holds deletes the description first. While the plugin's
// delete fails, joins get REBALANCE_IN_PROGRESS and the group stays a streams group; retries
// inside the back-off window do not call the plugin again. Once the delete works, the join
// converts the group.
func TestTopologyDescription6_6_ClassicJoinReleasesDescriptionFirst(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	d := startStreamsDaemon(t, append(httpPluginSettings(svc), "offsets.retention.check.interval.ms=300")...)
	createStreamsTopics(t, d.Addr, 2, "conv-in-0")
	m, _ := joinTopo(t, d.Addr, "conv", "m1")
	if r := pushTopo(t, d.Addr, "conv", "m1", 0, sampleDescription("conv")); r.ErrorCode != 0 {
		t.Fatalf("push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	if r := m.leave(); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}

	svc.set(func(s *topoService) { s.deleteStatus = 500 })
	if r := classicJoin(t, d.Addr, "conv"); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("join while the plugin cannot delete: %d, want REBALANCE_IN_PROGRESS", r.ErrorCode)
	}
	_, deletes, _ := svc.count()
	if deletes == 0 {
		t.Fatal("the plugin was never asked to delete the description")
	}
	if r := classicJoin(t, d.Addr, "conv"); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("retry inside the back-off window: %d, want REBALANCE_IN_PROGRESS", r.ErrorCode)
	}
	if _, again, _ := svc.count(); again != deletes {
		t.Fatalf("a retry inside the back-off window called the plugin again (%d deletes, was %d)", again, deletes)
	}
	if g := describeTopo(t, d.Addr, "conv")[0]; g.ErrorCode != 0 {
		t.Fatalf("the streams group must stay while its description is held: %d", g.ErrorCode)
	}
	// Once the plugin deletes again, the periodic cleanup releases the description and clears
	// the window, and a join gets through.
	svc.set(func(s *topoService) { s.deleteStatus = 0 })
	waitFor(t, "a classic join after the description is released", func() bool {
		return classicJoin(t, d.Addr, "conv").ErrorCode == kerr.MemberIDRequired.Code
	})
	if _, _, stored := svc.count(); stored != 0 {
		t.Fatalf("the plugin still holds %d descriptions", stored)
	}
}

// Without a held description, a JoinGroup converts an empty streams group at once; one with
// members refuses with INCONSISTENT_GROUP_PROTOCOL (streams-groups §11.2).
func TestStreamsSpec11_2_ClassicJoinConvertsOnlyEmptyGroups(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t)
	createStreamsTopics(t, d.Addr, 2, "cv-in-0")
	m, _ := joinTopo(t, d.Addr, "cv", "m1")
	if r := classicJoin(t, d.Addr, "cv"); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("join to a streams group with members: %d", r.ErrorCode)
	}
	m.leave()
	if r := classicJoin(t, d.Addr, "cv"); r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("join to an empty streams group: %d, want MEMBER_ID_REQUIRED of a new classic group", r.ErrorCode)
	}
	if g := describeTopo(t, d.Addr, "cv")[0]; g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("the streams group survived the conversion: %d", g.ErrorCode)
	}
}
