package consumer

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
)

// Server-side assignors (Kafka's UniformAssignor and RangeAssignor, group.consumer.assignors).
// Both are sticky: a member keeps the partitions of its previous target as long as that keeps
// the assignment balanced, so a rebalance moves only what it must. Rack awareness is not
// implemented (docs/consumer-groups.md).

// AssignMember is one member as an assignor sees it.
type AssignMember struct {
	ID string
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

// rangeAssign gives each member, topic by topic, a share of the topic's partitions among the
// members subscribed to it, counts differing by at most one; fresh shares are contiguous
// ranges in member id order.
func rangeAssign(in AssignInput) map[string]Parts {
	in.Members = sortedMembers(in.Members)
	sp, _ := newSpace(in)
	n := len(sp.member)
	// Each member's previous partitions ascending are grouped by topic (global indexes run topic
	// by topic), so a cursor per member walks its share of each topic in turn.
	cur := make([]int, n)
	tcur := make([]int, n)
	for i := range sp.member {
		slices.Sort(sp.member[i].prev)
	}
	subs := make([]int32, 0, n)
	segs := make([][]int32, 0, n)
	cnt, extra := make([]int32, n), make([]bool, n)
	for t := range sp.ids {
		subs, segs = subs[:0], segs[:0]
		end := sp.off[t+1]
		for i := range sp.member {
			m := &sp.member[i]
			for tcur[i] < len(m.topics) && m.topics[tcur[i]] < int32(t) {
				tcur[i]++
			}
			if tcur[i] == len(m.topics) || m.topics[tcur[i]] != int32(t) {
				continue
			}
			from := cur[i]
			for cur[i] < len(m.prev) && m.prev[cur[i]] < end {
				cur[i]++
			}
			subs = append(subs, int32(i))
			segs = append(segs, m.prev[from:cur[i]])
		}
		sp.balance(sp.off[t], end-sp.off[t], subs, segs, cnt, extra)
	}
	return sp.result()
}
