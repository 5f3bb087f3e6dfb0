package shard

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scripted is the test-only assignor of spec online-migration §9.1: it returns the seed's
// targets, one per call, so that the walk-through tests the migration machinery, not an
// assignor.
type scripted struct{ targets []assign.Output }

func (*scripted) Name() string { return "scripted" }

func (s *scripted) Assign(in assign.Input) (assign.Output, error) {
	if len(s.targets) == 0 {
		return nil, fmt.Errorf("scripted assignor called more often than scripted")
	}
	out := s.targets[0]
	s.targets = s.targets[1:]
	return out, nil
}

func ma(active, standby, warmup []int32) assign.MemberAssignment {
	ts := func(ps []int32) assign.TaskSet {
		if len(ps) == 0 {
			return assign.TaskSet{}
		}
		return assign.TaskSet{"0": ps}
	}
	return assign.MemberAssignment{Active: ts(active), Standby: ts(standby), Warmup: ts(warmup)}
}

// seedTargets are the targets of spec §9.1 for epochs 24 and 25.
func seedTargets() []assign.Output {
	return []assign.Output{
		{"A": ma([]int32{0, 2, 3}, []int32{1, 5}, nil), "B": ma([]int32{1, 4, 5}, []int32{2, 3}, nil), "C": ma(nil, []int32{0, 4}, []int32{2, 5})},
		{"A": ma([]int32{0, 3}, []int32{1, 5}, nil), "B": ma([]int32{1, 4, 5}, []int32{2, 3}, nil), "C": ma([]int32{2}, []int32{0, 4}, []int32{5})},
	}
}

type migrationHarness struct {
	*streamsHarness
	ccfg   classic.Config
	mu     sync.Mutex
	events []MigrationEvent
}

// newMigrationHarness runs one group shard on memlog (call inside a synctest bubble) with the
// seed's catalog, the given assignor and no assignment interval.
func newMigrationHarness(t *testing.T, a assign.Assignor, policy ...streams.MigrationPolicy) *migrationHarness {
	cfg := streams.DefaultConfig()
	if len(policy) > 0 {
		cfg.MigrationPolicy = policy[0]
	}
	cfg.InitialRebalanceDelay, cfg.AssignmentInterval = 0, 0
	cfg.Assignors = []string{a.Name()}
	cfg.Lookup = func(name string) (assign.Assignor, bool) { return a, name == a.Name() }
	h := &migrationHarness{streamsHarness: &streamsHarness{t: t, b: memlog.New(), cfg: cfg, cat: streamsCatalog{
		"input":               {Name: "input", ID: [16]byte{1}, Partitions: 6},
		"app-store-changelog": {Name: "app-store-changelog", ID: [16]byte{2}, Partitions: 6},
	}}, ccfg: classic.DefaultConfig()}
	h.startShard()
	t.Cleanup(func() { h.s.Close(context.Background()) })
	return h
}

func (h *migrationHarness) startShard() {
	cfg, ccfg := h.cfg, h.ccfg // the configuration at (re)start, as a process reads its keys once
	h.s = runtime.New(runtime.Options[*Machine]{Shard: 0, Backend: h.b,
		New: func() *Machine {
			m := NewMachine()
			m.StreamsConfig, m.ClassicConfig = cfg, ccfg
			m.OnMigration = func(ev MigrationEvent) { h.mu.Lock(); h.events = append(h.events, ev); h.mu.Unlock() }
			return m
		},
		OnLoaded: func(c *runtime.Ctx[*Machine], m *Machine) {
			m.onLoadedClassic(c, ccfg)
			StreamsOnLoaded(c, m, cfg)
		}})
	h.s.Start()
	for h.s.State() != runtime.StateActive {
		if h.s.State() == runtime.StateFailed {
			h.t.Fatal("shard failed")
		}
		synctest.Wait()
	}
}

func (h *migrationHarness) restart() {
	h.s.Close(context.Background())
	h.startShard()
}

func (h *migrationHarness) migrations() []MigrationEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]MigrationEvent(nil), h.events...)
}

func (h *migrationHarness) sx() StreamsContext { return StreamsContext{Catalog: h.cat, Config: h.cfg} }

// classicStreamsMember is a classic Kafka Streams thread of the seed: process p<name>,
// endpoint host<name>:8080, one protocol "stream".
type classicStreamsMember struct {
	id      string
	process byte
}

func (c classicStreamsMember) protocols(t testing.TB, owned []int32, running []int32, standby []int32) []classic.Protocol {
	t.Helper()
	sub := classicproto.Subscription{Version: 11, LatestSupportedVersion: 11, ProcessID: [16]byte{15: c.process},
		UserEndPoint: "host" + c.id + ":8080", UniqueField: 1}
	for _, p := range running {
		sub.TaskOffsetSums = append(sub.TaskOffsetSums, classicproto.TaskOffsetSum{Task: classicproto.TaskID{Partition: p}, OffsetSum: -2})
	}
	for _, p := range standby {
		sub.TaskOffsetSums = append(sub.TaskOffsetSums, classicproto.TaskOffsetSum{Task: classicproto.TaskID{Partition: p}, OffsetSum: 100})
	}
	user, err := sub.Encode()
	if err != nil {
		t.Fatal(err)
	}
	meta := kmsg.ConsumerMemberMetadata{Version: 3, Topics: []string{"input"}, UserData: user, Generation: -1}
	if len(owned) > 0 {
		meta.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "input", Partitions: owned}}
	}
	return []classic.Protocol{{Name: "stream", Metadata: meta.AppendTo(nil)}}
}

func storedAssignment(t testing.TB, active, standby []int32) []byte {
	t.Helper()
	info := classicproto.Assignment{Version: 11, CommonlySupportedVersion: 11, NextRebalanceMs: classicproto.NoFollowUp}
	var parts []classicproto.TopicPartition
	for _, p := range active {
		parts = append(parts, classicproto.TopicPartition{Topic: "input", Partition: p})
		info.Active = append(info.Active, classicproto.TaskID{Partition: p})
	}
	for _, p := range standby {
		info.Standby = append(info.Standby, classicproto.StandbyTask{Task: classicproto.TaskID{Partition: p},
			Partitions: []classicproto.TopicPartition{{Topic: "input", Partition: p}}})
	}
	b, err := classicproto.EncodeMemberAssignment(3, parts, info)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	memberA = classicStreamsMember{id: "A", process: 0xa}
	memberB = classicStreamsMember{id: "B", process: 0xb}
)

// seedClassicGroup writes the classic group of spec §9.1: Stable, generation 23, leader A.
func (h *migrationHarness) seedClassicGroup() {
	t := h.t
	proto := "stream"
	g := &classic.Group{ID: "app", State: classic.Stable, Generation: 23, ProtocolType: "consumer", Protocol: &proto, Leader: "A",
		Members: []*classic.Member{
			{ID: "A", ClientID: "a", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
				Protocols: memberA.protocols(t, []int32{0, 2, 4}, []int32{0, 2, 4}, []int32{1, 3, 5}), Assignment: storedAssignment(t, []int32{0, 2, 4}, []int32{1, 3, 5})},
			{ID: "B", ClientID: "b", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
				Protocols: memberB.protocols(t, []int32{1, 3, 5}, []int32{1, 3, 5}, []int32{0, 2, 4}), Assignment: storedAssignment(t, []int32{1, 3, 5}, []int32{0, 2, 4})},
		}}
	if _, err := h.s.Write(context.Background(), func(*runtime.Ctx[*Machine], *Machine) runtime.Result {
		return runtime.Result{Records: []log.Record{g.Record()}}
	}); err != nil {
		t.Fatal(err)
	}
}

