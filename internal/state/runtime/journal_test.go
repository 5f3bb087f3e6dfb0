package runtime

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/segment"
)

// With the segment log, shards share a journal round: a write's response is released only
// after the round holding its records has been fsynced, whichever shard's group started the
// round, and a round covers the groups of several shards.
func TestWriteAnsweredOnlyAfterSharedJournalRound(t *testing.T) {
	fs := segment.NewMemFS()
	st, err := segment.Open(segment.Options{Dir: "/data", Shards: 2, FS: fs, Journals: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var shards []*Shard[*counters]
	for i := int32(0); i < 2; i++ {
		s := New(Options[*counters]{Shard: i, New: newCounters, Backend: st})
		s.Start()
		defer s.Close(context.Background())
		waitState(t, s, StateActive)
		shards = append(shards, s)
	}
	entered, release := make(chan struct{}, 8), make(chan struct{})
	var releaseOnce sync.Once
	// A failed assertion must not leave the round held: the deferred closes wait for it.
	defer releaseOnce.Do(func() { close(release) })
	fs.SetInject(func(op segment.Op, path string) error {
		if op == segment.OpSync && strings.HasSuffix(path, ".wal") {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	})
	ctx := context.Background()
	answered := make(chan int, 2)
	go func() { shards[0].Write(ctx, set("a", 1)); answered <- 0 }()
	<-entered // shard 0's round is in its fsync
	go func() { shards[1].Write(ctx, set("b", 2)); answered <- 1 }()
	select {
	case i := <-answered:
		t.Fatalf("shard %d answered while the journal fsync was held", i)
	case <-time.After(50 * time.Millisecond):
	}
	release <- struct{}{}
	if i := <-answered; i != 0 {
		t.Fatalf("shard %d answered before the round holding its records", i)
	}
	<-entered // the next round, holding shard 1's records
	select {
	case <-answered:
		t.Fatal("shard 1 answered while its round's fsync was held")
	case <-time.After(50 * time.Millisecond):
	}
	releaseOnce.Do(func() { close(release) })
	<-answered
	fs.SetInject(nil)
	for i, s := range shards {
		v, _ := s.Read(ctx, get(string(rune('a'+i))))
		if v != int64(i+1) {
			t.Fatalf("shard %d read %v", i, v)
		}
	}
}
