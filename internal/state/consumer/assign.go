package consumer

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
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

type slot struct {
	id string
	// topics are the existing subscribed topics, sorted: a slice, not a set, because the
	// homogeneous case (the common one) only compares them and large groups build one per member.
	topics [][16]byte
	prev   Parts
	got    Parts
}

func topicCmp(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }

func (s *slot) subscribes(t [16]byte) bool {
	_, ok := slices.BinarySearchFunc(s.topics, t, topicCmp)
	return ok
}

func slots(in AssignInput) []*slot {
	out := make([]*slot, 0, len(in.Members))
	for _, m := range in.Members {
		s := &slot{id: m.ID, prev: m.Previous, got: Parts{}}
		for _, t := range m.Topics {
			if _, ok := in.Topics[t]; ok {
				s.topics = append(s.topics, t)
			}
		}
		slices.SortFunc(s.topics, topicCmp)
		s.topics = slices.Compact(s.topics)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func result(ss []*slot) map[string]Parts {
	out := make(map[string]Parts, len(ss))
	for _, s := range ss {
		out[s.id] = s.got
	}
	return out
}

func topicIDs(topics map[[16]byte]int32) [][16]byte {
	ids := make([][16]byte, 0, len(topics))
	for id := range topics {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	return ids
}

// balanced gives parts (sorted) to members so that counts differ by at most one, keeping
// previous owners first: every member keeps up to the floor quota of what it had, members that
// had more keep one more while the remainder lasts, and the rest fills the members in id order.
// Partitions are handled by their index in parts, so the work beyond reading each member's
// previous set is slices, not maps.
func balanced(parts []TP, ms []*slot) {
	if len(ms) == 0 || len(parts) == 0 {
		return
	}
	lo, extra := len(parts)/len(ms), len(parts)%len(ms)
	index := make(map[TP]int32, len(parts))
	for i, tp := range parts {
		index[tp] = int32(i)
	}
	taken := make([]bool, len(parts))
	count := make([]int, len(ms))
	give := func(i int, s *slot, at int32) {
		taken[at] = true
		count[i]++
		s.got[parts[at]] = struct{}{}
	}
	prevs := make([][]int32, len(ms))
	for i, s := range ms {
		l := make([]int32, 0, len(s.prev))
		for tp := range s.prev {
			if at, ok := index[tp]; ok {
				l = append(l, at)
			}
		}
		slices.Sort(l)
		prevs[i] = l
		for _, at := range l {
			if count[i] >= lo {
				break
			}
			if !taken[at] {
				give(i, s, at)
			}
		}
	}
	hasExtra := make([]bool, len(ms))
	for i, s := range ms {
		if extra == 0 {
			break
		}
		if count[i] != lo {
			continue
		}
		for _, at := range prevs[i] {
			if !taken[at] {
				give(i, s, at)
				hasExtra[i] = true
				extra--
				break
			}
		}
	}
	// The remaining extras go to the first members (in id order) without one; each member is
	// then filled to its quota in turn, so fresh shares are contiguous.
	next := int32(0)
	for i, s := range ms {
		quota := lo
		if hasExtra[i] {
			quota++
		} else if extra > 0 {
			quota++
			extra--
		}
		for count[i] < quota {
			for next < int32(len(parts)) && taken[next] {
				next++
			}
			if next == int32(len(parts)) {
				return
			}
			give(i, s, next)
		}
	}
}

func tpLess(a, b TP) bool {
	if a.Topic != b.Topic {
		return string(a.Topic[:]) < string(b.Topic[:])
	}
	return a.Partition < b.Partition
}

func allParts(topics map[[16]byte]int32, ids [][16]byte) []TP {
	var out []TP
	for _, id := range ids {
		for p := int32(0); p < topics[id]; p++ {
			out = append(out, TP{Topic: id, Partition: p})
		}
	}
	return out
}

// uniform spreads all subscribed partitions evenly over the members. With identical
// subscriptions counts differ by at most one; otherwise each partition goes to the least
// loaded member subscribed to it and partitions then move while that narrows the spread.
func uniform(in AssignInput) map[string]Parts {
	ss := slots(in)
	if len(ss) == 0 {
		return map[string]Parts{}
	}
	subscribed := map[[16]byte]bool{}
	homogeneous := true
	for _, s := range ss {
		if !slices.Equal(s.topics, ss[0].topics) {
			homogeneous = false
			for _, t := range s.topics {
				subscribed[t] = true
			}
		}
	}
	for _, t := range ss[0].topics {
		subscribed[t] = true
	}
	sub := map[[16]byte]int32{}
	for t := range subscribed {
		sub[t] = in.Topics[t]
	}
	parts := allParts(sub, topicIDs(sub))
	if homogeneous {
		balanced(parts, ss)
		return result(ss)
	}
	owner := map[TP]*slot{}
	for _, s := range ss {
		for tp := range s.prev {
			if s.subscribes(tp.Topic) && tp.Partition < in.Topics[tp.Topic] && owner[tp] == nil {
				owner[tp] = s
				s.got[tp] = struct{}{}
			}
		}
	}
	eligible := func(t [16]byte) []*slot {
		var out []*slot
		for _, s := range ss {
			if s.subscribes(t) {
				out = append(out, s)
			}
		}
		return out
	}
	elig := map[[16]byte][]*slot{}
	for t := range sub {
		elig[t] = eligible(t)
	}
	least := func(l []*slot) *slot {
		var best *slot
		for _, s := range l {
			if best == nil || len(s.got) < len(best.got) {
				best = s
			}
		}
		return best
	}
	free := make([]TP, 0, len(parts))
	for _, tp := range parts {
		if owner[tp] == nil {
			free = append(free, tp)
		}
	}
	sort.SliceStable(free, func(i, j int) bool { return len(elig[free[i].Topic]) < len(elig[free[j].Topic]) })
	for _, tp := range free {
		s := least(elig[tp.Topic])
		owner[tp] = s
		s.got[tp] = struct{}{}
	}
	// Move partitions from a member to a less loaded one subscribed to the topic while that
	// narrows the spread by two or more; each move lowers the sum of squared counts, so this ends.
	for moved := true; moved; {
		moved = false
		for _, tp := range parts {
			from := owner[tp]
			to := least(elig[tp.Topic])
			if to != nil && len(from.got)-len(to.got) > 1 {
				delete(from.got, tp)
				to.got[tp] = struct{}{}
				owner[tp] = to
				moved = true
			}
		}
	}
	return result(ss)
}

// rangeAssign gives each member, topic by topic, a share of the topic's partitions among the
// members subscribed to it, counts differing by at most one; fresh shares are contiguous
// ranges in member id order.
func rangeAssign(in AssignInput) map[string]Parts {
	ss := slots(in)
	// Each member's previous partitions, split by topic once, so that a topic's share reads
	// only that topic's previous owners.
	byTopic := make([]map[[16]byte]Parts, len(ss))
	for i, s := range ss {
		byTopic[i] = map[[16]byte]Parts{}
		for tp := range s.prev {
			byTopic[i][tp.Topic] = byTopic[i][tp.Topic].add(tp)
		}
	}
	for _, t := range topicIDs(in.Topics) {
		var subs []*slot
		for i, s := range ss {
			if s.subscribes(t) {
				subs = append(subs, &slot{id: s.id, prev: byTopic[i][t], got: s.got})
			}
		}
		balanced(allParts(map[[16]byte]int32{t: in.Topics[t]}, [][16]byte{t}), subs)
	}
	return result(ss)
}
