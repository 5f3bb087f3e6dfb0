// Package consumer is the KIP-848 consumer group state machine (ConsumerGroupHeartbeat): groups,
// members, subscriptions by topic names and by RE2 regular expression, the target assignment
// the server-side assignors compute, and the reconciliation that moves each member toward its
// target, revoking before assigning. As in internal/state/streams, every operation is a pure
// function of (state, request, now) that returns records and a response; state changes only
// through Replay of those records.
package consumer

import (
	"reflect"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/meta"
)

// TP is one partition of a topic, named by the topic's id as the protocol does.
type TP struct {
	Topic     [16]byte
	Partition int32
}

// Parts is a set of partitions. State sets are never changed in place: Replay and every
// operation build new ones, so members may share them.
type Parts map[TP]struct{}

func (p Parts) has(tp TP) bool { _, ok := p[tp]; return ok }

// Equal compares two sets.
func (p Parts) Equal(o Parts) bool {
	if len(p) != len(o) {
		return false
	}
	// The assignors hand an unchanged set back as it was: no need to look at its entries.
	if len(p) > 0 && reflect.ValueOf(p).UnsafePointer() == reflect.ValueOf(o).UnsafePointer() {
		return true
	}
	for tp := range p {
		if !o.has(tp) {
			return false
		}
	}
	return true
}

// TopicParts is one topic's partitions, ascending.
type TopicParts struct {
	Topic      [16]byte
	Partitions []int32
}

