package integration

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The rolling test over the wire (issue 14): a Kafka Streams application of ten
// instances restarted one by one from the classic protocol to the Streams protocol and one by
// one back, against the real binary. Every instance is simulated on its own connection with the
// bytes its client sends (classicproto, classicStreamsJoin, the streams heartbeat).

const (
	rollInstances  = 10
	rollPartitions = 20
)

// rollLedger is the active ownership as the protocols define it: a member holds a task from
// the answer that gives it (a SyncGroup assignment, a heartbeat's task list) until its next
// request that no longer reports it as owned (a JoinGroup's owned partitions, a heartbeat's
// ActiveTasks, a leave). Between those two points the coordinator cannot know the task is
// free, so handing it to anyone else then is the double activation the test hunts for.
type rollLedger struct {
	mu         sync.Mutex
	holders    map[int32]map[string]bool
	violations []string
	answers    int
	// group is the type of the group the members talk to; revocations counts the tasks running
	// members gave up, by member kind and group type (leaves not counted).
	group       string
	revocations map[string]int
}

func (l *rollLedger) request(member string, owned []int32, classic, leaving bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for task, hs := range l.holders {
		if hs[member] && !slices.Contains(owned, task) {
			delete(hs, member)
			if !leaving {
				kind := "streams"
				if classic {
					kind = "classic"
				}
				l.revocations[kind+" members in a "+l.group+" group"]++
			}
		}
	}
}

func (l *rollLedger) setGroup(g string) { l.mu.Lock(); l.group = g; l.mu.Unlock() }

func (l *rollLedger) answer(member, what string, active []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers++
	for _, task := range active {
		if l.holders[task] == nil {
			l.holders[task] = map[string]bool{}
		}
		for other := range l.holders[task] {
			if other != member {
				l.violations = append(l.violations, fmt.Sprintf("%s: task 0_%d active on %s while %s still holds it", what, task, member, other))
			}
		}
		l.holders[task][member] = true
	}
}

func (l *rollLedger) check(t *testing.T, when string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.violations) > 0 {
		t.Fatalf("%s: a task was active on two members at once %d times; first: %s", when, len(l.violations), l.violations[0])
	}
}

// rollMember is one application instance (one stream thread), classic or streams, on its own
// connection: a blocking JoinGroup holds it, as it holds a real client's.
type rollMember struct {
	t       *testing.T
	name    string // c<i>: classic before the upgrade, s<i>: streams, k<i>: classic after the downgrade
	process byte   // the instance's process id: kept across its restarts
	classic bool
	ledger  *rollLedger
	conn    *rawConn
	corr    int32

	mu      sync.Mutex
	id      string
	gen     int32 // classic generation or streams member epoch
	rejoin  bool
	synced  int32 // the generation of the last SyncGroup assignment; -1 before
	quiet   int   // heartbeats answered NONE since the last assignment
	plan    map[string]string
	joined  bool // streams: the member has joined
	active  []int32
	standby []int32
	warmup  []int32
}

func newRollMember(t *testing.T, addr, name string, process byte, classic bool, ledger *rollLedger) *rollMember {
	m := &rollMember{t: t, name: name, process: process, classic: classic, ledger: ledger, conn: dialRaw(t, addr), synced: -1}
	if !classic {
		m.id = fmt.Sprintf("streams-%s", name)
	}
	return m
}

// roundTrip sends one request and decodes its answer; it never fails the test itself, so the
// background loops of classic members can use it.
func (m *rollMember) roundTrip(req kmsg.Request, version int16, resp kmsg.Response) error {
	m.corr++
	m.conn.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := m.conn.nc.Write(frame(req, version, m.corr, &m.name, nil)); err != nil {
		return fmt.Errorf("%s: writing %T: %w", m.name, req, err)
	}
	b, err := m.conn.readFrame() // bounded by its read deadline
	if err != nil {
		return fmt.Errorf("%s: reading the answer to %T: %w", m.name, req, err)
	}
	if corr := int32(binary.BigEndian.Uint32(b)); corr != m.corr {
		return fmt.Errorf("%s: correlation id %d, want %d", m.name, corr, m.corr)
	}
	b = b[4:]
	resp.SetVersion(version)
	if resp.IsFlexible() {
		b = b[1:] // the empty tag section of the response header
	}
	return resp.ReadFrom(b)
}

