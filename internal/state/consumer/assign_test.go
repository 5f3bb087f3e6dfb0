package consumer

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/meta"
)

func randomInput(rng *rand.Rand, homogeneous bool) AssignInput {
	in := AssignInput{Topics: map[[16]byte]int32{}}
	nt := 1 + rng.Intn(5)
	var ids [][16]byte
	for i := 0; i < nt; i++ {
		id := tid(fmt.Sprintf("t%d", i))
		in.Topics[id] = int32(rng.Intn(20))
		ids = append(ids, id)
	}
	nm := 1 + rng.Intn(12)
	for i := 0; i < nm; i++ {
		m := AssignMember{ID: fmt.Sprintf("m%02d", i)}
		for _, id := range ids {
			if homogeneous || rng.Intn(2) == 0 {
				m.Topics = append(m.Topics, id)
			}
		}
		in.Members = append(in.Members, m)
	}
	return in
}

// checkComplete: every partition of a topic somebody subscribes to goes to exactly one member
// subscribed to it, and nothing else is assigned.
func checkComplete(t *testing.T, in AssignInput, out map[string]Parts) {
	t.Helper()
	subs := map[string]map[[16]byte]bool{}
	wanted := map[[16]byte]bool{}
	for _, m := range in.Members {
		subs[m.ID] = map[[16]byte]bool{}
		for _, id := range m.Topics {
			subs[m.ID][id] = true
			wanted[id] = true
		}
		if _, ok := out[m.ID]; !ok {
			t.Fatalf("member %s has no entry", m.ID)
		}
	}
	seen := map[TP]string{}
	for id, ps := range out {
		for tp := range ps {
			if !subs[id][tp.Topic] || tp.Partition < 0 || tp.Partition >= in.Topics[tp.Topic] {
				t.Fatalf("%s got %v it cannot have", id, tp)
			}
			if o, ok := seen[tp]; ok {
				t.Fatalf("%v assigned to %s and %s", tp, o, id)
			}
			seen[tp] = id
		}
	}
	for id := range wanted {
		for p := int32(0); p < in.Topics[id]; p++ {
			if _, ok := seen[TP{Topic: id, Partition: p}]; !ok {
				t.Fatalf("partition %v-%d unassigned", id, p)
			}
		}
	}
}

func spread(out map[string]Parts, topic *[16]byte) int {
	lo, hi := 1<<30, -1
	for _, ps := range out {
		n := 0
		for tp := range ps {
			if topic == nil || tp.Topic == *topic {
				n++
			}
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	return hi - lo
}

func TestUniformProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 500; i++ {
		homogeneous := i%2 == 0
		in := randomInput(rng, homogeneous)
		out := uniform(in)
		checkComplete(t, in, out)
		if homogeneous && spread(out, nil) > 1 {
			t.Fatalf("case %d: unbalanced %v", i, out)
		}
		// Sticky: the same membership again changes nothing.
		for j := range in.Members {
			in.Members[j].Previous = out[in.Members[j].ID]
		}
		again := uniform(in)
		for id := range out {
			if !again[id].Equal(out[id]) {
				t.Fatalf("case %d: not sticky for %s", i, id)
			}
		}
		// A member leaving moves only its own partitions (homogeneous case).
		if homogeneous && len(in.Members) > 1 {
			gone := in.Members[0].ID
			rest := AssignInput{Topics: in.Topics, Members: in.Members[1:]}
			after := uniform(rest)
			checkComplete(t, rest, after)
			if spread(after, nil) > 1 {
				t.Fatalf("case %d: unbalanced after leave", i)
			}
			moved := 0
			for id, ps := range after {
				for tp := range ps {
					if !out[id].has(tp) && !out[gone].has(tp) {
						moved++
					}
				}
			}
			// Rebalancing the remainder may move at most one partition per member.
			if moved > len(rest.Members) {
				t.Fatalf("case %d: %d partitions moved that the leaver did not hold", i, moved)
			}
		}
	}
}

func TestRangeProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for i := 0; i < 500; i++ {
		in := randomInput(rng, i%2 == 0)
		out := rangeAssign(in)
		checkComplete(t, in, out)
		for id := range in.Topics {
			sub := map[string]Parts{}
			for _, m := range in.Members {
				for _, t := range m.Topics {
					if t == id {
						sub[m.ID] = out[m.ID]
					}
				}
			}
			if len(sub) > 0 && spread(sub, &id) > 1 {
				t.Fatalf("case %d: topic unbalanced", i)
			}
		}
		for j := range in.Members {
			in.Members[j].Previous = out[in.Members[j].ID]
		}
		again := rangeAssign(in)
		for id := range out {
			if !again[id].Equal(out[id]) {
				t.Fatalf("case %d: not sticky", i)
			}
		}
	}
}

