package assign

import (
	"math"
	"reflect"
	"slices"
	"testing"
)

// nextRound turns an output into the next input: each member's current tasks become its output
// (as if every member reconciled at once), reported offsets are replaced by report.
func nextRound(in Input, out Output, report map[string]map[Task][2]int64) Input {
	next := in
	next.Members = slices.Clone(in.Members)
	for i := range next.Members {
		m := &next.Members[i]
		a := out[m.ID]
		m.Active, m.Standby, m.Warmup = a.Active, a.Standby, a.Warmup
		m.TaskOffsets, m.TaskEndOffsets = nil, nil
		for t, oe := range report[m.ID] {
			if m.TaskOffsets == nil {
				m.TaskOffsets, m.TaskEndOffsets = map[Task]int64{}, map[Task]int64{}
			}
			m.TaskOffsets[t], m.TaskEndOffsets[t] = oe[0], oe[1]
		}
	}
	return next
}

// TestSpec6_7_E17_HighAvailability walks the seed example (spec §6.7, Appendix B) through the
// highavailability assignor: C first gets warm-ups while A and B keep their actives, then each
// active moves to C only after C reports it caught up, ending at the sticky target of E17.
func TestSpec6_7_E17_HighAvailability(t *testing.T) {
	ha := HighAvailability{}
	in := e17Input()
	out := mustAssign(t, ha, in)
	expect(t, out, map[string]want{
		"A": {active: []int32{0, 2, 4}, standby: []int32{3}},
		"B": {active: []int32{1, 3, 5}, standby: []int32{2}},
		"C": {standby: []int32{0, 1}, warmup: []int32{4, 5}},
	})
	if !NeedsFollowUp(out) {
		t.Fatal("warm-ups in flight but NeedsFollowUp is false")
	}

	// Nothing caught up yet (C reports a large lag): the same assignment again.
	lagging := map[string]map[Task][2]int64{"C": {{"0", 4}: {0, 50_000}, {"0", 5}: {10, 90_000}}}
	in2 := nextRound(in, out, lagging)
	out2 := mustAssign(t, ha, in2)
	if !reflect.DeepEqual(out2, out) {
		t.Fatalf("assignment changed without progress:\n got %s\nwant %s", render(out2), render(out))
	}

	// C reports 0_4 within the acceptable lag (10000): the next round moves that active to C; A
	// keeps 0_4 as standby (demoted in place), 0_5 keeps warming up.
	caught4 := map[string]map[Task][2]int64{"C": {{"0", 4}: {45_000, 50_000}, {"0", 5}: {10, 90_000}}}
	in3 := nextRound(in, out, caught4)
	out3 := mustAssign(t, ha, in3)
	expect(t, out3, map[string]want{
		"A": {active: []int32{0, 2}, standby: []int32{3, 4}},
		"B": {active: []int32{1, 3, 5}, standby: []int32{2}},
		"C": {active: []int32{4}, standby: []int32{0, 1}, warmup: []int32{5}},
	})
	if !NeedsFollowUp(out3) {
		t.Fatal("0_5 still warming up but NeedsFollowUp is false")
	}

	// C catches up on 0_5 (lag exactly the acceptable lag): the sticky target of E17, no warm-ups.
	caught5 := map[string]map[Task][2]int64{"C": {{"0", 4}: {50_000, 50_000}, {"0", 5}: {80_000, 90_000}}}
	out4 := mustAssign(t, ha, nextRound(in3, out3, caught5))
	expect(t, out4, map[string]want{
		"A": {active: []int32{0, 2}, standby: []int32{3, 4}},
		"B": {active: []int32{1, 3}, standby: []int32{2, 5}},
		"C": {active: []int32{4, 5}, standby: []int32{0, 1}},
	})
	if NeedsFollowUp(out4) {
		t.Fatal("no warm-ups left but NeedsFollowUp is true")
	}
	sticky := mustAssign(t, Sticky{}, e17Input())
	if !reflect.DeepEqual(out4, sticky) {
		t.Errorf("converged to %s, want the sticky target %s", render(out4), render(sticky))
	}
}

// TestSpec6_7_WarmupBudget: at most MaxWarmupReplicas warm-ups group-wide, funded in task-id order;
// the unfunded move waits on its owner (no warm-up, its colliding standby deferred) and is funded
// once the first one completes.
func TestSpec6_7_WarmupBudget(t *testing.T) {
	ha := HighAvailability{}
	in := e17Input()
	in.Configs.MaxWarmupReplicas = 1
	out := mustAssign(t, ha, in)
	expect(t, out, map[string]want{
		"A": {active: []int32{0, 2, 4}, standby: []int32{3}},
		"B": {active: []int32{1, 3, 5}, standby: []int32{2}},
		"C": {standby: []int32{0, 1}, warmup: []int32{4}},
	})
	in2 := nextRound(in, out, map[string]map[Task][2]int64{"C": {{"0", 4}: {100, 100}}})
	out2 := mustAssign(t, ha, in2)
	expect(t, out2, map[string]want{
		"A": {active: []int32{0, 2}, standby: []int32{3, 4}},
		"B": {active: []int32{1, 3, 5}, standby: []int32{2}},
		"C": {active: []int32{4}, standby: []int32{0, 1}, warmup: []int32{5}},
	})
}

