package integration

import (
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exact-bytes tests of the classic group APIs (spec coordinator-apis §2.8): every error code of
// the per-API tables, per request version, driven by simulated members on raw connections.

var rawCorr atomic.Int32

// call sends one request on a fresh connection and decodes the answer; parked requests
// (JoinGroup, SyncGroup) block until the group answers them.
func rawCall[R kmsg.Response](t *testing.T, d *daemon, req kmsg.Request, version int16, resp R) R {
	t.Helper()
	c := dialRaw(t, d.Addr)
	corr := rawCorr.Add(1)
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	c.write(frame(req, version, corr, strp("sim"), nil))
	c.read(resp, version, corr)
	return resp
}

func joinReq(group, member string, instance *string, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID = group, member, instance
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 5000
	req.ProtocolType = "consumer"
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name, jp.Metadata = p, []byte{0, 1, 2}
		req.Protocols = append(req.Protocols, jp)
	}
	return req
}

func join(t *testing.T, d *daemon, version int16, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	t.Helper()
	return rawCall(t, d, req, version, kmsg.NewPtrJoinGroupResponse())
}

func syncG(t *testing.T, d *daemon, version int16, group, member string, instance *string, gen int32, assign map[string]string) *kmsg.SyncGroupResponse {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = group, member, instance, gen
	if version >= 5 {
		req.ProtocolType, req.Protocol = strp("consumer"), strp("range")
	}
	for m, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return rawCall(t, d, req, version, kmsg.NewPtrSyncGroupResponse())
}

func heartbeatG(t *testing.T, d *daemon, version int16, group, member string, instance *string, gen int32) int16 {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = group, member, instance, gen
	return rawCall(t, d, req, version, kmsg.NewPtrHeartbeatResponse()).ErrorCode
}

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
	}
}

// stableRaw forms a Stable one-member group (v3 join: no MEMBER_ID_REQUIRED) and returns the
// member id and generation.
func stableRaw(t *testing.T, d *daemon, group string, instance *string) (string, int32) {
	t.Helper()
	v := int16(3)
	if instance != nil {
		v = 5
	}
	r := join(t, d, v, joinReq(group, "", instance))
	wantCode(t, "join", r.ErrorCode, 0)
	s := syncG(t, d, 3, group, r.MemberID, instance, r.Generation, map[string]string{r.MemberID: "A"})
	wantCode(t, "sync", s.ErrorCode, 0)
	return r.MemberID, r.Generation
}

