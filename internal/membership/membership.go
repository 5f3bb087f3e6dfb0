// Package membership shares the group shards among the coordinatord nodes of one cluster.id
// (log.backend=kafka) through a classic group on the upstream Kafka cluster, as Kafka Connect
// shares its connectors: the upstream's group coordinator decides who is alive, the elected
// leader computes the shard map, and every member learns the whole map from its assignment.
//
// A node loads the shards it is given (the kafka log's load fences their previous owner) and
// lets go of the ones it loses before it rejoins, so the leader hands a shard on only once its
// holder has stopped serving it. A node that has had no successful answer from the group for
// the session timeout serves no shard at all: by then the upstream may have given its shards
// to others.
package membership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Shards is the node's group shards, loaded and released by shard number.
type Shards interface {
	// Own loads shard i unless it is held, or reloads it if it FAILED; true when a load started.
	Own(i int32) bool
	// Disown stops serving shard i and returns once it has stopped.
	Disown(ctx context.Context, i int32)
	// Owned reports whether shard i is held (loading, serving or FAILED).
	Owned(i int32) bool
}

// Options configure a Membership.
type Options struct {
	// Request sends a request to the upstream cluster, to the group's coordinator for group
	// requests (kgo's Client.Request does).
	Request func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Group   string
	// Self is this node as clients reach it.
	Self       Node
	ShardCount int32
	// Topic and ClusterID are this node's log.kafka.topic and cluster.id, told to the group
	// (memberMeta).
	Topic, ClusterID  string
	Shards            Shards
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	Logger            *zap.Logger
	Registerer        prometheus.Registerer
	// BeforeLoad, when set, runs before the node loads shards it gained: the topic catalog is
	// refreshed there, so the new owner knows every topic the old one accepted commits for (the
	// old owner checked them against the upstream, earlier).
	BeforeLoad func(ctx context.Context) error
	// PeerProbeInterval: how often every other node's listener is dialled to find a dead one
	// (peers.go); 0: never, the session timeout alone finds it.
	PeerProbeInterval time.Duration
	// Probe dials a peer's address; nil: a TCP connect. Tests replace it.
	Probe func(ctx context.Context, addr string) error
}

// Membership is this node's membership in the upstream group.
type Membership struct {
	o  Options
	lg *zap.Logger

	base  time.Time    // leases are measured on the monotonic clock from here
	lease atomic.Int64 // ns since base until which this node may serve; 0: none yet
	view  atomic.Pointer[assignment]
	// mine: the shards the latest assignment gives this node, stored with view.
	mine atomic.Pointer[[]bool]

	// mu serialises changes to the held shards (assignments, a lapsed lease).
	mu     sync.Mutex
	rejoin atomic.Bool // let go of shards (or lapsed): rejoin at once

	memberID   string // loop goroutine only
	generation int32
	self       atomic.Pointer[string] // memberID, for the peer watch
	// wake has the heartbeat loop beat at once (a peer was removed: the group rebalances).
	wake chan struct{}
	// newView has the peer watch probe at once (a new assignment).
	newView chan struct{}

	stop      chan struct{}
	done      chan struct{}
	stopOnce  sync.Once
	closeOnce sync.Once

	owned      prometheus.Gauge
	nodes      prometheus.Gauge
	rebalances *prometheus.CounterVec
	lapses     prometheus.Counter
	// peersRemoved counts members this node removed from the group after their listener
	// refused connections (peers.go).
	peersRemoved prometheus.Counter
}

// New creates the membership; Start joins.
func New(o Options) *Membership {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Probe == nil {
		o.Probe = dialProbe
	}
	m := &Membership{o: o, lg: o.Logger, base: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1), newView: make(chan struct{}, 1),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coordinatord_membership_shards_owned",
			Help: "Group shards this node was assigned by the upstream group (log.backend=kafka)."}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coordinatord_membership_nodes",
			Help: "coordinatord nodes in the latest shard assignment (log.backend=kafka)."}),
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coordinatord_membership_rebalances_total",
			Help: "Shard assignments this node received, by whether it gained or lost shards (moved) or not (unchanged)."}, []string{"result"}),
		lapses: prometheus.NewCounter(prometheus.CounterOpts{Name: "coordinatord_membership_lease_lapses_total",
			Help: "Times this node stopped serving every shard because the upstream group had not answered it for log.kafka.session.timeout.ms."}),
		peersRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "coordinatord_membership_peers_removed_total",
			Help: "coordinatord nodes this node removed from the upstream group (LeaveGroup) because their listener refused connections on consecutive probes (log.kafka.peer.probe.interval.ms)."}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(m.owned, m.nodes, m.rebalances, m.lapses, m.peersRemoved)
	}
	return m
}

