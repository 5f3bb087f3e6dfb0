package shard

// Shard operations for classic groups (spec coordinator-apis §2): they run the classic state
// machine's transactions on the speculative state and carry out their effects — the group's
// record, timers, and parked JoinGroup/SyncGroup responses, which are answered only once the
// record that decided them is durable.

import (
	"sort"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ownedByOtherType reports whether a non-classic group type (streams, consumer) owns the group
// id: a JoinGroup to it gets INCONSISTENT_GROUP_PROTOCOL unless it is empty, and
// DescribeGroups/ListGroups/DeleteGroups do not take it for a simple group.
func (m *Machine) ownedByOtherType(groupID string) bool {
	return (m.Streams != nil && m.Streams.Owns(groupID)) || (m.Consumer != nil && m.Consumer.Owns(groupID))
}

// IsClassicGroup reports whether the id is a classic group with membership state (the check
// other group types use to refuse their APIs for it).
func (m *Machine) IsClassicGroup(groupID string) bool { return m.Classic.Has(groupID) }

// applyClassic carries out a transaction's effects: arms and cancels its timers, answers parked
// requests once its record is durable, and returns its records — plus the caller's own answer
// when the transaction both parked the caller and completed its wait (say, the last member
// joining completes the barrier).
func (m *Machine) applyClassic(c *runtime.Ctx[*Machine], tx *classic.Tx) (recs []log.Record, join *classic.JoinResult, sync *classic.SyncResult) {
	cfg := tx.Config()
	for _, t := range tx.Timers {
		if t.Cancel {
			c.Cancel(t.Key())
			continue
		}
		c.Schedule(t.Key(), t.Delay, classicTimer(cfg, t))
	}
	group := tx.GroupID()
	for _, id := range tx.Removed {
		m.Classic.Forget(group, id)
	}
	for _, a := range tx.Answers {
		isSync := a.Sync != nil
		if !a.Prior {
			if !isSync && a.Member == tx.JoinPark && join == nil {
				join = a.Join
				continue
			}
			if isSync && a.Member == tx.SyncPark && sync == nil {
				sync = a.Sync
				continue
			}
		}
		p := m.Classic.TakeWaiter(group, a.Member, isSync)
		if p == nil {
			continue
		}
		var resp any = a.Join
		if isSync {
			resp = a.Sync
		}
		c.AfterDurable(func() { c.Resolve(p, resp, nil) })
	}
	recs = tx.Records()
	if len(recs) == 0 {
		// A classic transaction reads its group's record and nothing else that is persisted:
		// an answer without records waits for that group's pending writes, not the shard's.
		c.Reads(classic.GroupKey(group))
	}
	return recs, join, sync
}

// park stores the caller's promise (ephemeral state of the speculative machine). A request of
// the same member still parked from before is answered so it does not hang.
func (m *Machine) park(c *runtime.Ctx[*Machine], group, member string, sync bool, stale any) *runtime.Promise {
	p := c.NewPromise()
	if old := m.Classic.Park(group, member, sync, p); old != nil {
		c.AfterDurable(func() { c.Resolve(old, stale, nil) })
	}
	return p
}

// JoinGroup runs a JoinGroup. The response is a *classic.JoinResult, or a promise of one for a
// join parked until the rebalance's join phase completes.
func JoinGroup(cfg classic.Config, req classic.JoinRequest) runtime.WriteOp[*Machine] {
	return JoinGroupWith(cfg, req, StreamsContext{})
}

// JoinGroupWith is JoinGroup with what a JoinGroup into a non-empty streams group needs (online
// migration, spec online-migration §4.2).
func JoinGroupWith(cfg classic.Config, req classic.JoinRequest, sx StreamsContext) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		// An empty streams group becomes a classic group (spec streams-groups §11.2): its
		// tombstones and the new group's records go in one batch. A non-empty one takes the
		// member as a classic member of the streams group, or refuses (policy disabled).
		var converted []log.Record
		// An empty KIP-848 consumer group gives way the same way; a non-empty one takes the
		// member as a classic member (online migration, whatever the policy, as Kafka 4.4).
		if owned, empty, recs := m.ConsumerConversion(c, req.Group); owned {
			if !empty {
				return m.consumerClassicJoin(c, req, sx)
			}
			converted = recs
		} else if m.ownedByOtherType(req.Group) {
			refuse := func(code int16) runtime.Result {
				return runtime.Result{Response: &classic.JoinResult{Code: code, Generation: -1, MemberID: req.MemberID}}
			}
			if !m.Streams.IsEmpty(req.Group) {
				return m.streamsClassicJoin(c, req, sx)
			}
			if m.PinTopologyDescriptions && m.Streams.DescriptionHeld(req.Group) {
				// The handler releases the description first (topology-description §6.6); one
				// stored meanwhile makes the client retry.
				return refuse(kerr.RebalanceInProgress.Code)
			}
			_, _, converted = m.StreamsConversion(c, req.Group)
		}
		tx := m.Classic.Join(cfg, c.Now(), req)
		recs, join, _ := m.applyClassic(c, tx)
		recs = append(converted, recs...)
		switch {
		case tx.Join != nil:
			return runtime.Result{Records: recs, Response: tx.Join}
		case join != nil:
			return runtime.Result{Records: recs, Response: join}
		}
		if tx.JoinPark == "" { // every path answers or parks; never leave a caller hanging
			return runtime.Result{Records: recs, Response: &classic.JoinResult{Code: kerr.UnknownServerError.Code, Generation: -1, MemberID: req.MemberID}}
		}
		p := m.park(c, req.Group, tx.JoinPark, false,
			&classic.JoinResult{Code: kerr.RebalanceInProgress.Code, Generation: -1, MemberID: tx.JoinPark})
		return runtime.Result{Records: recs, Response: p}
	}
}

