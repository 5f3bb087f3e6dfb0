package conformance

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeTree(members ...kmsg.StreamsGroupDescribeResponseGroupMember) any {
	r := kmsg.NewPtrStreamsGroupDescribeResponse()
	g := kmsg.NewStreamsGroupDescribeResponseGroup()
	g.Group = "g"
	g.Members = members
	r.Groups = append(r.Groups, g)
	return toTree(r)
}

func member(id, process string, target, current []kmsg.TaskIDs, standby ...kmsg.TaskIDs) kmsg.StreamsGroupDescribeResponseGroupMember {
	m := kmsg.NewStreamsGroupDescribeResponseGroupMember()
	m.MemberID, m.ProcessID, m.MemberEpoch = id, process, 3
	m.TargetAssignment.ActiveTasks = target
	m.TargetAssignment.StandbyTasks = standby
	m.Assignment.ActiveTasks = current
	return m
}

func tasks(sub string, parts ...int32) []kmsg.TaskIDs {
	return []kmsg.TaskIDs{{SubtopologyID: sub, Partitions: parts}}
}

// TestCheckAssignmentDescribe: each property check-assignment promises fails on an assignment
// that breaks it, and a valid one passes.
func TestCheckAssignmentDescribe(t *testing.T) {
	counts := map[string]int{"0": 4}
	cases := []struct {
		name string
		tree any
		want string // "" = valid
	}{
		{"valid", describeTree(member("a", "pa", tasks("0", 0, 1), tasks("0", 0, 1, 2)), member("b", "pb", tasks("0", 2, 3), nil)), ""},
		{"task twice", describeTree(member("a", "pa", tasks("0", 0, 1, 2), nil), member("b", "pb", tasks("0", 2, 3), nil)), "active on both a and b"},
		{"task missing", describeTree(member("a", "pa", tasks("0", 0, 1), nil), member("b", "pb", tasks("0", 2), nil)), "0/3 is not assigned"},
		{"out of range", describeTree(member("a", "pa", tasks("0", 0, 1, 4), nil), member("b", "pb", tasks("0", 2, 3), nil)), "out of range"},
		{"unknown subtopology", describeTree(member("a", "pa", append(tasks("0", 0, 1), tasks("9", 0)...), nil), member("b", "pb", tasks("0", 2, 3), nil)), "unknown subtopology"},
		{"unbalanced", describeTree(member("a", "pa", tasks("0", 0, 1, 2), nil), member("b", "pb", tasks("0", 3), nil), member("c", "pc", nil, nil)), "range from 0 to 3"},
		{"standby with its active", describeTree(member("a", "pa", tasks("0", 0, 1), nil), member("b", "pa", tasks("0", 2, 3), nil, tasks("0", 0)...)), "shares process"},
		{"owned twice", describeTree(member("a", "pa", tasks("0", 0, 1), tasks("0", 0, 1, 2)), member("b", "pb", tasks("0", 2, 3), tasks("0", 2))), "currently active on both"},
	}
	for _, c := range cases {
		fails, note := checkAssignment(c.tree, 89, counts, -1)
		got := strings.Join(fails, "\n")
		switch {
		case c.want == "" && len(fails) > 0:
			t.Errorf("%s: unexpected failures:\n%s", c.name, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: failures %q do not mention %q", c.name, got, c.want)
		}
		if !strings.Contains(note, "group g:") {
			t.Errorf("%s: note %q does not name the group", c.name, note)
		}
	}
}

func TestCheckAssignmentHeartbeat(t *testing.T) {
	r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	r.MemberID, r.MemberEpoch = "m", 4
	r.ActiveTasks = tasks("0", 1, 2)
	tree := toTree(r)
	counts := map[string]int{"0": 4}
	if fails, note := checkAssignment(tree, 88, counts, 2); len(fails) > 0 || !strings.Contains(note, "m epoch 4: Active [0/1 0/2]") {
		t.Errorf("valid heartbeat: %v, note %q", fails, note)
	}
	if fails, _ := checkAssignment(tree, 88, counts, 3); len(fails) != 1 || !strings.Contains(fails[0], "want 3 tasks") {
		t.Errorf("active=3 on two tasks: %v", fails)
	}
	r.ActiveTasks = tasks("0", 1, 1)
	if fails, _ := checkAssignment(toTree(r), 88, counts, -1); len(fails) != 1 || !strings.Contains(fails[0], "listed twice") {
		t.Errorf("duplicate task: %v", fails)
	}
	r.ActiveTasks = nil
	if fails, _ := checkAssignment(toTree(r), 88, counts, 0); len(fails) != 1 {
		t.Errorf("active=0 on null lists must fail (the lists were expected): %v", fails)
	}
	if fails, _ := checkAssignment(tree, 2, counts, -1); len(fails) != 1 {
		t.Errorf("check-assignment on another API must fail: %v", fails)
	}
}

// TestMaskTasks: after masking, two servers that gave different tasks compare equal, and two
// that gave different numbers of tasks (or null versus a list) do not.
func TestMaskTasks(t *testing.T) {
	hb := func(parts ...int32) any {
		r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		if parts != nil {
			r.ActiveTasks = tasks("0", parts...)
		}
		v := toTree(r)
		maskTasks(v, 88)
		return v
	}
	var d []Difference
	if diffTrees(hb(0, 1), hb(2, 3), nil, &d); len(d) != 0 {
		t.Errorf("same size, other tasks: %v", d)
	}
	if diffTrees(hb(0, 1), hb(2), nil, &d); len(d) != 1 {
		t.Errorf("other size: %v", d)
	}
	d = nil
	if diffTrees(hb(0), hb(), nil, &d); len(d) != 1 {
		t.Errorf("list versus null: %v", d)
	}
	a := describeTree(member("a", "pa", tasks("0", 0, 1), tasks("0", 0)))
	b := describeTree(member("a", "pa", tasks("0", 2, 3), tasks("0", 3)))
	maskTasks(a, 89)
	maskTasks(b, 89)
	d = nil
	if diffTrees(a, b, nil, &d); len(d) != 0 {
		t.Errorf("describe, same sizes: %v", d)
	}
}

func TestParseCheckAssignment(t *testing.T) {
	f, err := Parse("x.txt", `scenario s
call c1 StreamsGroupHeartbeat v1
check-assignment 0:6 1:2 active=3 [streams-assignment]
`)
	if err != nil {
		t.Fatal(err)
	}
	ck := f.Scenarios[0].Steps[0].Checks[0]
	if ck.Kind != "check-assignment" || ck.Tag != "streams-assignment" || ck.Active != 3 || ck.Tasks["0"] != 6 || ck.Tasks["1"] != 2 {
		t.Fatalf("parsed %+v", ck)
	}
	for _, bad := range []string{
		"check-assignment 0:6",                      // no id
		"check-assignment [streams-assignment]",     // no tasks
		"check-assignment 0:x [streams-assignment]", // bad count
		"check-assignment@kafka 0:6 [streams-assignment]",
	} {
		if _, err := Parse("x.txt", "scenario s\ncall c1 StreamsGroupHeartbeat v1\n"+bad+"\n"); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestCheckSticky: keeps= fails when a member lost a task it held, within= when it got a task it
// did not hold, and both read the server's own captured list.
func TestCheckSticky(t *testing.T) {
	hb := func(parts ...int32) any {
		r := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		r.ActiveTasks = tasks("0", parts...)
		return toTree(r)
	}
	r := &Run{vars: map[string]string{"before": `[{"SubtopologyID":"0","Partitions":[0,1,2]}]`}}
	cases := []struct {
		name string
		ck   Check
		resp any
		want string // "" = passes
	}{
		{"keeps, gained", Check{Keeps: "before"}, hb(0, 1, 2, 3), ""},
		{"keeps, lost one", Check{Keeps: "before"}, hb(0, 1, 3), "differs in [0/2]"},
		{"within, gave some", Check{Within: "before"}, hb(0, 2), ""},
		{"within, took another", Check{Within: "before"}, hb(0, 5), "differs in [0/5]"},
		{"no such variable", Check{Within: "nope"}, hb(0), "no such variable"},
		{"null list", Check{Keeps: "before"}, toTree(kmsg.NewPtrStreamsGroupHeartbeatResponse()), "is null"},
	}
	for _, c := range cases {
		got := strings.Join(r.checkSticky(c.resp, 88, &c.ck), "\n")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: failures %q, want %q", c.name, got, c.want)
		}
	}
	if fails := r.checkSticky(hb(0), 89, &Check{Keeps: "before"}); len(fails) != 1 {
		t.Errorf("keeps= on a describe answer: %v", fails)
	}
	f, err := Parse("x.txt", "scenario s\ncall c1 StreamsGroupHeartbeat v1\ncheck-assignment 0:6 active=3 keeps=a within=b [streams-assignment]\n")
	if err != nil {
		t.Fatal(err)
	}
	if ck := f.Scenarios[0].Steps[0].Checks[0]; ck.Keeps != "a" || ck.Within != "b" || ck.Active != 3 {
		t.Fatalf("parsed %+v", ck)
	}
}
