package membership

import (
	"strings"
	"testing"
)

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

// A member whose offsets.topic.num.partitions differs from the leader's maps groups to other
// shards: given a shard, it would serve groups another node serves too. It gets nothing, and
// what it holds stays unassigned until it lets go.
func TestAssignRefusesAMemberWithAnotherShardCount(t *testing.T) {
	a, refused := assign([]joined{
		{member: "a", meta: memberMeta{Node: 1, Shards: 4, Owned: []int32{}}},
		{member: "b", meta: memberMeta{Node: 2, Shards: 8, Owned: []int32{1}}},
	}, 4)
	if refused["b"] == "" || refused["a"] != "" {
		t.Fatalf("refused %v, want b alone", refused)
	}
	o := owners(t, a)
	if len(o[2]) != 0 || len(o[-1]) != 1 || o[-1][0] != 1 || len(o[1]) != 3 {
		t.Fatalf("owners %v, want node 1 to get 0, 2, 3 and shard 1 unassigned", o)
	}
}

// Two members can both hold a shard (one still closing it after an eviction while the other
// loaded it): the leader gives it to neither until one of them lets go, or both would serve it.
func TestAssignGivesAShardTwoMembersHoldToNobody(t *testing.T) {
	a, _ := assign([]joined{
		{member: "a", meta: memberMeta{Node: 1, Shards: 4, Owned: []int32{0, 1}}},
		{member: "b", meta: memberMeta{Node: 2, Shards: 4, Owned: []int32{1, 2}}},
	}, 4)
	if a.Owners[1] != -1 {
		t.Fatalf("shard 1, held by both, given to node %d (owners %v)", a.Nodes[a.Owners[1]].ID, owners(t, a))
	}
	o := owners(t, a)
	if len(o[1]) == 0 || o[1][0] != 0 || len(o[2]) == 0 || o[2][0] != 2 {
		t.Fatalf("owners %v: each keeps the shard it alone holds", o)
	}
}

// A member writing another log.kafka.topic, or under another cluster.id (a load fences only its
// own cluster.id's transactional ids), would serve shards whose state the others read elsewhere
// or cannot fence: it gets nothing. A member that does not say (an earlier version) is taken as
// the same.
func TestAssignRefusesAMemberOfAnotherTopicOrClusterID(t *testing.T) {
	a, refused := assignOn([]joined{
		{member: "a", meta: memberMeta{Node: 1, Shards: 4, Owned: []int32{}, Topic: "state", Cluster: "c1"}},
		{member: "b", meta: memberMeta{Node: 2, Shards: 4, Owned: []int32{}, Topic: "other", Cluster: "c1"}},
		{member: "c", meta: memberMeta{Node: 3, Shards: 4, Owned: []int32{}, Topic: "state", Cluster: "c2"}},
		{member: "d", meta: memberMeta{Node: 4, Shards: 4, Owned: []int32{}}},
	}, 4, "state", "c1")
	if refused["a"] != "" || refused["d"] != "" || !strings.Contains(refused["b"], "log.kafka.topic=other") ||
		!strings.Contains(refused["c"], "cluster.id=c2") {
		t.Fatalf("refused %v, want b (topic) and c (cluster.id)", refused)
	}
	o := owners(t, a)
	if len(o[1]) != 2 || len(o[4]) != 2 || len(o[2]) != 0 || len(o[3]) != 0 {
		t.Fatalf("owners %v, want nodes 1 and 4 to share the shards", o)
	}
}