func (h *migrationHarness) cjoin(c classicStreamsMember, owned ...int32) *classic.JoinResult {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), JoinGroupWith(h.ccfg, classic.JoinRequest{Group: "app", MemberID: c.id, ClientID: "c", ClientHost: "/h",
		SessionTimeoutMs: 45000, RebalanceTimeout: 300000, ProtocolType: "consumer", Protocols: c.protocols(h.t, owned, owned, nil), Version: 9}, h.sx()))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(*classic.JoinResult)
}

// csync returns the code and the decoded assignment: partitions of input, ACTIVE task
// partitions, STANDBY task partitions (all of subtopology 0).
func (h *migrationHarness) csync(c classicStreamsMember, gen int32) (int16, []int32, []int32, []int32) {
	h.t.Helper()
	pt, pn := "consumer", "stream"
	v, err := h.s.Write(context.Background(), SyncGroupWith(h.ccfg, classic.SyncRequest{Group: "app", MemberID: c.id, Generation: gen,
		ProtocolType: &pt, Protocol: &pn, Version: 5}, h.sx()))
	if err != nil {
		h.t.Fatal(err)
	}
	r := v.(*classic.SyncResult)
	if r.Code != 0 {
		return r.Code, nil, nil, nil
	}
	parts, info, _, err := classicproto.DecodeMemberAssignment(r.Assignment)
	if err != nil {
		h.t.Fatal(err)
	}
	if info.Version != 11 || info.CommonlySupportedVersion != 11 || info.ErrCode != 0 || len(parts) != len(info.Active) {
		h.t.Fatalf("assignment info %+v for %v", info, parts)
	}
	var ps, active, standby []int32
	for i, p := range parts {
		if p.Topic != "input" || info.Active[i].Partition != p.Partition {
			h.t.Fatalf("partition %v not aligned with active task %v", p, info.Active[i])
		}
		ps = append(ps, p.Partition)
		active = append(active, info.Active[i].Partition)
	}
	for _, s := range info.Standby {
		standby = append(standby, s.Task.Partition)
	}
	sort.Slice(standby, func(i, j int) bool { return standby[i] < standby[j] })
	return 0, ps, active, standby
}

func (h *migrationHarness) cbeat(c classicStreamsMember, gen int32) int16 {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), Heartbeat(h.ccfg, "app", c.id, nil, gen))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(HeartbeatResult).Code
}

func joinC() *kmsg.StreamsGroupHeartbeatRequest {
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.RebalanceTimeoutMillis = "app", "C", 300000
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	topo := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	st.SubtopologyID, st.SourceTopics = "0", []string{"input"}
	cl := kmsg.NewTopicInfo()
	cl.Topic = "app-store-changelog"
	st.StateChangelogTopics = []kmsg.TopicInfo{cl}
	topo.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}
	r.Topology = &topo
	pid, host := "pC", "hostC"
	r.ProcessID = &pid
	r.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: host, Port: 8080}
	return r
}

func partitionsOf(l []kmsg.TaskIDs) []int32 {
	var out []int32
	for _, t := range l {
		out = append(out, t.Partitions...)
	}
	return out
}

func want(t *testing.T, step string, got, exp any) {
	t.Helper()
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("step %s: got %v, want %v", step, got, exp)
	}
}

func wantSync(t *testing.T, step string, code int16, ps, active, standby []int32, wps, wactive, wstandby []int32) {
	t.Helper()
	if code != 0 || !slices.Equal(ps, wps) || !slices.Equal(active, wactive) || !slices.Equal(standby, wstandby) {
		t.Fatalf("step %s: code %d partitions %v ACTIVE %v STANDBY %v; want input%v ACTIVE %v STANDBY %v", step, code, ps, active, standby, wps, wactive, wstandby)
	}
}

func (h *migrationHarness) member(id string) *streams.Member {
	v, err := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		if g := m.Streams.Group("app"); g != nil {
			return g.Members[id], nil
		}
		return (*streams.Member)(nil), nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(*streams.Member)
}

