package conformance

// check-assignment: Streams task assignments (KIP-1071) may legitimately differ between two
// servers (the sticky assignor's tie-breaks are unspecified in Kafka), so instead of comparing
// which member got which task, the harness checks on each server separately that the assignment
// is valid and balanced, prints both, and replaces every task list by its size before diff.
//
//	check-assignment <subtopology>:<tasks>... [active=<n>] [<id>]
//
// After a StreamsGroupDescribe call it checks every described group (error 0): the members'
// target assignments give each task of the named subtopologies to exactly one member as active
// and to nothing else, no process holds a standby (or a second standby) of a task it holds as
// active (or standby), and active counts differ by at most one between members; the members'
// current assignments hold each active task at most once. After a StreamsGroupHeartbeat call it
// checks the returned task lists name only tasks of the topology, each once, and with active=n
// that ActiveTasks is present and holds n tasks (how many a member keeps or receives is
// determined by the balance rule even where which ones is not).

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// taskCounts parses the check's "<subtopology>:<tasks>" arguments and active=<n> (-1 when
// not given).
func taskCounts(args []string) (map[string]int, int, error) {
	out := map[string]int{}
	active := -1
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "active="); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, 0, fmt.Errorf("check-assignment: %q: want active=<number of tasks>", a)
			}
			active = n
			continue
		}
		sub, n, ok := strings.Cut(a, ":")
		k, err := strconv.Atoi(n)
		if !ok || sub == "" || err != nil || k <= 0 {
			return nil, 0, fmt.Errorf("check-assignment: %q: want <subtopology>:<number of tasks>", a)
		}
		if _, dup := out[sub]; dup {
			return nil, 0, fmt.Errorf("check-assignment: subtopology %s named twice", sub)
		}
		out[sub] = k
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("check-assignment needs the topology's tasks: <subtopology>:<number of tasks>...")
	}
	return out, active, nil
}

type task struct {
	sub  string
	part int64
}

func (t task) String() string { return fmt.Sprintf("%s/%d", t.sub, t.part) }

// taskList reads a []TaskIDs tree; nil when the list is null.
func taskList(v any) ([]task, error) {
	arr, ok := v.([]any)
	if !ok {
		if v == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("not a task list: %s", render(v))
	}
	var out []task
	for _, e := range arr {
		o, ok := e.(*Obj)
		if !ok {
			return nil, fmt.Errorf("not a task entry: %s", render(e))
		}
		sub, _ := o.Vals["SubtopologyID"].(string)
		parts, _ := o.Vals["Partitions"].([]any)
		for _, p := range parts {
			n, ok := p.(int64)
			if !ok {
				return nil, fmt.Errorf("partition %s is not a number", render(p))
			}
			out = append(out, task{sub, n})
		}
	}
	return out, nil
}

// checkTasks reports tasks outside the topology and tasks listed twice in one list.
func checkTasks(tasks []task, counts map[string]int, where string) []string {
	var out []string
	seen := map[task]bool{}
	for _, t := range tasks {
		n, ok := counts[t.sub]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: task %s of an unknown subtopology", where, t))
		case t.part < 0 || t.part >= int64(n):
			out = append(out, fmt.Sprintf("%s: task %s out of range (subtopology %s has %d tasks)", where, t, t.sub, n))
		}
		if seen[t] {
			out = append(out, fmt.Sprintf("%s: task %s listed twice", where, t))
		}
		seen[t] = true
	}
	return out
}

func taskText(tasks []task) string {
	if tasks == nil {
		return "null"
	}
	s := make([]string, len(tasks))
	for i, t := range tasks {
		s[i] = t.String()
	}
	sort.Strings(s)
	return "[" + strings.Join(s, " ") + "]"
}

var roles = []string{"ActiveTasks", "StandbyTasks", "WarmupTasks"}

