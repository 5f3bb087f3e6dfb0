package shard

import (
	"sort"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Online migration between classic groups and KIP-848 consumer groups (Kafka 4.4's
// group.consumer.migration.policy): the upgrade a consumer heartbeat makes of a live classic
// group, the classic members inside a consumer group, and the downgrade when the last
// consumer-protocol member goes (docs/consumer-groups.md, "Online migration").

func (m *Machine) consumerBase() consumer.Config {
	if m.ConsumerConfig.SessionTimeout <= 0 {
		return consumer.DefaultConfig()
	}
	return m.ConsumerConfig
}

// consumerClassicView is the non-empty classic group with this id as an upgrade reads it.
func (m *Machine) consumerClassicView(group string) *consumer.ClassicView {
	g := m.Classic.Group(group)
	if g == nil || len(g.Members) == 0 || g.State == classic.Dead {
		return nil
	}
	v := &consumer.ClassicView{Generation: g.Generation, ProtocolType: g.ProtocolType, Protocol: g.Protocol}
	for _, mem := range g.Members {
		ps := make([]consumer.ClassicProtocol, len(mem.Protocols))
		for i, p := range mem.Protocols {
			ps[i] = consumer.ClassicProtocol{Name: p.Name, Metadata: p.Metadata}
		}
		v.Members = append(v.Members, consumer.ClassicMemberView{ID: mem.ID, InstanceID: mem.InstanceID, ClientID: mem.ClientID,
			ClientHost: mem.ClientHost, RebalanceTimeoutMs: mem.RebalanceTimeout, SessionTimeoutMs: mem.SessionTimeoutMs,
			Protocols: ps, Assignment: mem.Assignment})
	}
	return v
}

// consumerUpgrade is a joining ConsumerGroupHeartbeat (epoch 0) for a non-empty classic group:
// when the policy and the group allow, one batch deletes the classic group, builds the consumer
// group of its members (subscriptions and assignments decoded, offsets untouched) and runs the
// heartbeat on it, or refuses it with Kafka's reason. handled is false when the heartbeat should
// go the usual way.
func (m *Machine) consumerUpgrade(c *runtime.Ctx[*Machine], in consumer.HeartbeatInput) (out consumer.HeartbeatOutput, handled bool) {
	group := in.Req.Group
	if in.Req.MemberEpoch != 0 || m.Consumer.Owns(group) || m.Streams.Owns(group) {
		return out, false
	}
	v := m.consumerClassicView(group)
	if v == nil {
		return out, false
	}
	if reason, msg := consumer.UpgradeRefusal(group, v, in.Config.Policy(), in.Config); reason != "" {
		m.observeMigration(c, MigrationEvent{Group: group, Protocol: MigrationConsumer, Direction: MigrationUpgrade, Result: MigrationRefused, Reason: reason, Generation: v.Generation})
		return consumer.HeartbeatOutput{Response: consumer.ErrorResponse(kerr.GroupIDNotFound.Code, msg)}, true
	}
	batch, timers, ok := consumer.UpgradeRecords(group, v, in.Catalog)
	if !ok {
		m.observeMigration(c, MigrationEvent{Group: group, Protocol: MigrationConsumer, Direction: MigrationUpgrade, Result: MigrationRefused, Reason: "a member's metadata or assignment is not the consumer protocol's", Generation: v.Generation})
		return out, false
	}
	out, err := consumer.HeartbeatAfter(batch, in)
	if err != nil || out.Response.ErrorCode != 0 {
		// The joining member itself is refused (say, an instance id a classic member holds):
		// the classic group stays as it is.
		return out, err == nil
	}
	m.retireClassicGroup(c, group)
	// The heartbeat ran on a state of its own; the group's catalog is kept in this one.
	m.Consumer.NoteCatalog(group, in.Catalog)
	out.Records = append([]log.Record{classic.DeleteRecord(group)}, out.Records...)
	out.Timers = append(timers, out.Timers...)
	m.observeMigration(c, MigrationEvent{Group: group, Protocol: MigrationConsumer, Direction: MigrationUpgrade, Result: MigrationConverted, Generation: v.Generation, Members: len(v.Members)})
	return out, true
}

// catalogForConsumer is the catalog a classic request to a consumer group needs, or the answer to
// give without one.
func catalogForConsumer(sx StreamsContext) (consumer.Catalog, *runtime.Result) {
	if sx.Catalog != nil {
		if cat, ok := sx.Catalog.(consumer.Catalog); ok {
			return cat, nil
		}
	}
	if sx.AskCatalog {
		return nil, &runtime.Result{Response: NeedsCatalog{}}
	}
	return nil, nil
}

// consumerClassicJoin answers a JoinGroup for a non-empty consumer group: the member joins (or
// rejoins) as a classic member, reconciled like a consumer heartbeat; the answer carries its
// member epoch as the generation and no member list, so it does not compute an assignment.
func (m *Machine) consumerClassicJoin(c *runtime.Ctx[*Machine], req classic.JoinRequest, sx StreamsContext) runtime.Result {
	ps := make([]consumer.ClassicProtocol, len(req.Protocols))
	for i, p := range req.Protocols {
		ps[i] = consumer.ClassicProtocol{Name: p.Name, Metadata: p.Metadata}
	}
	if _, _, _, ok := consumer.Subscription(ps); req.ProtocolType != "consumer" || !ok {
		// Before the catalog is read: a client that is no consumer is refused as it is.
		return runtime.Result{Response: &classic.JoinResult{Code: kerr.InconsistentGroupProtocol.Code, Generation: -1, MemberID: req.MemberID}}
	}
	cat, early := catalogForConsumer(sx)
	if early != nil {
		return *early
	}
	if cat == nil {
		return runtime.Result{Response: &classic.JoinResult{Code: kerr.CoordinatorNotAvailable.Code, Generation: -1, MemberID: req.MemberID}}
	}
	prefix := req.ClientID
	if req.InstanceID != nil {
		prefix = *req.InstanceID
	}
	cfg := m.consumerConfigFor(req.Group, m.consumerBase())
	out := m.Consumer.ClassicJoin(consumer.ClassicJoinInput{
		Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, ProtocolType: req.ProtocolType, Protocols: ps,
		SessionTimeoutMs: req.SessionTimeoutMs, RebalanceTimeoutMs: req.RebalanceTimeout, ClientID: req.ClientID, ClientHost: req.ClientHost,
		RequireKnownMemberID: req.Version >= 4, NewMemberID: classic.NewMemberID(prefix), Catalog: cat, Config: cfg,
		ClassicMaxSize: m.classicBase().MaxSize, Now: c.Now(),
	})
	if out.Code != 0 {
		return runtime.Result{Response: &classic.JoinResult{Code: out.Code, Generation: -1, MemberID: out.MemberID}}
	}
	recs := out.Records
	if d := out.Downgrade; d != nil {
		for _, t := range d.Timers {
			c.Cancel(t.Key())
		}
		recs = append(m.Consumer.Tombstones(req.Group), m.classicGroupFrom(c, req.Group, d.Epoch, d.Members, d.Rebalance, cat))
		m.observeMigration(c, MigrationEvent{Group: req.Group, Protocol: MigrationConsumer, Direction: MigrationDowngrade, Result: MigrationConverted, Generation: d.Epoch, Members: len(d.Members)})
	} else {
		applyConsumerTimers(c, out.Timers, cfg)
	}
	pt, pn := "consumer", out.Protocol
	return runtime.Result{Records: recs, Response: &classic.JoinResult{
		Generation: out.Generation, ProtocolType: &pt, Protocol: &pn, MemberID: out.MemberID, Members: []classic.JoinMember{}}}
}

// consumerClassicSync answers a classic member's SyncGroup from its current assignment.
func (m *Machine) consumerClassicSync(c *runtime.Ctx[*Machine], req classic.SyncRequest, sx StreamsContext) runtime.Result {
	cat, early := catalogForConsumer(sx)
	if early != nil {
		return *early
	}
	if cat == nil {
		return runtime.Result{Response: &classic.SyncResult{Code: kerr.CoordinatorNotAvailable.Code}}
	}
	code, assignment, name, timers := m.Consumer.ClassicSync(req.Group, req.MemberID, req.InstanceID, req.Generation, req.ProtocolType, req.Protocol, cat)
	if code != 0 {
		return runtime.Result{Response: &classic.SyncResult{Code: code}}
	}
	applyConsumerTimers(c, timers, m.consumerConfigFor(req.Group, m.consumerBase()))
	pt := "consumer"
	return runtime.Result{Response: &classic.SyncResult{ProtocolType: &pt, Protocol: &name, Assignment: assignment}}
}

// consumerClassicHeartbeat answers a classic member's Heartbeat.
func (m *Machine) consumerClassicHeartbeat(c *runtime.Ctx[*Machine], group, member string, instance *string, generation int32) runtime.Result {
	cfg := m.consumerConfigFor(group, m.consumerBase())
	code, timers := m.Consumer.ClassicHeartbeat(group, member, instance, generation, cfg, c.Now())
	applyConsumerTimers(c, timers, cfg)
	groupReads(c, group) // no records: only the session timer moves
	return runtime.Result{Response: HeartbeatResult{Code: code}}
}

// consumerDowngrade replaces the records of a removal (removed members) that leaves only
// classic members, when the policy allows and the classic group size bound holds: the whole
// consumer group's tombstones and a classic group in PreparingRebalance at the consumer group's
// epoch, its members with their protocols and current assignments (classicGroupFrom), so that
// they rejoin and rebalance as a classic group. Otherwise recs are returned unchanged.
func (m *Machine) consumerDowngrade(c *runtime.Ctx[*Machine], group string, removed []string, recs []log.Record, cat consumer.Catalog) []log.Record {
	cand := m.Consumer.Downgradable(group, removed)
	if cand == nil {
		return recs
	}
	cfg := m.consumerConfigFor(group, m.consumerBase())
	ccfg := m.classicBase()
	switch {
	case !consumer.DowngradeAllowed(cfg.Policy()):
		m.observeMigration(c, MigrationEvent{Group: group, Protocol: MigrationConsumer, Direction: MigrationDowngrade, Result: MigrationRefused, Reason: "group.consumer.migration.policy " + cfg.Policy() + " does not allow downgrades"})
		return recs
	case ccfg.MaxSize > 0 && int64(len(cand.Members)) > int64(ccfg.MaxSize):
		m.observeMigration(c, MigrationEvent{Group: group, Protocol: MigrationConsumer, Direction: MigrationDowngrade, Result: MigrationRefused, Reason: "the classic members exceed group.max.size"})
		return recs
	}
	tombs, timers := m.Consumer.GroupTombstones(group)
	for _, t := range timers {
		c.Cancel(t.Key())
	}
	rec := m.classicGroupFrom(c, group, cand.Epoch, cand.Members, true, cat)
	m.observeMigration(c, MigrationEvent{Group: group, Protocol: MigrationConsumer, Direction: MigrationDowngrade, Result: MigrationConverted, Generation: cand.Epoch, Members: len(cand.Members)})
	return append(tombs, rec)
}

// classicGroupFrom is the record of the classic group a downgrade makes of a consumer group's
// classic members: at the consumer group's epoch, the members with their protocols, timeouts
// and current assignments (named through cat; without one, through the catalog the shard sees
// now, so a downgrade decided by a timer or a LeaveGroup right after a restart still names
// them), the first member as leader; Stable or preparing a rebalance. It arms the classic
// group's timers: every member's session, and the join phase's when it rebalances.
func (m *Machine) classicGroupFrom(c *runtime.Ctx[*Machine], group string, epoch int32, members []*consumer.Member, rebalance bool, cat consumer.Catalog) log.Record {
	if cat == nil && m.Catalog != nil {
		cat = m.Catalog()
	}
	if cat == nil {
		cat = m.Consumer.Snapshot(group)
	}
	state := classic.Stable
	if rebalance {
		state = classic.PreparingRebalance
	}
	g := &classic.Group{ID: group, State: state, PreviousState: classic.Stable, Generation: epoch,
		ProtocolType: "consumer", Leader: members[0].ID, StateTimestamp: c.Now().UnixMilli()}
	if p := commonProtocol(members); p != "" {
		g.Protocol = &p
	}
	var rebalanceMs int32
	for _, mem := range members {
		ps := make([]classic.Protocol, len(mem.Classic.Protocols))
		for i, p := range mem.Classic.Protocols {
			ps[i] = classic.Protocol{Name: p.Name, Metadata: p.Metadata}
		}
		g.Members = append(g.Members, &classic.Member{ID: mem.ID, InstanceID: mem.InstanceID, ClientID: mem.ClientID, ClientHost: mem.ClientHost,
			SessionTimeoutMs: mem.Classic.SessionTimeoutMs, RebalanceTimeout: mem.RebalanceTimeoutMs, Protocols: ps,
			Assignment: consumer.EncodeAssignment(mem.Assigned, cat)})
		rebalanceMs = max(rebalanceMs, mem.RebalanceTimeoutMs)
	}
	var ct []classic.Timer
	if rebalance {
		ct = append(ct, classic.Timer{Kind: classic.TimerJoin, Group: group, Generation: g.Generation, Delay: time.Duration(rebalanceMs) * time.Millisecond})
	}
	for _, mem := range g.Members {
		ct = append(ct, classic.Timer{Kind: classic.TimerSession, Group: group, Member: mem.ID, Generation: g.Generation,
			Delay: time.Duration(mem.SessionTimeoutMs) * time.Millisecond})
	}
	ccfg := m.classicBase()
	for _, t := range ct {
		c.Schedule(t.Key(), t.Delay, classicTimer(ccfg, t))
	}
	return g.Record()
}

// commonProtocol is the first protocol of the first member that every member supports.
func commonProtocol(ms []*consumer.Member) string {
	count := map[string]int{}
	for _, m := range ms {
		seen := map[string]bool{}
		for _, p := range m.Classic.Protocols {
			if !seen[p.Name] {
				seen[p.Name] = true
				count[p.Name]++
			}
		}
	}
	for _, p := range ms[0].Classic.Protocols {
		if count[p.Name] == len(ms) {
			return p.Name
		}
	}
	names := make([]string, 0, len(count))
	for n := range count {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 {
		return names[0]
	}
	return ""
}
