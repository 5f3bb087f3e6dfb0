// Package classic is the classic (JoinGroup/SyncGroup) consumer-group state machine of a shard
// (spec coordinator-apis §2). A group is persisted as one self-contained record holding all of
// it — state, generation, protocol, leader, members with their metadata, assignments and
// join/sync flags, and the member ids still owed a rejoin after MEMBER_ID_REQUIRED — so every
// transition is one record and a reload brings back exactly the group the clients last saw.
// Parked JoinGroup/SyncGroup responses and timers are ephemeral: they live outside the replayed
// state and are rebuilt (timers) or failed (responses) after a reload.
package classic

import (
	"fmt"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupState is a classic group's state (spec §2.1).
type GroupState int8

const (
	Empty GroupState = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s GroupState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state_%d", int8(s))
}

// Protocol is one (name, metadata) a member offers.
type Protocol struct {
	Name     string
	Metadata []byte
}

// Member is one member of a classic group.
type Member struct {
	ID               string
	InstanceID       *string // static membership (KIP-345)
	ClientID         string
	ClientHost       string
	SessionTimeoutMs int32
	RebalanceTimeout int32 // ms
	Protocols        []Protocol
	Assignment       []byte
	// AwaitingJoin: the member has joined the current join barrier.
	AwaitingJoin bool
	// PendingSync: the member got a join response for the current generation and has not sent
	// SyncGroup yet.
	PendingSync bool
	// New: added by its first join and not yet part of a completed generation; such a member is
	// given the new-member join timeout instead of its session timeout.
	New bool
}

func (m *Member) clone() *Member {
	c := *m
	c.Protocols = append([]Protocol(nil), m.Protocols...)
	return &c
}

func (m *Member) isStatic() bool { return m.InstanceID != nil }

// metadataFor returns the member's metadata for a protocol.
func (m *Member) metadataFor(name string) []byte {
	for _, p := range m.Protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols reports whether a rejoin offers exactly what the member offered before.
func (m *Member) sameProtocols(ps []Protocol) bool {
	if len(ps) != len(m.Protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.Protocols[i].Name || string(ps[i].Metadata) != string(m.Protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// PendingMember is a member id handed out with MEMBER_ID_REQUIRED that has not rejoined yet.
type PendingMember struct {
	ID               string
	SessionTimeoutMs int32
}

// Group is one classic group. Members keep the order in which they were added: the first
// becomes leader and the order makes encoding deterministic.
type Group struct {
	ID           string
	State        GroupState
	Generation   int32
	ProtocolType string
	Protocol     *string // selected protocol; nil while none
	Leader       string  // "" when none
	Members      []*Member
	Pending      []PendingMember
	// InitialRebalance is set while the first rebalance out of Empty waits for
	// group.initial.rebalance.delay.ms; NewMemberAdded says a member joined during that wait,
	// and InitialRemainingMs is what is left of the rebalance timeout for further waits.
	InitialRebalance   bool
	NewMemberAdded     bool
	InitialRemainingMs int32
	// PreviousState is the state before the current one (PreparingRebalance out of Empty
	// completes only by its timer, spec §2.4).
	PreviousState GroupState
	// StateTimestamp is when the group entered its current state (ms); offset retention of an
	// Empty group counts from it.
	StateTimestamp int64

	// byID and byInstance index the members of a group as replayed into State, so that a
	// heartbeat or commit validation costs the same in a group of 10 or 1000 members. Groups
	// in State are never changed in place (a transaction changes a clone, and only Replay puts
	// a freshly decoded group in), so the index cannot go stale; a clone drops it and looks
	// members up by scanning. Nil for small groups, where a scan is cheaper than a map.
	byID       map[string]*Member
	byInstance map[string]*Member
}

// indexFrom is the member count from which a replayed group gets a member index.
const indexFrom = 8

func (g *Group) index() {
	if len(g.Members) < indexFrom {
		return
	}
	g.byID = make(map[string]*Member, len(g.Members))
	g.byInstance = map[string]*Member{}
	for _, m := range g.Members {
		// The first wins, as a scan would find it.
		if _, dup := g.byID[m.ID]; !dup {
			g.byID[m.ID] = m
		}
		if m.InstanceID != nil {
			if _, dup := g.byInstance[*m.InstanceID]; !dup {
				g.byInstance[*m.InstanceID] = m
			}
		}
	}
}

// Clone returns a deep copy that an operation may change.
func (g *Group) Clone() *Group {
	c := *g
	c.byID, c.byInstance = nil, nil
	c.Members = make([]*Member, len(g.Members))
	for i, m := range g.Members {
		c.Members[i] = m.clone()
	}
	c.Pending = append([]PendingMember(nil), g.Pending...)
	if g.Protocol != nil {
		p := *g.Protocol
		c.Protocol = &p
	}
	return &c
}

// Member returns a member by id.
func (g *Group) Member(id string) *Member {
	if g.byID != nil {
		return g.byID[id]
	}
	for _, m := range g.Members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// StaticMember returns the member id holding an instance id.
func (g *Group) StaticMember(instance string) *Member {
	if g.byInstance != nil {
		return g.byInstance[instance]
	}
	for _, m := range g.Members {
		if m.InstanceID != nil && *m.InstanceID == instance {
			return m
		}
	}
	return nil
}

func (g *Group) isPending(id string) bool {
	for _, p := range g.Pending {
		if p.ID == id {
			return true
		}
	}
	return false
}

func (g *Group) removePending(id string) bool {
	for i, p := range g.Pending {
		if p.ID == id {
			g.Pending = append(g.Pending[:i], g.Pending[i+1:]...)
			return true
		}
	}
	return false
}

func (g *Group) removeMember(id string) *Member {
	for i, m := range g.Members {
		if m.ID == id {
			g.Members = append(g.Members[:i], g.Members[i+1:]...)
			if g.Leader == id {
				g.Leader = ""
				if len(g.Members) > 0 {
					g.Leader = g.Members[0].ID
				}
			}
			return m
		}
	}
	return nil
}

// maxRebalanceTimeout is the join barrier's length: the longest rebalance timeout of any member.
func (g *Group) maxRebalanceTimeout() int32 {
	var max int32
	for _, m := range g.Members {
		if m.RebalanceTimeout > max {
			max = m.RebalanceTimeout
		}
	}
	return max
}

func (g *Group) numAwaitingJoin() int {
	n := 0
	for _, m := range g.Members {
		if m.AwaitingJoin {
			n++
		}
	}
	return n
}

// allJoined: every member has rejoined and no MEMBER_ID_REQUIRED member is outstanding.
func (g *Group) allJoined() bool { return g.numAwaitingJoin() == len(g.Members) && len(g.Pending) == 0 }

// candidates are the protocol names every member supports, in the first member's order.
func (g *Group) candidates() []string {
	if len(g.Members) == 0 {
		return nil
	}
	var out []string
	for _, p := range g.Members[0].Protocols {
		all := true
		for _, m := range g.Members[1:] {
			if !hasProtocol(m.Protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			out = append(out, p.Name)
		}
	}
	return out
}

func hasProtocol(ps []Protocol, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// supports reports whether a join offering (protocolType, protocols) is compatible with the
// group (spec §2.2 step 3): an Empty group needs a protocol type and at least one protocol;
// otherwise the type must match and one offered protocol must be supported by every member.
func (g *Group) supports(protocolType string, protocols []Protocol) bool {
	if len(g.Members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.ProtocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.Members {
			if !hasProtocol(m.Protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// selectProtocol: each member votes for its most preferred candidate; most votes wins; ties go
// to the candidate the first member prefers (Kafka leaves ties undefined).
func (g *Group) selectProtocol() *string {
	cands := g.candidates()
	if len(cands) == 0 {
		return nil
	}
	votes := map[string]int{}
	for _, m := range g.Members {
		for _, p := range m.Protocols {
			if contains(cands, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return &best
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// State is every classic group of a shard.
type State struct {
	groups map[string]*Group
	// waiters are parked JoinGroup/SyncGroup responses. Ephemeral: never replayed; after a
	// reload the runtime fails the promises and the map starts empty.
	waiters map[waiterKey]*runtime.Promise
	// lastSeen records when a member last proved it is alive by other means than a heartbeat
	// (an offset commit, spec §3.2); the session timer consults it before expiring the
	// member. Ephemeral.
	lastSeen map[memberKey]int64
}

type waiterKey struct {
	group, member string
	sync          bool
}

type memberKey struct{ group, member string }

// New returns empty classic state.
func New() *State {
	return &State{groups: map[string]*Group{}, waiters: map[waiterKey]*runtime.Promise{}, lastSeen: map[memberKey]int64{}}
}

// Group returns a group (read only), or nil.
func (s *State) Group(id string) *Group { return s.groups[id] }

// Has reports whether id is a classic group with group state (not merely committed offsets).
// Other group types use it to refuse their APIs for a classic group id (INCONSISTENT_GROUP_PROTOCOL
// for joins, spec streams-groups §11.2).
func (s *State) Has(id string) bool { _, ok := s.groups[id]; return ok }

// Groups lists the group ids, sorted.
func (s *State) Groups() []string {
	out := make([]string, 0, len(s.groups))
	for id := range s.groups {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Park stores the promise of a parked JoinGroup (sync=false) or SyncGroup response. It is
// ephemeral state an operation may set. An older promise of the same member is returned so the
// caller can answer it.
func (s *State) Park(group, member string, sync bool, p *runtime.Promise) *runtime.Promise {
	k := waiterKey{group, member, sync}
	old := s.waiters[k]
	s.waiters[k] = p
	return old
}

// TakeWaiter removes and returns a parked response, or nil.
func (s *State) TakeWaiter(group, member string, sync bool) *runtime.Promise {
	k := waiterKey{group, member, sync}
	p := s.waiters[k]
	delete(s.waiters, k)
	return p
}

// Touch notes that a member proved it is alive at nowMs (ephemeral).
func (s *State) Touch(group, member string, nowMs int64) {
	s.lastSeen[memberKey{group, member}] = nowMs
}

// Forget drops the ephemeral state of a member that left.
func (s *State) Forget(group, member string) { delete(s.lastSeen, memberKey{group, member}) }

// LastSeen returns the time Touch last recorded, or 0.
func (s *State) LastSeen(group, member string) int64 { return s.lastSeen[memberKey{group, member}] }

// Replay applies a classic group record.
func (s *State) Replay(_ int64, rec log.Record) error {
	r, err := records.ReadKey(rec.Key, records.KindClassicGroup)
	if err != nil {
		return err
	}
	id := r.String()
	if err := r.Err(); err != nil {
		return fmt.Errorf("classic group key: %w", err)
	}
	if rec.Tombstone() {
		delete(s.groups, id)
		return nil
	}
	g, err := decodeGroup(id, rec.Value)
	if err != nil {
		return fmt.Errorf("classic group %q: %w", id, err)
	}
	s.groups[id] = g
	return nil
}

// Record encodes the group as its self-contained record.
func (g *Group) Record() log.Record {
	b := records.NewValue(0).Int16(int16(g.State)).Int16(int16(g.PreviousState)).Int32(g.Generation).
		String(g.ProtocolType).NullableString(g.Protocol).String(g.Leader).
		Bool(g.InitialRebalance).Bool(g.NewMemberAdded).Int32(g.InitialRemainingMs).Int64(g.StateTimestamp).
		Int32(int32(len(g.Pending)))
	for _, p := range g.Pending {
		b.String(p.ID).Int32(p.SessionTimeoutMs)
	}
	b.Int32(int32(len(g.Members)))
	for _, m := range g.Members {
		b.String(m.ID).NullableString(m.InstanceID).String(m.ClientID).String(m.ClientHost).
			Int32(m.SessionTimeoutMs).Int32(m.RebalanceTimeout).Int32(int32(len(m.Protocols)))
		for _, p := range m.Protocols {
			b.String(p.Name).Bytes(nonNil(p.Metadata))
		}
		b.Bytes(m.Assignment).Bool(m.AwaitingJoin).Bool(m.PendingSync).Bool(m.New)
	}
	return log.Record{Key: GroupKey(g.ID), Value: b.Build()}
}

// DeleteRecord is the tombstone of a classic group.
func DeleteRecord(id string) log.Record { return log.Record{Key: GroupKey(id)} }

// GroupKey is the key of a classic group's record: what an operation that read the group
// depends on.
func GroupKey(id string) []byte { return records.NewKey(records.KindClassicGroup).String(id).Build() }

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// maxCount bounds decoded element counts so that a corrupt count cannot allocate without limit.
const maxCount = 1 << 24

func decodeGroup(id string, value []byte) (*Group, error) {
	version, r, err := records.ReadValue(value)
	if err != nil {
		return nil, err
	}
	if err := records.CheckVersion(records.KindClassicGroup, version, 0); err != nil {
		return nil, err
	}
	g := &Group{ID: id}
	g.State = GroupState(r.Int16())
	g.PreviousState = GroupState(r.Int16())
	g.Generation = r.Int32()
	g.ProtocolType = r.String()
	g.Protocol = r.NullableString()
	g.Leader = r.String()
	g.InitialRebalance = r.Bool()
	g.NewMemberAdded = r.Bool()
	g.InitialRemainingMs = r.Int32()
	g.StateTimestamp = r.Int64()
	n := r.Int32()
	if n < 0 || n > maxCount {
		return nil, fmt.Errorf("bad pending count %d", n)
	}
	for i := int32(0); i < n && r.Err() == nil; i++ {
		g.Pending = append(g.Pending, PendingMember{ID: r.String(), SessionTimeoutMs: r.Int32()})
	}
	n = r.Int32()
	if n < 0 || n > maxCount {
		return nil, fmt.Errorf("bad member count %d", n)
	}
	for i := int32(0); i < n && r.Err() == nil; i++ {
		m := &Member{ID: r.String(), InstanceID: r.NullableString(), ClientID: r.String(), ClientHost: r.String(),
			SessionTimeoutMs: r.Int32(), RebalanceTimeout: r.Int32()}
		np := r.Int32()
		if np < 0 || np > maxCount {
			return nil, fmt.Errorf("bad protocol count %d", np)
		}
		for j := int32(0); j < np && r.Err() == nil; j++ {
			// Protocol metadata is never null on the wire (JoinGroup), and is always written as
			// bytes; read a null as empty so that decoding and encoding agree.
			m.Protocols = append(m.Protocols, Protocol{Name: r.String(), Metadata: nonNil(r.Bytes())})
		}
		m.Assignment = r.Bytes()
		m.AwaitingJoin, m.PendingSync, m.New = r.Bool(), r.Bool(), r.Bool()
		g.Members = append(g.Members, m)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if g.State > Dead {
		return nil, fmt.Errorf("unknown state %d", g.State)
	}
	g.index()
	return g, nil
}

// SubscribedTopics returns the topics the members of a group using the consumer protocol
// subscribe to, decoded from their metadata for the selected protocol. ok is false when the
// group does not use the consumer protocol or has no selected protocol (Kafka's
// subscribedTopics is then unknown).
func (g *Group) SubscribedTopics() (topics map[string]bool, ok bool) {
	if g.ProtocolType != "consumer" || g.Protocol == nil || len(g.Members) == 0 {
		return nil, false
	}
	topics = map[string]bool{}
	for _, m := range g.Members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(*g.Protocol)); err != nil {
			return nil, false
		}
		for _, t := range md.Topics {
			topics[t] = true
		}
	}
	return topics, true
}
