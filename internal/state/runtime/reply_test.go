package runtime

import (
	"context"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
)

// A slot's earlier use answered again (a panic after the answer, say) does not reach the
// operation that holds the slot now; that operation still gets its own answer.
func TestReplyForAnEarlierUseIsDropped(t *testing.T) {
	sl := &replySlot{ch: make(chan outcome, 1)}
	first := sl.begin()
	reply(first, outcome{resp: "first"})
	if o := <-sl.ch; o.resp != "first" {
		t.Fatalf("first use got %v", o.resp)
	}
	second := sl.begin()
	reply(first, outcome{resp: "first, again"})
	select {
	case o := <-sl.ch:
		t.Fatalf("the second use was handed %v, an answer of the first", o.resp)
	default:
	}
	reply(second, outcome{resp: "second"})
	reply(second, outcome{resp: "second, again"}) // dropped, and must not block the shard
	if o := <-sl.ch; o.resp != "second" {
		t.Fatalf("second use got %v", o.resp)
	}
}

// An operation whose caller stopped waiting is answered into a slot nobody reuses: the next
// operations from the same goroutine get their own answers, never the abandoned one's.
func TestAbandonedWaitNeverAnswersTheNextOperation(t *testing.T) {
	s := startShard(t, memlog.New(), nil)
	for i := range 500 {
		ctx, cancel := context.WithCancel(context.Background())
		// The operation ends its caller's wait itself, then is answered: the answer arrives
		// just after the caller gave up, while it is starting its next operation.
		_, err := s.Write(ctx, func(*Ctx[*counters], *counters) Result {
			cancel()
			return Result{Response: "abandoned"}
		})
		if err != context.Canceled && err != nil {
			t.Fatalf("round %d: abandoned write: %v", i, err)
		}
		got, err := s.Write(context.Background(), func(*Ctx[*counters], *counters) Result {
			return Result{Response: i}
		})
		if err != nil || got != i {
			t.Fatalf("round %d: the next write was answered %v, %v", i, got, err)
		}
	}
}
