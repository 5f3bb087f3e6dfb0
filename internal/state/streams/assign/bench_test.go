package assign

import (
	"fmt"
	"testing"
)

// benchInput is a group of `members` members, each on its own process, and a topology of 10
// stateful subtopologies with `tasks` tasks in total, 1 standby replica. cold: nobody holds
// anything. Otherwise the group is reconciled on a previous assignment of all but the last member,
// every member reports offsets for the tasks it holds, and the last member has just joined
// (the common rebalance).
func benchInput(b *testing.B, members, tasks int, cold bool) Input {
	in := Input{Configs: Configs{NumStandbyReplicas: 1, AcceptableRecoveryLag: 10000, MaxWarmupReplicas: 2}}
	for i := range 10 {
		in.Subtopologies = append(in.Subtopologies, Subtopology{ID: fmt.Sprint(i), Tasks: int32(tasks / 10), Stateful: true})
	}
	for i := range members {
		in.Members = append(in.Members, Member{ID: fmt.Sprintf("member-%05d", i), ProcessID: fmt.Sprintf("process-%05d", i)})
	}
	if cold {
		return in
	}
	prev := in
	prev.Members = in.Members[:members-1]
	out, err := Sticky{}.Assign(prev)
	if err != nil {
		b.Fatal(err)
	}
	for i := range prev.Members {
		m := &in.Members[i]
		a := out[m.ID]
		m.Active, m.Standby = a.Active, a.Standby
		m.TaskOffsets, m.TaskEndOffsets = map[Task]int64{}, map[Task]int64{}
		for _, ts := range []TaskSet{a.Active, a.Standby} {
			for s, ps := range ts {
				for _, p := range ps {
					m.TaskOffsets[Task{s, p}], m.TaskEndOffsets[Task{s, p}] = 1000, 1500
				}
			}
		}
	}
	return in
}

// BenchmarkAssign times one target computation: both assignors, cold start and a member joining
// a reconciled group, 10/100/1000 members × 100/1000/10000 tasks, 1 standby replica.
func BenchmarkAssign(b *testing.B) {
	for _, a := range assignors {
		for _, scenario := range []string{"cold", "join"} {
			for _, members := range []int{10, 100, 1000} {
				for _, tasks := range []int{100, 1000, 10000} {
					name := fmt.Sprintf("%s/%s/members=%d/tasks=%d", a.Name(), scenario, members, tasks)
					b.Run(name, func(b *testing.B) {
						in := benchInput(b, members, tasks, scenario == "cold")
						b.ReportAllocs()
						for b.Loop() {
							if _, err := a.Assign(in); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		}
	}
}
