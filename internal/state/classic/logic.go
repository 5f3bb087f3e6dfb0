package classic

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Config holds the group limits of spec Appendix A.
type Config struct {
	MinSessionTimeoutMs     int32 // group.min.session.timeout.ms
	MaxSessionTimeoutMs     int32 // group.max.session.timeout.ms
	InitialRebalanceDelayMs int32 // group.initial.rebalance.delay.ms
	MaxSize                 int32 // group.max.size
	// NewMemberJoinTimeoutMs bounds how long a new member's parked JoinGroup may wait (Kafka's
	// constant CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS, 300000).
	NewMemberJoinTimeoutMs int32
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{MinSessionTimeoutMs: 6000, MaxSessionTimeoutMs: 1800000, InitialRebalanceDelayMs: 3000,
		MaxSize: 1<<31 - 1, NewMemberJoinTimeoutMs: 300000}
}

// TimerKind names what a timer does when it fires.
type TimerKind uint8

const (
	// TimerSession expires a member (its session, or the new-member join timeout).
	TimerSession TimerKind = iota
	// TimerPending drops a MEMBER_ID_REQUIRED member id that was never used.
	TimerPending
	// TimerJoin ends the join barrier (or one step of the initial rebalance delay).
	TimerJoin
	// TimerSync removes members that never sent SyncGroup after a join phase.
	TimerSync
)

// Timer is a timer to arm (or, with Cancel, to disarm). Its key makes a newer timer replace an
// older one for the same purpose, so a replaced timer never fires; the fire handlers still
// re-check generation and membership.
type Timer struct {
	Kind       TimerKind
	Group      string
	Member     string
	Generation int32
	Delay      time.Duration
	Cancel     bool
	// Final: a join timer armed after a reload completes the barrier without further initial
	// delay steps.
	Final bool
}

// Key is the runtime timer key.
func (t Timer) Key() string {
	switch t.Kind {
	case TimerSession:
		return "classic/session/" + t.Group + "\x00" + t.Member
	case TimerPending:
		return "classic/pending/" + t.Group + "\x00" + t.Member
	case TimerJoin:
		return "classic/join/" + t.Group
	default:
		return "classic/sync/" + t.Group
	}
}

// JoinMember is one member in the leader's JoinGroup response.
type JoinMember struct {
	ID         string
	InstanceID *string
	Metadata   []byte
}

// JoinResult is a JoinGroup answer.
type JoinResult struct {
	Code           int16
	Generation     int32
	ProtocolType   *string
	Protocol       *string
	Leader         string
	SkipAssignment bool
	MemberID       string
	Members        []JoinMember
}

// SyncResult is a SyncGroup answer.
type SyncResult struct {
	Code         int16
	ProtocolType *string
	Protocol     *string
	Assignment   []byte
}

// Answer completes a parked response of a member.
type Answer struct {
	Member string
	Join   *JoinResult // a parked JoinGroup
	Sync   *SyncResult // a parked SyncGroup
	// Prior: the answer is only for a request parked before this transaction (never the
	// caller's own).
	Prior bool
}

// Tx is one operation on one group: the working copy it changes and the effects the shard must
// carry out (the group's new record, timers, parked answers). The State it came from is never
// changed by a Tx.
type Tx struct {
	cfg     Config
	now     time.Time
	group   string
	g       *Group // working copy; nil: no group
	changed bool
	deleted bool

	Timers  []Timer
	Answers []Answer
	// Join is the caller's JoinGroup answer when known now; otherwise JoinPark names the
	// member whose parked answer the caller waits for.
	Join     *JoinResult
	JoinPark string
	// Sync / SyncPark likewise for SyncGroup.
	Sync     *SyncResult
	SyncPark string
	// Code is the answer of Heartbeat and of validations.
	Code int16
	// Removed lists member ids that left the group, so ephemeral per-member state can go.
	Removed []string
}

func (s *State) begin(cfg Config, now time.Time, group string) *Tx {
	tx := &Tx{cfg: cfg, now: now, group: group}
	if g := s.groups[group]; g != nil {
		tx.g = g.Clone()
	}
	return tx
}

