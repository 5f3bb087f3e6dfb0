package shard

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type streamsCatalog map[string]*meta.Topic

func (c streamsCatalog) Topic(name string) (*meta.Topic, bool) { t, ok := c[name]; return t, ok }

// streamsHarness runs one group shard on memlog inside a synctest bubble, so the session,
// rebalance and initial-delay timers run on fake time.
type streamsHarness struct {
	t   *testing.T
	b   *memlog.Backend
	s   *runtime.Shard[*Machine]
	cfg streams.Config
	cat streamsCatalog
}

func newStreamsHarness(t *testing.T) *streamsHarness {
	cfg := streams.DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	cfg.Lookup = assign.Lookup
	h := &streamsHarness{t: t, b: memlog.New(), cfg: cfg,
		cat: streamsCatalog{"foo": {Name: "foo", ID: [16]byte{1}, Partitions: 4}}}
	h.start()
	return h
}

func (h *streamsHarness) start() {
	h.s = runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: h.b, Scope: RecordScope,
		OnLoaded: func(c *runtime.Ctx[*Machine], m *Machine) { StreamsOnLoaded(c, m, h.cfg) }})
	h.s.Start()
	for h.s.State() != runtime.StateActive {
		if h.s.State() == runtime.StateFailed {
			h.t.Fatal("shard failed")
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *streamsHarness) restart() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.s.Close(ctx)
	h.start()
}

func (h *streamsHarness) hb(req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
	h.t.Helper()
	if code, msg := streams.ValidateRequest(req); code != 0 {
		h.t.Fatalf("invalid request %d %s", code, msg)
	}
	v, err := h.s.Write(context.Background(), StreamsHeartbeat(streams.HeartbeatInput{Req: req, Version: 1, Catalog: h.cat, Config: h.cfg}))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(streams.HeartbeatOutput).Response
}

func (h *streamsHarness) members(group string) int {
	v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		if g := m.Streams.Group(group); g != nil {
			return len(g.Members), nil
		}
		return -1, nil
	})
	return v.(int)
}

func streamsJoin(group, member string) *kmsg.StreamsGroupHeartbeatRequest {
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.RebalanceTimeoutMillis = group, member, 1000
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	st.SubtopologyID, st.SourceTopics = "0", []string{"foo"}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}
	r.Topology = &t
	pid := "p-" + member
	r.ProcessID = &pid
	return r
}

func streamsBeat(group, member string, epoch int32) *kmsg.StreamsGroupHeartbeatRequest {
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, member, epoch, -1
	return r
}

// §12 49 on the shard runtime: the session timer fences a silent member; heartbeats keep it.
func TestStreamsSpec12_49_SessionTimeoutOnShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStreamsHarness(t)
		r := h.hb(streamsJoin("g", "a"))
		if r.ErrorCode != 0 || r.MemberEpoch != 2 {
			t.Fatalf("join %+v", r)
		}
		h.hb(streamsJoin("g", "b"))
		for i := 0; i < 3; i++ { // a keeps heartbeating, b goes silent
			time.Sleep(20 * time.Second)
			h.hb(h.owning("g", "a"))                             // learns what to revoke
			if r := h.hb(h.owning("g", "a")); r.ErrorCode != 0 { // acknowledges
				t.Fatalf("heartbeat %+v", r)
			}
		}
		synctest.Wait()
		if n := h.members("g"); n != 1 {
			t.Fatalf("members %d, want 1 (b expired)", n)
		}
		time.Sleep(46 * time.Second)
		synctest.Wait()
		if n := h.members("g"); n != 0 {
			t.Fatalf("members %d, want 0", n)
		}
		h.close()
	})
}

// owning is a heartbeat that reports the member's assigned tasks as owned, as a client that
// revokes promptly does.
func (h *streamsHarness) owning(group, member string) *kmsg.StreamsGroupHeartbeatRequest {
	v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		mm := m.Streams.Group(group).Members[member]
		r := streamsBeat(group, member, mm.Epoch)
		r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = streams.TasksToWire(mm.Assigned[streams.Active]), streams.TasksToWire(mm.Assigned[streams.Standby]), streams.TasksToWire(mm.Assigned[streams.Warmup])
		return r, nil
	})
	return v.(*kmsg.StreamsGroupHeartbeatRequest)
}

func (h *streamsHarness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.s.Close(ctx)
}

