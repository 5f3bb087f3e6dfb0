package shard

import (
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848 consumer group operations: the state machine in internal/state/consumer computes
// records, responses and timer actions; these ops arm the timers on the shard.

// ConsumerHeartbeat runs a ConsumerGroupHeartbeat that passed consumer.ValidateRequest. The
// response is a consumer.HeartbeatOutput.
func ConsumerHeartbeat(in consumer.HeartbeatInput) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		in.Now, in.Foreign = c.Now(), m.consumerForeign
		// The group's overrides apply from its next heartbeat on.
		in.Config = m.consumerConfigFor(in.Req.Group, in.Config)
		out, upgraded := m.consumerUpgrade(c, in)
		if !upgraded {
			out = m.Consumer.Heartbeat(in)
		}
		applyConsumerTimers(c, out.Timers, in.Config)
		if in.Req.MemberEpoch == -1 && out.Response.ErrorCode == 0 {
			out.Records = m.consumerDowngrade(c, in.Req.Group, []string{in.Req.MemberID}, out.Records, in.Catalog)
		}
		if len(out.Records) == 0 {
			// A steady heartbeat only moves the member's session deadline (a timer, never a
			// record): its answer waits for its own group's pending writes, not the shard's.
			groupReads(c, in.Req.Group)
			if !upgraded && consumer.SteadyRequest(in.Req) && out.Response.ErrorCode == 0 && out.Response.Assignment == nil &&
				len(out.Timers) == 1 && out.Timers[0].Kind == consumer.SessionTimer && !out.Timers[0].Cancel &&
				m.Consumer.Steady(in.Req.Group, in.Req.MemberID) {
				// Nothing changed and nothing but the session deadline moved: the same request
				// gets the same answer until another operation runs on this shard, other than
				// one scoped to another group (the ticket is taken for this group's scope).
				out.Ticket, out.Session = c.Ticket(out.Timers[0].Key(), in.Req.Group), out.Timers[0].After
			}
		}
		return runtime.Result{Records: out.Records, Response: out}
	}
}

// ConsumerDescribe describes consumer groups from the latest state; as a write op without
// records it answers once everything it read is durable.
func ConsumerDescribe(groups []string, includeOps bool, cat consumer.Catalog, cfg consumer.Config) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		out := make([]kmsg.ConsumerGroupDescribeResponseGroup, len(groups))
		for i, g := range groups {
			owned, _, _ := m.consumerForeign(g)
			out[i] = m.Consumer.Describe(g, includeOps, cat, m.consumerConfigFor(g, cfg), owned)
		}
		return runtime.Result{Response: out}
	}
}

// consumerForeign reports whether another group type owns a group id, whether that group is
// an empty classic group a consumer join converts, and the records deleting it. Kafka converts
// only classic groups; a streams group, even empty, keeps its id.
func (m *Machine) consumerForeign(group string) (owned, convertible bool, tombstones []log.Record) {
	if m.Streams.Owns(group) {
		return true, false, nil
	}
	g := m.Classic.Group(group)
	if g == nil || g.State == classic.Dead {
		return false, false, nil
	}
	if g.State == classic.Empty && len(g.Members) == 0 {
		return true, true, []log.Record{classic.DeleteRecord(group)}
	}
	return true, false, nil
}

func (m *Machine) consumerConfigFor(group string, base consumer.Config) consumer.Config {
	return base.WithGroupConfigs(m.GroupConfigs[group])
}

func applyConsumerTimers(c *runtime.Ctx[*Machine], actions []consumer.TimerAction, cfg consumer.Config) {
	for _, a := range actions {
		key := a.Key()
		if a.Cancel {
			c.Cancel(key)
			continue
		}
		if a.IfAbsent && c.Scheduled(key) {
			continue
		}
		switch a.Kind {
		case consumer.SessionTimer:
			// An armed session timer's operation is this one (the key names the group and
			// member; cfg reaches only the cancels a fence makes): a re-arm keeps it rather
			// than building a closure per heartbeat.
			if !c.Extend(key, a.After) {
				c.Schedule(key, a.After, consumerFence(a.Group, a.Member, 0, false, cfg))
			}
		case consumer.RebalanceTimer:
			c.Schedule(key, a.After, consumerFence(a.Group, a.Member, a.Epoch, true, cfg))
		case consumer.SyncTimer, consumer.JoinTimer:
			c.Schedule(key, a.After, consumerFence(a.Group, a.Member, 0, false, cfg))
		}
	}
}

func consumerFence(group, member string, epoch int32, checkEpoch bool, cfg consumer.Config) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		recs, timers := m.Consumer.Fence(group, member, epoch, checkEpoch)
		applyConsumerTimers(c, timers, cfg)
		if len(recs) > 0 {
			recs = m.consumerDowngrade(c, group, []string{member}, recs, nil)
		}
		return runtime.Result{Records: recs}
	}
}

// ConsumerOnLoaded re-arms the consumer group timers of a freshly loaded shard.
func ConsumerOnLoaded(c *runtime.Ctx[*Machine], m *Machine, cfg consumer.Config) {
	for _, a := range m.Consumer.LoadedTimers(func(group string) consumer.Config { return m.consumerConfigFor(group, cfg) }) {
		applyConsumerTimers(c, []consumer.TimerAction{a}, m.consumerConfigFor(a.Group, cfg))
	}
}

