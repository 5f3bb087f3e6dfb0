package membership

import (
	"encoding/json"
	"fmt"
	"sort"
)

// protocolType is the classic group protocol type of coordinatord nodes, as Kafka Connect
// uses "connect": no consumer joins such a group by mistake.
const protocolType = "coordinatord"

// protocolName names the assignment protocol (and the metadata and assignment encodings below).
const protocolName = "shards-v1"

// memberMeta is what a node says of itself when it joins.
type memberMeta struct {
	Node   int32  `json:"node"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Shards int32  `json:"shards"`
	// Owned are the shards the node holds (loading or serving) as it joins. The leader never
	// gives one of them to another node in the same generation: the holder first lets go of
	// it and rejoins, so the old owner has stopped before the new one is told to load.
	Owned []int32 `json:"owned"`
	// Topic and Cluster are the node's log.kafka.topic and cluster.id (empty from versions
	// before them). A member writing another topic is refused (its shards' state would not be
	// where the next owner reads it), and a node about to start on a topic that the live
	// members of another cluster.id's group write refuses to start (CheckStateTopicUnshared).
	Topic   string `json:"topic,omitempty"`
	Cluster string `json:"cluster,omitempty"`
}

// Node is a coordinatord node of the cluster, as clients should reach it.
type Node struct {
	ID     int32  `json:"node"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Member string `json:"member"`
}

// assignment is what the leader gives every member: the whole map, so that every node can
// answer FindCoordinator for any group and list every node in Metadata.
type assignment struct {
	Nodes []Node `json:"nodes"`
	// Owners[i] indexes Nodes, or is -1: shard i is being handed over (its old owner lets go
	// first) or its node is invalid.
	Owners []int32 `json:"owners"`
	// Refused, when set, is why the leader gave this member nothing (a duplicate node.id, a
	// different offsets.topic.num.partitions).
	Refused string `json:"refused,omitempty"`
}

type joined struct {
	member string
	meta   memberMeta
}

// assign computes the shard map from the members' metadata: balanced (every valid node gets
// shards/n or one more), sticky (a node keeps what it holds up to its quota), and never handing
// a shard held by one member to another in the same generation (held elsewhere, it stays -1
// until its holder rejoins without it). refused names members given nothing, and why.
func assign(members []joined, shards int32) (a assignment, refused map[string]string) {
	return assignOn(members, shards, "", "")
}

// assignOn is assign for a leader writing topic under cluster.id cluster: a member that says it
// writes another topic, or under another cluster.id (whose transactional ids a load would not
// fence), is refused. An empty value, from a version that does not say, is taken as the same.
func assignOn(members []joined, shards int32, topic, cluster string) (a assignment, refused map[string]string) {
	refused = map[string]string{}
	sort.Slice(members, func(i, j int) bool {
		if members[i].meta.Node != members[j].meta.Node {
			return members[i].meta.Node < members[j].meta.Node
		}
		// Of two nodes with one node.id, the one already serving keeps its shards.
		if a, b := len(members[i].meta.Owned), len(members[j].meta.Owned); a != b {
			return a > b
		}
		return members[i].member < members[j].member
	})
	var valid []joined
	seen := map[int32]bool{}
	for _, m := range members {
		switch {
		case m.meta.Shards != shards:
			refused[m.member] = fmt.Sprintf("node %d has offsets.topic.num.partitions=%d, the leader %d", m.meta.Node, m.meta.Shards, shards)
		case topic != "" && m.meta.Topic != "" && m.meta.Topic != topic:
			refused[m.member] = fmt.Sprintf("node %d has log.kafka.topic=%s, the leader %s", m.meta.Node, m.meta.Topic, topic)
		case cluster != "" && m.meta.Cluster != "" && m.meta.Cluster != cluster:
			refused[m.member] = fmt.Sprintf("node %d has cluster.id=%s, the leader %s", m.meta.Node, m.meta.Cluster, cluster)
		case seen[m.meta.Node]:
			refused[m.member] = fmt.Sprintf("node.id %d is used by another coordinatord node of this cluster", m.meta.Node)
		default:
			seen[m.meta.Node] = true
			valid = append(valid, m)
		}
	}
	a.Owners = make([]int32, shards)
	for i := range a.Owners {
		a.Owners[i] = -1
	}
	for _, m := range valid {
		a.Nodes = append(a.Nodes, Node{ID: m.meta.Node, Host: m.meta.Host, Port: m.meta.Port, Member: m.member})
	}
	for _, m := range members {
		if _, ok := refused[m.member]; ok {
			// A refused member's claims still block its shards: it holds them until it
			// learns it was refused.
			valid = append(valid, joined{member: m.member, meta: memberMeta{Owned: m.meta.Owned}})
		}
	}
	n := len(a.Nodes)
	if n == 0 {
		return a, refused
	}
	claims := make([][]int, shards)
	for mi, m := range valid {
		for _, s := range m.meta.Owned {
			if s >= 0 && s < shards {
				claims[s] = append(claims[s], mi)
			}
		}
	}
	// Quotas: the nodes holding the most get the extra shards, which moves the fewest.
	held := make([]int, n)
	for s := range claims {
		if len(claims[s]) == 1 && claims[s][0] < n {
			held[claims[s][0]]++
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return held[order[i]] > held[order[j]] })
	quota := make([]int, n)
	base, extra := int(shards)/n, int(shards)%n
	for rank, i := range order {
		quota[i] = base
		if rank < extra {
			quota[i]++
		}
	}
	load := make([]int, n)
	var free []int32
	for s := int32(0); s < shards; s++ {
		c := claims[s]
		switch {
		case len(c) == 0:
			free = append(free, s)
		case len(c) == 1 && c[0] < n && load[c[0]] < quota[c[0]]:
			a.Owners[s] = int32(c[0])
			load[c[0]]++
		}
		// Otherwise held by a member over its quota, by several or by a refused one: -1 for
		// now; once its holders let go, the next generation hands it on.
	}
	for _, s := range free {
		best := -1
		for i := 0; i < n; i++ {
			if load[i] < quota[i] && (best < 0 || load[i] < load[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		a.Owners[s] = int32(best)
		load[best]++
	}
	return a, refused
}

func encodeMeta(m memberMeta) []byte {
	b, _ := json.Marshal(m)
	return b
}

func decodeMeta(b []byte) (memberMeta, error) {
	var m memberMeta
	err := json.Unmarshal(b, &m)
	return m, err
}

func encodeAssignment(a assignment) []byte {
	b, _ := json.Marshal(a)
	return b
}

func decodeAssignment(b []byte) (assignment, error) {
	var a assignment
	err := json.Unmarshal(b, &a)
	return a, err
}