// Start joins the group and keeps the membership until Close.
func (m *Membership) Start() {
	go m.watchLease()
	go m.run()
	if m.o.PeerProbeInterval > 0 {
		go m.watchPeers()
	}
}

// Serving reports whether this node's lease holds: false before it first joined and once the
// upstream group has not answered it for the session timeout.
func (m *Membership) Serving() bool {
	l := m.lease.Load()
	return l != 0 && int64(time.Since(m.base)) < l
}

// Assigned reports whether the latest assignment gives shard i to this node: until its load
// has begun the node is not ready, though the shard still reads NotOwned.
func (m *Membership) Assigned(i int32) bool {
	mine := m.mine.Load()
	return mine != nil && int(i) < len(*mine) && (*mine)[i]
}

// Joined reports whether this node has received a shard assignment.
func (m *Membership) Joined() bool { return m.view.Load() != nil }

// Owner is the node owning shard i in the latest assignment; false while it is handed over
// or no assignment is known.
func (m *Membership) Owner(i int32) (Node, bool) {
	a := m.view.Load()
	if a == nil || int(i) >= len(a.Owners) || a.Owners[i] < 0 || int(a.Owners[i]) >= len(a.Nodes) {
		return Node{}, false
	}
	return a.Nodes[a.Owners[i]], true
}

// IsSelf reports whether n, a node of the latest assignment, is this node: by member id, since
// a node refused for a node.id another node uses shares that id with the node the map lists.
func (m *Membership) IsSelf(n Node) bool {
	p := m.self.Load()
	return p != nil && n.Member == *p
}

// Refused is why the group's leader gave this node nothing in the latest assignment (a
// node.id another node uses, another offsets.topic.num.partitions, log.kafka.topic or
// cluster.id); empty when it did not refuse it.
func (m *Membership) Refused() string {
	if a := m.view.Load(); a != nil {
		return a.Refused
	}
	return ""
}

// LetGoOfAll stops serving every shard this node holds, keeping its membership and
// assignment: the next heartbeat loads each assigned shard again from the state topic (the
// topic was deleted or re-created under the node, so what the shards hold in memory is not
// what it holds). It returns how many it let go of.
func (m *Membership) LetGoOfAll() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	// The assignment still gives the node these shards, so the owned gauge stays.
	return m.disownLocked()
}

// Nodes are the nodes of the latest assignment.
func (m *Membership) Nodes() []Node {
	if a := m.view.Load(); a != nil {
		return a.Nodes
	}
	return nil
}

// Close stops the membership and leaves the group, so the others take the shards at once
// instead of after the session timeout. Call it once the shards are closed.
func (m *Membership) Close(ctx context.Context) {
	m.closeOnce.Do(func() { m.leave(ctx) })
}

func (m *Membership) leave(ctx context.Context) {
	m.stopOnce.Do(func() { close(m.stop) })
	<-m.done
	if m.memberID == "" {
		return
	}
	if _, err := m.o.Request(ctx, leaveRequest(m.o.Group, m.memberID)); err != nil {
		m.lg.Warn("could not leave the upstream group; the other nodes take this node's shards after log.kafka.session.timeout.ms", zap.Error(err))
		return
	}
	m.lg.Info("left the upstream group", zap.String("group", m.o.Group))
}

// leaveRequest removes member from group: v0-v2 name the leaving member at the top, v3+
// (KIP-345) list the members to remove, which is also how one member removes another.
func leaveRequest(group, member string) *kmsg.LeaveGroupRequest {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = group, member
	mem := kmsg.NewLeaveGroupRequestMember()
	mem.MemberID = member
	req.Members = append(req.Members, mem)
	return req
}

