package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/internal/wire/wiretest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// roundBroker is a one-broker cluster that serves transactions (TV1: the client adds
// partitions) for one producer id and answers each Produce with answer(partition), after
// hold() returns; it records, per Produce and EndTxn, what it got, in order.
type roundBroker struct {
	mu     sync.Mutex
	events []string // "produce:<partitions>" or "end:commit"/"end:abort"
}

func (rb *roundBroker) add(e string) {
	rb.mu.Lock()
	rb.events = append(rb.events, e)
	rb.mu.Unlock()
}

func (rb *roundBroker) seen() []string {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return append([]string(nil), rb.events...)
}

func (rb *roundBroker) start(t *testing.T, partitions int32, hold func(), answer func(partition int32) int16) string {
	t.Helper()
	return fakeCluster{apis: [][3]int16{{18, 0, 3}, {3, 0, 12}, {10, 0, 3}, {22, 0, 4}, {24, 0, 3}, {0, 3, 9}, {26, 0, 3}}, topic: "state", partitions: partitions,
		serve: func(h wire.Header, body []byte) kmsg.Response {
			switch kmsg.Key(h.Key) {
			case kmsg.InitProducerID:
				r := kmsg.NewPtrInitProducerIDResponse()
				r.ProducerID, r.ProducerEpoch = 1, 0
				return r
			case kmsg.AddPartitionsToTxn:
				return addPartitionsAnswer(h, body)
			case kmsg.Produce:
				req := kmsg.NewPtrProduceRequest()
				if !wiretest.Request(h, body, req) {
					return nil
				}
				hold()
				r := req.ResponseKind().(*kmsg.ProduceResponse)
				var parts []byte
				for _, rt := range req.Topics {
					t := kmsg.NewProduceResponseTopic()
					t.Topic = rt.Topic
					for _, p := range rt.Partitions {
						parts = append(parts, byte('0'+p.Partition))
						pp := kmsg.NewProduceResponseTopicPartition()
						pp.Partition, pp.BaseOffset, pp.ErrorCode = p.Partition, 30, answer(p.Partition)
						t.Partitions = append(t.Partitions, pp)
					}
					r.Topics = append(r.Topics, t)
				}
				rb.add("produce:" + string(parts))
				return r
			case kmsg.EndTxn:
				req := kmsg.NewPtrEndTxnRequest()
				if !wiretest.Request(h, body, req) {
					return nil
				}
				if req.Commit {
					rb.add("end:commit")
				} else {
					rb.add("end:abort")
				}
				return req.ResponseKind()
			}
			return nil
		}}.start(t)
}

// shardReports are what a shard's log reported.
type shardReports struct {
	durable chan int64
	failed  chan error
	lost    chan *log.WriteError
}

// holdFirstProduce starts rb with its first produce held until release is closed, so that the
// tests' later appends queue behind a round in flight; produces counts the produces seen.
func (rb *roundBroker) holdFirstProduce(t *testing.T, partitions int32, answer func(partition int32) int16) (addr string, produces *atomic.Int32, release chan struct{}) {
	t.Helper()
	produces, release = new(atomic.Int32), make(chan struct{})
	addr = rb.start(t, partitions, func() {
		if produces.Add(1) == 1 {
			<-release
		}
	}, answer)
	return addr, produces, release
}

// openAttached opens shard as if loaded: attached to the node's writer, the state after its
// claim and replay (the load is not what these tests are about).
func openAttached(t *testing.T, b *Backend, shard int32) (*kafkaLog, *shardReports) {
	t.Helper()
	r := &shardReports{durable: make(chan int64, 64), failed: make(chan error, 1), lost: make(chan *log.WriteError, 1)}
	l := openStarted(t, b, shard, log.Callbacks{
		Durable: func(o int64) { r.durable <- o },
		Failed:  func(err error) { r.failed <- err },
		Lost:    func(err *log.WriteError, _ func()) { r.lost <- err },
	}, func(l *kafkaLog) { l.next = 100 * int64(shard+1) })
	return l, r
}

