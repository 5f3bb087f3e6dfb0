package handlers

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// BenchmarkOffsetCommitCatalog runs the OffsetCommit handler (simple commits of ten partitions,
// memlog storage) with the catalog read through a metadata shard round trip (before) and from
// the published snapshot (after).
func BenchmarkOffsetCommitCatalog(b *testing.B) {
	pub := &meta.Published{}
	m := catalogShard(b, pub, meta.NewTopic{Name: "t", Partitions: 10, ReplicationFactor: 1})
	groups := loadedGroupShards(b, 4)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = "g", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p := int32(0); p < 10; p++ {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, 1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	r := &wire.Request{Header: wire.Header{Key: 8, Version: 8}, Body: req}
	for _, bc := range []struct {
		name    string
		catalog *meta.Published
	}{{"shard-round-trip", nil}, {"published", pub}} {
		tbl := &Table{deps: Deps{Meta: m, Catalog: bc.catalog, Groups: groups, Limits: Limits{OffsetMetadataMaxBytes: 4096}}, log: zap.NewNop()}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp := tbl.offsetCommit(context.Background(), r).(*kmsg.OffsetCommitResponse)
				if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
					b.Fatalf("commit answered %d", c)
				}
			}
		})
		// 64 committers of their own groups: the round trip also queues them in the one
		// metadata shard, whatever group shard they commit to.
		b.Run(bc.name+"-64-clients", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32) // x GOMAXPROCS 2
			var next atomic.Int32
			b.RunParallel(func(pb *testing.PB) {
				own := *req
				own.Group = fmt.Sprintf("g%d", next.Add(1))
				r := &wire.Request{Header: r.Header, Body: &own}
				for pb.Next() {
					resp := tbl.offsetCommit(context.Background(), r).(*kmsg.OffsetCommitResponse)
					if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
						b.Errorf("commit answered %d", c)
						return
					}
				}
			})
		})
	}
}
