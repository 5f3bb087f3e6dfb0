package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { Register(consumerHeartbeat{}) }

const (
	consumerTopic      = "coordbench-consumer"
	consumerPartitions = 1024
	// consumerRebalanceTimeoutMillis is sent when joining, as the Java consumer sends
	// max.poll.interval.ms.
	consumerRebalanceTimeoutMillis = 300_000
)

// consumerHeartbeat: N members of one KIP-848 consumer group (ConsumerGroupHeartbeat, key 68)
// subscribed to one 1024-partition topic. Like streams-heartbeat: Setup measures the time until
// all N hold a settled assignment (same member epoch, every partition owned by exactly one
// member); the timed operation is a steady-state heartbeat (epoch only, every other field null:
// unchanged); teardown adds one member, measures the time to settle again, and every member
// leaves (epoch -1). A target without key 68 is recorded as "not supported yet".
type consumerHeartbeat struct{}

func (consumerHeartbeat) Name() string { return "consumer-heartbeat" }
func (consumerHeartbeat) Description() string {
	return fmt.Sprintf("N members (one per client and connection) join one new KIP-848 consumer group "+
		"(ConsumerGroupHeartbeat v1, server-side `uniform` assignor) subscribed to a %d-partition topic. "+
		"`join_stable_ms` is the time from the first heartbeat until all N report the same member epoch and "+
		"every partition is owned by exactly one member (members heartbeat every %s while settling, reporting "+
		"what they own and adopting each assignment at once). The timed operation is a steady-state heartbeat "+
		"(member epoch only). After the window one member more joins and `rejoin_stable_ms` is the time until "+
		"all N+1 are settled again. Kafka 4.3+ computes a target at most once per "+
		"`group.consumer.assignment.interval.ms` (1 s), so its settle times include that interval; "+
		"coordinatord computes one sooner once the group has been quiet for `group.consumer.assignment.quiet.ms` (100 ms).", consumerPartitions, settleProbeInterval)
}
func (consumerHeartbeat) Needs() []int16        { return []int16{10, 68} }
func (consumerHeartbeat) DefaultClients() []int { return []int{100, 1000} } // issue 17 measures 100- and 1000-member groups

func (consumerHeartbeat) Setup(ctx context.Context, env *Env) (Instance, error) {
	canCreate, err := targetCreatesTopics(ctx, env)
	if err != nil {
		return nil, err
	}
	if _, err := ensureTopic(ctx, env, consumerTopic, consumerPartitions, canCreate); err != nil {
		return nil, err
	}
	g, err := dialConsumerGroup(ctx, env, env.Tag+"-cg")
	if err != nil {
		return nil, err
	}
	took, err := g.settle(ctx)
	if err != nil {
		g.close()
		return nil, fmt.Errorf("%d members joining: %w", env.Clients, err)
	}
	env.Info.Extra("join_stable_ms", float64(took.Microseconds())/1000)
	return g, nil
}

// dialConsumerGroup opens one coordinator connection per client for the new KIP-848 group name
// and gives each its member id; none has heartbeated yet.
func dialConsumerGroup(ctx context.Context, env *Env, name string) (*consumerGroup, error) {
	g := &consumerGroup{env: env, name: name}
	conns, err := dialAll(ctx, env.Clients, func(ctx context.Context, i int) (*kconn.Conn, error) {
		return dialCoordinator(ctx, env, name, i)
	})
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		g.members = append(g.members, &consumerMember{conn: c, id: randomID(), version: -1})
	}
	return g, nil
}

type consumerGroup struct {
	env     *Env
	name    string
	members []*consumerMember
}

type consumerMember struct {
	conn  *kconn.Conn
	id    string
	epoch int32 // 0 until joined
	owned []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic
	// version is the ConsumerGroupHeartbeat version last noted in Info (-1: none yet).
	version int16
}

// heartbeat sends m's heartbeat: the full join request at epoch 0, its owned partitions while
// settling, or only its epoch in steady state.
func (g *consumerGroup) heartbeat(ctx context.Context, m *consumerMember, steady bool) error {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = g.name, m.id, m.epoch
	req.RebalanceTimeoutMillis = -1
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = consumerRebalanceTimeoutMillis
		req.SubscribedTopicNames = []string{consumerTopic}
	}
	if !steady || m.epoch == 0 {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if m.epoch != 0 {
			for _, t := range m.owned {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
			}
		}
	}
	resp, err := m.conn.Request(ctx, req)
	if err != nil {
		return err
	}
	if v := req.GetVersion(); v != m.version {
		// Info is shared under a lock by every member: noted once per member, not per beat.
		g.env.Info.Version(req)
		m.version = v
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	if err := errorCode("consumer group heartbeat", r.ErrorCode); err != nil {
		if r.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *r.ErrorMessage)
		}
		return err
	}
	m.epoch = r.MemberEpoch
	if r.Assignment != nil {
		m.owned = r.Assignment.Topics
	}
	return nil
}

func (g *consumerGroup) Op(ctx context.Context, i int) error {
	return g.heartbeat(ctx, g.members[i], true)
}

func (g *consumerGroup) Teardown(ctx context.Context) error {
	defer g.close()
	c, err := dialCoordinator(ctx, g.env, g.name, len(g.members))
	if err != nil {
		return err
	}
	g.members = append(g.members, &consumerMember{conn: c, id: randomID(), version: -1})
	took, err := g.settle(ctx)
	if err != nil {
		return fmt.Errorf("one member joining %d: %w", len(g.members)-1, err)
	}
	g.env.Info.Extra("rejoin_stable_ms", float64(took.Microseconds())/1000)
	var errs []error
	for _, m := range g.members {
		m.epoch = -1 // leave
		if err := g.heartbeat(ctx, m, true); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d members failed to leave, first: %w", len(errs), errs[0])
	}
	return nil
}

func (g *consumerGroup) close() {
	for _, m := range g.members {
		m.conn.Close()
	}
}

// settle heartbeats every member each settleProbeInterval until the group has converged.
func (g *consumerGroup) settle(ctx context.Context) (time.Duration, error) {
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
				errs[i] = g.heartbeat(ctx, m, false)
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

// settled: one member epoch for all, every partition owned exactly once, and the uniform
// assignor's balance (counts within one of each other). Without the balance a group whose
// target the assignment interval still holds back (one member owning everything, the others
// nothing, all at the old target's epoch) would count as settled.
func (g *consumerGroup) settled() bool {
	owners := map[int32]int{}
	lo := consumerPartitions / len(g.members)
	for _, m := range g.members {
		if m.epoch != g.members[0].epoch || m.epoch <= 0 {
			return false
		}
		n := 0
		for _, t := range m.owned {
			n += len(t.Partitions)
			for _, p := range t.Partitions {
				owners[p]++
			}
		}
		if n < lo || n > lo+1 {
			return false
		}
	}
	if len(owners) != consumerPartitions {
		return false
	}
	for _, n := range owners {
		if n != 1 {
			return false
		}
	}
	return true
}
