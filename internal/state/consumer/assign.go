package consumer

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
)

// Server-side assignors (Kafka's UniformAssignor and RangeAssignor, group.consumer.assignors).
// uniform is sticky: a member keeps the partitions of its previous target as long as that keeps
// the assignment balanced, so a rebalance moves only what it must; range is Kafka 4.4's plain
// range. Neither reads racks: Kafka 4.4's server-side assignors do not (docs/consumer-groups.md).

// AssignMember is one member as an assignor sees it.
type AssignMember struct {
	ID string
	// InstanceID is the member's static instance id, empty when it has none: range orders
	// members by it.
	InstanceID string
	// Topics are the ids of the existing topics the member subscribes to.
	Topics []([16]byte)
	// Previous is the member's previous target assignment.
	Previous Parts
}

// AssignInput is a group's membership and the partition counts of its subscribed topics.
type AssignInput struct {
	Members []AssignMember
	Topics  map[[16]byte]int32
}

// Assign runs the named assignor. Every partition of a subscribed topic goes to exactly one
// member subscribed to it; members get an entry even when they get nothing.
func Assign(name string, in AssignInput) (map[string]Parts, error) {
	switch name {
	case "uniform":
		return uniform(in), nil
	case "range":
		return rangeAssign(in), nil
	}
	return nil, fmt.Errorf("unknown assignor %q", name)
}

func topicCmp(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }

// uniform spreads all subscribed partitions evenly over the members. With identical
// subscriptions counts differ by at most one; otherwise each partition goes to the least
// loaded member subscribed to it and partitions then move while that narrows the spread.
func uniform(in AssignInput) map[string]Parts {
	if len(in.Members) == 0 {
		return map[string]Parts{}
	}
	in.Members = sortedMembers(in.Members)
	sp, homogeneous := newSpace(in)
	if homogeneous {
		all := make([]int32, len(sp.member))
		segs := make([][]int32, len(sp.member))
		for i := range sp.member {
			all[i] = int32(i)
			segs[i] = sp.member[i].prev
		}
		sp.balance(0, sp.total, all, segs, make([]int32, len(all)), make([]bool, len(all)))
		return sp.result()
	}
	sp.heterogeneous()
	return sp.result()
}

func sortedMembers(ms []AssignMember) []AssignMember {
	less := func(a, b AssignMember) int { return cmp.Compare(a.ID, b.ID) }
	if slices.IsSortedFunc(ms, less) {
		return ms
	}
	ms = slices.Clone(ms)
	slices.SortFunc(ms, less)
	return ms
}

// rangeAssign is Kafka 4.4's RangeAssignor: members in order (those with an instance id first,
// by instance id, then the others by member id) take, topic by topic, the next contiguous range
// of the topic's partitions, a share of the topic's subscribers with the first P%n getting one
// more. It is not sticky: a member joining or leaving shifts the ranges of those after it, as
// on Kafka; with static members the order, and so the assignment, survives restarts.
func rangeAssign(in AssignInput) map[string]Parts {
	ms := slices.Clone(in.Members)
	slices.SortFunc(ms, func(a, b AssignMember) int {
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			return cmp.Compare(a.InstanceID, b.InstanceID)
		case a.InstanceID != "":
			return -1
		case b.InstanceID != "":
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	in.Members = ms
	sp, _ := newSpace(in)
	subscribers := make([]int32, len(sp.ids))
	for i := range sp.member {
		for _, t := range sp.member[i].topics {
			subscribers[t]++
		}
	}
	next := make([]int32, len(sp.ids))
	extra := make([]int32, len(sp.ids))
	for t := range sp.ids {
		if subscribers[t] > 0 {
			extra[t] = (sp.off[t+1] - sp.off[t]) % subscribers[t]
		}
	}
	out := make(map[string]Parts, len(sp.member))
	type span struct{ from, to int32 } // global indexes
	var spans []span
	for i := range sp.member {
		m := &sp.member[i]
		spans = spans[:0]
		total := 0
		for _, t := range m.topics {
			size := sp.off[t+1] - sp.off[t]
			q := size / subscribers[t]
			if extra[t] > 0 {
				q++
				extra[t]--
			}
			from := next[t]
			to := min(from+q, size)
			next[t] = to
			if to > from {
				spans = append(spans, span{sp.off[t] + from, sp.off[t] + to})
				total += int(to - from)
			}
		}
		// The same ranges as before give back the previous set itself.
		same := total == len(m.prevIn) && len(m.prev) == total
		for _, s := range spans {
			for at := s.from; at < s.to; at++ {
				sp.owner[at] = int32(i) + 1
			}
		}
		for _, at := range m.prev {
			if !same {
				break
			}
			same = sp.owner[at] == int32(i)+1
		}
		if same && m.prevIn != nil {
			out[m.id] = m.prevIn
			continue
		}
		got := make(Parts, total)
		for _, s := range spans {
			for at := s.from; at < s.to; at++ {
				got[sp.tp(at)] = struct{}{}
			}
		}
		out[m.id] = got
	}
	return out
}