// Spec online-migration §9: the seed's A/B/C walk-through, request by request, with the
// generation/epoch and the assignment of every response, on one shard.
func TestMigrationSeedWalkThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: seedTargets()})
		h.seedClassicGroup()
		wantCode := func(step string, got, w int16) {
			t.Helper()
			if got != w {
				t.Fatalf("step %s: %v, want %v", step, kerr.ErrorForCode(got), kerr.ErrorForCode(w))
			}
		}
		wantCode("0 (classic group works)", h.cbeat(memberA, 23), 0)

		// 1: C joins with the streams protocol; the classic group becomes a streams group.
		r := h.hb(joinC())
		wantCode("1", r.ErrorCode, 0)
		want(t, "1 epoch", r.MemberEpoch, int32(24))
		want(t, "1 active", partitionsOf(r.ActiveTasks), []int32(nil))
		want(t, "1 standby", partitionsOf(r.StandbyTasks), []int32{0, 4})
		want(t, "1 warm-up", partitionsOf(r.WarmupTasks), []int32{2, 5})
		if events := h.migrations(); len(events) != 1 || events[0].Result != "converted" || events[0].Generation != 23 || events[0].Members != 2 {
			t.Fatalf("step 1: migration events %+v", h.migrations())
		}
		if a := h.member("A"); a == nil || a.Epoch != 23 || a.State != streams.Stable || !a.IsClassic() {
			t.Fatalf("step 1: A %+v", a)
		}

		wantCode("2", h.cbeat(memberA, 23), kerr.RebalanceInProgress.Code)
		want(t, "3", h.cjoin(memberA, 0, 2, 4).Generation, int32(23))
		code, ps, act, stb := h.csync(memberA, 23)
		wantSync(t, "4", code, ps, act, stb, []int32{0, 2}, []int32{0, 2}, []int32{1, 3, 5})

		wantCode("5", h.cbeat(memberB, 23), kerr.RebalanceInProgress.Code)
		want(t, "6", h.cjoin(memberB, 1, 3, 5).Generation, int32(23))
		code, ps, act, stb = h.csync(memberB, 23)
		wantSync(t, "7", code, ps, act, stb, []int32{1, 5}, []int32{1, 5}, []int32{2, 3, 4})

		want(t, "8", h.cjoin(memberA, 0, 2).Generation, int32(24))
		if a := h.member("A"); a.State != streams.UnreleasedTasks {
			t.Fatalf("step 8: A %v", a.State)
		}
		code, ps, act, stb = h.csync(memberA, 24)
		wantSync(t, "9", code, ps, act, stb, []int32{0, 2}, []int32{0, 2}, []int32{1, 3, 5})
		want(t, "10", h.cjoin(memberB, 1, 5).Generation, int32(24))
		code, ps, act, stb = h.csync(memberB, 24)
		wantSync(t, "11", code, ps, act, stb, []int32{1, 4, 5}, []int32{1, 4, 5}, []int32{2, 3})
		wantCode("12", h.cbeat(memberA, 24), kerr.RebalanceInProgress.Code)
		want(t, "13", h.cjoin(memberA, 0, 2).Generation, int32(24))
		code, ps, act, stb = h.csync(memberA, 24)
		wantSync(t, "14", code, ps, act, stb, []int32{0, 2, 3}, []int32{0, 2, 3}, []int32{1, 5})
		wantCode("14 (B stable)", h.cbeat(memberB, 24), 0)

		// 15: C's warm-up 0_2 is caught up; the epoch-25 target moves 0_2 to C.
		beat := streamsBeat("app", "C", 24)
		beat.TaskOffsets = []kmsg.TaskOffset{{SubtopologyID: "0", Partition: 2, Offset: 1000}, {SubtopologyID: "0", Partition: 5, Offset: 0}}
		beat.TaskEndOffsets = []kmsg.TaskOffset{{SubtopologyID: "0", Partition: 2, Offset: 1000}, {SubtopologyID: "0", Partition: 5, Offset: 1 << 40}}
		r = h.hb(beat)
		wantCode("15", r.ErrorCode, 0)
		want(t, "15 epoch", r.MemberEpoch, int32(25))
		if r.ActiveTasks != nil || r.StandbyTasks != nil || r.WarmupTasks != nil {
			t.Fatalf("step 15: task fields %v %v %v, want null", r.ActiveTasks, r.StandbyTasks, r.WarmupTasks)
		}

		wantCode("16", h.cbeat(memberA, 24), kerr.RebalanceInProgress.Code)
		want(t, "17", h.cjoin(memberA, 0, 2, 3).Generation, int32(24))
		code, ps, act, stb = h.csync(memberA, 24)
		wantSync(t, "18", code, ps, act, stb, []int32{0, 3}, []int32{0, 3}, []int32{1, 5})
		wantCode("20 (A unrevoked)", h.cbeat(memberA, 24), kerr.RebalanceInProgress.Code)

		wantCode("19 heartbeat", h.cbeat(memberB, 24), kerr.RebalanceInProgress.Code)
		want(t, "19 join", h.cjoin(memberB, 1, 4, 5).Generation, int32(25))
		code, ps, act, stb = h.csync(memberB, 25)
		wantSync(t, "19 sync", code, ps, act, stb, []int32{1, 4, 5}, []int32{1, 4, 5}, []int32{2, 3})

		want(t, "20 join", h.cjoin(memberA, 0, 3).Generation, int32(25))
		code, ps, act, stb = h.csync(memberA, 25)
		wantSync(t, "20 sync", code, ps, act, stb, []int32{0, 3}, []int32{0, 3}, []int32{1, 5})
		wantCode("21", h.cbeat(memberB, 25), 0)

		r = h.hb(streamsBeat("app", "C", 25))
		wantCode("22", r.ErrorCode, 0)
		want(t, "22 epoch", r.MemberEpoch, int32(25))
		want(t, "22 active", partitionsOf(r.ActiveTasks), []int32{2})
		want(t, "22 standby", partitionsOf(r.StandbyTasks), []int32{0, 4})
		want(t, "22 warm-up", partitionsOf(r.WarmupTasks), []int32{5})

		// A restart rebuilds the same group from the records alone.
		before := h.view()
		h.restart()
		if after := h.view(); !reflect.DeepEqual(before, after) {
			t.Fatalf("state after restart differs:\n%+v\n%+v", before, after)
		}

		h.downgradeSteps(25)
	})
}

// downgradeSteps are spec §9.2 steps 23-26 for group epoch e (the seed's 25): C leaves, the group becomes a classic group of A and B at generation
// e that rebalances to e+1; committed offsets stay.
func (h *migrationHarness) downgradeSteps(e int32) {
	t := h.t
	if c := h.commit("A", e, 0); c != 0 {
		t.Fatalf("A's commit before the downgrade: %v", kerr.ErrorForCode(c))
	}
	leave := streamsBeat("app", "C", -1)
	r := h.hb(leave)
	if r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("step 23: %+v", r)
	}
	if ev := h.migrations(); len(ev) == 0 || ev[len(ev)-1].Direction != "downgrade" || ev[len(ev)-1].Result != "converted" || ev[len(ev)-1].Generation != e {
		t.Fatalf("step 23: events %+v", ev)
	}
	v, err := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		return []any{m.Classic.Group("app").Clone(), m.Streams.Group("app") == nil}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cg, gone := v.([]any)[0].(*classic.Group), v.([]any)[1].(bool)
	if !gone || cg.State != classic.PreparingRebalance || cg.Generation != e || cg.Leader != "A" || len(cg.Members) != 2 || *cg.Protocol != "stream" {
		t.Fatalf("step 23: classic group %+v, streams gone %v", cg, gone)
	}
	parts, info, _, err := classicproto.DecodeMemberAssignment(cg.Members[0].Assignment)
	if err != nil || len(parts) != 2 || parts[0].Partition != 0 || parts[1].Partition != 3 || len(info.Standby) != 2 || len(info.ActiveByHost) != 2 {
		t.Fatalf("step 23: A's stored assignment %v %+v %v (host maps only A and B)", parts, info, err)
	}
	for _, id := range []classicStreamsMember{memberA, memberB} {
		if c := h.cbeat(id, e); c != kerr.RebalanceInProgress.Code {
			t.Fatalf("step 24: %s %v", id.id, kerr.ErrorForCode(c))
		}
	}
	ja, jb := h.cjoinAsync(memberA, 0, 3), h.cjoinAsync(memberB, 1, 4, 5)
	ra, rb := <-ja, <-jb
	if ra.Code != 0 || rb.Code != 0 || ra.Generation != e+1 || rb.Generation != e+1 || ra.Leader != "A" || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("step 25: %+v %+v", ra, rb)
	}
	pt, pn := "consumer", "stream"
	sb := make(chan *classic.SyncResult, 1)
	go func() {
		v, _ := h.s.Write(context.Background(), SyncGroupWith(h.ccfg, classic.SyncRequest{Group: "app", MemberID: "B", Generation: e + 1, ProtocolType: &pt, Protocol: &pn, Version: 5}, h.sx()))
		sb <- v.(*classic.SyncResult)
	}()
	v, err = h.s.Write(context.Background(), SyncGroupWith(h.ccfg, classic.SyncRequest{Group: "app", MemberID: "A", Generation: e + 1, ProtocolType: &pt, Protocol: &pn, Version: 5,
		Assignments: map[string][]byte{"A": storedAssignment(t, []int32{0, 2, 3}, nil), "B": storedAssignment(t, []int32{1, 4, 5}, nil)}}, h.sx()))
	if err != nil || v.(*classic.SyncResult).Code != 0 || (<-sb).Code != 0 {
		t.Fatalf("step 26: %v %+v", err, v)
	}
	// No conversion touched the offsets: the commit made before the downgrade is still there.
	v, _ = h.s.Read(context.Background(), FetchOffsets("app", []offsets.TopicPartition{{Topic: "input", Partition: 0}}))
	if f := v.([]FetchPartition)[0]; !f.Found || f.Committed.Offset != 7 {
		t.Fatalf("committed offset after the downgrade: %+v", f)
	}
}

