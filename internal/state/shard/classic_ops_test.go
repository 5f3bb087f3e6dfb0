package shard

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kerr"
)

// classicHarness runs one group shard on memlog; tests run inside a synctest bubble so timers
// (sessions, barriers) run on fake time.
type classicHarness struct {
	t   *testing.T
	b   *memlog.Backend
	s   *runtime.Shard[*Machine]
	cfg classic.Config
}

func newClassicHarness(t *testing.T, b *memlog.Backend) *classicHarness {
	t.Helper()
	if b == nil {
		b = memlog.New()
	}
	cfg := classic.DefaultConfig()
	cfg.InitialRebalanceDelayMs = 0
	h := &classicHarness{t: t, b: b, cfg: cfg}
	h.start()
	return h
}

func (h *classicHarness) start() {
	cfg := h.cfg // the configuration at (re)start, as a process reads its keys once
	h.s = runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: h.b,
		OnLoaded: func(c *runtime.Ctx[*Machine], m *Machine) { m.onLoadedClassic(c, cfg) }})
	h.s.Start()
	for h.s.State() != runtime.StateActive {
		if h.s.State() == runtime.StateFailed {
			h.t.Fatal("shard failed")
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *classicHarness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.s.Close(ctx)
}

func (h *classicHarness) restart() {
	h.close()
	h.start()
}

func proto(names ...string) []classic.Protocol {
	out := make([]classic.Protocol, len(names))
	for i, n := range names {
		out[i] = classic.Protocol{Name: n, Metadata: []byte("md-" + n)}
	}
	return out
}

// jreq is a JoinGroup with usual values.
func jreq(group, member string, version int16, protocols ...string) classic.JoinRequest {
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	return classic.JoinRequest{Group: group, MemberID: member, ClientID: "client", ClientHost: "/127.0.0.1",
		SessionTimeoutMs: 10000, RebalanceTimeout: 20000, ProtocolType: "consumer", Protocols: proto(protocols...), Version: version}
}

func (h *classicHarness) joinAsync(req classic.JoinRequest) <-chan *classic.JoinResult {
	ch := make(chan *classic.JoinResult, 1)
	op := JoinGroup(h.cfg, req)
	go func() {
		v, err := h.s.Write(context.Background(), op)
		if err != nil {
			ch <- &classic.JoinResult{Code: -100}
			return
		}
		ch <- v.(*classic.JoinResult)
	}()
	return ch
}

func (h *classicHarness) join(req classic.JoinRequest) *classic.JoinResult {
	h.t.Helper()
	return wait(h.t, h.joinAsync(req))
}

func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Minute):
		t.Fatal("no answer")
	}
	var zero T
	return zero
}

// pending reports whether a channel has no answer yet once everything else is idle.
func pending[T any](ch <-chan T) bool {
	synctest.Wait()
	select {
	case v := <-ch:
		_ = v
		return false
	default:
		return true
	}
}

func (h *classicHarness) syncAsync(req classic.SyncRequest) <-chan *classic.SyncResult {
	ch := make(chan *classic.SyncResult, 1)
	op := SyncGroup(h.cfg, req)
	go func() {
		v, err := h.s.Write(context.Background(), op)
		if err != nil {
			ch <- &classic.SyncResult{Code: -100}
			return
		}
		ch <- v.(*classic.SyncResult)
	}()
	return ch
}

func (h *classicHarness) sync(req classic.SyncRequest) *classic.SyncResult {
	h.t.Helper()
	return wait(h.t, h.syncAsync(req))
}

func sreq(group, member string, gen int32, assign map[string][]byte) classic.SyncRequest {
	return classic.SyncRequest{Group: group, MemberID: member, Generation: gen, Assignments: assign, Version: 3}
}

func (h *classicHarness) heartbeat(group, member string, instance *string, gen int32) int16 {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), Heartbeat(h.cfg, group, member, instance, gen))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(HeartbeatResult).Code
}

func (h *classicHarness) leave(group string, members ...classic.LeaveMember) LeaveResult {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), LeaveGroup(h.cfg, group, members))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(LeaveResult)
}

func (h *classicHarness) describe(group string) GroupDescription {
	h.t.Helper()
	v, err := h.s.Read(context.Background(), DescribeClassicGroups([]string{group}))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.([]GroupDescription)[0]
}

func (h *classicHarness) list(states, types []string) []GroupListing {
	h.t.Helper()
	v, err := h.s.Read(context.Background(), ListClassicGroups(states, types))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.([]GroupListing)
}

func (h *classicHarness) commit(group string, gen int32, member string, instance *string) int16 {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), CommitOffsets(CommitRequest{Group: group, Generation: gen, MemberID: member,
		InstanceID: instance, Version: 8, MaxMetadata: 4096,
		Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "t", Partition: 0}, Offset: 5, RetentionMs: -1}}}))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.([]int16)[0]
}

func (h *classicHarness) deleteGroup(group string) int16 {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), DeleteClassicGroup(group))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(DeleteResult).Code
}

func code(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: code %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
	}
}

