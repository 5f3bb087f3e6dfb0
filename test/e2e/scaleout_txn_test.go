package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnVia is a client whose requests all go to node x's gateway port for the upstream
// transaction coordinator of txnID, as a producer bootstrapped to x sends them: so the EndTxn
// passes through x whichever node owns the group.
func (s *scaleOut) txnVia(t *testing.T, ctx context.Context, x int32, txnID string) *kgo.Broker {
	t.Helper()
	c := dialWire(t, s.nodes[x].Addr)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKey = txnID
	var host string
	var port int32
	retry(t, "FindCoordinator(TRANSACTION)", func() int16 {
		resp, _ := c.roundTrip(req, 3)
		r := resp.(*kmsg.FindCoordinatorResponse)
		host, port = r.Host, r.Port
		return r.ErrorCode
	})
	if int(port) < s.nodes[x].PortMin || int(port) > s.nodes[x].PortMax {
		t.Fatalf("node %d names %s:%d for the transaction coordinator, not one of its gateway ports", x, host, port)
	}
	cl := newClient(t, net.JoinHostPort(host, strconv.Itoa(int(port))))
	return cl.SeedBrokers()[0]
}

// stageVia begins a transaction of txnID through via (InitProducerId when st.pid < 0, then
// AddOffsetsToTxn) and stages offset for partition 0 of topic on the group's owner.
func stageVia(t *testing.T, ctx context.Context, via *kgo.Broker, owner string, st txnStep, group, topic string, offset int64) txnStep {
	t.Helper()
	if st.pid < 0 {
		st = initVia(t, ctx, via, st.txnID)
	}
	retry(t, "AddOffsetsToTxn", func() int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = st.txnID, st.pid, st.epoch, group
		resp, err := via.Request(ctx, req)
		if err != nil {
			return -2
		}
		return resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	})
	stageOffset(t, owner, st, group, topic, offset)
	return st
}

// initVia starts a producer session of txnID through via (retrying, e.g. while the upstream
// aborts the id's open transaction: CONCURRENT_TRANSACTIONS).
func initVia(t *testing.T, ctx context.Context, via *kgo.Broker, txnID string) txnStep {
	t.Helper()
	st := txnStep{txnID: txnID}
	retry(t, "InitProducerId", func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &txnID, 120000
		resp, err := via.Request(ctx, req)
		if err != nil {
			return -2
		}
		r := resp.(*kmsg.InitProducerIDResponse)
		st.pid, st.epoch = r.ProducerID, r.ProducerEpoch
		return r.ErrorCode
	})
	return st
}

// endVia ends the transaction through via, retrying (a closed connection: the answer was held)
// until it is answered NONE.
func endVia(t *testing.T, ctx context.Context, via *kgo.Broker, st txnStep, commit bool) {
	t.Helper()
	endTxnRetried(t, st, commit, func(req kmsg.Request) (kmsg.Response, error) { return via.Request(ctx, req) })
}

// groupsOwnedBy returns n fresh group names whose shard a single node owns, and that node.
func groupsOwnedBy(ctx context.Context, t *testing.T, adm *kadm.Client, prefix string, n int) ([]string, int32) {
	t.Helper()
	var groups []string
	owner := int32(-1)
	for i := 0; len(groups) < n; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		o := coordinatorOf(ctx, t, adm, g)
		if owner < 0 {
			owner = o
		}
		if o == owner {
			groups = append(groups, g)
		}
	}
	return groups, owner
}

// otherThan is a node of s other than those named.
func (s *scaleOut) otherThan(ids ...int32) int32 {
	for _, id := range s.ids() {
		if !slices.Contains(ids, id) {
			return id
		}
	}
	s.t.Fatal("no other node")
	return -1
}

// stableOffsetsRetried is stableOffsets retried while the group's shard is handed over.
func stableOffsetsRetried(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string) (map[int32]int64, bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = true
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.Groups[0].ErrorCode == 0 {
			return stableOffsets(t, ctx, cl, group, topic, 1)
		}
		if time.Now().After(deadline) {
			t.Fatalf("OffsetFetch of %s: %v %+v", group, err, resp)
		}
	}
}

// txnScene is three nodes with the test's topic, a fresh group, the node owning it and a
// transactional id, for the tests whose transactions pass through other nodes.
type txnScene struct {
	s     *scaleOut
	cl    *kgo.Client
	group string
	owner int32
	txnID string
}