// checkAssignment runs a check-assignment check on one response tree. It returns the broken
// properties and a one-line-per-member account of the assignment for the run's log.
func checkAssignment(raw any, key int16, counts map[string]int, active int) (fails []string, note string) {
	switch key {
	case 88: // StreamsGroupHeartbeat
		o, ok := raw.(*Obj)
		if !ok {
			return []string{"check-assignment: not a StreamsGroupHeartbeat response"}, ""
		}
		var parts []string
		for _, role := range roles {
			ts, err := taskList(o.Vals[role])
			if err != nil {
				return []string{"check-assignment: " + role + ": " + err.Error()}, ""
			}
			fails = append(fails, checkTasks(ts, counts, role)...)
			if role == "ActiveTasks" && active >= 0 && (ts == nil || len(ts) != active) {
				fails = append(fails, fmt.Sprintf("check-assignment: ActiveTasks is %s, want %d tasks", taskText(ts), active))
			}
			parts = append(parts, fmt.Sprintf("%s %s", strings.TrimSuffix(role, "Tasks"), taskText(ts)))
		}
		member, _ := o.Vals["MemberID"].(string)
		epoch := o.Vals["MemberEpoch"]
		return fails, fmt.Sprintf("%s epoch %s: %s", member, render(epoch), strings.Join(parts, ", "))
	case 89: // StreamsGroupDescribe
		if active >= 0 {
			return []string{"check-assignment: active=<n> applies to StreamsGroupHeartbeat answers"}, ""
		}
		o, ok := raw.(*Obj)
		groups, _ := o.Vals["Groups"].([]any)
		if !ok || len(groups) == 0 {
			return []string{"check-assignment: no described group"}, ""
		}
		var notes []string
		for _, g := range groups {
			gobj, _ := g.(*Obj)
			if gobj == nil || gobj.Vals["ErrorCode"] != int64(0) {
				continue
			}
			f, n := checkGroupAssignment(gobj, counts)
			fails = append(fails, f...)
			notes = append(notes, n)
		}
		return fails, strings.Join(notes, "\n")
	}
	return []string{fmt.Sprintf("check-assignment works on StreamsGroupHeartbeat and StreamsGroupDescribe answers, not %s", apiName(key))}, ""
}

type memberTasks struct {
	id, process string
	epoch       any
	target      map[string][]task // role -> tasks
	current     map[string][]task
}

