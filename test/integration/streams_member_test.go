package integration

import (
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A simulated Kafka Streams application: members that heartbeat with the Streams rebalance
// protocol (KIP-1071) over their own raw connections, revoke tasks as soon as they are told to
// and acknowledge by reporting what they own, like a Kafka Streams client thread. The app
// records each member's acknowledged active ownership and flags any moment at which two
// members own the same active task.

type streamsTask struct {
	sub  string
	part int32
}

// streamsApp is the world the members share: where to reach the coordinator, the topology,
// and the ownership ledger the invariant is checked against.
type streamsApp struct {
	t        testing.TB
	group    string
	topology func() *kmsg.StreamsGroupHeartbeatRequestTopology
	interval time.Duration

	mu         sync.Mutex
	addr       string
	active     map[streamsTask]string // acknowledged active owner
	violations []string
	members    []*simMember
}

func newStreamsApp(t testing.TB, addr, group string, topology func() *kmsg.StreamsGroupHeartbeatRequestTopology) *streamsApp {
	return &streamsApp{t: t, group: group, topology: topology, addr: addr, interval: 100 * time.Millisecond, active: map[streamsTask]string{}}
}

func (a *streamsApp) setAddr(addr string) { a.mu.Lock(); a.addr = addr; a.mu.Unlock() }
func (a *streamsApp) getAddr() string     { a.mu.Lock(); defer a.mu.Unlock(); return a.addr }

func (a *streamsApp) take(member string, t streamsTask) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if owner, ok := a.active[t]; ok && owner != member {
		a.violations = append(a.violations, fmt.Sprintf("task %s_%d owned as active by %s and %s", t.sub, t.part, owner, member))
	}
	a.active[t] = member
}

func (a *streamsApp) release(member string, t streamsTask) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active[t] == member {
		delete(a.active, t)
	}
}

// checkInvariant fails the test if two members ever owned one active task at once.
func (a *streamsApp) checkInvariant() {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.violations) > 0 {
		a.t.Fatalf("ownership invariant violated %d times, first: %s", len(a.violations), a.violations[0])
	}
}

// simMember is one Streams member (one stream thread).
type simMember struct {
	app      *streamsApp
	id       string
	process  string
	instance *string

	mu     sync.Mutex
	conn   net.Conn
	corr   int32
	epoch  int32
	owned  [3]map[streamsTask]bool // active, standby, warm-up
	joined bool
	errors map[int16]int
	last   *kmsg.StreamsGroupHeartbeatResponse
	beats  int
	// caughtUp: every heartbeat reports TaskOffsets equal to TaskEndOffsets for every task the
	// member holds, as a Streams instance whose state stores are restored does.
	caughtUp bool
	// The beat on which the member first held a warm-up task and first held an active task (0:
	// never).
	firstWarmup, firstActive int
	stop                     chan struct{}
	stopped                  chan struct{}
}

func (a *streamsApp) newMember(id, process string, instance *string) *simMember {
	m := &simMember{app: a, id: id, process: process, instance: instance, errors: map[int16]int{}}
	for i := range m.owned {
		m.owned[i] = map[streamsTask]bool{}
	}
	a.mu.Lock()
	a.members = append(a.members, m)
	a.mu.Unlock()
	return m
}

// start runs the member's heartbeat loop in the background.
func (m *simMember) start() {
	m.stop, m.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.stopped)
		for {
			changed := m.heartbeat()
			wait := m.app.interval
			if changed {
				wait = 0 // Kafka Streams heartbeats at once after its owned tasks change
			}
			select {
			case <-m.stop:
				return
			case <-time.After(wait):
			}
		}
	}()
}

// crash stops the member without a leave, as kill -9 of its JVM would: the coordinator only
// learns from the session timeout. Its tasks die with it.
func (m *simMember) crash() {
	close(m.stop)
	<-m.stopped
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn != nil {
		m.conn.Close()
		m.conn = nil
	}
	m.dropAll()
}

// leave stops the member and sends a leave heartbeat (-1 dynamic, -2 static).
func (m *simMember) leave() *kmsg.StreamsGroupHeartbeatResponse {
	close(m.stop)
	<-m.stopped
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropAll()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID, req.RebalanceTimeoutMillis = m.app.group, m.id, m.instance, -1
	req.MemberEpoch = -1
	if m.instance != nil {
		req.MemberEpoch = -2
	}
	resp, err := m.roundTrip(req)
	if m.conn != nil {
		m.conn.Close()
		m.conn = nil
	}
	if err != nil {
		return nil
	}
	return resp
}

func (m *simMember) dropAll() {
	for t := range m.owned[0] {
		m.app.release(m.id, t)
	}
	for i := range m.owned {
		m.owned[i] = map[streamsTask]bool{}
	}
	m.joined = false
}

