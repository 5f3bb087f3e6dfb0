package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsBenchGroup is a settled Streams group of n members on a runtime shard over memlog:
// two stateful subtopologies of n partitions each (two active and two standby tasks per
// member, num.standby.replicas=1), every member STABLE at the assignment epoch.
type streamsBenchGroup struct {
	s     *runtime.Shard[*Machine]
	cfg   streams.Config
	cat   streams.Catalog
	beats []*kmsg.StreamsGroupHeartbeatRequest // one steady-state heartbeat per member
}

func streamsBenchTopology() *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	for _, id := range []string{"0", "1"} {
		st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		st.SubtopologyID, st.SourceTopics = id, []string{"input-" + id}
		cl := kmsg.NewTopicInfo()
		cl.Topic = "store-" + id + "-changelog"
		st.StateChangelogTopics = []kmsg.TopicInfo{cl}
		t.Subtopologies = append(t.Subtopologies, st)
	}
	return &t
}

func newStreamsBenchGroup(tb testing.TB, n int) *streamsBenchGroup {
	cfg := streams.DefaultConfig()
	cfg.InitialRebalanceDelay, cfg.AssignmentInterval = 0, 0
	cfg.NumStandbyReplicas = 1
	// Building a large group on a busy machine can take longer than a session: nobody may be
	// fenced before the timed heartbeats start.
	cfg.SessionTimeout = time.Hour
	cfg.Lookup = assign.Lookup
	// The catalog is an immutable snapshot, as the handler reads it from the metadata shard.
	cat := meta.NewCatalog()
	for i, name := range []string{"input-0", "input-1", "store-0-changelog", "store-1-changelog"} {
		if err := cat.Replay(0, meta.TopicRecord(&meta.Topic{Name: name, ID: [16]byte{byte(i + 1)}, Partitions: int32(n)})); err != nil {
			tb.Fatal(err)
		}
	}
	g := &streamsBenchGroup{cfg: cfg, cat: cat.Snapshot()}
	g.s = runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: memlog.New()})
	g.s.Start()
	for g.s.State() != runtime.StateActive {
		if g.s.State() == runtime.StateFailed {
			tb.Fatal("shard failed")
		}
		time.Sleep(time.Millisecond)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%04d", i)
		r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		r.Group, r.MemberID, r.RebalanceTimeoutMillis = "app", ids[i], 300_000
		r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		r.Topology = streamsBenchTopology()
		pid := fmt.Sprintf("process-%04d", i)
		r.ProcessID = &pid
		g.hb(tb, r)
	}
	// Settle: every member reports what it holds until the group is stable, as clients that
	// revoke at once do.
	for round := 0; ; round++ {
		if round == 50 {
			tb.Fatalf("%d-member group did not settle", n)
		}
		if g.stable(tb) {
			break
		}
		for _, id := range ids {
			g.hb(tb, g.owning(tb, id))
		}
	}
	g.beats = make([]*kmsg.StreamsGroupHeartbeatRequest, n)
	for i, id := range ids {
		g.beats[i] = streamsBeat("app", id, g.owning(tb, id).MemberEpoch)
	}
	return g
}

func (g *streamsBenchGroup) hb(tb testing.TB, req *kmsg.StreamsGroupHeartbeatRequest) streams.HeartbeatOutput {
	if code, msg := streams.ValidateRequest(req); code != 0 {
		tb.Fatalf("invalid request %d %s", code, msg)
	}
	v, err := g.s.Write(context.Background(), StreamsHeartbeat(streams.HeartbeatInput{Req: req, Version: 1, Catalog: g.cat, Config: g.cfg}))
	if err != nil {
		tb.Fatal(err)
	}
	out := v.(streams.HeartbeatOutput)
	if out.Response.ErrorCode != 0 {
		tb.Fatalf("heartbeat of %s: error %d", req.MemberID, out.Response.ErrorCode)
	}
	return out
}

func (g *streamsBenchGroup) owning(tb testing.TB, member string) *kmsg.StreamsGroupHeartbeatRequest {
	v, err := g.s.Read(context.Background(), func(m *Machine) (any, error) {
		mm := m.Streams.Group("app").Members[member]
		if mm == nil {
			return nil, fmt.Errorf("member %s is gone", member)
		}
		r := streamsBeat("app", member, mm.Epoch)
		r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = streams.TasksToWire(mm.Assigned[streams.Active]), streams.TasksToWire(mm.Assigned[streams.Standby]), streams.TasksToWire(mm.Assigned[streams.Warmup])
		return r, nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return v.(*kmsg.StreamsGroupHeartbeatRequest)
}

func (g *streamsBenchGroup) stable(tb testing.TB) bool {
	v, err := g.s.Read(context.Background(), func(m *Machine) (any, error) {
		return m.Streams.Group("app").State() == streams.StableGroup, nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return v.(bool)
}

func (g *streamsBenchGroup) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g.s.Close(ctx)
}

// BenchmarkStreamsHeartbeatSteady is one steady-state StreamsGroupHeartbeat (member epoch only,
// every other field null: the member changes nothing) through the shard runtime as the server
// runs it, members taking turns, in a settled group of 10, 100 and 1000 members. Issue 12 wants
// the cost per heartbeat flat in the group size.
func BenchmarkStreamsHeartbeatSteady(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			g := newStreamsBenchGroup(b, n)
			defer g.close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				out := g.hb(b, g.beats[i%n])
				if len(out.Records) != 0 {
					b.Fatalf("steady heartbeat wrote %d records", len(out.Records))
				}
				i++
			}
		})
	}
}