// view starts a transaction that only reads the group: tx.g is the group as State holds it,
// not a copy, so it must not be changed (nor its changed flag set). It spares the operations
// that change nothing (a heartbeat) a copy of the whole group.
func (s *State) view(cfg Config, now time.Time, group string) *Tx {
	return &Tx{cfg: cfg, now: now, group: group, g: s.groups[group]}
}

// Config is the configuration the transaction ran with (timers fired later use it too).
func (tx *Tx) Config() Config { return tx.cfg }

// GroupID is the group the transaction is about.
func (tx *Tx) GroupID() string { return tx.group }

// Group is the group as the transaction left it (nil if none).
func (tx *Tx) Group() *Group { return tx.g }

// Records is the group's new record, if the transaction changed it.
func (tx *Tx) Records() []log.Record {
	switch {
	case tx.deleted:
		return []log.Record{DeleteRecord(tx.group)}
	case tx.changed && tx.g != nil:
		return []log.Record{tx.g.Record()}
	}
	return nil
}

func (tx *Tx) setState(st GroupState) {
	tx.g.PreviousState, tx.g.State = tx.g.State, st
	tx.g.StateTimestamp = tx.now.UnixMilli()
	tx.changed = true
}

func (tx *Tx) timer(kind TimerKind, member string, d time.Duration) {
	gen := int32(0)
	if tx.g != nil {
		gen = tx.g.Generation
	}
	tx.Timers = append(tx.Timers, Timer{Kind: kind, Group: tx.group, Member: member, Generation: gen, Delay: d})
}

func (tx *Tx) cancel(kind TimerKind, member string) {
	tx.Timers = append(tx.Timers, Timer{Kind: kind, Group: tx.group, Member: member, Cancel: true})
}

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

func (tx *Tx) answerJoin(member string, r *JoinResult) {
	tx.Answers = append(tx.Answers, Answer{Member: member, Join: r})
}

func (tx *Tx) answerSync(member string, r *SyncResult) {
	tx.Answers = append(tx.Answers, Answer{Member: member, Sync: r})
}

func joinErr(code int16, member string) *JoinResult {
	return &JoinResult{Code: code, Generation: -1, MemberID: member}
}

// JoinRequest is a JoinGroup (spec §2.2) after handler-level checks.
type JoinRequest struct {
	Group            string
	MemberID         string
	InstanceID       *string
	ClientID         string
	ClientHost       string
	SessionTimeoutMs int32
	RebalanceTimeout int32 // v0: the session timeout
	ProtocolType     string
	Protocols        []Protocol
	Version          int16
}

// NewMemberID is `<prefix>-<uuid>` (prefix: the instance id of a static member, else the
// client id), as Kafka makes them.
func NewMemberID(prefix string) string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// Join runs a JoinGroup.
func (s *State) Join(cfg Config, now time.Time, req JoinRequest) *Tx {
	tx := s.begin(cfg, now, req.Group)
	if req.SessionTimeoutMs < cfg.MinSessionTimeoutMs || req.SessionTimeoutMs > cfg.MaxSessionTimeoutMs {
		tx.Join = joinErr(kerr.InvalidSessionTimeout.Code, req.MemberID)
		return tx
	}
	if req.MemberID == "" {
		tx.joinNew(req)
	} else {
		tx.joinKnown(req)
	}
	return tx
}

// acceptJoining is Kafka's group.max.size rule for a (re)joining member.
func (tx *Tx) acceptJoining(id string) bool {
	g := tx.g
	m := g.Member(id)
	switch g.State {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		return (m != nil && m.AwaitingJoin) || int32(g.numAwaitingJoin()) < tx.cfg.MaxSize
	default:
		return m != nil || int32(len(g.Members)) < tx.cfg.MaxSize
	}
}

