package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	Register(streamsHeartbeat{})
	Register(streamsHeartbeat{scaling: true})
	Register(streamsHeartbeat{scaling: true, paced: true})
}

// StreamsPacedRate is streams-heartbeat-paced's aggregate rate (heartbeats per second): one
// that the 1000-member group, driven by coordbench's own 1000 connections on the same cores,
// reaches with margin on a 2-core machine (closed loop it got 31-75 thousand/s on 2026-12-07).
const StreamsPacedRate = 20_000

const (
	streamsTopic      = "coordbench-streams"
	streamsPartitions = 64
	// streamsRebalanceTimeoutMillis is sent when joining, as Kafka Streams sends max.poll.interval.ms.
	streamsRebalanceTimeoutMillis = 30_000
)

// streamsHeartbeat: N members of one Kafka Streams group (KIP-1071, StreamsGroupHeartbeat, key
// 88) with a one-subtopology topology reading a 64-partition topic. Like classic-join: Setup
// measures the time until all N hold a settled assignment (same member epoch, every task owned
// by exactly one member, no status such as MISSING_SOURCE_TOPICS); the timed operation is a
// steady-state heartbeat (epoch only, every other field null: unchanged); teardown adds one
// member, measures the time to settle again, and every member leaves (epoch -1). A target
// without key 88 is recorded as "not supported yet" by the runner.
//
// streams-heartbeat-scaling is the same workload at 10, 100 and 1000 members: its server CPU
// per operation against group size is issue 12's scaling row (flat within 20% is the goal), and
// its 1000-member row is the 1000-member streams group (steady heartbeat rate, and
// rejoin_stable_ms, the time to converge after one more member joins).
//
// streams-heartbeat-paced is streams-heartbeat-scaling at one aggregate rate for every size
// (Paced): closed loop, the 1000-member rows run at whatever rate coordbench's own 1000
// connections allow, and the server's CPU per heartbeat falls as the rate rises, so the
// closed-loop ratio mixes the rate with the group size.
type streamsHeartbeat struct{ scaling, paced bool }

func (s streamsHeartbeat) Name() string {
	if s.paced {
		return "streams-heartbeat-paced"
	}
	if s.scaling {
		return "streams-heartbeat-scaling"
	}
	return "streams-heartbeat"
}
func (s streamsHeartbeat) Description() string {
	if s.paced {
		return fmt.Sprintf("streams-heartbeat-scaling held at one aggregate rate, %d heartbeats/s unless `coordbench run "+
			"--rate` says otherwise, spread evenly over the members: each member heartbeats on a fixed schedule instead of "+
			"as soon as its last answer came. Compare *server CPU (µs/op)* across the rows: at the same rate at every "+
			"size, what differs is the group size and the number of connections alone. A row whose throughput is below "+
			"the rate did not reach it (the machine was the limit).", StreamsPacedRate)
	}
	if s.scaling {
		return "streams-heartbeat at 10, 100 and 1000 members: compare *server CPU (µs/op)* across the rows " +
			"(the cost of one steady heartbeat should not grow with the group); the 1000-member row's throughput, " +
			"latency and `rejoin_stable_ms` are the 1000-member streams group."
	}
	return fmt.Sprintf("N members (one per client and connection) join one new Kafka Streams group (KIP-1071 "+
		"StreamsGroupHeartbeat) whose topology has one subtopology reading a %d-partition topic. `join_stable_ms` "+
		"is the time from the first heartbeat until all N report the same member epoch, every task is owned by "+
		"exactly one member and no status is pending (members heartbeat every %s while settling, adopting each "+
		"assignment at once). The timed operation is a steady-state heartbeat (member epoch only; every other "+
		"field null, i.e. unchanged). After the window one member more joins and `rejoin_stable_ms` is the time "+
		"until all N+1 are settled again. Kafka delays assignments by `group.streams.assignment.interval.ms`, "+
		"so its settle times include that interval; coordinatord computes one sooner once the group has been quiet "+
		"for `group.streams.assignment.quiet.ms` (100 ms).", streamsPartitions, settleProbeInterval)
}
func (streamsHeartbeat) Needs() []int16 { return []int16{10, 88} }

// Rate makes a paced streamsHeartbeat a scenario.Paced; 0 for the closed-loop ones.
func (s streamsHeartbeat) Rate() float64 {
	if s.paced {
		return StreamsPacedRate
	}
	return 0
}
func (s streamsHeartbeat) DefaultClients() []int {
	if s.scaling {
		return []int{10, 100, 1000} // issue 12's scaling row and 1000-member group
	}
	return []int{8, 100} // issue #6 measures a 100-member group
}

