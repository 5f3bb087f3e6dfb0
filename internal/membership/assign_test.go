package membership

import "testing"

func owners(t *testing.T, a assignment) map[int32][]int32 {
	t.Helper()
	out := map[int32][]int32{}
	for s, o := range a.Owners {
		id := int32(-1)
		if o >= 0 {
			id = a.Nodes[o].ID
		}
		out[id] = append(out[id], int32(s))
	}
	return out
}

func TestAssignBalancesFreeShards(t *testing.T) {
	a, refused := assign([]joined{
		{member: "b", meta: memberMeta{Node: 2, Shards: 10, Owned: []int32{}}},
		{member: "a", meta: memberMeta{Node: 1, Shards: 10, Owned: []int32{}}},
		{member: "c", meta: memberMeta{Node: 3, Shards: 10, Owned: []int32{}}},
	}, 10)
	if len(refused) != 0 {
		t.Fatalf("refused %v", refused)
	}
	o := owners(t, a)
	if len(o[-1]) != 0 {
		t.Fatalf("unassigned shards %v", o[-1])
	}
	for _, n := range []int32{1, 2, 3} {
		if c := len(o[n]); c < 3 || c > 4 {
			t.Fatalf("node %d got %d shards: %v", n, c, o)
		}
	}
}

// A node joining takes nothing a live node holds in the same generation: the holder lets go
// first (it stays -1), and only the next generation hands it on.
func TestAssignNeverHandsOverAHeldShardInOneGeneration(t *testing.T) {
	all := []int32{0, 1, 2, 3, 4, 5}
	a, _ := assign([]joined{
		{member: "a", meta: memberMeta{Node: 1, Shards: 6, Owned: all}},
		{member: "b", meta: memberMeta{Node: 2, Shards: 6, Owned: []int32{}}},
	}, 6)
	o := owners(t, a)
	if len(o[2]) != 0 || len(o[1]) != 3 || len(o[-1]) != 3 {
		t.Fatalf("first generation: %v", o)
	}
	a, _ = assign([]joined{
		{member: "a", meta: memberMeta{Node: 1, Shards: 6, Owned: o[1]}},
		{member: "b", meta: memberMeta{Node: 2, Shards: 6, Owned: []int32{}}},
	}, 6)
	o2 := owners(t, a)
	if len(o2[1]) != 3 || len(o2[2]) != 3 || len(o2[-1]) != 0 {
		t.Fatalf("second generation: %v", o2)
	}
	for i, s := range o[1] {
		if o2[1][i] != s {
			t.Fatalf("node 1 did not keep its shards: %v then %v", o, o2)
		}
	}
}

func TestAssignRefusesDuplicateNodeIDsAndKeepsTheirShardsBlocked(t *testing.T) {
	a, refused := assign([]joined{
		{member: "a", meta: memberMeta{Node: 1, Shards: 4, Owned: []int32{3}}},
		{member: "z", meta: memberMeta{Node: 1, Shards: 4, Owned: []int32{2}}},
		{member: "y", meta: memberMeta{Node: 1, Shards: 4, Owned: []int32{0, 1}}},
	}, 4)
	// y serves the most: it keeps node.id 1; a and z are refused, and what they hold stays
	// unassigned until they let go.
	if refused["a"] == "" || refused["z"] == "" || refused["y"] != "" {
		t.Fatalf("refused %v", refused)
	}
	o := owners(t, a)
	if len(o[-1]) != 2 || len(o[1]) != 2 || o[1][0] != 0 || o[1][1] != 1 {
		t.Fatalf("owners %v", o)
	}
}