func (tx *Tx) joinNew(req JoinRequest) {
	if tx.g == nil {
		tx.g = &Group{ID: req.Group, State: Empty, StateTimestamp: tx.now.UnixMilli()}
	}
	g := tx.g
	if g.State == Dead {
		tx.Join = joinErr(kerr.CoordinatorNotAvailable.Code, "")
		return
	}
	if !tx.acceptJoining("") {
		tx.Join = joinErr(kerr.GroupMaxSizeReached.Code, "")
		return
	}
	if !g.supports(req.ProtocolType, req.Protocols) {
		tx.Join = joinErr(kerr.InconsistentGroupProtocol.Code, "")
		return
	}
	if req.InstanceID != nil {
		id := NewMemberID(*req.InstanceID)
		if old := g.StaticMember(*req.InstanceID); old != nil {
			tx.replaceStatic(old, id, req)
			return
		}
		tx.addMember(id, req)
		return
	}
	id := NewMemberID(req.ClientID)
	if req.Version >= 4 {
		// KIP-394: hand out the id, expect a rejoin with it within the session timeout.
		g.Pending = append(g.Pending, PendingMember{ID: id, SessionTimeoutMs: req.SessionTimeoutMs})
		tx.changed = true
		tx.timer(TimerPending, id, ms(req.SessionTimeoutMs))
		tx.Join = joinErr(kerr.MemberIDRequired.Code, id)
		return
	}
	tx.addMember(id, req)
}

