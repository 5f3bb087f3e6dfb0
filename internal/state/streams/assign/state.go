package assign

// The shared working state of the assignors: the input turned into dense integer indexes (tasks,
// members, processes) so that the passes of spec §6.3 run on slices and small heaps instead of
// maps and string comparisons. Task ids follow (subtopology id, partition) order: the tasks of the
// i-th subtopology (sorted by id) are base[i] … base[i]+Tasks-1.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Errors returned for input the assignors cannot work with. The coordinator maps any assignor
// error to UNKNOWN_SERVER_ERROR (spec §6.1).
var (
	ErrNoMembers    = errors.New("assign: no members to assign active tasks to")
	ErrInvalidInput = errors.New("assign: invalid input")
)

// state is one assignment computation.
type state struct {
	in Input

	// Topology.
	subs     []Subtopology // sorted by ID
	subIndex map[string]int32
	base     []int32 // first task id of each subtopology
	taskSub  []int32 // task id → subtopology index
	nTasks   int32
	nStatefl int32 // stateful task count

	// Members (sorted by ID) and processes (sorted by process ID).
	members    []*Member
	memberProc []int32
	count      []int64 // tasks (active + standby) assigned so far, per member
	pos        []int   // member's index in its process's heap
	procs      []process

	// Per task.
	prevActive []int32 // previous active owner (member index) or -1
	// Ranked standby candidates of task t: cands[candStart[t]:candStart[t+1]].
	candStart []int32
	cands     []int32
	owner     []int32   // assigned active owner or -1
	holders   [][]int32 // processes that hold the task in any role so far

	standbys []taskMember // standby assignments in assignment order

	act, all quota
}

type taskMember struct{ task, member int32 }

// process is the per-process bookkeeping of §6.3: its members (a min-heap by task count, then
// member index) and its total task count; load = tasks / len(members).
type process struct {
	id    string
	tasks int64
	heap  []int32 // member indexes
}

// quota is one running per-member quota: ceil(n / k), recomputed when a member reaches it.
type quota struct{ n, k, q int64 }

func newQuota(n, k int64) quota { return quota{n: n, k: k, q: ceilDiv(n, k)} }

// hit records that a member's count became c.
func (q *quota) hit(c int64) {
	if c == q.q {
		q.k--
		q.n -= c
		q.q = ceilDiv(q.n, q.k)
	}
}

func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	d := a / b
	if a%b > 0 {
		d++
	}
	return d
}