func (h *migrationHarness) commit(member string, gen, partition int32) int16 {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), CommitOffsets(CommitRequest{Group: "app", MemberID: member, Generation: gen, Version: 8, MaxMetadata: 4096,
		Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "input", Partition: partition}, Offset: 7, RetentionMs: -1}}}))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.([]int16)[0]
}

func (h *migrationHarness) cjoinAsync(c classicStreamsMember, owned ...int32) <-chan *classic.JoinResult {
	ch := make(chan *classic.JoinResult, 1)
	req := classic.JoinRequest{Group: "app", MemberID: c.id, ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
		ProtocolType: "consumer", Protocols: c.protocols(h.t, owned, owned, nil), Version: 9}
	go func() {
		v, err := h.s.Write(context.Background(), JoinGroupWith(h.ccfg, req, h.sx()))
		if err != nil {
			h.t.Error(err)
		}
		ch <- v.(*classic.JoinResult)
	}()
	return ch
}

// view is the shard's state as its log must rebuild it, read on the shard goroutine.
func (h *migrationHarness) view() machineView {
	v, err := h.s.Read(context.Background(), func(m *Machine) (any, error) { return viewOf(m), nil })
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(machineView)
}

// seedGroup is the classic group of spec §9.1, for tests that alter it before writing it.
func seedGroup(t testing.TB) *classic.Group {
	proto := "stream"
	return &classic.Group{ID: "app", State: classic.Stable, Generation: 23, ProtocolType: "consumer", Protocol: &proto, Leader: "A",
		Members: []*classic.Member{
			{ID: "A", ClientID: "a", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
				Protocols: memberA.protocols(t, []int32{0, 2, 4}, []int32{0, 2, 4}, []int32{1, 3, 5}), Assignment: storedAssignment(t, []int32{0, 2, 4}, []int32{1, 3, 5})},
			{ID: "B", ClientID: "b", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
				Protocols: memberB.protocols(t, []int32{1, 3, 5}, []int32{1, 3, 5}, []int32{0, 2, 4}), Assignment: storedAssignment(t, []int32{1, 3, 5}, []int32{0, 2, 4})},
		}}
}

func (h *migrationHarness) writeClassic(g *classic.Group) {
	h.t.Helper()
	if _, err := h.s.Write(context.Background(), func(*runtime.Ctx[*Machine], *Machine) runtime.Result {
		return runtime.Result{Records: []log.Record{g.Record()}}
	}); err != nil {
		h.t.Fatal(err)
	}
}

// Spec §3.2 and §10 scenarios 1-5, 10: a refused upgrade answers GROUP_ID_NOT_FOUND, writes
// nothing, and leaves the classic group working; under disabled the answer is Kafka 4.4's.
func TestMigrationRefusedUpgradeWritesNothing(t *testing.T) {
	truncated := func(g *classic.Group) {
		md := g.Members[1].Protocols[0].Metadata
		var outer kmsg.ConsumerMemberMetadata
		if err := outer.ReadFrom(md); err != nil {
			t.Fatal(err)
		}
		outer.UserData = outer.UserData[:24] // SubscriptionInfo cut after the process id
		g.Members[1].Protocols[0].Metadata = outer.AppendTo(nil)
	}
	future := func(g *classic.Group) {
		var outer kmsg.ConsumerMemberMetadata
		_ = outer.ReadFrom(g.Members[1].Protocols[0].Metadata)
		outer.UserData = []byte{0, 0, 0, 12, 0, 0, 0, 12}
		g.Members[1].Protocols[0].Metadata = outer.AppendTo(nil)
	}
	for _, c := range []struct {
		name   string
		policy streams.MigrationPolicy
		alter  func(g *classic.Group)
		msg    string
	}{
		{"policy disabled", streams.MigrationDisabled, nil, "Group app is not a streams group."},
		{"policy downgrade", streams.MigrationDowngrade, nil, "Group app is not a streams group."},
		{"not a Streams group", "", func(g *classic.Group) { p := "range"; g.Protocol = &p }, "Group app is not a streams group."},
		{"malformed user data", "", truncated, "member B"},
		{"future subscription", "", future, "version 12"},
		{"topic mismatch", "", func(g *classic.Group) {
			var outer kmsg.ConsumerMemberMetadata
			_ = outer.ReadFrom(g.Members[1].Protocols[0].Metadata)
			outer.Topics = []string{"input", "other"}
			g.Members[1].Protocols[0].Metadata = outer.AppendTo(nil)
		}, "other"},
		{"conflicting seeds", "", func(g *classic.Group) {
			g.Members[1].Assignment = nil // B falls back to its subscription, owning 0_1, 0_3, 0_5
			g.Members[0].Assignment = storedAssignment(t, []int32{0, 2, 3}, nil)
		}, "both hold active task 0_3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newMigrationHarness(t, &scripted{targets: seedTargets()}, c.policy)
				g := seedGroup(t)
				if c.alter != nil {
					c.alter(g)
				}
				h.writeClassic(g)
				before := h.view()
				r := h.hb(joinC())
				if r.ErrorCode != kerr.GroupIDNotFound.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, c.msg) {
					t.Fatalf("%d %v, want GROUP_ID_NOT_FOUND naming %q", r.ErrorCode, r.ErrorMessage, c.msg)
				}
				if strings.HasSuffix(c.msg, "streams group.") && *r.ErrorMessage != c.msg {
					t.Fatalf("must answer exactly Kafka 4.4's message, got %q", *r.ErrorMessage)
				}
				if after := h.view(); !reflect.DeepEqual(before, after) {
					t.Fatal("a refused upgrade changed the state")
				}
				if code := h.cbeat(memberA, 23); code != 0 {
					t.Fatalf("classic heartbeat after the refusal: %v", kerr.ErrorForCode(code))
				}
				if ev := h.migrations(); len(ev) != 1 || ev[0].Result != "refused" || ev[0].Reason == "" {
					t.Fatalf("events %+v", ev)
				}
			})
		})
	}
}

// Spec §4.6: a classic member that rejoins still owning an active task it must give up stays
// at its generation with the task pending; the seed's rule that it keeps its generation until
// it has revoked.
func TestMigrationRejoinWithoutRevokingKeepsGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: seedTargets()})
		h.writeClassic(seedGroup(t))
		h.hb(joinC())
		want(t, "first join", h.cjoin(memberA, 0, 2, 4).Generation, int32(23))
		want(t, "rejoin still owning 0_4", h.cjoin(memberA, 0, 2, 4).Generation, int32(23))
		if a := h.member("A"); a.State != streams.UnrevokedTasks || len(a.Pending[streams.Active]) != 1 {
			t.Fatalf("A %v pending %v", a.State, a.Pending)
		}
		code, ps, act, stb := h.csync(memberA, 23)
		wantSync(t, "sync", code, ps, act, stb, []int32{0, 2}, []int32{0, 2}, []int32{1, 3, 5})
		if code := h.cbeat(memberA, 23); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("an unrevoked member is prompted to rejoin, got %v", kerr.ErrorForCode(code))
		}
		want(t, "rejoin after revoking", h.cjoin(memberA, 0, 2).Generation, int32(24))
	})
}

