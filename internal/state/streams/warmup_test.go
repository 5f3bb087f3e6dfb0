package streams

import (
	"fmt"
	"sort"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Warm-up tasks end to end through the heartbeat (spec §6.7, issue 10 defect 1): members that
// reconcile like Kafka Streams threads, driven in rounds (every member heartbeats once per
// round, in a fixed order), with the highavailability assignor.

// warmMember is one simulated member: the tasks it owns per role, as the coordinator last told it.
type warmMember struct {
	id     string
	epoch  int32
	joined bool
	owned  [3]map[Task]bool
	// lag is what the member reports for every task it owns (offset = end - lag); < 0: it
	// reports nothing.
	lag int64
	// sawWarmupBeforeActive: it owned a warm-up before its first active task.
	firstWarmupRound, firstActiveRound int
}

type warmSim struct {
	t       *testing.T
	e       *env
	group   string
	topo    *kmsg.StreamsGroupHeartbeatRequestTopology
	members []*warmMember
	round   int
	// maxWarmups is the largest number of warm-ups the group's target held at once.
	maxWarmups int
}

func newWarmSim(t *testing.T, warmups int32) *warmSim {
	e := newEnv(t, topics("in", 8, "cl", 8), assign.HighAvailability{})
	e.cfg.Assignors = []string{assign.HighAvailabilityName}
	e.cfg.NumStandbyReplicas = 1
	e.cfg.NumWarmupReplicas = warmups
	e.cfg.AssignmentInterval = 0 // rounds, not wall-clock, bound the test
	return &warmSim{t: t, e: e, group: "app", topo: topo(0, sub{id: "s", sources: []string{"in"}, changelogs: []string{"cl"}})}
}

func (s *warmSim) add(id string, lag int64) *warmMember {
	m := &warmMember{id: id, lag: lag, firstWarmupRound: -1, firstActiveRound: -1}
	for i := range m.owned {
		m.owned[i] = map[Task]bool{}
	}
	s.members = append(s.members, m)
	return m
}

func ownedMap(set map[Task]bool) map[string][]int32 {
	out := map[string][]int32{}
	for t := range set {
		out[t.Subtopology] = append(out[t.Subtopology], t.Partition)
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	}
	return out
}

func (s *warmSim) heartbeat(m *warmMember) {
	s.t.Helper()
	var req *kmsg.StreamsGroupHeartbeatRequest
	if !m.joined {
		req = join(s.group, m.id, s.topo)
	} else {
		req = owning(beat(s.group, m.id, m.epoch), ownedMap(m.owned[Active]), ownedMap(m.owned[Standby]), ownedMap(m.owned[Warmup]))
		if m.lag >= 0 {
			req.TaskOffsets, req.TaskEndOffsets = []kmsg.TaskOffset{}, []kmsg.TaskOffset{}
			for role := range m.owned {
				for t := range m.owned[role] {
					o, eo := kmsg.NewTaskOffset(), kmsg.NewTaskOffset()
					o.SubtopologyID, o.Partition, o.Offset = t.Subtopology, t.Partition, 50_000-m.lag
					eo.SubtopologyID, eo.Partition, eo.Offset = t.Subtopology, t.Partition, 50_000
					req.TaskOffsets, req.TaskEndOffsets = append(req.TaskOffsets, o), append(req.TaskEndOffsets, eo)
				}
			}
		}
	}
	resp := s.e.hb(req)
	mustOK(s.t, resp)
	m.joined, m.epoch = true, resp.MemberEpoch
	if resp.ActiveTasks == nil {
		return
	}
	for role, l := range [][]kmsg.TaskIDs{resp.ActiveTasks, resp.StandbyTasks, resp.WarmupTasks} {
		next := map[Task]bool{}
		for _, ids := range l {
			for _, p := range ids.Partitions {
				next[tk(ids.SubtopologyID, p)] = true
			}
		}
		m.owned[role] = next
	}
	// No task is ever owned as active by two members (the coordinator hands an active over only
	// after its previous owner acknowledged the revocation).
	for t := range m.owned[Active] {
		for _, o := range s.members {
			if o != m && o.owned[Active][t] {
				s.t.Fatalf("round %d: task %v active on %s and %s", s.round, t, o.id, m.id)
			}
		}
	}
	if len(m.owned[Warmup]) > 0 && m.firstWarmupRound < 0 {
		m.firstWarmupRound = s.round
	}
	if len(m.owned[Active]) > 0 && m.firstActiveRound < 0 {
		m.firstActiveRound = s.round
	}
}

func (s *warmSim) runRound() {
	s.round++
	for _, m := range s.members {
		s.heartbeat(m)
	}
	n := 0
	for _, r := range s.e.s.Groups[s.group].Targets {
		n += len(r[Warmup])
	}
	s.maxWarmups = max(s.maxWarmups, n)
}

// balanced: the group is Stable and every member owns actives/members tasks, each task is
// active once with one standby on another process, and no warm-up is left.
func (s *warmSim) balanced() (bool, string) {
	g := s.e.s.Groups[s.group]
	if st := g.State(); st != StableGroup {
		return false, "group " + st.String()
	}
	owner := map[Task]string{}
	standbys := map[Task][]string{}
	for _, m := range s.members {
		if n := len(m.owned[Active]); n != 8/len(s.members) {
			return false, fmt.Sprintf("%s owns %d active tasks", m.id, n)
		}
		if len(m.owned[Warmup]) > 0 {
			return false, fmt.Sprintf("%s still owns warm-ups %v", m.id, m.owned[Warmup])
		}
		for t := range m.owned[Active] {
			owner[t] = m.id
		}
		for t := range m.owned[Standby] {
			standbys[t] = append(standbys[t], m.id)
		}
	}
	for p := int32(0); p < 8; p++ {
		t := tk("s", p)
		if len(standbys[t]) != 1 || standbys[t][0] == owner[t] {
			return false, fmt.Sprintf("task %v active on %s, standbys %v", t, owner[t], standbys[t])
		}
	}
	return true, ""
}

// runUntilBalanced runs rounds until balanced and returns how many it took; it fails after limit.
func (s *warmSim) runUntilBalanced(limit int) int {
	s.t.Helper()
	why := ""
	for i := 1; i <= limit; i++ {
		s.runRound()
		var ok bool
		if ok, why = s.balanced(); ok {
			return i
		}
	}
	for _, m := range s.members {
		s.t.Logf("%s: epoch %d active %v standby %v warm-up %v", m.id, m.epoch, m.owned[Active], m.owned[Standby], m.owned[Warmup])
	}
	s.t.Fatalf("not balanced after %d rounds: %s", limit, why)
	return 0
}

// startThree converges three members (one process each) on 8 stateful tasks with one standby.
func (s *warmSim) startThree() {
	for _, id := range []string{"a", "b", "c"} {
		s.add(id, 0)
	}
	for i := 0; i < 10; i++ {
		s.runRound()
		if s.e.s.Groups[s.group].State() == StableGroup {
			return
		}
	}
	s.t.Fatal("three members did not converge")
}

// Spec §6.7 (issue 10 defect 1): a fourth process that reports caught-up offsets for what it holds
// first gets warm-ups, then those actives, and the group is balanced within a few rounds.
func TestSpec6_7_WarmupsMoveActivesToNewProcess(t *testing.T) {
	s := newWarmSim(t, 2)
	s.startThree()
	d := s.add("d", 0)
	rounds := s.runUntilBalanced(8)
	if d.firstWarmupRound < 0 || d.firstActiveRound <= d.firstWarmupRound {
		t.Fatalf("d got its first warm-up in round %d and its first active in round %d; want warm-ups first", d.firstWarmupRound, d.firstActiveRound)
	}
	if s.maxWarmups == 0 || s.maxWarmups > 2 {
		t.Fatalf("at most %d warm-ups at once, want 1..2 (group.streams.num.warmup.replicas=2)", s.maxWarmups)
	}
	// Balanced is final: more rounds write nothing.
	before := len(s.e.log)
	s.runRound()
	s.runRound()
	if len(s.e.log) != before {
		t.Fatalf("a balanced group kept writing: %v", kinds(s.e.log[before:]))
	}
	t.Logf("balanced after %d rounds", rounds)
}

// group.streams.num.warmup.replicas bounds the warm-ups in flight; 0 moves actives directly.
func TestSpec6_7_WarmupReplicasTakeEffect(t *testing.T) {
	one := newWarmSim(t, 1)
	one.startThree()
	one.add("d", 0)
	one.runUntilBalanced(12)
	if one.maxWarmups != 1 {
		t.Fatalf("num.warmup.replicas=1: %d warm-ups at once", one.maxWarmups)
	}

	none := newWarmSim(t, 0)
	none.startThree()
	d := none.add("d", 0)
	none.runUntilBalanced(8)
	if none.maxWarmups != 0 || d.firstWarmupRound >= 0 {
		t.Fatalf("num.warmup.replicas=0: %d warm-ups at once, d's first in round %d", none.maxWarmups, d.firstWarmupRound)
	}
}

// A warm-up that does not catch up keeps its active where it is, and waiting writes nothing: the
// follow-up assignment runs only when a warm-up has caught up.
func TestSpec6_7_LaggingWarmupWaits(t *testing.T) {
	for _, lag := range []int64{-1, 10_001} { // reports nothing; reports a lag just over the acceptable one
		s := newWarmSim(t, 2)
		s.startThree()
		d := s.add("d", lag)
		s.runRound()
		s.runRound()
		s.runRound()
		if len(d.owned[Warmup]) != 2 || len(d.owned[Active]) != 0 {
			t.Fatalf("lag %d: d owns active %v warm-up %v", lag, d.owned[Active], d.owned[Warmup])
		}
		epoch := s.e.s.Groups[s.group].Epoch
		before := len(s.e.log)
		for i := 0; i < 5; i++ {
			s.runRound()
		}
		if g := s.e.s.Groups[s.group]; g.Epoch != epoch || len(s.e.log) != before || len(d.owned[Active]) != 0 {
			t.Fatalf("lag %d: epoch %d -> %d, %d records, d active %v", lag, epoch, g.Epoch, len(s.e.log)-before, d.owned[Active])
		}
		// Once it reports caught up, the actives follow.
		d.lag = 10_000
		s.runUntilBalanced(8)
	}
}
