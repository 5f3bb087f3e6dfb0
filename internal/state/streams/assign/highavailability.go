package assign

// HighAvailability goes beyond Kafka 4.4 and implements the lag-driven warm-up design of KIP-1071
// (spec streams-groups §6.7 "[Informative] Trunk after 4.4", Appendix B): a stateful active task
// moves to another process only once that process has caught up on its state.
//
// Each call:
//  1. computes the sticky target (§6.3) with two changes that make the target stable while
//     migrations are in flight: a member holding a task as warm-up counts as a standby candidate
//     for it (as on Kafka trunk), and in the active phase it counts as the task's previous owner
//     (the warm-up is the memory of an earlier target, so the withheld owner's extra tasks do not
//     change which tasks it keeps), the current active owner being the second choice when the
//     warm-up member is at its quota;
//  2. refines it: a stateful active task that the target moves from its current owner o to a
//     member n on a different process, where no member of n's process reports a caught-up copy
//     (end offset − offset ≤ AcceptableRecoveryLag, both known and non-negative), stays active on
//     o; n gets it as a warm-up if the group-wide budget MaxWarmupReplicas allows (funded in
//     task-id order), else the move simply waits. Stateless tasks, moves within a process, moves
//     to a caught-up process and tasks without a current owner (e.g. the old owner was already told
//     to revoke, or left) move directly. Target standbys on a process that keeps a withheld active
//     or receives a warm-up of the same task are deferred.
//
// Once a warm-up is reported caught up, the next call moves the active. NeedsFollowUp tells the
// coordinator that it must watch task offsets, and FollowUpDue that a call is due now (the streams
// heartbeat then bumps the group epoch, which runs the assignor). MaxWarmupReplicas ≤ 0 means
// no warm-ups: every move is direct (without warm-ups in the input, the sticky outcome), rather
// than no stateful move ever.
type HighAvailability struct{}

// HighAvailabilityName is the name of the highavailability assignor.
const HighAvailabilityName = "highavailability"

// Name implements Assignor.
func (HighAvailability) Name() string { return HighAvailabilityName }

// Assign implements Assignor.
func (HighAvailability) Assign(in Input) (Output, error) {
	s, err := newState(in, true)
	if err != nil {
		return nil, err
	}
	prev, alt := s.prevActive, []int32(nil)
	if hasWarmups(in) {
		alt = s.prevActive
		prev = make([]int32, len(s.prevActive))
		copy(prev, s.prevActive)
		for i, m := range s.members {
			s.eachTask(m.Warmup, func(t int32) {
				if s.stateful(t) {
					prev[t] = int32(i)
				}
			})
		}
	}
	s.assignActives(prev, alt)
	s.assignStandbys()

	budget := int64(in.Configs.MaxWarmupReplicas)
	if budget <= 0 {
		return s.build(s.owner, s.standbys, nil), nil
	}
	final := make([]int32, len(s.owner))
	copy(final, s.owner)
	var warmups []taskMember
	var deferred map[int32][2]int32 // task → (withheld owner's process, warm-up process)
	for t := int32(0); t < s.nTasks; t++ {
		n, o := s.owner[t], s.prevActive[t]
		if !s.stateful(t) || o < 0 || o == n || s.memberProc[o] == s.memberProc[n] || s.caughtUp(s.memberProc[n], t) {
			continue
		}
		final[t] = o
		if deferred == nil {
			deferred = make(map[int32][2]int32)
		}
		deferred[t] = [2]int32{s.memberProc[o], s.memberProc[n]}
		if budget > 0 {
			warmups = append(warmups, taskMember{t, n})
			budget--
		}
	}
	standbys := s.standbys
	if deferred != nil {
		standbys = make([]taskMember, 0, len(s.standbys))
		for _, sb := range s.standbys {
			if d, ok := deferred[sb.task]; ok && (s.memberProc[sb.member] == d[0] || s.memberProc[sb.member] == d[1]) {
				continue
			}
			standbys = append(standbys, sb)
		}
	}
	return s.build(final, standbys, warmups), nil
}

func hasWarmups(in Input) bool {
	for i := range in.Members {
		if len(in.Members[i].Warmup) > 0 {
			return true
		}
	}
	return false
}

// caughtUp reports whether some member of process p reports task t within the acceptable
// recovery lag. State lives in the process's state directory, so any member's report counts.
func (s *state) caughtUp(p, t int32) bool {
	task := s.task(t)
	for _, mi := range s.procs[p].heap {
		if CaughtUp(s.members[mi], task, s.in.Configs.AcceptableRecoveryLag) {
			return true
		}
	}
	return false
}

// CaughtUp reports whether m's last reported progress on task t is within lag: both the offset
// and the end offset are known and non-negative, and end − offset ≤ lag.
func CaughtUp(m *Member, t Task, lag int64) bool {
	off, ok := m.TaskOffsets[t]
	if !ok || off < 0 {
		return false
	}
	end, ok := m.TaskEndOffsets[t]
	if !ok || end < 0 {
		return false
	}
	return end-off <= lag
}

// NeedsFollowUp reports whether out contains warm-up tasks, i.e. whether the coordinator must run
// the assignor again when members report new task offsets (a caught-up warm-up releases its
// active task only on the next call).
func NeedsFollowUp(out Output) bool {
	for _, a := range out {
		for _, parts := range a.Warmup {
			if len(parts) > 0 {
				return true
			}
		}
	}
	return false
}

// FollowUpDue reports whether a group whose current target is out must run its assignor again
// now: out has warm-up tasks (NeedsFollowUp) and one of them is caught up on its member's process,
// i.e. some member of that process reports it within lag, as Assign's refinement judges it. Run
// on the same members and offsets, Assign never returns a warm-up this reports caught up, so a
// follow-up that a caught-up warm-up causes cannot repeat itself.
func FollowUpDue(out Output, members []Member, lag int64) bool {
	if !NeedsFollowUp(out) {
		return false
	}
	byID := make(map[string]*Member, len(members))
	byProc := make(map[string][]*Member, len(members))
	for i := range members {
		m := &members[i]
		byID[m.ID] = m
		byProc[m.ProcessID] = append(byProc[m.ProcessID], m)
	}
	for id, a := range out {
		m := byID[id]
		if m == nil {
			continue
		}
		for sub, ps := range a.Warmup {
			for _, p := range ps {
				for _, peer := range byProc[m.ProcessID] {
					if CaughtUp(peer, Task{Subtopology: sub, Partition: p}, lag) {
						return true
					}
				}
			}
		}
	}
	return false
}