// Spec §10 scenarios 11, 12, 16, 17: a classic member leaving mid-migration is removed with one
// epoch bump and no downgrade (C is a streams member); a silent one is fenced by its own session
// timeout; a wrong protocol or generation is refused; commits follow the generation rules.
func TestMigrationClassicMembersLeaveExpireAndCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: seedTargets()})
		h.writeClassic(seedGroup(t))
		h.hb(joinC())
		h.cjoin(memberA, 0, 2, 4)
		h.cjoin(memberB, 1, 3, 5)

		pt, range_ := "consumer", "range"
		v, _ := h.s.Write(context.Background(), SyncGroupWith(h.ccfg, classic.SyncRequest{Group: "app", MemberID: "A", Generation: 23, ProtocolType: &pt, Protocol: &range_, Version: 5}, h.sx()))
		if c := v.(*classic.SyncResult).Code; c != kerr.InconsistentGroupProtocol.Code {
			t.Fatalf("wrong protocol: %v", kerr.ErrorForCode(c))
		}
		if c := h.cbeat(memberB, 22); c != kerr.IllegalGeneration.Code {
			t.Fatalf("stale generation: %v", kerr.ErrorForCode(c))
		}
		commit := func(member string, gen int32, partition int32) int16 {
			v, err := h.s.Write(context.Background(), CommitOffsets(CommitRequest{Group: "app", MemberID: member, Generation: gen, Version: 8, MaxMetadata: 4096,
				Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "input", Partition: partition}, Offset: 7, RetentionMs: -1}}}))
			if err != nil {
				t.Fatal(err)
			}
			return v.([]int16)[0]
		}
		if c := commit("B", 24, 1); c != kerr.IllegalGeneration.Code {
			t.Fatalf("commit ahead of the member epoch: %v", kerr.ErrorForCode(c))
		}
		if c := commit("A", 23, 0); c != 0 {
			t.Fatalf("commit at the member epoch by a classic client (v8): %v", kerr.ErrorForCode(c))
		}

		v, err := h.s.Write(context.Background(), LeaveGroup(h.ccfg, "app", []classic.LeaveMember{{MemberID: "B"}, {MemberID: "C"}}))
		if err != nil {
			t.Fatal(err)
		}
		lr := v.(LeaveResult)
		if lr.Code != 0 || !slices.Equal(lr.Members, []int16{0, kerr.UnknownMemberID.Code}) {
			t.Fatalf("leave %+v", lr)
		}
		if h.member("B") != nil || h.member("C") == nil {
			t.Fatal("B must be gone and C stay")
		}
		if c := h.cbeat(memberB, 23); c != kerr.UnknownMemberID.Code {
			t.Fatalf("B after leaving: %v", kerr.ErrorForCode(c))
		}
		// A goes silent: its classic session (45 s) fences it; streams member C heartbeats on.
		for i := 0; i < 5; i++ {
			time.Sleep(10 * time.Second)
			h.hb(streamsBeat("app", "C", h.member("C").Epoch))
		}
		synctest.Wait()
		if h.member("A") != nil {
			t.Fatal("A outlived its session timeout")
		}
		if c := h.cbeat(memberA, 23); c != kerr.UnknownMemberID.Code {
			t.Fatalf("A after expiry: %v", kerr.ErrorForCode(c))
		}
	})
}

// Spec §3.5, §10 scenario 7: a JoinGroup parked in the classic group's rebalance is answered
// REBALANCE_IN_PROGRESS by the upgrade; the retried JoinGroup lands in the streams group.
func TestMigrationUpgradeAnswersParkedJoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: seedTargets()})
		h.writeClassic(seedGroup(t))
		ch := make(chan *classic.JoinResult, 1)
		go func() {
			v, err := h.s.Write(context.Background(), JoinGroupWith(h.ccfg, classic.JoinRequest{Group: "app", MemberID: "A", ClientID: "a", ClientHost: "/h",
				SessionTimeoutMs: 45000, RebalanceTimeout: 300000, ProtocolType: "consumer", Protocols: memberA.protocols(t, []int32{0, 2, 4}, nil, nil), Version: 9}, h.sx()))
			if err != nil {
				t.Error(err)
			}
			ch <- v.(*classic.JoinResult)
		}()
		synctest.Wait()
		select {
		case r := <-ch:
			t.Fatalf("A's join must wait for B: %+v", r)
		default:
		}
		if r := h.hb(joinC()); r.ErrorCode != 0 || r.MemberEpoch != 24 {
			t.Fatalf("upgrade during PreparingRebalance: %d %d", r.ErrorCode, r.MemberEpoch)
		}
		synctest.Wait()
		r := <-ch
		if r.Code != kerr.RebalanceInProgress.Code {
			t.Fatalf("parked join: %v", kerr.ErrorForCode(r.Code))
		}
		if g := h.cjoin(memberA, 0, 2, 4).Generation; g != 23 {
			t.Fatalf("retried join: generation %d", g)
		}
	})
}

func (h *migrationHarness) groupTypes() (classicGroup *classic.Group, streamsGroup bool) {
	v, err := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		var cg *classic.Group
		if g := m.Classic.Group("app"); g != nil {
			cg = g.Clone()
		}
		return []any{cg, m.Streams.Group("app") != nil}, nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return v.([]any)[0].(*classic.Group), v.([]any)[1].(bool)
}

// Spec §10 scenarios 20, 22, 30: with policy upgrade the group stays a streams group of classic
// members; the last streams member's session expiry downgrades like a leave; a restart after a
// downgrade brings the classic group back in its rebalance.
func TestMigrationDowngradeVariants(t *testing.T) {
	t.Run("policy upgrade keeps the streams group", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newMigrationHarness(t, &scripted{targets: seedTargets()}, streams.MigrationUpgrade)
			h.writeClassic(seedGroup(t))
			h.hb(joinC())
			if r := h.hb(streamsBeat("app", "C", -1)); r.ErrorCode != 0 {
				t.Fatalf("leave %+v", r)
			}
			if cg, sg := h.groupTypes(); cg != nil || !sg {
				t.Fatalf("classic %+v streams %v", cg, sg)
			}
			if a := h.member("A"); a == nil || !a.IsClassic() {
				t.Fatal("A must stay a classic member of the streams group")
			}
			if ev := h.migrations(); ev[len(ev)-1].Direction != "downgrade" || ev[len(ev)-1].Result != "refused" {
				t.Fatalf("events %+v", ev)
			}
			if c := h.cbeat(memberA, 23); c != kerr.RebalanceInProgress.Code {
				t.Fatalf("A is prompted towards the new target: %v", kerr.ErrorForCode(c))
			}
		})
	})
	t.Run("session expiry of the last streams member, then restart", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newMigrationHarness(t, &scripted{targets: seedTargets()})
			h.writeClassic(seedGroup(t))
			h.hb(joinC())
			for i := 0; i < 5; i++ { // A and B heartbeat, C is silent
				time.Sleep(10 * time.Second)
				h.cbeat(memberA, 23)
				h.cbeat(memberB, 23)
			}
			synctest.Wait()
			cg, sg := h.groupTypes()
			if sg || cg == nil || cg.State != classic.PreparingRebalance || cg.Generation != 24 || len(cg.Members) != 2 {
				t.Fatalf("after C's session expiry: classic %+v streams %v", cg, sg)
			}
			// A and B were still at 23: a classic group has one generation (spec §5.6).
			if c := h.cbeat(memberA, 23); c != kerr.IllegalGeneration.Code {
				t.Fatalf("lagging A: %v", kerr.ErrorForCode(c))
			}
			h.restart()
			if cg, _ := h.groupTypes(); cg == nil || cg.State != classic.PreparingRebalance {
				t.Fatalf("after restart: %+v", cg)
			}
			if c := h.cbeat(memberB, 24); c != kerr.RebalanceInProgress.Code {
				t.Fatalf("B after restart: %v", kerr.ErrorForCode(c))
			}
		})
	})
}