// TestSpec6_7_NoWarmupBudgetMovesDirectly: MaxWarmupReplicas 0 disables warm-ups; moves are direct,
// so the output is the sticky one.
func TestSpec6_7_NoWarmupBudgetMovesDirectly(t *testing.T) {
	in := e17Input()
	in.Configs.MaxWarmupReplicas = 0
	got := mustAssign(t, HighAvailability{}, in)
	if want := mustAssign(t, Sticky{}, in); !reflect.DeepEqual(got, want) {
		t.Errorf("got %s, want %s", render(got), render(want))
	}
}

// TestSpec6_7_DirectMoves: stateless tasks, moves between members of one process, moves to a
// process that already reports a caught-up copy, and tasks without a current owner move at once.
func TestSpec6_7_DirectMoves(t *testing.T) {
	ha := HighAvailability{}
	cfg := Configs{AcceptableRecoveryLag: 100, MaxWarmupReplicas: 5}
	t.Run("stateless", func(t *testing.T) {
		in := Input{
			Subtopologies: []Subtopology{stateless("0", 4)},
			Members:       []Member{{ID: "A", ProcessID: "pA", Active: parts(0, 1, 2, 3)}, member("C", "pC")},
			Configs:       cfg,
		}
		out := mustAssign(t, ha, in)
		expect(t, out, map[string]want{"A": {active: []int32{0, 1}}, "C": {active: []int32{2, 3}}})
	})
	t.Run("same process", func(t *testing.T) {
		in := Input{
			Subtopologies: []Subtopology{stateful("0", 4)},
			Members:       []Member{{ID: "A1", ProcessID: "p", Active: parts(0, 1, 2, 3)}, member("A2", "p")},
			Configs:       cfg,
		}
		out := mustAssign(t, ha, in)
		expect(t, out, map[string]want{"A1": {active: []int32{0, 1}}, "A2": {active: []int32{2, 3}}})
	})
	t.Run("caught-up standby", func(t *testing.T) {
		in := e17Input()
		in.Configs.AcceptableRecoveryLag = 100
		// C's process already restored 0_4 (reported by C2, another member of pC): 0_4 moves directly,
		// 0_5 is warmed up.
		in.Members = append(in.Members, Member{ID: "C2", ProcessID: "pC",
			TaskOffsets: map[Task]int64{{"0", 4}: 950}, TaskEndOffsets: map[Task]int64{{"0", 4}: 1000}})
		out := mustAssign(t, ha, in)
		// Target (sticky): C2 is the most caught-up candidate for 0_4, C the least loaded for 0_5.
		target := mustAssign(t, Sticky{}, in)
		if !slices.Equal(p0(target["C2"].Active), []int32{4}) || !slices.Equal(p0(target["C"].Active), []int32{5}) {
			t.Fatalf("unexpected target %s", render(target))
		}
		if got := p0(out["C2"].Active); !slices.Equal(got, []int32{4}) {
			t.Errorf("C2 active %v, want [4] (caught-up process takes it at once)", got)
		}
		if got, w := p0(out["C"].Active), p0(out["C"].Warmup); len(got) != 0 || !slices.Equal(w, []int32{5}) {
			t.Errorf("C active %v warmup %v, want none and [5]", got, w)
		}
		if got := p0(out["B"].Active); !slices.Equal(got, []int32{1, 3, 5}) {
			t.Errorf("B active %v, want [1 3 5] (keeps 0_5 while C warms up)", got)
		}
	})
	t.Run("owner gone", func(t *testing.T) {
		// B left (or was told to revoke, so it no longer lists the tasks): its tasks have no current
		// owner and go straight to their target, no warm-up.
		in := e17Input()
		in.Members = []Member{in.Members[0], in.Members[2]}
		out := mustAssign(t, ha, in)
		if NeedsFollowUp(out) {
			t.Errorf("warm-ups for ownerless tasks: %s", render(out))
		}
		if want := mustAssign(t, Sticky{}, in); !reflect.DeepEqual(out, want) {
			t.Errorf("got %s, want the sticky target %s", render(out), render(want))
		}
	})
}

