package shard

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

func openStore(t testing.TB, dir string) *segment.Store {
	t.Helper()
	st, err := segment.Open(segment.Options{Dir: dir, Shards: 1, SegmentBytes: 16 << 10, DeleteRetention: 0})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func startOne(t testing.TB, st *segment.Store) *runtime.Shard[*Machine] {
	t.Helper()
	s := runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: st})
	s.Start()
	for s.State() != runtime.StateActive {
		if s.State() == runtime.StateFailed {
			t.Fatal("shard failed to load")
		}
		time.Sleep(time.Millisecond)
	}
	return s
}

func snapshotOffsets(t testing.TB, s *runtime.Shard[*Machine]) map[string][]any {
	t.Helper()
	v, err := s.Read(context.Background(), func(m *Machine) (any, error) {
		out := map[string][]any{}
		for _, g := range m.Offsets.Groups() {
			for _, e := range m.Offsets.All(g) {
				c := e.Committed
				c.LogOffset = 0 // compaction keeps offsets, but the test compares values only
				out[g] = append(out[g], e.TopicPartition, c)
			}
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string][]any)
}

// ARCHITECTURE §6.1: after random operation sequences, a fresh machine replaying the log (and
// the compacted log) equals the durable view. Runs on the real segmented log, rolling segments
// often so that compaction has sealed history to rewrite.
func TestReplayEquivalenceOverSegmentLogAndCompaction(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	s := startOne(t, st)
	rng := rand.New(rand.NewSource(7))
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		group := fmt.Sprintf("g%d", rng.Intn(15))
		parts := []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: fmt.Sprint("t", rng.Intn(3)), Partition: int32(rng.Intn(4))}, Offset: rng.Int63n(1 << 40), LeaderEpoch: -1, RetentionMs: -1}}
		if _, err := s.Write(ctx, CommitOffsets(CommitRequest{Group: group, Generation: -1, Version: 8, Partitions: parts, MaxMetadata: 4096})); err != nil {
			t.Fatal(err)
		}
		if i%250 == 0 { // and delete some, to exercise tombstones
			if _, err := s.Write(ctx, func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
				var res runtime.Result
				for _, e := range m.Offsets.All(group) {
					res.Records = append(res.Records, offsets.DeleteRecord(group, e.TopicPartition))
				}
				return res
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := snapshotOffsets(t, s)
	s.Close(ctx)
	st.Close()

	st = openStore(t, dir)
	s = startOne(t, st)
	if got := snapshotOffsets(t, s); !reflect.DeepEqual(got, want) {
		t.Fatal("state replayed from the log differs from the durable view before restart")
	}
	s.Close(ctx)
	st.Close()

	// Compact through the log API, so the test knows the compaction ran to its end (a shard's
	// timer-driven compaction is stopped by Close), then replay the compacted log.
	before, after := compactDir(t, dir, openStore)
	// Replay after compaction follows live state: at most 15 groups x 3 topics x 4 partitions,
	// plus what the active segment holds.
	if after*5 > before {
		t.Fatalf("compaction kept %d of %d records", after, before)
	}
	st = openStore(t, dir)
	defer st.Close()
	s = startOne(t, st)
	defer s.Close(ctx)
	if got := snapshotOffsets(t, s); !reflect.DeepEqual(got, want) {
		t.Fatal("state replayed from the compacted log differs")
	}
}
