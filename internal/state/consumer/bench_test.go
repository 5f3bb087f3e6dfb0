package consumer

import (
	"fmt"
	"testing"
)

// benchmarkSteadyHeartbeat times the heartbeat of one member of a stable group of n members:
// its cost must not grow with the group (the indexes Replay keeps make that so).
func benchmarkSteadyHeartbeat(b *testing.B, n int) {
	w := newWorld(b, topics("t", n))
	for i := 0; i < n; i++ {
		w.hb(join("g", fmt.Sprintf("m%05d", i), "t"))
	}
	for round := 0; round < 3; round++ { // let every member reconcile to the last target
		for id, m := range w.s.Groups["g"].Members {
			w.hb(beat("g", id, m.Epoch, m.Assigned))
		}
	}
	if st := w.s.ListedState("g"); st != "Stable" {
		b.Fatalf("group %s", st)
	}
	m := w.s.Groups["g"].Members["m00000"]
	req := beat("g", m.ID, m.Epoch, m.Assigned)
	in := HeartbeatInput{Req: req, Catalog: w.cat, Config: w.cfg, Now: w.now, ClientID: "c", ClientHost: "/127.0.0.1"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out := w.s.Heartbeat(in); out.Response.ErrorCode != 0 || len(out.Records) != 0 {
			b.Fatalf("steady heartbeat: %d %d records", out.Response.ErrorCode, len(out.Records))
		}
	}
}

func BenchmarkSteadyHeartbeat100(b *testing.B)  { benchmarkSteadyHeartbeat(b, 100) }
func BenchmarkSteadyHeartbeat1000(b *testing.B) { benchmarkSteadyHeartbeat(b, 1000) }
