package streams

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchGroup builds a settled group of n members straight on the state machine: two stateful
// subtopologies of n partitions each, one standby, the sticky assignor, every member STABLE.
// The catalog is a meta.Snapshot, as the server passes it.
func benchGroup(tb testing.TB, n int) (*State, HeartbeatInput, []*kmsg.StreamsGroupHeartbeatRequest) {
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay, cfg.AssignmentInterval, cfg.NumStandbyReplicas = 0, 0, 1
	cfg.Lookup = assign.Lookup
	s := New()
	// The server's catalog is an immutable snapshot (meta.Snapshot), which the heartbeat may cache by.
	cat := meta.NewCatalog()
	for i, name := range []string{"input-0", "input-1", "store-0-changelog", "store-1-changelog"} {
		if err := cat.Replay(0, meta.TopicRecord(&meta.Topic{Name: name, ID: [16]byte{byte(i + 1)}, Partitions: int32(n)})); err != nil {
			tb.Fatal(err)
		}
	}
	in := HeartbeatInput{Version: 1, ClientID: "client", ClientHost: "/127.0.0.1", Config: cfg, Now: time.UnixMilli(1_000_000),
		Catalog: cat.Snapshot()}
	tp := topo(0, sub{id: "0", sources: []string{"input-0"}, changelogs: []string{"store-0-changelog"}},
		sub{id: "1", sources: []string{"input-1"}, changelogs: []string{"store-1-changelog"}})
	hb := func(req *kmsg.StreamsGroupHeartbeatRequest) []log.Record {
		if code, msg := ValidateRequest(req); code != 0 {
			tb.Fatalf("invalid request %d %s", code, msg)
		}
		in := in
		in.Req = req
		out := s.Heartbeat(in)
		if out.Response.ErrorCode != 0 {
			tb.Fatalf("heartbeat of %s: %d", req.MemberID, out.Response.ErrorCode)
		}
		for _, r := range out.Records {
			if err := s.Replay(r); err != nil {
				tb.Fatal(err)
			}
		}
		return out.Records
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%04d", i)
		hb(join("app", ids[i], tp))
	}
	for round := 0; s.Groups["app"].State() != StableGroup; round++ {
		if round == 50 {
			tb.Fatalf("%d-member group did not settle", n)
		}
		for _, id := range ids {
			m := s.Groups["app"].Members[id]
			hb(owning(beat("app", id, m.Epoch), tasksOf(m.Assigned[Active]), tasksOf(m.Assigned[Standby]), tasksOf(m.Assigned[Warmup])))
		}
	}
	beats := make([]*kmsg.StreamsGroupHeartbeatRequest, n)
	for i, id := range ids {
		beats[i] = beat("app", id, s.Groups["app"].Members[id].Epoch)
	}
	return s, in, beats
}

// BenchmarkHeartbeatSteady is State.Heartbeat alone for a steady-state heartbeat (member epoch
// only: the member changes nothing), members taking turns, at 10, 100 and 1000 members; the
// shard-level figure is BenchmarkStreamsHeartbeatSteady in internal/state/shard.
func BenchmarkHeartbeatSteady(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			s, in, beats := benchGroup(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				in.Req = beats[i%n]
				if out := s.Heartbeat(in); len(out.Records) != 0 || out.Response.ErrorCode != 0 {
					b.Fatalf("steady heartbeat: %d records, error %d", len(out.Records), out.Response.ErrorCode)
				}
				i++
			}
		})
	}
}
