package shard

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	rt "github.com/coordinatord/coordinatord/internal/state/runtime"
)

// stableClassicGroup is a Stable classic group of n dynamic consumer members, each with
// realistic subscription metadata and assignment, as one self-contained record.
func stableClassicGroup(id string, n int) *classic.Group {
	proto := "range"
	g := &classic.Group{ID: id, State: classic.Stable, PreviousState: classic.CompletingRebalance, Generation: 1,
		ProtocolType: "consumer", Protocol: &proto, StateTimestamp: 1_764_000_000_000}
	for i := 0; i < n; i++ {
		g.Members = append(g.Members, &classic.Member{ID: fmt.Sprintf("consumer-%04d-0b6f3c1e-8d0a-4f7e-9a51-6c2d7e3f%04d", i, i),
			ClientID: fmt.Sprintf("consumer-%04d", i), ClientHost: "/10.0.0.1", SessionTimeoutMs: 45000, RebalanceTimeout: 300000,
			Protocols:  []classic.Protocol{{Name: "range", Metadata: make([]byte, 64)}, {Name: "cooperative-sticky", Metadata: make([]byte, 72)}},
			Assignment: make([]byte, 48)})
	}
	g.Leader = g.Members[0].ID
	return g
}

// processCPU is the CPU time (user and system) the process has used, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkClassicHeartbeat is one steady-state Heartbeat of a member of a Stable group through
// the shard's write path (inbox, operation, timer re-arm, response), members taking turns. Its
// cost per operation should not depend on the group's size.
func BenchmarkClassicHeartbeat(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			s := rt.New(rt.Options[*Machine]{Shard: 0, New: NewMachine, Backend: memlog.New()})
			s.Start()
			defer s.Close(context.Background())
			for s.State() != rt.StateActive {
				time.Sleep(time.Millisecond)
			}
			g := stableClassicGroup("bench-group", n)
			ctx := context.Background()
			if _, err := s.Write(ctx, func(*rt.Ctx[*Machine], *Machine) rt.Result {
				return rt.Result{Records: []log.Record{g.Record()}}
			}); err != nil {
				b.Fatal(err)
			}
			cfg := classic.DefaultConfig()
			ops := make([]rt.WriteOp[*Machine], n)
			for i, m := range g.Members {
				ops[i] = Heartbeat(cfg, g.ID, m.ID, nil, g.Generation)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for i := 0; i < b.N; i++ {
				v, err := s.Write(ctx, ops[i%n])
				if err != nil || v.(HeartbeatResult).Code != 0 {
					b.Fatalf("heartbeat: %v %v", v, err)
				}
			}
			// CPU time, unlike ns/op, is not stretched by other processes taking the cores.
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