// stableGroup forms a Stable group of n dynamic members (v3 joins) and returns their ids,
// leader first, and the generation.
func (h *classicHarness) stableGroup(group string, n int) ([]string, int32) {
	h.t.Helper()
	// Everyone joins during the initial rebalance delay, so they form one generation.
	saved := h.cfg.InitialRebalanceDelayMs
	h.cfg.InitialRebalanceDelayMs = 100
	var chans []<-chan *classic.JoinResult
	for i := 0; i < n; i++ {
		chans = append(chans, h.joinAsync(jreq(group, "", 3)))
	}
	h.cfg.InitialRebalanceDelayMs = saved
	var ids []string
	var leader string
	var gen int32
	for _, ch := range chans {
		r := wait(h.t, ch)
		code(h.t, "join", r.Code, 0)
		ids = append(ids, r.MemberID)
		leader, gen = r.Leader, r.Generation
	}
	for i, id := range ids {
		if id == leader {
			ids[0], ids[i] = ids[i], ids[0]
		}
	}
	assign := map[string][]byte{}
	for _, id := range ids {
		assign[id] = []byte("a-" + id)
	}
	var syncs []<-chan *classic.SyncResult
	for _, id := range ids[1:] {
		syncs = append(syncs, h.syncAsync(sreq(group, id, gen, nil)))
	}
	code(h.t, "leader sync", h.sync(sreq(group, ids[0], gen, assign)).Code, 0)
	for _, ch := range syncs {
		code(h.t, "follower sync", wait(h.t, ch).Code, 0)
	}
	if d := h.describe(group); d.State != "Stable" {
		h.t.Fatalf("group %s, want Stable", d.State)
	}
	return ids, gen
}

func TestClassicT29T30MemberIDRequiredThenExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		r := h.join(jreq("g", "", 4))
		code(t, "first join", r.Code, kerr.MemberIDRequired.Code)
		if !strings.HasPrefix(r.MemberID, "client-") || r.Generation != -1 {
			t.Fatalf("member id %q generation %d", r.MemberID, r.Generation)
		}
		if d := h.describe("g"); len(d.Members) != 0 {
			t.Fatalf("pending member described: %+v", d)
		}
		time.Sleep(11 * time.Second) // session timeout 10 s
		code(t, "late rejoin", h.join(jreq("g", r.MemberID, 4)).Code, kerr.UnknownMemberID.Code)
	})
}

func TestClassicT29RejoinWithIDJoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		r := h.join(jreq("g", "", 4))
		r2 := h.join(jreq("g", r.MemberID, 4))
		code(t, "rejoin", r2.Code, 0)
		if r2.Generation != 1 || r2.Leader != r.MemberID || len(r2.Members) != 1 {
			t.Fatalf("rejoin %+v", r2)
		}
	})
}

func TestClassicT31V3JoinsDirectlyAsLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		r := h.join(jreq("g", "", 3))
		code(t, "join", r.Code, 0)
		if r.Generation != 1 || r.Leader != r.MemberID || *r.Protocol != "range" || *r.ProtocolType != "consumer" {
			t.Fatalf("join %+v", r)
		}
		if d := h.describe("g"); d.State != "CompletingRebalance" || len(d.Members) != 1 {
			t.Fatalf("describe %+v", d)
		}
	})
}

func static(group, instance, member string, version int16) classic.JoinRequest {
	r := jreq(group, member, version)
	r.InstanceID = &instance
	return r
}

func TestClassicT32StaticMemberSkipsMemberIDRequired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		r := h.join(static("g", "i1", "", 5))
		code(t, "join", r.Code, 0)
		if !strings.HasPrefix(r.MemberID, "i1-") {
			t.Fatalf("member id %q", r.MemberID)
		}
	})
}

// stableStatic forms a Stable group of one static leader i1 and returns its member id.
func (h *classicHarness) stableStatic(version int16) (string, int32) {
	r := h.join(static("g", "i1", "", version))
	code(h.t, "join", r.Code, 0)
	code(h.t, "sync", h.sync(sreq("g", r.MemberID, r.Generation, map[string][]byte{r.MemberID: []byte("A")})).Code, 0)
	return r.MemberID, r.Generation
}

func TestClassicT33StaticLeaderRestartV9SkipsAssignment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		old, gen := h.stableStatic(9)
		r := h.join(static("g", "i1", "", 9))
		code(t, "rejoin", r.Code, 0)
		if r.Generation != gen || r.MemberID == old || !r.SkipAssignment || r.Leader != r.MemberID {
			t.Fatalf("replacement %+v (old %s gen %d)", r, old, gen)
		}
		if d := h.describe("g"); d.State != "Stable" || string(d.Members[0].Assignment) != "A" {
			t.Fatalf("describe %+v", d)
		}
		i1 := "i1"
		code(t, "old heartbeat", h.heartbeat("g", old, &i1, gen), kerr.FencedInstanceID.Code)
		code(t, "new heartbeat", h.heartbeat("g", r.MemberID, &i1, gen), 0)
		s := h.sync(classic.SyncRequest{Group: "g", MemberID: r.MemberID, InstanceID: &i1, Generation: gen, Version: 3})
		if s.Code != 0 || string(s.Assignment) != "A" {
			t.Fatalf("sync after replacement %+v", s)
		}
	})
}

func TestClassicT34StaticLeaderRestartV8NamesOldLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		old, gen := h.stableStatic(8)
		r := h.join(static("g", "i1", "", 8))
		code(t, "rejoin", r.Code, 0)
		if r.Generation != gen || r.SkipAssignment || r.Leader != old || r.MemberID == old {
			t.Fatalf("replacement %+v (old %s)", r, old)
		}
	})
}

func TestClassicStaticReplacedWhileParkedIsFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		h.cfg.InitialRebalanceDelayMs = 3000
		first := h.joinAsync(static("g", "i1", "", 5))
		if !pending(first) {
			t.Fatal("join answered during the initial delay")
		}
		second := h.join(static("g", "i1", "", 5))
		r1 := wait(t, first)
		code(t, "replaced parked join", r1.Code, kerr.FencedInstanceID.Code)
		code(t, "replacement", second.Code, 0)
	})
}

