package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Membership timings of the scale-out tests: the reference broker's group.min.session.timeout.ms
// is 6000.
var scaleOutTimings = []string{"log.kafka.session.timeout.ms=6000", "log.kafka.heartbeat.interval.ms=1000",
	"log.kafka.rebalance.timeout.ms=20000"}

const scaleOutShards = 6

type scaleOut struct {
	t     *testing.T
	nodes map[int32]*gateway
	topic string
	sets  []string
	// shards is offsets.topic.num.partitions: scaleOutShards unless extra keys set it.
	shards float64
}

// add starts one more node.
func (s *scaleOut) add(id int32) {
	s.nodes[id] = startGateway(s.t, append(append([]string{}, s.sets...), fmt.Sprintf("node.id=%d", id))...)
}

// startScaleOut starts n coordinatord nodes (node ids 2001...) sharing one state topic and
// cluster.id, and waits until the shards are spread over all of them. extra keys come last and
// win over the defaults.
func startScaleOut(t *testing.T, n int, extra ...string) *scaleOut {
	run := time.Now().UnixNano()
	sets := append(append([]string{"log.backend=kafka", fmt.Sprintf("log.kafka.topic=state-%d", run), fmt.Sprintf("cluster.id=so%d", run),
		fmt.Sprintf("offsets.topic.num.partitions=%d", scaleOutShards), "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1"},
		scaleOutTimings...), extra...)
	s := &scaleOut{t: t, nodes: map[int32]*gateway{}, topic: fmt.Sprintf("so-topic-%d", run), sets: sets, shards: scaleOutShards}
	for _, kv := range extra {
		if v, ok := strings.CutPrefix(kv, "offsets.topic.num.partitions="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			s.shards = float64(n)
		}
	}
	for i := 0; i < n; i++ {
		s.add(int32(2001 + i))
	}
	s.waitSpread(90*time.Second, s.ids()...)
	return s
}

func (s *scaleOut) ids() []int32 {
	var out []int32
	for id := range s.nodes {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (s *scaleOut) addrs(ids ...int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, s.nodes[id].Addr)
	}
	return out
}

// metric reads one series of a node, named with its labels as exposed (name{label="v"});
// -1 when it cannot be read.
func metric(g *gateway, name string) float64 {
	resp, err := http.Get("http://" + g.Admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}

// groupShardStates reads a node's coordinatord_shard_state series of the group shards.
func groupShardStates(g *gateway) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + g.Admin + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `coordinatord_shard_state{kind="group",shard="`)
		if !ok {
			continue
		}
		shard, v, ok := strings.Cut(rest, `"} `)
		if f, err := strconv.ParseFloat(v, 64); ok && err == nil {
			out[shard] = f
		}
	}
	return out
}

