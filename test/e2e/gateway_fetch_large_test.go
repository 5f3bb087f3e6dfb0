package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// spliceValue is record i of partition p: its size varies from a few bytes to 300 KiB, and
// every byte depends on the partition, the record and its position, so a byte moved, dropped
// or taken from another record shows.
func spliceValue(p int32, i int) []byte {
	sizes := []int{40, 5 << 10, 60 << 10, 300 << 10, 1 << 10, 20 << 10}
	v := make([]byte, sizes[(i+int(p))%len(sizes)])
	for j := range v {
		v[j] = byte(j*13 + i*7 + int(p)*101 + j/256)
	}
	return v
}

// Records of 40 bytes to 300 KiB produced through the gateway come back through it intact and
// in order: a franz-go consumer with answers of several partitions up to 700 KiB and one with
// answers up to 4 MiB both read every record of every partition exactly as produced, from a
// real Kafka broker. (Written for the splicing of Fetch answers, measured and left out:
// docs/benchmarks-gateway.md.)
func TestGateway_LargeFetchAnswersIntact(t *testing.T) {
	requireE2E(t)
	t.Parallel()
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	topic := "gw-large-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const partitions, perPartition = 4, 30
	adm := kadm.NewClient(newClient(t, g.Addr))
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopics through the gateway: %v", err)
	}
	producer := newClient(t, g.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			producer.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("%d-%d", p, i)), Value: spliceValue(p, i)}, nil)
		}
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("producing through the gateway: %v", err)
	}

	consume := func(name string, opts ...kgo.Opt) {
		t.Helper()
		cl := newClient(t, g.Addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
		next := make([]int, partitions)
		for done := 0; done < partitions*perPartition; {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%s: read %d of %d records: %v", name, done, partitions*perPartition, err)
			}
			fs.EachError(func(tp string, p int32, err error) { t.Fatalf("%s: fetch %s/%d: %v", name, tp, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				i := next[r.Partition]
				if string(r.Key) != fmt.Sprintf("%d-%d", r.Partition, i) || !bytes.Equal(r.Value, spliceValue(r.Partition, i)) {
					t.Fatalf("%s: partition %d record %d (offset %d, key %q, %d bytes) is not the one produced", name, r.Partition, i, r.Offset, r.Key, len(r.Value))
				}
				next[r.Partition]++
				done++
			})
		}
		cl.Close()
	}
	consume("answers up to 700 KiB", kgo.FetchMaxPartitionBytes(200<<10), kgo.FetchMaxBytes(700<<10))
	consume("answers up to 4 MiB", kgo.FetchMaxPartitionBytes(1<<20), kgo.FetchMaxBytes(4<<20))
}