func TestClassicJoinGroupErrorsPerVersion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	for v := int16(0); v <= 9; v++ {
		r := join(t, d, v, joinReq("", "", nil))
		wantCode(t, "empty group id", r.ErrorCode, kerr.InvalidGroupID.Code)
		if r.Generation != -1 || r.LeaderID != "" || (v >= 7) != (r.Protocol == nil) || (v < 7 && *r.Protocol != "") {
			t.Fatalf("v%d error shape: generation %d leader %q protocol %v", v, r.Generation, r.LeaderID, r.Protocol)
		}
		req := joinReq("g-bounds", "", nil)
		req.SessionTimeoutMillis = 5999
		wantCode(t, "session 5999", join(t, d, v, req).ErrorCode, kerr.InvalidSessionTimeout.Code)
		req.SessionTimeoutMillis = 1800001
		wantCode(t, "session 1800001", join(t, d, v, req).ErrorCode, kerr.InvalidSessionTimeout.Code)
		wantCode(t, "unknown member, missing group", join(t, d, v, joinReq("g-missing", "m-1", nil)).ErrorCode, kerr.UnknownMemberID.Code)
	}
	// T29/T31/T32: two-phase join only for dynamic v4+ members.
	r := join(t, d, 4, joinReq("g4", "", nil))
	wantCode(t, "v4 first join", r.ErrorCode, kerr.MemberIDRequired.Code)
	if !strings.HasPrefix(r.MemberID, "sim-") || r.Generation != -1 {
		t.Fatalf("MEMBER_ID_REQUIRED answer: member %q generation %d", r.MemberID, r.Generation)
	}
	r = join(t, d, 4, joinReq("g4", r.MemberID, nil))
	wantCode(t, "v4 rejoin", r.ErrorCode, 0)
	if r.Generation != 1 || r.LeaderID != r.MemberID || len(r.Members) != 1 {
		t.Fatalf("v4 rejoin: %+v", r)
	}
	r = join(t, d, 3, joinReq("g3", "", nil))
	wantCode(t, "v3 join", r.ErrorCode, 0)
	r = join(t, d, 5, joinReq("g5", "", strp("i1")))
	if r.ErrorCode != 0 || !strings.HasPrefix(r.MemberID, "i1-") {
		t.Fatalf("static join: %v %q", r.ErrorCode, r.MemberID)
	}
	// INCONSISTENT_GROUP_PROTOCOL: another protocol type, no common protocol, none offered.
	other := joinReq("g3", "", nil)
	other.ProtocolType = "connect"
	wantCode(t, "protocol type", join(t, d, 3, other).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	wantCode(t, "no common protocol", join(t, d, 3, joinReq("g3", "", nil, "sticky")).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	none := joinReq("g-new", "", nil)
	none.Protocols = nil
	wantCode(t, "no protocols", join(t, d, 3, none).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	// FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID for a known group.
	wantCode(t, "instance mapped to another member", join(t, d, 5, joinReq("g5", "someone-else", strp("i1"))).ErrorCode, kerr.FencedInstanceID.Code)
	wantCode(t, "unknown instance", join(t, d, 5, joinReq("g5", "x", strp("i9"))).ErrorCode, kerr.UnknownMemberID.Code)
	wantCode(t, "unknown member", join(t, d, 3, joinReq("g3", "nobody", nil)).ErrorCode, kerr.UnknownMemberID.Code)
	// GROUP_MAX_SIZE_REACHED (group.max.size=1).
	small := startDaemon(t, "group.initial.rebalance.delay.ms=0", "group.max.size=1")
	stableRaw(t, small, "g", nil)
	wantCode(t, "second member", join(t, small, 3, joinReq("g", "", nil)).ErrorCode, kerr.GroupMaxSizeReached.Code)
}

// Bad input: group ids of 0 bytes (INVALID_GROUP_ID above) and 32 KiB.
func TestClassicHugeGroupID(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	id := strings.Repeat("g", 32<<10)
	r := join(t, d, 9, joinReq(id, "", nil))
	wantCode(t, "32 KiB group id", r.ErrorCode, kerr.MemberIDRequired.Code)
	r = join(t, d, 9, joinReq(id, r.MemberID, nil))
	wantCode(t, "32 KiB group id rejoin", r.ErrorCode, 0)
	wantCode(t, "sync", syncG(t, d, 5, id, r.MemberID, nil, r.Generation, nil).ErrorCode, 0)
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Groups = []string{id}
	got := rawCall(t, d, desc, 5, kmsg.NewPtrDescribeGroupsResponse())
	if g := got.Groups[0]; g.Group != id || g.State != "Stable" || len(g.Members) != 1 {
		t.Fatalf("describe: %s %d", g.State, len(g.Members))
	}
}

func TestClassicSyncGroupErrorsPerVersion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	member, gen := stableRaw(t, d, "g", nil)
	static, sgen := stableRaw(t, d, "gs", strp("i1"))
	for v := int16(0); v <= 5; v++ {
		wantCode(t, "empty group id", syncG(t, d, v, "", member, nil, gen, nil).ErrorCode, kerr.InvalidGroupID.Code)
		wantCode(t, "missing group", syncG(t, d, v, "nope", member, nil, gen, nil).ErrorCode, kerr.UnknownMemberID.Code)
		wantCode(t, "unknown member", syncG(t, d, v, "g", "nobody", nil, gen, nil).ErrorCode, kerr.UnknownMemberID.Code)
		wantCode(t, "wrong generation", syncG(t, d, v, "g", member, nil, gen+1, nil).ErrorCode, kerr.IllegalGeneration.Code)
		ok := syncG(t, d, v, "g", member, nil, gen, nil)
		if ok.ErrorCode != 0 || string(ok.MemberAssignment) != "A" || (v >= 5 && (ok.Protocol == nil || *ok.Protocol != "range")) {
			t.Fatalf("v%d stable sync: %+v", v, ok)
		}
		if v >= 3 {
			wantCode(t, "fenced instance", syncG(t, d, v, "gs", "someone", strp("i1"), sgen, nil).ErrorCode, kerr.FencedInstanceID.Code)
			wantCode(t, "static sync", syncG(t, d, v, "gs", static, strp("i1"), sgen, nil).ErrorCode, 0)
		}
	}
	// v5: protocol name missing or different (T42). Kafka refuses a v5 request without them
	// before looking at the group, so even an unknown group or member gets this code.
	bare := kmsg.NewPtrSyncGroupRequest()
	bare.Group, bare.MemberID, bare.Generation = "nope", "nobody", 9
	wantCode(t, "v5 without protocol, unknown group", rawCall(t, d, bare, 5, kmsg.NewPtrSyncGroupResponse()).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation, req.ProtocolType = "g", member, gen, strp("consumer")
	wantCode(t, "v5 without protocol", rawCall(t, d, req, 5, kmsg.NewPtrSyncGroupResponse()).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	req.Protocol = strp("sticky")
	wantCode(t, "v5 other protocol", rawCall(t, d, req, 5, kmsg.NewPtrSyncGroupResponse()).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	// REBALANCE_IN_PROGRESS: a second member parks in the barrier; the first syncs.
	done := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { done <- join(t, d, 3, joinReq("g", "", nil)) }()
	waitState(t, d, "g", "PreparingRebalance")
	wantCode(t, "sync while rebalancing", syncG(t, d, 3, "g", member, nil, gen, nil).ErrorCode, kerr.RebalanceInProgress.Code)
	wantCode(t, "heartbeat while rebalancing", heartbeatG(t, d, 3, "g", member, nil, gen), kerr.RebalanceInProgress.Code)
	first := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { first <- join(t, d, 3, joinReq("g", member, nil)) }()
	for _, r := range []*kmsg.JoinGroupResponse{<-done, <-first} {
		if r.ErrorCode != 0 || r.Generation != gen+1 {
			t.Fatalf("rejoin: %+v", r)
		}
	}
}

// waitState polls DescribeGroups until the group is in state.
func waitState(t *testing.T, d *daemon, group, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		if rawCall(t, d, req, 5, kmsg.NewPtrDescribeGroupsResponse()).Groups[0].State == state {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("group %s never reached %s", group, state)
}

func TestClassicHeartbeatErrorsPerVersion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	member, gen := stableRaw(t, d, "g", nil)
	_, sgen := stableRaw(t, d, "gs", strp("i1"))
	for v := int16(0); v <= 4; v++ {
		wantCode(t, "empty group id", heartbeatG(t, d, v, "", member, nil, gen), kerr.InvalidGroupID.Code)
		wantCode(t, "missing group", heartbeatG(t, d, v, "nope", member, nil, gen), kerr.UnknownMemberID.Code)
		wantCode(t, "unknown member", heartbeatG(t, d, v, "g", "nobody", nil, gen), kerr.UnknownMemberID.Code)
		wantCode(t, "old generation", heartbeatG(t, d, v, "g", member, nil, gen-1), kerr.IllegalGeneration.Code)
		wantCode(t, "stable", heartbeatG(t, d, v, "g", member, nil, gen), 0)
		if v >= 3 {
			wantCode(t, "fenced", heartbeatG(t, d, v, "gs", "other", strp("i1"), sgen), kerr.FencedInstanceID.Code)
		}
	}
	// CompletingRebalance answers NONE (T40).
	r := join(t, d, 3, joinReq("gc", "", nil))
	wantCode(t, "completing", heartbeatG(t, d, 4, "gc", r.MemberID, nil, r.Generation), 0)
}

func TestClassicLeaveGroupPerVersion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group, req.MemberID = "nope", "m"
		wantCode(t, "missing group (T46)", rawCall(t, d, req, v, kmsg.NewPtrLeaveGroupResponse()).ErrorCode, kerr.UnknownMemberID.Code)
		req.Group = ""
		wantCode(t, "empty group id", rawCall(t, d, req, v, kmsg.NewPtrLeaveGroupResponse()).ErrorCode, kerr.InvalidGroupID.Code)
		member, _ := stableRaw(t, d, "g0", nil)
		req.Group, req.MemberID = "g0", "nobody"
		wantCode(t, "unknown member", rawCall(t, d, req, v, kmsg.NewPtrLeaveGroupResponse()).ErrorCode, kerr.UnknownMemberID.Code)
		req.MemberID = member
		wantCode(t, "leave", rawCall(t, d, req, v, kmsg.NewPtrLeaveGroupResponse()).ErrorCode, 0)
		waitState(t, d, "g0", "Empty")
	}
	for v := int16(3); v <= 5; v++ {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = "nope"
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = "m"
		req.Members = []kmsg.LeaveGroupRequestMember{lm}
		resp := rawCall(t, d, req, v, kmsg.NewPtrLeaveGroupResponse())
		if resp.ErrorCode != 0 || len(resp.Members) != 1 || resp.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("v%d missing group: %+v", v, resp)
		}
		member, _ := stableRaw(t, d, "g3", nil)
		stat, _ := stableRaw(t, d, "g3s", strp("i3"))
		_ = stat
		var members []kmsg.LeaveGroupRequestMember
		for _, m := range []struct {
			id   string
			inst *string
		}{{member, nil}, {"unknown-id", nil}} {
			x := kmsg.NewLeaveGroupRequestMember()
			x.MemberID, x.InstanceID = m.id, m.inst
			members = append(members, x)
		}
		req.Group, req.Members = "g3", members
		resp = rawCall(t, d, req, v, kmsg.NewPtrLeaveGroupResponse())
		if resp.ErrorCode != 0 || resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("v%d leave: %+v", v, resp)
		}
		x := kmsg.NewLeaveGroupRequestMember()
		x.MemberID, x.InstanceID = "bogus", strp("i3")
		req.Group, req.Members = "g3s", []kmsg.LeaveGroupRequestMember{x}
		resp = rawCall(t, d, req, v, kmsg.NewPtrLeaveGroupResponse())
		wantCode(t, "fenced instance", resp.Members[0].ErrorCode, kerr.FencedInstanceID.Code)
		x.MemberID = ""
		req.Members = []kmsg.LeaveGroupRequestMember{x}
		resp = rawCall(t, d, req, v, kmsg.NewPtrLeaveGroupResponse())
		wantCode(t, "leave by instance id", resp.Members[0].ErrorCode, 0)
		waitState(t, d, "g3s", "Empty")
		waitState(t, d, "g3", "Empty")
	}
}

