package membership

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// These tests hold the membership to the half of the hand-over argument it carries
// (storage.md, "Several nodes", points 2 and 3): a node lets go of a shard before the leader
// can hand it on, serves nothing once its lease lapsed or the group dropped it, and measures
// its lease from the sending of the request the group answered. Each was written against a
// mutant of membership.go that the earlier tests let pass (docs/developing.md, "Mutation
// sweeps").

// member is node 1 ("self") in g, with its shards; not started, so a test can hook it first.
func member(g *fakeGroup, shards Shards, session, beat time.Duration, opts ...func(*Options)) *Membership {
	o := Options{Request: g.request, Group: "g", Self: Node{ID: 1, Host: "10.0.0.1", Port: 9092}, ShardCount: 4,
		Shards: shards, SessionTimeout: session, HeartbeatInterval: beat, RebalanceTimeout: time.Minute}
	for _, f := range opts {
		f(&o)
	}
	return New(o)
}

func start(t *testing.T, m *Membership) {
	t.Helper()
	m.Start()
	t.Cleanup(func() { m.Close(context.Background()) })
}

func (h *heldShards) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

func allHeld(shards *heldShards) func() bool {
	return func() bool { return shards.count() == 4 }
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// A node over its quota lets go of the shards the assignment takes from it before it rejoins
// (its next JoinGroup claims only what it kept), and rejoins at once rather than at its next
// heartbeat (an hour here), so that the next generation hands them to the other node.
func TestLostShardsAreLetGoBeforeTheRejoinThatHandsThemOn(t *testing.T) {
	g := &fakeGroup{peers: map[string]memberMeta{"b": {Node: 2, Host: "10.0.0.2", Port: 9092, Shards: 4, Owned: []int32{}}}}
	shards := newHeldShards()
	for i := int32(0); i < 4; i++ {
		shards.held[i] = true
	}
	m := member(g, shards, time.Minute, time.Hour)
	start(t, m)
	waitFor(t, "the rejoin after letting go", func() bool { return len(g.joined()) >= 2 })
	metas := g.joined()
	if len(metas[0].Owned) != 4 || len(metas[1].Owned) != 2 {
		t.Fatalf("claims in the joins %v, want all four, then the two kept", metas)
	}
	kept := map[int32]bool{}
	for _, s := range metas[1].Owned {
		kept[s] = true
	}
	waitFor(t, "the let-go shards handed to node 2", func() bool {
		for s := int32(0); s < 4; s++ {
			if n, ok := m.Owner(s); !ok || (n.ID == 2) == kept[s] {
				return false
			}
		}
		return true
	})
	for s := int32(0); s < 4; s++ {
		if shards.Owned(s) != kept[s] {
			t.Fatalf("shard %d held %v after the hand-over, kept %v", s, shards.Owned(s), kept)
		}
	}
}

// The catalog is refreshed before the gained shards load and before the map naming this node
// is published; once published, Assigned names them (readiness waits on it).
func TestGainedShardsLoadAfterTheCatalogRefresh(t *testing.T) {
	g := &fakeGroup{}
	shards := newHeldShards()
	var refreshes, heldAtRefresh atomic.Int32
	var assignedEarly atomic.Bool
	var m *Membership
	m = member(g, shards, time.Minute, time.Hour, func(o *Options) {
		o.BeforeLoad = func(context.Context) error {
			refreshes.Add(1)
			heldAtRefresh.Store(int32(shards.count()))
			assignedEarly.Store(m.Assigned(0))
			return nil
		}
	})
	start(t, m)
	waitFor(t, "the loads", allHeld(shards))
	if refreshes.Load() != 1 || heldAtRefresh.Load() != 0 || assignedEarly.Load() {
		t.Fatalf("refreshed %d times, holding %d shards, assigned already %v; want once, before any load or publication",
			refreshes.Load(), heldAtRefresh.Load(), assignedEarly.Load())
	}
	for i := int32(0); i < 4; i++ {
		if !m.Assigned(i) {
			t.Fatalf("shard %d loaded but not reported assigned", i)
		}
	}
}

// Of two nodes with one node.id, the one the leader refused loads nothing, neither from its
// assignment nor at its heartbeats, though the map gives every shard to a node of its id:
// ownership is by member, or both would serve the same shards.
func TestRefusedDuplicateNodeIDLoadsNothing(t *testing.T) {
	g := &fakeGroup{peers: map[string]memberMeta{"y": {Node: 1, Host: "10.0.0.9", Port: 9092, Shards: 4, Owned: []int32{0, 1}}}}
	var beats atomic.Int32
	g.intercept = func(_ context.Context, req kmsg.Request) (kmsg.Response, error, bool) {
		if _, ok := req.(*kmsg.HeartbeatRequest); ok {
			beats.Add(1)
		}
		return nil, nil, false
	}
	shards := newHeldShards()
	core, logs := observer.New(zap.ErrorLevel)
	start(t, member(g, shards, time.Minute, 5*time.Millisecond, func(o *Options) { o.Logger = zap.New(core) }))
	waitFor(t, "ten heartbeats", func() bool { return beats.Load() >= 10 })
	for i := int32(0); i < 4; i++ {
		if n := shards.loads(i); n != 0 {
			t.Fatalf("the refused node loaded shard %d %d times", i, n)
		}
	}
	if logs.FilterMessage("the upstream group's leader gave this node no shards; fix the configuration").Len() == 0 {
		t.Fatalf("the refusal was not logged (logged %v)", logs.All())
	}
}

// Cut off from the group, a node stops serving once its lease lapses and lets go of every
// shard: by then the upstream may have given them to others.
func TestLapsedLeaseStopsServingAndLetsGoOfEveryShard(t *testing.T) {
	var cut atomic.Bool
	g := &fakeGroup{}
	g.intercept = func(context.Context, kmsg.Request) (kmsg.Response, error, bool) {
		if cut.Load() {
			return nil, errors.New("upstream unreachable"), true
		}
		return nil, nil, false
	}
	shards := newHeldShards()
	reg := prometheus.NewRegistry()
	m := member(g, shards, 300*time.Millisecond, 20*time.Millisecond, func(o *Options) { o.Registerer = reg })
	start(t, m)
	waitFor(t, "the loads", allHeld(shards))
	if !m.Serving() {
		t.Fatal("not serving with a fresh lease")
	}
	cut.Store(true)
	waitFor(t, "every shard let go", func() bool { return shards.count() == 0 })
	if m.Serving() {
		t.Fatal("serving after the lease lapsed")
	}
	if got := counterValue(t, reg, "coordinatord_membership_lease_lapses_total"); got != 1 {
		t.Fatalf("coordinatord_membership_lease_lapses_total = %v, want 1", got)
	}
}

// The lease runs from the sending of the heartbeat the group answered, not from its answer:
// the group counts its session from receiving it, which is later, so only then does the lease
// end before the group can hand the shards on.
func TestLeaseRunsFromTheSendingOfTheAnsweredHeartbeat(t *testing.T) {
	const session, transit = time.Minute, 100 * time.Millisecond
	var m *Membership
	var beats atomic.Int32
	var lastSent atomic.Int64
	blocked := make(chan struct{})
	g := &fakeGroup{}
	g.intercept = func(ctx context.Context, req kmsg.Request) (kmsg.Response, error, bool) {
		if _, ok := req.(*kmsg.HeartbeatRequest); !ok {
			return nil, nil, false
		}
		if beats.Add(1) > 3 {
			// The fourth beat waits: the third's answer has been taken in.
			select {
			case blocked <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return nil, ctx.Err(), true
		}
		lastSent.Store(int64(m.now()))
		time.Sleep(transit)
		return nil, nil, false
	}
	m = member(g, newHeldShards(), session, time.Millisecond)
	start(t, m)
	select {
	case <-blocked:
	case <-time.After(time.Minute):
		t.Fatal("no fourth heartbeat")
	}
	if lease, bound := m.lease.Load(), lastSent.Load()+int64(session); lease > bound {
		t.Fatalf("lease ends %v after the last answered heartbeat was sent, want at most the session timeout %v",
			time.Duration(lease-lastSent.Load()), session)
	}
}

// Likewise from the sending of the SyncGroup that brought the assignment.
func TestLeaseRunsFromTheSendingOfTheSyncGroup(t *testing.T) {
	const session, transit = time.Minute, 100 * time.Millisecond
	var m *Membership
	var syncSent atomic.Int64
	g := &fakeGroup{}
	g.intercept = func(_ context.Context, req kmsg.Request) (kmsg.Response, error, bool) {
		if _, ok := req.(*kmsg.SyncGroupRequest); ok && syncSent.Load() == 0 {
			syncSent.Store(int64(m.now()))
			time.Sleep(transit)
		}
		return nil, nil, false
	}
	m = member(g, newHeldShards(), session, time.Hour)
	start(t, m)
	waitFor(t, "the assignment", m.Joined)
	if lease, bound := m.lease.Load(), syncSent.Load()+int64(session); lease > bound {
		t.Fatalf("lease ends %v after the SyncGroup was sent, want at most the session timeout %v",
			time.Duration(lease-syncSent.Load()), session)
	}
}

// A node the group no longer knows (UNKNOWN_MEMBER_ID to a heartbeat: it was silent past the
// session timeout) lets go of every shard and forgets the map before it rejoins, and claims
// nothing when it does: others may own its shards already.
func TestEvictedNodeLetsGoOfEveryShardBeforeItRejoins(t *testing.T) {
	var evict, hold atomic.Bool
	rejoining, release := make(chan struct{}, 1), make(chan struct{})
	g := &fakeGroup{}
	g.intercept = func(ctx context.Context, req kmsg.Request) (kmsg.Response, error, bool) {
		switch r := req.(type) {
		case *kmsg.HeartbeatRequest:
			if evict.CompareAndSwap(true, false) {
				resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
				resp.ErrorCode = kerr.UnknownMemberID.Code
				return resp, nil, true
			}
		case *kmsg.JoinGroupRequest:
			if hold.CompareAndSwap(true, false) {
				rejoining <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err(), true
				}
			}
		}
		return nil, nil, false
	}
	shards := newHeldShards()
	m := member(g, shards, time.Minute, 10*time.Millisecond)
	start(t, m)
	waitFor(t, "the loads", allHeld(shards))
	hold.Store(true)
	evict.Store(true)
	select {
	case <-rejoining:
	case <-time.After(time.Minute):
		t.Fatal("no rejoin after the eviction")
	}
	if n := shards.count(); n != 0 {
		t.Fatalf("rejoining after the eviction with %d shards held", n)
	}
	if _, ok := m.Owner(0); ok || m.Joined() {
		t.Fatal("the evicted node still answers from the old map")
	}
	close(release)
	waitFor(t, "the loads after the rejoin", allHeld(shards))
	if metas := g.joined(); len(metas) != 2 || len(metas[1].Owned) != 0 {
		t.Fatalf("joins %v, want the rejoin to claim nothing", metas)
	}
}

// The same when the SyncGroup of a rebalance answers UNKNOWN_MEMBER_ID.
func TestNodeEvictedInItsSyncGroupLetsGoOfEveryShard(t *testing.T) {
	var syncs atomic.Int32
	g := &fakeGroup{}
	g.intercept = func(_ context.Context, req kmsg.Request) (kmsg.Response, error, bool) {
		if r, ok := req.(*kmsg.SyncGroupRequest); ok && syncs.Add(1) == 2 {
			resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return resp, nil, true
		}
		return nil, nil, false
	}
	shards := newHeldShards()
	m := member(g, shards, time.Minute, 10*time.Millisecond)
	start(t, m)
	waitFor(t, "the loads", allHeld(shards))
	g.mu.Lock()
	g.rebalancing = true
	g.mu.Unlock()
	waitFor(t, "the third join", func() bool { return len(g.joined()) >= 3 })
	if metas := g.joined(); len(metas[1].Owned) != 4 || len(metas[2].Owned) != 0 {
		t.Fatalf("joins %v, want the rebalance's join to claim every shard and the one after the eviction none", metas)
	}
	waitFor(t, "the loads after the rejoin", allHeld(shards))
	if n := shards.loads(0); n != 2 {
		t.Fatalf("shard 0 loaded %d times, want again after the eviction", n)
	}
}

// A node whose lease lapsed claims nothing when it joins (what it held may be others' now) and
// loads nothing at its heartbeats, even shards the last map it saw gave it.
func TestALapsedNodeClaimsAndReloadsNothing(t *testing.T) {
	shards := newHeldShards()
	m := member(&fakeGroup{}, shards, time.Minute, time.Hour)
	m.setMember("self")
	m.view.Store(&assignment{Nodes: []Node{{ID: 1, Member: "self"}}, Owners: []int32{0, 0, 0, 0}})
	m.renew(m.now())
	shards.held[0] = true
	m.reloadAssigned()
	if shards.count() != 4 || shards.loads(3) != 1 {
		t.Fatalf("with its lease, the node holds %d shards, want the assigned four", shards.count())
	}
	shards.drop(3)
	m.lease.Store(1) // lapsed long ago
	m.reloadAssigned()
	if shards.loads(3) != 1 {
		t.Fatal("a node whose lease lapsed loaded a shard at its heartbeat")
	}
	if held := m.held(); len(held) != 0 || shards.count() != 0 {
		t.Fatalf("a node whose lease lapsed claims %v and holds %d shards, want nothing", held, shards.count())
	}
}