func (m *Membership) stopped() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// stopContext is cancelled by Close (or by cancel).
func (m *Membership) stopContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (m *Membership) run() {
	defer close(m.done)
	ctx, cancel := m.stopContext()
	defer cancel()
	backoff := 100 * time.Millisecond
	for !m.stopped() {
		err := m.joinAndSync(ctx)
		if err == nil {
			backoff = 100 * time.Millisecond
			m.heartbeat(ctx)
			continue
		}
		if errors.Is(err, errRejoin) || m.stopped() {
			continue
		}
		m.lg.Warn("could not join the upstream group of coordinatord nodes; retrying", zap.String("group", m.o.Group),
			zap.Error(err), zap.Duration("retry_in", backoff))
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// errRejoin: the group is rebalancing again; join at once.
var errRejoin = errors.New("rejoin")

func (m *Membership) renew(sent time.Duration) {
	until := int64(sent + m.o.SessionTimeout)
	for {
		cur := m.lease.Load()
		if until <= cur || m.lease.CompareAndSwap(cur, until) {
			return
		}
	}
}

func (m *Membership) now() time.Duration { return time.Since(m.base) }

// held lists the shards this node holds, after letting go of all of them if its lease lapsed.
func (m *Membership) held() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease.Load() != 0 && !m.Serving() {
		m.disownAllLocked()
	}
	var out []int32
	for i := int32(0); i < m.o.ShardCount; i++ {
		if m.o.Shards.Owned(i) {
			out = append(out, i)
		}
	}
	return out
}

func (m *Membership) joinAndSync(ctx context.Context) error {
	m.rejoin.Store(false)
	meta := memberMeta{Node: m.o.Self.ID, Host: m.o.Self.Host, Port: m.o.Self.Port, Shards: m.o.ShardCount, Owned: m.held(),
		Topic: m.o.Topic, Cluster: m.o.ClusterID}
	if meta.Owned == nil {
		meta.Owned = []int32{}
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = m.o.Group
	join.SessionTimeoutMillis = int32(m.o.SessionTimeout.Milliseconds())
	join.RebalanceTimeoutMillis = int32(m.o.RebalanceTimeout.Milliseconds())
	join.ProtocolType = protocolType
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = protocolName, encodeMeta(meta)
	join.Protocols = append(join.Protocols, p)
	var jr *kmsg.JoinGroupResponse
	for {
		join.MemberID = m.memberID
		jctx, cancel := context.WithTimeout(ctx, m.o.RebalanceTimeout+m.o.SessionTimeout)
		resp, err := m.o.Request(jctx, join)
		cancel()
		if err != nil {
			return fmt.Errorf("JoinGroup: %w", err)
		}
		jr = resp.(*kmsg.JoinGroupResponse)
		switch err := kerr.ErrorForCode(jr.ErrorCode); {
		case err == nil:
		case errors.Is(err, kerr.MemberIDRequired):
			m.setMember(jr.MemberID)
			continue
		case errors.Is(err, kerr.UnknownMemberID):
			m.setMember("")
			continue
		default:
			return fmt.Errorf("JoinGroup: %w", err)
		}
		break
	}
	m.setMember(jr.MemberID)
	m.generation = jr.Generation
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = m.o.Group, jr.Generation, jr.MemberID
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr(protocolType), kmsg.StringPtr(protocolName)
	if jr.LeaderID == jr.MemberID {
		sync.GroupAssignment = m.lead(jr)
	}
	sent := m.now()
	sctx, cancel := context.WithTimeout(ctx, m.o.RebalanceTimeout+m.o.SessionTimeout)
	resp, err := m.o.Request(sctx, sync)
	cancel()
	if err != nil {
		return fmt.Errorf("SyncGroup: %w", err)
	}
	sr := resp.(*kmsg.SyncGroupResponse)
	switch err := kerr.ErrorForCode(sr.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.RebalanceInProgress):
		return errRejoin
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration):
		m.evicted(err)
		return errRejoin
	default:
		return fmt.Errorf("SyncGroup: %w", err)
	}
	a, err := decodeAssignment(sr.MemberAssignment)
	if err != nil {
		return fmt.Errorf("SyncGroup: undecodable assignment from the leader: %w", err)
	}
	m.renew(sent)
	m.apply(a, jr.Generation, jr.LeaderID == jr.MemberID)
	return nil
}

