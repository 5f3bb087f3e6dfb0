package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stableOffsets fetches a group's committed offsets with RequireStable, as a read_committed
// consumer does: ok=false while any partition still has a staged transactional offset.
func stableOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string, parts int32) (map[int32]int64, bool) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic = topic
	for p := int32(0); p < parts; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		t.Fatalf("OffsetFetch: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	out := map[int32]int64{}
	stable := true
	for _, tp := range g.Topics {
		for _, p := range tp.Partitions {
			switch p.ErrorCode {
			case 0:
				if p.Offset >= 0 {
					out[p.Partition] = p.Offset
				}
			case kerr.UnstableOffsetCommit.Code:
				stable = false
			default:
				t.Fatalf("OffsetFetch partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	return out, stable
}

// A franz-go consume-process-produce loop (GroupTransactSession) through the gateway: as soon
// as End reports the transaction committed, the consumed offsets are committed in coordinatord
// (RequireStable finds nothing staged); after an aborted transaction they are where the last
// commit left them. The output, read with read_committed, has each committed record once.
func TestGateway_TransactSessionCommitsAndAbortsOffsets(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	in, out, group := "txs-in-"+run, "txs-out-"+run, "txs-group-"+run
	cl := newClient(t, g.Addr)
	adm := kadm.NewClient(cl)
	for _, topic := range []string{in, out} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	const n = 40
	produceN(t, ctx, cl, in, n)

	sess := newTransactSession(t, g.Addr, "txs-"+run, group, in, out, 30*time.Second)
	defer sess.Close()

	consumed := map[int32]int64{} // partition -> next offset, as committed
	for total := 0; total < n; {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, n, err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		batch := map[int32]int64{}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
			batch[r.Partition] = r.Offset + 1
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("End: %v", err)
		}
		if !committed {
			continue // a rebalance made the session abort; the records come again
		}
		for p, o := range batch {
			consumed[p] = o
		}
		total = 0 // the input starts at offset 0: the committed offsets sum to what was consumed
		for _, o := range consumed {
			total += int(o)
		}
		// No waiting: the commit was durable before End returned.
		got, stable := stableOffsets(t, ctx, cl, group, in, 2)
		if !stable {
			t.Fatal("offsets still staged after the transaction was reported committed")
		}
		for p, o := range consumed {
			if got[p] != o {
				t.Fatalf("partition %d committed at %d right after the commit, want %d", p, got[p], o)
			}
		}
	}

	// One more transaction that consumes new records and aborts.
	produceN(t, ctx, cl, in, 10)
	for aborted := false; !aborted; {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { sess.Produce(ctx, &kgo.Record{Value: r.Value}, nil); aborted = true })
		if _, err := sess.End(ctx, kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
	}
	got, stable := stableOffsets(t, ctx, cl, group, in, 2)
	if !stable {
		t.Fatal("offsets still staged after the transaction was aborted")
	}
	for p, o := range consumed {
		if got[p] != o {
			t.Fatalf("partition %d at %d after an aborted transaction, want the committed %d", p, got[p], o)
		}
	}

	// read_committed sees the committed output once and nothing of the aborted transaction.
	rc := newClient(t, g.Addr, kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for deadline := time.Now().Add(30 * time.Second); seen < n && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		rc.PollFetches(pctx).EachRecord(func(*kgo.Record) { seen++ })
		pcancel()
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	rc.PollFetches(pctx).EachRecord(func(*kgo.Record) { seen++ })
	pcancel()
	if seen != n {
		t.Fatalf("read_committed output has %d records, want %d", seen, n)
	}
}

// txnStep is a hand-driven transaction (transaction version 1, as the gateway advertises)
// through the gateway, up to a staged TxnOffsetCommit.
type txnStep struct {
	txnID string
	pid   int64
	epoch int16
}

func beginStagedTxn(t *testing.T, ctx context.Context, cl *kgo.Client, addr, txnID, group, topic string, offset int64, timeoutMs int32) txnStep {
	t.Helper()
	s := txnStep{txnID: txnID}
	retry(t, "InitProducerId", func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &txnID, timeoutMs
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return -2
		}
		s.pid, s.epoch = resp.ProducerID, resp.ProducerEpoch
		return resp.ErrorCode
	})
	retry(t, "AddOffsetsToTxn", func() int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, s.pid, s.epoch, group
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return -2
		}
		return resp.ErrorCode
	})
	stageOffset(t, addr, s, group, topic, offset)
	return s
}

// stageOffset stages offset for partition 0 of topic in s's transaction with a TxnOffsetCommit
// v4 to addr (franz-go would send v6, which names topics by id), retrying until it is answered
// NONE.
func stageOffset(t *testing.T, addr string, s txnStep, group, topic string, offset int64) {
	t.Helper()
	c := dialWire(t, addr)
	retry(t, "TxnOffsetCommit", func() int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = s.txnID, group, s.pid, s.epoch, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Offset = offset
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		resp, _ := c.roundTrip(req, 4)
		return resp.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	})
}