// classicJoinPhase is a classic member's Heartbeat and, when the answer asks for it, its
// JoinGroup reporting the partitions it runs; it reports whether a SyncGroup follows.
func (m *rollMember) classicJoinPhase() (bool, error) {
	if m.id != "" && !m.rejoin {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = "app", m.id, m.gen
		resp := kmsg.NewPtrHeartbeatResponse()
		if err := m.roundTrip(hb, 4, resp); err != nil {
			return false, err
		}
		switch resp.ErrorCode {
		case 0:
			m.quiet++
			return false, nil
		case kerr.RebalanceInProgress.Code:
		case kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code:
			// The Java client resets its generation and treats its partitions as lost.
			m.active = nil
			if resp.ErrorCode == kerr.UnknownMemberID.Code {
				m.id = ""
			}
		default:
			return false, fmt.Errorf("%s heartbeat at generation %d: %v", m.name, m.gen, kerr.ErrorForCode(resp.ErrorCode))
		}
		m.rejoin = true
	}
	m.rejoin = true
	for attempt := 0; attempt < 2; attempt++ {
		req := classicStreamsJoin(m.t, "app", m.id, []string{"input"}, m.process, m.active...)
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 20000
		m.ledger.request(m.name, m.active, true, false)
		r := kmsg.NewPtrJoinGroupResponse()
		if err := m.roundTrip(req, 9, r); err != nil {
			return false, err
		}
		switch r.ErrorCode {
		case 0:
		case kerr.MemberIDRequired.Code:
			m.id = r.MemberID
			continue
		case kerr.RebalanceInProgress.Code:
			return false, nil // rejoin at the next tick
		default:
			return false, fmt.Errorf("%s join: %v", m.name, kerr.ErrorForCode(r.ErrorCode))
		}
		if r.Protocol == nil || *r.Protocol != "stream" {
			return false, fmt.Errorf("%s join selected %v", m.name, r.Protocol)
		}
		m.id, m.gen, m.plan = r.MemberID, r.Generation, nil
		if r.LeaderID == r.MemberID && len(r.Members) > 0 {
			plan, err := m.leaderPlan(r.Members)
			if err != nil {
				return false, err
			}
			m.plan = plan
		}
		return true, nil
	}
	return false, fmt.Errorf("%s: MEMBER_ID_REQUIRED twice", m.name)
}

