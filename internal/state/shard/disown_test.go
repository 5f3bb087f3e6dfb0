package shard

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

// slowClose is a backend whose logs' Close blocks until release is closed: a Kafka log whose
// round in flight waits for an upstream that is down.
type slowClose struct {
	*memlog.Backend
	release chan struct{}
}

func (b slowClose) Open(shard int32, cb log.Callbacks) (log.Log, error) {
	l, err := b.Backend.Open(shard, cb)
	if err != nil {
		return nil, err
	}
	return slowLog{Log: l, release: b.release}, nil
}

type slowLog struct {
	log.Log
	release chan struct{}
}

func (l slowLog) Close() error {
	<-l.release
	return l.Log.Close()
}

// Disown lets go at once and returns when its ctx ends, even while the shard's log is still
// closing: the membership calls it holding its lock, and a close that waited for an upstream
// round to give up held heartbeats and the rejoin for as long (after an upstream restart, 30 s
// and more).
func TestDisownReturnsWhenItsContextEndsWhileTheLogCloses(t *testing.T) {
	b := slowClose{Backend: memlog.New(), release: make(chan struct{})}
	set := NewSet(SetOptions{Count: 1, Backend: b, Deferred: true})
	released := false
	release := func() {
		if !released {
			close(b.release)
			released = true
		}
	}
	defer func() { release(); set.Close(context.Background()) }()
	if !set.Own(0) {
		t.Fatal("Own started no load")
	}
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	set.WaitReady(wctx)
	cancel()
	if st := set.Shard(0).State(); st != runtime.StateActive {
		t.Fatalf("shard %v after the load, want active", st)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller's bound has passed: Disown must not wait for the close
	done := make(chan struct{})
	go func() { set.Disown(ctx, 0); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a liveness bound, far beyond any scheduling delay
		release()
		<-done
		t.Fatal("Disown waited for the log's close beyond its ctx")
	}
	if set.Owned(0) || set.Shard(0).State() != runtime.StateNotOwned {
		t.Fatalf("after Disown the shard is %v, want not owned", set.Shard(0).State())
	}
	release()
}
