package membership

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeGroup is the upstream's group coordinator as the membership sees it: this node joins and
// is the leader; the peers are members that joined earlier and never heartbeat (they are never
// expired: only a LeaveGroup removes one).
type fakeGroup struct {
	mu          sync.Mutex
	peers       map[string]memberMeta
	rebalancing bool
	leaves      []*kmsg.LeaveGroupRequest
	joins       int
	// leaveCode, when set, answers every LeaveGroup with it (top level) and removes nothing.
	leaveCode int16
	// intercept, when set, sees every request first (without mu) and answers it when handled.
	intercept func(ctx context.Context, req kmsg.Request) (resp kmsg.Response, err error, handled bool)
	// metas is this node's metadata in each JoinGroup that named its member id.
	metas []memberMeta
}

func (g *fakeGroup) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if g.intercept != nil {
		if resp, err, handled := g.intercept(ctx, req); handled {
			return resp, err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		if r.MemberID == "" {
			resp.ErrorCode, resp.MemberID = kerr.MemberIDRequired.Code, "self"
			return resp, nil
		}
		if meta, err := decodeMeta(r.Protocols[0].Metadata); err == nil {
			g.metas = append(g.metas, meta)
		}
		g.joins++
		g.rebalancing = false
		resp.MemberID, resp.LeaderID, resp.Generation = r.MemberID, r.MemberID, int32(g.joins)
		self := kmsg.NewJoinGroupResponseMember()
		self.MemberID, self.ProtocolMetadata = r.MemberID, r.Protocols[0].Metadata
		resp.Members = append(resp.Members, self)
		for id, meta := range g.peers {
			mem := kmsg.NewJoinGroupResponseMember()
			mem.MemberID, mem.ProtocolMetadata = id, encodeMeta(meta)
			resp.Members = append(resp.Members, mem)
		}
		return resp, nil
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		for _, a := range r.GroupAssignment {
			if a.MemberID == r.MemberID {
				resp.MemberAssignment = a.MemberAssignment
			}
		}
		return resp, nil
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		if g.rebalancing {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		}
		return resp, nil
	case *kmsg.LeaveGroupRequest:
		g.leaves = append(g.leaves, r)
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		if g.leaveCode != 0 {
			resp.ErrorCode = g.leaveCode
			return resp, nil
		}
		for _, mem := range r.Members {
			out := kmsg.NewLeaveGroupResponseMember()
			out.MemberID = mem.MemberID
			if _, ok := g.peers[mem.MemberID]; ok {
				delete(g.peers, mem.MemberID)
				g.rebalancing = true
			} else {
				out.ErrorCode = kerr.UnknownMemberID.Code
			}
			resp.Members = append(resp.Members, out)
		}
		return resp, nil
	}
	return nil, errors.New("unexpected request")
}

// joined is this node's metadata in each JoinGroup so far.
func (g *fakeGroup) joined() []memberMeta {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]memberMeta(nil), g.metas...)
}

func (g *fakeGroup) left() []*kmsg.LeaveGroupRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*kmsg.LeaveGroupRequest(nil), g.leaves...)
}

func (g *fakeGroup) setLeaveCode(c int16) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leaveCode = c
}

// fakeProber answers each address's dials from a script (its last entry repeats) and counts them.
type fakeProber struct {
	mu     sync.Mutex
	script map[string][]error
	dials  map[string]int
	next   map[string]int // index in the script
	dialed chan string
}

var (
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	errTimeout = &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
)

func newProber(script map[string][]error) *fakeProber {
	return &fakeProber{script: script, dials: map[string]int{}, next: map[string]int{}, dialed: make(chan string, 1024)}
}

// set replaces addr's script from its next dial on.
func (p *fakeProber) set(addr string, script ...error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.script[addr], p.next[addr] = script, 0
}

func (p *fakeProber) probe(_ context.Context, addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.script[addr]
	n := p.next[addr]
	p.next[addr]++
	p.dials[addr]++
	select {
	case p.dialed <- addr:
	default:
	}
	if len(s) == 0 {
		return errRefused
	}
	return s[min(n, len(s)-1)]
}

