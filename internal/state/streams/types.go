// Package streams is the Kafka Streams group state machine (KIP-1071, spec streams-groups):
// groups, members, topologies, target and current assignments and the reconciliation engine.
// Every operation is a pure function of (state, request, now) that returns records and a
// response; state changes only through Replay of those records. A few facts are soft state,
// as in Kafka (spec §10.4): reported task offsets, the endpoint-information epoch and the
// shutdown request live on the group object of the shard's latest state, are never persisted
// and are lost on reload.
package streams

import (
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
)

// Task identifies one task (subtopology, partition).
type Task = assign.Task

// Role is a task role: active, standby or warm-up.
type Role int

const (
	Active Role = iota
	Standby
	Warmup
)

var roleNames = [3]string{"active", "standby", "warm-up"}

// Roles are tasks per role. The value of an active task is its assignment epoch (spec §4.1);
// it is unused (0) for standby and warm-up tasks and in targets.
type Roles [3]map[Task]int32

// Empty reports whether no role has a task.
func (r Roles) Empty() bool { return len(r[0]) == 0 && len(r[1]) == 0 && len(r[2]) == 0 }

// Clone copies the maps.
func (r Roles) Clone() Roles {
	var out Roles
	for i := range r {
		if len(r[i]) > 0 {
			out[i] = make(map[Task]int32, len(r[i]))
			for t, e := range r[i] {
				out[i][t] = e
			}
		}
	}
	return out
}

// SameTasks compares the task sets, ignoring epochs.
func (r Roles) SameTasks(o Roles) bool {
	for i := range r {
		if len(r[i]) != len(o[i]) {
			return false
		}
		for t := range r[i] {
			if _, ok := o[i][t]; !ok {
				return false
			}
		}
	}
	return true
}

// Equal compares tasks and epochs.
func (r Roles) Equal(o Roles) bool {
	for i := range r {
		if len(r[i]) != len(o[i]) {
			return false
		}
		for t, e := range r[i] {
			if oe, ok := o[i][t]; !ok || oe != e {
				return false
			}
		}
	}
	return true
}

func (r *Roles) add(role Role, t Task, epoch int32) {
	if role != Active {
		epoch = 0
	}
	if r[role] == nil {
		r[role] = map[Task]int32{}
	}
	r[role][t] = epoch
}

// sortedTasks lists a role's tasks grouped by subtopology (sorted by id), partitions ascending.
func sortedTasks(m map[Task]int32) []subtopologyTasks {
	by := map[string][]int32{}
	for t := range m {
		by[t.Subtopology] = append(by[t.Subtopology], t.Partition)
	}
	ids := make([]string, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]subtopologyTasks, 0, len(ids))
	for _, id := range ids {
		ps := by[id]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		epochs := make([]int32, len(ps))
		for i, p := range ps {
			epochs[i] = m[Task{Subtopology: id, Partition: p}]
		}
		out = append(out, subtopologyTasks{ID: id, Partitions: ps, Epochs: epochs})
	}
	return out
}

type subtopologyTasks struct {
	ID         string
	Partitions []int32
	Epochs     []int32
}

// MemberState is a member's reconciliation state (spec §4.4), persisted as int8.
type MemberState int8

const (
	Stable          MemberState = 1
	UnrevokedTasks  MemberState = 2
	UnreleasedTasks MemberState = 3
	UnknownState    MemberState = 127
)

func (s MemberState) String() string {
	switch s {
	case Stable:
		return "STABLE"
	case UnrevokedTasks:
		return "UNREVOKED_TASKS"
	case UnreleasedTasks:
		return "UNRELEASED_TASKS"
	}
	return "UNKNOWN"
}

// Endpoint is a member's user endpoint for Interactive Queries.
type Endpoint struct {
	Host string
	Port uint16
}

// Member is one member of a streams group: its metadata (MemberMetadata record) and its
// current assignment (CurrentMemberAssignment record).
type Member struct {
	ID                 string
	InstanceID         *string
	RackID             *string
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	TopologyEpoch      int32
	ProcessID          string
	UserEndpoint       *Endpoint
	ClientTags         map[string]string
	// Classic is set for a member that talks the classic protocol (online migration).
	Classic *ClassicMember

	Epoch         int32
	PreviousEpoch int32
	State         MemberState
	Assigned      Roles
	Pending       Roles // pending revocation

	hasMetadata bool
	hasCurrent  bool
}

func newMember(id string) *Member {
	return &Member{ID: id, State: Stable, RebalanceTimeoutMs: -1, TopologyEpoch: -1}
}

// shallow copies the member's fields but shares its task and tag maps. State maps are never
// changed in place (Replay and every operation build new ones), so a copy whose maps are only
// read or replaced is safe and costs nothing per task: a steady heartbeat makes one.
func (m *Member) shallow() *Member {
	c := *m
	return &c
}

func (m *Member) clone() *Member {
	c := *m
	c.Assigned = m.Assigned.Clone()
	c.Pending = m.Pending.Clone()
	if m.ClientTags != nil {
		c.ClientTags = make(map[string]string, len(m.ClientTags))
		for k, v := range m.ClientTags {
			c.ClientTags[k] = v
		}
	}
	return &c
}

// GroupState is a streams group's state (spec §4.3).
type GroupState int

const (
	Empty GroupState = iota
	NotReady
	Assigning
	Reconciling
	StableGroup
)

// String is the wire form used by describe and ListGroups.
func (s GroupState) String() string {
	return [...]string{"Empty", "NotReady", "Assigning", "Reconciling", "Stable"}[s]
}