func (h *streamsHarness) epoch(group, member string) int32 {
	v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		g := m.Streams.Group(group)
		if g == nil || g.Members[member] == nil {
			return int32(-100), nil
		}
		return g.Members[member].Epoch, nil
	})
	return v.(int32)
}

// §4.6 + §12 70: after a reload the state is replayed, a member's heartbeat at its epoch
// continues without error or task lists, and the re-armed session timer still fences a member
// that never comes back.
func TestStreamsSpec12_70_CoordinatorRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStreamsHarness(t)
		h.hb(streamsJoin("g", "a"))
		h.hb(streamsJoin("g", "b"))
		ea, eb := h.epoch("g", "a"), h.epoch("g", "b")
		h.restart()
		r := h.hb(streamsBeat("g", "a", ea))
		if r.ErrorCode != 0 || r.MemberEpoch < ea {
			t.Fatalf("after restart %+v", r)
		}
		if h.epoch("g", "b") != eb {
			t.Fatal("b's state changed by the reload")
		}
		for i := 0; i < 3; i++ {
			time.Sleep(20 * time.Second)
			h.hb(h.owning("g", "a"))
			h.hb(h.owning("g", "a"))
		}
		synctest.Wait()
		if n := h.members("g"); n != 1 {
			t.Fatalf("members %d: b's session timer was not re-armed on load", n)
		}
		h.close()
	})
}

// Durability before acknowledgement: the join's answer waits for its records.
func TestStreamsHeartbeatAnsweredAfterDurability(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStreamsHarness(t)
		h.b.Hold(true)
		done := make(chan *kmsg.StreamsGroupHeartbeatResponse, 1)
		go func() { done <- h.hb(streamsJoin("g", "a")) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("answered before the records were durable")
		default:
		}
		h.b.Release(0)
		if r := <-done; r.ErrorCode != 0 {
			t.Fatalf("join %+v", r)
		}
		h.b.Hold(false)
		h.close()
	})
}

// §11.5 through the OffsetCommit op, and §11.3 deletion with offsets tombstoned first.
func TestStreamsSpec11_OffsetCommitAndDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStreamsHarness(t)
		h.hb(streamsJoin("g", "a"))
		commit := func(member string, epoch int32, version int16) int16 {
			v, err := h.s.Write(context.Background(), CommitOffsets(CommitRequest{Group: "g", MemberID: member, Generation: epoch, Version: version, MaxMetadata: 100,
				Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "foo", Partition: 0}, Offset: 5}}}))
			if err != nil {
				t.Fatal(err)
			}
			return v.([]int16)[0]
		}
		e := h.epoch("g", "a")
		if c := commit("a", e, 9); c != 0 {
			t.Fatalf("member commit %d", c)
		}
		if c := commit("a", e+1, 9); c != kerr.StaleMemberEpoch.Code {
			t.Fatalf("newer epoch %d", c)
		}
		if c := commit("zz", e, 9); c != kerr.UnknownMemberID.Code {
			t.Fatalf("unknown member %d", c)
		}
		if c := commit("a", e, 8); c != kerr.UnsupportedVersion.Code {
			t.Fatalf("v8 %d", c)
		}
		del := func() int16 {
			v, _ := h.s.Write(context.Background(), func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
				owned, code, recs := m.StreamsDeleteGroup("g")
				if !owned {
					return runtime.Result{Response: int16(-100)}
				}
				if code == 0 {
					CancelStreamsGroupTimers(c, "g")
				}
				return runtime.Result{Records: recs, Response: code}
			})
			return v.(int16)
		}
		if c := del(); c != kerr.NonEmptyGroup.Code {
			t.Fatalf("delete non-empty %d", c)
		}
		h.hb(streamsBeat("g", "a", -1))
		if c := del(); c != 0 {
			t.Fatalf("delete %d", c)
		}
		v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) { return m.Streams.Owns("g") || m.Offsets.HasGroup("g"), nil })
		if v.(bool) {
			t.Fatal("group or its offsets survived the delete")
		}
		h.restart()
		v, _ = h.s.Read(context.Background(), func(m *Machine) (any, error) { return m.Streams.Owns("g") || m.Offsets.HasGroup("g"), nil })
		if v.(bool) {
			t.Fatal("group came back after a reload")
		}
		h.close()
	})
}
