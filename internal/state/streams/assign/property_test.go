package assign

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Property tests over random inputs with fixed seeds (reproducible: a failure names its seed).

var assignors = []Assignor{Sticky{}, HighAvailability{}}

const propertySeeds = 400

// genTopology draws 1–4 subtopologies of 0–12 tasks, each stateful or not.
func genTopology(r *rand.Rand) []Subtopology {
	n := 1 + r.IntN(4)
	subs := make([]Subtopology, n)
	for i := range subs {
		subs[i] = Subtopology{ID: fmt.Sprintf("s%d", i), Tasks: int32(r.IntN(13)), Stateful: r.IntN(3) > 0}
	}
	return subs
}

// genMembers draws 1–10 members on 1–6 processes with no tasks.
func genMembers(r *rand.Rand) []Member {
	procs := 1 + r.IntN(6)
	ms := make([]Member, 1+r.IntN(10))
	for i := range ms {
		ms[i] = Member{ID: fmt.Sprintf("m%02d", i), ProcessID: fmt.Sprintf("p%d", r.IntN(procs))}
	}
	return ms
}

func genConfigs(r *rand.Rand) Configs {
	return Configs{
		NumStandbyReplicas:    int32(r.IntN(3)),
		AcceptableRecoveryLag: int64(r.IntN(100)),
		MaxWarmupReplicas:     int32(r.IntN(4)),
	}
}

// genInput draws an input whose current assignment is arbitrary: random (possibly conflicting,
// possibly out-of-range) actives, standbys and warm-ups, and random offsets.
func genInput(r *rand.Rand) Input {
	in := Input{Subtopologies: genTopology(r), Members: genMembers(r), Configs: genConfigs(r)}
	for i := range in.Members {
		m := &in.Members[i]
		for _, s := range in.Subtopologies {
			for p := int32(-1); p <= s.Tasks; p++ {
				switch r.IntN(12) {
				case 0:
					m.Active = addTask(m.Active, s.ID, p)
				case 1:
					m.Standby = addTask(m.Standby, s.ID, p)
				case 2:
					m.Warmup = addTask(m.Warmup, s.ID, p)
				}
				if r.IntN(4) == 0 {
					if m.TaskOffsets == nil {
						m.TaskOffsets, m.TaskEndOffsets = map[Task]int64{}, map[Task]int64{}
					}
					end := int64(r.IntN(200))
					m.TaskOffsets[Task{s.ID, p}] = end - int64(r.IntN(200))
					m.TaskEndOffsets[Task{s.ID, p}] = end
				}
			}
		}
	}
	return in
}

func addTask(ts TaskSet, sub string, p int32) TaskSet {
	if ts == nil {
		ts = TaskSet{}
	}
	ts[sub] = append(ts[sub], p)
	return ts
}

// withCurrent sets every member's current tasks to its output (a fully reconciled group).
func withCurrent(in Input, out Output) Input {
	next := in
	next.Members = slices.Clone(in.Members)
	for i := range next.Members {
		a := out[next.Members[i].ID]
		next.Members[i].Active, next.Members[i].Standby, next.Members[i].Warmup = a.Active, a.Standby, a.Warmup
	}
	return next
}

func owners(out Output) map[Task]string {
	o := map[Task]string{}
	for id, a := range out {
		for s, ps := range a.Active {
			for _, p := range ps {
				o[Task{s, p}] = id
			}
		}
	}
	return o
}

