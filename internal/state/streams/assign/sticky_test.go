package assign

import (
	"errors"
	"slices"
	"testing"
)

// TestSpec6_5_WorkedExamples runs the worked examples E1–E16 of spec streams-groups §6.5 through
// the sticky assignor. Where the spec leaves a tie open, the check asserts only what it fixes.
func TestSpec6_5_WorkedExamples(t *testing.T) {
	type ex struct {
		name  string
		in    Input
		check func(t *testing.T, out Output)
	}
	eq := func(t *testing.T, what string, got, want []int32) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	examples := []ex{
		{
			name: "E1 one active task per process",
			in: Input{
				Subtopologies: []Subtopology{stateless("0", 3)},
				Members:       []Member{member("m1", "p1"), member("m2", "p2"), member("m3", "p3")},
			},
			check: func(t *testing.T, out Output) {
				var all []int32
				for _, id := range []string{"m1", "m2", "m3"} {
					if n := size(out[id].Active); n != 1 {
						t.Errorf("%s has %d actives, want 1", id, n)
					}
					all = append(all, p0(out[id].Active)...)
				}
				slices.Sort(all)
				eq(t, "union", all, []int32{0, 1, 2})
			},
		},
		{
			name: "E2 no migration to another process",
			in: Input{
				Subtopologies: []Subtopology{stateless("0", 3)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Active: parts(0)},
					{ID: "m2", ProcessID: "p2", Active: parts(1)},
				},
			},
			check: func(t *testing.T, out Output) {
				if !slices.Contains(p0(out["m1"].Active), 0) || !slices.Contains(p0(out["m2"].Active), 1) {
					t.Errorf("previous actives moved: %s", render(out))
				}
				if n := size(out["m1"].Active) + size(out["m2"].Active); n != 3 {
					t.Errorf("total actives %d, want 3", n)
				}
			},
		},
		{
			name: "E3 new process takes only the surplus",
			in: Input{
				Subtopologies: []Subtopology{stateless("0", 3)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Active: parts(0, 2)},
					{ID: "m2", ProcessID: "p2", Active: parts(1)},
					member("m3", "p3"),
				},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m2", p0(out["m2"].Active), []int32{1})
				m1, m3 := p0(out["m1"].Active), p0(out["m3"].Active)
				if len(m1) != 1 || len(m3) != 1 || m1[0] == m3[0] || (m1[0] != 0 && m1[0] != 2) || (m3[0] != 0 && m3[0] != 2) {
					t.Errorf("m1 %v m3 %v, want one each of {0,2}", m1, m3)
				}
			},
		},
		{
			name: "E4 stickiness with more members than tasks",
			in: Input{
				Subtopologies: []Subtopology{stateless("0", 3)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Active: parts(0)},
					{ID: "m2", ProcessID: "p2", Active: parts(2)},
					{ID: "m3", ProcessID: "p3", Active: parts(1)},
					member("m4", "p4"), member("m5", "p5"),
				},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m1", p0(out["m1"].Active), []int32{0})
				eq(t, "m2", p0(out["m2"].Active), []int32{2})
				eq(t, "m3", p0(out["m3"].Active), []int32{1})
				eq(t, "m4", p0(out["m4"].Active), nil)
				eq(t, "m5", p0(out["m5"].Active), nil)
			},
		},
		{
			name: "E5 actives go to previous standbys",
			in: Input{
				Subtopologies: []Subtopology{stateful("0", 3)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Standby: parts(2)},
					{ID: "m2", ProcessID: "p2", Standby: parts(1)},
					{ID: "m3", ProcessID: "p3", Standby: parts(0)},
				},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m1", p0(out["m1"].Active), []int32{2})
				eq(t, "m2", p0(out["m2"].Active), []int32{1})
				eq(t, "m3", p0(out["m3"].Active), []int32{0})
			},
		},
		{
			name: "E6 capacity is per member",
			in: Input{
				Subtopologies: []Subtopology{stateless("0", 3)},
				Members:       []Member{member("m1", "p1"), member("m2_1", "p2"), member("m2_2", "p2")},
			},
			check: func(t *testing.T, out Output) {
				for id, a := range out {
					if n := size(a.Active); n != 1 {
						t.Errorf("%s has %d actives, want 1", id, n)
					}
				}
			},
		},
		{
			name: "E7 two standby replicas",
			in: Input{
				Subtopologies: []Subtopology{stateful("0", 3)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Active: parts(0)},
					{ID: "m2", ProcessID: "p2", Active: parts(1)},
					{ID: "m3", ProcessID: "p3", Active: parts(2)},
				},
				Configs: Configs{NumStandbyReplicas: 2},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m1 standby", p0(out["m1"].Standby), []int32{1, 2})
				eq(t, "m2 standby", p0(out["m2"].Standby), []int32{0, 2})
				eq(t, "m3 standby", p0(out["m3"].Standby), []int32{0, 1})
			},
		},
		{
			name: "E8 no standby without another process",
			in: Input{
				Subtopologies: []Subtopology{stateful("0", 1)},
				Members:       []Member{member("m1", "p1")},
				Configs:       Configs{NumStandbyReplicas: 1},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m1 active", p0(out["m1"].Active), []int32{0})
				eq(t, "m1 standby", p0(out["m1"].Standby), nil)
			},
		},
		{
			name: "E9 new tasks do not move old ones",
			in: Input{
				Subtopologies: []Subtopology{stateless("0", 6)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Active: parts(0, 1)},
					{ID: "m2", ProcessID: "p2", Active: parts(2, 3)},
				},
			},
			check: func(t *testing.T, out Output) {
				m1, m2 := p0(out["m1"].Active), p0(out["m2"].Active)
				if !slices.Contains(m1, 0) || !slices.Contains(m1, 1) || !slices.Contains(m2, 2) || !slices.Contains(m2, 3) {
					t.Errorf("m1 %v m2 %v", m1, m2)
				}
			},
		},
		{
			name: "E10 standby to previous owner below quota",
			in: Input{
				Subtopologies: []Subtopology{stateful("0", 2)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Active: parts(0), Standby: parts(1)},
					{ID: "m2", ProcessID: "p2", Active: parts(1)},
					member("m3", "p3"),
				},
				Configs: Configs{NumStandbyReplicas: 1},
			},
			check: func(t *testing.T, out Output) {
				if !slices.Contains(p0(out["m1"].Active), 0) || !slices.Contains(p0(out["m1"].Standby), 1) {
					t.Errorf("m1: %s", render(out))
				}
				if n := size(out["m1"].Active) + size(out["m1"].Standby); n > 2 {
					t.Errorf("m1 has %d tasks, want ≤ 2", n)
				}
			},
		},
		{
			name: "E11 standby to the previous standby that does not hold the active",
			in: Input{
				Subtopologies: []Subtopology{stateful("0", 3)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Standby: parts(2)},
					{ID: "m2", ProcessID: "p2", Active: parts(0), Standby: parts(2)},
					{ID: "m3", ProcessID: "p3", Active: parts(1)},
					member("m4", "p4"),
				},
				Configs: Configs{NumStandbyReplicas: 1},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m1 active", p0(out["m1"].Active), []int32{2})
				eq(t, "m2 active", p0(out["m2"].Active), []int32{0})
				eq(t, "m3 active", p0(out["m3"].Active), []int32{1})
				eq(t, "m4 active", p0(out["m4"].Active), nil)
				eq(t, "m2 standby", p0(out["m2"].Standby), []int32{2})
				m4 := p0(out["m4"].Standby)
				if len(m4) != 1 || (m4[0] != 0 && m4[0] != 1) {
					t.Errorf("m4 standby %v, want one of 0, 1", m4)
				}
				if slices.Contains(p0(out["m3"].Standby), 1) {
					t.Errorf("m3 holds standby 1 next to its active")
				}
			},
		},
		{
			name: "E12 cold start follows reported offsets",
			in: Input{
				Subtopologies: []Subtopology{stateful("0", 4)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", TaskOffsets: offsets(0, 10, 1, 10)},
					{ID: "m2", ProcessID: "p2", TaskOffsets: offsets(2, 10, 3, 10)},
				},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m1", p0(out["m1"].Active), []int32{0, 1})
				eq(t, "m2", p0(out["m2"].Active), []int32{2, 3})
			},
		},
		{
			name: "E13 current owners rank ahead of reported offsets, most caught-up first",
			in: Input{
				Subtopologies: []Subtopology{stateful("0", 4)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Active: parts(0)},
					{ID: "m2", ProcessID: "p2", Standby: parts(0, 1)},
					{ID: "m3", ProcessID: "p3", TaskOffsets: offsets(0, 1_000_000, 1, 1_000_000, 2, 100)},
					{ID: "m4", ProcessID: "p4", TaskOffsets: offsets(2, 50)},
				},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m1", p0(out["m1"].Active), []int32{0})
				eq(t, "m2", p0(out["m2"].Active), []int32{1})
				eq(t, "m3", p0(out["m3"].Active), []int32{2})
				eq(t, "m4", p0(out["m4"].Active), []int32{3})
			},
		},
		{
			name: "E14 cold-start standbys away from the process holding state",
			in: Input{
				Subtopologies: []Subtopology{stateful("0", 2)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", TaskOffsets: offsets(0, 10)},
					{ID: "m2", ProcessID: "p2", TaskOffsets: offsets(1, 10)},
				},
				Configs: Configs{NumStandbyReplicas: 1},
			},
			check: func(t *testing.T, out Output) {
				eq(t, "m1 active", p0(out["m1"].Active), []int32{0})
				eq(t, "m2 active", p0(out["m2"].Active), []int32{1})
				eq(t, "m1 standby", p0(out["m1"].Standby), []int32{1})
				eq(t, "m2 standby", p0(out["m2"].Standby), []int32{0})
			},
		},
		{
			name: "E15 stateless subtopologies spread evenly",
			in: Input{
				Subtopologies: []Subtopology{stateless("0", 3), stateless("1", 3)},
				Members: []Member{
					member("m1_1", "p1"), member("m1_2", "p1"), member("m2_1", "p2"),
					member("m2_2", "p2"), member("m3_1", "p3"), member("m3_2", "p3"),
				},
			},
			check: func(t *testing.T, out Output) {
				var all []string
				for id, a := range out {
					if n := size(a.Active); n != 1 {
						t.Errorf("%s has %d actives, want 1", id, n)
					}
					all = append(all, flat(a.Active)...)
				}
				slices.Sort(all)
				if want := []string{"0_0", "0_1", "0_2", "1_0", "1_1", "1_2"}; !slices.Equal(all, want) {
					t.Errorf("union %v, want %v", all, want)
				}
			},
		},
		{
			name: "E16 range assignment when scaling up",
			in: Input{
				Subtopologies: []Subtopology{stateful("s1", 2), stateful("s2", 2)},
				Members: []Member{
					{ID: "m1", ProcessID: "p1", Active: TaskSet{"s1": {0, 1}, "s2": {0, 1}}},
					member("m2", "p2"),
				},
				Configs: Configs{NumStandbyReplicas: 1},
			},
			check: func(t *testing.T, out Output) {
				for id, a := range out {
					for _, sub := range []string{"s1", "s2"} {
						if len(a.Active[sub]) != 1 || len(a.Standby[sub]) != 1 {
							t.Errorf("%s: %s active %v standby %v, want one each", id, sub, a.Active[sub], a.Standby[sub])
						}
					}
				}
			},
		},
	}
	for _, e := range examples {
		t.Run(e.name, func(t *testing.T) {
			out := mustAssign(t, Sticky{}, e.in)
			e.check(t, out)
		})
	}
}

