package scenario

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { Register(classicJoin{}) }

const (
	// settleProbeInterval is how often a settled member heartbeats while the group is still
	// settling, i.e. how soon it notices a rebalance. Real consumers use 3 s; a short interval
	// keeps the measured time about the coordinator, not about client timers.
	settleProbeInterval = 20 * time.Millisecond
	// settleTimeout bounds one settle; past it the window fails.
	settleTimeout = 60 * time.Second
	// Session and rebalance timeouts sent in JoinGroup: long enough that no member expires
	// during a window, within Kafka's default group.min/max.session.timeout.ms (6 s, 30 min).
	classicSessionTimeoutMillis   = 30_000
	classicRebalanceTimeoutMillis = 30_000
	classicTopic                  = "coordbench-classic"
	classicPartitions             = 64
	classicProtocol               = "range"
)

// classicJoin: N members (one per client, each on its own connection to the coordinator) join
// one fresh classic consumer group with JoinGroup/SyncGroup, the way the Java and franz-go
// consumers do (MEMBER_ID_REQUIRED round trip, the leader assigns and sends the assignment in
// SyncGroup). Setup measures the time until all N hold an assignment of the same generation;
// the timed operation is a heartbeat (steady state, back to back); teardown adds one member and
// measures the time until the N+1 settle again, then every member leaves.
type classicJoin struct{}

func (classicJoin) Name() string { return "classic-join" }
func (classicJoin) Description() string {
	return fmt.Sprintf("N members (one per client and connection) join one new classic consumer group with "+
		"JoinGroup/SyncGroup as real consumers do; `join_stable_ms` is the time from the first JoinGroup until "+
		"all N hold an assignment of one generation (settled members heartbeat every %s to notice rebalances). "+
		"The timed operation is then a Heartbeat, back to back per member (steady state). After the window one "+
		"member more joins and `rejoin_stable_ms` is the time until all N+1 are settled again; `*_generations` "+
		"count the generations that took.", settleProbeInterval)
}
func (classicJoin) Needs() []int16        { return []int16{10, 11, 12, 13, 14} }
func (classicJoin) DefaultClients() []int { return []int{8, 100} } // issue #5 measures a 100-member group

func (classicJoin) Setup(ctx context.Context, env *Env) (Instance, error) {
	g := &classicGroup{env: env, name: env.Tag + "-cj"}
	conns, err := dialAll(ctx, env.Clients, func(ctx context.Context, i int) (*kconn.Conn, error) {
		return dialCoordinator(ctx, env, g.name, i)
	})
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		g.members = append(g.members, &classicMember{conn: c})
	}
	took, gens, err := g.settle(ctx)
	if err != nil {
		g.close()
		return nil, fmt.Errorf("%d members joining: %w", env.Clients, err)
	}
	env.Info.Extra("join_stable_ms", float64(took.Microseconds())/1000)
	env.Info.Extra("join_generations", float64(gens))
	return g, nil
}

type classicGroup struct {
	env     *Env
	name    string
	members []*classicMember

	mu       sync.Mutex
	want     int
	synced   map[int]int32 // member -> generation of its last successful SyncGroup
	size     map[int32]int // generation -> members its leader was given
	settled  chan struct{}
	stableAt time.Time
	stableG  int32
}

type classicMember struct {
	conn   *kconn.Conn
	id     string
	gen    int32
	joined bool // holds the assignment of gen
}

// Op is one steady-state heartbeat of member i.
func (g *classicGroup) Op(ctx context.Context, i int) error {
	m := g.members[i]
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID = g.name, m.gen, m.id
	resp, err := m.conn.Request(ctx, req)
	if err != nil {
		return err
	}
	if i == 0 {
		g.env.Info.Version(req)
	}
	return errorCode("heartbeat", resp.(*kmsg.HeartbeatResponse).ErrorCode)
}

// Teardown measures a change (one member more), then every member leaves.
func (g *classicGroup) Teardown(ctx context.Context) error {
	defer g.close()
	c, err := dialCoordinator(ctx, g.env, g.name, len(g.members))
	if err != nil {
		return err
	}
	before := g.stableG
	g.members = append(g.members, &classicMember{conn: c})
	took, gens, err := g.settle(ctx)
	if err != nil {
		return fmt.Errorf("one member joining %d: %w", len(g.members)-1, err)
	}
	g.env.Info.Extra("rejoin_stable_ms", float64(took.Microseconds())/1000)
	g.env.Info.Extra("rejoin_generations", float64(gens-before))
	return g.leave(ctx)
}

func (g *classicGroup) close() {
	for _, m := range g.members {
		m.conn.Close()
	}
}