// lead computes every member's assignment (this node is the leader).
func (m *Membership) lead(jr *kmsg.JoinGroupResponse) []kmsg.SyncGroupRequestGroupAssignment {
	var members []joined
	for _, mem := range jr.Members {
		meta, err := decodeMeta(mem.ProtocolMetadata)
		if err != nil {
			m.lg.Error("a member of the coordinatord group sent metadata this node cannot read (a newer version?); it gets no shards",
				zap.String("member", mem.MemberID), zap.Error(err))
			meta = memberMeta{Node: -1, Shards: -1}
		}
		members = append(members, joined{member: mem.MemberID, meta: meta})
	}
	a, refused := assignOn(members, m.o.ShardCount, m.o.Topic, m.o.ClusterID)
	for member, why := range refused {
		m.lg.Error("a coordinatord node gets no shards", zap.String("member", member), zap.String("reason", why))
	}
	var out []kmsg.SyncGroupRequestGroupAssignment
	for _, mem := range jr.Members {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID = mem.MemberID
		mine := a
		mine.Refused = refused[mem.MemberID]
		ga.MemberAssignment = encodeAssignment(mine)
		out = append(out, ga)
	}
	return out
}

// apply loads the shards assigned to this node and lets go of the others. Having let go of
// any, it rejoins at once, so that the leader can hand them to their new owner.
func (m *Membership) apply(a assignment, generation int32, leader bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a.Refused != "" {
		m.lg.Error("the upstream group's leader gave this node no shards; fix the configuration", zap.String("reason", a.Refused))
	}
	mine := make([]bool, m.o.ShardCount)
	for i, o := range a.Owners {
		if i < len(mine) && o >= 0 && int(o) < len(a.Nodes) && a.Nodes[o].Member == m.memberID {
			mine[i] = true
		}
	}
	var lost, gained, assigned []int32
	for i := int32(0); i < m.o.ShardCount; i++ {
		if m.o.Shards.Owned(i) && !mine[i] {
			lost = append(lost, i)
		}
	}
	// Let go first: the leader gave nothing held by this node to another one, and a shard
	// this node loses must have stopped before the leader hears it let go.
	ctx, cancel := context.WithTimeout(context.Background(), m.o.SessionTimeout)
	for _, i := range lost {
		m.o.Shards.Disown(ctx, i)
	}
	cancel()
	gaining := false
	for i := int32(0); i < m.o.ShardCount; i++ {
		gaining = gaining || mine[i] && !m.o.Shards.Owned(i)
	}
	// The catalog refresh (an upstream round trip) comes before the new map is published:
	// published first, FindCoordinator named this node for shards it had not begun to load,
	// which answered NOT_COORDINATOR meanwhile.
	if gaining && m.o.BeforeLoad != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.o.SessionTimeout)
		if err := m.o.BeforeLoad(ctx); err != nil {
			m.lg.Warn("could not refresh the topic catalog before loading gained shards; loading them anyway", zap.Error(err))
		}
		cancel()
	}
	m.mine.Store(&mine)
	m.view.Store(&a)
	m.probeNow()
	for i := int32(0); i < m.o.ShardCount; i++ {
		if mine[i] {
			assigned = append(assigned, i)
			if m.o.Shards.Own(i) {
				gained = append(gained, i)
			}
		}
	}
	m.owned.Set(float64(len(assigned)))
	m.nodes.Set(float64(len(a.Nodes)))
	result := "unchanged"
	if len(lost)+len(gained) > 0 {
		result = "moved"
	}
	m.rebalances.WithLabelValues(result).Inc()
	handing := 0
	for _, o := range a.Owners {
		if o < 0 {
			handing++
		}
	}
	nodes := make([]int32, 0, len(a.Nodes))
	for _, n := range a.Nodes {
		nodes = append(nodes, n.ID)
	}
	m.lg.Info("shard assignment from the upstream group", zap.String("group", m.o.Group), zap.Int32("generation", generation),
		zap.Bool("leader", leader), zap.Int32s("nodes", nodes), zap.Int("owned", len(assigned)), zap.Int32s("gained", gained),
		zap.Int32s("lost", lost), zap.Int("handed_over", handing))
	if len(lost) > 0 {
		m.rejoin.Store(true)
	}
}