// e17Input is the seed example (spec §6.5 E17): A active {0,2,4} standby {1,3,5}; B active {1,3,5}
// standby {0,2,4}; C joins empty; 6 stateful tasks, 1 standby replica.
func e17Input() Input {
	return Input{
		Subtopologies: []Subtopology{stateful("0", 6)},
		Members: []Member{
			{ID: "A", ProcessID: "pA", Active: parts(0, 2, 4), Standby: parts(1, 3, 5)},
			{ID: "B", ProcessID: "pB", Active: parts(1, 3, 5), Standby: parts(0, 2, 4)},
			{ID: "C", ProcessID: "pC"},
		},
		Configs: Configs{NumStandbyReplicas: 1, AcceptableRecoveryLag: 10000, MaxWarmupReplicas: 2},
	}
}

type want struct{ active, standby, warmup []int32 }

func expect(t *testing.T, out Output, exp map[string]want) {
	t.Helper()
	for id, w := range exp {
		a := out[id]
		if !slices.Equal(p0(a.Active), w.active) || !slices.Equal(p0(a.Standby), w.standby) || !slices.Equal(p0(a.Warmup), w.warmup) {
			t.Errorf("%s: active %v standby %v warmup %v, want %v %v %v",
				id, p0(a.Active), p0(a.Standby), p0(a.Warmup), w.active, w.standby, w.warmup)
		}
	}
}

