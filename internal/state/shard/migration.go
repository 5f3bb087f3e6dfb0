package shard

import (
	"time"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Online migration between classic groups of Kafka Streams members and streams groups (spec
// online-migration): the glue between the classic and streams state of one shard.

// StreamsContext is what a classic request needs when its group id holds a streams group with
// classic members: the topic catalog and the broker's streams configuration. A zero value (no
// catalog) answers as before online migration existed.
type StreamsContext struct {
	Catalog streams.Catalog
	Config  streams.Config
	// AskCatalog: without a catalog, answer NeedsCatalog instead of COORDINATOR_NOT_AVAILABLE,
	// so that the handler reads the catalog only for the groups that need it and retries.
	AskCatalog bool
}

// NeedsCatalog is the response of a classic JoinGroup or SyncGroup that reached a streams group
// without a catalog while StreamsContext.AskCatalog was set: resubmit it with the catalog.
type NeedsCatalog struct{}

// defaulted fills in Kafka's streams defaults when the caller passed no configuration.
func (sx StreamsContext) defaulted() StreamsContext {
	if sx.Config.SessionTimeout <= 0 {
		sx.Config = streams.DefaultConfig()
	}
	return sx
}

// MigrationDirection and MigrationResult are the direction and result labels of
// coordinatord_group_migrations_total: the metrics table of docs/operations.md lists every
// constant here, and a test holds the two equal.
type MigrationDirection string

const (
	MigrationUpgrade   MigrationDirection = "upgrade"   // classic to streams or consumer
	MigrationDowngrade MigrationDirection = "downgrade" // streams or consumer to classic
)

type MigrationResult string

const (
	MigrationConverted MigrationResult = "converted"
	MigrationRefused   MigrationResult = "refused"
)

// MigrationProtocol is the group protocol a migration moves a classic group to or from.
type MigrationProtocol string

const (
	MigrationStreams  MigrationProtocol = "streams"  // KIP-1071 (migration.md)
	MigrationConsumer MigrationProtocol = "consumer" // KIP-848 (consumer-groups.md)
)

// MigrationEvent is one conversion or refusal, for the operator's log line and metric.
type MigrationEvent struct {
	Group      string
	Protocol   MigrationProtocol
	Direction  MigrationDirection
	Result     MigrationResult
	Reason     string // why a conversion was refused
	Generation int32  // the classic generation (upgrade) or streams epoch (downgrade)
	Members    int    // classic members converted
}

// classicView is the non-empty classic group with this id as an upgrade reads it, or nil.
func (m *Machine) classicView(group string) *streams.ClassicGroupView {
	g := m.Classic.Group(group)
	if g == nil || len(g.Members) == 0 {
		return nil
	}
	v := &streams.ClassicGroupView{Generation: g.Generation, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Tombstone: classic.DeleteRecord(group)}
	for _, mem := range g.Members {
		ps := make([]streams.ClassicProtocol, len(mem.Protocols))
		for i, p := range mem.Protocols {
			ps[i] = streams.ClassicProtocol{Name: p.Name, Metadata: p.Metadata}
		}
		v.Members = append(v.Members, streams.ClassicMemberView{ID: mem.ID, InstanceID: mem.InstanceID, ClientID: mem.ClientID,
			ClientHost: mem.ClientHost, RebalanceTimeoutMs: mem.RebalanceTimeout, SessionTimeoutMs: mem.SessionTimeoutMs,
			Protocols: ps, Assignment: mem.Assignment})
	}
	return v
}

// retireClassicGroup ends what the classic group had outside its record once an upgrade is
// decided (spec §3.5, §3.6): its timers are cancelled, and parked JoinGroup and SyncGroup answers
// get REBALANCE_IN_PROGRESS, so the clients rejoin and land in the streams group.
func (m *Machine) retireClassicGroup(c *runtime.Ctx[*Machine], group string) {
	g := m.Classic.Group(group)
	if g == nil {
		return
	}
	ids := make([]string, 0, len(g.Members)+len(g.Pending))
	for _, mem := range g.Members {
		ids = append(ids, mem.ID)
	}
	for _, p := range g.Pending {
		ids = append(ids, p.ID)
	}
	for _, kind := range []classic.TimerKind{classic.TimerJoin, classic.TimerSync} {
		c.Cancel(classic.Timer{Kind: kind, Group: group}.Key())
	}
	for _, id := range ids {
		c.Cancel(classic.Timer{Kind: classic.TimerSession, Group: group, Member: id}.Key())
		c.Cancel(classic.Timer{Kind: classic.TimerPending, Group: group, Member: id}.Key())
		if p := m.Classic.TakeWaiter(group, id, false); p != nil {
			resp := &classic.JoinResult{Code: kerr.RebalanceInProgress.Code, Generation: -1, MemberID: id}
			c.AfterDurable(func() { c.Resolve(p, resp, nil) })
		}
		if p := m.Classic.TakeWaiter(group, id, true); p != nil {
			resp := &classic.SyncResult{Code: kerr.RebalanceInProgress.Code}
			c.AfterDurable(func() { c.Resolve(p, resp, nil) })
		}
		m.Classic.Forget(group, id)
	}
}

func (m *Machine) observeMigration(c *runtime.Ctx[*Machine], ev MigrationEvent) {
	if m.OnMigration == nil {
		return
	}
	if ev.Result == MigrationConverted {
		c.AfterDurable(func() { m.OnMigration(ev) })
		return
	}
	m.OnMigration(ev)
}

// streamsClassicJoin answers a JoinGroup for a non-empty streams group (spec §4.2).
func (m *Machine) streamsClassicJoin(c *runtime.Ctx[*Machine], req classic.JoinRequest, sx StreamsContext) runtime.Result {
	sx = sx.defaulted()
	if sx.Catalog == nil && sx.AskCatalog {
		return runtime.Result{Response: NeedsCatalog{}}
	}
	ps := make([]streams.ClassicProtocol, len(req.Protocols))
	for i, p := range req.Protocols {
		ps[i] = streams.ClassicProtocol{Name: p.Name, Metadata: p.Metadata}
	}
	prefix := req.ClientID
	if req.InstanceID != nil {
		prefix = *req.InstanceID
	}
	cfg := m.streamsConfigFor(req.Group, sx.Config)
	res := m.Streams.ClassicJoin(streams.ClassicJoinInput{
		Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, ProtocolType: req.ProtocolType, Protocols: ps,
		SessionTimeoutMs: req.SessionTimeoutMs, RebalanceTimeoutMs: req.RebalanceTimeout, ClientID: req.ClientID, ClientHost: req.ClientHost,
		RequireKnownMemberID: req.Version >= 4, NewMemberID: classic.NewMemberID(prefix),
		Catalog: sx.Catalog, Config: cfg, Now: c.Now(), Scheduled: c.Scheduled,
	})
	applyStreamsTimers(c, res.Timers, cfg)
	if res.Code != 0 {
		return runtime.Result{Response: &classic.JoinResult{Code: res.Code, Generation: -1, MemberID: res.MemberID}}
	}
	pt, pn := "consumer", streams.ClassicProtocolName
	return runtime.Result{Records: m.finishDowngrade(c, req.Group, res.Downgrade, res.Records), Response: &classic.JoinResult{
		Generation: res.Generation, ProtocolType: &pt, Protocol: &pn, MemberID: res.MemberID, Members: []classic.JoinMember{}}}
}

// streamsClassicSync answers a SyncGroup for a streams group (spec §4.3).
func (m *Machine) streamsClassicSync(c *runtime.Ctx[*Machine], req classic.SyncRequest, sx StreamsContext) runtime.Result {
	sx = sx.defaulted()
	cfg := m.streamsConfigFor(req.Group, sx.Config)
	if sx.Catalog == nil && sx.AskCatalog {
		return runtime.Result{Response: NeedsCatalog{}}
	}
	if sx.Catalog == nil { // the catalog could not be read: retriable
		return runtime.Result{Response: &classic.SyncResult{Code: kerr.CoordinatorNotAvailable.Code}}
	}
	res := m.Streams.ClassicSync(req.Group, req.MemberID, req.InstanceID, req.Generation, req.ProtocolType, req.Protocol, sx.Catalog, cfg, c.Now(), c.Scheduled)
	applyStreamsTimers(c, res.Timers, cfg)
	if res.Code != 0 {
		return runtime.Result{Response: &classic.SyncResult{Code: res.Code}}
	}
	pt, pn := "consumer", streams.ClassicProtocolName
	return runtime.Result{Response: &classic.SyncResult{ProtocolType: &pt, Protocol: &pn, Assignment: res.Assignment}}
}

// streamsBase is the broker's streams configuration with Kafka's defaults filled in.
func (m *Machine) streamsBase() streams.Config {
	if m.StreamsConfig.SessionTimeout <= 0 {
		return streams.DefaultConfig()
	}
	return m.StreamsConfig
}

func (m *Machine) classicBase() classic.Config {
	if m.ClassicConfig == (classic.Config{}) {
		return classic.DefaultConfig()
	}
	return m.ClassicConfig
}

// finishDowngrade completes a removal that left only classic members (spec online-migration
// §5): for a conversion it appends the classic group (§5.3, §7.2 step 7) to the streams
// tombstones and arms its timers; a declined one is only reported.
func (m *Machine) finishDowngrade(c *runtime.Ctx[*Machine], group string, dg *streams.Downgrade, recs []log.Record) []log.Record {
	if dg == nil {
		return recs
	}
	if !dg.Converted {
		m.observeMigration(c, MigrationEvent{Group: group, Protocol: MigrationStreams, Direction: MigrationDowngrade, Result: MigrationRefused, Reason: dg.Reason})
		return recs
	}
	proto := streams.ClassicProtocolName
	now := c.Now()
	// PreparingRebalance in the record itself: the rebalance that redistributes the departed
	// members' tasks survives a restart (the spec's RebalanceOnLoad, §7.5, §7.7).
	g := &classic.Group{ID: group, State: classic.PreparingRebalance, PreviousState: classic.Stable, Generation: dg.Generation,
		ProtocolType: "consumer", Protocol: &proto, Leader: dg.Leader, StateTimestamp: now.UnixMilli()}
	var rebalance int32
	for _, mv := range dg.Members {
		ps := make([]classic.Protocol, len(mv.Protocols))
		for i, p := range mv.Protocols {
			ps[i] = classic.Protocol{Name: p.Name, Metadata: p.Metadata}
		}
		g.Members = append(g.Members, &classic.Member{ID: mv.ID, InstanceID: mv.InstanceID, ClientID: mv.ClientID, ClientHost: mv.ClientHost,
			SessionTimeoutMs: mv.SessionTimeoutMs, RebalanceTimeout: mv.RebalanceTimeoutMs, Protocols: ps, Assignment: mv.Assignment})
		rebalance = max(rebalance, mv.RebalanceTimeoutMs)
	}
	cfg := m.classicBase()
	timers := []classic.Timer{{Kind: classic.TimerJoin, Group: group, Generation: g.Generation, Delay: time.Duration(rebalance) * time.Millisecond}}
	for _, mem := range g.Members {
		timers = append(timers, classic.Timer{Kind: classic.TimerSession, Group: group, Member: mem.ID, Generation: g.Generation,
			Delay: time.Duration(mem.SessionTimeoutMs) * time.Millisecond})
	}
	for _, t := range timers {
		c.Schedule(t.Key(), t.Delay, classicTimer(cfg, t))
	}
	m.observeMigration(c, MigrationEvent{Group: group, Protocol: MigrationStreams, Direction: MigrationDowngrade, Result: MigrationConverted, Generation: dg.Generation, Members: len(dg.Members)})
	return append(recs, g.Record())
}