// twoOthers names the two nodes that do not own the scene's group, each with a producer's
// connection of the scene's transactional id through it.
func (sc *txnScene) twoOthers(t *testing.T, ctx context.Context) (x, y int32, viaX, viaY *kgo.Broker) {
	t.Helper()
	x = sc.s.otherThan(sc.owner)
	y = sc.s.otherThan(sc.owner, x)
	return x, y, sc.s.txnVia(t, ctx, x, sc.txnID), sc.s.txnVia(t, ctx, y, sc.txnID)
}

func startTxnScene(t *testing.T, ctx context.Context, prefix string) *txnScene {
	t.Helper()
	requireE2E(t)
	s := startScaleOut(t, 3)
	cl, adm := s.clientWithTopic(ctx, t)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	groups, owner := groupsOwnedBy(ctx, t, adm, prefix+"-"+run, 1)
	return &txnScene{s: s, cl: cl, group: groups[0], owner: owner, txnID: prefix + "-" + run}
}

// Three nodes; a producer whose transactional requests pass through node X stages offsets on
// the group's owner O (X != O). The moment EndTxn commit is answered the owner serves the
// offsets as committed (RequireStable finds nothing staged); after an abort they are where the
// commit left them. Before each EndTxn the owner answers UNSTABLE_OFFSET_COMMIT.
func TestScaleOutTxnOutcomeThroughAnotherNodeReachesTheOwner(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc := startTxnScene(t, ctx, "sotx")
	s, cl, group, owner := sc.s, sc.cl, sc.group, sc.owner
	x := s.otherThan(owner)
	st := txnStep{txnID: sc.txnID, pid: -1}
	via := s.txnVia(t, ctx, x, st.txnID)

	st = stageVia(t, ctx, via, s.nodes[owner].Addr, st, group, s.topic, 7)
	if _, stable := stableOffsets(t, ctx, cl, group, s.topic, 1); stable {
		t.Fatal("the owner answers stable offsets while the transaction is open")
	}
	endVia(t, ctx, via, st, true)
	wantServed(t, ctx, cl, group, s.topic, 7, "after EndTxn commit through node %d (owner %d)", x, owner)

	st = stageVia(t, ctx, via, s.nodes[owner].Addr, st, group, s.topic, 9)
	if _, stable := stableOffsets(t, ctx, cl, group, s.topic, 1); stable {
		t.Fatal("the owner answers stable offsets while the second transaction is open")
	}
	endVia(t, ctx, via, st, false)
	wantServed(t, ctx, cl, group, s.topic, 7, "after EndTxn abort through node %d (owner %d)", x, owner)
	if n := metric(s.nodes[x], `coordinatord_gateway_txn_peer_markers_total{result="applied"}`); n < 2 {
		t.Fatalf("node %d counts %v outcomes applied on another node, want 2", x, n)
	}
}

// ownedGroups finds, for the node owning the first probe group, two fresh groups on each of
// its shards (with 6 shards on 3 nodes: two shards), keyed by shard.
func ownedGroups(ctx context.Context, t *testing.T, adm *kadm.Client, prefix string) (map[int32][]string, int32) {
	t.Helper()
	byShard := map[int32][]string{}
	owner := int32(-1)
	for i := 0; i < 1000; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		sh := shard.For(g, scaleOutShards)
		if owner >= 0 && len(byShard[sh]) == 2 {
			continue
		}
		if o := coordinatorOf(ctx, t, adm, g); owner < 0 || o == owner {
			owner = o
			byShard[sh] = append(byShard[sh], g)
		}
		full := 0
		for _, gs := range byShard {
			if len(gs) == 2 {
				full++
			}
		}
		if full == scaleOutShards/3 {
			return byShard, owner
		}
	}
	t.Fatalf("found only %v for node %d", byShard, owner)
	return nil, -1
}

