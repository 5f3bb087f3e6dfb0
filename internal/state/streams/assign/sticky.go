package assign

import "slices"

// Sticky is Apache Kafka 4.4's sticky task assignor (spec streams-groups §6.3): actives balanced per
// member and kept on their previous owner (else on a member holding the task as standby or
// reporting state for it) while that member is below the running quota; standbys on other
// processes than the active and each other; no warm-up tasks.
//
// Where Kafka breaks ties by heap order (unspecified, spec §6.4), this implementation is
// deterministic: equally loaded processes in process-id order, members of a process with equal
// task counts in member-id order, equally ranked standby candidates in member-id order, and of
// two members claiming the same active task the later in member-id order is its previous owner.
type Sticky struct{}

// StickyName is the name of the sticky assignor, the default (spec §6.2).
const StickyName = "sticky"

// Name implements Assignor.
func (Sticky) Name() string { return StickyName }

// Assign implements Assignor.
func (Sticky) Assign(in Input) (Output, error) {
	s, err := newState(in, false)
	if err != nil {
		return nil, err
	}
	s.assignActives(s.prevActive, nil)
	s.assignStandbys()
	return s.build(s.owner, s.standbys, nil), nil
}

// assignActives is the active phase of §6.3; prev gives each task's previous active owner. The
// highavailability assignor passes a second choice, alt, tried in the sticky pass when prev[t] is
// at its quota (nil for Kafka's behaviour).
func (s *state) assignActives(prev, alt []int32) {
	order := s.byPartition(false)
	// Sticky pass: previous owner while below the active quota.
	rest := order[:0]
	for _, t := range order {
		if m := prev[t]; m >= 0 && s.count[m] < s.act.q {
			s.addActive(t, m)
			continue
		}
		if alt != nil {
			if m := alt[t]; m >= 0 && m != prev[t] && s.count[m] < s.act.q {
				s.addActive(t, m)
				continue
			}
		}
		rest = append(rest, t)
	}
	// Standby pass: the picked candidate while below the active quota.
	left := rest[:0]
	for _, t := range rest {
		if m := s.pickCandidate(t, false); m >= 0 && s.count[m] < s.act.q {
			s.addActive(t, m)
			continue
		}
		left = append(left, t)
	}
	// The rest in (subtopology id, partition) order, i.e. task-id order, to the least loaded process.
	slices.Sort(left)
	if len(left) == 0 {
		return
	}
	h := s.newProcHeap()
	for _, t := range left {
		p := h.items[0]
		s.addActive(t, s.leastMember(p))
		h.down(0)
	}
}

// assignStandbys is the standby phase of §6.3.
func (s *state) assignStandbys() {
	r := int64(s.in.Configs.NumStandbyReplicas)
	if r <= 0 || s.nStatefl == 0 {
		return
	}
	// (partition, subtopology id), reversed.
	order := s.byPartition(true)
	slices.Reverse(order)

	// remaining[t] = standbys of t left for the fallback.
	var remaining []int64
	for _, t := range order {
		for i := int64(0); i < r; i++ {
			if m := s.prevActive[t]; m >= 0 && !s.holds(s.memberProc[m], t) && s.count[m] < s.all.q {
				s.addStandby(t, m)
				continue
			}
			if m := s.pickCandidate(t, true); m >= 0 && s.count[m] < s.all.q {
				s.addStandby(t, m)
				continue
			}
			if remaining == nil {
				remaining = make([]int64, s.nTasks)
			}
			remaining[t] = r - i
			break
		}
	}
	if remaining == nil {
		return
	}
	h := s.newProcHeap()
	var popped []int32
	// (subtopology id, partition) reversed = task ids descending.
	for t := s.nTasks - 1; t >= 0; t-- {
		for i := int64(0); i < remaining[t]; i++ {
			// The least loaded process that does not hold the task yet; the ones that do are
			// taken out and put back afterwards (at most 1 + r of them).
			popped = popped[:0]
			placed := false
			for len(h.items) > 0 {
				p := h.pop()
				popped = append(popped, p)
				if !s.holds(p, t) {
					s.addStandby(t, s.leastMember(p))
					placed = true
					break
				}
			}
			for _, p := range popped {
				h.push(p)
			}
			if !placed {
				break // not enough capacity: Kafka logs a warning and drops the replica
			}
		}
	}
}