func (g *classicGroup) leave(ctx context.Context) error {
	errs := make([]error, len(g.members))
	var wg sync.WaitGroup
	for i, m := range g.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Group, req.MemberID = g.name, m.id
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = m.id
			req.Members = []kmsg.LeaveGroupRequestMember{lm}
			resp, err := m.conn.Request(ctx, req)
			if err != nil {
				errs[i] = err
				return
			}
			r := resp.(*kmsg.LeaveGroupResponse)
			if err := errorCode("leave group", r.ErrorCode); err != nil {
				errs[i] = err
				return
			}
			for _, rm := range r.Members {
				if err := errorCode("leave group member", rm.ErrorCode); err != nil {
					errs[i] = err
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// settle runs every member until all hold an assignment of one generation whose leader was
// given every member; it returns how long that took and that generation.
func (g *classicGroup) settle(ctx context.Context) (time.Duration, int32, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	g.mu.Lock()
	g.want = len(g.members)
	g.synced = map[int]int32{}
	g.size = map[int32]int{}
	g.settled = make(chan struct{})
	g.stableAt = time.Time{}
	for i, m := range g.members {
		if m.joined {
			g.synced[i] = m.gen
		}
	}
	settled := g.settled
	g.mu.Unlock()

	start := time.Now()
	errc := make(chan error, len(g.members))
	var wg sync.WaitGroup
	for i, m := range g.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.run(ctx, i, m, settled); err != nil {
				errc <- fmt.Errorf("member %d: %w", i, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stableAt.Sub(start), g.stableG, nil
}

// run drives one member until the group has settled.
func (g *classicGroup) run(ctx context.Context, i int, m *classicMember, settled chan struct{}) error {
	for {
		if !m.joined {
			if err := g.joinAndSync(ctx, i, m); err != nil {
				return err
			}
			continue
		}
		select {
		case <-settled:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("not settled: %w", ctx.Err())
		case <-time.After(settleProbeInterval):
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = g.name, m.gen, m.id
		resp, err := m.conn.Request(ctx, req)
		if err != nil {
			return err
		}
		switch code := resp.(*kmsg.HeartbeatResponse).ErrorCode; code {
		case 0:
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
			m.joined = false
		case kerr.UnknownMemberID.Code:
			m.joined, m.id = false, ""
		default:
			return errorCode("heartbeat", code)
		}
	}
}

// joinAndSync is one pass of the classic protocol for member m: JoinGroup (repeated for
// MEMBER_ID_REQUIRED), then SyncGroup, with the leader computing the assignment.
func (g *classicGroup) joinAndSync(ctx context.Context, i int, m *classicMember) error {
	meta := (&kmsg.ConsumerMemberMetadata{Topics: []string{classicTopic}}).AppendTo(nil)
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("not settled: %w", ctx.Err())
		}
		jr := kmsg.NewPtrJoinGroupRequest()
		jr.Group, jr.MemberID, jr.ProtocolType = g.name, m.id, "consumer"
		jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = classicSessionTimeoutMillis, classicRebalanceTimeoutMillis
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = classicProtocol, meta
		jr.Protocols = []kmsg.JoinGroupRequestProtocol{p}
		resp, err := m.conn.Request(ctx, jr)
		if err != nil {
			return err
		}
		g.env.Info.Version(jr)
		join := resp.(*kmsg.JoinGroupResponse)
		switch join.ErrorCode {
		case 0:
		case kerr.MemberIDRequired.Code:
			m.id = join.MemberID
			continue
		case kerr.UnknownMemberID.Code:
			m.id = ""
			continue
		case kerr.RebalanceInProgress.Code:
			continue
		default:
			return errorCode("join group", join.ErrorCode)
		}
		m.id, m.gen = join.MemberID, join.Generation
		var assignment []kmsg.SyncGroupRequestGroupAssignment
		if join.LeaderID == m.id {
			g.mu.Lock()
			g.size[join.Generation] = len(join.Members)
			g.mu.Unlock()
			assignment = assignRoundRobin(join.Members)
		}
		sr := kmsg.NewPtrSyncGroupRequest()
		sr.Group, sr.Generation, sr.MemberID = g.name, m.gen, m.id
		sr.ProtocolType, sr.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(classicProtocol)
		sr.GroupAssignment = assignment
		resp, err = m.conn.Request(ctx, sr)
		if err != nil {
			return err
		}
		g.env.Info.Version(sr)
		switch code := resp.(*kmsg.SyncGroupResponse).ErrorCode; code {
		case 0:
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
			continue
		case kerr.UnknownMemberID.Code:
			m.id = ""
			continue
		default:
			return errorCode("sync group", code)
		}
		m.joined = true
		g.noteSynced(i, m.gen)
		return nil
	}
}

// noteSynced notes member i's assignment for gen and closes settled once every member holds one
// of a generation whose leader was given all of them.
func (g *classicGroup) noteSynced(i int, gen int32) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.synced[i] = gen
	if !g.stableAt.IsZero() || g.size[gen] != g.want || len(g.synced) != g.want {
		return
	}
	for _, sg := range g.synced {
		if sg != gen {
			return
		}
	}
	g.stableAt, g.stableG = now, gen
	close(g.settled)
}

// assignRoundRobin spreads classicPartitions partitions over the members sorted by id.
func assignRoundRobin(members []kmsg.JoinGroupResponseMember) []kmsg.SyncGroupRequestGroupAssignment {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.MemberID
	}
	sort.Strings(ids)
	parts := make([][]int32, len(ids))
	for p := range int32(classicPartitions) {
		parts[int(p)%len(ids)] = append(parts[int(p)%len(ids)], p)
	}
	out := make([]kmsg.SyncGroupRequestGroupAssignment, len(ids))
	for i, id := range ids {
		a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: classicTopic, Partitions: parts[i]}}}
		out[i] = kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a.AppendTo(nil)}
	}
	return out
}