// Group is one streams group.
type Group struct {
	ID                     string
	Epoch                  int32
	MetadataHash           int64
	ValidatedTopologyEpoch int32
	AssignmentConfigs      map[string]string
	StoredDescriptionEpoch int32
	FailedDescriptionEpoch int32
	AssignmentEpoch        int32
	AssignmentTimestamp    int64
	Topology               *Topology
	Members                map[string]*Member
	Targets                map[string]Roles

	// Derived from the records by Replay, never persisted: which members hold each task, how
	// many targets hold warm-ups, and which member holds each instance id. They keep a
	// heartbeat's cost independent of group size.
	owners      taskOwners
	warmTargets int
	instances   map[string]string
	// stableAt counts the members in state Stable at each member epoch, so whether every
	// member has reconciled to the target (the group is not Reconciling) is known without
	// visiting the members.
	stableAt map[int32]int

	hasMetadata bool
	soft        soft
}

// soft is per-group state that Kafka does not persist either (spec §10.4).
type soft struct {
	taskOffsets    map[string]map[Task]int64
	taskEndOffsets map[string]map[Task]int64
	endpointEpoch  int32
	// changedAt is when a heartbeat last bumped the group epoch (Unix ms, 0 after a load): the
	// quiet-assignment rule waits for it (assignmentHeld). Losing it on a restart only lets one
	// assignment come sooner.
	changedAt  int64
	shutdownBy string
	// shutdownSent are the classic members that received the shutdown assignment (§4.12 of
	// online-migration): until then their heartbeats ask them to rejoin.
	shutdownSent map[string]bool
	// catalog is the topic catalog the group's last heartbeat saw; the initial-delay timer
	// configures the topology with it, as Kafka uses the configured topology it keeps.
	catalog Catalog
	// configured caches the stored topology configured against one catalog snapshot.
	configured configuredCache
}

// configuredCache is Configure and metadataHash of the group's stored topology against an
// immutable catalog snapshot. Both are functions of the two alone and a snapshot is replaced,
// never changed, when a topic changes, so every heartbeat between two topic changes reuses
// them instead of redoing the topology's work.
type configuredCache struct {
	topology   *Topology
	snap       *meta.Snapshot
	configured *Configured
	hash       int64
}

// configure returns Configure(t, cat) and metadataHash(t, cat), cached for the stored topology
// and a *meta.Snapshot catalog (what the server passes). The result is shared: read it only.
func (g *Group) configure(t *Topology, cat Catalog) (*Configured, int64, error) {
	snap, _ := cat.(*meta.Snapshot)
	if c := &g.soft.configured; snap != nil && c.snap == snap && c.topology == t {
		return c.configured, c.hash, nil
	}
	configured, err := Configure(t, cat)
	if err != nil {
		return nil, 0, err
	}
	h := metadataHash(t, cat)
	if snap != nil && t == g.Topology {
		g.soft.configured = configuredCache{topology: t, snap: snap, configured: configured, hash: h}
	}
	return configured, h, nil
}

func newGroup(id string) *Group {
	return &Group{
		ID: id, Epoch: 1, AssignmentEpoch: 1, ValidatedTopologyEpoch: -1,
		StoredDescriptionEpoch: -1, FailedDescriptionEpoch: -1,
		AssignmentConfigs: map[string]string{},
		Members:           map[string]*Member{}, Targets: map[string]Roles{},
		owners: newTaskOwners(), instances: map[string]string{}, stableAt: map[int32]int{},
	}
}

// State computes the group state (spec §4.3).
func (g *Group) State() GroupState {
	switch {
	case len(g.Members) == 0:
		return Empty
	case g.Topology == nil || g.Topology.Epoch != g.ValidatedTopologyEpoch:
		return NotReady
	case g.Epoch > g.AssignmentEpoch:
		return Assigning
	}
	for _, m := range g.Members {
		if m.State != Stable || m.Epoch != g.AssignmentEpoch {
			return Reconciling
		}
	}
	return StableGroup
}

// countStable adds d to the stable-member count of m's epoch if m is Stable; Replay calls it
// with -1 before it changes a member's epoch or state (or drops the member) and +1 after.
func (g *Group) countStable(m *Member, d int) {
	if m.State != Stable {
		return
	}
	if g.stableAt[m.Epoch] += d; g.stableAt[m.Epoch] == 0 {
		delete(g.stableAt, m.Epoch)
	}
}

// stableIndex is the stableAt count rebuilt from the members (Replay keeps it incrementally).
func stableIndex(members map[string]*Member) map[int32]int {
	out := map[int32]int{}
	for _, m := range members {
		if m.State == Stable {
			out[m.Epoch]++
		}
	}
	return out
}

// staticMember returns the member holding an instance id.
func (g *Group) staticMember(instance string) *Member {
	if m := g.Members[g.instances[instance]]; m != nil && m.InstanceID != nil && *m.InstanceID == instance {
		return m
	}
	return nil
}

// instanceIndex is the instances index rebuilt from the members (Replay keeps it incrementally).
func instanceIndex(members map[string]*Member) map[string]string {
	out := map[string]string{}
	for id, m := range members {
		if m.InstanceID != nil {
			out[*m.InstanceID] = id
		}
	}
	return out
}

// unindexInstance drops m's instance id from the index if the index names m for it.
func (g *Group) unindexInstance(m *Member) {
	if m.InstanceID != nil && g.instances[*m.InstanceID] == m.ID {
		delete(g.instances, *m.InstanceID)
	}
}

// State is every streams group of a shard.
type State struct {
	Groups map[string]*Group
}

// New returns an empty state.
func New() *State { return &State{Groups: map[string]*Group{}} }

// Owns reports whether a streams group with this id exists.
func (s *State) Owns(group string) bool { _, ok := s.Groups[group]; return ok }

// Group returns a group or nil.
func (s *State) Group(id string) *Group { return s.Groups[id] }
