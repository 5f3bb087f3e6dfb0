package assign

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Test helpers: compact inputs, output inspection and the invariant checker shared by the table,
// property and fuzz tests.

// parts builds the TaskSet {"0": ps} (nil when ps is empty).
func parts(ps ...int32) TaskSet {
	if len(ps) == 0 {
		return nil
	}
	return TaskSet{"0": ps}
}

func member(id, process string) Member { return Member{ID: id, ProcessID: process} }

func stateless(id string, n int32) Subtopology { return Subtopology{ID: id, Tasks: n} }
func stateful(id string, n int32) Subtopology  { return Subtopology{ID: id, Tasks: n, Stateful: true} }

func offsets(kv ...int64) map[Task]int64 {
	m := map[Task]int64{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[Task{"0", int32(kv[i])}] = kv[i+1]
	}
	return m
}

// flat renders a TaskSet as sorted "s_p" strings.
func flat(ts TaskSet) []string {
	var out []string
	for s, ps := range ts {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s_%d", s, p))
		}
	}
	sort.Strings(out)
	return out
}

// p0 renders the partitions of subtopology "0".
func p0(ts TaskSet) []int32 {
	out := slices.Clone(ts["0"])
	slices.Sort(out)
	return out
}

func size(ts TaskSet) int {
	n := 0
	for _, ps := range ts {
		n += len(ps)
	}
	return n
}

func mustAssign(t testing.TB, a Assignor, in Input) Output {
	t.Helper()
	out, err := a.Assign(in)
	if err != nil {
		t.Fatalf("%s.Assign: %v", a.Name(), err)
	}
	if err := checkInvariants(in, out); err != nil {
		t.Fatalf("%s: invariant: %v\noutput: %s", a.Name(), err, render(out))
	}
	return out
}

func render(out Output) string {
	ids := make([]string, 0, len(out))
	for id := range out {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		a := out[id]
		fmt.Fprintf(&b, "%s: active %v standby %v warmup %v; ", id, flat(a.Active), flat(a.Standby), flat(a.Warmup))
	}
	return b.String()
}

// checkInvariants verifies spec §6.4 (and §6.7 for warm-ups) on any output:
//   - every member of the input has an entry with non-nil task sets, and nobody else has one;
//   - partitions are valid, ascending, unique, and no subtopology maps to an empty list;
//   - every task is active on exactly one member;
//   - standbys and warm-ups only for stateful tasks, never twice on one process nor on the process
//     of the active, at most NumStandbyReplicas standbys per task;
//   - at most MaxWarmupReplicas warm-ups in total (and none without a positive budget).
func checkInvariants(in Input, out Output) error {
	proc := map[string]string{}
	for _, m := range in.Members {
		proc[m.ID] = m.ProcessID
	}
	if len(out) != len(in.Members) {
		return fmt.Errorf("output has %d members, input %d", len(out), len(in.Members))
	}
	subs := map[string]Subtopology{}
	for _, s := range in.Subtopologies {
		subs[s.ID] = s
	}
	type key struct {
		t Task
		p string
	}
	activeOwner := map[Task]string{}
	held := map[key]string{}
	standbys := map[Task]int{}
	warmups := 0
	for id, a := range out {
		p, ok := proc[id]
		if !ok {
			return fmt.Errorf("output member %q not in input", id)
		}
		if a.Active == nil || a.Standby == nil || a.Warmup == nil {
			return fmt.Errorf("member %q has a nil task set", id)
		}
		for role, ts := range []TaskSet{a.Active, a.Standby, a.Warmup} {
			for s, ps := range ts {
				st, ok := subs[s]
				if !ok {
					return fmt.Errorf("member %q: unknown subtopology %q", id, s)
				}
				if len(ps) == 0 {
					return fmt.Errorf("member %q: empty partition list for %q", id, s)
				}
				for i, pn := range ps {
					if pn < 0 || pn >= st.Tasks {
						return fmt.Errorf("member %q: task %s_%d out of range", id, s, pn)
					}
					if i > 0 && ps[i-1] >= pn {
						return fmt.Errorf("member %q: partitions of %q not ascending: %v", id, s, ps)
					}
					t := Task{s, pn}
					if role > 0 && !st.Stateful {
						return fmt.Errorf("member %q: standby/warm-up of stateless task %v", id, t)
					}
					if other, dup := held[key{t, p}]; dup {
						return fmt.Errorf("task %v twice on process %q (%s and %s)", t, p, other, id)
					}
					held[key{t, p}] = id
					switch role {
					case 0:
						if prev, dup := activeOwner[t]; dup {
							return fmt.Errorf("task %v active on %s and %s", t, prev, id)
						}
						activeOwner[t] = id
					case 1:
						standbys[t]++
					case 2:
						warmups++
					}
				}
			}
		}
	}
	for _, s := range in.Subtopologies {
		for p := int32(0); p < s.Tasks; p++ {
			t := Task{s.ID, p}
			if _, ok := activeOwner[t]; !ok {
				return fmt.Errorf("task %v not assigned", t)
			}
			if n := standbys[t]; n > int(max(in.Configs.NumStandbyReplicas, 0)) {
				return fmt.Errorf("task %v has %d standbys", t, n)
			}
		}
	}
	if warmups > int(max(in.Configs.MaxWarmupReplicas, 0)) {
		return fmt.Errorf("%d warm-ups, budget %d", warmups, in.Configs.MaxWarmupReplicas)
	}
	return nil
}