// evicted: the group no longer knows this member (it was silent past the session timeout):
// others may own its shards already, so it lets go of all of them before rejoining.
func (m *Membership) evicted(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.disownAllLocked(); n > 0 {
		m.lg.Warn("the upstream group dropped this node; stopped serving its shards, rejoining", zap.Error(err), zap.Int("shards", n))
	}
	m.setMember("")
	m.view.Store(nil)
}

func (m *Membership) setMember(id string) {
	m.memberID = id
	m.self.Store(&id)
}

func (m *Membership) disownAllLocked() int {
	n := m.disownLocked()
	m.owned.Set(0)
	return n
}

// disownLocked closes every shard the node holds and returns how many.
func (m *Membership) disownLocked() int {
	ctx, cancel := context.WithTimeout(context.Background(), m.o.SessionTimeout)
	defer cancel()
	n := 0
	for i := int32(0); i < m.o.ShardCount; i++ {
		if m.o.Shards.Owned(i) {
			m.o.Shards.Disown(ctx, i)
			n++
		}
	}
	return n
}

// heartbeat keeps the membership until the group rebalances or this node must rejoin. An
// assigned shard that is neither loading nor serving is loaded again at each beat
// (reloadAssigned): the assignment says this node serves it.
func (m *Membership) heartbeat(ctx context.Context) {
	t := time.NewTicker(m.o.HeartbeatInterval)
	defer t.Stop()
	for {
		if m.rejoin.Load() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.wake:
		}
		if m.rejoin.Load() {
			return
		}
		m.reloadAssigned()
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = m.o.Group, m.generation, m.memberID
		sent := m.now()
		hctx, cancel := context.WithTimeout(ctx, m.o.SessionTimeout)
		resp, err := m.o.Request(hctx, req)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				m.lg.Warn("heartbeat to the upstream group failed", zap.String("group", m.o.Group), zap.Error(err))
			}
			continue
		}
		switch err := kerr.ErrorForCode(resp.(*kmsg.HeartbeatResponse).ErrorCode); {
		case err == nil:
			m.renew(sent)
		case errors.Is(err, kerr.RebalanceInProgress):
			m.renew(sent) // still a member: the coordinator answered it
			return
		case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.FencedInstanceID):
			m.evicted(err)
			return
		default:
			m.lg.Warn("heartbeat to the upstream group refused", zap.String("group", m.o.Group), zap.Error(err))
		}
	}
}

// reloadAssigned loads again, at each beat, every shard the latest assignment gives this node
// that is neither loading nor serving: one that FAILED (fenced by a load that was aborted too
// late, a storage failure), or one it does not hold at all. No path is meant to leave an
// assigned shard unheld while the lease holds (apply loads every one), but a shard left so
// would answer NOT_COORDINATOR until the next rebalance, which a stable group never has; the
// beat is where that is noticed (Own does nothing for a shard that is loading or serving).
func (m *Membership) reloadAssigned() {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.view.Load()
	if a == nil || !m.Serving() {
		return
	}
	for i, o := range a.Owners {
		if o < 0 || int(o) >= len(a.Nodes) || a.Nodes[o].Member != m.memberID {
			continue
		}
		held := m.o.Shards.Owned(int32(i))
		if !m.o.Shards.Own(int32(i)) {
			continue
		}
		if held {
			m.lg.Warn("reloading an owned shard that FAILED", zap.Int("shard", i))
		} else {
			m.lg.Warn("loading an assigned shard that this node did not hold", zap.Int("shard", i))
		}
	}
}

// watchLease lets go of every shard once the lease lapses (requests already stop being served
// then: Serving gates every lookup), and has the node rejoin: what it claimed is gone.
func (m *Membership) watchLease() {
	tick := max(m.o.SessionTimeout/50, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		if m.lease.Load() == 0 || m.Serving() {
			continue
		}
		m.mu.Lock()
		held := false
		for i := int32(0); i < m.o.ShardCount && !held; i++ {
			held = m.o.Shards.Owned(i)
		}
		if held {
			n := m.disownAllLocked()
			m.lapses.Inc()
			m.lg.Warn("no answer from the upstream group for log.kafka.session.timeout.ms: stopped serving every shard (others may own them now); rejoining",
				zap.String("group", m.o.Group), zap.Int("shards", n), zap.Int64("log.kafka.session.timeout.ms", m.o.SessionTimeout.Milliseconds()))
			m.rejoin.Store(true)
		}
		m.mu.Unlock()
	}
}