func activeCounts(out Output) (lo, hi int) {
	lo = 1 << 30
	for _, a := range out {
		n := size(a.Active)
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi
}

func totalTasks(in Input) int {
	n := 0
	for _, s := range in.Subtopologies {
		n += int(s.Tasks)
	}
	return n
}

// cloneInput deep-copies an input (for checking that Assign leaves it alone).
func cloneInput(in Input) Input {
	cp := in
	cp.Subtopologies = slices.Clone(in.Subtopologies)
	cp.Members = slices.Clone(in.Members)
	cloneSet := func(ts TaskSet) TaskSet {
		if ts == nil {
			return nil
		}
		out := TaskSet{}
		for s, ps := range ts {
			out[s] = slices.Clone(ps)
		}
		return out
	}
	cloneMap := func(m map[Task]int64) map[Task]int64 {
		if m == nil {
			return nil
		}
		out := make(map[Task]int64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	for i := range cp.Members {
		m := &cp.Members[i]
		m.Active, m.Standby, m.Warmup = cloneSet(m.Active), cloneSet(m.Standby), cloneSet(m.Warmup)
		m.TaskOffsets, m.TaskEndOffsets = cloneMap(m.TaskOffsets), cloneMap(m.TaskEndOffsets)
	}
	return cp
}

// TestSpec6_4_PropertyInvariants: on arbitrary inputs both assignors assign every active exactly
// once, never put a task twice on a process, respect the standby and warm-up limits, leave their
// input untouched, and give the same output for the same input in any member or subtopology order.
func TestSpec6_4_PropertyInvariants(t *testing.T) {
	for seed := uint64(0); seed < propertySeeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		in := genInput(r)
		for _, a := range assignors {
			snapshot := cloneInput(in)
			out, err := a.Assign(in)
			if !reflect.DeepEqual(in, snapshot) {
				t.Fatalf("seed %d %s: Assign modified its input", seed, a.Name())
			}
			if err != nil {
				t.Fatalf("seed %d %s: %v", seed, a.Name(), err)
			}
			if err := checkInvariants(in, out); err != nil {
				t.Fatalf("seed %d %s: %v\n%s", seed, a.Name(), err, render(out))
			}
			// A follow-up is due only once offsets change (spec §6.7): otherwise the coordinator
			// would re-assign forever.
			if FollowUpDue(out, in.Members, in.Configs.AcceptableRecoveryLag) {
				t.Fatalf("seed %d %s: a follow-up is due right after assigning\n%s", seed, a.Name(), render(out))
			}
			again, _ := a.Assign(in)
			if !reflect.DeepEqual(out, again) {
				t.Fatalf("seed %d %s: not deterministic", seed, a.Name())
			}
			shuffled := in
			shuffled.Members = slices.Clone(in.Members)
			shuffled.Subtopologies = slices.Clone(in.Subtopologies)
			r.Shuffle(len(shuffled.Members), func(i, j int) {
				shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
			})
			slices.Reverse(shuffled.Subtopologies)
			if got, _ := a.Assign(shuffled); !reflect.DeepEqual(out, got) {
				t.Fatalf("seed %d %s: output depends on input order", seed, a.Name())
			}
		}
	}
}

// TestSpec6_4_PropertyActiveBalance: without stickiness (no current tasks, no offsets) active tasks
// per member differ by at most one, whatever the processes look like and with standbys.
func TestSpec6_4_PropertyActiveBalance(t *testing.T) {
	for seed := uint64(0); seed < propertySeeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 2))
		in := Input{Subtopologies: genTopology(r), Members: genMembers(r), Configs: genConfigs(r)}
		for _, a := range assignors {
			out := mustAssign(t, a, in)
			if lo, hi := activeCounts(out); hi-lo > 1 {
				t.Fatalf("seed %d %s: active counts %d..%d\n%s", seed, a.Name(), lo, hi, render(out))
			}
		}
	}
}

// TestSpec6_4_PropertyStickyRebalanceBalanced: one member per process, any current actives: after
// one sticky round active counts differ by at most one (stickiness never exceeds the running quota).
func TestSpec6_4_PropertyStickyRebalanceBalanced(t *testing.T) {
	for seed := uint64(0); seed < propertySeeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		in := genInput(r)
		for i := range in.Members {
			in.Members[i].ProcessID = "p" + in.Members[i].ID
		}
		out := mustAssign(t, Sticky{}, in)
		if lo, hi := activeCounts(out); hi-lo > 1 {
			t.Fatalf("seed %d: active counts %d..%d\n%s", seed, lo, hi, render(out))
		}
	}
}

// stable runs the sticky assignor until the assignment no longer changes (a reconciled group).
func stable(t *testing.T, in Input) (Input, Output) {
	t.Helper()
	out := mustAssign(t, Sticky{}, in)
	for range 5 {
		in = withCurrent(in, out)
		next := mustAssign(t, Sticky{}, in)
		if reflect.DeepEqual(next, out) {
			return in, out
		}
		out = next
	}
	t.Fatalf("no fixed point after 5 rounds")
	return in, out
}

func moved(before, after map[Task]string) int {
	n := 0
	for task, o := range before {
		if after[task] != o {
			n++
		}
	}
	return n
}

// TestSpec6_3_PropertyMinimalMovement: in a reconciled group (a sticky fixed point) of k members
// with N tasks, a member joining moves at most its share ceil(N/(k+1)) of actives, and a member
// leaving moves only its own actives; highavailability moves a subset of those (stateful moves to
// another process wait for a caught-up copy).
func TestSpec6_3_PropertyMinimalMovement(t *testing.T) {
	for seed := uint64(0); seed < propertySeeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 4))
		in := Input{Subtopologies: genTopology(r), Members: genMembers(r), Configs: genConfigs(r)}
		in, out := stable(t, in)
		before := owners(out)
		n, k := totalTasks(in), len(in.Members)

		// Join on a new process.
		join := in
		join.Members = append(slices.Clone(in.Members), Member{ID: "zz-new", ProcessID: "p-new"})
		joined := mustAssign(t, Sticky{}, join)
		bound := (n + k) / (k + 1)
		if mv := moved(before, owners(joined)); mv > bound {
			t.Fatalf("seed %d: join moved %d actives of %d over %d members, bound %d", seed, mv, n, k, bound)
		}
		// HA on the same join: no stateful active leaves its process before a caught-up copy exists,
		// and every active is on its current owner or its sticky target.
		ha := mustAssign(t, HighAvailability{}, join)
		checkHARefinesSticky(t, seed, join, joined, ha)
		if mv := moved(before, owners(ha)); mv > bound {
			t.Fatalf("seed %d: highavailability join moved %d actives, bound %d", seed, mv, bound)
		}

		// Leave: the member with the most actives.
		if k < 2 {
			continue
		}
		leaver := 0
		for i, m := range in.Members {
			if size(out[m.ID].Active) > size(out[in.Members[leaver].ID].Active) {
				leaver = i
			}
		}
		leave := in
		leave.Members = slices.Delete(slices.Clone(in.Members), leaver, leaver+1)
		left := mustAssign(t, Sticky{}, leave)
		own := size(out[in.Members[leaver].ID].Active)
		if mv := moved(before, owners(left)); mv > own {
			t.Fatalf("seed %d: leave moved %d actives, leaver had %d", seed, mv, own)
		}
		ha = mustAssign(t, HighAvailability{}, leave)
		checkHARefinesSticky(t, seed, leave, left, ha)
		if mv := moved(before, owners(ha)); mv > own {
			t.Fatalf("seed %d: highavailability leave moved %d actives, leaver had %d", seed, mv, own)
		}
	}
}