// segmentFile is the single segment of shard 0 in a store directory.
func segmentFile(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "shard-0", "*.log"))
	if err != nil || len(files) != 1 {
		t.Fatalf("segments %v %v", files, err)
	}
	return files[0]
}

// Spec online-migration §7.6 and §10 scenarios 29, 30: a crash at any point of the append of a
// conversion's batch leaves the old group or the new one, never a mix: first the upgrade (the
// classic group of generation 23 or the complete streams group), then the downgrade (that
// streams group or the classic group it became). The segment file is cut at every byte of the
// batch (what kill -9 leaves behind is a prefix of what was written) and the shard loaded from it.
func TestMigrationCrashAtEveryByte(t *testing.T) {
	dir := t.TempDir()
	cfg := streams.DefaultConfig()
	cfg.InitialRebalanceDelay, cfg.AssignmentInterval = 0, 0
	cfg.Assignors = []string{"scripted"}
	cfg.Lookup = func(name string) (assign.Assignor, bool) {
		return &scripted{targets: seedTargets()}, name == "scripted"
	}
	cat := streamsCatalog{
		"input":               {Name: "input", ID: [16]byte{1}, Partitions: 6},
		"app-store-changelog": {Name: "app-store-changelog", ID: [16]byte{2}, Partitions: 6},
	}
	load := func() (machineView, func()) {
		st := openStore(t, dir)
		s := startAny(t, st, NewMachine)
		v, err := s.Read(context.Background(), func(m *Machine) (any, error) { return viewOf(m), nil })
		if err != nil {
			t.Fatal(err)
		}
		return v.(machineView), func() { s.Close(context.Background()); st.Close() }
	}
	write := func(op runtime.WriteOp[*Machine]) any {
		st := openStore(t, dir)
		s := startAny(t, st, NewMachine)
		defer func() { s.Close(context.Background()); st.Close() }()
		v, err := s.Write(context.Background(), op)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	write(func(*runtime.Ctx[*Machine], *Machine) runtime.Result {
		return runtime.Result{Records: []log.Record{seedGroup(t).Record()}}
	})
	before, done := load()
	done()
	seg := segmentFile(t, dir)
	fi, _ := os.Stat(seg)
	start := fi.Size()
	out := write(StreamsHeartbeat(streams.HeartbeatInput{Req: joinC(), Version: 1, Catalog: cat, Config: cfg})).(streams.HeartbeatOutput)
	if out.Response.ErrorCode != 0 || out.Upgrade == nil || !out.Upgrade.Converted {
		t.Fatalf("upgrade %+v", out.Response)
	}
	after, done := load()
	done()
	if reflect.DeepEqual(before, after) || len(after.Classic) != 0 || len(after.Streams["app"].Members) != 3 {
		t.Fatalf("the upgrade is not in the log: %+v", after)
	}
	cutEveryByte := func(start int64, before, after machineView) {
		t.Helper()
		full, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		sawBefore, sawAfter := 0, 0
		for cut := start; cut <= int64(len(full)); cut++ {
			if err := os.WriteFile(seg, full[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
			got, done := load()
			done()
			switch {
			case reflect.DeepEqual(got, before):
				sawBefore++
			case reflect.DeepEqual(got, after):
				sawAfter++
			default:
				t.Fatalf("cut at byte %d of %d: a state that is neither the old group nor the new one:\n%+v", cut, len(full), got)
			}
		}
		if sawBefore == 0 || sawAfter != 1 {
			t.Fatalf("before %d after %d", sawBefore, sawAfter)
		}
		if err := os.WriteFile(seg, full, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cutEveryByte(start, before, after)

	// The downgrade's batch (spec §9.2 step 23, §10 scenario 30), cut the same way.
	fi, _ = os.Stat(seg)
	start = fi.Size()
	leave := streamsBeat("app", "C", -1)
	if out := write(StreamsHeartbeat(streams.HeartbeatInput{Req: leave, Version: 1, Catalog: cat, Config: cfg})).(streams.HeartbeatOutput); out.Downgrade == nil || !out.Downgrade.Converted {
		t.Fatalf("downgrade %+v", out.Response)
	}
	downgraded, done := load()
	done()
	if len(downgraded.Streams) != 0 || downgraded.Classic["app"] == nil || downgraded.Classic["app"].State != classic.PreparingRebalance {
		t.Fatalf("the downgrade is not in the log: %+v", downgraded)
	}
	cutEveryByte(start, after, downgraded)
}

// Spec §7.6 item 3: when the append of the upgrade's batch fails, the in-memory state is the
// classic group again and the joining member gets a retriable error; its retry converts.
func TestMigrationUpgradeAppendFailureLeavesTheClassicGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: append(seedTargets()[:1], seedTargets()[0])})
		h.writeClassic(seedGroup(t))
		before := h.view()
		h.b.Hold(true)
		errc := make(chan error, 1)
		go func() {
			_, err := h.s.Write(context.Background(), StreamsHeartbeat(streams.HeartbeatInput{Req: joinC(), Version: 1, Catalog: h.cat, Config: h.cfg}))
			errc <- err
		}()
		for h.b.Pending(0) == 0 {
			synctest.Wait()
		}
		h.b.Lose(0, fmt.Errorf("disk gone"))
		if err := <-errc; err == nil {
			t.Fatal("the joining heartbeat was answered although its batch was lost")
		}
		h.b.Hold(false)
		for h.s.State() != runtime.StateActive {
			synctest.Wait()
		}
		if after := h.view(); !reflect.DeepEqual(before, after) {
			t.Fatalf("state after the lost batch:\n%+v\nwant\n%+v", after, before)
		}
		if c := h.cbeat(memberA, 23); c != 0 {
			t.Fatalf("classic heartbeat after the lost upgrade: %v", kerr.ErrorForCode(c))
		}
		if r := h.hb(joinC()); r.ErrorCode != 0 || r.MemberEpoch != 24 {
			t.Fatalf("retried join: %+v", r)
		}
	})
}

