package soak

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The well-behaved side of the soak: classic consumer groups (franz-go) that commit offsets
// and Streams groups (KIP-1071 members over raw connections) that own tasks. Their names
// ("behaved-...") are out of reach of the hostile name pools.

// ledger is every offset commit the server acknowledged with NONE, the highest per partition.
// A partition's offsets only grow: each commit carries the next value of one counter per
// partition, taken while the member owns the partition and holds off its revocation, so a later
// acknowledged commit never carries a smaller value than an earlier one.
type ledger struct {
	mu      sync.Mutex
	next    map[string]map[int32]int64 // group -> partition -> next value to commit
	acked   map[string]map[int32]int64 // group -> partition -> highest acknowledged
	commits atomic.Int64
	refused atomic.Int64
}

func newLedger() *ledger {
	return &ledger{next: map[string]map[int32]int64{}, acked: map[string]map[int32]int64{}}
}

func (l *ledger) take(group string, p int32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next[group] == nil {
		l.next[group] = map[int32]int64{}
	}
	l.next[group][p]++
	return l.next[group][p]
}

func (l *ledger) ack(group string, p int32, off int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acked[group] == nil {
		l.acked[group] = map[int32]int64{}
	}
	l.acked[group][p] = max(l.acked[group][p], off)
}

// classicMember is one kgo group member that commits, every tick, the next offset of each
// partition it owns.
type classicMember struct {
	group, topic string
	cl           *kgo.Client
	ledger       *ledger

	mu    sync.Mutex // held across a commit, and by the revoke callback: no commit outlives ownership
	owned map[int32]bool
}