func TestClassicT35InitialRebalanceDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		h.cfg.InitialRebalanceDelayMs = 3000
		start := time.Now()
		a := h.joinAsync(jreq("g", "", 3))
		time.Sleep(2 * time.Second)
		b := h.joinAsync(jreq("g", "", 3))
		time.Sleep(999 * time.Millisecond)
		if !pending(a) || !pending(b) {
			t.Fatal("a join was answered before t0+3s")
		}
		ra, rb := wait(t, a), wait(t, b)
		if took := time.Since(start); took > 10*time.Second || took < 3*time.Second {
			t.Fatalf("joins answered after %v", took)
		}
		if ra.Generation != 1 || rb.Generation != 1 || ra.Code != 0 || rb.Code != 0 {
			t.Fatalf("a %+v b %+v", ra, rb)
		}
	})
}

func TestClassicT36SessionTimeoutBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		for _, st := range []int32{5999, 1800001} {
			r := jreq("g", "", 5)
			r.SessionTimeoutMs = st
			code(t, "session", h.join(r).Code, kerr.InvalidSessionTimeout.Code)
		}
		if d := h.describe("g"); d.Found {
			t.Fatal("a refused join created the group")
		}
	})
}

func TestClassicT37InconsistentProtocol(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		h.join(jreq("g", "", 3))
		r := jreq("g", "", 3)
		r.ProtocolType = "connect"
		code(t, "other type", h.join(r).Code, kerr.InconsistentGroupProtocol.Code)
		code(t, "no common protocol", h.join(jreq("g", "", 3, "sticky")).Code, kerr.InconsistentGroupProtocol.Code)
		r = jreq("new", "", 3)
		r.Protocols = nil
		code(t, "no protocols", h.join(r).Code, kerr.InconsistentGroupProtocol.Code)
		r = jreq("new", "", 3)
		r.ProtocolType = ""
		code(t, "no protocol type", h.join(r).Code, kerr.InconsistentGroupProtocol.Code)
	})
}

func TestClassicT38ProtocolSelectionByVotes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		h.cfg.InitialRebalanceDelayMs = 1000
		a := h.joinAsync(jreq("g", "", 3, "range", "sticky"))
		b := h.joinAsync(jreq("g", "", 3, "sticky", "range"))
		c := h.joinAsync(jreq("g", "", 3, "sticky"))
		for _, ch := range []<-chan *classic.JoinResult{a, b, c} {
			r := wait(t, ch)
			if r.Code != 0 || *r.Protocol != "sticky" {
				t.Fatalf("join %+v", r)
			}
		}
	})
}

func TestClassicT39V0RebalanceTimeoutIsSessionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, gen := h.stableGroup("g", 2)
		// The leader rejoins (v0: rebalance timeout = session timeout 10 s); the follower does not.
		r := jreq("g", ids[0], 0)
		r.RebalanceTimeout = r.SessionTimeoutMs
		start := time.Now()
		ch := h.joinAsync(r)
		synctest.Wait()
		code(t, "follower heartbeat", h.heartbeat("g", ids[1], nil, gen), kerr.RebalanceInProgress.Code)
		res := wait(t, ch)
		if took := time.Since(start); took != 10*time.Second {
			t.Fatalf("barrier took %v, want the 10 s session timeout", took)
		}
		if res.Generation != gen+1 || len(res.Members) != 1 {
			t.Fatalf("join %+v", res)
		}
		code(t, "removed follower heartbeat", h.heartbeat("g", ids[1], nil, gen), kerr.UnknownMemberID.Code)
	})
}

func TestClassicT40HeartbeatByState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		a := h.join(jreq("g", "", 3))
		code(t, "CompletingRebalance", h.heartbeat("g", a.MemberID, nil, a.Generation), 0)
		code(t, "old generation", h.heartbeat("g", a.MemberID, nil, a.Generation-1), kerr.IllegalGeneration.Code)
		code(t, "unknown member", h.heartbeat("g", "nobody", nil, a.Generation), kerr.UnknownMemberID.Code)
		code(t, "unknown group", h.heartbeat("nope", a.MemberID, nil, a.Generation), kerr.UnknownMemberID.Code)
		b := h.joinAsync(jreq("g", "", 3))
		synctest.Wait()
		code(t, "PreparingRebalance", h.heartbeat("g", a.MemberID, nil, a.Generation), kerr.RebalanceInProgress.Code)
		h.joinAsync(jreq("g", a.MemberID, 3))
		wait(t, b)
	})
}

func TestClassicT41LeaderOmitsFollowerGetsEmptyAssignment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, gen := h.stableGroup("g", 2)
		// Rebalance again; the leader assigns only itself.
		a := h.joinAsync(jreq("g", ids[0], 3)) // the leader's rejoin starts the rebalance
		synctest.Wait()
		b := h.joinAsync(jreq("g", ids[1], 3))
		ra, rb := wait(t, a), wait(t, b)
		if ra.Generation != gen+1 || rb.Generation != gen+1 {
			t.Fatalf("generations %d %d", ra.Generation, rb.Generation)
		}
		leader, follower := ra, rb
		if rb.MemberID == rb.Leader {
			leader, follower = rb, ra
		}
		fs := h.syncAsync(sreq("g", follower.MemberID, gen+1, nil))
		if !pending(fs) {
			t.Fatal("follower sync answered before the leader's")
		}
		ls := h.sync(sreq("g", leader.MemberID, gen+1, map[string][]byte{leader.MemberID: []byte("x")}))
		f := wait(t, fs)
		if ls.Code != 0 || string(ls.Assignment) != "x" || f.Code != 0 || f.Assignment == nil || len(f.Assignment) != 0 {
			t.Fatalf("leader %+v follower %+v", ls, f)
		}
		if d := h.describe("g"); d.State != "Stable" {
			t.Fatalf("state %s", d.State)
		}
	})
}

