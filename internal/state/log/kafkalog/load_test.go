package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/internal/wire/wiretest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// unreachableAddr is a loopback address below the ephemeral range that nothing listens on: a
// connection to it is refused.
func unreachableAddr(t *testing.T) string {
	t.Helper()
	for port := 21000; port < 22000; port++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			ln.Close()
			return ln.Addr().String()
		}
	}
	t.Fatal("no free port")
	return ""
}

// While the upstream cannot be reached at all the load keeps trying (the shard stays LOADING and
// answers COORDINATOR_LOAD_IN_PROGRESS) rather than returning an error that would put the shard
// in FAILED until a restart; closing the log ends the wait.
func TestLoadRetriesWhileUpstreamUnreachable(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	// A short client retry bound makes each attempt fail within a second.
	b := stateBackend(zap.New(core), "unreachable-", 1, time.Second, kgo.SeedBrokers(unreachableAddr(t)), kgo.RetryTimeout(time.Second))
	l, err := b.Open(0, log.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	loaded := loadInBackground(l)
	deadline := time.After(2 * time.Minute)
	for logs.FilterMessageSnippet("retrying with a new producer").Len() < 2 {
		select {
		case err := <-loaded:
			t.Fatalf("load ended while the upstream is unreachable: %v", err)
		case <-deadline:
			t.Fatalf("the load did not retry twice (logged: %v)", logs.All())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("retried after: %v", logs.FilterMessageSnippet("retrying").All()[0].ContextMap()["error"])
	closeEndsLoad(t, l, loaded, deadline)
}

// A shard that loses its ownership while its load waits for an unreachable upstream stops at
// once (it answers as not owned and its load ends) rather than when the upstream is back: a
// load finishing then would fence the shard's new owner.
func TestDisownEndsALoadWaitingForTheUpstream(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	b := stateBackend(zap.New(core), "unreachable-", 1, time.Second, kgo.SeedBrokers(unreachableAddr(t)), kgo.RetryTimeout(time.Second))
	set := shard.NewSet(shard.SetOptions{Count: 1, Backend: b, Deferred: true})
	defer set.Close(context.Background())
	if !set.Own(0) {
		t.Fatal("Own started no load")
	}
	deadline := time.After(2 * time.Minute)
	for logs.FilterMessageSnippet("retrying with a new producer").Len() < 1 {
		select {
		case <-deadline:
			t.Fatalf("the load did not retry (logged: %v)", logs.All())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if st := set.Shard(0).State(); st != runtime.StateLoading {
		t.Fatalf("shard state %v, want loading", st)
	}
	disowned := make(chan struct{})
	go func() { set.Disown(context.Background(), 0); close(disowned) }()
	select {
	case <-disowned:
	case <-time.After(20 * time.Second): // the load alone would wait for the upstream forever
		t.Fatal("Disown waited for the load")
	}
	if _, err := set.Shard(0).Read(context.Background(), shard.OpenProducers()); !errors.Is(err, runtime.ErrNotOwned) {
		t.Fatalf("read after Disown: %v, want ErrNotOwned", err)
	}
}

// concurrentTxnBroker is a one-broker cluster whose transaction coordinator answers every
// InitProducerId with CONCURRENT_TRANSACTIONS, as Kafka's does while it finishes (or fences)
// the previous owner's transaction, for as long as that takes; inits counts them.
func concurrentTxnBroker(t *testing.T) (addr string, inits *atomic.Int32) {
	t.Helper()
	inits = new(atomic.Int32)
	addr = fakeCluster{apis: [][3]int16{{18, 0, 3}, {3, 0, 12}, {10, 0, 3}, {22, 0, 5}}, serve: func(h wire.Header, _ []byte) kmsg.Response {
		if kmsg.Key(h.Key) != kmsg.InitProducerID {
			return nil
		}
		inits.Add(1)
		r := kmsg.NewPtrInitProducerIDResponse()
		r.ErrorCode, r.ProducerID, r.ProducerEpoch = kerr.ConcurrentTransactions.Code, -1, -1
		return r
	}}.start(t)
	return addr, inits
}

// A transaction coordinator that answers InitProducerId with CONCURRENT_TRANSACTIONS without
// end (the previous owner's transaction never completes) must not hold a load silently: kgo
// retries that answer for as long as the context it is given lives, and logs it at debug only.
// Each attempt ends after the transaction timeout, says so (phase, attempt, elapsed) and is
// repeated with a new producer; while it waits, the load reports where it is. Issue 18: a shard
// loading after an upstream restart logged nothing more and stayed unserved.
func TestLoadAttemptsEndWhileTheCoordinatorAnswersConcurrentTransactions(t *testing.T) {
	defer func(d time.Duration) { loadReportEvery = d }(loadReportEvery)
	loadReportEvery = 100 * time.Millisecond
	addr, inits := concurrentTxnBroker(t)
	core, logs := observer.New(zap.InfoLevel)
	b := stateBackend(zap.New(core), "concurrent-", 1, time.Second, kgo.SeedBrokers(addr))
	l, err := b.Open(0, log.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	loaded := loadInBackground(l)
	retried := func() []observer.LoggedEntry {
		return logs.FilterMessageSnippet("retrying with a new producer").All()
	}
	deadline := time.After(time.Minute)
	for len(retried()) < 2 || logs.FilterMessage("shard load is waiting on the state topic").Len() == 0 {
		select {
		case err := <-loaded:
			t.Fatalf("load ended while the coordinator is busy: %v", err)
		case <-deadline:
			t.Fatalf("the load waited without a word: %d InitProducerId answered CONCURRENT_TRANSACTIONS, logged %v", inits.Load(), logs.All())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for i, e := range retried()[:2] {
		f := e.ContextMap()
		if f["phase"] != phaseFence || f["attempt"] != int64(i+1) || f["attempt_timeout"] == nil {
			t.Fatalf("retry %d logged %v, want the fence phase, attempt %d and the attempt's bound", i, f, i+1)
		}
	}
	if f := logs.FilterMessage("shard load is waiting on the state topic").All()[0].ContextMap(); f["phase"] != phaseFence || f["waiting_for"] == nil {
		t.Fatalf("the waiting load reported %v, want the fence phase and what it waits for", f)
	}
	closeEndsLoad(t, l, loaded, time.After(20*time.Second))
}

// heldProduceBroker is a one-broker cluster whose transaction coordinator answers as usual and
// whose partition leader never answers a Produce, as an upstream that went away mid-round;
// produces counts the Produce requests it received.
func heldProduceBroker(t *testing.T, topic string) (addr string, produces *atomic.Int32) {
	t.Helper()
	produces = new(atomic.Int32)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	addr = fakeCluster{apis: [][3]int16{{18, 0, 3}, {3, 0, 12}, {10, 0, 3}, {22, 0, 4}, {24, 0, 3}, {0, 3, 9}, {26, 0, 3}}, topic: topic, partitions: 1,
		serve: func(h wire.Header, body []byte) kmsg.Response {
			switch kmsg.Key(h.Key) {
			case kmsg.InitProducerID:
				r := kmsg.NewPtrInitProducerIDResponse()
				r.ProducerID, r.ProducerEpoch = 1, 0
				return r
			case kmsg.AddPartitionsToTxn:
				return addPartitionsAnswer(h, body)
			case kmsg.Produce:
				produces.Add(1)
				<-release
			}
			return nil
		}}.start(t)
	return addr, produces
}

// A log whose shard stops waiting for its write in flight (disowned, or its Close out of time)
// gives it up at once: Close returns, nothing of the round is reported durable, while the
// node's producers go on with the shard's other rounds. Its release still follows the round in
// flight, so that the shard's next owner finds it released and does not fence the node (and
// every shard the node keeps); a round that reached the upstream late is then below the
// release (storage.md, Fencing).
func TestAbandonGivesUpTheRoundInFlightAndReleasesTheShardAfterIt(t *testing.T) {
	var rb roundBroker
	addr, produces, release := rb.holdFirstProduce(t, 2, func(int32) int16 { return 0 })
	b := stateBackend(zap.NewNop(), "held-", 2, time.Minute, kgo.SeedBrokers(addr))
	failed := make(chan error, 1)
	l := openStarted(t, b, 0, log.Callbacks{Failed: func(err error) { failed <- err }, Durable: func(int64) { t.Error("a round was reported durable") }}, nil)
	other, otherR := openAttached(t, b, 1)
	defer other.Close()
	if _, err := l.Append([]log.Record{rec("a", "1")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for produces.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the round's produce never reached the broker")
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.Abandon()
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the abandoned round (it would until the transaction timeout)")
	}
	select {
	case err := <-failed:
		if !errors.Is(err, log.ErrFailed) {
			t.Fatalf("abandoned round reported %v, want log.ErrFailed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned round was not reported failed")
	}
	close(release)
	// The node goes on: its other shard's round commits, after the shard's release.
	last, err := other.Append([]log.Record{rec("b", "1")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-otherR.durable:
		if o != last {
			t.Fatalf("durable %d, want %d", o, last)
		}
	case err := <-otherR.failed:
		t.Fatalf("the node's other shard failed: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatalf("the node's other shard never became durable (broker saw %v)", rb.seen())
	}
	// The release: a later produce to the shard's partition, committed. (The fake broker logs a
	// held produce when it answers it, and kgo may send one transaction as several produces.)
	waitFor(t, "the shard's release after the round in flight", func() bool {
		ev := rb.seen()
		return countPrefix(ev, "produce:", "0") >= 2 && countPrefix(ev, "end:commit", "") >= 2
	})
	if ev := rb.seen(); ev[0] != "produce:0" || countPrefix(ev, "end:abort", "") != 0 {
		t.Fatalf("broker saw %v, want the round in flight, then the shard's release, nothing aborted", ev)
	}
}

// A replay held back below its marker names what holds it: each transaction open in the
// shard's partition that began below the marker (DescribeProducers), with the command that
// ends it. Those that began at or past the marker, and producers with no transaction open, are
// not named: the replay does not wait on them.
func TestStuckReplayNamesTheOpenTransactionBelowTheMarker(t *testing.T) {
	addr := fakeCluster{apis: [][3]int16{{18, 0, 3}, {3, 0, 12}, {61, 0, 0}}, topic: "state", partitions: 3,
		serve: func(h wire.Header, body []byte) kmsg.Response {
			if kmsg.Key(h.Key) != kmsg.DescribeProducers {
				return nil
			}
			return describeProducersAnswer(h, body, func(int32) []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
				var active []kmsg.DescribeProducersResponseTopicPartitionActiveProducer
				for _, a := range [][3]int64{{7, 3, 21}, {8, 5, -1}, {9, 1, 40}} { // id, epoch, txn start
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.CurrentTxnStartOffset = a[0], int32(a[1]), a[2]
					active = append(active, ap)
				}
				return active
			})
		}}.start(t)
	core, logs := observer.New(zap.InfoLevel)
	b := stateBackend(zap.New(core), "stuck-", 3, time.Second, kgo.SeedBrokers(addr))
	l, err := b.Open(2, log.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.(*kafkaLog).reportOpenTransactions(context.Background(), 32)
	named := logs.FilterMessageSnippet("a transaction open below the load marker").All()
	if len(named) != 1 {
		t.Fatalf("named %d open transactions, want the one below the marker (logged %v)", len(named), logs.All())
	}
	f := named[0].ContextMap()
	if f["producer_id"] != int64(7) || f["producer_epoch"] != int16(3) || f["txn_start_offset"] != int64(21) ||
		f["abort_with"] != "kafka-transactions.sh --bootstrap-server <upstream.bootstrap.servers> abort --topic state --partition 2 --start-offset 21" {
		t.Fatalf("named %v", f)
	}
}

// txnBroker is a one-broker cluster that serves transactions (TV1: the client adds partitions)
// for producer id pid, and reports describe as the partition's producers; ends gets each EndTxn.
func txnBroker(t *testing.T, topic string, pid int64, onEnd func(*kmsg.EndTxnRequest), describe func() []kmsg.DescribeProducersResponseTopicPartitionActiveProducer) (addr string, ends chan *kmsg.EndTxnRequest) {
	t.Helper()
	return txnBrokerAnswering(t, topic, pid, func(req *kmsg.EndTxnRequest) int16 { onEnd(req); return 0 }, describe)
}

// txnBrokerAnswering is txnBroker answering each EndTxn with the code onEnd returns.
func txnBrokerAnswering(t *testing.T, topic string, pid int64, onEnd func(*kmsg.EndTxnRequest) int16, describe func() []kmsg.DescribeProducersResponseTopicPartitionActiveProducer) (addr string, ends chan *kmsg.EndTxnRequest) {
	t.Helper()
	ends = make(chan *kmsg.EndTxnRequest, 16)
	addr = fakeCluster{apis: [][3]int16{{18, 0, 3}, {3, 0, 12}, {10, 0, 3}, {22, 0, 4}, {24, 0, 3}, {0, 3, 9}, {26, 0, 3}, {61, 0, 0}}, topic: topic, partitions: 1,
		serve: func(h wire.Header, body []byte) kmsg.Response {
			switch kmsg.Key(h.Key) {
			case kmsg.InitProducerID:
				r := kmsg.NewPtrInitProducerIDResponse()
				r.ProducerID, r.ProducerEpoch = pid, 4
				return r
			case kmsg.AddPartitionsToTxn:
				return addPartitionsAnswer(h, body)
			case kmsg.Produce:
				req := kmsg.NewPtrProduceRequest()
				if !wiretest.Request(h, body, req) {
					return nil
				}
				r := req.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range req.Topics {
					t := kmsg.NewProduceResponseTopic()
					t.Topic = rt.Topic
					for _, p := range rt.Partitions {
						pp := kmsg.NewProduceResponseTopicPartition()
						pp.Partition, pp.BaseOffset = p.Partition, 30
						t.Partitions = append(t.Partitions, pp)
					}
					r.Topics = append(r.Topics, t)
				}
				return r
			case kmsg.EndTxn:
				req := kmsg.NewPtrEndTxnRequest()
				if !wiretest.Request(h, body, req) {
					return nil
				}
				r := req.ResponseKind().(*kmsg.EndTxnResponse)
				r.ErrorCode = onEnd(req)
				ends <- req
				return r
			case kmsg.DescribeProducers:
				return describeProducersAnswer(h, body, func(int32) []kmsg.DescribeProducersResponseTopicPartitionActiveProducer { return describe() })
			}
			return nil
		}}.start(t)
	return addr, ends
}

// hangingTxnBroker is a txnBroker (producer id 3 for every InitProducerId) whose partition
// shows producer 3's transaction open from offset 17 until an EndTxn of producer 3 aborts one.
func hangingTxnBroker(t *testing.T) (addr string, ends chan *kmsg.EndTxnRequest) {
	t.Helper()
	var aborted atomic.Bool
	return txnBroker(t, "state", 3, func(end *kmsg.EndTxnRequest) {
		if !end.Commit && end.ProducerID == 3 {
			aborted.Store(true)
		}
	}, func() []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch, ap.CurrentTxnStartOffset = 3, 2, 17
		if aborted.Load() {
			ap.ProducerEpoch, ap.CurrentTxnStartOffset = 5, -1
		}
		return []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{ap}
	})
}

// A transaction of the shard's own producer id left open below the load marker, which the
// coordinator no longer knows (seen after an upstream broker restart: records written just
// before the broker stopped, the transactional id Empty after it), is aborted by the load with
// that producer: its abort marker ends the open transaction whatever its epoch, the replay
// goes on, and the records stay invisible. Naming it alone left the shard unserved until an
// operator aborted it (issue 18).
func TestStuckReplayAbortsItsOwnProducersHangingTransaction(t *testing.T) {
	// The load knows the producer ids its fences got: the shard's own two ids', then those of
	// the nodes it fenced (fenceClients). Whichever of them holds the hanging transaction
	// aborts it (a mutation sweep found the first id's and a fenced node's untested).
	for _, c := range []struct {
		name string
		pids []int64
		id   string // the transactional id that must abort
	}{
		{"shard's first id", []int64{3, 99}, "hanging-0"},
		{"shard's second id", []int64{99, 3}, "hanging-0-1"},
		{"a fenced node's id", []int64{98, 99, 3}, "hanging-node-2"},
	} {
		t.Run(c.name, func(t *testing.T) { stuckReplayAbortsOwnHangingTransaction(t, c.pids, c.id) })
	}
}

func stuckReplayAbortsOwnHangingTransaction(t *testing.T, pids []int64, id string) {
	addr, ends := hangingTxnBroker(t)
	core, logs := observer.New(zap.InfoLevel)
	b := stateBackend(zap.New(core), "hanging-", 1, 5*time.Second, kgo.SeedBrokers(addr))
	lg, err := b.Open(0, log.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	l := lg.(*kafkaLog)
	// As after the load's fence: the producer at producer id 3's index holds it.
	i := slices.Index(pids, 3)
	kc := l.kcs[min(i, len(l.kcs)-1)]
	if i >= len(l.kcs) {
		if kc, err = kgo.NewClient(b.producerOpts(b.nodeTransactionalID(2, 0))...); err != nil {
			t.Fatal(err)
		}
		l.fenceClients = append(l.fenceClients, kc)
	}
	if _, _, err := kc.ProducerID(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.pids = pids
	l.reportOpenTransactions(context.Background(), 23)
	select {
	case end := <-ends:
		if end.Commit || end.ProducerID != 3 || end.TransactionalID != id {
			t.Fatalf("ended %+v, want an abort by producer 3 (%s)", end, id)
		}
	default:
		t.Fatalf("the hanging transaction was not aborted (logged %v)", logs.All())
	}
	if logs.FilterMessageSnippet("aborted a transaction of this shard's own producer").Len() != 1 {
		t.Fatalf("the abort was not logged (logged %v)", logs.All())
	}
}

// The same for a transaction of the node's own producer (the one that writes every shard's
// rounds): the node writer aborts it with that producer between two rounds, and the shard's
// other writes go on.
func TestStuckReplayAbortsTheNodeProducersHangingTransaction(t *testing.T) {
	addr, ends := hangingTxnBroker(t)
	core, logs := observer.New(zap.InfoLevel)
	b := stateBackend(zap.New(core), "hanging-", 1, 5*time.Second, kgo.SeedBrokers(addr))
	l := openStarted(t, b, 0, log.Callbacks{Durable: func(int64) {}}, nil)
	defer l.Close()
	// A round, so that the node's producers exist (producer id 3).
	if _, err := l.Append([]log.Record{rec("a", "1")}); err != nil {
		t.Fatal(err)
	}
	select {
	case end := <-ends:
		if !end.Commit {
			t.Fatalf("the round ended %+v", end)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the round never ended")
	}
	l.reportOpenTransactions(context.Background(), 23)
	select {
	case end := <-ends:
		if end.Commit || end.ProducerID != 3 || !strings.HasPrefix(end.TransactionalID, "hanging-node-1") {
			t.Fatalf("ended %+v, want an abort by the node's producer 3", end)
		}
	default:
		t.Fatalf("the hanging transaction was not aborted (logged %v)", logs.All())
	}
	if logs.FilterMessageSnippet("aborted a transaction of this shard's own producer").Len() != 1 {
		t.Fatalf("the abort was not logged (logged %v)", logs.All())
	}
}

// initProducerBroker is a one-broker cluster whose transaction coordinator answers each
// InitProducerId with answer(transactional id); granted counts the ids it answered NONE.
func initProducerBroker(t *testing.T, answer func(id string) int16) (addr string, granted *sync.Map) {
	t.Helper()
	granted = new(sync.Map)
	addr = fakeCluster{apis: [][3]int16{{18, 0, 3}, {3, 0, 12}, {10, 0, 3}, {22, 0, 5}}, serve: func(h wire.Header, body []byte) kmsg.Response {
		if kmsg.Key(h.Key) != kmsg.InitProducerID {
			return nil
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		if !wiretest.Request(h, body, req) {
			return nil
		}
		r := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		id := ""
		if req.TransactionalID != nil {
			id = *req.TransactionalID
		}
		if r.ErrorCode = answer(id); r.ErrorCode == 0 {
			r.ProducerID, r.ProducerEpoch = 7, 1
			granted.Store(id, true)
		} else {
			r.ProducerID, r.ProducerEpoch = -1, -1
		}
		return r
	}}.start(t)
	return addr, granted
}

// The fence of a node that claimed the shard without releasing it is what keeps that node from
// acknowledging after this load (storage.md, Fencing): the load goes on only once both of its
// ids' InitProducerId succeeded. One that does not end within its bound is tried again; one
// refused for good (authorization) ends the load. (Moving on whatever the fence answered
// passed every other test.)
func TestLoadGoesOnOnlyOnceTheUnreleasedOwnerIsFenced(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		addr, granted := initProducerBroker(t, func(string) int16 { return kerr.TransactionalIDAuthorizationFailed.Code })
		b := stateBackend(zap.NewNop(), "refused-", 1, time.Second, kgo.SeedBrokers(addr))
		l, err := b.Open(0, log.Callbacks{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		err = l.(*kafkaLog).fenceNodes(context.Background(), []int32{2})
		if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			t.Fatalf("fence refused for good: %v, want the refusal", err)
		}
		if _, ok := granted.Load("refused-node-2"); ok {
			t.Fatal("granted")
		}
	})
	t.Run("slow", func(t *testing.T) {
		// Busy (CONCURRENT_TRANSACTIONS: the node's last transaction is being completed) for
		// longer than one attempt's bound, then done.
		busyUntil := time.Now().Add(2500 * time.Millisecond)
		addr, granted := initProducerBroker(t, func(string) int16 {
			if time.Now().Before(busyUntil) {
				return kerr.ConcurrentTransactions.Code
			}
			return 0
		})
		b := stateBackend(zap.NewNop(), "slow-", 1, time.Second, kgo.SeedBrokers(addr))
		l, err := b.Open(0, log.Callbacks{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := l.(*kafkaLog).fenceNodes(context.Background(), []int32{2}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"slow-node-2", "slow-node-2-1"} {
			if _, ok := granted.Load(id); !ok {
				t.Fatalf("the load went on before %s was fenced", id)
			}
		}
	})
}

// A round is acknowledged only once its commit is: records the partition's leader took are
// not durable while the EndTxn that commits them fails (here the coordinator answers it
// PRODUCER_FENCED: another node's load fenced this one between the produce and the commit).
// The shard fails instead, and nothing of the round is reported durable. (Ignoring the
// commit's answer passed every other test.)
func TestRoundWhoseCommitFailsIsNeverDurable(t *testing.T) {
	addr, ends := txnBrokerAnswering(t, "state", 3, func(req *kmsg.EndTxnRequest) int16 {
		if req.Commit {
			return kerr.ProducerFenced.Code
		}
		return 0
	}, nil)
	durable, failed := make(chan int64, 4), make(chan error, 1)
	b := stateBackend(zap.NewNop(), "commitfails-", 1, 5*time.Second, kgo.SeedBrokers(addr))
	l := openStarted(t, b, 0, log.Callbacks{Durable: func(o int64) { durable <- o }, Failed: func(err error) { failed <- err }}, nil)
	defer l.Close()
	if _, err := l.Append([]log.Record{rec("a", "1")}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-failed:
		if !errors.Is(err, log.ErrFailed) {
			t.Fatalf("failure %v does not match log.ErrFailed", err)
		}
	case o := <-durable:
		t.Fatalf("offset %d reported durable although its commit failed", o)
	case <-time.After(time.Minute):
		t.Fatal("the round whose commit failed never failed the shard")
	}
	select {
	case o := <-durable:
		t.Fatalf("offset %d reported durable although its commit failed", o)
	default:
	}
	if end := <-ends; !end.Commit {
		t.Fatalf("the round ended %+v, want its commit tried", end)
	}
}

// produceRefusingBroker is a txnBroker (TV1, producer id 3) whose partition leader refuses the
// n-th Produce (counting from 1) with code when refuse(n) and whose coordinator answers each
// EndTxn with end(commit) (nil: accepted); produces counts the Produces, aborts the EndTxn
// aborts.
func produceRefusingBroker(t *testing.T, code int16, refuse func(n int32) bool, end func(commit bool) int16) (addr string, produces, aborts *atomic.Int32) {
	t.Helper()
	produces, aborts = new(atomic.Int32), new(atomic.Int32)
	addr = fakeCluster{apis: [][3]int16{{18, 0, 3}, {3, 0, 12}, {10, 0, 3}, {22, 0, 4}, {24, 0, 3}, {0, 3, 9}, {26, 0, 3}}, topic: "state", partitions: 1,
		serve: func(h wire.Header, body []byte) kmsg.Response {
			switch kmsg.Key(h.Key) {
			case kmsg.InitProducerID:
				r := kmsg.NewPtrInitProducerIDResponse()
				r.ProducerID, r.ProducerEpoch = 3, 4
				return r
			case kmsg.AddPartitionsToTxn:
				return addPartitionsAnswer(h, body)
			case kmsg.Produce:
				req := kmsg.NewPtrProduceRequest()
				if !wiretest.Request(h, body, req) {
					return nil
				}
				refused := refuse(produces.Add(1))
				r := req.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range req.Topics {
					t := kmsg.NewProduceResponseTopic()
					t.Topic = rt.Topic
					for _, p := range rt.Partitions {
						pp := kmsg.NewProduceResponseTopicPartition()
						pp.Partition, pp.BaseOffset = p.Partition, 30
						if refused {
							pp.ErrorCode, pp.BaseOffset = code, -1
						}
						t.Partitions = append(t.Partitions, pp)
					}
					r.Topics = append(r.Topics, t)
				}
				return r
			case kmsg.EndTxn:
				req := kmsg.NewPtrEndTxnRequest()
				if !wiretest.Request(h, body, req) {
					return nil
				}
				if !req.Commit {
					aborts.Add(1)
				}
				r := req.ResponseKind().(*kmsg.EndTxnResponse)
				if end != nil {
					r.ErrorCode = end(req.Commit)
				}
				return r
			}
			return nil
		}}.start(t)
	return addr, produces, aborts
}

// A load's marker refused with an error KIP-1050 classes abortable on a Produce (abort the
// transaction, try again) is written again with a new producer; the load does not fail for it
// (storage.md, Failures). INVALID_TXN_STATE is abortable in a Produce answer and
// application-recoverable on the transactional APIs. (Failing on the abortable class passed
// every other test; classing a Produce's INVALID_TXN_STATE by EndTxn's table ended the load
// FAILED.)
func TestLoadMarkerRefusedAbortableIsWrittenAgain(t *testing.T) {
	for _, refusal := range []*kerr.Error{kerr.TransactionAbortable, kerr.InvalidTxnState} {
		t.Run(refusal.Message, func(t *testing.T) {
			addr, produces, _ := produceRefusingBroker(t, refusal.Code, func(n int32) bool { return n == 1 }, nil)
			core, logs := observer.New(zap.InfoLevel)
			b := stateBackend(zap.New(core), "abortable-", 1, 5*time.Second, kgo.SeedBrokers(addr))
			lg, err := b.Open(0, log.Callbacks{})
			if err != nil {
				t.Fatal(err)
			}
			defer lg.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := lg.(*kafkaLog).fenceAndMark(ctx, &loadProgress{start: time.Now()}); err != nil {
				t.Fatalf("fence and marker after an abortable refusal: %v (logged %v)", err, logs.All())
			}
			if produces.Load() < 2 || logs.FilterMessageSnippet("retrying with a new producer").Len() != 1 {
				t.Fatalf("%d produces, logged %v; want the marker written again after one retry", produces.Load(), logs.All())
			}
		})
	}
}

// A load whose marker's produce failed and whose abort the coordinator then answers
// PRODUCER_FENCED ends FAILED at once: this node was fenced (another node loaded a shard it
// held), and trying again would claim the shard anew and fence that node back. The abort's
// answer is what says so; the produce's own error is abortable. (With the abort's error left
// out of the round's error, the load retried every backoff, as if it could succeed.) Two
// claims commit first, one on each of the node's producers: on a client's first round on the
// topic the kgo race of txnend.go can end a transaction with no record acknowledged without an
// EndTxn, and the abort this test is about would not be sent.
func TestLoadWhoseMarkerAbortIsAnsweredFencedEndsFailed(t *testing.T) {
	var refusing atomic.Bool
	addr, produces, aborts := produceRefusingBroker(t, kerr.TransactionAbortable.Code, func(int32) bool { return refusing.Load() }, func(commit bool) int16 {
		if commit {
			return 0
		}
		return kerr.ProducerFenced.Code
	})
	core, logs := observer.New(zap.InfoLevel)
	b := stateBackend(zap.New(core), "abortfenced-", 1, 5*time.Second, kgo.SeedBrokers(addr))
	lg, err := b.Open(0, log.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < shardProducers; i++ {
		if _, err := lg.(*kafkaLog).claim(ctx); err != nil {
			t.Fatalf("claim %d before the refusals: %v", i+1, err)
		}
	}
	refusing.Store(true)
	_, err = lg.(*kafkaLog).fenceAndMark(ctx, &loadProgress{start: time.Now()})
	if !errors.Is(err, log.ErrFailed) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("load after its marker's abort was answered PRODUCER_FENCED: %v, want log.ErrFailed with PRODUCER_FENCED (%d produces, %d aborts, %d retries)",
			err, produces.Load(), aborts.Load(), logs.FilterMessageSnippet("retrying with a new producer").Len())
	}
	if n := logs.FilterMessageSnippet("retrying with a new producer").Len(); n != 0 || aborts.Load() != 1 {
		t.Fatalf("%d retries, %d aborts; want the load to end at its first fenced abort", n, aborts.Load())
	}
}