// TestSpec6_5_E17_Sticky: Kafka 4.4 gives C actives 4 and 5 at once, no warm-ups.
func TestSpec6_5_E17_Sticky(t *testing.T) {
	out := mustAssign(t, Sticky{}, e17Input())
	expect(t, out, map[string]want{
		"A": {active: []int32{0, 2}, standby: []int32{3, 4}},
		"B": {active: []int32{1, 3}, standby: []int32{2, 5}},
		"C": {active: []int32{4, 5}, standby: []int32{0, 1}},
	})
	if NeedsFollowUp(out) {
		t.Error("sticky output needs no follow-up")
	}
	// The sticky assignor ignores lag configs and never assigns warm-ups, even when members hold some.
	in := e17Input()
	in.Members[2].Warmup = parts(4, 5)
	out = mustAssign(t, Sticky{}, in)
	if NeedsFollowUp(out) {
		t.Errorf("sticky assigned warm-ups: %s", render(out))
	}
}

// TestSpec6_4_NoMembers: with tasks but no members the assignor fails (the coordinator answers
// UNKNOWN_SERVER_ERROR); with neither it returns an empty assignment.
func TestSpec6_4_NoMembers(t *testing.T) {
	for _, a := range []Assignor{Sticky{}, HighAvailability{}} {
		_, err := a.Assign(Input{Subtopologies: []Subtopology{stateless("0", 1)}})
		if !errors.Is(err, ErrNoMembers) {
			t.Errorf("%s: err %v, want ErrNoMembers", a.Name(), err)
		}
		out, err := a.Assign(Input{})
		if err != nil || len(out) != 0 {
			t.Errorf("%s: empty input gave %v, %v", a.Name(), out, err)
		}
	}
}