// validateMember is ClassicGroup.validateMember: an instance id must map to this member id.
func validateMember(g *Group, id string, instance *string) int16 {
	if instance != nil {
		m := g.StaticMember(*instance)
		if m == nil {
			return kerr.UnknownMemberID.Code
		}
		if m.ID != id {
			return kerr.FencedInstanceID.Code
		}
		return 0
	}
	if g.Member(id) == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func (tx *Tx) joinKnown(req JoinRequest) {
	g := tx.g
	if g == nil {
		tx.Join = joinErr(kerr.UnknownMemberID.Code, req.MemberID)
		return
	}
	if g.State == Dead {
		tx.Join = joinErr(kerr.CoordinatorNotAvailable.Code, req.MemberID)
		return
	}
	if !g.supports(req.ProtocolType, req.Protocols) {
		tx.Join = joinErr(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return
	}
	if g.isPending(req.MemberID) {
		if !tx.acceptJoining(req.MemberID) {
			g.removePending(req.MemberID)
			tx.changed = true
			tx.cancel(TimerPending, req.MemberID)
			tx.Join = joinErr(kerr.GroupMaxSizeReached.Code, "")
			return
		}
		g.removePending(req.MemberID)
		tx.cancel(TimerPending, req.MemberID)
		tx.addMember(req.MemberID, req)
		return
	}
	if code := validateMember(g, req.MemberID, req.InstanceID); code != 0 {
		tx.Join = joinErr(code, req.MemberID)
		return
	}
	if !tx.acceptJoining(req.MemberID) {
		tx.removeMember(g.Member(req.MemberID), kerr.GroupMaxSizeReached.Code)
		tx.afterRemoval()
		tx.Join = joinErr(kerr.GroupMaxSizeReached.Code, "")
		return
	}
	m := g.Member(req.MemberID)
	switch g.State {
	case PreparingRebalance:
		tx.updateMember(m, req)
		tx.maybeCompleteJoin()
	case CompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// The join response was lost: send this generation's answer again.
			tx.Join = tx.joinResponse(m, m.ID == g.Leader)
			return
		}
		tx.updateMember(m, req)
		tx.prepareRebalance()
	case Stable:
		if m.ID == g.Leader || !m.sameProtocols(req.Protocols) {
			// The leader's rejoin always rebalances so it can react to metadata changes.
			tx.updateMember(m, req)
			tx.prepareRebalance()
			return
		}
		tx.Join = tx.joinResponse(m, false)
	default:
		tx.Join = joinErr(kerr.UnknownMemberID.Code, req.MemberID)
	}
}

// joinResponse is the current generation's JoinGroup answer for m.
func (tx *Tx) joinResponse(m *Member, withMembers bool) *JoinResult {
	g := tx.g
	pt := g.ProtocolType
	r := &JoinResult{Generation: g.Generation, ProtocolType: &pt, Protocol: g.Protocol, Leader: g.Leader, MemberID: m.ID}
	if withMembers {
		r.Members = tx.memberList()
	}
	return r
}

func (tx *Tx) memberList() []JoinMember {
	g := tx.g
	proto := ""
	if g.Protocol != nil {
		proto = *g.Protocol
	}
	out := make([]JoinMember, 0, len(g.Members))
	for _, m := range g.Members {
		out = append(out, JoinMember{ID: m.ID, InstanceID: m.InstanceID, Metadata: m.metadataFor(proto)})
	}
	return out
}

// park makes the caller wait for the join barrier.
func (tx *Tx) park(m *Member) {
	m.AwaitingJoin = true
	tx.JoinPark = m.ID
}

func (tx *Tx) addMember(id string, req JoinRequest) {
	g := tx.g
	m := &Member{ID: id, InstanceID: req.InstanceID, ClientID: req.ClientID, ClientHost: req.ClientHost,
		SessionTimeoutMs: req.SessionTimeoutMs, RebalanceTimeout: req.RebalanceTimeout,
		Protocols: req.Protocols, New: true}
	if len(g.Members) == 0 {
		g.Leader = id
		g.ProtocolType = req.ProtocolType
	}
	g.Members = append(g.Members, m)
	if g.State == PreparingRebalance && g.InitialRebalance {
		g.NewMemberAdded = true
	}
	tx.changed = true
	tx.park(m)
	// A parked join cannot heartbeat: a new member gets the new-member join timeout instead of
	// its session timeout (spec §2.2 step 6).
	tx.timer(TimerSession, id, ms(tx.cfg.NewMemberJoinTimeoutMs))
	tx.rebalanceOrComplete()
}

func (tx *Tx) updateMember(m *Member, req JoinRequest) {
	m.Protocols = req.Protocols
	m.SessionTimeoutMs = req.SessionTimeoutMs
	m.RebalanceTimeout = req.RebalanceTimeout
	tx.changed = true
	if m.AwaitingJoin {
		// A second join while the first is parked: the first one's waiter is answered so it
		// does not hang; the newest join waits for the barrier.
		tx.Answers = append(tx.Answers, Answer{Member: m.ID, Join: joinErr(kerr.RebalanceInProgress.Code, m.ID), Prior: true})
	}
	tx.park(m)
}

func (tx *Tx) rebalanceOrComplete() {
	switch tx.g.State {
	case Empty, Stable, CompletingRebalance:
		tx.prepareRebalance()
	case PreparingRebalance:
		tx.maybeCompleteJoin()
	}
}

// replaceStatic gives a known instance id a new member id (spec §2.3).
func (tx *Tx) replaceStatic(m *Member, newID string, req JoinRequest) {
	g := tx.g
	oldID, oldLeader := m.ID, g.Leader
	tx.answerJoin(oldID, joinErr(kerr.FencedInstanceID.Code, oldID))
	tx.answerSync(oldID, &SyncResult{Code: kerr.FencedInstanceID.Code})
	tx.cancel(TimerSession, oldID)
	tx.Removed = append(tx.Removed, oldID)
	m.ID = newID // the member keeps its client id and host, as Kafka's replaceStaticMember does
	if g.Leader == oldID {
		g.Leader = newID
	}
	tx.changed = true
	switch g.State {
	case Stable:
		oldProtocols := m.Protocols
		m.Protocols = req.Protocols
		m.SessionTimeoutMs, m.RebalanceTimeout = req.SessionTimeoutMs, req.RebalanceTimeout
		if next := g.selectProtocol(); next != nil && g.Protocol != nil && *next == *g.Protocol {
			// Same protocol: no rebalance; the new id takes over the assignment.
			tx.timer(TimerSession, newID, ms(m.SessionTimeoutMs))
			r := tx.joinResponse(m, false)
			if req.Version >= 9 {
				r.SkipAssignment = newID == g.Leader
				if r.SkipAssignment {
					r.Members = tx.memberList()
				}
			} else {
				// Keep the restarted leader from running an assignment a Stable group would ignore.
				r.Leader = oldLeader
			}
			tx.Join = r
			return
		}
		m.Protocols = oldProtocols
		tx.updateMember(m, req)
		tx.prepareRebalance()
	case CompletingRebalance:
		// The leader may have assigned to the old id: rebalance.
		tx.updateMember(m, req)
		tx.prepareRebalance()
	default:
		tx.updateMember(m, req)
		tx.maybeCompleteJoin()
	}
}

// prepareRebalance opens the join barrier.
func (tx *Tx) prepareRebalance() {
	g := tx.g
	if g.State == CompletingRebalance {
		for _, m := range g.Members {
			m.Assignment = nil
			tx.answerSync(m.ID, &SyncResult{Code: kerr.RebalanceInProgress.Code})
		}
	}
	for _, m := range g.Members {
		m.PendingSync = false
	}
	tx.cancel(TimerSync, "")
	initial := g.State == Empty
	tx.setState(PreparingRebalance)
	tx.changed = true
	rt := g.maxRebalanceTimeout()
	if initial {
		delay := min(tx.cfg.InitialRebalanceDelayMs, rt)
		g.InitialRebalance, g.NewMemberAdded = true, false
		g.InitialRemainingMs = max(rt-tx.cfg.InitialRebalanceDelayMs, 0)
		tx.timer(TimerJoin, "", ms(delay))
	} else {
		g.InitialRebalance, g.NewMemberAdded, g.InitialRemainingMs = false, false, 0
		tx.timer(TimerJoin, "", ms(rt))
	}
	tx.maybeCompleteJoin()
}

// maybeCompleteJoin completes the barrier early once everyone is in, except during the
// initial rebalance, which only its timer ends (spec §2.4).
func (tx *Tx) maybeCompleteJoin() {
	g := tx.g
	if g.State == PreparingRebalance && g.allJoined() && g.PreviousState != Empty {
		tx.completeJoin()
	}
}

func (tx *Tx) completeJoin() {
	g := tx.g
	for _, m := range append([]*Member(nil), g.Members...) {
		if !m.AwaitingJoin && !m.isStatic() {
			tx.removeMember(m, kerr.UnknownMemberID.Code)
		}
	}
	if !tx.electJoinedLeader() && len(g.Members) > 0 {
		// Nobody rejoined: give them another rebalance timeout (session expiry removes the dead).
		tx.timer(TimerJoin, "", ms(g.maxRebalanceTimeout()))
		return
	}
	// Static members that did not rejoin are kept but get no join response.
	tx.cancel(TimerJoin, "")
	g.Generation++
	g.InitialRebalance, g.NewMemberAdded, g.InitialRemainingMs = false, false, 0
	tx.changed = true
	if len(g.Members) == 0 {
		tx.setState(Empty)
		g.Protocol, g.Leader = nil, ""
		return
	}
	g.Protocol = g.selectProtocol()
	tx.setState(CompletingRebalance)
	for _, m := range g.Members {
		wasAwaiting := m.AwaitingJoin
		m.AwaitingJoin, m.New, m.PendingSync = false, false, true
		if wasAwaiting {
			tx.answerJoin(m.ID, tx.joinResponse(m, m.ID == g.Leader))
		}
		tx.timer(TimerSession, m.ID, ms(m.SessionTimeoutMs))
	}
	tx.timer(TimerSync, "", ms(g.maxRebalanceTimeout()))
}

func (tx *Tx) electJoinedLeader() bool {
	g := tx.g
	if l := g.Member(g.Leader); l != nil && l.AwaitingJoin {
		return true
	}
	for _, m := range g.Members {
		if m.AwaitingJoin {
			g.Leader = m.ID
			return true
		}
	}
	return false
}

// removeMember drops a member, answering its parked requests with code.
func (tx *Tx) removeMember(m *Member, code int16) {
	if m == nil {
		return
	}
	if m.AwaitingJoin {
		tx.answerJoin(m.ID, joinErr(code, m.ID))
	}
	tx.answerSync(m.ID, &SyncResult{Code: code})
	tx.cancel(TimerSession, m.ID)
	tx.g.removeMember(m.ID)
	tx.Removed = append(tx.Removed, m.ID)
	tx.changed = true
}

// afterRemoval moves the group on after members left (spec §2.6 LeaveGroup).
func (tx *Tx) afterRemoval() {
	switch tx.g.State {
	case Stable, CompletingRebalance:
		tx.prepareRebalance()
	case PreparingRebalance:
		tx.maybeCompleteJoin()
	}
}

// SyncRequest is a SyncGroup.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   *string
	Generation   int32
	ProtocolType *string
	Protocol     *string
	Assignments  map[string][]byte
	Version      int16
}

