package consumer

import (
	"container/heap"
	"slices"
	"sort"
)

// space numbers every partition of the subscribed topics 0..total-1, topic by topic in topic id
// order, so that the assignors work on int32 slices instead of sets of TP: the cost of a large
// group is then a pass over each member's previous set plus slices, and a member whose
// previous set survives whole gets that very set back (sets are immutable), as Kafka's
// UniformHomogeneousAssignmentBuilder keeps an unaltered assignment without copying it.
type space struct {
	ids    [][16]byte         // subscribed topics, ascending
	pos    map[[16]byte]int32 // topic id -> index in ids
	off    []int32            // first global index of each topic; off[len(ids)] = total
	total  int32
	owner  []int32 // global index -> member index + 1, 0 while free
	fresh  [][]int32
	member []spaceMember
}

type spaceMember struct {
	id     string
	topics []int32 // indexes into ids, ascending
	prevIn Parts
	prev   []int32 // valid previous partitions as global indexes
}

// newSpace builds the index space for the members' subscriptions; members must be sorted by id.
// homogeneous reports whether every member subscribes to the same existing topics.
func newSpace(in AssignInput) (sp *space, homogeneous bool) {
	all := make([][16]byte, 0, len(in.Topics))
	for id := range in.Topics {
		all = append(all, id)
	}
	slices.SortFunc(all, topicCmp)
	allPos := make(map[[16]byte]int32, len(all))
	for i, id := range all {
		allPos[id] = int32(i)
	}
	ms := make([]spaceMember, len(in.Members))
	used := make([]bool, len(all))
	homogeneous = true
	// Members built from one subscription share its slice: each is resolved once.
	type shared struct {
		first *[16]byte
		n     int
	}
	seen := map[shared][]int32{}
	for i, m := range in.Members {
		ms[i] = spaceMember{id: m.ID, prevIn: m.Previous}
		var k shared
		if len(m.Topics) > 0 {
			k = shared{&m.Topics[0], len(m.Topics)}
		}
		if ts, ok := seen[k]; ok {
			ms[i].topics = ts
			if homogeneous && i > 0 && !slices.Equal(ts, ms[0].topics) {
				homogeneous = false
			}
			continue
		}
		ts := make([]int32, 0, len(m.Topics))
		for _, t := range m.Topics {
			if p, ok := allPos[t]; ok {
				ts = append(ts, p)
				used[p] = true
			}
		}
		slices.Sort(ts)
		ms[i].topics = slices.Compact(ts)
		seen[k] = ms[i].topics
		if i > 0 && !slices.Equal(ms[i].topics, ms[0].topics) {
			homogeneous = false
		}
	}
	sp = &space{pos: make(map[[16]byte]int32, len(all)), member: ms}
	remap := make([]int32, len(all))
	for i, id := range all {
		if !used[i] {
			continue
		}
		remap[i] = int32(len(sp.ids))
		sp.pos[id] = int32(len(sp.ids))
		sp.ids = append(sp.ids, id)
		sp.off = append(sp.off, sp.total)
		sp.total += max(in.Topics[id], 0)
	}
	sp.off = append(sp.off, sp.total)
	for _, ts := range seen {
		for k, p := range ts {
			ts[k] = remap[p]
		}
	}
	sp.owner = make([]int32, sp.total)
	sp.fresh = make([][]int32, len(ms))
	for i := range ms {
		sp.member[i].prev = sp.previous(&ms[i], homogeneous)
	}
	return sp, homogeneous
}

// previous turns a member's previous set into global indexes, dropping partitions of topics it
// no longer subscribes to or that no longer exist.
func (sp *space) previous(m *spaceMember, homogeneous bool) []int32 {
	if len(m.prevIn) == 0 {
		return nil
	}
	out := make([]int32, 0, len(m.prevIn))
	var lastTopic [16]byte
	lastPos := int32(-1)
	for tp := range m.prevIn {
		p := lastPos
		if p < 0 || tp.Topic != lastTopic {
			q, ok := sp.pos[tp.Topic]
			if !ok {
				continue
			}
			p, lastTopic, lastPos = q, tp.Topic, q
		}
		if !homogeneous {
			if _, ok := slices.BinarySearch(m.topics, p); !ok {
				continue
			}
		}
		if tp.Partition >= 0 && tp.Partition < sp.off[p+1]-sp.off[p] {
			out = append(out, sp.off[p]+tp.Partition)
		}
	}
	return out
}