// SyncGroup runs a SyncGroup; the response is a *classic.SyncResult or a promise of one.
func SyncGroup(cfg classic.Config, req classic.SyncRequest) runtime.WriteOp[*Machine] {
	return SyncGroupWith(cfg, req, StreamsContext{})
}

// SyncGroupWith is SyncGroup with what a classic member of a streams group needs (spec
// online-migration §4.3).
func SyncGroupWith(cfg classic.Config, req classic.SyncRequest, sx StreamsContext) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		if m.Streams.HasClassicPath(req.Group) {
			return m.streamsClassicSync(c, req, sx)
		}
		if m.Consumer.Owns(req.Group) {
			return m.consumerClassicSync(c, req, sx)
		}
		tx := m.Classic.Sync(cfg, c.Now(), req)
		recs, _, sync := m.applyClassic(c, tx)
		switch {
		case tx.Sync != nil:
			return runtime.Result{Records: recs, Response: tx.Sync}
		case sync != nil:
			return runtime.Result{Records: recs, Response: sync}
		}
		if tx.SyncPark == "" {
			return runtime.Result{Records: recs, Response: &classic.SyncResult{Code: kerr.UnknownServerError.Code}}
		}
		p := m.park(c, req.Group, tx.SyncPark, true, &classic.SyncResult{Code: kerr.RebalanceInProgress.Code})
		return runtime.Result{Records: recs, Response: p}
	}
}

// Heartbeat runs a Heartbeat; the response is the error code (int16).
func Heartbeat(cfg classic.Config, group, member string, instance *string, generation int32) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		if m.Streams.HasClassicPath(group) { // spec online-migration §4.4
			scfg := m.streamsConfigFor(group, m.streamsBase())
			res := m.Streams.ClassicHeartbeat(group, member, instance, generation, scfg, c.Now(), c.Scheduled)
			applyStreamsTimers(c, res.Timers, scfg)
			groupReads(c, group) // no records: only the session timer moves
			return runtime.Result{Response: HeartbeatResult{Code: res.Code}}
		}
		if m.Consumer.Owns(group) {
			return m.consumerClassicHeartbeat(c, group, member, instance, generation)
		}
		tx := m.Classic.Heartbeat(cfg, c.Now(), group, member, instance, generation)
		recs, _, _ := m.applyClassic(c, tx)
		out := HeartbeatResult{Code: tx.Code}
		if g := tx.Group(); len(recs) == 0 && tx.Code == 0 && g != nil && g.State == classic.Stable &&
			len(tx.Timers) == 1 && tx.Timers[0].Kind == classic.TimerSession && !tx.Timers[0].Cancel &&
			len(tx.Answers) == 0 && len(tx.Removed) == 0 {
			// A Stable group's member whose heartbeat only moved its session deadline: the same
			// heartbeat gets the same answer until another operation runs on this shard, other
			// than one scoped to another group (the ticket is taken for this group's scope).
			out.Ticket, out.Session = c.Ticket(tx.Timers[0].Key(), group), tx.Timers[0].Delay
		}
		return runtime.Result{Records: recs, Response: out}
	}
}

// HeartbeatResult is a classic Heartbeat's outcome. Ticket, when set, lets the caller answer a
// repeat of the same heartbeat (group, member, instance id, generation) with Code without the
// shard while the group's shard finds Ticket valid (runtime.Shard.Valid with Session).
type HeartbeatResult struct {
	Code    int16
	Ticket  *runtime.Ticket
	Session time.Duration
}

// LeaveResult is a LeaveGroup's outcome: a request-wide code and one code per member.
type LeaveResult struct {
	Code    int16
	Members []int16
	// MemberIDs are the members' ids where the group resolved them (a consumer group names
	// the member an instance id stands for); nil otherwise.
	MemberIDs []string
}