// TestSpec6_7_CaughtUp: unknown, negative and lagging reports are not caught up; a lag equal to the
// acceptable lag is.
func TestSpec6_7_CaughtUp(t *testing.T) {
	task := Task{"0", 1}
	cases := []struct {
		name     string
		off, end map[Task]int64
		lag      int64
		want     bool
	}{
		{"nothing reported", nil, nil, 10, false},
		{"no end offset", map[Task]int64{task: 5}, nil, 10, false},
		{"no offset", nil, map[Task]int64{task: 5}, 10, false},
		{"negative offset", map[Task]int64{task: -1}, map[Task]int64{task: 5}, 10, false},
		{"negative end", map[Task]int64{task: 0}, map[Task]int64{task: -2}, 10, false},
		{"lag above", map[Task]int64{task: 0}, map[Task]int64{task: 11}, 10, false},
		{"lag equal", map[Task]int64{task: 1}, map[Task]int64{task: 11}, 10, true},
		{"ahead of end", map[Task]int64{task: 20}, map[Task]int64{task: 11}, 0, true},
		{"huge values", map[Task]int64{task: 0}, map[Task]int64{task: math.MaxInt64}, math.MaxInt64 - 1, false},
		{"other task", map[Task]int64{{"0", 2}: 1}, map[Task]int64{{"0", 2}: 1}, 10, false},
	}
	for _, c := range cases {
		m := Member{TaskOffsets: c.off, TaskEndOffsets: c.end}
		if got := CaughtUp(&m, task, c.lag); got != c.want {
			t.Errorf("%s: CaughtUp = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSpec6_7_StaleWarmupDropped: a warm-up the target no longer wants (its task's target owner
// changed, here because the warming member now holds more than its share) disappears.
func TestSpec6_7_StaleWarmupDropped(t *testing.T) {
	in := Input{
		Subtopologies: []Subtopology{stateful("0", 2)},
		Members: []Member{
			{ID: "A", ProcessID: "pA", Active: parts(0)},
			{ID: "B", ProcessID: "pB", Active: parts(1)},
			{ID: "C", ProcessID: "pC", Warmup: parts(0, 1)},
		},
		Configs: Configs{AcceptableRecoveryLag: 10, MaxWarmupReplicas: 2},
	}
	out := mustAssign(t, HighAvailability{}, in)
	// C's warm-ups make it the sticky owner of 0_0 (quota 1); 0_1 stays with B. 0_0 keeps warming up.
	expect(t, out, map[string]want{
		"A": {active: []int32{0}},
		"B": {active: []int32{1}},
		"C": {warmup: []int32{0}},
	})
}

// FollowUpDue: a target's warm-up asks for a new assignment once some member of its member's
// process reports it within the acceptable lag, and never right after Assign ran on the same
// offsets.
func TestSpec6_7_FollowUpDue(t *testing.T) {
	out := Output{"C": {Warmup: parts(4, 5)}, "A": {Active: parts(0, 4)}}
	c, c2, a := member("C", "pc"), member("C2", "pc"), member("A", "pa")
	if FollowUpDue(out, []Member{a, c, c2}, 100) {
		t.Fatal("nothing reported, yet a follow-up is due")
	}
	a.TaskOffsets, a.TaskEndOffsets = offsets(4, 100), offsets(4, 100) // another process's copy does not count
	c.TaskOffsets, c.TaskEndOffsets = offsets(4, 0, 5, 0), offsets(4, 101, 5, -1)
	if FollowUpDue(out, []Member{a, c, c2}, 100) {
		t.Fatal("lag 101 > 100 and an unknown end offset count as caught up")
	}
	c2.TaskOffsets, c2.TaskEndOffsets = offsets(5, 900), offsets(5, 1000)
	if !FollowUpDue(out, []Member{a, c, c2}, 100) {
		t.Fatal("C2, on C's process, reports 0_5 caught up, yet no follow-up is due")
	}
	if FollowUpDue(Output{"A": {Active: parts(0)}}, []Member{a, c, c2}, 100) {
		t.Fatal("a target without warm-ups needs no follow-up")
	}

	// After Assign on the same input, its own warm-ups are never due.
	in := e17Input()
	in.Members[2].TaskOffsets, in.Members[2].TaskEndOffsets = offsets(4, 95_000), offsets(4, 100_000)
	got := mustAssign(t, HighAvailability{}, in)
	if !NeedsFollowUp(got) || FollowUpDue(got, in.Members, in.Configs.AcceptableRecoveryLag) {
		t.Fatalf("right after Assign: NeedsFollowUp %v, FollowUpDue %v (%s)", NeedsFollowUp(got), FollowUpDue(got, in.Members, in.Configs.AcceptableRecoveryLag), render(got))
	}
}
