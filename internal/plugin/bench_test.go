package plugin

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// BenchmarkCallerOverhead compares a memory-plugin Get called directly with the same call made
// through the guarded Caller (worker goroutine, timeout context, panic guard, metrics), serial
// and from parallel goroutines. The difference is the price of the guard per call.
func BenchmarkCallerOverhead(b *testing.B) {
	p, _ := NewMemory(topologyplugin.Config{})
	ctx := context.Background()
	if err := p.Set(ctx, "g", 1, desc("g")); err != nil {
		b.Fatal(err)
	}
	c := NewCaller(Options{Plugin: p, Name: "memory", CallTimeout: 10 * time.Second, MaxConcurrency: 64}, nil)
	defer c.Close()
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if d, err := p.Get(ctx, "g", 1); d == nil || err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded", func(b *testing.B) {
		for b.Loop() {
			if d, err := c.Get(ctx, "g", 1); d == nil || err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if d, err := c.Get(ctx, "g", 1); d == nil || err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("solicit", func(b *testing.B) {
		for b.Loop() {
			c.Backoff().Solicit("g", 1)
		}
	})
}