func (p *fakeProber) count(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials[addr]
}

// waitDials waits until addr has been dialled n more times than now.
func (p *fakeProber) waitDials(t *testing.T, addr string, n int) {
	t.Helper()
	want := p.count(addr) + n
	deadline := time.After(time.Minute)
	for p.count(addr) < want {
		select {
		case <-p.dialed:
		case <-deadline:
			t.Fatalf("%s dialled %d times, want %d", addr, p.count(addr), want)
		}
	}
}

type noShards struct{}

func (noShards) Own(int32) bool                { return false }
func (noShards) Disown(context.Context, int32) {}
func (noShards) Owned(int32) bool              { return false }

const (
	selfAddr  = "10.0.0.1:9092"
	deadAddr  = "10.0.0.2:9092"
	aliveAddr = "10.0.0.3:9092"
)

// startWatched joins the fake group as node 1 with peers dead (node 2) and alive (node 3).
func startWatched(t *testing.T, p *fakeProber) (*Membership, *fakeGroup, *prometheus.Registry) {
	return startWatchedEvery(t, p, time.Millisecond)
}

func startWatchedEvery(t *testing.T, p *fakeProber, interval time.Duration) (*Membership, *fakeGroup, *prometheus.Registry) {
	t.Helper()
	g := &fakeGroup{peers: map[string]memberMeta{
		"dead":  {Node: 2, Host: "10.0.0.2", Port: 9092, Shards: 4, Owned: []int32{}},
		"alive": {Node: 3, Host: "10.0.0.3", Port: 9092, Shards: 4, Owned: []int32{}},
	}}
	reg := prometheus.NewRegistry()
	m := New(Options{Request: g.request, Group: "g", Self: Node{ID: 1, Host: "10.0.0.1", Port: 9092}, ShardCount: 4,
		Shards: noShards{}, SessionTimeout: time.Minute, HeartbeatInterval: time.Hour, RebalanceTimeout: time.Minute,
		Registerer: reg, PeerProbeInterval: interval, Probe: p.probe})
	m.Start()
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, g, reg
}

func nodeIDs(m *Membership) map[int32]bool {
	out := map[int32]bool{}
	for _, n := range m.Nodes() {
		out[n.ID] = true
	}
	return out
}

