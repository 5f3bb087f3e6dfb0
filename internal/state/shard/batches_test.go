package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

// bigGroup commits n partitions of topic "t" to simple group g, in commits the log accepts.
func bigGroup(t *testing.T, s *runtime.Shard[*Machine], g string, n, per int) {
	t.Helper()
	for i := 0; i < n; i += per {
		var tps []offsets.TopicPartition
		for p := i; p < i+per && p < n; p++ {
			tps = append(tps, offsets.TopicPartition{Topic: "t", Partition: int32(p)})
		}
		write[[]int16](t, s, CommitOffsets(CommitRequest{Group: g, Generation: -1, Version: 8, Partitions: parts(tps...), MaxMetadata: 10}))
	}
}

func committedCount(t *testing.T, s *runtime.Shard[*Machine], g string) int {
	t.Helper()
	v, err := s.Read(context.Background(), func(m *Machine) (any, error) { return len(m.Offsets.All(g)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return v.(int)
}

// A group with more offsets than one log batch holds (message.max.bytes) can still be deleted,
// expired and dropped with its topics: the tombstones go in several batches, and the group is
// gone for good once the answer is out.
func TestGroupLargerThanOneBatchIsRemoved(t *testing.T) {
	const n, limit = 400, 50
	for _, tc := range []struct {
		name string
		op   runtime.WriteOp[*Machine]
	}{
		{"DeleteGroups", DeleteClassicGroup("g")},
		{"OffsetDelete", func() runtime.WriteOp[*Machine] {
			var tps []offsets.TopicPartition
			for p := 0; p < n; p++ {
				tps = append(tps, offsets.TopicPartition{Topic: "t", Partition: int32(p)})
			}
			return DeleteOffsets("g", tps)
		}()},
		{"retention", ExpireOffsets(RetentionConfig{Retention: 0})},
		{"deleted topic", DropDeletedTopicOffsets(RetentionConfig{}, func(string) ([16]byte, bool) { return [16]byte{}, false }, time.Now().Add(time.Hour))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := memlog.New()
			b.MaxBatchRecords = limit
			s := memShard(t, b, nil)
			bigGroup(t, s, "g", n, limit)
			if _, err := s.Write(context.Background(), tc.op); err != nil {
				t.Fatalf("removing %d offsets with batches of %d records: %v", n, limit, err)
			}
			closeShard(s)
			s = memShard(t, b, nil)
			defer closeShard(s)
			if c := committedCount(t, s, "g"); c != 0 {
				t.Fatalf("%d offsets left after restart", c)
			}
		})
	}
}

// A crash between the batches of a DeleteGroups leaves a prefix of the offsets deleted and the
// group readable; the request was not answered, and its retry finishes the job.
func TestDeleteGroupCrashBetweenBatches(t *testing.T) {
	const n, limit = 400, 50
	b := memlog.New()
	b.MaxBatchRecords = limit
	s := memShard(t, b, nil)
	defer func() { closeShard(s) }()
	bigGroup(t, s, "g", n, limit)
	b.Hold(true)
	done := make(chan error, 1)
	go func() { _, err := s.Write(context.Background(), DeleteClassicGroup("g")); done <- err }()
	for b.Pending(0) < n/limit {
		select {
		case err := <-done:
			t.Fatalf("DeleteGroups of %d offsets in batches of %d: %v", n, limit, err)
		case <-time.After(time.Millisecond):
		}
	}
	b.ReleaseOldest(0)
	select {
	case err := <-done:
		t.Fatalf("DeleteGroups answered (%v) with only one of %d batches durable", err, n/limit)
	default:
	}
	b.Lose(0, errors.New("crash"))
	if err := <-done; !errors.Is(err, runtime.ErrNotDurable) && !errors.Is(err, runtime.ErrNotAvailable) {
		t.Fatalf("DeleteGroups after losing its last batches: %v", err)
	}
	b.Hold(false)
	closeShard(s)
	s = memShard(t, b, nil)
	if c := committedCount(t, s, "g"); c != n-limit {
		t.Fatalf("%d offsets after the crash, want %d (one batch deleted)", c, n-limit)
	}
	if code := write[DeleteResult](t, s, DeleteClassicGroup("g")).Code; code != 0 {
		t.Fatalf("retried DeleteGroups: %d", code)
	}
	closeShard(s)
	s = memShard(t, b, nil)
	if c := committedCount(t, s, "g"); c != 0 {
		t.Fatalf("%d offsets left after the retried delete", c)
	}
	if code := write[DeleteResult](t, s, DeleteClassicGroup("g")).Code; code == 0 {
		t.Fatal("group still there after its retried delete")
	}
}