func TestClassicT42SyncProtocolChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		a := h.join(jreq("g", "", 3))
		r := sreq("g", a.MemberID, a.Generation, nil)
		r.Version = 5
		code(t, "v5 without protocol", h.sync(r).Code, kerr.InconsistentGroupProtocol.Code)
		pt, other := "consumer", "sticky"
		r.ProtocolType, r.Protocol = &pt, &other
		code(t, "v5 other protocol", h.sync(r).Code, kerr.InconsistentGroupProtocol.Code)
		code(t, "wrong generation", h.sync(sreq("g", a.MemberID, a.Generation+1, nil)).Code, kerr.IllegalGeneration.Code)
		code(t, "unknown member", h.sync(sreq("g", "x", a.Generation, nil)).Code, kerr.UnknownMemberID.Code)
		code(t, "unknown group", h.sync(sreq("nope", "x", 1, nil)).Code, kerr.UnknownMemberID.Code)
		rng := "range"
		r.Protocol = &rng
		res := h.sync(r)
		if res.Code != 0 || *res.Protocol != "range" || *res.ProtocolType != "consumer" {
			t.Fatalf("v5 sync %+v", res)
		}
	})
}

func TestClassicT43LeaderNeverSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, gen := h.stableGroup("g", 2)
		a := h.joinAsync(jreq("g", ids[0], 3)) // the leader's rejoin starts the rebalance
		synctest.Wait()
		b := h.joinAsync(jreq("g", ids[1], 3))
		ra, rb := wait(t, a), wait(t, b)
		follower := ra
		if ra.MemberID == ra.Leader {
			follower = rb
		}
		fs := h.syncAsync(sreq("g", follower.MemberID, gen+1, nil))
		// Keep the follower alive; the leader never syncs.
		start := time.Now()
		for !func() bool { synctest.Wait(); return len(fs) > 0 }() {
			time.Sleep(time.Second)
			h.heartbeat("g", follower.MemberID, nil, gen+1)
			h.heartbeat("g", follower.Leader, nil, gen+1) // alive, but never syncs
		}
		f := wait(t, fs)
		code(t, "parked follower sync", f.Code, kerr.RebalanceInProgress.Code)
		if took := time.Since(start); took < 19*time.Second || took > 21*time.Second {
			t.Fatalf("sync timeout after %v, want the 20 s rebalance timeout", took)
		}
		code(t, "removed leader heartbeat", h.heartbeat("g", ra.Leader, nil, gen+1), kerr.UnknownMemberID.Code)
		if d := h.describe("g"); d.State != "PreparingRebalance" || len(d.Members) != 1 {
			t.Fatalf("describe %+v", d)
		}
	})
}

func TestClassicT44ParkedSyncAnsweredRebalanceInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, gen := h.stableGroup("g", 2)
		a := h.joinAsync(jreq("g", ids[0], 3)) // the leader's rejoin starts the rebalance
		synctest.Wait()
		b := h.joinAsync(jreq("g", ids[1], 3))
		ra, rb := wait(t, a), wait(t, b)
		follower := ra
		if ra.MemberID == ra.Leader {
			follower = rb
		}
		fs := h.syncAsync(sreq("g", follower.MemberID, gen+1, nil))
		synctest.Wait()
		h.joinAsync(jreq("g", "", 3))
		code(t, "parked sync", wait(t, fs).Code, kerr.RebalanceInProgress.Code)
	})
}

func TestClassicT45LeaveGroupBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		h.cfg.InitialRebalanceDelayMs = 100
		dj := h.joinAsync(jreq("g", "", 3))
		s := h.joinAsync(static("g", "i2", "", 5))
		r := h.joinAsync(static("g", "i3", "", 5))
		d, rs, rr := wait(t, dj), wait(t, s), wait(t, r)
		gen := rs.Generation
		ids := map[string]bool{rs.MemberID: true, rr.MemberID: true, d.MemberID: true}
		leader := rs.Leader
		assign := map[string][]byte{}
		for id := range ids {
			assign[id] = []byte("a")
			if id != leader {
				h.syncAsync(sreq("g", id, gen, nil))
			}
		}
		code(t, "leader sync", h.sync(sreq("g", leader, gen, assign)).Code, 0)
		i2, i3 := "i2", "i3"
		res := h.leave("g", classic.LeaveMember{MemberID: d.MemberID}, classic.LeaveMember{MemberID: "unknown-id"},
			classic.LeaveMember{InstanceID: &i2}, classic.LeaveMember{MemberID: "bogus", InstanceID: &i3})
		want := []int16{0, kerr.UnknownMemberID.Code, 0, kerr.FencedInstanceID.Code}
		if res.Code != 0 || !reflect.DeepEqual(res.Members, want) {
			t.Fatalf("leave %+v, want %v", res, want)
		}
		desc := h.describe("g")
		if desc.State != "PreparingRebalance" || len(desc.Members) != 1 || desc.Members[0].ID != rr.MemberID {
			t.Fatalf("after leave %+v", desc)
		}
		// Exactly one rebalance: R rejoins and the next generation is gen+1.
		rj := h.join(static("g", "i3", rr.MemberID, 5))
		if rj.Code != 0 || rj.Generation != gen+1 {
			t.Fatalf("rejoin %+v", rj)
		}
	})
}

func TestClassicT46LeaveMissingGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		res := h.leave("nope", classic.LeaveMember{MemberID: "m"})
		if res.Code != kerr.UnknownMemberID.Code || res.Members[0] != kerr.UnknownMemberID.Code {
			t.Fatalf("leave %+v", res)
		}
	})
}

func TestClassicLeaveLastMemberEmptiesGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, gen := h.stableGroup("g", 1)
		res := h.leave("g", classic.LeaveMember{MemberID: ids[0]})
		if res.Members[0] != 0 {
			t.Fatalf("leave %+v", res)
		}
		d := h.describe("g")
		if d.State != "Empty" || len(d.Members) != 0 {
			t.Fatalf("describe %+v", d)
		}
		// The generation moved on: a commit with the old generation is refused.
		code(t, "commit old member", h.commit("g", gen, ids[0], nil), kerr.UnknownMemberID.Code)
		code(t, "admin commit", h.commit("g", -1, "", nil), 0)
	})
}

func TestClassicT47T48T50DescribeListDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		if d := h.describe("missing"); d.Found || d.State != "Dead" {
			t.Fatalf("missing %+v", d)
		}
		ids, _ := h.stableGroup("stable", 2)
		code(t, "simple commit", h.commit("simple", -1, "", nil), 0)
		d := h.describe("stable")
		if d.ProtocolType != "consumer" || d.Protocol != "range" || len(d.Members) != 2 || string(d.Members[0].Metadata) != "md-range" ||
			string(d.Members[0].Assignment) != "a-"+d.Members[0].ID || d.Members[0].ClientHost != "/127.0.0.1" {
			t.Fatalf("stable %+v", d)
		}
		if d := h.describe("simple"); !d.Found || d.State != "Empty" || d.ProtocolType != "" {
			t.Fatalf("simple %+v", d)
		}
		all := h.list(nil, nil)
		if len(all) != 2 || all[0].ID != "simple" || all[1].ID != "stable" || all[1].ProtocolType != "consumer" || all[0].Type != "classic" {
			t.Fatalf("list %+v", all)
		}
		if l := h.list([]string{" stable "}, nil); len(l) != 1 || l[0].ID != "stable" {
			t.Fatalf("states filter %+v", l)
		}
		if l := h.list(nil, []string{"Classic"}); len(l) != 2 {
			t.Fatalf("types filter %+v", l)
		}
		if l := h.list(nil, []string{"consumer"}); len(l) != 0 {
			t.Fatalf("types filter consumer %+v", l)
		}
		code(t, "delete stable", h.deleteGroup("stable"), kerr.NonEmptyGroup.Code)
		code(t, "delete missing", h.deleteGroup("missing"), kerr.GroupIDNotFound.Code)
		code(t, "delete simple", h.deleteGroup("simple"), 0)
		code(t, "delete simple again", h.deleteGroup("simple"), kerr.GroupIDNotFound.Code)
		// Empty the classic group, commit, delete: group and offsets are gone.
		h.leave("stable", classic.LeaveMember{MemberID: ids[0]}, classic.LeaveMember{MemberID: ids[1]})
		code(t, "admin commit", h.commit("stable", -1, "", nil), 0)
		code(t, "delete emptied", h.deleteGroup("stable"), 0)
		v, _ := h.s.Read(context.Background(), FetchOffsets("stable", nil))
		if len(v.([]FetchPartition)) != 0 {
			t.Fatalf("offsets survived the delete: %+v", v)
		}
		if l := h.list(nil, nil); len(l) != 0 {
			t.Fatalf("list after deletes %+v", l)
		}
	})
}

func TestClassicT51StaleSessionTimerAfterRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		i1 := "i1"
		r := h.join(static("g", "i1", "", 5))
		h.sync(sreq("g", r.MemberID, r.Generation, nil))
		time.Sleep(6 * time.Second)
		// Leave and rejoin with the same instance: the old session timer (due at 10 s) must not
		// remove the new member.
		h.leave("g", classic.LeaveMember{InstanceID: &i1})
		r2 := h.join(static("g", "i1", "", 5))
		h.sync(sreq("g", r2.MemberID, r2.Generation, nil))
		time.Sleep(5 * time.Second)
		code(t, "heartbeat after the old deadline", h.heartbeat("g", r2.MemberID, &i1, r2.Generation), 0)
		if d := h.describe("g"); d.State != "Stable" || len(d.Members) != 1 {
			t.Fatalf("describe %+v", d)
		}
	})
}

func TestClassicSessionExpiryRebalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, gen := h.stableGroup("g", 2)
		for i := 0; i < 4; i++ {
			time.Sleep(4 * time.Second)
			h.heartbeat("g", ids[0], nil, gen)
		}
		// 16 s without a heartbeat from the follower (session 10 s): it is gone.
		if d := h.describe("g"); d.State != "PreparingRebalance" || len(d.Members) != 1 {
			t.Fatalf("describe %+v", d)
		}
		code(t, "leader heartbeat", h.heartbeat("g", ids[0], nil, gen), kerr.RebalanceInProgress.Code)
		code(t, "expired heartbeat", h.heartbeat("g", ids[1], nil, gen), kerr.UnknownMemberID.Code)
	})
}

func TestClassicCommitKeepsSessionAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, gen := h.stableGroup("g", 1)
		for i := 0; i < 5; i++ {
			time.Sleep(4 * time.Second)
			code(t, "commit", h.commit("g", gen, ids[0], nil), 0)
		}
		if d := h.describe("g"); d.State != "Stable" {
			t.Fatalf("committing member expired: %+v", d)
		}
	})
}

