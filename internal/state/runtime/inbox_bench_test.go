package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
)

// BenchmarkOperationRoundTrip is the runtime's share of every request: an operation queued in
// the shard's inbox, run on the shard goroutine and answered, with nothing to make durable. One
// caller at a time (the shard sleeps between operations, as at low load), and 8 at once.
func BenchmarkOperationRoundTrip(b *testing.B) {
	s := New(Options[*counters]{Shard: 0, New: newCounters, Backend: memlog.New()})
	s.Start()
	defer s.Close(context.Background())
	for s.State() != StateActive {
		time.Sleep(time.Millisecond)
	}
	ctx := context.Background()
	op := get("a")
	b.Run("callers=1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Read(ctx, op); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("callers=8", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(4) // 4 x GOMAXPROCS (2 here)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Read(ctx, op); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
