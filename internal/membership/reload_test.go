package membership

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// heldShards is the node's shards as the membership sees them: Own holds a shard, Disown and
// drop let go of it; owns counts Own calls that started a load.
type heldShards struct {
	mu   sync.Mutex
	held map[int32]bool
	owns map[int32]int
}

func newHeldShards() *heldShards { return &heldShards{held: map[int32]bool{}, owns: map[int32]int{}} }

func (h *heldShards) Own(i int32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[i] {
		return false
	}
	h.held[i] = true
	h.owns[i]++
	return true
}

func (h *heldShards) Disown(_ context.Context, i int32) { h.drop(i) }

func (h *heldShards) Owned(i int32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[i]
}

func (h *heldShards) drop(i int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.held, i)
}

func (h *heldShards) loads(i int32) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owns[i]
}

// A shard the assignment gives this node that it ends up not holding (neither loading nor
// serving), while its lease holds and the group is stable, is loaded again at the next beat:
// before, only a held shard that FAILED was, and a stable group never rebalances, so such a
// shard answered NOT_COORDINATOR until the process restarted (issue 18).
func TestAssignedShardNotHeldIsLoadedAtTheNextBeat(t *testing.T) {
	g := &fakeGroup{}
	shards := newHeldShards()
	core, logs := observer.New(zap.WarnLevel)
	m := New(Options{Request: g.request, Group: "g", Self: Node{ID: 1, Host: "10.0.0.1", Port: 9092}, ShardCount: 4,
		Shards: shards, SessionTimeout: time.Minute, HeartbeatInterval: 10 * time.Millisecond, RebalanceTimeout: time.Minute,
		Logger: zap.New(core)})
	m.Start()
	t.Cleanup(func() { m.Close(context.Background()) })
	waitFor(t, "the first assignment's loads", func() bool {
		for i := int32(0); i < 4; i++ {
			if !shards.Owned(i) {
				return false
			}
		}
		return true
	})
	shards.drop(2)
	waitFor(t, "shard 2 loaded again", func() bool { return shards.Owned(2) })
	if n := shards.loads(2); n != 2 {
		t.Fatalf("shard 2 loaded %d times, want 2", n)
	}
	// The line follows the load (Own, then the log), so it may come a moment after Owned.
	waitFor(t, "the reload logged", func() bool {
		return logs.FilterMessage("loading an assigned shard that this node did not hold").Len() > 0
	})
	for _, i := range []int32{0, 1, 3} {
		if n := shards.loads(i); n != 1 {
			t.Fatalf("shard %d, held all along, loaded %d times", i, n)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// LetGoOfAll (the state topic was deleted under the node) drops every shard the node holds and
// keeps the membership: the next beat loads each assigned shard again, from the topic.
func TestLetGoOfAllReloadsEveryAssignedShard(t *testing.T) {
	g := &fakeGroup{}
	shards := newHeldShards()
	m := New(Options{Request: g.request, Group: "g", Self: Node{ID: 1, Host: "10.0.0.1", Port: 9092}, ShardCount: 4,
		Shards: shards, SessionTimeout: time.Minute, HeartbeatInterval: 10 * time.Millisecond, RebalanceTimeout: time.Minute})
	m.Start()
	t.Cleanup(func() { m.Close(context.Background()) })
	all := func(loads int) func() bool {
		return func() bool {
			for i := int32(0); i < 4; i++ {
				if !shards.Owned(i) || shards.loads(i) < loads {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "the first assignment's loads", all(1))
	if n := m.LetGoOfAll(); n != 4 {
		t.Fatalf("let go of %d shards, want 4", n)
	}
	waitFor(t, "every shard loaded again", all(2))
}