// Spec §3.7 and §10 scenarios 25, 27: a static classic member restarting as a streams member
// with its instance id converts the group and replaces itself without UNRELEASED_INSTANCE_ID;
// with the same process id nothing else moves (no epoch bump); the old classic incarnation is
// fenced.
func TestMigrationStaticUpgrade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: seedTargets()})
		g := seedGroup(t)
		inst := "instance-a"
		g.Members[0].InstanceID = &inst
		h.writeClassic(g)
		r := joinC()
		r.MemberID, r.InstanceID = "A2", &inst
		pid := "00000000-0000-0000-0000-00000000000a"
		r.ProcessID, r.UserEndpoint = &pid, &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "hostA", Port: 8080}
		resp := h.hb(r)
		if resp.ErrorCode != 0 || resp.MemberEpoch != 23 || !slices.Equal(partitionsOf(resp.ActiveTasks), []int32{0, 2, 4}) ||
			!slices.Equal(partitionsOf(resp.StandbyTasks), []int32{1, 3, 5}) {
			t.Fatalf("static upgrade: %d %v epoch %d active %v standby %v", resp.ErrorCode, resp.ErrorMessage, resp.MemberEpoch, resp.ActiveTasks, resp.StandbyTasks)
		}
		if h.member("A") != nil || h.member("A2") == nil || h.member("A2").IsClassic() {
			t.Fatal("A2 must have replaced A as a streams member")
		}
		if c := h.cbeat(memberB, 23); c != 0 {
			t.Fatalf("B must not be disturbed: %v", kerr.ErrorForCode(c))
		}
		v, err := h.s.Write(context.Background(), Heartbeat(h.ccfg, "app", "A", &inst, 23))
		if err != nil || v.(HeartbeatResult).Code != kerr.FencedInstanceID.Code {
			t.Fatalf("old classic incarnation: %v %v", err, v)
		}
	})
}

// Spec §4.2 J5, J8, J9 and §10 scenario 18: a new classic instance first gets
// MEMBER_ID_REQUIRED with nothing persisted, then joins and bumps the group epoch; a static
// classic member restarting with an empty member id replaces its old incarnation, which is then
// fenced.
func TestMigrationClassicJoinsIntoMixedGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, assign.Sticky{})
		g := seedGroup(t)
		inst := "instance-b"
		g.Members[1].InstanceID = &inst
		h.writeClassic(g)
		if r := h.hb(joinC()); r.ErrorCode != 0 || r.MemberEpoch != 24 {
			t.Fatalf("upgrade: %+v", r)
		}
		before := h.view()
		d := classicStreamsMember{id: "", process: 0xd}
		req := classic.JoinRequest{Group: "app", ClientID: "d", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
			ProtocolType: "consumer", Protocols: d.protocols(t, nil, nil, nil), Version: 9}
		v, _ := h.s.Write(context.Background(), JoinGroupWith(h.ccfg, req, h.sx()))
		first := v.(*classic.JoinResult)
		if first.Code != kerr.MemberIDRequired.Code || first.MemberID == "" {
			t.Fatalf("first join: %+v", first)
		}
		if after := h.view(); !reflect.DeepEqual(before, after) {
			t.Fatal("MEMBER_ID_REQUIRED persisted something")
		}
		req.MemberID = first.MemberID
		v, _ = h.s.Write(context.Background(), JoinGroupWith(h.ccfg, req, h.sx()))
		if r := v.(*classic.JoinResult); r.Code != 0 || r.Generation != 25 || r.MemberID != first.MemberID {
			t.Fatalf("second join: %+v", r)
		}
		if dm := h.member(first.MemberID); dm == nil || !dm.IsClassic() {
			t.Fatal("D is not a classic member")
		}

		// B restarts (static): empty member id, same instance id.
		breq := classic.JoinRequest{Group: "app", InstanceID: &inst, ClientID: "b", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
			ProtocolType: "consumer", Protocols: memberB.protocols(t, nil, nil, nil), Version: 9}
		v, _ = h.s.Write(context.Background(), JoinGroupWith(h.ccfg, breq, h.sx()))
		nb := v.(*classic.JoinResult)
		if nb.Code != 0 || nb.MemberID == "" || nb.MemberID == "B" {
			t.Fatalf("static restart: %+v", nb)
		}
		if h.member("B") != nil || h.member(nb.MemberID) == nil {
			t.Fatal("the new incarnation must replace B")
		}
		v, _ = h.s.Write(context.Background(), Heartbeat(h.ccfg, "app", "B", &inst, 23))
		if v.(HeartbeatResult).Code != kerr.FencedInstanceID.Code {
			t.Fatalf("old incarnation: %v", kerr.ErrorForCode(v.(HeartbeatResult).Code))
		}
		if !refusesNewerValues(t, h.b.Records(0), replayIntoNewMachine)[records.KindStreamsClassicMember] {
			t.Error("no streams_classic_member record to raise the value version of")
		}
	})
}

// Spec §5.4 and §10 scenario 26: the only streams member, static, restarts as a classic member
// with its instance id: replacement and downgrade in one batch; its JoinGroup is answered, its
// SyncGroup meets the classic group's rebalance; every member rejoins into generation epoch+1.
func TestMigrationStaticDowngrade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: seedTargets()})
		h.writeClassic(seedGroup(t))
		join := joinC()
		inst := "instance-c"
		join.InstanceID = &inst
		if r := h.hb(join); r.ErrorCode != 0 || r.MemberEpoch != 24 {
			t.Fatalf("upgrade: %+v", r)
		}
		c := classicStreamsMember{id: "", process: 0xc}
		req := classic.JoinRequest{Group: "app", InstanceID: &inst, ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
			ProtocolType: "consumer", Protocols: c.protocols(t, nil, nil, nil), Version: 9}
		v, err := h.s.Write(context.Background(), JoinGroupWith(h.ccfg, req, h.sx()))
		if err != nil {
			t.Fatal(err)
		}
		jr := v.(*classic.JoinResult)
		if jr.Code != 0 || jr.MemberID == "" || jr.MemberID == "C" {
			t.Fatalf("static classic restart of C: %+v", jr)
		}
		cg, sg := h.groupTypes()
		if sg || cg == nil || cg.State != classic.PreparingRebalance || cg.Generation != 24 || len(cg.Members) != 3 {
			t.Fatalf("after the static downgrade: classic %+v streams %v", cg, sg)
		}
		if ev := h.migrations(); ev[len(ev)-1].Direction != "downgrade" || ev[len(ev)-1].Result != "converted" {
			t.Fatalf("events %+v", ev)
		}
		pt, pn := "consumer", "stream"
		v, _ = h.s.Write(context.Background(), SyncGroupWith(h.ccfg, classic.SyncRequest{Group: "app", MemberID: jr.MemberID, InstanceID: &inst,
			Generation: jr.Generation, ProtocolType: &pt, Protocol: &pn, Version: 5}, h.sx()))
		if code := v.(*classic.SyncResult).Code; code != kerr.RebalanceInProgress.Code && code != kerr.IllegalGeneration.Code {
			t.Fatalf("C's sync after the downgrade: %v", kerr.ErrorForCode(code))
		}
		ja, jb := h.cjoinAsync(memberA, 0, 2, 4), h.cjoinAsync(memberB, 1, 3, 5)
		req.MemberID = jr.MemberID
		v, _ = h.s.Write(context.Background(), JoinGroupWith(h.ccfg, req, h.sx()))
		for _, r := range []*classic.JoinResult{<-ja, <-jb, v.(*classic.JoinResult)} {
			if r.Code != 0 || r.Generation != 25 {
				t.Fatalf("classic rebalance: %+v", r)
			}
		}
	})
}