func TestClassicDescribeGroupsPerVersion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	member, _ := stableRaw(t, d, "g", strp("i1"))
	for v := int16(0); v <= 6; v++ {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"g", "missing"}
		req.IncludeAuthorizedOperations = true
		resp := rawCall(t, d, req, v, kmsg.NewPtrDescribeGroupsResponse())
		g, missing := resp.Groups[0], resp.Groups[1]
		if g.ErrorCode != 0 || g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol != "range" || len(g.Members) != 1 {
			t.Fatalf("v%d stable group: %+v", v, g)
		}
		m := g.Members[0]
		if m.MemberID != member || m.ClientID != "sim" || m.ClientHost != "/127.0.0.1" || string(m.MemberAssignment) != "A" || string(m.ProtocolMetadata) != "\x00\x01\x02" {
			t.Fatalf("v%d member: %+v", v, m)
		}
		if v >= 4 && (m.InstanceID == nil || *m.InstanceID != "i1") {
			t.Fatalf("v%d instance id: %v", v, m.InstanceID)
		}
		wantOps := int32(math.MinInt32)
		if v >= 3 {
			wantOps = 3400
		}
		if g.AuthorizedOperations != wantOps {
			t.Fatalf("v%d authorized operations %d, want %d", v, g.AuthorizedOperations, wantOps)
		}
		// T47: missing group. Below v6 it has no error, so it gets the bitfield too.
		if v >= 6 {
			wantOps = math.MinInt32
		}
		if missing.State != "Dead" || missing.AuthorizedOperations != wantOps {
			t.Fatalf("v%d missing: %+v", v, missing)
		}
		if v >= 6 {
			if missing.ErrorCode != kerr.GroupIDNotFound.Code || missing.ErrorMessage == nil {
				t.Fatalf("v6 missing: %+v", missing)
			}
		} else {
			wantCode(t, "missing below v6", missing.ErrorCode, 0)
		}
	}
}