// newState validates and indexes the input. Members and subtopologies are sorted by ID here, so
// the result does not depend on the order the caller listed them in.
func newState(in Input, warmupsAsCandidates bool) (*state, error) {
	s := &state{in: in}
	s.subs = slices.Clone(in.Subtopologies)
	slices.SortFunc(s.subs, func(a, b Subtopology) int { return cmp.Compare(a.ID, b.ID) })
	s.subIndex = make(map[string]int32, len(s.subs))
	s.base = make([]int32, len(s.subs))
	var n int64
	for i, st := range s.subs {
		if _, dup := s.subIndex[st.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate subtopology %q", ErrInvalidInput, st.ID)
		}
		if st.Tasks < 0 {
			return nil, fmt.Errorf("%w: subtopology %q has %d tasks", ErrInvalidInput, st.ID, st.Tasks)
		}
		s.subIndex[st.ID] = int32(i)
		s.base[i] = int32(n)
		n += int64(st.Tasks)
		if n > 1<<30 {
			return nil, fmt.Errorf("%w: too many tasks", ErrInvalidInput)
		}
		if st.Stateful {
			s.nStatefl += st.Tasks
		}
	}
	s.nTasks = int32(n)
	s.taskSub = make([]int32, n)
	for i, st := range s.subs {
		for p := int32(0); p < st.Tasks; p++ {
			s.taskSub[s.base[i]+p] = int32(i)
		}
	}

	s.members = make([]*Member, len(in.Members))
	for i := range in.Members {
		s.members[i] = &in.Members[i]
	}
	slices.SortFunc(s.members, func(a, b *Member) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(s.members); i++ {
		if s.members[i].ID == s.members[i-1].ID {
			return nil, fmt.Errorf("%w: duplicate member %q", ErrInvalidInput, s.members[i].ID)
		}
	}
	if len(s.members) == 0 && s.nTasks > 0 {
		return nil, ErrNoMembers
	}

	// Processes sorted by id; each member's index into procs.
	pids := make([]string, len(s.members))
	for i, m := range s.members {
		pids[i] = m.ProcessID
	}
	slices.Sort(pids)
	pids = slices.Compact(pids)
	s.procs = make([]process, len(pids))
	for i, id := range pids {
		s.procs[i].id = id
	}
	s.memberProc = make([]int32, len(s.members))
	s.count = make([]int64, len(s.members))
	s.pos = make([]int, len(s.members))
	for i, m := range s.members {
		p, _ := slices.BinarySearch(pids, m.ProcessID)
		s.memberProc[i] = int32(p)
		s.pos[i] = len(s.procs[p].heap)
		s.procs[p].heap = append(s.procs[p].heap, int32(i)) // ascending index, all counts 0: a valid heap
	}

	s.prevActive = make([]int32, n)
	s.owner = make([]int32, n)
	for t := range s.prevActive {
		s.prevActive[t] = -1
		s.owner[t] = -1
	}
	// Previous active owners: if two members claim a task, the one later in member-id order wins
	// (Kafka: the last one seen in its unordered member map).
	for i, m := range s.members {
		s.eachTask(m.Active, func(t int32) { s.prevActive[t] = int32(i) })
	}
	s.buildCandidates(warmupsAsCandidates)

	// Holders: a process holds a task at most once, so a task has at most 1 + min(r, P-1) holders.
	r := int64(max(in.Configs.NumStandbyReplicas, 0))
	per := 1 + min(r, int64(max(len(s.procs)-1, 0)))
	backing := make([]int32, 0, int64(n)*per)
	s.holders = make([][]int32, n)
	for t := range s.holders {
		s.holders[t] = backing[int64(t)*per : int64(t)*per : int64(t+1)*per]
	}

	k := int64(len(s.members))
	nAll := n + int64(s.nStatefl)*r
	s.act = newQuota(n, k)
	s.all = newQuota(nAll, k)
	return s, nil
}

// taskID resolves a task of the input; ok is false for tasks outside the topology.
func (s *state) taskID(sub string, p int32) (int32, bool) {
	i, ok := s.subIndex[sub]
	if !ok || p < 0 || p >= s.subs[i].Tasks {
		return 0, false
	}
	return s.base[i] + p, true
}

// task is the inverse of taskID.
func (s *state) task(t int32) Task {
	i := s.taskSub[t]
	return Task{Subtopology: s.subs[i].ID, Partition: t - s.base[i]}
}

func (s *state) partition(t int32) int32 { return t - s.base[s.taskSub[t]] }

func (s *state) stateful(t int32) bool { return s.subs[s.taskSub[t]].Stateful }

// eachTask calls fn for every task of ts that exists in the topology.
func (s *state) eachTask(ts TaskSet, fn func(t int32)) {
	for sub, parts := range ts {
		i, ok := s.subIndex[sub]
		if !ok {
			continue
		}
		for _, p := range parts {
			if p >= 0 && p < s.subs[i].Tasks {
				fn(s.base[i] + p)
			}
		}
	}
}

type candidate struct {
	task, member int32
	standby      bool // holds the task as standby (or warm-up, when those count)
	offset       int64
}

// buildCandidates ranks the standby candidates of every task (spec §6.3 init step 4): members
// holding it as standby first, then members that only reported an offset for it; within each
// group the highest reported offset first; ties in member-id order.
func (s *state) buildCandidates(warmupsAsCandidates bool) {
	var list []candidate
	mark := make([]int32, s.nTasks) // mark[t] == i+1: member i holds t as standby (or warm-up)
	for i, m := range s.members {
		add := func(t int32) {
			mark[t] = int32(i) + 1
			list = append(list, candidate{task: t, member: int32(i), standby: true, offset: s.offset(m, t)})
		}
		s.eachTask(m.Standby, add)
		if warmupsAsCandidates {
			s.eachTask(m.Warmup, add)
		}
		for tk, off := range m.TaskOffsets {
			t, ok := s.taskID(tk.Subtopology, tk.Partition)
			if !ok || mark[t] == int32(i)+1 {
				continue
			}
			list = append(list, candidate{task: t, member: int32(i), offset: off})
		}
	}
	// Counting sort by task (stable: members stay in id order), then rank each task's few
	// candidates.
	s.candStart = make([]int32, s.nTasks+1)
	for _, c := range list {
		s.candStart[c.task+1]++
	}
	for t := int32(0); t < s.nTasks; t++ {
		s.candStart[t+1] += s.candStart[t]
	}
	sorted := make([]candidate, len(list))
	next := slices.Clone(s.candStart[:s.nTasks])
	for _, c := range list {
		sorted[next[c.task]] = c
		next[c.task]++
	}
	for t := int32(0); t < s.nTasks; t++ {
		seg := sorted[s.candStart[t]:s.candStart[t+1]]
		if len(seg) > 1 {
			slices.SortStableFunc(seg, func(a, b candidate) int {
				if a.standby != b.standby {
					if a.standby {
						return -1
					}
					return 1
				}
				return cmp.Compare(b.offset, a.offset)
			})
		}
	}
	list = sorted
	clear(s.candStart)
	s.cands = make([]int32, 0, len(list))
	prevT, prevM := int32(-1), int32(-1)
	for _, c := range list {
		if c.task == prevT && c.member == prevM {
			// A member listed twice for a task (standby and warm-up, or a duplicate partition):
			// the entries are adjacent after the sort; keep the first.
			continue
		}
		prevT, prevM = c.task, c.member
		s.cands = append(s.cands, c.member)
		s.candStart[c.task+1]++
	}
	for t := int32(0); t < s.nTasks; t++ {
		s.candStart[t+1] += s.candStart[t]
	}
}

func (s *state) offset(m *Member, t int32) int64 {
	if len(m.TaskOffsets) == 0 {
		return 0
	}
	return m.TaskOffsets[s.task(t)]
}

func (s *state) candidates(t int32) []int32 { return s.cands[s.candStart[t]:s.candStart[t+1]] }

// holds reports whether process p holds task t in any role.
func (s *state) holds(p, t int32) bool { return slices.Contains(s.holders[t], p) }

// loadLess compares the loads tasks/members of two processes exactly (Kafka compares doubles; the
// order is the same for the integer sizes involved).
func (s *state) loadLess(a, b int32) bool {
	pa, pb := &s.procs[a], &s.procs[b]
	return pa.tasks*int64(len(pb.heap)) < pb.tasks*int64(len(pa.heap))
}

// procLess orders processes by load, then by process id (Kafka: heap order, unspecified).
func (s *state) procLess(a, b int32) bool {
	if s.loadLess(a, b) {
		return true
	}
	if s.loadLess(b, a) {
		return false
	}
	return a < b
}

// memberLess orders members by task count, then by member id (Kafka: unspecified).
func (s *state) memberLess(a, b int32) bool {
	if s.count[a] != s.count[b] {
		return s.count[a] < s.count[b]
	}
	return a < b
}

// add gives task t to member m and returns m's new count.
func (s *state) add(t, m int32, active bool) int64 {
	p := s.memberProc[m]
	s.holders[t] = append(s.holders[t], p)
	if active {
		s.owner[t] = m
	} else {
		s.standbys = append(s.standbys, taskMember{t, m})
	}
	s.count[m]++
	s.procs[p].tasks++
	s.fixMember(p, m)
	return s.count[m]
}

func (s *state) addActive(t, m int32) {
	c := s.add(t, m, true)
	s.act.hit(c)
	s.all.hit(c)
}

func (s *state) addStandby(t, m int32) {
	c := s.add(t, m, false)
	s.all.hit(c)
}

// fixMember restores process p's member heap after m's count grew (sift down).
func (s *state) fixMember(p, m int32) {
	h := s.procs[p].heap
	if len(h) == 1 {
		return
	}
	i := s.pos[m]
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && s.memberLess(h[r], h[l]) {
			c = r
		}
		if !s.memberLess(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		s.pos[h[i]], s.pos[h[c]] = i, c
		i = c
	}
}

// leastMember is the member of process p with the fewest tasks.
func (s *state) leastMember(p int32) int32 { return s.procs[p].heap[0] }

// pickCandidate scans the ranked candidates of t (spec §6.3 active step 3 / standby step 2b): the
// first one, replaced by a later one only if both its process load and its own count are strictly
// smaller; with skipHolders, candidates whose process already holds t are skipped. -1 if none.
func (s *state) pickCandidate(t int32, skipHolders bool) int32 {
	pick := int32(-1)
	for _, m := range s.candidates(t) {
		p := s.memberProc[m]
		if skipHolders && s.holds(p, t) {
			continue
		}
		if pick < 0 || (s.loadLess(p, s.memberProc[pick]) && s.count[m] < s.count[pick]) {
			pick = m
		}
	}
	return pick
}