// LeaveGroup runs a LeaveGroup; the response is a LeaveResult.
func LeaveGroup(cfg classic.Config, group string, members []classic.LeaveMember) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		if m.Consumer.Owns(group) {
			return m.consumerClassicLeave(c, group, members)
		}
		if m.Streams.HasClassicPath(group) && m.Streams.Group(group).ClassicMembers() > 0 { // spec online-migration §4.5
			ids := make([]streams.ClassicLeaveIdentity, len(members))
			for i, mem := range members {
				ids[i] = streams.ClassicLeaveIdentity{MemberID: mem.MemberID, InstanceID: mem.InstanceID}
			}
			scfg := m.streamsConfigFor(group, m.streamsBase())
			codes, recs, timers, dg := m.Streams.ClassicLeave(group, ids, scfg.DowngradeSettings(nil, c.Now()))
			applyStreamsTimers(c, timers, scfg)
			return runtime.Result{Records: m.finishDowngrade(c, group, dg, recs), Response: LeaveResult{Members: codes}}
		}
		tx, codes := m.Classic.Leave(cfg, c.Now(), group, members)
		recs, _, _ := m.applyClassic(c, tx)
		return runtime.Result{Records: recs, Response: LeaveResult{Code: tx.Code, Members: codes}}
	}
}

// classicTimer is the write operation a classic timer runs when it fires.
func classicTimer(cfg classic.Config, t classic.Timer) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		var tx *classic.Tx
		switch t.Kind {
		case classic.TimerSession:
			tx = m.Classic.SessionExpired(cfg, c.Now(), t.Group, t.Member)
		case classic.TimerPending:
			tx = m.Classic.PendingExpired(cfg, c.Now(), t.Group, t.Member)
		case classic.TimerJoin:
			tx = m.Classic.JoinExpired(cfg, c.Now(), t.Group, t.Generation, t.Final)
		case classic.TimerSync:
			tx = m.Classic.SyncExpired(cfg, c.Now(), t.Group, t.Generation)
		default:
			return runtime.Result{}
		}
		recs, _, _ := m.applyClassic(c, tx)
		return runtime.Result{Records: recs}
	}
}

// onLoadedClassic re-arms the classic timers of a freshly loaded shard (timers are never
// persisted; session deadlines restart from the load time). cfg is the configured group.*
// keys: the re-armed timers and every transaction they start run with it, as the handlers do.
func (m *Machine) onLoadedClassic(c *runtime.Ctx[*Machine], cfg classic.Config) {
	for _, t := range m.Classic.Rearm(cfg) {
		c.Schedule(t.Key(), t.Delay, classicTimer(cfg, t))
	}
}

// validateClassicCommit is the classic group type's commit validator (spec §3.2).
func (m *Machine) validateClassicCommit(r CommitRequest) (int16, bool) {
	return m.Classic.ValidateCommit(r.Group, r.Generation, r.MemberID, r.InstanceID, r.Transactional, time.Now())
}

// GroupMember is a member as DescribeGroups shows it.
type GroupMember struct {
	ID         string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
}

// GroupDescription is a DescribeGroups answer for one classic or simple group.
type GroupDescription struct {
	ID           string
	Found        bool
	State        string
	ProtocolType string
	Protocol     string
	Members      []GroupMember
}

// DescribeClassicGroups describes groups from durable state (spec §2.7): a classic group as it
// is (metadata and protocol only when Stable); a group id with committed offsets and no group state is an Empty simple group with
// protocol type ""; anything else is not found.
func DescribeClassicGroups(ids []string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		out := make([]GroupDescription, len(ids))
		for i, id := range ids {
			out[i] = m.describeClassic(id)
		}
		return out, nil
	}
}

func (m *Machine) describeClassic(id string) GroupDescription {
	d := GroupDescription{ID: id, State: classic.Dead.String()}
	if m.ownedByOtherType(id) {
		return d
	}
	g := m.Classic.Group(id)
	if g == nil {
		if m.Offsets.HasGroup(id) {
			d.Found, d.State = true, classic.Empty.String()
		}
		return d
	}
	d.Found, d.State, d.ProtocolType = true, g.State.String(), g.ProtocolType
	stable := g.State == classic.Stable && g.Protocol != nil
	if stable {
		d.Protocol = *g.Protocol
	}
	for _, mem := range g.Members {
		// Outside Stable Kafka describes members without metadata but with the assignment they
		// last received (ClassicGroupMember.describeNoMetadata).
		gm := GroupMember{ID: mem.ID, InstanceID: mem.InstanceID, ClientID: mem.ClientID, ClientHost: mem.ClientHost, Assignment: mem.Assignment}
		if stable {
			for _, p := range mem.Protocols {
				if p.Name == *g.Protocol {
					gm.Metadata = p.Metadata
				}
			}
		}
		d.Members = append(d.Members, gm)
	}
	return d
}