func newClassicMember(addr, group, topic string, l *ledger) (*classicMember, error) {
	m := &classicMember{group: group, topic: topic, ledger: l, owned: map[int32]bool{}}
	update := func(parts map[string][]int32, add bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range parts[topic] {
			if add {
				m.owned[p] = true
			} else {
				delete(m.owned, p)
			}
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.SessionTimeout(30*time.Second),
		kgo.RebalanceTimeout(30*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { update(p, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { update(p, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { update(p, false) }),
	)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	// coordinatord serves no Fetch: the polls only keep kgo's group management running.
	go func() {
		for {
			if cl.PollFetches(context.Background()).IsClientClosed() {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return m, nil
}

// commitOnce commits the next offset of every owned partition and records what was acked.
func (m *classicMember) commitOnce() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.owned) == 0 {
		return
	}
	offs := map[int32]kgo.EpochOffset{}
	for p := range m.owned {
		offs[p] = kgo.EpochOffset{Epoch: -1, Offset: m.ledger.take(m.group, p)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{m.topic: offs}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil || resp == nil {
			m.ledger.refused.Add(1)
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.Topic == m.topic && p.ErrorCode == 0 {
					m.ledger.ack(m.group, p.Partition, offs[p.Partition].Offset)
					m.ledger.commits.Add(1)
				} else {
					m.ledger.refused.Add(1)
				}
			}
		}
	})
}

// A simulated Kafka Streams application, adapted from test/integration's member simulator:
// members heartbeat with StreamsGroupHeartbeat v1 on their own raw connections, revoke as soon
// as told and report what they own. The app flags any moment two members own one active task.

type streamsTask struct {
	sub  string
	part int32
}

type streamsApp struct {
	group    string
	topology func() *kmsg.StreamsGroupHeartbeatRequestTopology
	addr     string
	interval time.Duration

	mu         sync.Mutex
	active     map[streamsTask]string
	violations []string
	members    []*simMember
	takes      int
}

func newStreamsApp(addr, group string, topology func() *kmsg.StreamsGroupHeartbeatRequestTopology) *streamsApp {
	return &streamsApp{group: group, topology: topology, addr: addr, interval: 200 * time.Millisecond, active: map[streamsTask]string{}}
}

func (a *streamsApp) take(member string, t streamsTask) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.takes++
	if owner, ok := a.active[t]; ok && owner != member {
		a.violations = append(a.violations, fmt.Sprintf("%s: task %s_%d owned as active by %s and %s", a.group, t.sub, t.part, owner, member))
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

// state reports the violations so far and how many tasks are owned.
func (a *streamsApp) state() (violations []string, owned, takes int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.violations...), len(a.active), a.takes
}

type simMember struct {
	app     *streamsApp
	id      string
	process string

	mu      sync.Mutex
	conn    net.Conn
	corr    int32
	epoch   int32
	owned   [3]map[streamsTask]bool // active, standby, warm-up
	joined  bool
	errors  map[int16]int
	beats   int
	stop    chan struct{}
	stopped chan struct{}
}

func (a *streamsApp) newMember(id, process string) *simMember {
	m := &simMember{app: a, id: id, process: process, errors: map[int16]int{}}
	for i := range m.owned {
		m.owned[i] = map[streamsTask]bool{}
	}
	a.mu.Lock()
	a.members = append(a.members, m)
	a.mu.Unlock()
	m.stop, m.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.stopped)
		for {
			wait := a.interval
			if m.heartbeat() {
				wait = 0 // Kafka Streams heartbeats at once after its owned tasks change
			}
			select {
			case <-m.stop:
				return
			case <-time.After(wait):
			}
		}
	}()
	return m
}

// leave stops the member and sends its leave heartbeat.
func (m *simMember) leave() {
	close(m.stop)
	<-m.stopped
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropAll()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = m.app.group, m.id, -1, -1
	m.roundTrip(req)
	if m.conn != nil {
		m.conn.Close()
		m.conn = nil
	}
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
		c, err := net.DialTimeout("tcp", m.app.addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		m.conn = c
	}
	m.corr++
	drop := func(err error) (*kmsg.StreamsGroupHeartbeatResponse, error) {
		m.conn.Close()
		m.conn = nil
		return nil, err
	}
	m.conn.SetDeadline(time.Now().Add(20 * time.Second))
	req.SetVersion(1)
	body := kbin.AppendInt16(nil, req.Key())
	body = kbin.AppendInt16(body, 1)
	body = kbin.AppendInt32(body, m.corr)
	body = kbin.AppendNullableString(body, &m.id)
	body = append(body, 0)
	body = req.AppendTo(body)
	if _, err := m.conn.Write(append(kbin.AppendInt32(nil, int32(len(body))), body...)); err != nil {
		return drop(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(m.conn, size[:]); err != nil {
		return drop(err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(m.conn, buf); err != nil {
		return drop(err)
	}
	if corr := int32(binary.BigEndian.Uint32(buf)); corr != m.corr {
		return drop(fmt.Errorf("correlation id %d, want %d", corr, m.corr))
	}
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	resp.SetVersion(1)
	if err := resp.ReadFrom(buf[5:]); err != nil {
		return drop(err)
	}
	return resp, nil
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
	req.Group, req.MemberID, req.ProcessID = m.app.group, m.id, &m.process
	if !m.joined {
		req.MemberEpoch, req.RebalanceTimeoutMillis, req.Topology = 0, 30000, m.app.topology()
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	} else {
		req.MemberEpoch, req.RebalanceTimeoutMillis = m.epoch, -1
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = ownedWire(m.owned[0]), ownedWire(m.owned[1]), ownedWire(m.owned[2])
	}
	resp, err := m.roundTrip(req)
	if err != nil {
		return false // keep the tasks and retry, as a Streams client does while the coordinator is away
	}
	m.beats++
	switch resp.ErrorCode {
	case 0:
	case kerr.FencedMemberEpoch.Code, kerr.UnknownMemberID.Code:
		m.errors[resp.ErrorCode]++
		m.dropAll()
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
	return changed
}

// streamsTopology is n stateful subtopologies "0".."n-1" reading <prefix>-<i>.
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
