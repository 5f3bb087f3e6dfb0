package shard

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"runtime"
	"strconv"
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

// BenchmarkMemoryPer100kOffsets reports the heap a shard's machine holds for 100 000 live
// committed offsets once loaded, in three layouts: consumer groups of 500 partitions over 10
// topics (offsetRecord); coordbench restart's 100 partitions of one topic per group; and Kafka
// Streams commits, which carry metadata (the partition time, base64) on every partition.
func BenchmarkMemoryPer100kOffsets(b *testing.B) {
	const n = 100_000
	layouts := []struct {
		name   string
		record func(i int) log.Record
	}{
		{"500-per-group", offsetRecord},
		{"100-per-group", func(i int) log.Record {
			return offsets.CommitRecord("coordbench-restart-"+strconv.Itoa(i/100), offsets.TopicPartition{Topic: "coordbench-restart", Partition: int32(i % 100)},
				offsets.Committed{Offset: int64(i), LeaderEpoch: -1, CommitTimestamp: 1_764_000_000_000 + int64(i/100), ExpireTimestamp: -1})
		}},
		{"streams-metadata", func(i int) log.Record {
			meta := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64([]byte{2}, uint64(1_764_000_000_000+i)))
			return offsets.CommitRecord(fmt.Sprintf("wordcount-app-%03d", i/200), offsets.TopicPartition{Topic: fmt.Sprintf("wordcount-app-repartition-%d", (i/50)%4), Partition: int32(i % 50)},
				offsets.Committed{Offset: int64(i), LeaderEpoch: 0, Metadata: meta, CommitTimestamp: 1_764_000_000_000 + int64(i/200), ExpireTimestamp: -1})
		}},
	}
	for _, l := range layouts {
		b.Run(l.name, func(b *testing.B) {
			recs := make([]log.Record, n)
			for i := range recs {
				recs[i] = l.record(i)
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
		})
	}
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