// commitTxn ends a transaction begun with beginStagedTxn by an EndTxn commit through cl,
// retrying until it is answered NONE.
func commitTxn(t *testing.T, ctx context.Context, cl *kgo.Client, s txnStep) {
	t.Helper()
	endTxnRetried(t, s, true, func(req kmsg.Request) (kmsg.Response, error) { return cl.Request(ctx, req) })
}

// endTxnRetried sends EndTxn for s's transaction with send until it is answered NONE (a
// closed connection, where the relay held the answer, is retried).
func endTxnRetried(t *testing.T, s txnStep, commit bool, send func(kmsg.Request) (kmsg.Response, error)) {
	t.Helper()
	retry(t, "EndTxn", func() int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = s.txnID, s.pid, s.epoch, commit
		resp, err := send(req)
		if err != nil {
			return -2
		}
		return resp.(*kmsg.EndTxnResponse).ErrorCode
	})
}

func retry(t *testing.T, what string, f func() int16) {
	t.Helper()
	var code int16
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code = f(); code == 0 {
			return
		}
	}
	t.Fatalf("%s: last code %d (%v)", what, code, kerr.ErrorForCode(code))
}

// kill -9 of coordinatord after TxnOffsetCommit: after the restart the transaction is still
// open upstream and stays staged, and the client's EndTxn commit through the restarted gateway
// commits the offsets. A second transaction left by the kill is aborted upstream by its
// timeout, and the restarted gateway drops its staged offsets.
func TestGateway_TxnOutcomeResolvedAfterKill(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, groupA, groupB := "txk-"+run, "txk-a-"+run, "txk-b-"+run
	cl := newClient(t, g.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	a := beginStagedTxn(t, ctx, cl, g.Addr, "txk-a-"+run, groupA, topic, 7, 120000)
	b := beginStagedTxn(t, ctx, cl, g.Addr, "txk-b-"+run, groupB, topic, 9, 3000) // the upstream times it out
	for _, group := range []string{groupA, groupB} {
		if _, stable := stableOffsets(t, ctx, cl, group, topic, 1); stable {
			t.Fatalf("group %s: nothing staged before the kill", group)
		}
	}

	g.kill()
	// The upstream aborts B by its timeout while coordinatord is down (asked directly: no
	// client of the test goes upstream otherwise).
	up := newClient(t, upstreamAddr)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{b.txnID}
		resp, err := req.RequestWith(ctx, up)
		if err == nil && len(resp.TransactionStates) == 1 && resp.TransactionStates[0].State == "CompleteAbort" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream did not time the transaction out: %v %+v", err, resp)
		}
	}
	g.start()
	cl = newClient(t, g.Addr)

	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got, stable := stableOffsets(t, ctx, cl, groupB, topic, 1)
		if stable {
			if len(got) != 0 {
				t.Fatalf("the timed-out transaction's offsets were committed: %v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the transaction aborted upstream while coordinatord was down stays staged after the restart")
		}
	}
	if _, stable := stableOffsets(t, ctx, cl, groupA, topic, 1); stable {
		t.Fatal("the transaction still open upstream was resolved by the restart")
	}
	commitTxn(t, ctx, cl, a)
	got, stable := stableOffsets(t, ctx, cl, groupA, topic, 1)
	if !stable || got[0] != 7 {
		t.Fatalf("after EndTxn commit: stable=%v offsets=%v, want partition 0 at 7", stable, got)
	}
}

// A producer fenced by a new instance of the same transactional id: the new instance's
// InitProducerId through the gateway aborts the old transaction's staged offsets before it is
// answered, and the zombie can neither commit them nor stage new ones.
func TestGateway_FencedProducersOffsetsAreAborted(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group, txnID := "txf-"+run, "txf-g-"+run, "txf-id-"+run
	cl := newClient(t, g.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	zombie := beginStagedTxn(t, ctx, cl, g.Addr, txnID, group, topic, 11, 60000)

	retry(t, "InitProducerId of the new instance", func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &txnID, 60000
		resp, err := req.RequestWith(ctx, newClient(t, g.Addr))
		if err != nil {
			return -2
		}
		return resp.ErrorCode
	})
	got, stable := stableOffsets(t, ctx, cl, group, topic, 1)
	if !stable || len(got) != 0 {
		t.Fatalf("after the fencing InitProducerId: stable=%v offsets=%v, want the zombie's offsets aborted", stable, got)
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, zombie.pid, zombie.epoch, true
	resp, err := end.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.ProducerFenced.Code && resp.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the zombie's EndTxn: %v, want it fenced", kerr.ErrorForCode(resp.ErrorCode))
	}
	c := dialWire(t, g.Addr)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txnID, group, zombie.pid, zombie.epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Offset = 12
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	r, _ := c.roundTrip(req, 4)
	if code := r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the zombie's TxnOffsetCommit: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	got, stable = stableOffsets(t, ctx, cl, group, topic, 1)
	if !stable || len(got) != 0 {
		t.Fatalf("after the zombie: stable=%v offsets=%v, want nothing committed or staged", stable, got)
	}
}

