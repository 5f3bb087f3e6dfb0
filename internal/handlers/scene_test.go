package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
)

// catalogShard is a loaded metadata shard on a memory log holding topics, publishing its
// catalog to pub when pub is set; it closes when the test ends.
func catalogShard(tb testing.TB, pub *meta.Published, topics ...meta.NewTopic) *runtime.Shard[*meta.Catalog] {
	tb.Helper()
	opts := runtime.Options[*meta.Catalog]{Shard: 0, New: meta.NewCatalog, Backend: memlog.New(), Kind: "meta"}
	if pub != nil {
		opts.OnDurable = pub.Publish
	}
	m := runtime.New(opts)
	m.Start()
	tb.Cleanup(func() { closeWithin(5*time.Second, m.Close) })
	for m.State() != runtime.StateActive {
		time.Sleep(time.Millisecond)
	}
	if _, err := m.Write(context.Background(), meta.CreateTopics(topics, false, meta.Defaults{Partitions: 1, ReplicationFactor: 1, NodeID: 1})); err != nil {
		tb.Fatal(err)
	}
	return m
}

// loadedGroupShards is n group shards on memory logs, every one loaded; they close when the
// test ends.
func loadedGroupShards(tb testing.TB, n int32) *shard.Set {
	tb.Helper()
	groups := shard.NewSet(shard.SetOptions{Count: n, Backend: memlog.New()})
	groups.Start()
	tb.Cleanup(func() { closeWithin(5*time.Second, groups.Close) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups.WaitReady(ctx)
	return groups
}

func closeWithin(d time.Duration, closeFn func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	closeFn(ctx)
}