func (streamsHeartbeat) Setup(ctx context.Context, env *Env) (Instance, error) {
	canCreate, err := targetCreatesTopics(ctx, env)
	if err != nil {
		return nil, err
	}
	if _, err := ensureTopic(ctx, env, streamsTopic, streamsPartitions, canCreate); err != nil {
		return nil, err
	}
	g := &streamsGroup{env: env, name: env.Tag + "-sg", process: randomID()}
	conns, err := dialAll(ctx, env.Clients, func(ctx context.Context, i int) (*kconn.Conn, error) {
		return dialCoordinator(ctx, env, g.name, i)
	})
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		g.members = append(g.members, &streamsMember{conn: c, id: randomID()})
	}
	took, err := g.settle(ctx)
	if err != nil {
		g.close()
		return nil, fmt.Errorf("%d members joining: %w", env.Clients, err)
	}
	env.Info.Extra("join_stable_ms", float64(took.Microseconds())/1000)
	return g, nil
}

type streamsGroup struct {
	env     *Env
	name    string
	process string
	members []*streamsMember
}

type streamsMember struct {
	conn   *kconn.Conn
	id     string
	epoch  int32 // 0 until joined
	owned  []kmsg.TaskIDs
	status int // statuses in the last answer
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// heartbeat sends m's heartbeat: the full join request at epoch 0, its owned tasks while
// settling, or only its epoch in steady state.
func (g *streamsGroup) heartbeat(ctx context.Context, m *streamsMember, steady bool) (*kmsg.StreamsGroupHeartbeatResponse, error) {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = g.name, m.id, m.epoch
	req.RebalanceTimeoutMillis = -1
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = streamsRebalanceTimeoutMillis
		st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		st.SubtopologyID, st.SourceTopics = "0", []string{streamsTopic}
		req.Topology = &kmsg.StreamsGroupHeartbeatRequestTopology{Epoch: 1,
			Subtopologies: []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}}
		req.ProcessID = kmsg.StringPtr(g.process)
		req.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{}
		req.TaskOffsets, req.TaskEndOffsets = []kmsg.TaskOffset{}, []kmsg.TaskOffset{}
	}
	if !steady {
		req.ActiveTasks = append([]kmsg.TaskIDs{}, m.owned...)
		req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	}
	resp, err := m.conn.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	g.env.Info.Version(req)
	r := resp.(*kmsg.StreamsGroupHeartbeatResponse)
	if err := errorCode("streams group heartbeat", r.ErrorCode); err != nil {
		if r.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *r.ErrorMessage)
		}
		return nil, err
	}
	m.epoch = r.MemberEpoch
	if r.ActiveTasks != nil {
		m.owned = r.ActiveTasks
	}
	m.status = len(r.Status)
	return r, nil
}

func (g *streamsGroup) Op(ctx context.Context, i int) error {
	_, err := g.heartbeat(ctx, g.members[i], true)
	return err
}

func (g *streamsGroup) Teardown(ctx context.Context) error {
	defer g.close()
	c, err := dialCoordinator(ctx, g.env, g.name, len(g.members))
	if err != nil {
		return err
	}
	g.members = append(g.members, &streamsMember{conn: c, id: randomID()})
	took, err := g.settle(ctx)
	if err != nil {
		return fmt.Errorf("one member joining %d: %w", len(g.members)-1, err)
	}
	g.env.Info.Extra("rejoin_stable_ms", float64(took.Microseconds())/1000)
	var errs []error
	for _, m := range g.members {
		m.epoch = -1 // leave
		if _, err := g.heartbeat(ctx, m, true); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d members failed to leave, first: %w", len(errs), errs[0])
	}
	return nil
}

func (g *streamsGroup) close() {
	for _, m := range g.members {
		m.conn.Close()
	}
}

// settle heartbeats every member each settleProbeInterval until the group has converged.
func (g *streamsGroup) settle(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	start := time.Now()
	for {
		errs := make([]error, len(g.members))
		var wg sync.WaitGroup
		for i, m := range g.members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = g.heartbeat(ctx, m, false)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				return 0, fmt.Errorf("member %d: %w", i, err)
			}
		}
		if g.settled() {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("not settled: %w", ctx.Err())
		case <-time.After(settleProbeInterval):
		}
	}
}

// settled: one member epoch for all, no status, and every partition owned exactly once.
func (g *streamsGroup) settled() bool {
	owners := map[int32]int{}
	for _, m := range g.members {
		if m.epoch != g.members[0].epoch || m.epoch <= 0 || m.status > 0 {
			return false
		}
		for _, t := range m.owned {
			for _, p := range t.Partitions {
				owners[p]++
			}
		}
	}
	if len(owners) != streamsPartitions {
		return false
	}
	for _, n := range owners {
		if n != 1 {
			return false
		}
	}
	return true
}