func (m *simMember) roundTrip(req *kmsg.StreamsGroupHeartbeatRequest) (*kmsg.StreamsGroupHeartbeatResponse, error) {
	if m.conn == nil {
		c, err := net.DialTimeout("tcp", m.app.getAddr(), 2*time.Second)
		if err != nil {
			return nil, err
		}
		m.conn = c
	}
	m.corr++
	cid := "sim-" + m.id
	m.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := m.conn.Write(frame(req, 1, m.corr, &cid, nil)); err != nil {
		m.conn.Close()
		m.conn = nil
		return nil, err
	}
	var size [4]byte
	if _, err := readFull(m.conn, size[:]); err != nil {
		m.conn.Close()
		m.conn = nil
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := readFull(m.conn, buf); err != nil {
		m.conn.Close()
		m.conn = nil
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(buf)); corr != m.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, m.corr)
	}
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	resp.SetVersion(1)
	if err := resp.ReadFrom(buf[5:]); err != nil { // skip the flexible header's empty tag section
		return nil, err
	}
	return resp, nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func ownedWire(set map[streamsTask]bool) []kmsg.TaskIDs {
	by := map[string][]int32{}
	for t := range set {
		by[t.sub] = append(by[t.sub], t.part)
	}
	subs := make([]string, 0, len(by))
	for s := range by {
		subs = append(subs, s)
	}
	sort.Strings(subs)
	out := []kmsg.TaskIDs{}
	for _, s := range subs {
		ps := by[s]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		t := kmsg.NewTaskIDs()
		t.SubtopologyID, t.Partitions = s, ps
		out = append(out, t)
	}
	return out
}

// heartbeat sends one heartbeat and applies the answer; it reports whether owned tasks changed.
func (m *simMember) heartbeat() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID = m.app.group, m.id, m.instance
	req.ProcessID = &m.process
	if !m.joined {
		req.MemberEpoch, req.RebalanceTimeoutMillis, req.Topology = 0, 30000, m.app.topology()
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	} else {
		req.MemberEpoch, req.RebalanceTimeoutMillis = m.epoch, -1
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = ownedWire(m.owned[0]), ownedWire(m.owned[1]), ownedWire(m.owned[2])
		if m.caughtUp {
			req.TaskOffsets, req.TaskEndOffsets = []kmsg.TaskOffset{}, []kmsg.TaskOffset{}
			for _, set := range m.owned {
				for t := range set {
					o := kmsg.NewTaskOffset()
					o.SubtopologyID, o.Partition, o.Offset = t.sub, t.part, 4242
					req.TaskOffsets, req.TaskEndOffsets = append(req.TaskOffsets, o), append(req.TaskEndOffsets, o)
				}
			}
		}
	}
	resp, err := m.roundTrip(req)
	if err != nil {
		return false // the coordinator is away (restart): keep the tasks and retry
	}
	m.beats++
	m.last = resp
	switch resp.ErrorCode {
	case 0:
	case kerr.FencedMemberEpoch.Code, kerr.UnknownMemberID.Code:
		m.errors[resp.ErrorCode]++
		m.dropAll() // fenced: abandon every task and rejoin
		return true
	default:
		m.errors[resp.ErrorCode]++
		return false
	}
	m.joined = true
	m.epoch = resp.MemberEpoch
	if resp.ActiveTasks == nil {
		return false
	}
	changed := false
	for role, list := range [][]kmsg.TaskIDs{resp.ActiveTasks, resp.StandbyTasks, resp.WarmupTasks} {
		next := map[streamsTask]bool{}
		for _, ids := range list {
			for _, p := range ids.Partitions {
				next[streamsTask{ids.SubtopologyID, p}] = true
			}
		}
		for t := range m.owned[role] { // revoke first
			if !next[t] {
				if role == 0 {
					m.app.release(m.id, t)
				}
				delete(m.owned[role], t)
				changed = true
			}
		}
		for t := range next {
			if !m.owned[role][t] {
				if role == 0 {
					m.app.take(m.id, t)
				}
				m.owned[role][t] = true
				changed = true
			}
		}
	}
	if len(m.owned[2]) > 0 && m.firstWarmup == 0 {
		m.firstWarmup = m.beats
	}
	if len(m.owned[0]) > 0 && m.firstActive == 0 {
		m.firstActive = m.beats
	}
	return changed
}

// snapshot returns the member's owned tasks per role and its epoch.
func (m *simMember) snapshot() (active, standby map[streamsTask]bool, epoch int32, joined bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	active, standby = map[streamsTask]bool{}, map[streamsTask]bool{}
	for t := range m.owned[0] {
		active[t] = true
	}
	for t := range m.owned[1] {
		standby[t] = true
	}
	return active, standby, m.epoch, m.joined
}

// streamsTopology builds a topology of n stateful subtopologies "0".."n-1" reading topics
// <prefix>-<i>, each with a changelog the coordinator creates.
func streamsTopology(prefix string, n int) func() *kmsg.StreamsGroupHeartbeatRequestTopology {
	return func() *kmsg.StreamsGroupHeartbeatRequestTopology {
		t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
		for i := 0; i < n; i++ {
			st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
			st.SubtopologyID = fmt.Sprint(i)
			st.SourceTopics = []string{fmt.Sprintf("%s-%d", prefix, i)}
			cl := kmsg.NewTopicInfo()
			cl.Topic = fmt.Sprintf("%s-store-%d-changelog", prefix, i)
			st.StateChangelogTopics = []kmsg.TopicInfo{cl}
			t.Subtopologies = append(t.Subtopologies, st)
		}
		return &t
	}
}

