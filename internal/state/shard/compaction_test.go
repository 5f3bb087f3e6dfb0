package shard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

// Issue 10, defect 5, on the real segmented log: while a compaction's I/O is held (the fsync
// of its output blocks in the fault-injection file system), the shard keeps committing and
// fetching offsets; once released, the compaction completes and everything committed meanwhile
// is still there after a restart.
func TestShardServesWhileCompactionFsyncIsHeld(t *testing.T) {
	fs := segment.NewMemFS()
	open := func() *segment.Store {
		st, err := segment.Open(segment.Options{Dir: "/data", Shards: 1, SegmentBytes: 4096, FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only a hang hits it
	defer cancel()
	commit := func(s *runtime.Shard[*Machine], group string, off int64) {
		t.Helper()
		_, err := s.Write(ctx, CommitOffsets(CommitRequest{Group: group, Generation: -1, Version: 8, MaxMetadata: 4096,
			Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "t", Partition: 0}, Offset: off, LeaderEpoch: -1, RetentionMs: -1}}}))
		if err != nil {
			t.Fatalf("commit while a compaction is held: %v", err)
		}
	}
	fetch := func(s *runtime.Shard[*Machine], group string) int64 {
		t.Helper()
		v, err := s.Read(ctx, func(m *Machine) (any, error) {
			c, _ := m.Offsets.Get(group, "t", 0)
			return c.Offset, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return v.(int64)
	}

	st := open()
	s := runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: st})
	s.Start()
	for s.State() != runtime.StateActive {
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < 300; i++ { // several sealed segments of overwritten offsets: garbage to drop
		commit(s, fmt.Sprint("g", i%5), int64(i))
	}
	s.Close(ctx)
	st.Close()

	held, release := make(chan struct{}), make(chan struct{})
	var heldOnce, releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	fs.SetInject(func(op segment.Op, path string) error {
		if op == segment.OpSync && strings.HasSuffix(path, ".cleaned") {
			heldOnce.Do(func() { close(held) })
			<-release
		}
		return nil
	})
	st = open()
	s = runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: st, CompactEvery: 5 * time.Millisecond})
	s.Start()
	<-held
	for i := 0; i < 50; i++ {
		commit(s, "during", int64(1000+i))
		if got := fetch(s, "during"); got != int64(1000+i) {
			t.Fatalf("fetch while a compaction is held: %d, want %d", got, 1000+i)
		}
	}
	releaseOnce.Do(func() { close(release) })
	s.Close(ctx)
	st.Close()
	fs.SetInject(nil)

	st = open()
	defer st.Close()
	s = startOne(t, st)
	defer s.Close(ctx)
	if got := fetch(s, "during"); got != 1049 {
		t.Fatalf("after restart the offset committed during compaction is %d, want 1049", got)
	}
	for g := 0; g < 5; g++ {
		if got, want := fetch(s, fmt.Sprint("g", g)), int64(295+g); got != want {
			t.Fatalf("g%d: %d, want %d", g, got, want)
		}
	}
}