// leaderPlan is what the leader's cooperative StreamsPartitionAssignor does: a task moves in
// two rebalances. Members keep what they report owning up to their balanced share; what a member
// gives up is assigned to nobody in this generation (the member revokes it and rejoins), and
// only tasks nobody reports owning go to the members with the fewest.
func (m *rollMember) leaderPlan(members []kmsg.JoinGroupResponseMember) (map[string]string, error) {
	owned := map[string][]int32{}
	taken := map[int32]bool{}
	ids := make([]string, 0, len(members))
	for _, mem := range members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(mem.ProtocolMetadata); err != nil {
			return nil, fmt.Errorf("leader %s: metadata of %s: %v", m.name, mem.MemberID, err)
		}
		if _, err := classicproto.DecodeSubscription(meta.UserData); err != nil {
			return nil, fmt.Errorf("leader %s: subscription of %s: %v", m.name, mem.MemberID, err)
		}
		ids = append(ids, mem.MemberID)
		owned[mem.MemberID] = []int32{}
		for _, op := range meta.OwnedPartitions {
			for _, p := range op.Partitions {
				if taken[p] {
					return nil, fmt.Errorf("leader %s: partition %d reported owned by two members", m.name, p)
				}
				taken[p] = true
				owned[mem.MemberID] = append(owned[mem.MemberID], p)
			}
		}
	}
	sort.Strings(ids)
	floor := rollPartitions / len(ids)
	ceil, roomAtCeil := floor, rollPartitions%len(ids)
	if roomAtCeil > 0 {
		ceil++
	}
	for _, id := range ids {
		share := floor
		if len(owned[id]) >= ceil && roomAtCeil > 0 {
			share, roomAtCeil = ceil, roomAtCeil-1
		}
		slices.Sort(owned[id])
		owned[id] = owned[id][:min(len(owned[id]), share)]
	}
	for p := int32(0); p < rollPartitions; p++ {
		if taken[p] {
			continue
		}
		to := ids[0]
		for _, id := range ids {
			if len(owned[id]) < len(owned[to]) {
				to = id
			}
		}
		owned[to] = append(owned[to], p)
	}
	plan := map[string]string{}
	for id, ps := range owned {
		slices.Sort(ps)
		plan[id] = seedAssignment(m.t, ps, nil)
	}
	return plan, nil
}

// classicSyncPhase is the SyncGroup after a JoinGroup; the member runs what the answer gives
// it from then on (a cooperative client drops the rest at once and reports it at its next
// JoinGroup).
func (m *rollMember) classicSyncPhase() error {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = "app", m.id, m.gen
	req.ProtocolType, req.Protocol = strp("consumer"), strp("stream")
	for id, a := range m.plan {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	resp := kmsg.NewPtrSyncGroupResponse()
	if err := m.roundTrip(req, 5, resp); err != nil {
		return err
	}
	switch resp.ErrorCode {
	case 0:
	case kerr.RebalanceInProgress.Code:
		return nil // still rejoining
	case kerr.IllegalGeneration.Code:
		m.active = nil
		return nil
	default:
		return fmt.Errorf("%s sync at generation %d: %v", m.name, m.gen, kerr.ErrorForCode(resp.ErrorCode))
	}
	ps, _ := decodeSeedSync(m.t, m.name, resp)
	slices.Sort(ps)
	// A cooperative client that had to give tasks up rejoins at once to say so.
	revoked := slices.ContainsFunc(m.active, func(p int32) bool { return !slices.Contains(ps, p) })
	m.active, m.rejoin, m.synced, m.quiet = ps, revoked, m.gen, 0
	m.ledger.answer(m.name, fmt.Sprintf("%s's SyncGroup answer at generation %d", m.name, m.gen), ps)
	return nil
}

func (m *rollMember) classicTick() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	syncNext, err := m.classicJoinPhase()
	if err != nil || !syncNext {
		return err
	}
	return m.classicSyncPhase()
}

func rollTaskIDs(ps []int32) []kmsg.TaskIDs {
	if len(ps) == 0 {
		return []kmsg.TaskIDs{}
	}
	return []kmsg.TaskIDs{{SubtopologyID: "0", Partitions: ps}}
}