// cancelConsumerGroupTimers cancels the timers of every member of a group about to be deleted.
func (m *Machine) cancelConsumerGroupTimers(c *runtime.Ctx[*Machine], group string) {
	if g := m.Consumer.Groups[group]; g != nil {
		for id := range g.Members {
			for _, kind := range []consumer.TimerKind{consumer.SessionTimer, consumer.RebalanceTimer, consumer.SyncTimer, consumer.JoinTimer} {
				c.Cancel(consumer.TimerKey(kind, group, id))
			}
		}
	}
}

// ListConsumerGroups lists the consumer groups of a shard from durable state for ListGroups:
// protocol type and group type "consumer", Kafka's state names.
func ListConsumerGroups(states, types []string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		var out []GroupListing
		for _, id := range m.Consumer.GroupIDs() {
			st := m.Consumer.ListedState(id)
			if matchListFilter(states, st) && matchListFilter(types, "consumer") {
				out = append(out, GroupListing{ID: id, ProtocolType: "consumer", State: st, Type: "consumer"})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, nil
	}
}

// IsConsumerGroup reports whether a consumer group has the id.
func IsConsumerGroup(group string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) { return m.Consumer.Owns(group), nil }
}

// DeleteConsumerGroup is DeleteGroups for a group id no classic group has: an empty consumer
// group is deleted with its offsets; NON_EMPTY_GROUP otherwise; GROUP_ID_NOT_FOUND when no
// consumer group has the id.
func DeleteConsumerGroup(group string) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		code, tombs := m.Consumer.DeleteGroup(group)
		if code != 0 {
			return runtime.Result{Response: code}
		}
		m.cancelConsumerGroupTimers(c, group)
		var d divisible
		d.each(m.Offsets.DeleteGroupRecords(group)...)
		d.whole(tombs...)
		return runtime.Result{Records: d.recs, Units: d.units, Response: int16(0)}
	}
}

// ValidateConsumerFetch checks an OffsetFetch v9+'s member id and epoch against a consumer
// group; 0 for ids no consumer group has.
func ValidateConsumerFetch(group string, member *string, epoch int32) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		code, _ := m.Consumer.ValidateFetch(group, member, epoch)
		return code, nil
	}
}

func (m *Machine) validateConsumerCommit(r CommitRequest) (int16, bool) {
	return m.Consumer.ValidateCommit(r.Group, r.MemberID, r.InstanceID, r.Generation, r.Version, r.Transactional)
}

// consumerOffsetRules: OffsetDelete refuses partitions of subscribed topics while the group
// has members; offsets expire from their commit time only while it is empty, and an empty
// group without offsets is deleted by the sweep.
func (m *Machine) consumerOffsetRules(groupID string) (OffsetRules, bool) {
	if !m.Consumer.Owns(groupID) {
		return OffsetRules{}, false
	}
	empty := m.Consumer.IsEmpty(groupID)
	r := OffsetRules{Empty: empty, Subscribed: func(topic string) bool { return m.Consumer.Subscribed(groupID, topic) }}
	if empty {
		r.ExpireBase = commitTimeBase
		r.DeleteRecords = func() []log.Record { return m.Consumer.Tombstones(groupID) }
	}
	return r, true
}

// ConsumerConversion serves a classic JoinGroup on a consumer group id: an empty consumer
// group gives way (its records deleted, offsets kept, in the same batch as the new classic
// group); a non-empty one refuses (INCONSISTENT_GROUP_PROTOCOL for the caller). owned is
// false when no consumer group has the id.
func (m *Machine) ConsumerConversion(c *runtime.Ctx[*Machine], group string) (owned, empty bool, recs []log.Record) {
	if !m.Consumer.Owns(group) {
		return false, false, nil
	}
	if !m.Consumer.IsEmpty(group) {
		return true, false, nil
	}
	m.cancelConsumerGroupTimers(c, group)
	return true, true, m.Consumer.Tombstones(group)
}

// consumerClassicLeave is a classic LeaveGroup addressed to a consumer group: Kafka 4.4 removes
// the named members whatever protocol they use (the admin client's removeMembersFromConsumerGroup).
func (m *Machine) consumerClassicLeave(c *runtime.Ctx[*Machine], group string, members []classic.LeaveMember) runtime.Result {
	ids := make([]consumer.LeaveIdentity, len(members))
	for i, lm := range members {
		ids[i] = consumer.LeaveIdentity{MemberID: lm.MemberID, InstanceID: lm.InstanceID}
	}
	codes, resolved, recs, timers := m.Consumer.Leave(group, ids)
	for _, a := range timers {
		c.Cancel(a.Key())
	}
	var gone []string
	for i, code := range codes {
		if code == 0 {
			gone = append(gone, resolved[i])
		}
	}
	if len(gone) > 0 {
		recs = m.consumerDowngrade(c, group, gone, recs, nil)
	}
	return runtime.Result{Records: recs, Response: LeaveResult{Members: codes, MemberIDs: resolved}}
}