// spec §3.2, classic rows.
func TestClassicCommitValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		a := h.join(static("g", "i1", "", 5))
		i1, other := "i1", "i9"
		code(t, "CompletingRebalance", h.commit("g", a.Generation, a.MemberID, nil), kerr.RebalanceInProgress.Code)
		h.sync(sreq("g", a.MemberID, a.Generation, nil))
		code(t, "valid", h.commit("g", a.Generation, a.MemberID, &i1), 0)
		code(t, "wrong generation", h.commit("g", a.Generation+1, a.MemberID, nil), kerr.IllegalGeneration.Code)
		code(t, "unknown member", h.commit("g", a.Generation, "x", nil), kerr.UnknownMemberID.Code)
		code(t, "unknown instance", h.commit("g", a.Generation, a.MemberID, &other), kerr.UnknownMemberID.Code)
		code(t, "fenced instance", h.commit("g", a.Generation, "x", &i1), kerr.FencedInstanceID.Code)
		code(t, "admin commit on non-empty group", h.commit("g", -1, "", nil), kerr.UnknownMemberID.Code)
		code(t, "missing group, generation set", h.commit("nope", 3, "m", nil), kerr.IllegalGeneration.Code)
	})
}

func TestClassicGroupMaxSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		h.cfg.MaxSize = 1
		h.stableGroup("g", 1)
		code(t, "second member", h.join(jreq("g", "", 3)).Code, kerr.GroupMaxSizeReached.Code)
	})
}

func TestClassicStableGroupSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		h := newClassicHarness(t, b)
		defer func() { h.close() }()
		ids, gen := h.stableGroup("g", 3)
		before := h.describe("g")
		h.restart()
		after := h.describe("g")
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("after restart %+v\nbefore %+v", after, before)
		}
		for _, id := range ids {
			code(t, "heartbeat after restart", h.heartbeat("g", id, nil, gen), 0)
		}
		// Session timers were re-armed on load: a member that stops heartbeating goes.
		for i := 0; i < 4; i++ {
			time.Sleep(4 * time.Second)
			h.heartbeat("g", ids[0], nil, gen)
			h.heartbeat("g", ids[1], nil, gen)
		}
		if d := h.describe("g"); len(d.Members) != 2 || d.State != "PreparingRebalance" {
			t.Fatalf("after expiry %+v", d)
		}
	})
}

// ARCHITECTURE §6.1 for classic groups: the durable machine equals a fresh replay of the log,
// and the speculative machine agrees once everything is durable.
func TestClassicReplayEquivalence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		h := newClassicHarness(t, b)
		defer h.close()
		ids, _ := h.stableGroup("g", 3)
		h.leave("g", classic.LeaveMember{MemberID: ids[2]})
		h.join(jreq("g2", "", 4))
		h.join(static("g3", "i1", "", 5))
		synctest.Wait()
		fresh := NewMachine()
		for i, rec := range b.Records(0) {
			if err := fresh.Replay(int64(i), rec); err != nil {
				t.Fatal(err)
			}
		}
		v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
			out := map[string]*classic.Group{}
			for _, id := range m.Classic.Groups() {
				out[id] = m.Classic.Group(id)
			}
			return out, nil
		})
		got := v.(map[string]*classic.Group)
		for _, id := range fresh.Classic.Groups() {
			if !reflect.DeepEqual(fresh.Classic.Group(id), got[id]) {
				t.Fatalf("group %s: replay %+v, durable %+v", id, fresh.Classic.Group(id), got[id])
			}
		}
		if len(got) != 3 || len(fresh.Classic.Groups()) != 3 {
			t.Fatalf("groups %d / %d", len(got), len(fresh.Classic.Groups()))
		}
	})
}

func TestClassicRecordRoundTrip(t *testing.T) {
	inst, p := "i", "range"
	g := &classic.Group{ID: "g", State: classic.Stable, PreviousState: classic.CompletingRebalance, Generation: 7,
		ProtocolType: "consumer", Protocol: &p, Leader: "m1", StateTimestamp: 123,
		Pending: []classic.PendingMember{{ID: "p", SessionTimeoutMs: 10}},
		Members: []*classic.Member{{ID: "m1", InstanceID: &inst, ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 1, RebalanceTimeout: 2,
			Protocols: proto("range", "sticky"), Assignment: []byte("a"), PendingSync: true}}}
	s := classic.New()
	if err := s.Replay(0, g.Record()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Group("g"), g) {
		t.Fatalf("round trip %+v, want %+v", s.Group("g"), g)
	}
	if err := s.Replay(1, classic.DeleteRecord("g")); err != nil || s.Has("g") {
		t.Fatalf("tombstone: %v %v", err, s.Has("g"))
	}
	rec := g.Record()
	if err := s.Replay(2, log.Record{Key: rec.Key, Value: rec.Value[:len(rec.Value)-3]}); err == nil {
		t.Fatal("a truncated record replayed")
	}
}

// spec §2.2 and streams-groups §11.2: a JoinGroup to a streams group with members gets
// INCONSISTENT_GROUP_PROTOCOL, and the classic Describe/List/Delete do not take that group's
// offsets for a simple group.
func TestClassicJoinToStreamsGroupInconsistent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		_, err := h.s.Write(context.Background(), func(_ *runtime.Ctx[*Machine], _ *Machine) runtime.Result {
			return runtime.Result{Records: []log.Record{
				streams.GroupMetadataRecord(&streams.Group{ID: "s"}, 1, 0, 0, nil),
				streams.MemberMetadataRecord("s", &streams.Member{ID: "m1", ProcessID: "p"}),
			}}
		})
		if err != nil {
			t.Fatal(err)
		}
		code(t, "join streams group", h.join(jreq("s", "", 4)).Code, kerr.InconsistentGroupProtocol.Code)
		if d := h.describe("s"); d.Found {
			t.Fatalf("streams group described as classic: %+v", d)
		}
		if l := h.list(nil, nil); len(l) != 0 {
			t.Fatalf("streams group listed as classic: %+v", l)
		}
		v, _ := h.s.Write(context.Background(), DeleteClassicGroup("s"))
		if r := v.(DeleteResult); !r.NotClassic {
			t.Fatalf("delete of a streams group: %+v", r)
		}
	})
}