func ready(g *gateway) bool {
	resp, err := http.Get("http://" + g.Admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// clientWithTopic is a client of every node and the test's topic (3 partitions) created
// through it.
func (s *scaleOut) clientWithTopic(ctx context.Context, t *testing.T) (*kgo.Client, *kadm.Client) {
	t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(s.addrs(s.ids()...)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	adm := kadm.NewClient(kc)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, s.topic); err != nil {
		t.Fatal(err)
	}
	return kc, adm
}

// waitSpread waits until live, and only live, hold every shard, each node of live knows
// exactly them, and every one is ready.
func (s *scaleOut) waitSpread(within time.Duration, live ...int32) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		total, settled := 0.0, true
		for _, id := range live {
			g := s.nodes[id]
			owned, nodes := metric(g, "coordinatord_membership_shards_owned"), metric(g, "coordinatord_membership_nodes")
			if owned < 1 || nodes != float64(len(live)) || !ready(g) {
				settled = false
			}
			total += owned
		}
		if settled && total == s.shards {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("shards not spread over nodes %v within %v", live, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ack is one commit a coordinatord node acknowledged.
type ack struct {
	group      string
	at         int64
	node       int32
	sent, done time.Time
}

// committer commits ever-increasing offsets for one group through clients bootstrapped to
// the given nodes (they find the coordinator themselves), recording every acknowledged commit
// and which node answered it. Commits alternate between a long-lived client, which keeps the
// coordinator it found until told NOT_COORDINATOR, and one made anew every few commits, which
// asks again: a node still answering for a group after the group moved shows up as two nodes
// acknowledging in turn.
type committer struct {
	group  string
	topic  string
	seeds  []string
	kc     *kgo.Client
	hook   kgo.Hook
	mu     sync.Mutex
	acks   []ack
	sent   int64
	lastBy int32
}

func newCommitter(t *testing.T, group, topic string, seeds []string) *committer {
	c := &committer{group: group, topic: topic, seeds: seeds}
	// One commit at a time: the last OffsetCommit answer read is this commit's.
	c.hook = brokerE2E(func(meta kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
		if key == kmsg.OffsetCommit.Int16() && e.Err() == nil {
			c.mu.Lock()
			c.lastBy = meta.NodeID
			c.mu.Unlock()
		}
	})
	c.kc = c.client(t)
	t.Cleanup(c.kc.Close)
	return c
}

func (c *committer) client(t *testing.T) *kgo.Client {
	kc, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.WithHooks(c.hook), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

type brokerE2E func(kgo.BrokerMetadata, int16, kgo.BrokerE2E)

func (f brokerE2E) OnBrokerE2E(m kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) { f(m, key, e) }

func (c *committer) run(t *testing.T, ctx context.Context) {
	var fresh *kgo.Client
	defer func() {
		if fresh != nil {
			fresh.Close()
		}
	}()
	for at := int64(1); ctx.Err() == nil; at++ {
		adm := kadm.NewClient(c.kc)
		if at%2 == 0 {
			if at%10 == 0 && fresh != nil {
				fresh.Close()
				fresh = nil
			}
			if fresh == nil {
				fresh = c.client(t)
			}
			adm = kadm.NewClient(fresh)
		}
		var os kadm.Offsets
		for p := int32(0); p < 3; p++ {
			os.Add(kadm.Offset{Topic: c.topic, Partition: p, At: at, LeaderEpoch: -1})
		}
		c.mu.Lock()
		c.sent = at
		c.lastBy = -1
		c.mu.Unlock()
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := adm.CommitOffsets(cctx, c.group, os)
		cancel()
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		c.mu.Lock()
		c.acks = append(c.acks, ack{group: c.group, at: at, node: c.lastBy, sent: sent, done: time.Now()})
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// runUntilAcked runs the committer until its first acknowledged commit; the returned func stops
// it and waits for it.
func (c *committer) runUntilAcked(ctx context.Context, t *testing.T) (stop func()) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.run(t, cctx) }()
	stop = func() { cancel(); <-done }
	for {
		if acks, _ := c.snapshot(); len(acks) > 0 {
			return stop
		}
		if ctx.Err() != nil {
			stop()
			t.Fatal("no commit acknowledged")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *committer) snapshot() (acks []ack, sent int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ack(nil), c.acks...), c.sent
}

// coordinatorOf asks which node coordinates a group, and retries through hand-overs.
func coordinatorOf(ctx context.Context, t *testing.T, adm *kadm.Client, group string) int32 {
	t.Helper()
	for ctx.Err() == nil {
		if r := adm.FindGroupCoordinators(ctx, group)[group]; r.Err == nil {
			return r.NodeID
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no coordinator found for %s", group)
	return -1
}

// groupOwnedBy is the first of the groups prefix-0, prefix-1, ... that node coordinates.
func groupOwnedBy(ctx context.Context, t *testing.T, adm *kadm.Client, prefix string, node int32) string {
	t.Helper()
	for i := 0; ; i++ {
		if g := fmt.Sprintf("%s-%d", prefix, i); coordinatorOf(ctx, t, adm, g) == node {
			return g
		}
	}
}

// checkNoAckLost reads every group's offsets back and fails if one is below the last
// acknowledged commit (a later commit may have been applied without its acknowledgement
// reaching the client, so anything from the last acknowledged to the last sent is fine).
func checkNoAckLost(ctx context.Context, t *testing.T, adm *kadm.Client, cs []*committer, topic string) {
	t.Helper()
	for _, c := range cs {
		acks, sent := c.snapshot()
		if len(acks) == 0 {
			t.Fatalf("%s: no commit was acknowledged", c.group)
		}
		last := acks[len(acks)-1].at
		var got kadm.OffsetResponses
		var err error
		for try := 0; try < 50; try++ {
			if got, err = adm.FetchOffsets(ctx, c.group); err == nil {
				if err = got.Error(); err == nil {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: fetch offsets: %v", c.group, err)
		}
		for p := int32(0); p < 3; p++ {
			o, ok := got.Lookup(topic, p)
			if !ok || o.At < last || o.At > sent {
				t.Fatalf("%s %s/%d reads %d (found %v): an acknowledged commit was lost (last acknowledged %d, last sent %d)",
					c.group, topic, p, o.At, ok, last, sent)
			}
		}
	}
}

// checkOneAcker fails if, for some group, a node acknowledged a commit it received after
// another node had acknowledged one for that group following the first node's own: two nodes
// serving the group's shard at once.
func checkOneAcker(t *testing.T, cs []*committer) {
	t.Helper()
	for _, c := range cs {
		acks, _ := c.snapshot()
		for i, a := range acks {
			for _, b := range acks[:i] {
				// a's node had acknowledged, then b's node took over (acknowledged before a
				// was even sent), and a's node acknowledged again.
				if b.node != a.node && b.done.Before(a.sent) && ackedBy(acks[:i], a.node, b.done) {
					t.Fatalf("%s: node %d acknowledged offset %d (sent %v) after node %d had taken the group over (acknowledged %d at %v)",
						c.group, a.node, a.at, a.sent.Format(time.StampMicro), b.node, b.at, b.done.Format(time.StampMicro))
				}
			}
		}
	}
}

// ackedBy reports whether node acknowledged something before t among acks: then a later
// acknowledgement by it after another node's means the group went back to it, which only a
// new assignment may do; the tests below give none back (nodes only leave).
func ackedBy(acks []ack, node int32, t time.Time) bool {
	for _, a := range acks {
		if a.node == node && a.done.Before(t) {
			return true
		}
	}
	return false
}

// Three nodes share the shards; offsets are committed for groups spread over every shard, a
// classic group consumes, and a KIP-848 consumer group and a KIP-1071 streams group of two
// members each heartbeat, all four groups on one node. kill -9 of that node: its shards move to
// the others and serve again within a bounded wait; the consumer and streams members keep their
// membership (the new owner answers their heartbeats, nobody is fenced) and when one member of
// each leaves, the new owner gives the other everything. Then a replacement node joins and the
// survivors hand it shards under load. No acknowledged commit is lost, no group was
// acknowledged by two nodes at once, no two nodes' ownership of a shard (from their assignment
// log lines) overlapped, and every commit was acknowledged by a node while it owned the shard.
func TestScaleOutKillMovesShardsAndLosesNoCommit(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	s := startScaleOut(t, 3, "group.streams.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ids := s.ids()
	kc, adm := s.clientWithTopic(ctx, t)
	// Every node lists every node, each under its own id and address, in Metadata and in
	// DescribeCluster.
	for _, id := range ids {
		mc, err := kgo.NewClient(kgo.SeedBrokers(s.nodes[id].Addr))
		if err != nil {
			t.Fatal(err)
		}
		brokers, err := kadm.NewClient(mc).ListBrokers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, mc)
		mc.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range ids {
			inMetadata, inCluster := false, false
			for _, b := range brokers {
				inMetadata = inMetadata || b.NodeID == want && fmt.Sprintf("%s:%d", b.Host, b.Port) == s.nodes[want].Addr
			}
			for _, b := range dc.Brokers {
				inCluster = inCluster || b.NodeID == want && fmt.Sprintf("%s:%d", b.Host, b.Port) == s.nodes[want].Addr
			}
			if !inMetadata || !inCluster {
				t.Fatalf("node %d does not list node %d at %s (Metadata %v, DescribeCluster %v)", id, want, s.nodes[want].Addr, brokers, dc.Brokers)
			}
		}
	}

	// Groups until every node coordinates at least two.
	var groups []string
	per := map[int32]int{}
	// frozen: the first group of each node stops committing just before the kill, so that
	// what it last had acknowledged must read back as it is, not hidden by a later commit.
	frozen := map[string]bool{}
	enough := func() bool {
		for _, id := range ids {
			if per[id] < 2 {
				return false
			}
		}
		return len(groups) >= 12
	}
	for i := 0; !enough(); i++ {
		g := fmt.Sprintf("so-group-%d", i)
		node := coordinatorOf(ctx, t, adm, g)
		frozen[g] = per[node] == 0
		per[node]++
		groups = append(groups, g)
	}
	const consumerGroup = "so-consumer"
	victim := coordinatorOf(ctx, t, adm, consumerGroup)
	var survivors []int32
	for _, id := range ids {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	// A KIP-848 group and a streams group on the victim too.
	consumer848, streamsApp := groupOwnedBy(ctx, t, adm, "so-848", victim), groupOwnedBy(ctx, t, adm, "so-streams", victim)
	var members [2][]*liveMember // [0]: consumer group, [1]: streams group
	for i := range 2 {
		mc, err := kgo.NewClient(kgo.SeedBrokers(s.addrs(ids...)...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mc.Close)
		members[0] = append(members[0], startConsumerMember(t, mc, consumer848, "c"+strconv.Itoa(i), s.topic))
		members[1] = append(members[1], startStreamsMember(t, mc, streamsApp, "s"+strconv.Itoa(i), "process-"+strconv.Itoa(i), s.topic))
	}
	for _, ms := range members {
		waitHoldingAll(t, ms, 3, 60*time.Second)
	}
	killedNode := s.nodes[victim]

	// The consumer and committers may bootstrap to every node; the producer writes through the
	// survivors, whose gateway ports outlive the victim.
	var cs, live []*committer
	wctx, stopWriters := context.WithCancel(ctx)
	fctx, freeze := context.WithCancel(wctx)
	var wg, frozenWG sync.WaitGroup
	for _, g := range groups {
		c := newCommitter(t, g, s.topic, s.addrs(ids...))
		cs = append(cs, c)
		if frozen[g] {
			frozenWG.Add(1)
			go func() { defer frozenWG.Done(); c.run(t, fctx) }()
			continue
		}
		live = append(live, c)
		wg.Add(1)
		go func() { defer wg.Done(); c.run(t, wctx) }()
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(s.addrs(survivors...)...), kgo.DefaultProduceTopic(s.topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(s.addrs(survivors...)...), kgo.ConsumerGroup(consumerGroup), kgo.ConsumeTopics(s.topic),
		kgo.SessionTimeout(10*time.Second), kgo.AutoCommitInterval(200*time.Millisecond), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var consumed sync.Map // value -> true
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; wctx.Err() == nil; i++ {
			prod.ProduceSync(wctx, &kgo.Record{Value: []byte(strconv.Itoa(i))})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for wctx.Err() == nil {
			fs := cons.PollFetches(wctx)
			fs.EachRecord(func(r *kgo.Record) { consumed.Store(string(r.Value), true) })
		}
	}()
	// Traffic on every shard before the kill.
	waitAcked := func(cs []*committer, since time.Time, within time.Duration, what string) {
		t.Helper()
		deadline := time.Now().Add(within)
		for _, c := range cs {
			for {
				acks, _ := c.snapshot()
				if len(acks) > 0 && acks[len(acks)-1].sent.After(since) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: group %s has no commit acknowledged within %v", what, c.group, within)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	waitAcked(cs, time.Now(), 60*time.Second, "before the kill")
	consumedAfter := func(since time.Time, within time.Duration) {
		t.Helper()
		// A record produced after since must reach the consumer: its group serves again.
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			r := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("after-" + since.Format(time.RFC3339Nano))})
			if r.FirstErr() == nil {
				break
			}
		}
		for {
			if _, ok := consumed.Load("after-" + since.Format(time.RFC3339Nano)); ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the classic group did not consume a record produced at %v within %v", since, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	consumedAfter(time.Now(), 60*time.Second)
	// Each group is acknowledged by the node FindCoordinator names, and listed by that node
	// alone (admin tools ask every node and concatenate).
	for _, c := range cs {
		acks, _ := c.snapshot()
		if want := coordinatorOf(ctx, t, adm, c.group); acks[len(acks)-1].node != want {
			t.Fatalf("%s acknowledged by node %d, FindCoordinator names %d", c.group, acks[len(acks)-1].node, want)
		}
	}
	listedBy := map[string][]int32{}
	for _, id := range ids {
		resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, kc.Broker(int(id)))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range resp.Groups {
			listedBy[g.Group] = append(listedBy[g.Group], id)
		}
	}
	for _, c := range cs {
		if l := listedBy[c.group]; len(l) != 1 || l[0] != coordinatorOf(ctx, t, adm, c.group) {
			t.Fatalf("ListGroups lists %s on nodes %v, want its coordinator only", c.group, l)
		}
	}

	freeze()
	frozenWG.Wait()
	s.nodes[victim].kill()
	killed := time.Now()
	t.Logf("killed node %d (coordinator of %s)", victim, consumerGroup)
	// Session timeout (6 s) plus the rebalance and the loads.
	waitAcked(live, killed, 45*time.Second, "after the kill")
	t.Logf("every group acknowledged again %v after the kill", time.Since(killed))
	consumedAfter(time.Now(), 45*time.Second)
	s.waitSpread(30*time.Second, survivors...)
	// The consumer and streams groups moved with their members: a survivor answers every
	// member's heartbeats, none was fenced; with one member gone, the other gets everything.
	for _, ms := range members {
		for _, m := range ms {
			waitServedAfter(t, m, killed, victim, 45*time.Second)
		}
	}
	for _, ms := range members {
		ms[1].leave()
		waitHoldingAll(t, ms[:1], 3, 45*time.Second)
		if by, _ := ms[0].served(); by == victim {
			t.Fatalf("the remaining member was last served by the killed node %d", victim)
		}
	}
	for _, ms := range members {
		for _, m := range ms {
			m.mu.Lock()
			rejoins := m.rejoins
			m.mu.Unlock()
			if rejoins > 0 {
				t.Fatalf("a member was fenced %d times (UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH): its group's new owner did not know it", rejoins)
			}
		}
	}

	// A replacement node (a new node.id, so that a group coming back to an id would show in
	// the checker) joins under load: the survivors hand it shards while they are written to.
	delete(s.nodes, victim)
	const replacement = 2004
	s.add(replacement)
	joined := time.Now()
	s.waitSpread(60*time.Second, append(survivors, replacement)...)
	waitAcked(live, time.Now(), 45*time.Second, "after the replacement joined")
	t.Logf("the replacement serves its shards %v after it started", time.Since(joined))
	stopWriters()
	wg.Wait()
	handedToReplacement := false
	for _, c := range live {
		acks, _ := c.snapshot()
		handedToReplacement = handedToReplacement || acks[len(acks)-1].node == replacement
	}
	if !handedToReplacement {
		t.Fatal("no group was acknowledged by the replacement node")
	}
	// Each node's shard states say which shards it serves (2) and which another node does (5),
	// also for the shards it just handed over.
	served := map[string]int32{}
	for _, id := range append(survivors, replacement) {
		states := groupShardStates(s.nodes[id])
		if len(states) != scaleOutShards {
			t.Fatalf("node %d reports %d group shard states: %v", id, len(states), states)
		}
		for shard, st := range states {
			switch st {
			case 2:
				if prev, ok := served[shard]; ok {
					t.Fatalf("shard %s active on nodes %d and %d", shard, prev, id)
				}
				served[shard] = id
			case 5:
			default:
				t.Fatalf("node %d reports group shard %s in state %v, want 2 (active) or 5 (not owned)", id, shard, st)
			}
		}
	}
	if len(served) != scaleOutShards {
		t.Fatalf("active shards %v, want all %d", served, scaleOutShards)
	}

	moved := false
	for _, c := range live {
		acks, _ := c.snapshot()
		if acks[0].node == victim {
			moved = moved || acks[len(acks)-1].node != victim
		}
	}
	if !moved {
		t.Fatal("no group acknowledged by the killed node was acknowledged by another one afterwards")
	}
	sc, err := kgo.NewClient(kgo.SeedBrokers(s.addrs(survivors...)...))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	checkOneAcker(t, cs)
	everyNode := map[int32]*gateway{victim: killedNode}
	for id, g := range s.nodes {
		everyNode[id] = g
	}
	checkOwnership(t, everyNode, map[int32]time.Time{victim: killed}, cs)
	checkNoAckLost(ctx, t, kadm.NewClient(sc), cs, s.topic)
}

// waitHoldingAll waits until the members together hold n partitions or tasks, each at least one.
func waitHoldingAll(t *testing.T, ms []*liveMember, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		sum, each := 0, true
		var errs []error
		for _, m := range ms {
			m.mu.Lock()
			sum += m.assigned
			each = each && m.assigned > 0
			errs = append(errs, m.lastErr)
			m.mu.Unlock()
		}
		if sum == n && each {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d members hold %d, want %d, at least one each, within %v (last heartbeat errors %v)", len(ms), sum, n, within, errs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitServedAfter waits until a node other than gone answered one of the member's heartbeats
// sent after since.
func waitServedAfter(t *testing.T, m *liveMember, since time.Time, gone int32, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if by, at := m.served(); by != gone && at.After(since) {
			return
		}
		if time.Now().After(deadline) {
			m.mu.Lock()
			err := m.lastErr
			m.mu.Unlock()
			t.Fatalf("no heartbeat answered by another node than %d within %v (last error %v)", gone, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holding is one node's ownership of one shard, as its log lines tell: from the assignment that
// gave the shard to the assignment that took it away, the node's letting go of every shard, or
// the node's end.
type holding struct {
	node, shard int32
	from, to    time.Time
}

// holdings reads every node's ownership of the shards from its log; ended gives the nodes
// that were killed and when (their holdings end then), the others hold on until now.
func holdings(t *testing.T, nodes map[int32]*gateway, ended map[int32]time.Time) []holding {
	t.Helper()
	var out []holding
	for id, g := range nodes {
		open := map[int32]time.Time{}
		closeAt := func(shard int32, at time.Time) {
			if from, ok := open[shard]; ok {
				out = append(out, holding{node: id, shard: shard, from: from, to: at})
				delete(open, shard)
			}
		}
		g.mu.Lock()
		for _, l := range g.logs {
			ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", fmt.Sprint(l["ts"]))
			if err != nil {
				continue
			}
			switch l["msg"] {
			case "shard assignment from the upstream group":
				// Lost shards were let go before the line was written, gained ones start
				// loading just before: ms timestamps, the line's own is after both.
				lost, _ := l["lost"].([]any)
				for _, v := range lost {
					closeAt(int32(v.(float64)), ts.Add(time.Millisecond))
				}
				gained, _ := l["gained"].([]any)
				for _, v := range gained {
					if _, ok := open[int32(v.(float64))]; !ok {
						open[int32(v.(float64))] = ts
					}
				}
			case "no answer from the upstream group for log.kafka.session.timeout.ms: stopped serving every shard (others may own them now); rejoining",
				"the upstream group dropped this node; stopped serving its shards, rejoining", "left the upstream group":
				for shard := range open {
					closeAt(shard, ts.Add(time.Millisecond))
				}
			}
		}
		g.mu.Unlock()
		end, killed := ended[id]
		if !killed {
			end = time.Now()
		}
		for shard := range open {
			closeAt(shard, end)
		}
	}
	return out
}

// checkOwnership fails if two nodes' holdings of one shard overlapped, or if a node
// acknowledged a commit for a group outside every holding of the group's shard by it (the
// commit was sent and answered entirely while the node did not own the shard).
func checkOwnership(t *testing.T, nodes map[int32]*gateway, ended map[int32]time.Time, cs []*committer) {
	t.Helper()
	hs := holdings(t, nodes, ended)
	for i, a := range hs {
		for _, b := range hs[:i] {
			if a.shard == b.shard && a.node != b.node && a.from.Before(b.to) && b.from.Before(a.to) {
				t.Fatalf("shard %d held by node %d from %v to %v and by node %d from %v to %v", a.shard,
					a.node, a.from.Format(time.StampMilli), a.to.Format(time.StampMilli), b.node, b.from.Format(time.StampMilli), b.to.Format(time.StampMilli))
			}
		}
	}
	for _, c := range cs {
		acks, _ := c.snapshot()
		shard := shard.For(c.group, scaleOutShards)
		for _, a := range acks {
			held := false
			for _, h := range hs {
				held = held || h.node == a.node && h.shard == shard && h.from.Before(a.done) && a.sent.Before(h.to)
			}
			if !held {
				var of []string
				for _, h := range hs {
					if h.shard == shard {
						of = append(of, fmt.Sprintf("node %d %v-%v", h.node, h.from.Format(time.StampMilli), h.to.Format(time.StampMilli)))
					}
				}
				t.Fatalf("%s (shard %d): node %d acknowledged offset %d (sent %v, answered %v) while it did not hold the shard (held by %v)",
					c.group, shard, a.node, a.at, a.sent.Format(time.StampMicro), a.done.Format(time.StampMicro), of)
			}
		}
	}
}

// A node paused (SIGSTOP) past the session timeout loses its shards to the other node. Resumed,
// it never acknowledges for them again: a commit sent to it directly answers NOT_COORDINATOR,
// and it lets go of the shards (its lease lapsed) before the group hears from it again.
func TestScaleOutPausedNodeNeverAcknowledgesAgain(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	s := startScaleOut(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ids := s.ids()
	_, adm := s.clientWithTopic(ctx, t)
	details, err := adm.ListTopics(ctx, s.topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := details[s.topic].ID
	paused, other := ids[0], ids[1]
	// A group the node to be paused coordinates, and a client that talks to that node only.
	group := groupOwnedBy(ctx, t, adm, "sp-group", paused)
	direct, err := kgo.NewClient(kgo.SeedBrokers(s.nodes[paused].Addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	commitDirect := func(at int64) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = group, -1, ""
		tp := kmsg.NewOffsetCommitRequestTopic()
		tp.Topic, tp.TopicID = s.topic, topicID
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = 0, at, -1
		tp.Partitions = append(tp.Partitions, p)
		req.Topics = append(req.Topics, tp)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, direct.Broker(int(paused)))
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err := direct.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(direct).ListBrokers(ctx); err != nil {
		t.Fatal(err)
	}
	if err := commitDirect(10); err != nil {
		t.Fatalf("commit to the coordinating node: %v", err)
	}

	// Commits keep flowing through the other node, which takes the group over.
	c := newCommitter(t, group, s.topic, s.addrs(other))
	wctx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.run(t, wctx) }()

	if err := syscall.Kill(s.nodes[paused].pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			syscall.Kill(s.nodes[paused].pid(), syscall.SIGCONT)
			resumed = true
		}
	}
	defer resume()
	// The other node owns every shard (after the session timeout) and acknowledges the group.
	deadline := time.Now().Add(60 * time.Second)
	for metric(s.nodes[other], "coordinatord_membership_shards_owned") != scaleOutShards || !ready(s.nodes[other]) {
		if time.Now().After(deadline) {
			t.Fatal("the other node did not take every shard within 60s of the pause")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		acks, _ := c.snapshot()
		if len(acks) > 0 && acks[len(acks)-1].sent.After(stoppedAt) && acks[len(acks)-1].node == other {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other node acknowledged no commit for the group after the pause")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("node %d took the group over %v after node %d was paused", other, time.Since(stoppedAt), paused)
	// A stopped process's kernel still accepts connections: the probes never judged it dead,
	// the session timeout did.
	if n := metric(s.nodes[other], "coordinatord_membership_peers_removed_total"); n != 0 {
		t.Fatalf("the other node removed the paused node from the group (coordinatord_membership_peers_removed_total %v)", n)
	}

	resume()
	resumedAt := time.Now()
	// Its first answers, and every one until the group gives it shards again, are refusals: no
	// stale read (the other node has acknowledged later offsets), no acknowledged write.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = group
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}}
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	fresp, err := fetch.RequestWith(fctx, direct.Broker(int(paused)))
	fcancel()
	if err != nil {
		t.Fatal(err)
	}
	code := fresp.ErrorCode
	if len(fresp.Groups) > 0 {
		code = fresp.Groups[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("first OffsetFetch from the resumed node: %v (%+v), want NOT_COORDINATOR", err, fresp)
	}
	first := commitDirect(1000)
	if !errors.Is(first, kerr.NotCoordinator) {
		t.Fatalf("first commit to the resumed node: %v, want NOT_COORDINATOR", first)
	}
	for i := int64(1); time.Since(resumedAt) < 5*time.Second; i++ {
		err := commitDirect(1000 + i)
		if err == nil && !regainedSince(s.nodes[paused], resumedAt) {
			t.Fatalf("the resumed node acknowledged a commit for %s before any new assignment", group)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := s.nodes[paused].logCount("no answer from the upstream group for log.kafka.session.timeout.ms: stopped serving every shard (others may own them now); rejoining"); n == 0 &&
		s.nodes[paused].logCount("the upstream group dropped this node; stopped serving its shards, rejoining") == 0 {
		t.Fatal("the resumed node did not say it stopped serving its shards")
	}
	s.waitSpread(60*time.Second, ids...)
	stopWriter()
	wg.Wait()
	checkNoAckLost(ctx, t, adm, []*committer{c}, s.topic)
}

// A node killed with SIGKILL leaves nothing listening on its port: the survivors' probes are
// refused, one of them removes it from the upstream group (LeaveGroup), and they take its
// shards long before the session timeout (120 s here) would have, then serve what it had
// acknowledged.
func TestScaleOutKilledNodeIsRemovedByItsPeers(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	s := startScaleOut(t, 3, "log.kafka.session.timeout.ms=120000", "log.kafka.rebalance.timeout.ms=120000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := s.ids()
	victim, live := ids[0], ids[1:]
	_, adm := s.clientWithTopic(ctx, t)
	group := groupOwnedBy(ctx, t, adm, "sr-group", victim)
	c := newCommitter(t, group, s.topic, s.addrs(ids...))
	stopCommits := c.runUntilAcked(ctx, t)
	s.nodes[victim].kill()
	killedAt := time.Now()
	// Well within the 120 s session timeout: only the probes can have moved the shards.
	s.waitSpread(60*time.Second, live...)
	for {
		acks, _ := c.snapshot()
		if len(acks) > 0 && acks[len(acks)-1].sent.After(killedAt) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no commit acknowledged after the kill")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopCommits()
	removed, logged := 0.0, 0
	for _, id := range live {
		removed += metric(s.nodes[id], "coordinatord_membership_peers_removed_total")
		logged += s.nodes[id].logCount("removed a dead coordinatord node from the upstream group: its listener refused connections; its shards move now instead of after log.kafka.session.timeout.ms")
	}
	if removed != 1 || logged != 1 {
		t.Fatalf("the survivors removed the killed node %v times (coordinatord_membership_peers_removed_total) and logged it %d times, want once", removed, logged)
	}
	checkNoAckLost(ctx, t, adm, []*committer{c}, s.topic)
}

// regainedSince reports whether the node logged an assignment that gave it shards after t.
func regainedSince(g *gateway, t time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.logs {
		if l["msg"] != "shard assignment from the upstream group" {
			continue
		}
		ts, _ := time.Parse("2006-01-02T15:04:05.000Z0700", fmt.Sprint(l["ts"]))
		if g, ok := l["gained"].([]any); ok && len(g) > 0 && ts.After(t) {
			return true
		}
	}
	return false
}

// A node stopped cleanly (SIGTERM) closes its shards and leaves the group: the other node
// takes them without waiting for the session timeout, which is set far beyond the wait here,
// and serves the last offset the stopped node acknowledged.
func TestScaleOutStoppedNodeHandsOverOnLeaving(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	// No peer probes: the stopped node's closed listener would have the other node remove it
	// (TestScaleOutKilledNodeIsRemovedByItsPeers), and only the leave is tested here.
	s := startScaleOut(t, 2, "log.kafka.session.timeout.ms=120000", "log.kafka.rebalance.timeout.ms=120000",
		"log.kafka.peer.probe.interval.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := s.ids()
	stopped, other := ids[0], ids[1]
	_, adm := s.clientWithTopic(ctx, t)
	group := groupOwnedBy(ctx, t, adm, "sl-group", stopped)
	c := newCommitter(t, group, s.topic, s.addrs(other))
	c.runUntilAcked(ctx, t)()

	g := s.nodes[stopped]
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not stop within 30s of SIGTERM")
	}
	if g.logCount("left the upstream group") == 0 {
		t.Fatal("the stopped node did not leave the upstream group")
	}
	// Well within the 120 s session timeout: only the leave can have moved the shards.
	deadline := time.Now().Add(40 * time.Second)
	for metric(s.nodes[other], "coordinatord_membership_shards_owned") != scaleOutShards || !ready(s.nodes[other]) {
		if time.Now().After(deadline) {
			t.Fatal("the other node did not take the stopped node's shards within 40s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	oc, err := kgo.NewClient(kgo.SeedBrokers(s.nodes[other].Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	t.Cleanup(func() { // on failure, who acknowledged what and who held which shard when
		if t.Failed() {
			acks, _ := c.snapshot()
			t.Logf("acks %+v", acks)
			for id, g := range s.nodes {
				g.mu.Lock()
				for _, l := range g.logs {
					if m := fmt.Sprint(l["msg"]); strings.Contains(m, "assignment") || strings.Contains(m, "loaded") || strings.Contains(m, "left") || strings.Contains(m, "stopped") {
						t.Logf("node %d: %v", id, l)
					}
				}
				g.mu.Unlock()
			}
		}
	})
	checkNoAckLost(ctx, t, kadm.NewClient(oc), []*committer{c}, s.topic)
	// Every hand-over here is between live nodes (half the shards when the second node joined,
	// all of them at the stop): the node letting go releases each shard after its last round,
	// so no load fences it. A fence would fail every shard the node keeps (storage.md, Fencing).
	for id, n := range s.nodes {
		if k := n.logCount("fenced an earlier owner of the shard that had not released it"); k != 0 {
			t.Errorf("node %d fenced another node %d times in hand-overs between live nodes", id, k)
		}
	}
}

// Something else initialising the node's transactional ids (a load that found the node's
// claim unreleased, an operator's tool) fences the owner: its next write fails and its shards
// go FAILED. The
// owner still holds the shard in the assignment, so it loads it again and serves the group,
// with what it had acknowledged.
func TestScaleOutFencedShardIsReloadedByItsOwner(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	s := startScaleOut(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := s.nodes[s.ids()[0]]
	kc, err := kgo.NewClient(kgo.SeedBrokers(node.Addr), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, s.topic); err != nil {
		t.Fatal(err)
	}
	const group = "fr-group"
	// No retries: each commit is the coordinator's own answer.
	once, err := kgo.NewClient(kgo.SeedBrokers(node.Addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer once.Close()
	commit := func(at int64) error {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: s.topic, Partition: 0, At: at, LeaderEpoch: -1})
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res, err := kadm.NewClient(once).CommitOffsets(cctx, group, os)
		if err == nil {
			err = res.Error()
		}
		return err
	}
	if err := commit(10); err != nil {
		t.Fatal(err)
	}
	// Fence every shard's producer, straight on the upstream.
	up, err := kgo.NewClient(kgo.SeedBrokers(upstreamAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	var clusterID string
	for _, set := range s.sets {
		if v, ok := strings.CutPrefix(set, "cluster.id="); ok {
			clusterID = v
		}
	}
	// Every shard of a node is written by the node's two producers, rounds alternating
	// (docs/storage.md, Fencing); a new owner that finds the node's claim unreleased fences
	// both, and with them every shard of the node.
	ids := []string{fmt.Sprintf("coordinatord-%s-node-%d", clusterID, s.ids()[0]), fmt.Sprintf("coordinatord-%s-node-%d-1", clusterID, s.ids()[0])}
	for _, id := range ids {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
		for {
			resp, err := req.RequestWith(ctx, up)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			// The shard's last round may still be writing its markers: Kafka answers
			// CONCURRENT_TRANSACTIONS until it is done, and a client retries.
			if errors.Is(err, kerr.ConcurrentTransactions) && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatalf("fence %s: %v", id, err)
			}
			break
		}
	}
	fenced := commit(20)
	t.Logf("first commit after the fence: %v", fenced)
	if fenced == nil {
		t.Fatal("the fenced owner acknowledged a commit")
	}
	deadline := time.Now().Add(45 * time.Second)
	last := int64(30)
	for ; ; last++ {
		err := commit(last)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the owner did not serve the group again within 45s of the fence: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if node.logCount("reloading an owned shard that FAILED") == 0 {
		t.Fatal("the owner did not say it reloads the FAILED shard")
	}
	got, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup(s.topic, 0); !ok || o.At != last {
		t.Fatalf("after the reload the group reads %v (found %v), want %d: the last acknowledged commit", o.At, ok, last)
	}
}

// Group configs through any node, as Kafka's admin client sends them: IncrementalAlterConfigs
// and DescribeConfigs of a GROUP resource go to any broker (Kafka keeps group configs in the
// cluster's metadata), and kafka-configs.sh --describe --entity-type groups lists them with one
// ListConfigResources. Here each group's configs live in its shard. Before the fix a node not
// owning the group's shard answered NOT_COORDINATOR, which the admin client does not retry for
// a config resource (kafka-configs.sh failed with "This is not the correct coordinator" on two
// nodes in three), and ListConfigResources failed on every node with NOT_COORDINATOR at the
// first shard it did not own.
func TestScaleOutGroupConfigsThroughAnyNode(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	s := startScaleOut(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := s.ids()
	kc, err := kgo.NewClient(kgo.SeedBrokers(s.addrs(ids...)...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	// A group of each node's, so that every node is asked for groups it does not own.
	groups := map[int32]string{}
	for i := 0; len(groups) < len(ids); i++ {
		g := fmt.Sprintf("cfg-group-%d", i)
		if owner := coordinatorOf(ctx, t, adm, g); groups[owner] == "" {
			groups[owner] = g
		}
	}
	value := func(g string) string { return strconv.Itoa(45000 + 1000*int(shard.For(g, scaleOutShards))) }
	var names []string
	for _, owner := range ids {
		g := groups[owner]
		names = append(names, g)
		// Set through a node that does not own it.
		via := ids[(slices.Index(ids, owner)+1)%len(ids)]
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "consumer.session.timeout.ms", kmsg.StringPtr(value(g))
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, kc.Broker(int(via)))
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
			t.Fatalf("setting %s's config through node %d (owner %d): %v", g, via, owner, err)
		}
	}
	sort.Strings(names)
	for _, via := range ids {
		req := kmsg.NewPtrDescribeConfigsRequest()
		for _, g := range names {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
			r.ConfigNames = []string{"consumer.session.timeout.ms"}
			req.Resources = append(req.Resources, r)
		}
		resp, err := req.RequestWith(ctx, kc.Broker(int(via)))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range resp.Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil || r.ResourceName != names[i] || len(r.Configs) != 1 || r.Configs[0].Value == nil || *r.Configs[0].Value != value(names[i]) {
				t.Fatalf("node %d describes %s: %v %+v, want consumer.session.timeout.ms=%s", via, names[i], err, r.Configs, value(names[i]))
			}
		}
		lreq := kmsg.NewPtrListConfigResourcesRequest()
		lreq.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
		lresp, err := lreq.RequestWith(ctx, kc.Broker(int(via)))
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, c := range lresp.ConfigResources {
			listed = append(listed, c.Name)
		}
		if err := kerr.ErrorForCode(lresp.ErrorCode); err != nil || !slices.Equal(listed, names) {
			t.Fatalf("node %d lists group config resources %v (%v), want %v", via, listed, err, names)
		}
	}
	// What an operator runs, bootstrapped to one node.
	out := kafkaTool(t, "org.apache.kafka.tools.ConfigCommand", s.nodes[ids[0]].Addr, "--describe", "--entity-type", "groups")
	for _, g := range names {
		if want := fmt.Sprintf("consumer.session.timeout.ms=%s", value(g)); !strings.Contains(out, "group "+g+" are:\n  "+want) {
			t.Fatalf("kafka-configs.sh --describe --entity-type groups does not show %s with %s:\n%s", g, want, out)
		}
	}
}

// A node stopped with SIGTERM hands its shards over cleanly even with the peer probes on: it
// keeps its listener's port bound (no longer accepting) until it has closed its shards and left
// the group, so the others' probes are never refused and do not take it for dead. Before, its
// closed port had a peer remove it while it was still closing its shards (about a second for
// 16 shards): it was dropped mid-close, rejoined the group while stopping, its releases failed
// and the new owners fenced it. The probes run every 10 ms here so that the race is lost every
// time before the fix.
func TestScaleOutStoppedNodeIsNotTakenForDeadByTheProbes(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	// 40 shards: closing a node's 20 takes long enough for two probes at 10 ms.
	s := startScaleOut(t, 2, "log.kafka.peer.probe.interval.ms=10", "offsets.topic.num.partitions=40")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := s.ids()
	stopped, other := ids[0], ids[1]
	_, adm := s.clientWithTopic(ctx, t)
	group := groupOwnedBy(ctx, t, adm, "sp-group", stopped)
	c := newCommitter(t, group, s.topic, s.addrs(other))
	c.runUntilAcked(ctx, t)()
	g := s.nodes[stopped]
	g.cmd.Process.Signal(syscall.SIGTERM)
	// Dial the stopping node's port as the probes do, until it exits: the first refusal must
	// come after it left the group.
	var refused time.Time
	for exited := false; !exited; {
		select {
		case <-g.exited:
			exited = true
		case <-time.After(30 * time.Second):
			t.Fatal("the node did not stop within 30s of SIGTERM")
		case <-time.After(2 * time.Millisecond):
			if c, err := net.DialTimeout("tcp", g.Addr, time.Second); err == nil {
				c.Close()
			} else if refused.IsZero() && errors.Is(err, syscall.ECONNREFUSED) {
				refused = time.Now()
			}
		}
	}
	left, ok := g.loggedAt("left the upstream group")
	if !ok {
		t.Fatal("the stopped node did not leave the upstream group")
	}
	if !refused.IsZero() && refused.Before(left) {
		t.Errorf("the stopping node's port refused connections at %v, %v before it left the upstream group",
			refused.Format(time.RFC3339Nano), left.Sub(refused))
	}
	deadline := time.Now().Add(40 * time.Second)
	for metric(s.nodes[other], "coordinatord_membership_shards_owned") != s.shards || !ready(s.nodes[other]) {
		if time.Now().After(deadline) {
			t.Fatal("the other node did not take the stopped node's shards within 40s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := g.logCount("the upstream group dropped this node; stopped serving its shards, rejoining"); n != 0 {
		t.Errorf("the stopping node was dropped from the upstream group %d times", n)
	}
	if n := metric(s.nodes[other], "coordinatord_membership_peers_removed_total"); n != 0 {
		t.Errorf("the other node removed %v nodes it took for dead", n)
	}
	if n := s.nodes[other].logCount("fenced an earlier owner of the shard that had not released it"); n != 0 {
		t.Errorf("the other node fenced the stopped node %d times: it had not released its shards", n)
	}
	oc, err := kgo.NewClient(kgo.SeedBrokers(s.nodes[other].Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	checkNoAckLost(ctx, t, kadm.NewClient(oc), []*committer{c}, s.topic)
}