func TestClassicListAndDeleteGroupsPerVersion(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	stableRaw(t, d, "stable", nil)
	r := join(t, d, 3, joinReq("completing", "", nil))
	wantCode(t, "join", r.ErrorCode, 0)
	list := func(v int16, states, types []string) map[string]kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter, req.TypesFilter = states, types
		resp := rawCall(t, d, req, v, kmsg.NewPtrListGroupsResponse())
		wantCode(t, "list", resp.ErrorCode, 0)
		out := map[string]kmsg.ListGroupsResponseGroup{}
		for _, g := range resp.Groups {
			out[g.Group] = g
		}
		return out
	}
	for v := int16(0); v <= 5; v++ {
		all := list(v, nil, nil)
		if len(all) != 2 || all["stable"].ProtocolType != "consumer" {
			t.Fatalf("v%d list: %+v", v, all)
		}
		if v >= 4 {
			if all["stable"].GroupState != "Stable" || all["completing"].GroupState != "CompletingRebalance" {
				t.Fatalf("v%d states: %+v", v, all)
			}
			// T48: case-insensitive state filter.
			if got := list(v, []string{"stable"}, nil); len(got) != 1 || got["stable"].Group != "stable" {
				t.Fatalf("v%d stable filter: %+v", v, got)
			}
		}
		if v >= 5 {
			if got := list(v, nil, []string{"Classic"}); len(got) != 2 || got["stable"].GroupType != "classic" {
				t.Fatalf("v5 types filter: %+v", got)
			}
			if got := list(v, nil, []string{"consumer"}); len(got) != 0 {
				t.Fatalf("v5 consumer filter: %+v", got)
			}
		}
	}
	// DeleteGroups (T50), every version.
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"stable", "missing", "", "missing"}
		resp := rawCall(t, d, req, v, kmsg.NewPtrDeleteGroupsResponse())
		if len(resp.Groups) != 3 {
			t.Fatalf("v%d duplicates not collapsed: %+v", v, resp.Groups)
		}
		// "" is GROUP_ID_NOT_FOUND as in Kafka 4.4 (DeleteGroupsRequestTest), not INVALID_GROUP_ID.
		for i, want := range []int16{kerr.NonEmptyGroup.Code, kerr.GroupIDNotFound.Code, kerr.GroupIDNotFound.Code} {
			g := resp.Groups[i]
			wantCode(t, "delete "+g.Group, g.ErrorCode, want)
			if g.ErrorMessage != nil { // null, as Kafka 4.4 answers
				t.Fatalf("v%d error message %q", v, *g.ErrorMessage)
			}
		}
	}
}