func checkGroupAssignment(g *Obj, counts map[string]int) (fails []string, note string) {
	name, _ := g.Vals["Group"].(string)
	failf := func(format string, args ...any) {
		fails = append(fails, fmt.Sprintf("check-assignment: group %s: %s", name, fmt.Sprintf(format, args...)))
	}
	raw, _ := g.Vals["Members"].([]any)
	var members []*memberTasks
	for _, e := range raw {
		o, ok := e.(*Obj)
		if !ok {
			continue
		}
		m := &memberTasks{target: map[string][]task{}, current: map[string][]task{}}
		m.id, _ = o.Vals["MemberID"].(string)
		m.process, _ = o.Vals["ProcessID"].(string)
		m.epoch = o.Vals["MemberEpoch"]
		for field, dst := range map[string]map[string][]task{"TargetAssignment": m.target, "Assignment": m.current} {
			a, _ := o.Vals[field].(*Obj)
			if a == nil {
				continue
			}
			for _, role := range roles {
				ts, err := taskList(a.Vals[role])
				if err != nil {
					failf("member %s %s.%s: %v", m.id, field, role, err)
					continue
				}
				fails = append(fails, checkTasks(ts, counts, fmt.Sprintf("check-assignment: group %s: member %s %s.%s", name, m.id, field, role))...)
				dst[role] = ts
			}
		}
		members = append(members, m)
	}
	sort.Slice(members, func(i, j int) bool { return members[i].id < members[j].id })
	if len(members) == 0 {
		return fails, fmt.Sprintf("group %s: no members", name)
	}

	// Target: every task active exactly once.
	activeOn := map[task]*memberTasks{}
	for _, m := range members {
		for _, t := range m.target["ActiveTasks"] {
			if prev := activeOn[t]; prev != nil {
				failf("task %s is active on both %s and %s in the target assignment", t, prev.id, m.id)
			}
			activeOn[t] = m
		}
	}
	for sub, n := range counts {
		for p := 0; p < n; p++ {
			if activeOn[task{sub, int64(p)}] == nil {
				failf("task %s/%d is not assigned as active to any member in the target assignment", sub, p)
			}
		}
	}
	// Target: no process holds a task twice (active + standby, or two standbys).
	standbyOn := map[task]map[string]string{} // task -> process -> member
	for _, m := range members {
		for _, t := range m.target["StandbyTasks"] {
			if a := activeOn[t]; a != nil && a.process == m.process {
				failf("task %s: standby on %s shares process %q with its active on %s", t, m.id, m.process, a.id)
			}
			if standbyOn[t] == nil {
				standbyOn[t] = map[string]string{}
			}
			if prev, ok := standbyOn[t][m.process]; ok {
				failf("task %s: two standbys on process %q (%s and %s)", t, m.process, prev, m.id)
			}
			standbyOn[t][m.process] = m.id
		}
	}
	// Target: balance of active tasks across members.
	lo, hi := -1, -1
	for _, m := range members {
		n := len(m.target["ActiveTasks"])
		if lo < 0 || n < lo {
			lo = n
		}
		if n > hi {
			hi = n
		}
	}
	if hi-lo > 1 {
		failf("unbalanced target assignment: active tasks per member range from %d to %d", lo, hi)
	}
	// Current: an active task is owned by at most one member.
	owner := map[task]string{}
	for _, m := range members {
		for _, t := range m.current["ActiveTasks"] {
			if prev, ok := owner[t]; ok {
				failf("task %s is currently active on both %s and %s", t, prev, m.id)
			}
			owner[t] = m.id
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "group %s:", name)
	for _, m := range members {
		fmt.Fprintf(&b, "\n    %s (process %s, epoch %s): target active %s standby %s; current active %s standby %s",
			m.id, m.process, render(m.epoch),
			taskText(m.target["ActiveTasks"]), taskText(m.target["StandbyTasks"]),
			taskText(m.current["ActiveTasks"]), taskText(m.current["StandbyTasks"]))
	}
	return fails, b.String()
}

// maskTasks replaces, in a normalized response, every task list a check-assignment covers by
// its size ("<3 tasks>"; null and empty stay as they are), so diff compares how many tasks each
// member has but not which.
func maskTasks(v any, key int16) {
	o, ok := v.(*Obj)
	if !ok {
		return
	}
	maskRoles := func(a *Obj) {
		if a == nil {
			return
		}
		for _, role := range roles {
			ts, err := taskList(a.Vals[role])
			if err == nil && len(ts) > 0 {
				a.Vals[role] = fmt.Sprintf("<%d tasks>", len(ts))
			}
		}
	}
	switch key {
	case 88:
		maskRoles(o)
	case 89:
		groups, _ := o.Vals["Groups"].([]any)
		for _, g := range groups {
			gobj, _ := g.(*Obj)
			if gobj == nil {
				continue
			}
			ms, _ := gobj.Vals["Members"].([]any)
			for _, m := range ms {
				mo, _ := m.(*Obj)
				if mo == nil {
					continue
				}
				for _, field := range []string{"Assignment", "TargetAssignment"} {
					a, _ := mo.Vals[field].(*Obj)
					maskRoles(a)
				}
			}
		}
	}
}

// checkSticky checks check-assignment's keeps=<var> and within=<var> on a heartbeat answer:
// the variables hold task lists this server gave the member earlier (capture of
// ActiveTasks), so the check is about each server's own assignment, never the other's.
func (r *Run) checkSticky(raw any, key int16, ck *Check) []string {
	if ck.Keeps == "" && ck.Within == "" {
		return nil
	}
	o, ok := raw.(*Obj)
	if key != 88 || !ok {
		return []string{"check-assignment: keeps= and within= apply to StreamsGroupHeartbeat answers"}
	}
	now, err := taskList(o.Vals["ActiveTasks"])
	if err != nil {
		return []string{"check-assignment: ActiveTasks: " + err.Error()}
	}
	if now == nil {
		return []string{"check-assignment: keeps=/within= need ActiveTasks in the answer, it is null"}
	}
	var fails []string
	for _, c := range []struct{ name, rel string }{{ck.Keeps, "keeps"}, {ck.Within, "within"}} {
		if c.name == "" {
			continue
		}
		text, ok := r.vars[c.name]
		if !ok {
			fails = append(fails, fmt.Sprintf("check-assignment: %s=%s: no such variable", c.rel, c.name))
			continue
		}
		var entries []struct {
			SubtopologyID string
			Partitions    []int64
		}
		if err := json.Unmarshal([]byte(text), &entries); err != nil {
			fails = append(fails, fmt.Sprintf("check-assignment: %s=%s is not a task list: %v", c.rel, c.name, err))
			continue
		}
		before := []task{}
		for _, e := range entries {
			for _, p := range e.Partitions {
				before = append(before, task{e.SubtopologyID, p})
			}
		}
		// keeps: every earlier task is still held; within: every task held was held before.
		super, sub := now, before
		if c.rel == "within" {
			super, sub = before, now
		}
		have := map[task]bool{}
		for _, t := range super {
			have[t] = true
		}
		var lost []task
		for _, t := range sub {
			if !have[t] {
				lost = append(lost, t)
			}
		}
		if len(lost) > 0 {
			fails = append(fails, fmt.Sprintf("check-assignment: not sticky: ActiveTasks %s, %s %s %s (differs in %s)",
				taskText(now), c.rel, c.name, taskText(before), taskText(lost)))
		}
	}
	return fails
}