// Sync runs a SyncGroup (spec §2.6).
func (s *State) Sync(cfg Config, now time.Time, req SyncRequest) *Tx {
	tx := s.begin(cfg, now, req.Group)
	g := tx.g
	fail := func(code int16) *Tx { tx.Sync = &SyncResult{Code: code}; return tx }
	if g == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	if g.State == Dead {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	if code := validateMember(g, req.MemberID, req.InstanceID); code != 0 {
		return fail(code)
	}
	if req.Generation != g.Generation {
		return fail(kerr.IllegalGeneration.Code)
	}
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.ProtocolType) ||
		(req.Protocol != nil && (g.Protocol == nil || *req.Protocol != *g.Protocol)) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	m := g.Member(req.MemberID)
	switch g.State {
	case PreparingRebalance:
		return fail(kerr.RebalanceInProgress.Code)
	case CompletingRebalance:
		if m.PendingSync {
			m.PendingSync = false
			tx.changed = true
		}
		tx.SyncPark = m.ID
		if m.ID == g.Leader {
			for _, x := range g.Members {
				a := req.Assignments[x.ID]
				if a == nil {
					a = []byte{}
				}
				x.Assignment = a
			}
			tx.setState(Stable)
			tx.changed = true
			for _, x := range g.Members {
				tx.answerSync(x.ID, tx.syncResponse(x))
				tx.timer(TimerSession, x.ID, ms(x.SessionTimeoutMs))
			}
			if !tx.anyPendingSync() {
				tx.cancel(TimerSync, "")
			}
		}
	case Stable:
		if m.PendingSync {
			m.PendingSync = false
			tx.changed = true
			if !tx.anyPendingSync() {
				tx.cancel(TimerSync, "")
			}
		}
		tx.timer(TimerSession, m.ID, ms(m.SessionTimeoutMs))
		tx.Sync = tx.syncResponse(m)
	default:
		return fail(kerr.UnknownMemberID.Code)
	}
	return tx
}