func TestRangeIsContiguous(t *testing.T) {
	in := AssignInput{Topics: map[[16]byte]int32{tid("t"): 5}, Members: []AssignMember{{ID: "a", Topics: [][16]byte{tid("t")}}, {ID: "b", Topics: [][16]byte{tid("t")}}}}
	out := rangeAssign(in)
	if !out["a"].Equal(parts("t", 0, 1, 2)) || !out["b"].Equal(parts("t", 3, 4)) {
		t.Fatalf("got %v", out)
	}
}

// Kafka 4.4's range is not sticky: a member that sorts first takes the first range and shifts
// everybody else's, whatever they held before.
func TestRangeShiftsRangesLikeKafka(t *testing.T) {
	sub := [][16]byte{tid("t")}
	in := AssignInput{Topics: map[[16]byte]int32{tid("t"): 5}, Members: []AssignMember{
		{ID: "a", Topics: sub, Previous: parts("t", 0, 1, 2)},
		{ID: "b", Topics: sub, Previous: parts("t", 3, 4)},
		{ID: "0", Topics: sub},
	}}
	out := rangeAssign(in)
	if !out["0"].Equal(parts("t", 0, 1)) || !out["a"].Equal(parts("t", 2, 3)) || !out["b"].Equal(parts("t", 4)) {
		t.Fatalf("got %v", out)
	}
}

// Static members come first, by instance id, then the others by member id, so a rolling
// restart of static members (new member ids) gives each instance its ranges back.
func TestRangeOrdersStaticMembersByInstanceID(t *testing.T) {
	sub := [][16]byte{tid("t"), tid("u")}
	in := AssignInput{Topics: map[[16]byte]int32{tid("t"): 3, tid("u"): 2}, Members: []AssignMember{
		{ID: "m1", InstanceID: "z", Topics: sub},
		{ID: "m0", Topics: sub},
		{ID: "m2", InstanceID: "a", Topics: sub},
	}}
	out := rangeAssign(in)
	want := map[string]Parts{"m2": parts("t", 0), "m1": parts("t", 1), "m0": parts("t", 2)}
	want["m2"][TP{Topic: tid("u"), Partition: 0}] = struct{}{}
	want["m1"][TP{Topic: tid("u"), Partition: 1}] = struct{}{}
	for id, w := range want {
		if !out[id].Equal(w) {
			t.Fatalf("%s got %v, want %v", id, out[id], w)
		}
	}
}

// With different subscriptions each topic is shared among its own subscribers, in the same
// member order.
func TestRangeHeterogeneous(t *testing.T) {
	in := AssignInput{Topics: map[[16]byte]int32{tid("t"): 4, tid("u"): 3}, Members: []AssignMember{
		{ID: "a", Topics: [][16]byte{tid("t")}},
		{ID: "b", Topics: [][16]byte{tid("t"), tid("u")}},
		{ID: "c", Topics: [][16]byte{tid("u")}},
	}}
	out := rangeAssign(in)
	wantB := parts("t", 2, 3)
	wantB[TP{Topic: tid("u"), Partition: 0}] = struct{}{}
	wantB[TP{Topic: tid("u"), Partition: 1}] = struct{}{}
	if !out["a"].Equal(parts("t", 0, 1)) || !out["b"].Equal(wantB) || !out["c"].Equal(parts("u", 2)) {
		t.Fatalf("got %v", out)
	}
}

// assignInput is the benchmarks' group: 50 topics of members/5+1 partitions (100 000
// partitions at 10 000 members, as Kafka's assignor benchmark), every member on all of them, or
// with heterogeneous set, member i on the topics t with t%4 != i%4 (four subscriptions).
func assignInput(members int, heterogeneous bool) AssignInput {
	in := AssignInput{Topics: map[[16]byte]int32{}}
	var ids [][16]byte
	for i := 0; i < 50; i++ {
		id := tid(fmt.Sprintf("t%d", i))
		in.Topics[id] = int32(members/5 + 1)
		ids = append(ids, id)
	}
	for i := 0; i < members; i++ {
		m := AssignMember{ID: fmt.Sprintf("m%05d", i), Topics: ids}
		if heterogeneous {
			m.Topics = nil
			for t, id := range ids {
				if t%4 != i%4 {
					m.Topics = append(m.Topics, id)
				}
			}
		}
		in.Members = append(in.Members, m)
	}
	return in
}