// spec §2.2 step 6 / §2.4: a new member's parked join is answered UNKNOWN_MEMBER_ID after the
// 5-minute new-member join timeout, even when the barrier is longer.
func TestClassicNewMemberJoinTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		long := func(member string) classic.JoinRequest {
			r := jreq("g", member, 3)
			r.RebalanceTimeout = 600000
			return r
		}
		a := h.join(long(""))
		h.sync(sreq("g", a.MemberID, a.Generation, nil))
		start := time.Now()
		newcomer := h.joinAsync(long(""))
		// The old member keeps heartbeating but never rejoins: the barrier stays open.
		for len(newcomer) == 0 {
			time.Sleep(5 * time.Second)
			h.heartbeat("g", a.MemberID, nil, a.Generation)
			synctest.Wait()
		}
		r := wait(t, newcomer)
		code(t, "parked new member", r.Code, kerr.UnknownMemberID.Code)
		if took := time.Since(start); took < 300*time.Second || took > 306*time.Second {
			t.Fatalf("answered after %v, want the 300 s new-member timeout", took)
		}
		if d := h.describe("g"); len(d.Members) != 1 {
			t.Fatalf("newcomer not removed: %+v", d)
		}
	})
}

// spec §2.2: a known member rejoining an Empty group gets UNKNOWN_MEMBER_ID.
func TestClassicRejoinEmptyGroupUnknownMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, _ := h.stableGroup("g", 1)
		h.leave("g", classic.LeaveMember{MemberID: ids[0]})
		code(t, "rejoin Empty", h.join(jreq("g", ids[0], 3)).Code, kerr.UnknownMemberID.Code)
	})
}

// spec §2.4: a follower whose SyncGroup waits for a slow leader is not expired by its session
// timer meanwhile.
func TestClassicParkedSyncKeepsSessionAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		ids, gen := h.stableGroup("g", 2)
		a := h.joinAsync(jreq("g", ids[0], 3))
		synctest.Wait()
		b := h.joinAsync(jreq("g", ids[1], 3))
		ra, rb := wait(t, a), wait(t, b)
		leader, follower := ra, rb
		if rb.MemberID == rb.Leader {
			leader, follower = rb, ra
		}
		fs := h.syncAsync(sreq("g", follower.MemberID, gen+1, nil))
		for i := 0; i < 3; i++ { // 15 s > the 10 s session; within the 20 s rebalance timeout
			time.Sleep(5 * time.Second)
			h.heartbeat("g", leader.MemberID, nil, gen+1)
		}
		code(t, "leader sync", h.sync(sreq("g", leader.MemberID, gen+1, nil)).Code, 0)
		code(t, "parked follower sync", wait(t, fs).Code, 0)
	})
}

// ARCHITECTURE §6.1 for classic groups under random operation sequences: after members join,
// sync, heartbeat, commit, leave and time out in random order, the speculative machine (what
// operations read), the durable machine and a fresh replay of the log hold the same groups — so
// no operation changed state except through its records.
func TestClassicRandomOperationsReplayEquivalence(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			b := memlog.New()
			h := newClassicHarness(t, b)
			defer h.close()
			type known struct {
				group, member string
				instance      *string
				gen           int32
			}
			var members []known
			var mu sync.Mutex
			groups := []string{"a", "b", "c"}
			snapshot := func(m *Machine) map[string]*classic.Group {
				out := map[string]*classic.Group{}
				for _, id := range m.Classic.Groups() {
					out[id] = m.Classic.Group(id).Clone()
				}
				return out
			}
			check := func(step int) map[string]*classic.Group {
				spec, err := h.s.Write(context.Background(), func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
					return runtime.Result{Response: snapshot(m)}
				})
				if err != nil {
					t.Fatal(err)
				}
				durable, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) { return snapshot(m), nil })
				fresh := NewMachine()
				for i, rec := range b.Records(0) {
					if err := fresh.Replay(int64(i), rec); err != nil {
						t.Fatal(err)
					}
				}
				if !reflect.DeepEqual(spec, durable) || !reflect.DeepEqual(durable, snapshot(fresh)) {
					t.Fatalf("seed %d step %d: speculative, durable and replayed groups differ", seed, step)
				}
				return durable.(map[string]*classic.Group)
			}
			for step := 0; step < 150; step++ {
				g := groups[rng.Intn(len(groups))]
				mu.Lock()
				var k known
				if len(members) > 0 {
					k = members[rng.Intn(len(members))]
				}
				mu.Unlock()
				switch op := rng.Intn(8); {
				case op <= 1 || k.member == "":
					r := jreq(g, "", int16(3+rng.Intn(7)))
					if rng.Intn(3) == 0 {
						inst := fmt.Sprintf("i%d", rng.Intn(4))
						r.InstanceID = &inst
					}
					ch := h.joinAsync(r)
					go func() {
						if res := <-ch; res.Code == 0 || res.Code == kerr.MemberIDRequired.Code {
							mu.Lock()
							members = append(members, known{g, res.MemberID, r.InstanceID, res.Generation})
							mu.Unlock()
						}
					}()
				case op == 2:
					r := jreq(k.group, k.member, 5)
					r.InstanceID = k.instance
					ch := h.joinAsync(r)
					go func() {
						if res := <-ch; res.Code == 0 {
							mu.Lock()
							members = append(members, known{k.group, res.MemberID, k.instance, res.Generation})
							mu.Unlock()
						}
					}()
				case op == 3:
					h.syncAsync(classic.SyncRequest{Group: k.group, MemberID: k.member, InstanceID: k.instance, Generation: k.gen,
						Assignments: map[string][]byte{k.member: []byte("x")}, Version: 3})
				case op == 4:
					h.heartbeat(k.group, k.member, k.instance, k.gen)
				case op == 5:
					h.commit(k.group, k.gen, k.member, k.instance)
				case op == 6:
					h.leave(k.group, classic.LeaveMember{MemberID: k.member, InstanceID: k.instance})
				default:
					time.Sleep(time.Duration(rng.Intn(12000)) * time.Millisecond)
				}
				synctest.Wait()
				check(step)
			}
			t.Logf("seed %d: %d records, groups %d", seed, len(b.Records(0)), len(check(150)))
			if len(b.Records(0)) < 20 {
				t.Fatalf("seed %d: only %d records; the sequence exercised nothing", seed, len(b.Records(0)))
			}
		})
	}
}