func waitNodes(t *testing.T, m *Membership, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(m.Nodes()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("nodes %v, want %d", nodeIDs(m), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func removedCount(reg *prometheus.Registry) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "coordinatord_membership_peers_removed_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// A peer reached once and then refused twice in a row is removed with one LeaveGroup naming its
// member id; this node rejoins at once (its heartbeat interval is an hour), without it, and
// probes it no more; itself it never probes.
func TestPeerRefusedTwiceIsRemovedWithOneLeaveGroup(t *testing.T) {
	p := newProber(map[string][]error{deadAddr: {nil, errRefused}, aliveAddr: {nil}})
	m, g, reg := startWatched(t, p)
	waitNodes(t, m, 2)
	if nodeIDs(m)[2] {
		t.Fatalf("nodes %v after the removal", nodeIDs(m))
	}
	// A probe round that took its view of the nodes before the removal may still dial the dead
	// peer; rounds run one at a time, so two more dials of the live one mean it has ended.
	p.waitDials(t, aliveAddr, 2)
	dials := p.count(deadAddr)
	p.waitDials(t, aliveAddr, 5)
	leaves := g.left()
	if len(leaves) != 1 || len(leaves[0].Members) != 1 || leaves[0].Members[0].MemberID != "dead" || leaves[0].MemberID != "dead" {
		t.Fatalf("LeaveGroup requests %+v, want one removing member dead", leaves)
	}
	if dials < 3 || p.count(deadAddr) != dials {
		t.Fatalf("dead peer dialled %d times at its removal, %d later", dials, p.count(deadAddr))
	}
	if n := p.count(selfAddr); n != 0 {
		t.Fatalf("this node probed itself %d times", n)
	}
	if got := removedCount(reg); got != 1 {
		t.Fatalf("coordinatord_membership_peers_removed_total = %v, want 1", got)
	}
}

// Timeouts are no evidence, a refusal between answers is a restart, and an address never
// reached (a wrong advertised listener) is never judged: none of them sends a LeaveGroup.
func TestPeerTimeoutsAndBrokenRefusalsRemoveNothing(t *testing.T) {
	for name, script := range map[string][]error{
		"timeouts":                {nil, errTimeout},
		"refused then timeout":    {nil, errRefused, errTimeout, errRefused, errTimeout},
		"refused then accepted":   {nil, errRefused, nil, errRefused, nil, errRefused, nil, errRefused, nil, errRefused, nil},
		"refused, never accepted": {errRefused},
	} {
		t.Run(name, func(t *testing.T) {
			p := newProber(map[string][]error{deadAddr: script, aliveAddr: {nil}})
			m, g, reg := startWatched(t, p)
			// Twelve probes, or a LeaveGroup (which ends the probes of that peer).
			for p.count(deadAddr) < 12 && len(g.left()) == 0 {
				p.waitDials(t, deadAddr, 1)
			}
			if leaves := g.left(); len(leaves) != 0 {
				t.Fatalf("LeaveGroup sent: %+v", leaves)
			}
			if got := removedCount(reg); got != 0 {
				t.Fatalf("coordinatord_membership_peers_removed_total = %v", got)
			}
			if !nodeIDs(m)[2] {
				t.Fatalf("nodes %v", nodeIDs(m))
			}
		})
	}
}

// A peer another node removed first (UNKNOWN_MEMBER_ID for it) is not counted, but this node
// still rejoins at once; a refused LeaveGroup is sent again at the next probe.
func TestPeerRemovalAnswers(t *testing.T) {
	t.Run("already gone", func(t *testing.T) {
		p := newProber(map[string][]error{deadAddr: {nil}, aliveAddr: {nil}})
		m, g, reg := startWatched(t, p)
		p.waitDials(t, deadAddr, 2)
		// Another node removes it before this one: the group forgets it, and rebalances.
		g.mu.Lock()
		delete(g.peers, "dead")
		g.rebalancing = true
		g.mu.Unlock()
		p.set(deadAddr, errRefused)
		waitNodes(t, m, 2)
		if got := removedCount(reg); got != 0 {
			t.Fatalf("coordinatord_membership_peers_removed_total = %v, want 0", got)
		}
		if leaves := g.left(); len(leaves) != 1 {
			t.Fatalf("%d LeaveGroup requests, want 1", len(leaves))
		}
	})
	t.Run("refused", func(t *testing.T) {
		p := newProber(map[string][]error{deadAddr: {nil, errRefused}, aliveAddr: {nil}})
		m, g, reg := startWatched(t, p)
		g.setLeaveCode(kerr.CoordinatorNotAvailable.Code)
		deadline := time.Now().Add(time.Minute)
		for len(g.left()) < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("%d LeaveGroup requests", len(g.left()))
			}
			time.Sleep(time.Millisecond)
		}
		if got := removedCount(reg); got != 0 || !nodeIDs(m)[2] {
			t.Fatalf("removed %v, nodes %v while the group refused", got, nodeIDs(m))
		}
		g.setLeaveCode(0)
		waitNodes(t, m, 2)
		if got := removedCount(reg); got != 1 {
			t.Fatalf("coordinatord_membership_peers_removed_total = %v, want 1", got)
		}
	})
}

// A new assignment is probed at once, not at the next tick: a node killed right after this one
// joined must have been reached already to be judged dead.
func TestNewAssignmentIsProbedAtOnce(t *testing.T) {
	p := newProber(map[string][]error{deadAddr: {nil}, aliveAddr: {nil}})
	startWatchedEvery(t, p, time.Hour)
	deadline := time.After(time.Minute)
	for p.count(deadAddr) == 0 || p.count(aliveAddr) == 0 {
		select {
		case <-p.dialed:
		case <-deadline:
			t.Fatalf("dialled %d and %d times within a minute of joining", p.count(deadAddr), p.count(aliveAddr))
		}
	}
}