func (tx *Tx) anyPendingSync() bool {
	for _, m := range tx.g.Members {
		if m.PendingSync {
			return true
		}
	}
	return false
}

func (tx *Tx) syncResponse(m *Member) *SyncResult {
	pt := tx.g.ProtocolType
	a := m.Assignment
	if a == nil {
		a = []byte{}
	}
	return &SyncResult{ProtocolType: &pt, Protocol: tx.g.Protocol, Assignment: a}
}

// Heartbeat runs a Heartbeat (spec §2.6); it changes no record, only the session timer, so it
// reads the group in place: its cost does not grow with the group.
func (s *State) Heartbeat(cfg Config, now time.Time, group, member string, instance *string, generation int32) *Tx {
	tx := s.view(cfg, now, group)
	g := tx.g
	switch {
	case g == nil:
		tx.Code = kerr.UnknownMemberID.Code
	case g.State == Dead:
		tx.Code = kerr.CoordinatorNotAvailable.Code
	default:
		if tx.Code = validateMember(g, member, instance); tx.Code != 0 {
			break
		}
		if generation != g.Generation {
			tx.Code = kerr.IllegalGeneration.Code
			break
		}
		switch g.State {
		case Empty:
			tx.Code = kerr.UnknownMemberID.Code
		case PreparingRebalance:
			tx.timer(TimerSession, member, ms(g.Member(member).SessionTimeoutMs))
			tx.Code = kerr.RebalanceInProgress.Code
		default:
			tx.timer(TimerSession, member, ms(g.Member(member).SessionTimeoutMs))
		}
	}
	return tx
}

// LeaveMember is one member named by a LeaveGroup.
type LeaveMember struct {
	MemberID   string
	InstanceID *string
}