// TestAssignRejectsInvalidInput: duplicate members or subtopologies and negative task counts are
// errors, not panics.
func TestAssignRejectsInvalidInput(t *testing.T) {
	bad := []Input{
		{Subtopologies: []Subtopology{stateless("0", 1)}, Members: []Member{member("m", "p"), member("m", "q")}},
		{Subtopologies: []Subtopology{stateless("0", 1), stateful("0", 2)}, Members: []Member{member("m", "p")}},
		{Subtopologies: []Subtopology{stateless("0", -1)}, Members: []Member{member("m", "p")}},
	}
	for i, in := range bad {
		for _, a := range []Assignor{Sticky{}, HighAvailability{}} {
			if _, err := a.Assign(in); !errors.Is(err, ErrInvalidInput) {
				t.Errorf("case %d %s: err %v, want ErrInvalidInput", i, a.Name(), err)
			}
		}
	}
}

// TestSpec6_3_IgnoresUnknownTasks: owned tasks and offsets outside the topology (a shrunk topology)
// do not confuse stickiness and never appear in the output.
func TestSpec6_3_IgnoresUnknownTasks(t *testing.T) {
	in := Input{
		Subtopologies: []Subtopology{stateful("0", 2)},
		Members: []Member{
			{ID: "m1", ProcessID: "p1", Active: TaskSet{"0": {0, 7}, "gone": {0}}, Standby: TaskSet{"0": {-1}},
				TaskOffsets: map[Task]int64{{"gone", 3}: 5}},
			{ID: "m2", ProcessID: "p2", Active: parts(1)},
		},
		Configs: Configs{NumStandbyReplicas: 1},
	}
	out := mustAssign(t, Sticky{}, in)
	expect(t, out, map[string]want{
		"m1": {active: []int32{0}, standby: []int32{1}},
		"m2": {active: []int32{1}, standby: []int32{0}},
	})
}