// Sorted lists the set by topic id, partitions ascending: the order of records and responses.
func (p Parts) Sorted() []TopicParts {
	by := map[[16]byte][]int32{}
	for tp := range p {
		by[tp.Topic] = append(by[tp.Topic], tp.Partition)
	}
	ids := make([][16]byte, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	out := make([]TopicParts, len(ids))
	for i, id := range ids {
		ps := by[id]
		sort.Slice(ps, func(a, b int) bool { return ps[a] < ps[b] })
		out[i] = TopicParts{Topic: id, Partitions: ps}
	}
	return out
}

// MemberState is a member's reconciliation state, persisted as int16 with Kafka's numbers.
type MemberState int8

const (
	Stable               MemberState = 1
	UnrevokedPartitions  MemberState = 2
	UnreleasedPartitions MemberState = 3
	UnknownState         MemberState = 127
)

func (s MemberState) String() string {
	switch s {
	case Stable:
		return "STABLE"
	case UnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case UnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// Member is one member: its metadata (MemberMetadata record) and its current assignment
// (CurrentMember record).
type Member struct {
	ID                 string
	InstanceID         *string
	RackID             *string
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	// SubscribedTopicNames and SubscribedTopicRegex ("" for none) are the subscription.
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	ServerAssignor       string

	Epoch         int32
	PreviousEpoch int32
	State         MemberState
	Assigned      Parts
	Pending       Parts // pending revocation

	// Classic is set for a member that speaks the classic protocol (JoinGroup/SyncGroup/
	// Heartbeat) inside the consumer group (online migration); nil for a consumer-protocol one.
	Classic *ClassicInfo

	hasMetadata bool
	hasCurrent  bool

	// sessionKey caches TimerKey(SessionTimer, group, ID), which every heartbeat re-arms: built
	// per heartbeat it was an allocation. Copies carry it along, so it is trusted only while it
	// still matches the group and ID (a replacement member renames a copy).
	sessionKey string
}

// sessionTimerKey is TimerKey(SessionTimer, group, m.ID), from the cache when it matches.
func (m *Member) sessionTimerKey(group string) string {
	if !isTimerKey(m.sessionKey, sessionPrefix, group, m.ID) {
		m.sessionKey = TimerKey(SessionTimer, group, m.ID)
	}
	return m.sessionKey
}

// isTimerKey reports whether key is prefix + group + "\x00" + member, without building it.
func isTimerKey(key, prefix, group, member string) bool {
	g := len(prefix)
	return len(key) == g+len(group)+1+len(member) && key[:g] == prefix && key[g:g+len(group)] == group &&
		key[g+len(group)] == 0 && key[g+len(group)+1:] == member
}

func newMember(id string) *Member {
	return &Member{ID: id, State: Stable, RebalanceTimeoutMs: -1}
}

func (m *Member) shallow() *Member { c := *m; return &c }

// GroupState is Kafka's ConsumerGroupState.
type GroupState int

const (
	Empty GroupState = iota
	Assigning
	Reconciling
	StableGroup
)

// String is the wire form of ConsumerGroupDescribe, DescribeGroups and ListGroups.
func (s GroupState) String() string {
	return [...]string{"Empty", "Assigning", "Reconciling", "Stable"}[s]
}

// Group is one consumer group.
type Group struct {
	ID              string
	Epoch           int32
	MetadataHash    int64
	AssignmentEpoch int32
	AssignmentTime  int64
	Members         map[string]*Member
	Targets         map[string]Parts

	// Derived by Replay, never persisted: the member holding each partition (assigned or
	// pending revocation), the member holding each instance id, and how many members
	// subscribe to each topic name and regex. They keep a heartbeat's cost independent of the
	// group's size.
	owners    map[TP]string
	instances map[string]string
	names     map[string]int
	regexes   map[string]int
	// subscriptionsGen changes whenever names or regexes do, so a cached hash of them can
	// tell it is stale.
	subscriptionsGen uint64

	// changedAt is when a heartbeat last bumped the group epoch (Unix ms, 0 after a load):
	// the quiet-assignment rule waits for it (assignmentDue). Kept in memory only, as losing
	// it on a restart only lets one assignment come sooner.
	changedAt int64

	hasMetadata bool
	soft        soft
	// describable is the running heartbeat's topic filter (HeartbeatInput.Describable), set
	// only while that operation runs on the shard goroutine.
	describable func(topic string) bool
}

// soft caches what the group's subscriptions resolve to against one immutable catalog
// snapshot; a snapshot is replaced, never changed, when a topic changes.
type soft struct {
	snap     *meta.Snapshot
	resolved map[string][]string // regex → matching topic names
	// hash is the subscribed topics' metadataHash against snap, valid while hashed and the
	// group's subscriptionsGen is still hashedGen.
	hash      int64
	hashed    bool
	hashedGen uint64
}

// newGroup is a group that exists only in the operation creating it: at group and target
// epoch 1, as Kafka's groups start, so that its first member joins at epoch 2.
func newGroup(id string) *Group {
	return &Group{
		ID: id, Epoch: 1, AssignmentEpoch: 1, Members: map[string]*Member{}, Targets: map[string]Parts{},
		owners: map[TP]string{}, instances: map[string]string{}, names: map[string]int{}, regexes: map[string]int{},
	}
}

// State computes the group state as Kafka's ConsumerGroup does.
func (g *Group) State() GroupState {
	switch {
	case len(g.Members) == 0:
		return Empty
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

func (g *Group) staticMember(instance string) *Member {
	if m := g.Members[g.instances[instance]]; m != nil && m.InstanceID != nil && *m.InstanceID == instance {
		return m
	}
	return nil
}

// full is Kafka 4.4's throwIfConsumerGroupIsFull: at group.consumer.max.size members a join
// is refused unless it names a member of the group, or an instance id the group knows (that
// one replaces its member or is refused UNRELEASED_INSTANCE_ID, never counted as a new one).
func (g *Group) full(cfg Config, memberID string, instance *string) bool {
	if instance != nil && g.staticMember(*instance) != nil {
		return false
	}
	return int64(len(g.Members)) >= int64(cfg.MaxSize) && (memberID == "" || g.Members[memberID] == nil)
}

// State is every consumer group of a shard.
type State struct {
	Groups map[string]*Group
	// catalogs is the last catalog a request of each group brought (a heartbeat, a classic
	// member's JoinGroup or SyncGroup), kept so that work starting without a request (a
	// downgrade decided by a timer or a LeaveGroup) can still name the members' partitions.
	// Not persisted: after a load it is empty until the group's next such request, so the
	// shard offers its current catalog first (shard.Machine.Catalog); this one stands in where
	// the shard has none.
	catalogs map[string]Catalog
}

// New returns an empty state.
func New() *State { return &State{Groups: map[string]*Group{}, catalogs: map[string]Catalog{}} }

// NoteCatalog keeps cat as the group's last catalog (a nil cat changes nothing).
func (s *State) NoteCatalog(group string, cat Catalog) {
	if cat != nil {
		s.catalogs[group] = cat
	}
}

// Owns reports whether a consumer group has the id.
func (s *State) Owns(group string) bool { _, ok := s.Groups[group]; return ok }

// IsEmpty reports whether the group has no members (true for an unknown id).
func (s *State) IsEmpty(group string) bool {
	g := s.Groups[group]
	return g == nil || len(g.Members) == 0
}

// ListedState is the ListGroups/DescribeGroups state string, "" when no consumer group has the id.
func (s *State) ListedState(group string) string {
	if g := s.Groups[group]; g != nil {
		return g.State().String()
	}
	return ""
}
