package shard

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	rt "github.com/coordinatord/coordinatord/internal/state/runtime"
)

// offsetRecord is a realistic commit: a consumer group of a few hundred partitions over a few
// dozen topics.
func offsetRecord(i int) log.Record {
	return offsets.CommitRecord(fmt.Sprintf("consumer-group-%04d", i/500), offsets.TopicPartition{Topic: fmt.Sprintf("orders-events-%02d", (i/50)%10), Partition: int32(i % 50)},
		offsets.Committed{Offset: int64(i) * 1000, LeaderEpoch: 3, CommitTimestamp: 1_764_000_000_000 + int64(i), ExpireTimestamp: -1})
}

// BenchmarkMemoryPer100kOffsets reports the heap one machine instance holds for 100 000 live
// committed offsets. A shard keeps two instances (durable and speculative), so a process holds
// twice this.
func BenchmarkMemoryPer100kOffsets(b *testing.B) {
	const n = 100_000
	recs := make([]log.Record, n)
	for i := range recs {
		recs[i] = offsetRecord(i)
	}
	var perRecord float64
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := NewMachine()
		for j, r := range recs {
			if err := m.Replay(int64(j), r); err != nil {
				b.Fatal(err)
			}
		}
		m.Offsets.Settle() // as the shard does once its load is done
		runtime.GC()
		runtime.ReadMemStats(&after)
		perRecord = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(m)
	}
	b.ReportMetric(perRecord, "B/offset")
	b.ReportMetric(perRecord*n/(1<<20), "MiB/100k")
}

// BenchmarkShardLoad1M measures a shard start: 1 000 000 offset commits (all distinct keys, so
// nothing to compact away) read from the segmented log and replayed into both machine instances.
func BenchmarkShardLoad1M(b *testing.B) {
	dir := b.TempDir()
	st, err := segment.Open(segment.Options{Dir: dir, Shards: 1})
	if err != nil {
		b.Fatal(err)
	}
	l, err := st.Open(0, log.Callbacks{Durable: func(int64) {}, Failed: func(error) {}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Load(func(int64, log.Record) error { return nil }); err != nil {
		b.Fatal(err)
	}
	const n, perBatch = 1_000_000, 500
	batch := make([]log.Record, 0, perBatch)
	for i := 0; i < n; i++ {
		batch = append(batch, offsetRecord(i))
		if len(batch) == perBatch {
			if _, err := l.Append(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	l.Close()
	st.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := segment.Open(segment.Options{Dir: dir, Shards: 1})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		s := rt.New(rt.Options[*Machine]{Shard: 0, New: NewMachine, Backend: st})
		s.Start()
		for s.State() != rt.StateActive {
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/load")
		s.Close(context.Background())
		st.Close()
	}
}