// The owner of a group's shard is killed (-9) after transactions staged offsets there and
// before their EndTxn, which passes through another node X. The first EndTxn is sent at once:
// X holds its answer while the shard has no owner, and the new owner serves the offsets as
// committed. The others are sent once the new owners serve the staged offsets (they answer
// UNSTABLE_OFFSET_COMMIT for them, as the old owner did): the moment EndTxn answers, a
// committed transaction's offsets are served and an aborted one's are not. The killed node had
// two shards, and the two others take one each, so at least one commit and one abort go to a
// node other than X.
func TestScaleOutTxnOutcomeReachesTheNewOwnerAfterAKill(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	s := startScaleOut(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, adm := s.clientWithTopic(ctx, t)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	byShard, owner := ownedGroups(ctx, t, adm, "sotk-"+run)
	x := s.otherThan(owner)
	type txn struct {
		st     txnStep
		via    *kgo.Broker
		group  string
		offset int64
		commit bool
	}
	var txns []*txn
	for _, gs := range byShard {
		for i, g := range gs {
			tx := &txn{st: txnStep{txnID: "t-" + g, pid: -1}, group: g, offset: int64(10 + len(txns)), commit: i == 0}
			tx.via = s.txnVia(t, ctx, x, tx.st.txnID)
			tx.st = stageVia(t, ctx, tx.via, s.nodes[owner].Addr, tx.st, g, s.topic, tx.offset)
			txns = append(txns, tx)
		}
	}
	early := txnStep{txnID: "sotk-early-" + run, pid: -1}
	earlyGroup := txns[0].group + "-early"
	for shard.For(earlyGroup, scaleOutShards) != shard.For(txns[0].group, scaleOutShards) {
		earlyGroup += "x"
	}
	viaE := s.txnVia(t, ctx, x, early.txnID)
	early = stageVia(t, ctx, viaE, s.nodes[owner].Addr, early, earlyGroup, s.topic, 5)

	s.nodes[owner].kill()
	delete(s.nodes, owner)
	endVia(t, ctx, viaE, early, true) // held until the shard has a new owner that took it
	live := newClient(t, s.nodes[x].Addr)
	got, stable := stableOffsetsRetried(t, ctx, live, earlyGroup, s.topic)
	if !stable || got[0] != 5 {
		t.Fatalf("after EndTxn commit through node %d during the hand-over: stable=%v offsets=%v, want partition 0 at 5", x, stable, got)
	}

	for _, tx := range txns {
		if _, stable := stableOffsetsRetried(t, ctx, live, tx.group, s.topic); stable {
			t.Fatalf("the new owner of %s answers stable offsets for a transaction still open", tx.group)
		}
	}
	for _, tx := range txns {
		endVia(t, ctx, tx.via, tx.st, tx.commit)
		got, stable := stableOffsets(t, ctx, live, tx.group, s.topic, 1)
		newOwner := coordinatorOf(ctx, t, adm, tx.group)
		switch {
		case !stable:
			t.Errorf("after EndTxn (commit=%v) through node %d, the new owner %d of %s still has the offsets staged", tx.commit, x, newOwner, tx.group)
		case tx.commit && got[0] != tx.offset:
			t.Errorf("after EndTxn commit through node %d, the new owner %d of %s serves %v, want partition 0 at %d", x, newOwner, tx.group, got, tx.offset)
		case !tx.commit && len(got) != 0:
			t.Errorf("after EndTxn abort through node %d, the new owner %d of %s serves %v, want none", x, newOwner, tx.group, got)
		}
	}
}

// The producer's transaction coordinator moves to another node between AddOffsetsToTxn and
// EndTxn (a Java producer looks its coordinator up again after any disconnect, and any node may
// answer): X saw AddOffsetsToTxn, Y (neither X nor the owner) sees EndTxn and knows nothing of
// the transaction. The owner still serves the commit the moment EndTxn answers, and the old
// offset after an abort; the transaction X recorded is not applied again later.
func TestScaleOutTxnOutcomeWhenTheEndTxnMovesToAnotherNode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc := startTxnScene(t, ctx, "somv")
	s, cl, group, owner := sc.s, sc.cl, sc.group, sc.owner
	x, y, viaX, viaY := sc.twoOthers(t, ctx)
	st := txnStep{txnID: sc.txnID, pid: -1}

	st = stageVia(t, ctx, viaX, s.nodes[owner].Addr, st, group, s.topic, 7)
	endVia(t, ctx, viaY, st, true)
	wantServed(t, ctx, cl, group, s.topic, 7, "after EndTxn commit through node %d, AddOffsetsToTxn through %d (owner %d)", y, x, owner)
	st = stageVia(t, ctx, viaX, s.nodes[owner].Addr, st, group, s.topic, 9)
	endVia(t, ctx, viaY, st, false)
	wantServed(t, ctx, cl, group, s.topic, 7, "after EndTxn abort through node %d (owner %d)", y, owner)
	// A third transaction through X alone: X's record of the first two must not decide it.
	st = stageVia(t, ctx, viaX, s.nodes[owner].Addr, st, group, s.topic, 11)
	endVia(t, ctx, viaX, st, true)
	wantServed(t, ctx, cl, group, s.topic, 11, "after a third transaction through node %d alone (owner %d)", x, owner)
}