// byPartition lists the tasks (only the stateful ones if statefulOnly) in (partition, subtopology
// id) order, by counting sort: within a partition, task ids are in subtopology order.
func (s *state) byPartition(statefulOnly bool) []int32 {
	var maxTasks int32
	for _, st := range s.subs {
		maxTasks = max(maxTasks, st.Tasks)
	}
	start := make([]int32, maxTasks+1)
	n := int32(0)
	for t := int32(0); t < s.nTasks; t++ {
		if !statefulOnly || s.stateful(t) {
			start[s.partition(t)+1]++
			n++
		}
	}
	for p := int32(0); p < maxTasks; p++ {
		start[p+1] += start[p]
	}
	order := make([]int32, n)
	for t := int32(0); t < s.nTasks; t++ {
		if !statefulOnly || s.stateful(t) {
			p := s.partition(t)
			order[start[p]] = t
			start[p]++
		}
	}
	return order
}

// procHeap is a min-heap of process indexes by (load, process id).
type procHeap struct {
	s     *state
	items []int32
}

func (s *state) newProcHeap() *procHeap {
	h := &procHeap{s: s, items: make([]int32, len(s.procs))}
	for i := range h.items {
		h.items[i] = int32(i)
	}
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return h
}

func (h *procHeap) down(i int) {
	it := h.items
	for {
		l := 2*i + 1
		if l >= len(it) {
			return
		}
		c := l
		if r := l + 1; r < len(it) && h.s.procLess(it[r], it[l]) {
			c = r
		}
		if !h.s.procLess(it[c], it[i]) {
			return
		}
		it[i], it[c] = it[c], it[i]
		i = c
	}
}

func (h *procHeap) up(i int) {
	it := h.items
	for i > 0 {
		p := (i - 1) / 2
		if !h.s.procLess(it[i], it[p]) {
			return
		}
		it[i], it[p] = it[p], it[i]
		i = p
	}
}

func (h *procHeap) pop() int32 {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

func (h *procHeap) push(p int32) {
	h.items = append(h.items, p)
	h.up(len(h.items) - 1)
}

// build turns per-task owners and (task, member) lists into the Output. Every member of the input
// gets an entry, with non-nil (possibly empty) task sets.
func (s *state) build(owner []int32, standby, warmup []taskMember) Output {
	active := make([]taskMember, 0, len(owner))
	for t, m := range owner {
		if m >= 0 {
			active = append(active, taskMember{int32(t), m})
		}
	}
	act := s.group(active)
	sb := s.group(standby)
	wu := s.group(warmup)
	out := make(Output, len(s.members))
	for i, m := range s.members {
		out[m.ID] = MemberAssignment{Active: act[i], Standby: sb[i], Warmup: wu[i]}
	}
	return out
}

// sortPairs orders pairs by (member, task) with two stable counting sorts (task, then member).
func (s *state) sortPairs(pairs []taskMember) []taskMember {
	if len(pairs) < 2 {
		return pairs
	}
	byTask := countingSort(pairs, int(s.nTasks), func(p taskMember) int32 { return p.task })
	return countingSort(byTask, len(s.members), func(p taskMember) int32 { return p.member })
}

// countingSort returns a copy of in stably ordered by key, whose values lie in [0, n).
func countingSort(in []taskMember, n int, key func(taskMember) int32) []taskMember {
	start := make([]int32, n+1)
	for _, p := range in {
		start[key(p)+1]++
	}
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	out := make([]taskMember, len(in))
	for _, p := range in {
		k := key(p)
		out[start[k]] = p
		start[k]++
	}
	return out
}

// group sorts pairs by (member, task) and returns each member's TaskSet; the partition slices
// share one backing array (capacity-limited, so appending to one never overwrites another).
func (s *state) group(pairs []taskMember) []TaskSet {
	pairs = s.sortPairs(pairs)
	sets := make([]TaskSet, len(s.members))
	for i := range sets {
		sets[i] = TaskSet{}
	}
	parts := make([]int32, len(pairs))
	for i, p := range pairs {
		parts[i] = s.partition(p.task)
	}
	for i := 0; i < len(pairs); {
		j := i + 1
		for j < len(pairs) && pairs[j].member == pairs[i].member && s.taskSub[pairs[j].task] == s.taskSub[pairs[i].task] {
			j++
		}
		sets[pairs[i].member][s.subs[s.taskSub[pairs[i].task]].ID] = parts[i:j:j]
		i = j
	}
	return sets
}