// converged reports whether the live members' acknowledged ownership is a full, valid,
// balanced assignment: every active task owned exactly once, standbys (when wanted) on
// another process than the active, active counts differing by at most one.
func (a *streamsApp) converged(live []*simMember, subs, parts, standbys int) (bool, string) {
	activeOwner := map[streamsTask]string{}
	standbyProcs := map[streamsTask][]string{}
	procOf := map[string]string{}
	minA, maxA := 1<<30, 0
	for _, m := range live {
		act, sb, _, joined := m.snapshot()
		if !joined {
			return false, m.id + " not joined"
		}
		procOf[m.id] = m.process
		for t := range act {
			if o, ok := activeOwner[t]; ok {
				return false, fmt.Sprintf("task %v active on %s and %s", t, o, m.id)
			}
			activeOwner[t] = m.id
		}
		for t := range sb {
			standbyProcs[t] = append(standbyProcs[t], m.process)
		}
		minA, maxA = min(minA, len(act)), max(maxA, len(act))
	}
	if len(activeOwner) != subs*parts {
		return false, fmt.Sprintf("%d of %d active tasks owned", len(activeOwner), subs*parts)
	}
	if maxA-minA > 1 {
		return false, fmt.Sprintf("active tasks per member from %d to %d", minA, maxA)
	}
	if standbys > 0 {
		for t, owner := range activeOwner {
			ps := standbyProcs[t]
			if len(ps) != standbys {
				return false, fmt.Sprintf("task %v has %d standbys", t, len(ps))
			}
			for _, p := range ps {
				if p == procOf[owner] {
					return false, fmt.Sprintf("task %v standby on its active's process", t)
				}
			}
		}
	}
	return true, ""
}

// waitConverged polls until converged or the deadline, checking the invariant throughout.
func (a *streamsApp) waitConverged(live []*simMember, subs, parts, standbys int, within time.Duration) {
	a.t.Helper()
	deadline := time.Now().Add(within)
	why := ""
	for time.Now().Before(deadline) {
		a.checkInvariant()
		var ok bool
		if ok, why = a.converged(live, subs, parts, standbys); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, m := range live {
		m.mu.Lock()
		if m.last != nil {
			a.t.Logf("%s: epoch %d beats %d errors %v last status %+v", m.id, m.epoch, m.beats, m.errors, m.last.Status)
		} else {
			a.t.Logf("%s: no answer yet, errors %v", m.id, m.errors)
		}
		m.mu.Unlock()
	}
	// What the coordinator holds tells a lost member or a target never computed from a member
	// that never reconciled.
	g := describeStreams(a.t, a.getAddr(), a.group)
	a.t.Logf("group %s: state %s, group epoch %d, assignment epoch %d, %d members", a.group, g.State, g.Epoch, g.AssignmentEpoch, len(g.Members))
	for _, gm := range g.Members {
		a.t.Logf("  %s: member epoch %d, %d active subtopologies assigned, %d target", gm.MemberID, gm.MemberEpoch, len(gm.Assignment.ActiveTasks), len(gm.TargetAssignment.ActiveTasks))
	}
	a.t.Fatalf("no convergence within %v: %s", within, why)
}

// assignmentOf snapshots every live member's active and standby sets.
func assignmentOf(live []*simMember) map[string][2]map[streamsTask]bool {
	out := map[string][2]map[streamsTask]bool{}
	for _, m := range live {
		a, s, _, _ := m.snapshot()
		out[m.id] = [2]map[streamsTask]bool{a, s}
	}
	return out
}

func (a *streamsApp) stopAll() {
	a.mu.Lock()
	ms := append([]*simMember(nil), a.members...)
	a.mu.Unlock()
	for _, m := range ms {
		select {
		case <-m.stopped:
		default:
			if m.stop != nil {
				select {
				case <-m.stop:
				default:
					close(m.stop)
					<-m.stopped
				}
			}
		}
	}
}

// describeStreams sends StreamsGroupDescribe v1 on a raw connection.
func describeStreams(t testing.TB, addr, group string) kmsg.StreamsGroupDescribeResponseGroup {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups, req.IncludeAuthorizedOperations = []string{group}, true
	c.write(frame(req, 1, 1, nil, nil))
	resp := kmsg.NewPtrStreamsGroupDescribeResponse()
	c.read(resp, 1, 1)
	if len(resp.Groups) != 1 {
		t.Fatalf("describe answered %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

// createTopics creates source topics with kadm-free raw CreateTopics.
func createStreamsTopics(t testing.TB, addr string, partitions int32, names ...string) {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, n := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, partitions, 1
		req.Topics = append(req.Topics, rt)
	}
	req.TimeoutMillis = 5000
	c.write(frame(req, 5, 1, nil, nil))
	resp := kmsg.NewPtrCreateTopicsResponse()
	c.read(resp, 5, 1)
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create %s: %d", rt.Topic, rt.ErrorCode)
		}
	}
}
