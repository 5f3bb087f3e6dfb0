package streams

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Architecture §6 invariant 1 for streams groups: random sequences of joins, heartbeats with
// and without acknowledgements, leaves, static leaves and timer expiries never make an
// operation change the state it read (env checks after every step), never hand one active task
// to two members, keep the derived indexes Replay maintains equal to a full rebuild
// (checkDerived), and the compacted log (latest record per key, tombstoned keys gone,
// replayed in any key order) rebuilds the same state.
func TestRandomOperationsKeepInvariants(t *testing.T) {
	for seed := int64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, seed, false) })
	}
}

// The same with the highavailability assignor (spec §6.7): warm-ups are handed out, owned,
// acknowledged and promoted while members report caught-up, lagging or no task offsets, and
// two members share a process.
func TestRandomOperationsWithWarmupsKeepInvariants(t *testing.T) {
	for seed := int64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, seed, true) })
	}
}

func randomRun(t *testing.T, seed int64, warmups bool) {
	rng := rand.New(rand.NewSource(seed))
	var e *env
	if warmups {
		e = newEnv(t, topics("a", 5, "b", 3, "a-cl", 5, "b-cl", 3), assign.HighAvailability{})
		e.cfg.Assignors = []string{assign.HighAvailabilityName}
	} else {
		e = newEnv(t, topics("a", 5, "b", 3, "a-cl", 5, "b-cl", 3), roundRobin{"sticky"})
	}
	e.cfg.NumStandbyReplicas = 1
	sawWarmup := false
	tp := topo(0, sub{id: "0", sources: []string{"a"}, changelogs: []string{"a-cl"}}, sub{id: "1", sources: []string{"b"}, changelogs: []string{"b-cl"}})
	ids := []string{"m0", "m1", "m2", "m3", "m4"}
	inst := map[string]string{"m3": "i3", "m4": "i4"}
	for step := 0; step < 300; step++ {
		e.now = e.now.Add(time.Duration(rng.Intn(1500)) * time.Millisecond)
		id := ids[rng.Intn(len(ids))]
		g := e.s.Groups["g"]
		var m *Member
		if g != nil {
			m = g.Members[id]
			if m == nil && inst[id] != "" {
				m = g.staticMember(inst[id])
			}
		}
		switch op := rng.Intn(10); {
		case m == nil || op == 0:
			r := join("g", id, tp)
			if warmups && (id == "m1" || id == "m2") {
				p := "process-m12"
				r.ProcessID = &p
			}
			if i := inst[id]; i != "" {
				r.InstanceID = &i
				if m != nil && m.ID != id { // the instance is held under another id
					r.MemberID = m.ID
				}
			}
			e.hb(r)
		case op <= 5: // heartbeat acknowledging the current assignment
			r := owning(beat("g", m.ID, m.Epoch), tasksOf(m.Assigned[Active]), tasksOf(m.Assigned[Standby]), tasksOf(m.Assigned[Warmup]))
			r.InstanceID = m.InstanceID
			if warmups && rng.Intn(2) == 0 {
				lag := []int64{0, 10_000, 10_001, 1 << 40}[rng.Intn(4)]
				for _, role := range m.Assigned {
					for task := range role {
						o, eo := kmsg.NewTaskOffset(), kmsg.NewTaskOffset()
						o.SubtopologyID, o.Partition, o.Offset = task.Subtopology, task.Partition, 1<<41-lag
						eo.SubtopologyID, eo.Partition, eo.Offset = task.Subtopology, task.Partition, 1<<41
						r.TaskOffsets, r.TaskEndOffsets = append(r.TaskOffsets, o), append(r.TaskEndOffsets, eo)
					}
				}
			}
			e.hb(r)
		case op == 6: // heartbeat without owned lists
			r := beat("g", m.ID, m.Epoch)
			r.InstanceID = m.InstanceID
			e.hb(r)
		case op == 7:
			r := beat("g", m.ID, -1)
			if m.InstanceID != nil {
				r.InstanceID = m.InstanceID
				r.MemberEpoch = -2
			}
			if resp := e.hb(r); resp.ErrorCode != 0 && resp.ErrorCode != kerr.FencedInstanceID.Code {
				t.Fatalf("leave: %d", resp.ErrorCode)
			}
		case op == 8:
			if _, ok := e.scheduled[TimerKey(SessionTimer, "g", m.ID)]; ok {
				e.fire(SessionTimer, "g", m.ID)
			}
		default:
			if _, ok := e.scheduled[TimerKey(RebalanceTimer, "g", m.ID)]; ok {
				e.fire(RebalanceTimer, "g", m.ID)
			}
		}
		checkNoDoubleActive(t, e.s)
		checkDerived(t, e.s)
		if g := e.s.Groups["g"]; g != nil {
			for _, m := range g.Members {
				sawWarmup = sawWarmup || len(m.Assigned[Warmup]) > 0
			}
		}
	}
	if warmups && !sawWarmup {
		t.Errorf("no member ever held a warm-up task")
	}
	if g := e.s.Groups["g"]; g != nil {
		n := 0
		for _, m := range g.Members {
			n += len(m.Assigned[Active])
		}
		t.Logf("members %d active %d epoch %d state %s records %d", len(g.Members), n, g.Epoch, g.State(), len(e.log))
	}
	checkCompactedReplay(t, e.log, e.s, rng)
}