func (sp *space) tp(at int32) TP {
	t := sort.Search(len(sp.ids), func(i int) bool { return sp.off[i+1] > at })
	return TP{Topic: sp.ids[t], Partition: at - sp.off[t]}
}

// balance hands the partitions [base, base+n) to the members ms (indexes, in id order) so that
// counts differ by at most one, previous owners first: every member keeps up to the floor quota
// of what it had (segs[k], its previous partitions in the range), members that had more keep one
// more while the remainder lasts, and the rest fills the members in id order, so fresh shares
// are contiguous.
func (sp *space) balance(base, n int32, ms []int32, segs [][]int32, cnt []int32, extraTaken []bool) {
	if len(ms) == 0 || n == 0 {
		return
	}
	lo, extra := n/int32(len(ms)), n%int32(len(ms))
	for k := range ms {
		cnt[k], extraTaken[k] = 0, false
	}
	for k, m := range ms {
		if lo == 0 {
			break // many members, few partitions (range over a large group): nobody keeps by quota
		}
		seg := segs[k]
		if int32(len(seg)) > lo {
			slices.Sort(seg) // which ones stay must not depend on map order
		}
		for _, at := range seg {
			if cnt[k] >= lo {
				break
			}
			if sp.owner[at] == 0 {
				sp.owner[at] = m + 1
				cnt[k]++
			}
		}
	}
	for k, m := range ms {
		if extra == 0 {
			break
		}
		if cnt[k] != lo || int32(len(segs[k])) <= lo {
			continue
		}
		for _, at := range segs[k] {
			if sp.owner[at] == 0 {
				sp.owner[at] = m + 1
				cnt[k]++
				extraTaken[k] = true
				extra--
				break
			}
		}
	}
	next, end := base, base+n
	for k, m := range ms {
		if lo == 0 && extra == 0 {
			break // the rest have their quota: nothing, or the extra they kept
		}
		quota := lo
		if extraTaken[k] {
			quota++
		} else if extra > 0 {
			quota++
			extra--
		}
		for cnt[k] < quota {
			for next < end && sp.owner[next] != 0 {
				next++
			}
			if next == end {
				return
			}
			sp.owner[next] = m + 1
			sp.fresh[m] = append(sp.fresh[m], next)
			cnt[k]++
		}
	}
}

// result gives each member its new set: the previous one itself when it survived whole.
func (sp *space) result() map[string]Parts {
	out := make(map[string]Parts, len(sp.member))
	for i := range sp.member {
		m := &sp.member[i]
		kept := 0
		for _, at := range m.prev {
			if sp.owner[at] == int32(i)+1 {
				kept++
			}
		}
		if len(sp.fresh[i]) == 0 && kept == len(m.prevIn) && m.prevIn != nil {
			out[m.id] = m.prevIn
			continue
		}
		got := make(Parts, kept+len(sp.fresh[i]))
		for _, at := range m.prev {
			if sp.owner[at] == int32(i)+1 {
				got[sp.tp(at)] = struct{}{}
			}
		}
		for _, at := range sp.fresh[i] {
			got[sp.tp(at)] = struct{}{}
		}
		out[m.id] = got
	}
	return out
}