// streams-groups §11.2: a JoinGroup to an empty streams group deletes it and creates a classic
// group in its place, in one batch.
func TestClassicJoinConvertsEmptyStreamsGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		_, err := h.s.Write(context.Background(), func(_ *runtime.Ctx[*Machine], _ *Machine) runtime.Result {
			return runtime.Result{Records: []log.Record{streams.GroupMetadataRecord(&streams.Group{ID: "s"}, 1, 0, 0, nil)}}
		})
		if err != nil {
			t.Fatal(err)
		}
		code(t, "join empty streams group", h.join(jreq("s", "", 4)).Code, kerr.MemberIDRequired.Code)
		v, err := h.s.Read(context.Background(), func(m *Machine) (any, error) { return m.Streams.Owns("s"), nil })
		if err != nil || v.(bool) {
			t.Fatalf("the streams group survived the conversion (%v)", err)
		}
	})
}

// Issue 10, defect 7: the timers a shard re-arms when it loads ran with Kafka's defaults, not
// the configured group.* keys. A group restarted in its initial rebalance goes on waiting in
// steps of the configured group.initial.rebalance.delay.ms (1 s here; the default is 3 s, and
// before the fix the barrier waited the whole 20 s rebalance timeout).
func TestClassicRearmedTimersUseConfiguredKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		h.cfg.InitialRebalanceDelayMs = 1000
		first := h.joinAsync(jreq("g", "", 3))
		synctest.Wait()
		d := h.describe("g")
		if d.State != "PreparingRebalance" || len(d.Members) != 1 {
			t.Fatalf("before restart: %+v", d)
		}
		member := d.Members[0].ID
		h.restart()
		if r := wait(t, first); r.Code != -100 {
			t.Fatalf("parked join across a restart: %+v", r)
		}
		again := h.joinAsync(jreq("g", member, 3))
		time.Sleep(1500 * time.Millisecond)
		if pending(again) {
			t.Fatal("the restarted initial rebalance did not end after the configured delay")
		}
		if d := h.describe("g"); d.State != "CompletingRebalance" {
			t.Fatalf("after the configured delay: %+v", d)
		}
	})
}

// A heartbeat appends nothing, so it waits only for its own group's pending record: another
// group's commit held in fsync does not delay it, while a pending change to its own group
// (a JoinGroup starting a rebalance) does, since its answer reflects that change.
func TestClassicHeartbeatWaitsOnlyForItsOwnGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		h := newClassicHarness(t, b)
		defer func() { b.Hold(false); b.Release(0); h.close() }()
		ctx := context.Background()
		a, genA := h.stableGroup("A", 2)
		bm, genB := h.stableGroup("B", 2)
		heartbeat := func(group, member string, gen int32) <-chan int16 {
			ch := make(chan int16, 1)
			go func() {
				v, err := h.s.Write(ctx, Heartbeat(h.cfg, group, member, nil, gen))
				if err != nil {
					ch <- -100
					return
				}
				ch <- v.(HeartbeatResult).Code
			}()
			return ch
		}
		answered := func(ch <-chan int16) (int16, bool) {
			synctest.Wait()
			select {
			case v := <-ch:
				return v, true
			default:
				return 0, false
			}
		}

		b.Hold(true)
		commit := make(chan any, 1)
		go func() {
			v, err := h.s.Write(ctx, CommitOffsets(CommitRequest{Group: "A", Generation: genA, MemberID: a[0], Version: 8, MaxMetadata: 4096,
				Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "t", Partition: 0}, Offset: 5, RetentionMs: -1}}}))
			if err != nil {
				v = err
			}
			commit <- v
		}()
		synctest.Wait()
		if b.Pending(0) != 1 {
			t.Fatalf("%d batches pending, want group A's commit", b.Pending(0))
		}
		if v, ok := answered(heartbeat("B", bm[1], genB)); !ok {
			t.Fatal("group B's heartbeat waited for group A's commit fsync")
		} else {
			code(t, "B heartbeat beside A's commit", v, 0)
		}

		join := h.joinAsync(jreq("A", "", 3)) // a new member: A rebalances, its record is pending
		synctest.Wait()
		hbA := heartbeat("A", a[1], genA)
		if _, ok := answered(hbA); ok {
			t.Fatal("group A's heartbeat answered before A's pending JoinGroup record was durable")
		}
		if v, ok := answered(heartbeat("B", bm[0], genB)); !ok {
			t.Fatal("group B's heartbeat waited for group A's JoinGroup fsync")
		} else {
			code(t, "B heartbeat beside A's join", v, 0)
		}

		b.Release(0)
		v, ok := answered(hbA)
		if !ok {
			t.Fatal("group A's heartbeat not answered once A's record was durable")
		}
		code(t, "A heartbeat after its join is durable", v, kerr.RebalanceInProgress.Code)
		if v := <-commit; !reflect.DeepEqual(v, []int16{0}) {
			t.Fatalf("commit: %v", v)
		}
		_ = join
	})
}