// openStarted opens shard's log as if loaded and attaches it to the node's rounds: the
// writer's rounds are what such tests are about, not the load. before runs ahead of the
// attach (nil: nothing).
func openStarted(t *testing.T, b *Backend, shard int32, cb log.Callbacks, before func(*kafkaLog)) *kafkaLog {
	t.Helper()
	lg, err := b.Open(shard, cb)
	if err != nil {
		t.Fatal(err)
	}
	l := lg.(*kafkaLog)
	l.started = true
	if before != nil {
		before(l)
	}
	l.w.attach(l)
	return l
}

// A round the upstream refuses is aborted as a whole, and every shard with records in it loses
// its own part (Lost with its own offsets, nothing reported durable), not only the first: the
// node's transaction held all of them.
func TestAbortedNodeRoundLosesEveryShardsPartOfIt(t *testing.T) {
	var rb roundBroker
	// The first round (shard 2's) is held, so that shards 0 and 1 queue behind it and go in
	// one round, which the broker refuses.
	addr, produces, release := rb.holdFirstProduce(t, 3, func(p int32) int16 {
		if p == 2 {
			return 0
		}
		return kerr.TransactionAbortable.Code
	})
	b := stateBackend(zap.NewNop(), "lost-", 3, 5*time.Second, kgo.SeedBrokers(addr))
	l2, _ := openAttached(t, b, 2)
	defer l2.Close()
	l0, r0 := openAttached(t, b, 0)
	l1, r1 := openAttached(t, b, 1)
	defer l0.Close()
	defer l1.Close()
	if _, err := l2.Append([]log.Record{rec("x", "1")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first round's produce", func() bool { return produces.Load() > 0 })
	if _, err := l0.Append([]log.Record{rec("a", "1"), rec("b", "2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l1.Append([]log.Record{rec("c", "3")}); err != nil {
		t.Fatal(err)
	}
	close(release)
	want := map[int32][2]int64{0: {100, 101}, 1: {200, 200}}
	for shard, r := range map[int32]*shardReports{0: r0, 1: r1} {
		select {
		case werr := <-r.lost:
			if got := [2]int64{werr.First, werr.Last}; werr.Shard != shard || got != want[shard] {
				t.Fatalf("shard %d lost %v (shard %d), want offsets %v", shard, got, werr.Shard, want[shard])
			}
		case o := <-r.durable:
			t.Fatalf("shard %d: offset %d reported durable in an aborted round", shard, o)
		case err := <-r.failed:
			t.Fatalf("shard %d failed: %v, want Lost", shard, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("shard %d never heard of its aborted round (broker saw %v)", shard, rb.seen())
		}
	}
	// The first round committed; the second, both shards' (kgo may send it as several
	// produces), aborted once.
	if ev := rb.seen(); countPrefix(ev, "end:commit", "") != 1 || countPrefix(ev, "end:abort", "") != 1 || ev[len(ev)-1] != "end:abort" {
		t.Fatalf("broker saw %v, want the first round committed, then the second aborted", ev)
	}
}

// Closing a shard waits until no round of the node holds its records: its release follows
// them, in a later round or the same, and only then does the next owner find it released. A
// Close that returned while its records' round was still open would let the next owner load
// without those records and without fencing this node.
func TestCloseWaitsForTheNodeRoundHoldingTheShardsRecords(t *testing.T) {
	var rb roundBroker
	addr, produces, release := rb.holdFirstProduce(t, 2, func(int32) int16 { return 0 })
	b := stateBackend(zap.NewNop(), "close-", 2, 10*time.Second, kgo.SeedBrokers(addr))
	l0, r0 := openAttached(t, b, 0)
	l1, r1 := openAttached(t, b, 1)
	defer l1.Close()
	last0, err := l0.Append([]log.Record{rec("a", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l1.Append([]log.Record{rec("b", "2")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for produces.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the round's produce never reached the broker")
		}
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { l0.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while the node's round holding the shard's records was open")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatalf("Close did not return once the round was answered (broker saw %v)", rb.seen())
	}
	select {
	case o := <-r0.durable:
		if o != last0 {
			t.Fatalf("durable %d, want %d", o, last0)
		}
	default:
		t.Fatal("Close returned before the shard's records were reported durable")
	}
	// The round, then the release of shard 0 in a transaction after it: a second produce to
	// partition 0, both committed (the fake broker logs a held produce when it answers it, and
	// kgo may send one transaction as several produces).
	if ev := rb.seen(); countPrefix(ev, "produce:", "0") < 2 || countPrefix(ev, "end:commit", "") < 2 || countPrefix(ev, "end:abort", "") != 0 {
		t.Fatalf("broker saw %v, want the round, then the release of shard 0 in a transaction after it", ev)
	}
	// The shard the node keeps goes on.
	last1, err := l1.Append([]log.Record{rec("c", "3")})
	if err != nil {
		t.Fatal(err)
	}
	for o := range r1.durable {
		if o >= last1 {
			break
		}
	}
	if _, err := l0.Append([]log.Record{rec("d", "4")}); !errors.Is(err, log.ErrClosed) {
		t.Fatalf("append after Close: %v, want log.ErrClosed", err)
	}
}

// A node's round gathers every shard's queue, so taken whole it can hold more records than
// the producer buffers (kgo's default is 50 000, beyond which a manually flushed produce fails
// and the round is lost): three shards' batches of 20 000 records each, queued while a round is
// in flight, all become durable, none lost.
func TestNodeRoundsOfManyShardsBatchesAllBecomeDurable(t *testing.T) {
	var rb roundBroker
	addr, produces, release := rb.holdFirstProduce(t, 4, func(int32) int16 { return 0 })
	b := stateBackend(zap.NewNop(), "big-", 4, 20*time.Second, kgo.SeedBrokers(addr))
	first, _ := openAttached(t, b, 3)
	defer first.Close()
	if _, err := first.Append([]log.Record{rec("x", "1")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for produces.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first round's produce never reached the broker")
		}
		time.Sleep(5 * time.Millisecond)
	}
	type shard struct {
		l    *kafkaLog
		r    *shardReports
		last int64
	}
	var shards []shard
	for i := int32(0); i < 3; i++ {
		l, r := openAttached(t, b, i)
		defer l.Close()
		batch := make([]log.Record, 20000)
		for j := range batch {
			batch[j] = rec(fmt.Sprintf("k%d", j), "v")
		}
		last, err := l.Append(batch)
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, shard{l, r, last})
	}
	close(release)
	for i, s := range shards {
		select {
		case o := <-s.r.durable:
			if o != s.last {
				t.Fatalf("shard %d: durable %d, want %d", i, o, s.last)
			}
		case werr := <-s.r.lost:
			t.Fatalf("shard %d lost its round: %v", i, werr)
		case err := <-s.r.failed:
			t.Fatalf("shard %d failed: %v", i, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("shard %d never durable (broker saw %v)", i, rb.seen())
		}
	}
}

// countPrefix counts the events that start with prefix and contain sub.
func countPrefix(events []string, prefix, sub string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) && strings.Contains(e, sub) {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, or fails the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A round's commit sends its clients their answers, and under load they come back with their
// next operations at once: the next round waits for them (up to its bound) instead of
// starting with only what queued while the previous round was in flight, so that the clients
// do not split into two halves that each pay a whole transaction (issue 18's 64-client
// benchmark). Here shard 0's client is answered by the first round and comes back 20 ms
// later; shard 2's operation queued during that round: both go in the second round, one
// produce and one commit, not one round each.
func TestNodeRoundWaitsForTheClientsItAcknowledged(t *testing.T) {
	defer func(g time.Duration) { gatherMax = g }(gatherMax)
	gatherMax = 10 * time.Second // the bound is then the held first round: about 2 s
	var rb roundBroker
	addr, produces, release := rb.holdFirstProduce(t, 3, func(int32) int16 { return 0 })
	b := stateBackend(zap.NewNop(), "gather-", 3, 20*time.Second, kgo.SeedBrokers(addr))
	l0, r0 := openAttached(t, b, 0)
	defer l0.Close()
	l2, r2 := openAttached(t, b, 2)
	defer l2.Close()
	if _, err := l0.Append([]log.Record{rec("a", "1")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first round's produce", func() bool { return produces.Load() > 0 })
	last2, err := l2.Append([]log.Record{rec("c", "1")})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	close(release)
	select {
	case <-r0.durable:
	case <-time.After(20 * time.Second):
		t.Fatalf("the first round never committed (broker saw %v)", rb.seen())
	}
	time.Sleep(20 * time.Millisecond) // the answered client's turnaround
	last0, err := l0.Append([]log.Record{rec("a", "2")})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		r    *shardReports
		last int64
	}{{r0, last0}, {r2, last2}} {
		select {
		case o := <-w.r.durable:
			if o != w.last {
				t.Fatalf("durable %d, want %d", o, w.last)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("offset %d never durable (broker saw %v)", w.last, rb.seen())
		}
	}
	// kgo may send one transaction as several produces; what matters is one commit for both.
	ev := rb.seen()
	second := strings.Join(ev[min(2, len(ev)):max(2, len(ev)-1)], " ")
	if len(ev) < 4 || ev[1] != "end:commit" || ev[len(ev)-1] != "end:commit" || countPrefix(ev, "end:", "") != 2 ||
		!strings.Contains(second, "0") || !strings.Contains(second, "2") {
		t.Fatalf("broker saw %v, want the first round, then both shards' operations in one transaction", ev)
	}
}

// A round whose Produce the partition leader answers INVALID_TXN_STATE (abortable on a
// Produce, KIP-1050: abort the transaction, the producer lives) is aborted and lost to the
// shard that had records in it, which reloads; the node's producers go on, so another shard of
// the node that was not in the round keeps serving: its next write becomes durable. On EndTxn
// the same code means the producer is finished, and classing the Produce's by that table failed
// every shard of the node. (Shard 1 writes first, once on each of the node's two producers: a
// client's first round on the topic can meet the kgo race of txnend.go, where a transaction
// with no record acknowledged ends without an EndTxn, and the abort this test expects would
// not be sent.)
func TestNodeRoundProducedIntoInvalidTxnStateIsLostAndTheNodeGoesOn(t *testing.T) {
	var rb roundBroker
	var refused atomic.Bool
	addr := rb.start(t, 2, func() {}, func(p int32) int16 {
		if p == 0 && refused.CompareAndSwap(false, true) {
			return kerr.InvalidTxnState.Code
		}
		return 0
	})
	b := stateBackend(zap.NewNop(), "txnstate-", 2, 5*time.Second, kgo.SeedBrokers(addr))
	l0, r0 := openAttached(t, b, 0)
	l1, r1 := openAttached(t, b, 1)
	defer l0.Close()
	defer l1.Close()
	writeDurable := func(v string) {
		t.Helper()
		last, err := l1.Append([]log.Record{rec("b", v)})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case o := <-r1.durable:
			if o != last {
				t.Fatalf("shard 1: durable %d, want %d", o, last)
			}
		case err := <-r1.failed:
			t.Fatalf("shard 1 failed (%v): the node's producers were dropped for an abortable refusal", err)
		case <-time.After(20 * time.Second):
			t.Fatalf("shard 1's write never became durable (broker saw %v)", rb.seen())
		}
	}
	writeDurable("1")
	writeDurable("2")
	if _, err := l0.Append([]log.Record{rec("a", "1")}); err != nil {
		t.Fatal(err)
	}
	select {
	case werr := <-r0.lost:
		if werr.Shard != 0 || !errors.Is(werr, kerr.InvalidTxnState) {
			t.Fatalf("shard 0 lost %v, want its round refused INVALID_TXN_STATE", werr)
		}
	case err := <-r0.failed:
		t.Fatalf("shard 0 failed (%v), want its round lost: a Produce's INVALID_TXN_STATE is abortable", err)
	case o := <-r0.durable:
		t.Fatalf("offset %d of a refused round reported durable", o)
	case <-time.After(20 * time.Second):
		t.Fatalf("shard 0 never heard of its refused round (broker saw %v)", rb.seen())
	}
	writeDurable("3")
	if ev := rb.seen(); countPrefix(ev, "end:abort", "") != 1 || countPrefix(ev, "end:commit", "") != 3 {
		t.Fatalf("broker saw %v, want the refused round aborted and the others committed", ev)
	}
}

// claimHeld starts rb with its first produce held, opens shard 0 of a one-partition backend on
// it and sends the shard's claim, which is that first round; it returns once the round's
// produce reached the broker, with the claim's outcome to come on claimed.
func claimHeld(t *testing.T, rb *roundBroker, prefix string) (l *kafkaLog, release chan struct{}, claimed chan error) {
	t.Helper()
	addr, produces, release := rb.holdFirstProduce(t, 1, func(int32) int16 { return 0 })
	b := stateBackend(zap.NewNop(), prefix, 1, time.Minute, kgo.SeedBrokers(addr))
	lg, err := b.Open(0, log.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	l = lg.(*kafkaLog)
	claimed = make(chan error, 1)
	go func() {
		_, err := l.claim(context.Background())
		claimed <- err
	}()
	waitFor(t, "the claim's produce", func() bool { return produces.Load() > 0 })
	return l, release, claimed
}

// released reports whether rb saw the shard's release: a produce to partition 0 in a
// transaction after the claim's, both committed. (The fake broker logs a held produce when it
// answers it, and kgo may send one transaction as several produces.)
func released(rb *roundBroker) bool {
	ev := rb.seen()
	return countPrefix(ev, "produce:", "0") >= 2 && countPrefix(ev, "end:commit", "") >= 2 && countPrefix(ev, "end:abort", "") == 0
}

// A shard closed while its claim is in the round in flight (the membership took the shard back
// during its load) is released in a round after it, and Close returns only once that release
// is answered: the claim may commit, and a claim left unreleased makes the shard's next owner
// fence this node and fail every shard it keeps. (With nodeWriter.release looking only at the
// attached shards, Close returned at once and released nothing itself.)
func TestCloseWhileItsClaimIsInFlightReturnsOnceTheShardIsReleased(t *testing.T) {
	var rb roundBroker
	l, release, claimed := claimHeld(t, &rb, "claimclose-")
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while its shard's claim was in the round in flight, before any release")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-claimed; err != nil {
		t.Fatalf("the claim's round: %v, want it committed", err)
	}
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatalf("Close did not return after the claim's round (broker saw %v)", rb.seen())
	}
	if !released(&rb) {
		t.Fatalf("Close returned before the shard's release was committed (broker saw %v)", rb.seen())
	}
}

// A shard abandoned while its claim is in the round in flight (its load was given up) is
// released after that round if the claim commits: nobody appends to it any more, but its claim
// in the partition would make the shard's next owner fence this node. (Without the release
// queued when such a claim commits, the broker saw the claim and nothing after it.)
func TestAbandonWhileItsClaimIsInFlightReleasesTheShardOnceTheClaimCommits(t *testing.T) {
	var rb roundBroker
	l, release, claimed := claimHeld(t, &rb, "claimabandon-")
	l.Abandon()
	close(release)
	if err := <-claimed; err != nil {
		t.Fatalf("the claim's round: %v, want it committed", err)
	}
	waitFor(t, "the abandoned shard's release after its claim committed", func() bool { return released(&rb) })
	l.Close()
}