// TestSpec6_4_StatelessNeverGetStandbys: a mixed topology gets standbys only for its stateful part.
func TestSpec6_4_StatelessNeverGetStandbys(t *testing.T) {
	in := Input{
		Subtopologies: []Subtopology{stateless("a", 4), stateful("b", 4)},
		Members:       []Member{member("m1", "p1"), member("m2", "p2"), member("m3", "p3")},
		Configs:       Configs{NumStandbyReplicas: 2},
	}
	out := mustAssign(t, Sticky{}, in)
	for id, a := range out {
		if len(a.Standby["a"]) > 0 {
			t.Errorf("%s has standbys of stateless a: %v", id, a.Standby["a"])
		}
	}
	total := 0
	for _, a := range out {
		total += len(a.Standby["b"])
	}
	if total != 8 {
		t.Errorf("%d standbys of b, want 8 (4 tasks × 2 replicas on 3 processes)", total)
	}
}

// TestSpec6_4_MoreCapacityMoreTasks is Kafka's shouldAssignMoreTasksToClientWithMoreCapacity: 4
// subtopologies × 3 tasks, p1 with one member and p2 with two: p2's members get 8 tasks, p1's 4.
func TestSpec6_4_MoreCapacityMoreTasks(t *testing.T) {
	in := Input{
		Subtopologies: []Subtopology{stateless("a", 3), stateless("b", 3), stateless("c", 3), stateless("d", 3)},
		Members:       []Member{member("m1", "p1"), member("m2_1", "p2"), member("m2_2", "p2")},
	}
	out := mustAssign(t, Sticky{}, in)
	if n := size(out["m1"].Active); n != 4 {
		t.Errorf("p1 has %d tasks, want 4", n)
	}
	if n := size(out["m2_1"].Active) + size(out["m2_2"].Active); n != 8 {
		t.Errorf("p2 has %d tasks, want 8", n)
	}
}

// TestSpec6_2_Registry: sticky is the default and highavailability is registered; unknown names
// are not found (the caller falls back to the default).
func TestSpec6_2_Registry(t *testing.T) {
	if names := Names(); !slices.Equal(names, []string{"sticky", "highavailability"}) {
		t.Errorf("Names() = %v", names)
	}
	if Default().Name() != "sticky" || DefaultName != "sticky" {
		t.Errorf("default is %q", Default().Name())
	}
	for _, n := range Names() {
		a, ok := Lookup(n)
		if !ok || a.Name() != n {
			t.Errorf("Lookup(%q) = %v, %v", n, a, ok)
		}
	}
	if _, ok := Lookup("balanced"); ok {
		t.Error("Lookup(balanced) found an assignor")
	}
}

// TestSpec6_4_DeterministicTieBreaks pins the tie-breaks this implementation documents where
// Kafka's are unspecified (heap order): equally loaded processes in process-id order, members of
// a process with equal counts in member-id order, equally ranked candidates in member-id order,
// and of two members claiming one active task the later in member-id order is its owner.
func TestSpec6_4_DeterministicTieBreaks(t *testing.T) {
	t.Run("processes by id", func(t *testing.T) {
		out := mustAssign(t, Sticky{}, Input{
			Subtopologies: []Subtopology{stateless("0", 3)},
			Members:       []Member{member("m1", "p3"), member("m2", "p1"), member("m3", "p2")},
		})
		expect(t, out, map[string]want{"m2": {active: []int32{0}}, "m3": {active: []int32{1}}, "m1": {active: []int32{2}}})
	})
	t.Run("members by id", func(t *testing.T) {
		out := mustAssign(t, Sticky{}, Input{
			Subtopologies: []Subtopology{stateless("0", 1)},
			Members:       []Member{member("b", "p"), member("a", "p")},
		})
		expect(t, out, map[string]want{"a": {active: []int32{0}}, "b": {}})
	})
	t.Run("candidates by id", func(t *testing.T) {
		out := mustAssign(t, Sticky{}, Input{
			Subtopologies: []Subtopology{stateful("0", 1)},
			Members: []Member{
				{ID: "b", ProcessID: "p1", Standby: parts(0)},
				{ID: "a", ProcessID: "p2", Standby: parts(0)},
			},
		})
		expect(t, out, map[string]want{"a": {active: []int32{0}}, "b": {}})
	})
	t.Run("double claim", func(t *testing.T) {
		out := mustAssign(t, Sticky{}, Input{
			Subtopologies: []Subtopology{stateless("0", 1)},
			Members: []Member{
				{ID: "a", ProcessID: "p1", Active: parts(0)},
				{ID: "b", ProcessID: "p2", Active: parts(0)},
			},
		})
		expect(t, out, map[string]want{"a": {}, "b": {active: []int32{0}}})
	})
}