// GroupListing is one ListGroups entry.
type GroupListing struct {
	ID           string
	ProtocolType string
	State        string
	Type         string
}

// matchListFilter applies a ListGroups states or types filter: case-insensitive and trimmed
// (Kafka's GroupMetadataManager.listGroups); an empty filter matches everything.
func matchListFilter(filter []string, v string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if strings.EqualFold(strings.TrimSpace(f), v) {
			return true
		}
	}
	return false
}

// ListClassicGroups lists the classic and simple groups of a shard from durable state, keeping
// those whose state and type match the filters (case-insensitive, trimmed; empty = all).
func ListClassicGroups(states, types []string) runtime.ReadOp[*Machine] {
	match := matchListFilter
	return func(m *Machine) (any, error) {
		var out []GroupListing
		add := func(l GroupListing) {
			if match(states, l.State) && match(types, l.Type) {
				out = append(out, l)
			}
		}
		for _, id := range m.Classic.Groups() {
			g := m.Classic.Group(id)
			add(GroupListing{ID: id, ProtocolType: g.ProtocolType, State: g.State.String(), Type: "classic"})
		}
		for _, id := range m.Offsets.Groups() {
			if !m.Classic.Has(id) && !m.ownedByOtherType(id) {
				add(GroupListing{ID: id, State: classic.Empty.String(), Type: "classic"})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, nil
	}
}

// DeleteResult is a DeleteGroups outcome for one group. NotClassic: a non-classic group type
// owns the id and must decide (the code is then GROUP_ID_NOT_FOUND as a fallback).
type DeleteResult struct {
	Code       int16
	NotClassic bool
}

// DeleteClassicGroup deletes an Empty classic group or a simple group together with all its
// committed offsets (spec §2.7); NON_EMPTY_GROUP for a group with members, GROUP_ID_NOT_FOUND
// for an unknown id.
func DeleteClassicGroup(group string) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		if m.ownedByOtherType(group) {
			return runtime.Result{Response: DeleteResult{Code: kerr.GroupIDNotFound.Code, NotClassic: true}}
		}
		var d divisible
		if m.Classic.Has(group) {
			tx, code := m.Classic.Delete(group)
			if code != 0 {
				return runtime.Result{Response: DeleteResult{Code: code}}
			}
			recs, _, _ := m.applyClassic(c, tx)
			d.each(m.Offsets.DeleteGroupRecords(group)...)
			d.whole(recs...)
		} else if !m.Offsets.HasGroup(group) {
			return runtime.Result{Response: DeleteResult{Code: kerr.GroupIDNotFound.Code}}
		} else {
			d.each(m.Offsets.DeleteGroupRecords(group)...)
		}
		return runtime.Result{Records: d.recs, Units: d.units, Response: DeleteResult{}}
	}
}

// classicOffsetRules tells the offsets code about a classic group (OffsetDelete, retention;
// Kafka's ClassicGroup.offsetExpirationCondition and isSubscribedToTopic).
func (m *Machine) classicOffsetRules(groupID string) (OffsetRules, bool) {
	g := m.Classic.Group(groupID)
	if g == nil {
		return OffsetRules{}, false
	}
	r := OffsetRules{Dead: g.State == classic.Dead, Empty: g.State == classic.Empty}
	r.NonEmpty = g.State != classic.Empty && g.State != classic.Dead && g.ProtocolType != "consumer"
	topics, known := g.SubscribedTopics()
	switch {
	case known && g.State != classic.Empty:
		r.Subscribed = func(topic string) bool { return topics[topic] }
	case !known && g.ProtocolType == "consumer" && g.State != classic.Empty && g.State != classic.Dead:
		// Kafka's ClassicGroup.isSubscribedToTopic: a consumer group whose subscriptions cannot
		// be read (metadata that is not a ConsumerProtocolSubscription, no protocol chosen yet)
		// is taken to be subscribed to every topic, so OffsetDelete never removes an offset a
		// member may still be reading from.
		r.Subscribed = func(string) bool { return true }
	}
	switch {
	case g.State == classic.Empty:
		since := g.StateTimestamp
		r.ExpireBase = func(c offsets.Committed) int64 {
			if since > 0 {
				return since
			}
			return c.CommitTimestamp
		}
	case g.State == classic.Stable && known:
		r.ExpireBase = commitTimeBase
	}
	r.DeleteRecords = func() []log.Record { return []log.Record{classic.DeleteRecord(groupID)} }
	return r, true
}
