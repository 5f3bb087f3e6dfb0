package handlers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// brokenBackend cannot open any log: every shard goes FAILED.
type brokenBackend struct{}

func (brokenBackend) Open(int32, log.Callbacks) (log.Log, error) { return nil, errors.New("disk gone") }

// classicTable is a handler table over group shards that are loading (never started) or
// failed.
func classicTable(t *testing.T, failed bool) *Table {
	t.Helper()
	if !failed {
		groups := shard.NewSet(shard.SetOptions{Count: 3, Backend: memlog.New()})
		return &Table{deps: Deps{Groups: groups}, log: zap.NewNop()}
	}
	groups := shard.NewSet(shard.SetOptions{Count: 3, Backend: brokenBackend{}})
	groups.Start()
	for i := int32(0); i < 3; i++ {
		for groups.Shard(i).State() != runtime.StateFailed {
			time.Sleep(time.Millisecond)
		}
	}
	return &Table{deps: Deps{Groups: groups}, log: zap.NewNop()}
}

func handle(t *testing.T, tbl *Table, key, version int16, req kmsg.Request) kmsg.Response {
	t.Helper()
	req.SetVersion(version)
	r := &wire.Request{Header: wire.Header{Key: key, Version: version, ClientID: "c"}, Body: req}
	switch key {
	case 11:
		return tbl.joinGroup(context.Background(), r)
	case 12:
		return tbl.heartbeat(context.Background(), r)
	case 13:
		return tbl.leaveGroup(context.Background(), r)
	case 14:
		return tbl.syncGroup(context.Background(), r)
	case 15:
		return tbl.describeGroups(context.Background(), r)
	case 16:
		return tbl.listGroups(context.Background(), r)
	default:
		return tbl.deleteGroups(context.Background(), r)
	}
}

// Spec coordinator-apis §2.6, §2.8 and §5.4: while a group's shard loads, the classic APIs answer
// COORDINATOR_LOAD_IN_PROGRESS — except Heartbeat, which answers NONE so members are not sent into
// a rebalance by a coordinator restart; a FAILED shard is NOT_COORDINATOR, as Kafka answers for
// a coordinator partition in its FAILED state (issue 10, defect 2), and ListGroups leaves it out.
func TestSpec2_8_ClassicAvailabilityCodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failed    bool
		code      int16
		heartbeat int16
		list      int16
	}{
		{"loading", false, kerr.CoordinatorLoadInProgress.Code, 0, kerr.CoordinatorLoadInProgress.Code},
		{"failed", true, kerr.NotCoordinator.Code, kerr.NotCoordinator.Code, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := classicTable(t, tc.failed)
			join := kmsg.NewPtrJoinGroupRequest()
			join.Group, join.SessionTimeoutMillis, join.ProtocolType = "g", 10000, "consumer"
			join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			for _, v := range []int16{0, 6, 7, 9} {
				r := handle(t, tbl, 11, v, join).(*kmsg.JoinGroupResponse)
				if r.ErrorCode != tc.code || r.Generation != -1 || (v >= 7) != (r.Protocol == nil) {
					t.Fatalf("join v%d: %+v", v, r)
				}
			}
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID = "g", "m"
			if r := handle(t, tbl, 12, 4, hb).(*kmsg.HeartbeatResponse); r.ErrorCode != tc.heartbeat {
				t.Fatalf("heartbeat: %d", r.ErrorCode)
			}
			sync := kmsg.NewPtrSyncGroupRequest()
			sync.Group, sync.MemberID = "g", "m"
			sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
			if r := handle(t, tbl, 14, 5, sync).(*kmsg.SyncGroupResponse); r.ErrorCode != tc.code {
				t.Fatalf("sync: %d", r.ErrorCode)
			}
			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.Group, leave.MemberID = "g", "m"
			if r := handle(t, tbl, 13, 0, leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != tc.code {
				t.Fatalf("leave: %d", r.ErrorCode)
			}
			desc := kmsg.NewPtrDescribeGroupsRequest()
			desc.Groups = []string{"g"}
			if r := handle(t, tbl, 15, 6, desc).(*kmsg.DescribeGroupsResponse); r.Groups[0].ErrorCode != tc.code || r.Groups[0].ErrorMessage == nil {
				t.Fatalf("describe: %+v", r.Groups[0])
			}
			if r := handle(t, tbl, 16, 5, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse); r.ErrorCode != tc.list {
				t.Fatalf("list: %d", r.ErrorCode)
			}
			del := kmsg.NewPtrDeleteGroupsRequest()
			del.Groups = []string{"g"}
			if r := handle(t, tbl, 42, 3, del).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != tc.code {
				t.Fatalf("delete: %+v", r.Groups[0])
			}
		})
	}
}

// A request whose context ends before its answer (the connection is closing, or a forced
// shutdown cancels it) is answered COORDINATOR_NOT_AVAILABLE, as Kafka maps a coordinator
// timeout: the Java consumer retries that after finding the coordinator again, while it treats
// REQUEST_TIMED_OUT on JoinGroup, SyncGroup or Heartbeat as an unexpected, fatal error.
func TestCancelledGroupRequestIsCoordinatorNotAvailable(t *testing.T) {
	groups := shard.NewSet(shard.SetOptions{Count: 1, Backend: memlog.New()})
	groups.Start()
	t.Cleanup(func() { groups.Close(context.Background()) })
	for groups.Shard(0).State() != runtime.StateActive {
		time.Sleep(time.Millisecond)
	}
	tbl := &Table{deps: Deps{Groups: groups}, log: zap.NewNop()}
	join := func(ctx context.Context, member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(5)
		req.Group, req.MemberID, req.ProtocolType = "g", member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		req.Protocols = append(req.Protocols, p)
		r := &wire.Request{Header: wire.Header{Key: 11, Version: 5, ClientID: "c"}, Body: req}
		return tbl.joinGroup(ctx, r).(*kmsg.JoinGroupResponse)
	}
	first := join(context.Background(), "")
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %d, want MEMBER_ID_REQUIRED", first.ErrorCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The join parks until the rebalance completes; the ended context ends the wait.
	if got := join(ctx, first.MemberID).ErrorCode; got != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("join with an ended context: code %d, want COORDINATOR_NOT_AVAILABLE", got)
	}
}