// A producer that stages offsets and vanishes while coordinatord runs: the upstream aborts its
// transaction by timeout, and the relay's sweep drops the staged offsets without any request of
// the producer.
func TestGateway_VanishedProducerAbortedByTimeout(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "txv-"+run, "txv-g-"+run
	cl := newClient(t, g.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	beginStagedTxn(t, ctx, cl, g.Addr, "txv-id-"+run, group, topic, 5, 2000)
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		got, stable := stableOffsets(t, ctx, cl, group, topic, 1)
		if stable {
			if len(got) != 0 {
				t.Fatalf("the timed-out transaction's offsets were committed: %v", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("offsets of a transaction the upstream timed out are still staged")
		}
	}
}

// kill -9 of coordinatord after the upstream ended transactions but before their EndTxn answers
// reached the clients (the upstream is sent the EndTxns while coordinatord is down: what it
// sees when the gateway forwarded them and died), and a second kill -9 in the middle of the
// recovery that follows: the run after that commits exactly the committed transactions' offsets
// and drops the aborted one's, and a client's retried EndTxn changes nothing.
func TestGateway_TxnOutcomesSurviveKillsBeforeTheAnswerAndDuringRecovery(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic := "txr-" + run
	cl := newClient(t, g.Addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	type txn struct {
		txnStep
		group  string
		commit bool
		offset int64
	}
	var txns []txn
	for i := range 6 {
		group := fmt.Sprintf("txr-%d-%s", i, run)
		s := beginStagedTxn(t, ctx, cl, g.Addr, group, group, topic, int64(10+i), 120000)
		txns = append(txns, txn{s, group, i%3 != 1, int64(10 + i)})
	}
	g.kill()

	// EndTxn v4 at most, as the gateway forwards it (it advertises transaction.version 1): v5
	// would end the transaction with an epoch bump, under version 2's rules.
	// The upstream is a single broker, so it is every transaction's coordinator.
	up := dialWire(t, upstreamAddr)
	for _, x := range txns {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = x.txnID, x.pid, x.epoch, x.commit
		if kr, _ := up.roundTrip(req, 4); kr.(*kmsg.EndTxnResponse).ErrorCode != 0 {
			t.Fatalf("EndTxn of %s upstream: %v", x.txnID, kerr.ErrorForCode(kr.(*kmsg.EndTxnResponse).ErrorCode))
		}
	}

	const resolvedMsg = "resolved a transaction left staged by a previous run"
	g.spawn() // its "started" line may never come: the kill can be earlier
	for deadline := time.Now().Add(60 * time.Second); g.logCount(resolvedMsg) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted gateway resolved nothing within 60 s")
		}
	}
	g.kill()
	if n := g.logCount(resolvedMsg); n >= len(txns) {
		t.Logf("the kill came after all %d resolutions; recovery was not interrupted this time", n)
	}

	g.start()
	cl = newClient(t, g.Addr)
	for _, x := range txns {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			got, stable := stableOffsets(t, ctx, cl, x.group, topic, 1)
			if stable {
				switch {
				case x.commit && got[0] != x.offset:
					t.Errorf("group %s: committed transaction's offsets = %v, want partition 0 at %d", x.group, got, x.offset)
				case !x.commit && len(got) != 0:
					t.Errorf("group %s: aborted transaction's offsets were committed: %v", x.group, got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %s: still staged 30 s after the second restart", x.group)
			}
		}
	}
	// The client that never saw its answer retries it through the gateway.
	x := txns[0]
	commitTxn(t, ctx, cl, x.txnStep)
	if got, stable := stableOffsets(t, ctx, cl, x.group, topic, 1); !stable || got[0] != x.offset {
		t.Fatalf("after the retried EndTxn: stable=%v offsets=%v, want partition 0 at %d", stable, got, x.offset)
	}
}

// newTransactSession is the consume-transform-produce session these tests drive: it reads in
// from the start with read_committed as a member of group, and produces to out.
func newTransactSession(t *testing.T, addr, txnID, group, in, out string, txnTimeout time.Duration) *kgo.GroupTransactSession {
	t.Helper()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr), kgo.TransactionalID(txnID), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.TransactionTimeout(txnTimeout),
	)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}