func checkNoDoubleActive(t *testing.T, s *State) {
	t.Helper()
	g := s.Groups["g"]
	if g == nil {
		return
	}
	owner := map[Task]string{}
	for _, m := range g.Members {
		for _, set := range []map[Task]int32{m.Assigned[Active], m.Pending[Active]} {
			for task := range set {
				if o, ok := owner[task]; ok && o != m.ID {
					t.Fatalf("task %v active on %s and %s", task, o, m.ID)
				}
				owner[task] = m.ID
			}
		}
	}
}

func checkCompactedReplay(t *testing.T, all []log.Record, want *State, rng *rand.Rand) {
	t.Helper()
	latest := map[string]log.Record{}
	var order []string
	for _, r := range all {
		k := string(r.Key)
		if _, seen := latest[k]; !seen {
			order = append(order, k)
		}
		latest[k] = r
	}
	var compacted []log.Record
	for _, k := range order {
		if r := latest[k]; !r.Tombstone() {
			compacted = append(compacted, r)
		}
	}
	rng.Shuffle(len(compacted), func(i, j int) { compacted[i], compacted[j] = compacted[j], compacted[i] })
	got := New()
	for _, r := range compacted {
		if err := got.Replay(r); err != nil {
			t.Fatalf("replay of the compacted log: %v", err)
		}
	}
	checkDerived(t, got)
	if !reflect.DeepEqual(withoutSoft(got), withoutSoft(want)) {
		t.Fatalf("compacted, reordered log rebuilds a different state")
	}
}

// checkDerived: the task-ownership index, the warm-up target count and the instance index that
// Replay keeps up to date record by record equal what a full rebuild from the members and
// targets gives.
func checkDerived(t *testing.T, s *State) {
	t.Helper()
	for id, g := range s.Groups {
		if want := rebuildOwners(g.Members); !reflect.DeepEqual(g.owners, want) {
			t.Fatalf("group %s: task-ownership index %v, a rebuild gives %v", id, g.owners, want)
		}
		warm := 0
		for _, r := range g.Targets {
			if hasWarmups(r) {
				warm++
			}
		}
		if g.warmTargets != warm {
			t.Fatalf("group %s: %d targets with warm-ups counted, %d held", id, g.warmTargets, warm)
		}
		if want := instanceIndex(g.Members); !reflect.DeepEqual(g.instances, want) {
			t.Fatalf("group %s: instance index %v, a rebuild gives %v", id, g.instances, want)
		}
		if want := stableIndex(g.Members); !reflect.DeepEqual(g.stableAt, want) {
			t.Fatalf("group %s: stable members per epoch %v, a rebuild gives %v", id, g.stableAt, want)
		}
	}
}