// heterogeneous assigns when subscriptions differ: members keep their valid previous
// partitions, each free partition (topics with the fewest subscribers first) goes to the least
// loaded member subscribed to its topic, and partitions then move to a less loaded subscriber
// while that narrows the spread by two or more (each move lowers the sum of squared counts, so
// this ends). "Least loaded" ties go to the smaller member id. Members with the same topics form
// a class with a heap on (count, id), so finding the least loaded subscriber costs a look at
// each class subscribing to the topic rather than a walk over the members.
func (sp *space) heterogeneous() {
	n := len(sp.member)
	cnt := make([]int32, n)
	prevOf := make([]int32, sp.total)
	for i := range sp.member {
		for _, at := range sp.member[i].prev {
			if sp.owner[at] == 0 {
				sp.owner[at], prevOf[at] = int32(i)+1, int32(i)+1
				cnt[i]++
			}
		}
	}
	classOf := make([]int32, n)
	pos := make([]int, n) // each member sits in one class heap
	var classes []*loadHeap
	byKey := map[string]int32{}
	key := make([]byte, 0, 64)
	for i := range sp.member {
		key = key[:0]
		for _, t := range sp.member[i].topics {
			key = append(key, byte(t), byte(t>>8), byte(t>>16), byte(t>>24))
		}
		c, ok := byKey[string(key)]
		if !ok {
			c = int32(len(classes))
			byKey[string(key)] = c
			classes = append(classes, &loadHeap{cnt: cnt, pos: pos})
		}
		classOf[i] = c
		classes[c].push(int32(i))
	}
	elig := make([][]int32, len(sp.ids)) // topic -> classes subscribing to it
	subscribers := make([]int, len(sp.ids))
	for c, h := range classes {
		for _, t := range sp.member[h.ms[0]].topics {
			elig[t] = append(elig[t], int32(c))
			subscribers[t] += len(h.ms)
		}
	}
	least := func(t int32) int32 {
		best := int32(-1)
		for _, c := range elig[t] {
			m := classes[c].ms[0]
			if best < 0 || cnt[m] < cnt[best] || (cnt[m] == cnt[best] && m < best) {
				best = m
			}
		}
		return best
	}
	bump := func(m, by int32) {
		cnt[m] += by
		classes[classOf[m]].fix(m)
	}
	order := make([]int32, len(sp.ids))
	for t := range order {
		order[t] = int32(t)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return subscribers[a] - subscribers[b] })
	for _, t := range order {
		for at := sp.off[t]; at < sp.off[t+1]; at++ {
			if sp.owner[at] == 0 {
				m := least(t)
				sp.owner[at] = m + 1
				bump(m, 1)
			}
		}
	}
	for moved := true; moved && countSpread(cnt) > 1; { // a move needs counts two apart
		moved = false
		for t := range sp.ids {
			for at := sp.off[t]; at < sp.off[t+1]; at++ {
				from, to := sp.owner[at]-1, least(int32(t))
				if cnt[from]-cnt[to] > 1 {
					sp.owner[at] = to + 1
					bump(from, -1)
					bump(to, 1)
					moved = true
				}
			}
		}
	}
	for at, o := range sp.owner {
		if o != 0 && o != prevOf[at] {
			sp.fresh[o-1] = append(sp.fresh[o-1], int32(at))
		}
	}
}

// loadHeap is a min-heap of member indexes on (count, index).
type loadHeap struct {
	ms  []int32
	cnt []int32
	pos []int
}

func (h *loadHeap) Len() int { return len(h.ms) }
func (h *loadHeap) Less(i, j int) bool {
	a, b := h.ms[i], h.ms[j]
	return h.cnt[a] < h.cnt[b] || (h.cnt[a] == h.cnt[b] && a < b)
}
func (h *loadHeap) Swap(i, j int) {
	h.ms[i], h.ms[j] = h.ms[j], h.ms[i]
	h.pos[h.ms[i]], h.pos[h.ms[j]] = i, j
}
func (h *loadHeap) Push(x any)   { h.pos[x.(int32)] = len(h.ms); h.ms = append(h.ms, x.(int32)) }
func (h *loadHeap) Pop() any     { x := h.ms[len(h.ms)-1]; h.ms = h.ms[:len(h.ms)-1]; return x }
func (h *loadHeap) push(m int32) { heap.Push(h, m) }
func (h *loadHeap) fix(m int32)  { heap.Fix(h, h.pos[m]) }

func countSpread(cnt []int32) int32 {
	lo, hi := cnt[0], cnt[0]
	for _, c := range cnt {
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi - lo
}