// Leave runs a LeaveGroup (spec §2.6). Codes are per member; tx.Code is the request-wide code
// (UNKNOWN_MEMBER_ID for a missing group, COORDINATOR_NOT_AVAILABLE for a Dead one).
func (s *State) Leave(cfg Config, now time.Time, group string, members []LeaveMember) (*Tx, []int16) {
	tx := s.begin(cfg, now, group)
	g := tx.g
	codes := make([]int16, len(members))
	if g == nil || g.State == Dead {
		tx.Code = kerr.UnknownMemberID.Code
		if g != nil {
			tx.Code = kerr.CoordinatorNotAvailable.Code
		}
		for i := range codes {
			codes[i] = tx.Code
		}
		return tx, codes
	}
	removed := false
	for i, lm := range members {
		switch {
		case lm.MemberID == "":
			var m *Member
			if lm.InstanceID != nil {
				m = g.StaticMember(*lm.InstanceID)
			}
			if m == nil {
				codes[i] = kerr.UnknownMemberID.Code
				continue
			}
			tx.removeMember(m, kerr.UnknownMemberID.Code)
			removed = true
		case g.isPending(lm.MemberID):
			g.removePending(lm.MemberID)
			tx.cancel(TimerPending, lm.MemberID)
			tx.changed = true
			removed = true
		default:
			if codes[i] = validateMember(g, lm.MemberID, lm.InstanceID); codes[i] != 0 {
				continue
			}
			tx.removeMember(g.Member(lm.MemberID), kerr.UnknownMemberID.Code)
			removed = true
		}
	}
	if removed {
		tx.afterRemoval()
	}
	return tx, codes
}

// SessionExpired is the session (or new-member join) timer of a member firing.
func (s *State) SessionExpired(cfg Config, now time.Time, group, member string) *Tx {
	tx := s.begin(cfg, now, group)
	g := tx.g
	if g == nil {
		return tx
	}
	m := g.Member(member)
	if m == nil {
		return tx
	}
	session := ms(m.SessionTimeoutMs)
	if seen := s.LastSeen(group, member); seen > 0 {
		if left := time.UnixMilli(seen).Add(session).Sub(now); left > 0 {
			tx.timer(TimerSession, member, left) // a commit kept it alive
			return tx
		}
	}
	_, syncParked := s.waiters[waiterKey{group, member, true}]
	if (m.AwaitingJoin && !m.New) || syncParked {
		// Parked in the join barrier or waiting for the leader's SyncGroup, neither of which can
		// heartbeat; the barrier and sync timers bound those waits (Kafka's
		// hasSatisfiedHeartbeat).
		tx.timer(TimerSession, member, session)
		return tx
	}
	tx.removeMember(m, kerr.UnknownMemberID.Code)
	tx.afterRemoval()
	return tx
}

// PendingExpired drops a MEMBER_ID_REQUIRED id that was never used.
func (s *State) PendingExpired(cfg Config, now time.Time, group, member string) *Tx {
	tx := s.begin(cfg, now, group)
	if tx.g == nil || !tx.g.removePending(member) {
		return tx
	}
	tx.changed = true
	if tx.g.State == PreparingRebalance {
		tx.maybeCompleteJoin()
	}
	return tx
}

// JoinExpired is the join barrier's timer: one more step of the initial delay if a member
// joined during the last one, else complete the join phase with whoever is in.
func (s *State) JoinExpired(cfg Config, now time.Time, group string, generation int32, final bool) *Tx {
	tx := s.begin(cfg, now, group)
	g := tx.g
	if g == nil || g.State != PreparingRebalance || g.Generation != generation {
		return tx
	}
	if !final && g.InitialRebalance && g.NewMemberAdded && g.InitialRemainingMs > 0 {
		delay := min(cfg.InitialRebalanceDelayMs, g.InitialRemainingMs)
		g.NewMemberAdded = false
		g.InitialRemainingMs = max(g.InitialRemainingMs-cfg.InitialRebalanceDelayMs, 0)
		tx.changed = true
		tx.timer(TimerJoin, "", ms(delay))
		return tx
	}
	tx.completeJoin()
	return tx
}

