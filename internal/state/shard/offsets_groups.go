package shard

// What the offsets code needs to know about a group from the group type that owns it, for
// OffsetDelete (spec coordinator-apis §3.4) and retention (§3.5). Each group type (classic,
// consumer, streams) adds one entry to offsetGroupTypes; a group id no type owns is a simple
// group, known only by its offsets (simpleOffsetRules).

import (
	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log"
)

// OffsetRules is a group type's answer about one group it owns.
type OffsetRules struct {
	// Dead: the group is being removed; OffsetDelete answers GROUP_ID_NOT_FOUND.
	Dead bool
	// NonEmpty: the group has members whose subscriptions the server cannot read (a classic
	// group in Stable, PreparingRebalance or CompletingRebalance whose protocol type is not
	// "consumer"); OffsetDelete answers NON_EMPTY_GROUP.
	NonEmpty bool
	// Subscribed reports whether the group is subscribed to a topic: OffsetDelete answers
	// GROUP_SUBSCRIBED_TO_TOPIC for its partitions and retention never expires them. Nil:
	// subscribed to nothing.
	Subscribed func(topic string) bool
	// ExpireBase is the time an offset without an explicit expire timestamp counts its
	// retention from (classic Empty: when the group became Empty, falling back to the commit
	// time; consumer-protocol classic Stable, KIP-848 and streams groups: the commit time).
	// Nil: no offset of the group expires in its current state (any other classic state).
	ExpireBase func(offsets.Committed) int64
	// Empty: the group has no members. Only an Empty group is deleted by the retention sweep,
	// once none of its offsets and no open transaction remain.
	Empty bool
	// DeleteRecords returns the records that delete the group itself (its type's tombstones);
	// the sweep appends them in the same batch as the last offsets' tombstones. Nil: nothing
	// besides the offsets to delete.
	DeleteRecords func() []log.Record
}

// offsetGroupType is one group type's hook.
type offsetGroupType struct {
	// rules answers for a group id the type owns; owned is false for any other id.
	rules func(groupID string) (r OffsetRules, owned bool)
	// groups lists every group id the type owns, so that the sweep also visits (and may
	// delete) Empty groups that have no offsets at all.
	groups func() []string
}

// offsetGroupTypes lists the group types in the order they are asked. Group types add their
// entry here, e.g. {rules: m.Classic.OffsetRules, groups: m.Classic.GroupIDs}.
func (m *Machine) offsetGroupTypes() []offsetGroupType {
	return []offsetGroupType{{rules: m.classicOffsetRules, groups: m.Classic.Groups}, {rules: m.streamsOffsetRules, groups: m.StreamsGroups},
		{rules: m.consumerOffsetRules, groups: m.Consumer.GroupIDs}}
}

// commitTimeBase counts retention from the commit time.
func commitTimeBase(c offsets.Committed) int64 { return c.CommitTimestamp }

// simpleOffsetRules are those of a simple group: no members, no subscriptions, retention from
// the commit time; the group is gone when its offsets are.
var simpleOffsetRules = OffsetRules{ExpireBase: commitTimeBase, Empty: true}

// offsetRules returns the rules for a group and whether the group exists at all.
func (m *Machine) offsetRules(groupID string) (OffsetRules, bool) {
	for _, t := range m.offsetGroupTypes() {
		if r, owned := t.rules(groupID); owned {
			return r, true
		}
	}
	if m.Offsets.HasGroup(groupID) {
		return simpleOffsetRules, true
	}
	return OffsetRules{}, false
}