// A new instance of a producer fences the old one through another node: the old instance's
// transaction staged offsets on the owner through node X and never ended; the new instance's
// InitProducerId passes through Y, which never saw that transaction. Once InitProducerId
// answers, the owner has dropped the fenced transaction's offsets (Kafka's transaction
// coordinator aborts it, writing its markers, before the new session starts), and the new
// instance's own transaction commits.
func TestScaleOutFencedProducersOffsetsAreAbortedThroughAnotherNode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc := startTxnScene(t, ctx, "sofe")
	s, cl, group, owner := sc.s, sc.cl, sc.group, sc.owner
	_, y, viaX, viaY := sc.twoOthers(t, ctx)
	zombie := txnStep{txnID: sc.txnID, pid: -1}
	zombie = stageVia(t, ctx, viaX, s.nodes[owner].Addr, zombie, group, s.topic, 7)

	// Kafka answers the first InitProducerId CONCURRENT_TRANSACTIONS while it aborts the open
	// transaction (the relay's barrier across nodes relies on that, docs/conformance.md).
	first := kmsg.NewPtrInitProducerIDRequest()
	first.TransactionalID, first.TransactionTimeoutMillis = &zombie.txnID, 120000
	if resp, err := viaY.Request(ctx, first); err != nil {
		t.Fatal(err)
	} else if code := resp.(*kmsg.InitProducerIDResponse).ErrorCode; code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("the first InitProducerId for an id with an ongoing transaction answered %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(code))
	}
	fresh := initVia(t, ctx, viaY, zombie.txnID)
	if fresh.pid == zombie.pid && fresh.epoch <= zombie.epoch {
		t.Fatalf("InitProducerId did not fence: %+v after %+v", fresh, zombie)
	}
	wantServed(t, ctx, cl, group, s.topic, -1, "once the new instance's InitProducerId through node %d answered (owner %d): the fenced transaction's offset dropped", y, owner)
	fresh = stageVia(t, ctx, viaY, s.nodes[owner].Addr, fresh, group, s.topic, 9)
	endVia(t, ctx, viaY, fresh, true)
	wantServed(t, ctx, cl, group, s.topic, 9, "after the new instance's commit through node %d (owner %d)", y, owner)
}

// Kafka Streams 4.4 with processing.guarantee=exactly_once_v2, two instances bootstrapped to
// three nodes, while each node in turn is stopped (SIGTERM) and started again with input
// flowing: every restart moves shards and the producers' transaction coordinator ports, so
// transactions stage on one node and end through another. The output read with
// read_committed has the exact counts, also after one instance is killed and the other resumes
// its tasks from the committed offsets.
func TestScaleOutRollingRestartWordCountExactlyOnce(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t)
	s := startScaleOut(t, 3, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	addrs := s.addrs(s.ids()...)
	boot := strings.Join(addrs, ",")
	r := newWordCountRun(t, ctx, addrs[0])
	r.cl = newClient(t, addrs[0], kgo.SeedBrokers(addrs...))
	a := startWordCount(t, "rr-a", boot, r.appID, r.in, r.out, "streams", "exactly_once_v2")
	b := startWordCount(t, "rr-b", boot, r.appID, r.in, r.out, "streams", "exactly_once_v2")
	a.waitState("RUNNING", 2*time.Minute)
	b.waitState("RUNNING", 2*time.Minute)
	r.produce(t, ctx, 1)
	waitCommittedCounts(t, ctx, addrs[0], r.out, r.expected)
	for i, id := range s.ids() {
		r.produce(t, ctx, 2+i)
		g := s.nodes[id]
		g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("node %d did not stop within 60s of SIGTERM", id)
		}
		r.produce(t, ctx, 5+i)
		g.start()
		s.waitSpread(2*time.Minute, s.ids()...)
	}
	r.produce(t, ctx, 9)
	waitCommittedCounts(t, ctx, addrs[0], r.out, r.expected)
	// kill -9 of one instance mid-run: the other resumes its tasks from the offsets the nodes
	// committed (an open transaction of the killed one is aborted upstream by its timeout), so
	// an offset of a committed transaction that was not applied would count input twice.
	r.produce(t, ctx, 10)
	time.Sleep(300 * time.Millisecond)
	b.cmd.Process.Kill()
	<-b.exited
	r.produce(t, ctx, 11)
	waitCommittedCounts(t, ctx, addrs[0], r.out, r.expected)
	stopRunning(t, a)
}

// wantServed fails unless the group's owner serves partition 0 of topic as committed at want
// (-1: no offset) with nothing staged, read as a read_committed consumer does (RequireStable).
func wantServed(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string, want int64, what string, args ...any) {
	t.Helper()
	got, stable := stableOffsets(t, ctx, cl, group, topic, 1)
	if o, ok := got[0]; !stable || ok != (want >= 0) || ok && o != want {
		t.Fatalf("%s: stable=%v offsets=%v, want partition 0 at %d (-1: none) and nothing staged", fmt.Sprintf(what, args...), stable, got, want)
	}
}