// SyncExpired removes members that never sent SyncGroup for the generation, then rebalances.
func (s *State) SyncExpired(cfg Config, now time.Time, group string, generation int32) *Tx {
	tx := s.begin(cfg, now, group)
	g := tx.g
	if g == nil || g.Generation != generation || (g.State != CompletingRebalance && g.State != Stable) {
		return tx
	}
	removed := false
	for _, m := range append([]*Member(nil), g.Members...) {
		if m.PendingSync {
			tx.removeMember(m, kerr.UnknownMemberID.Code)
			removed = true
		}
	}
	if removed {
		tx.prepareRebalance()
	}
	return tx
}

// ValidateCommit applies the classic rows of spec §3.2 step 4 (ClassicGroup.validateOffsetCommit).
// owned is false when id is not a classic group. A transactional commit (TxnOffsetCommit) is
// not held to group state: no REBALANCE_IN_PROGRESS, and no member id is needed. A valid
// member's commit keeps its session alive.
func (s *State) ValidateCommit(group string, generation int32, member string, instance *string, transactional bool, now time.Time) (code int16, owned bool) {
	g := s.groups[group]
	if g == nil {
		return 0, false
	}
	if g.State == Dead {
		return kerr.CoordinatorNotAvailable.Code, true
	}
	if generation < 0 && g.State == Empty {
		return 0, true // an admin (simple) commit
	}
	if generation >= 0 || member != "" || instance != nil {
		if code := validateMember(g, member, instance); code != 0 {
			return code, true
		}
		if generation != g.Generation {
			return kerr.IllegalGeneration.Code, true
		}
	} else if !transactional && g.State != Empty {
		return kerr.UnknownMemberID.Code, true
	}
	if !transactional && g.State == CompletingRebalance {
		return kerr.RebalanceInProgress.Code, true
	}
	if m := g.Member(member); m != nil && !transactional {
		s.Touch(group, m.ID, now.UnixMilli())
	}
	return 0, true
}

// Delete decides a DeleteGroups for a classic group: NON_EMPTY_GROUP unless Empty; otherwise a
// transaction whose record is the group's tombstone.
func (s *State) Delete(group string) (*Tx, int16) {
	tx := &Tx{group: group}
	g := s.groups[group]
	switch {
	case g == nil || g.State == Dead:
		return tx, kerr.GroupIDNotFound.Code
	case g.State != Empty:
		return tx, kerr.NonEmptyGroup.Code
	}
	tx.deleted = true
	for _, p := range g.Pending {
		tx.cancel(TimerPending, p.ID)
	}
	tx.cancel(TimerJoin, "")
	tx.cancel(TimerSync, "")
	return tx, 0
}

// Rearm lists the timers a freshly loaded shard must arm (timers are never persisted): every
// member's session, pending member ids, and the barrier or sync deadline of a group that was
// mid-rebalance.
func (s *State) Rearm(cfg Config) []Timer {
	var out []Timer
	for _, id := range s.Groups() {
		g := s.groups[id]
		add := func(kind TimerKind, member string, d time.Duration) {
			out = append(out, Timer{Kind: kind, Group: id, Member: member, Generation: g.Generation, Delay: d})
		}
		for _, m := range g.Members {
			d := ms(m.SessionTimeoutMs)
			if m.AwaitingJoin && m.New {
				d = ms(cfg.NewMemberJoinTimeoutMs)
			}
			add(TimerSession, m.ID, d)
		}
		for _, p := range g.Pending {
			add(TimerPending, p.ID, ms(p.SessionTimeoutMs))
		}
		switch {
		case g.State == PreparingRebalance && g.InitialRebalance:
			// The first rebalance out of Empty goes on waiting in steps of
			// group.initial.rebalance.delay.ms, as it would have without the restart.
			out = append(out, Timer{Kind: TimerJoin, Group: id, Generation: g.Generation, Delay: ms(min(cfg.InitialRebalanceDelayMs, g.maxRebalanceTimeout()))})
		case g.State == PreparingRebalance:
			out = append(out, Timer{Kind: TimerJoin, Group: id, Generation: g.Generation, Delay: ms(g.maxRebalanceTimeout()), Final: true})
		case g.State == CompletingRebalance || g.State == Stable:
			for _, m := range g.Members {
				if m.PendingSync {
					add(TimerSync, "", ms(g.maxRebalanceTimeout()))
					break
				}
			}
		}
	}
	return out
}