// The group.* keys reach the groups (spec Appendix A, §2.4 T35): with a 1 s initial delay two
// members joining 300 ms apart form generation 1 together; session bounds follow the
// configured minimum and maximum.
func TestClassicConfigKeys(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=1000", "group.min.session.timeout.ms=1000", "group.max.session.timeout.ms=2000")
	a := make(chan *kmsg.JoinGroupResponse, 1)
	req := joinReq("g", "", nil)
	req.SessionTimeoutMillis = 1500
	go func() { a <- join(t, d, 3, req) }()
	time.Sleep(300 * time.Millisecond)
	rb := join(t, d, 3, req)
	ra := <-a
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("joins: a %v gen %d, b %v gen %d", ra.ErrorCode, ra.Generation, rb.ErrorCode, rb.Generation)
	}
	leader := ra
	if rb.MemberID == rb.LeaderID {
		leader = rb
	}
	if len(leader.Members) != 2 {
		t.Fatalf("leader sees %d members, want 2", len(leader.Members))
	}
	for _, st := range []int32{999, 2001} {
		req.SessionTimeoutMillis = st
		wantCode(t, "session", join(t, d, 3, req).ErrorCode, kerr.InvalidSessionTimeout.Code)
	}
}

// Issue 10, defect 7: the timers a restarted coordinator re-arms run with the configured
// group.* keys. A group restarted in its initial rebalance (group.initial.rebalance.delay.ms
// 1000, rebalance timeout 5 minutes) completes after the configured delay; before, its barrier
// waited the whole rebalance timeout and the rejoin below got no answer.
func TestClassicRestartKeepsConfiguredInitialDelay(t *testing.T) {
	t.Parallel()
	sets := []string{"group.initial.rebalance.delay.ms=1000"}
	d := startDaemon(t, sets...)
	req := joinReq("g", "", nil)
	req.RebalanceTimeoutMillis = 300000
	parked := dialRaw(t, d.Addr)
	parked.write(frame(req, 3, 1, strp("sim"), nil))
	waitState(t, d, "g", "PreparingRebalance")
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Groups = []string{"g"}
	members := rawCall(t, d, desc, 5, kmsg.NewPtrDescribeGroupsResponse()).Groups[0].Members
	if len(members) != 1 {
		t.Fatalf("members before restart: %+v", members)
	}
	d.kill()
	d.start(sets...)
	req.MemberID = members[0].MemberID
	r := join(t, d, 3, req) // the raw read gives up long before the 5-minute rebalance timeout
	wantCode(t, "rejoin after restart", r.ErrorCode, 0)
	if r.Generation != 1 || r.LeaderID != req.MemberID {
		t.Fatalf("rejoin: generation %d leader %q", r.Generation, r.LeaderID)
	}
}