// checkHARefinesSticky: for an input without warm-ups, every highavailability active is on its
// sticky target or stays on its current owner, a stateful task leaves its current process only
// for a caught-up process, and each warm-up sits where the sticky target puts the active.
func checkHARefinesSticky(t *testing.T, seed uint64, in Input, sticky, ha Output) {
	t.Helper()
	cur := map[Task]string{}
	proc := map[string]string{}
	byID := map[string]*Member{}
	for i := range in.Members {
		m := &in.Members[i]
		proc[m.ID], byID[m.ID] = m.ProcessID, m
		for s, ps := range m.Active {
			for _, p := range ps {
				cur[Task{s, p}] = m.ID
			}
		}
	}
	stateful := map[string]bool{}
	for _, s := range in.Subtopologies {
		stateful[s.ID] = s.Stateful
	}
	if in.Configs.MaxWarmupReplicas <= 0 {
		if !reflect.DeepEqual(sticky, ha) {
			t.Fatalf("seed %d: without a warm-up budget highavailability differs from sticky", seed)
		}
		return
	}
	target := owners(sticky)
	for task, o := range owners(ha) {
		if o != target[task] && o != cur[task] {
			t.Fatalf("seed %d: %v on %s, neither target %s nor current %s", seed, task, o, target[task], cur[task])
		}
		if c, ok := cur[task]; ok && stateful[task.Subtopology] && proc[o] != proc[c] {
			caught := false
			for id, p := range proc {
				if p == proc[o] && CaughtUp(byID[id], task, in.Configs.AcceptableRecoveryLag) {
					caught = true
				}
			}
			if !caught {
				t.Fatalf("seed %d: %v moved from %s to %s without a caught-up copy", seed, task, c, o)
			}
		}
	}
	for id, a := range ha {
		for s, ps := range a.Warmup {
			for _, p := range ps {
				if target[Task{s, p}] != id {
					t.Fatalf("seed %d: warm-up %s_%d on %s, target owner %s", seed, s, p, id, target[Task{s, p}])
				}
			}
		}
	}
}

// TestSpec6_7_PropertyConvergence: when every member reports all the tasks it holds as caught up
// before the next round (warm-ups included), the highavailability assignor reaches a fixed point
// without warm-ups within ceil(N/budget)+5 rounds.
func TestSpec6_7_PropertyConvergence(t *testing.T) {
	for seed := uint64(0); seed < propertySeeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		in := Input{Subtopologies: genTopology(r), Members: genMembers(r), Configs: genConfigs(r)}
		in.Configs.MaxWarmupReplicas = 1 + int32(r.IntN(3))
		in, _ = stable(t, in)
		// Membership change: add two members on new processes, drop the first one.
		in.Members = append(slices.Clone(in.Members[1:]),
			Member{ID: "zz1", ProcessID: "pz1"}, Member{ID: "zz2", ProcessID: "pz2"})
		ha := HighAvailability{}
		out := mustAssign(t, ha, in)
		limit := (totalTasks(in)+int(in.Configs.MaxWarmupReplicas)-1)/int(in.Configs.MaxWarmupReplicas) + 5
		for rounds := 0; ; rounds++ {
			if rounds > limit {
				t.Fatalf("seed %d: no fixed point after %d rounds: %s", seed, rounds, render(out))
			}
			in = withCurrent(in, out)
			for i := range in.Members {
				m := &in.Members[i]
				m.TaskOffsets, m.TaskEndOffsets = map[Task]int64{}, map[Task]int64{}
				for _, ts := range []TaskSet{m.Active, m.Standby, m.Warmup} {
					for s, ps := range ts {
						for _, p := range ps {
							m.TaskOffsets[Task{s, p}], m.TaskEndOffsets[Task{s, p}] = 100, 100
						}
					}
				}
			}
			next := mustAssign(t, ha, in)
			if reflect.DeepEqual(next, out) {
				break
			}
			out = next
		}
		if NeedsFollowUp(out) {
			t.Fatalf("seed %d: fixed point with warm-ups: %s", seed, render(out))
		}
	}
}
