package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

func waitShardState(t *testing.T, set *Set, i int32, want runtime.State) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for set.Shard(i).State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("shard %d is %v, want %v", i, set.Shard(i).State(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeRecord appends one record of a kind no machine knows (a replay skips it).
func writeRecord(*runtime.Ctx[*Machine], *Machine) runtime.Result {
	return runtime.Result{Records: []log.Record{{Key: []byte{0xfe, 0xfe, 1}, Value: []byte{0}}}}
}

func noop(*runtime.Ctx[*Machine], *Machine) runtime.Result { return runtime.Result{} }

// A shard whose log failed for good (fenced: another node's load found this node's claim of
// it unreleased) answers NOT_COORDINATOR (runtime.ErrFailed) from then on, and Own, which the
// membership calls for it at every heartbeat while its assignment still gives it the shard,
// loads it again. (A Set that counted a FAILED shard as held passed the earlier tests: the
// shard would answer NOT_COORDINATOR until the next rebalance, which a stable group never has.)
func TestOwnReloadsAShardWhoseLogFailed(t *testing.T) {
	b := memlog.New()
	set := NewSet(SetOptions{Count: 1, Backend: b, Deferred: true})
	defer set.Close(context.Background())
	if !set.Own(0) {
		t.Fatal("Own started no load")
	}
	waitShardState(t, set, 0, runtime.StateActive)
	// The fence is found by the round carrying the shard's next write.
	b.Hold(true)
	answered := make(chan error, 1)
	go func() { _, err := set.Shard(0).Write(context.Background(), writeRecord); answered <- err }()
	for deadline := time.Now().Add(30 * time.Second); b.Pending(0) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the write never reached the log (shard %v)", set.Shard(0).State())
		}
	}
	b.Fail(0, errors.New("fenced by another node's load"))
	if err := <-answered; err == nil {
		t.Fatal("a write acknowledged although its round failed")
	}
	b.Hold(false)
	waitShardState(t, set, 0, runtime.StateFailed)
	if _, err := set.Shard(0).Write(context.Background(), noop); !errors.Is(err, runtime.ErrFailed) {
		t.Fatalf("a write to the FAILED shard: %v, want runtime.ErrFailed", err)
	}
	if !set.Own(0) {
		t.Fatal("Own did not reload the FAILED shard")
	}
	waitShardState(t, set, 0, runtime.StateActive)
	if _, err := set.Shard(0).Write(context.Background(), noop); err != nil {
		t.Fatalf("a write after the reload: %v", err)
	}
}

// Once the Set is closed (the process stops) Own loads nothing: a load then would claim the
// shard on the upstream with nobody left to release it, and the next owner would have to fence
// the node.
func TestOwnLoadsNothingOnceTheSetIsClosed(t *testing.T) {
	set := NewSet(SetOptions{Count: 1, Backend: memlog.New(), Deferred: true})
	set.Close(context.Background())
	if set.Own(0) {
		t.Fatal("Own started a load after Close")
	}
	if st := set.Shard(0).State(); st != runtime.StateNotOwned {
		t.Fatalf("shard %v after Close and Own, want not owned", st)
	}
}