// stickyInput is assignInput after a first assignment, with one member gone: the common
// reassignment.
func stickyInput(tb testing.TB, name string, members int, heterogeneous bool) AssignInput {
	in := assignInput(members, heterogeneous)
	out, err := Assign(name, in)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range in.Members {
		in.Members[i].Previous = out[in.Members[i].ID]
	}
	in.Members = in.Members[1:]
	return in
}

func benchmarkAssign(b *testing.B, name string, members int, heterogeneous ...bool) {
	in := stickyInput(b, name, members, len(heterogeneous) > 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Assign(name, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUniform10(b *testing.B)    { benchmarkAssign(b, "uniform", 10) }
func BenchmarkUniform1000(b *testing.B)  { benchmarkAssign(b, "uniform", 1000) }
func BenchmarkUniform10000(b *testing.B) { benchmarkAssign(b, "uniform", 10000) }
func BenchmarkRange10(b *testing.B)      { benchmarkAssign(b, "range", 10) }
func BenchmarkRange1000(b *testing.B)    { benchmarkAssign(b, "range", 1000) }
func BenchmarkRange10000(b *testing.B)   { benchmarkAssign(b, "range", 10000) }

func BenchmarkUniformHeterogeneous10(b *testing.B)    { benchmarkAssign(b, "uniform", 10, true) }
func BenchmarkUniformHeterogeneous1000(b *testing.B)  { benchmarkAssign(b, "uniform", 1000, true) }
func BenchmarkUniformHeterogeneous10000(b *testing.B) { benchmarkAssign(b, "uniform", 10000, true) }

// A sticky reassignment of a large group must not rebuild every member's set: the members
// whose partitions did not change get their previous set back, so the work and the garbage
// are those of the members that changed. 1 000 members, 10 000 partitions; a rebuild of every
// set costs over 14 000 allocations.
func TestStickyReassignmentReusesUnchangedSets(t *testing.T) {
	for _, name := range []string{"uniform", "range"} {
		in := stickyInput(t, name, 1000, false)
		allocs := testing.AllocsPerRun(3, func() {
			if _, err := Assign(name, in); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 2000 {
			t.Errorf("%s: %.0f allocations for a sticky reassignment of 1 000 members", name, allocs)
		}
	}
}

// benchmarkTargets times what the heartbeat does when the group epoch moves: resolve every
// member's subscription against the catalog and run the assignor, after one member left.
func benchmarkTargets(b *testing.B, n int) {
	targets := targetsInput(b, n)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		targets()
	}
}

// targetsInput builds a group of n members on 50 topics, assigns it, removes one member and
// returns the recomputation.
func targetsInput(tb testing.TB, n int) func() {
	cat := catalog{}
	var names []string
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("t%d", i)
		cat[name] = &meta.Topic{Name: name, ID: tid(name), Partitions: int32(n/5 + 1)}
		names = append(names, name)
	}
	members := map[string]*Member{}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m%05d", i)
		// Each member decodes its own copy of the subscription, as from its own request.
		members[id] = &Member{ID: id, SubscribedTopicNames: slices.Clone(names)}
	}
	g := &Group{ID: "g"}
	prev, err := computeTargets(members, nil, "uniform", cat, g, nil)
	if err != nil {
		tb.Fatal(err)
	}
	delete(members, "m00000")
	return func() {
		if _, err := computeTargets(members, prev, "uniform", cat, g, nil); err != nil {
			tb.Fatal(err)
		}
	}
}

// Members with the same subscription are resolved against the catalog once, not once each:
// 1 000 members on 50 topics cost over 26 000 allocations when each was resolved alone.
func TestTargetsResolveEachSubscriptionOnce(t *testing.T) {
	targets := targetsInput(t, 1000)
	if allocs := testing.AllocsPerRun(3, targets); allocs > 3000 {
		t.Errorf("%.0f allocations to recompute the targets of 1 000 members", allocs)
	}
}

func BenchmarkTargets1000(b *testing.B)  { benchmarkTargets(b, 1000) }
func BenchmarkTargets10000(b *testing.B) { benchmarkTargets(b, 10000) }