// streamsBeat is one StreamsGroupHeartbeat reporting what the member runs; it applies the
// answer's tasks (revoked ones stop at once, new ones start) and reports whether they changed.
func (m *rollMember) streamsBeat() (bool, error) {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID = "app", m.id
	if !m.joined {
		pid := classicproto.Subscription{ProcessID: [16]byte{15: m.process}}.ProcessIDString()
		req.MemberEpoch, req.RebalanceTimeoutMillis, req.Topology, req.ProcessID = 0, 30000, seedTopology(), &pid
		req.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "host" + string('A'+rune(m.process)), Port: 8080}
	} else {
		req.MemberEpoch, req.RebalanceTimeoutMillis = m.gen, -1
	}
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = rollTaskIDs(m.active), rollTaskIDs(m.standby), rollTaskIDs(m.warmup)
	m.ledger.request(m.name, m.active, false, false)
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	if err := m.roundTrip(req, 1, resp); err != nil {
		return false, err
	}
	if resp.ErrorCode != 0 {
		return false, fmt.Errorf("%s heartbeat at epoch %d: %v %v", m.name, m.gen, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	m.joined, m.gen = true, resp.MemberEpoch
	if resp.ActiveTasks == nil { // unchanged
		return false, nil
	}
	a, s, w := seedTasks(resp.ActiveTasks), seedTasks(resp.StandbyTasks), seedTasks(resp.WarmupTasks)
	slices.Sort(a)
	slices.Sort(s)
	slices.Sort(w)
	changed := !slices.Equal(a, m.active) || !slices.Equal(s, m.standby) || !slices.Equal(w, m.warmup)
	m.active, m.standby, m.warmup = a, s, w
	m.ledger.answer(m.name, fmt.Sprintf("%s's heartbeat answer at epoch %d", m.name, m.gen), a)
	return changed, nil
}

// leave stops the instance: it stops its tasks, then leaves (LeaveGroup for a classic
// member, MemberEpoch -1 for a streams member).
func (m *rollMember) leave(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active, m.standby, m.warmup = nil, nil, nil
	m.ledger.request(m.name, nil, m.classic, true)
	if m.classic {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = "app"
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.id
		req.Members = []kmsg.LeaveGroupRequestMember{lm}
		resp := kmsg.NewPtrLeaveGroupResponse()
		if err := m.roundTrip(req, 4, resp); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || len(resp.Members) != 1 || resp.Members[0].ErrorCode != 0 {
			t.Fatalf("%s's LeaveGroup: %+v", m.name, resp)
		}
		return
	}
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "app", m.id, -1, -1
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	if err := m.roundTrip(req, 1, resp); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || resp.MemberEpoch != -1 {
		t.Fatalf("%s's leave: %+v", m.name, resp)
	}
}

// commit commits the next offset of every partition the member runs, with its generation or
// member epoch, as its commit interval would.
func (m *rollMember) commit(t *testing.T, offset *int64, committed map[int32]int64) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.active) == 0 {
		return
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = "app", m.id, m.gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "input"
	next := map[int32]int64{}
	for _, p := range m.active {
		*offset++
		next[p] = *offset
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = p, *offset
		rt.Partitions = append(rt.Partitions, cp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	resp := kmsg.NewPtrOffsetCommitResponse()
	if err := m.roundTrip(req, 9, resp); err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("%s's commit of input-%d at generation %d: %v", m.name, p.Partition, m.gen, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	for p, o := range next {
		committed[p] = o
	}
}

// rollingApp is the application and the coordinator's view of it the test checks.
type rollingApp struct {
	t         *testing.T
	addr      string
	ctl       *rawConn
	corr      int32
	ledger    *rollLedger
	live      []*rollMember
	offset    int64
	committed map[int32]int64
}

// runsEveryTaskOnce reports whether the live instances together run every task exactly once.
func (a *rollingApp) runsEveryTaskOnce() (bool, string) {
	seen := map[int32]string{}
	for _, m := range a.live {
		m.mu.Lock()
		active := slices.Clone(m.active)
		m.mu.Unlock()
		for _, p := range active {
			if o, ok := seen[p]; ok {
				return false, fmt.Sprintf("task 0_%d run by %s and %s", p, o, m.name)
			}
			seen[p] = m.name
		}
	}
	if len(seen) != rollPartitions {
		return false, fmt.Sprintf("%d of %d tasks run", len(seen), rollPartitions)
	}
	return true, ""
}

func (a *rollingApp) call(req kmsg.Request, version int16, resp kmsg.Response) {
	a.t.Helper()
	a.corr++
	a.ctl.write(frame(req, version, a.corr, nil, nil))
	a.ctl.read(resp, version, a.corr)
}

func (a *rollingApp) listedType() string {
	a.t.Helper()
	resp := kmsg.NewPtrListGroupsResponse()
	a.call(kmsg.NewPtrListGroupsRequest(), 5, resp)
	for _, g := range resp.Groups {
		if g.Group == "app" {
			return g.GroupType
		}
	}
	return ""
}

func (a *rollingApp) describeClassic() kmsg.DescribeGroupsResponseGroup {
	a.t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"app"}
	resp := kmsg.NewPtrDescribeGroupsResponse()
	a.call(req, 5, resp)
	return resp.Groups[0]
}

// checkOffsets fails unless every partition's committed offset is the last one committed.
func (a *rollingApp) checkOffsets(when string) {
	a.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "app"
	ft := kmsg.NewOffsetFetchRequestGroupTopic()
	ft.Topic = "input"
	for p := int32(0); p < rollPartitions; p++ {
		ft.Partitions = append(ft.Partitions, p)
	}
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{ft}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	resp := kmsg.NewPtrOffsetFetchResponse()
	a.call(req, 8, resp)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
		a.t.Fatalf("%s: offset fetch %+v", when, resp)
	}
	for _, p := range resp.Groups[0].Topics[0].Partitions {
		want, ok := a.committed[p.Partition]
		if !ok {
			want = -1
		}
		if p.ErrorCode != 0 || p.Offset != want {
			a.t.Fatalf("%s: input-%d committed at %d (%v), the last commit was %d", when, p.Partition, p.Offset, kerr.ErrorForCode(p.ErrorCode), want)
		}
	}
}

// commitAll has every live instance commit what it runs.
func (a *rollingApp) commitAll() {
	a.t.Helper()
	for _, m := range a.live {
		m.commit(a.t, &a.offset, a.committed)
	}
}

// settleClassic runs the classic members of a classic group in the background, each as its own
// client thread would (heartbeat, and on REBALANCE_IN_PROGRESS rejoin and sync; JoinGroup and
// SyncGroup block until the rebalance completes), until the group is Stable with all of them
// synced at one generation and every task run once.
func (a *rollingApp) settleClassic(what string) {
	a.t.Helper()
	a.ledger.setGroup("classic")
	stop := make(chan struct{})
	errs := make(chan error, len(a.live))
	var wg sync.WaitGroup
	for _, m := range a.live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopped := false
			defer func() { // a failed check of a shared helper ends the goroutine, not the test
				if !stopped {
					errs <- fmt.Errorf("%s's client thread ended by a failed check", m.name)
				}
			}()
			for {
				if err := m.classicTick(); err != nil {
					errs <- err
					stopped = true
					return
				}
				select {
				case <-stop:
					stopped = true
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	halt := func() { close(stop); wg.Wait() }
	why := ""
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-errs:
			halt()
			a.t.Fatalf("%s: %v", what, err)
		default:
		}
		a.ledger.check(a.t, what)
		if why = a.classicStable(); why == "" {
			g := a.describeClassic()
			if g.State == "Stable" && len(g.Members) == len(a.live) && g.ProtocolType == "consumer" && g.Protocol == "stream" {
				halt()
				a.ledger.check(a.t, what)
				return
			}
			why = fmt.Sprintf("described %s with %d members", g.State, len(g.Members))
		}
	}
	halt()
	a.t.Fatalf("%s: the classic group did not settle within 60s: %s", what, why)
}

func (a *rollingApp) classicStable() string {
	gen := int32(-1)
	for _, m := range a.live {
		m.mu.Lock()
		synced, quiet, rejoin := m.synced, m.quiet, m.rejoin
		m.mu.Unlock()
		if rejoin || synced < 0 || quiet < 2 {
			return m.name + " not settled"
		}
		if gen >= 0 && synced != gen {
			return fmt.Sprintf("generations %d and %d", gen, synced)
		}
		gen = synced
	}
	if ok, why := a.runsEveryTaskOnce(); !ok {
		return why
	}
	return ""
}

// settleStreams drives a streams group with classic and streams members in rounds, on the
// test's goroutine (every answer applied before the next request is sent): each prompted
// classic member rejoins, then the streams members heartbeat, then the classic members that
// rejoined sync, so other members act between a classic member's JoinGroup and its SyncGroup.
// It returns once a round changes nothing, the group is Stable and every task runs once.
func (a *rollingApp) settleStreams(what string) kmsg.StreamsGroupDescribeResponseGroup {
	a.t.Helper()
	a.ledger.setGroup("streams")
	for round := 1; round <= 100; round++ {
		changed := false
		var syncing []*rollMember
		for _, m := range a.live {
			if !m.classic {
				continue
			}
			m.mu.Lock()
			syncNext, err := m.classicJoinPhase()
			m.mu.Unlock()
			if err != nil {
				a.t.Fatalf("%s: %v", what, err)
			}
			if syncNext {
				syncing, changed = append(syncing, m), true
			}
		}
		for _, m := range a.live {
			if m.classic {
				continue
			}
			m.mu.Lock()
			moved, err := m.streamsBeat()
			m.mu.Unlock()
			if err != nil {
				a.t.Fatalf("%s: %v", what, err)
			}
			changed = changed || moved
		}
		for _, m := range syncing {
			m.mu.Lock()
			err := m.classicSyncPhase()
			m.mu.Unlock()
			if err != nil {
				a.t.Fatalf("%s: %v", what, err)
			}
		}
		a.ledger.check(a.t, what)
		if changed {
			continue
		}
		if ok, _ := a.runsEveryTaskOnce(); ok {
			if g := describeStreams(a.t, a.addr, "app"); g.ErrorCode == 0 && g.State == "Stable" {
				return g
			}
		}
	}
	_, why := a.runsEveryTaskOnce()
	a.t.Fatalf("%s: the streams group did not settle in 100 rounds: %s; %+v", what, why, describeStreams(a.t, a.addr, "app"))
	return kmsg.StreamsGroupDescribeResponseGroup{}
}

// checkStreamsGroup checks the described streams group: every live instance a member, the
// classic ones flagged as such, the default assignor.
func (a *rollingApp) checkStreamsGroup(when string, g kmsg.StreamsGroupDescribeResponseGroup) {
	a.t.Helper()
	if tp := a.listedType(); tp != "streams" {
		a.t.Fatalf("%s: ListGroups type %q, want streams", when, tp)
	}
	if g.AssignorName == nil || *g.AssignorName != "sticky" || len(g.Members) != len(a.live) {
		a.t.Fatalf("%s: described %+v", when, g)
	}
	classic := map[string]bool{}
	for _, m := range a.live {
		classic[m.id] = m.classic
	}
	for _, dm := range g.Members {
		if is, ok := classic[dm.MemberID]; !ok || is != dm.IsClassic {
			a.t.Fatalf("%s: described member %s IsClassic %v, live classic %v (known %v)", when, dm.MemberID, dm.IsClassic, is, ok)
		}
	}
}

func (a *rollingApp) classicCount() int {
	n := 0
	for _, m := range a.live {
		if m.classic {
			n++
		}
	}
	return n
}

func (a *rollingApp) remove(m *rollMember) {
	a.live = slices.DeleteFunc(a.live, func(x *rollMember) bool { return x == m })
}

// The rolling upgrade and downgrade over the wire. Ten classic Kafka Streams instances
// (20 tasks) form a classic group and commit; then one at a time an instance stops (LeaveGroup)
// and restarts with the Streams protocol under the same process id, the others heartbeating and
// rejoining as their answers require; once all ten use the Streams protocol, the same roll goes
// back to classic. The group's default assignor does the targets: sticky, as in Kafka. At every
// answer that hands out tasks (SyncGroup assignments, heartbeat task lists) no task may be
// active on two members, ownership ending only at the member's next request that no longer
// reports the task (revocation as each protocol defines it). After every step the committed
// offsets are the last ones committed, and the group type follows the roll: classic, streams
// from the first streams instance on, classic again when the last one leaves.
func TestMigrationRollingUpgradeAndDowngradeOverTheWire(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.session.timeout.ms=30000", "group.streams.initial.rebalance.delay.ms=0",
		"group.streams.assignment.interval.ms=0", "group.initial.rebalance.delay.ms=1000")
	createStreamsTopics(t, d.Addr, rollPartitions, "input", "app-store-changelog")
	ledger := &rollLedger{holders: map[int32]map[string]bool{}, revocations: map[string]int{}}
	a := &rollingApp{t: t, addr: d.Addr, ctl: dialRaw(t, d.Addr), ledger: ledger, committed: map[int32]int64{}}
	for i := 0; i < rollInstances; i++ {
		a.live = append(a.live, newRollMember(t, d.Addr, fmt.Sprintf("c%d", i), byte(i), true, ledger))
	}
	a.settleClassic("the classic group forms")
	if tp := a.listedType(); tp != "classic" {
		t.Fatalf("ListGroups type %q, want classic", tp)
	}
	a.checkOffsets("before any commit")
	a.commitAll()

	// A rolling restart of instance i: it stops (its tasks with it) and leaves, the group
	// rebalances without it, it starts again with the other protocol under the same process
	// id, and the group rebalances with it: the assignor moves tasks from running members to
	// it, which they must revoke before it may run them.
	// The group is a streams group exactly while a streams member is in it (the default policy
	// bidirectional).
	settle := func(what string) {
		t.Helper()
		if a.classicCount() == len(a.live) {
			if tp := a.listedType(); tp != "classic" {
				t.Fatalf("%s: ListGroups type %q with only classic members, want classic", what, tp)
			}
			a.settleClassic(what)
		} else {
			a.checkStreamsGroup(what, a.settleStreams(what))
		}
		a.checkOffsets(what)
		a.commitAll()
	}
	roll := func(name string, classic bool) {
		t.Helper()
		old := a.live[0]
		old.leave(t)
		a.remove(old)
		settle(fmt.Sprintf("%s stopped", old.name))
		m := newRollMember(t, d.Addr, name, old.process, classic, ledger)
		a.live = append(a.live, m)
		if !classic {
			// Its first heartbeat; the first one converts the classic group.
			ledger.setGroup("streams")
			m.mu.Lock()
			_, err := m.streamsBeat()
			m.mu.Unlock()
			if err != nil {
				t.Fatalf("%s starts: %v", name, err)
			}
			ledger.check(t, name+" starts")
		}
		settle(name + " started")
	}
	for i := 0; i < rollInstances; i++ {
		roll(fmt.Sprintf("s%d", i), false)
	}
	if n := a.classicCount(); n != 0 {
		t.Fatalf("%d classic members after the upgrade", n)
	}
	for i := 0; i < rollInstances; i++ {
		roll(fmt.Sprintf("k%d", i), true)
	}
	if tp := a.listedType(); tp != "classic" {
		t.Fatalf("after the downgrade: ListGroups type %q, want classic", tp)
	}
	if g := describeStreams(t, d.Addr, "app"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("after the downgrade: StreamsGroupDescribe of the classic group: %+v", g)
	}
	a.checkOffsets("the end")
	ledger.check(t, "the end")
	// The roll made running members of both kinds give tasks up inside the streams group, so
	// revocation before assignment was exercised both ways.
	for _, kind := range []string{"classic", "streams"} {
		if ledger.revocations[kind+" members in a streams group"] == 0 {
			t.Fatalf("no %s member revoked a task inside the streams group: %v", kind, ledger.revocations)
		}
	}
	t.Logf("%d task-handing answers checked, revocations %v, %d offsets committed", ledger.answers, ledger.revocations, a.offset)
}