// Spec §4.8 and §10 scenarios 13, 14: a classic member that keeps heartbeating but never
// rejoins is fenced when its rebalance timeout runs out after it was told to rejoin; one that
// joins but never syncs likewise.
func TestMigrationClassicJoinAndSyncTimers(t *testing.T) {
	for _, syncs := range []bool{false, true} {
		name := "never rejoins"
		if syncs {
			name = "joins but never syncs"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newMigrationHarness(t, &scripted{targets: seedTargets()})
				h.writeClassic(seedGroup(t))
				h.hb(joinC())
				if c := h.cbeat(memberA, 23); c != kerr.RebalanceInProgress.Code {
					t.Fatalf("A: %v", kerr.ErrorForCode(c))
				}
				if syncs {
					h.cjoin(memberA, 0, 2, 4) // answered at 23, UNREVOKED; no SyncGroup follows
				}
				start := time.Now()
				for h.member("A") != nil {
					time.Sleep(10 * time.Second) // A keeps its session alive
					h.cbeat(memberA, 23)
					h.hb(streamsBeat("app", "C", 24))
					h.cbeat(memberB, 23)
					synctest.Wait()
					if time.Since(start) > 400*time.Second {
						t.Fatal("A was never fenced")
					}
				}
				if took := time.Since(start); took < 290*time.Second {
					t.Fatalf("A fenced after %v, before its rebalance timeout (300 s)", took)
				}
			})
		})
	}
}

// Spec §7.7: a streams group left with classic members only because the policy forbade the
// downgrade is downgraded when the shard loads under a policy that allows it.
func TestMigrationDowngradeRecheckedOnLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: seedTargets()}, streams.MigrationUpgrade)
		h.writeClassic(seedGroup(t))
		h.hb(joinC())
		h.hb(streamsBeat("app", "C", -1))
		if cg, sg := h.groupTypes(); cg != nil || !sg {
			t.Fatalf("policy upgrade: classic %+v streams %v", cg, sg)
		}
		h.cfg.MigrationPolicy = streams.MigrationBidirectional
		h.restart()
		synctest.Wait()
		cg, sg := h.groupTypes()
		if sg || cg == nil || cg.State != classic.PreparingRebalance || len(cg.Members) != 2 {
			t.Fatalf("after a load under bidirectional: classic %+v streams %v", cg, sg)
		}
	})
}

// Spec §4.12 and §10 scenario 32: a streams member's shutdown request reaches the classic
// members: their heartbeat asks them to rejoin, their SyncGroup carries AssignmentInfo errCode 4
// and nothing assigned; then their heartbeats are quiet again.
func TestMigrationShutdownRequestReachesClassicMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, &scripted{targets: seedTargets()})
		h.writeClassic(seedGroup(t))
		h.hb(joinC())
		h.cjoin(memberA, 0, 2, 4)
		h.cjoin(memberB, 1, 3, 5)
		h.cjoin(memberA, 0, 2)
		want(t, "B stable", h.cjoin(memberB, 1, 5).Generation, int32(24))
		h.csync(memberB, 24)
		if c := h.cbeat(memberB, 24); c != 0 {
			t.Fatalf("B before the shutdown request: %v", kerr.ErrorForCode(c))
		}
		beat := streamsBeat("app", "C", 24)
		beat.ShutdownApplication = true
		if r := h.hb(beat); r.ErrorCode != 0 {
			t.Fatalf("C asks for a shutdown: %+v", r)
		}
		if c := h.cbeat(memberB, 24); c != kerr.RebalanceInProgress.Code {
			t.Fatalf("B after the shutdown request: %v", kerr.ErrorForCode(c))
		}
		gen := h.cjoin(memberB, 1, 4, 5).Generation
		pt, pn := "consumer", "stream"
		v, _ := h.s.Write(context.Background(), SyncGroupWith(h.ccfg, classic.SyncRequest{Group: "app", MemberID: "B", Generation: gen, ProtocolType: &pt, Protocol: &pn, Version: 5}, h.sx()))
		parts, info, _, err := classicproto.DecodeMemberAssignment(v.(*classic.SyncResult).Assignment)
		if err != nil || info.ErrCode != classicproto.ErrShutdown || len(parts) != 0 || len(info.Active) != 0 {
			t.Fatalf("B's shutdown assignment: %v %+v %v", parts, info, err)
		}
		if c := h.cbeat(memberB, gen); c != 0 {
			t.Fatalf("B after receiving the shutdown assignment: %v", kerr.ErrorForCode(c))
		}
	})
}

// A classic member's rejoin into a streams group follows the quiet-assignment rule as the
// streams heartbeat does: a join that bumps the epoch leaves the target held by the interval,
// and a rejoin that changes nothing, once the group has been quiet for
// group.streams.assignment.quiet.ms, computes it.
func TestMigrationClassicRejoinAfterQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newMigrationHarness(t, assign.Sticky{})
		h.cfg.AssignmentInterval, h.cfg.AssignmentQuiet = 5*time.Second, 100*time.Millisecond
		h.restart()
		h.writeClassic(seedGroup(t))
		if r := h.hb(joinC()); r.ErrorCode != 0 {
			t.Fatalf("upgrade: %+v", r)
		}
		held := func() (int32, int32) {
			var epoch, target int32
			h.s.Write(context.Background(), func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
				g := m.Streams.Groups["app"]
				epoch, target = g.Epoch, g.AssignmentEpoch
				return runtime.Result{}
			})
			return epoch, target
		}
		d := classicStreamsMember{id: "D", process: 0xd}
		req := classic.JoinRequest{Group: "app", MemberID: d.id, ClientID: "d", ClientHost: "/h", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
			ProtocolType: "consumer", Protocols: d.protocols(t, nil, nil, nil), Version: 9}
		time.Sleep(time.Second) // quiet since the upgrade's assignment
		if v, _ := h.s.Write(context.Background(), JoinGroupWith(h.ccfg, req, h.sx())); v.(*classic.JoinResult).Code != 0 {
			t.Fatalf("join: %+v", v)
		}
		if epoch, target := held(); target >= epoch {
			t.Fatalf("the bumping join computed the target itself (epoch %d, target %d)", epoch, target)
		}
		time.Sleep(100 * time.Millisecond)
		if v, _ := h.s.Write(context.Background(), JoinGroupWith(h.ccfg, req, h.sx())); v.(*classic.JoinResult).Code != 0 {
			t.Fatalf("rejoin: %+v", v)
		}
		if epoch, target := held(); target != epoch {
			t.Fatalf("a quiet rejoin left the target held (epoch %d, target %d)", epoch, target)
		}
	})
}
