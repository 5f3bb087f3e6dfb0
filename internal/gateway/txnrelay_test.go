package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

type mark struct {
	shard  int32
	pid    int64
	epoch  int16
	commit bool
}

// fakeTxnBackend records markers and answers DescribeTransactions from a table.
type fakeTxnBackend struct {
	mu       sync.Mutex
	marks    []mark
	failMark error
	states   map[string]upstream.TxnState
	descErr  error
	// idErr fails Describe for one id. Other ids' Describe fails with a retriable code until
	// the id gate has been asked (so that recovery runs a round after it), then flaky more
	// times.
	idErr    map[string]error
	gate     string
	gated    bool
	flaky    int
	describe int
	open     map[int64]OpenProducer
	openErr  error
	idsOf    map[int64][]string
	serving  []int32
	settle   func(pid int64, epoch int16, commit bool, covered map[int32]bool) error
}

func (f *fakeTxnBackend) ShardOf(group string) int32 { return int32(len(group)) }

func (f *fakeTxnBackend) Mark(_ context.Context, shard int32, pid int64, epoch int16, commit bool) (int16, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failMark != nil {
		return 0, f.failMark
	}
	f.marks = append(f.marks, mark{shard, pid, epoch, commit})
	return 0, nil
}

func (f *fakeTxnBackend) OpenProducers(_ context.Context, shards []int32) (map[int64]OpenProducer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.openErr != nil {
		return nil, f.openErr
	}
	if shards == nil {
		return f.open, nil
	}
	out := map[int64]OpenProducer{}
	for pid, p := range f.open {
		for _, sh := range p.Shards {
			if slices.Contains(shards, sh) {
				q := out[pid]
				q.Epoch = p.Epoch
				q.Shards = append(q.Shards, sh)
				out[pid] = q
			}
		}
	}
	return out, nil
}

func (f *fakeTxnBackend) Describe(_ context.Context, id string) (upstream.TxnState, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describe++
	if f.descErr != nil {
		return upstream.TxnState{}, false, f.descErr
	}
	if id == f.gate {
		f.gated = true
	}
	if err := f.idErr[id]; err != nil {
		return upstream.TxnState{}, false, err
	}
	if f.gate != "" && id != f.gate && !f.gated {
		return upstream.TxnState{}, false, kerr.CoordinatorLoadInProgress
	}
	if f.flaky > 0 {
		f.flaky--
		return upstream.TxnState{}, false, kerr.CoordinatorLoadInProgress
	}
	st, ok := f.states[id]
	return st, ok, nil
}

func (f *fakeTxnBackend) TxnIDsOf(_ context.Context, pid int64) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idsOf[pid], nil
}

func (f *fakeTxnBackend) Shared() bool { return f.settle != nil }

func (f *fakeTxnBackend) ServingShards() []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.serving
}

func (f *fakeTxnBackend) Settle(_ context.Context, pid int64, epoch int16, commit bool, covered func() map[int32]bool) error {
	f.mu.Lock()
	settle := f.settle
	f.mu.Unlock()
	if settle == nil {
		return nil
	}
	return settle(pid, epoch, commit, covered())
}

func (f *fakeTxnBackend) taken() []mark {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.marks
	f.marks = nil
	return out
}

func newTestRelay(t *testing.T, b *fakeTxnBackend) *txnRelay {
	t.Helper()
	r := newTxnRelay(b, zap.NewNop())
	r.recover(context.Background())
	return r
}

// exchange sends req through the relay to an "upstream" answering resp (nil: the connection
// fails), and returns what the client would get.
func exchange(t *testing.T, r *txnRelay, req kmsg.Request, resp kmsg.Response, seen func()) (kmsg.Response, error) {
	t.Helper()
	h := wire.Header{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 7}
	out, err := r.around(context.Background(), h, requestFrame(req, 7), func() ([]byte, error) {
		if seen != nil {
			seen()
		}
		if resp == nil {
			return nil, errors.New("upstream connection reset")
		}
		resp.SetVersion(req.GetVersion())
		return frameOf(7, resp), nil
	})
	if err != nil || out == nil {
		return nil, err
	}
	got, perr := parseAnswer(h, out)
	if perr != nil {
		t.Fatal(perr)
	}
	return got, nil
}

const (
	tid  = "app-0_1"
	pid  = int64(4000)
	ep   = int16(3)
	grp  = "word-count" // shard 10 in the fake
	grp2 = "other"      // shard 5
)

func addOffsets(t *testing.T, r *txnRelay, group string, code int16) {
	t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = tid, pid, ep, group
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	resp.ErrorCode = code
	if _, err := exchange(t, r, req, resp, nil); err != nil {
		t.Fatal(err)
	}
}

func endTxn(commit bool) *kmsg.EndTxnRequest {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(4)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = tid, pid, ep, commit
	return req
}

func endTxnAnswer(code int16) *kmsg.EndTxnResponse {
	resp := kmsg.NewPtrEndTxnResponse()
	resp.ErrorCode = code
	return resp
}

func initPID(respPID int64, respEpoch int16, code int16) (*kmsg.InitProducerIDRequest, *kmsg.InitProducerIDResponse) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	id := tid
	req.TransactionalID = &id
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = respPID, respEpoch, code
	return req, resp
}

func wantMarks(t *testing.T, got []mark, want ...mark) {
	t.Helper()
	m := map[mark]int{}
	for _, g := range got {
		m[g]++
	}
	for _, w := range want {
		m[w]--
	}
	for k, n := range m {
		if n != 0 {
			t.Fatalf("markers %+v, want %+v (diff at %+v)", got, want, k)
		}
	}
}

// The EndTxn answer NONE is turned into a marker on every shard the transaction staged on, and
// the marker is written after the upstream decided and before the client gets "committed".
func TestEndTxnOutcomeIsAppliedBeforeTheAnswer(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			b := &fakeTxnBackend{}
			r := newTestRelay(t, b)
			addOffsets(t, r, grp, 0)
			r.stagedFor(tid, pid, ep, grp2) // a TxnOffsetCommit staged on a second shard
			if got := b.taken(); len(got) != 0 {
				t.Fatalf("markers before EndTxn: %+v", got)
			}
			resp, err := exchange(t, r, endTxn(commit), endTxnAnswer(0), func() {
				if got := b.taken(); len(got) != 0 {
					t.Errorf("markers written before the upstream decided: %+v", got)
				}
			})
			if err != nil || resp.(*kmsg.EndTxnResponse).ErrorCode != 0 {
				t.Fatalf("EndTxn: %v %v", resp, err)
			}
			wantMarks(t, b.taken(), mark{10, pid, ep, commit}, mark{5, pid, ep, commit})
			// The transaction is done: a second EndTxn through the relay writes nothing more.
			if _, err := exchange(t, r, endTxn(commit), endTxnAnswer(0), nil); err != nil {
				t.Fatal(err)
			}
			wantMarks(t, b.taken())
			if len(r.ids) != 0 {
				t.Fatalf("relay still holds %d ids after the outcome", len(r.ids))
			}
		})
	}
}

// An AddOffsetsToTxn the upstream refused names no shard, and error answers of EndTxn are no
// outcome: nothing is committed or aborted on them.
func TestUpstreamErrorAnswersAreNotMarkers(t *testing.T) {
	b := &fakeTxnBackend{states: map[string]upstream.TxnState{tid: {State: "Ongoing", ProducerID: pid, ProducerEpoch: ep}}}
	r := newTestRelay(t, b)
	addOffsets(t, r, grp2, kerr.CoordinatorNotAvailable.Code)
	addOffsets(t, r, grp, 0)
	for _, code := range []int16{kerr.ConcurrentTransactions.Code, kerr.InvalidTxnState.Code, kerr.ProducerFenced.Code, kerr.CoordinatorLoadInProgress.Code} {
		resp, err := exchange(t, r, endTxn(true), endTxnAnswer(code), nil)
		if err != nil || resp.(*kmsg.EndTxnResponse).ErrorCode != code {
			t.Fatalf("code %d not passed on: %v %v", code, resp, err)
		}
		if got := b.taken(); len(got) != 0 {
			t.Fatalf("error answer %d turned into markers %+v", code, got)
		}
	}
	// The upstream still shows the transaction ongoing; the retry's NONE commits it on the one
	// shard whose AddOffsetsToTxn succeeded.
	if _, err := exchange(t, r, endTxn(true), endTxnAnswer(0), nil); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b.taken(), mark{10, pid, ep, true})
}

// InitProducerId for an id with an open transaction means the upstream aborted it (fencing
// bumps the epoch): the offsets are aborted with the new epoch, so a zombie is fenced on the
// shard too, before the new producer gets its id.
func TestEpochBumpAbortsTheOpenTransaction(t *testing.T) {
	b := &fakeTxnBackend{}
	r := newTestRelay(t, b)
	addOffsets(t, r, grp, 0)
	req, resp := initPID(pid, ep+1, kerr.ConcurrentTransactions.Code)
	if _, err := exchange(t, r, req, resp, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.taken(); len(got) != 0 {
		t.Fatalf("a CONCURRENT_TRANSACTIONS InitProducerId aborted: %+v", got)
	}
	req, resp = initPID(pid, ep+2, 0)
	if _, err := exchange(t, r, req, resp, nil); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b.taken(), mark{10, pid, ep + 2, false})

	// A new producer id (epoch exhausted): the old one is aborted at its own epoch.
	addOffsets(t, r, grp, 0)
	req, resp = initPID(pid+1, 0, 0)
	if _, err := exchange(t, r, req, resp, nil); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b.taken(), mark{10, pid, ep, false})
}

// A marker that cannot be written withholds the answer (the connection closes); the client's
// retry applies the decided outcome first, and no later request is forwarded before it.
func TestFailedMarkerWithholdsTheAnswerAndIsAppliedOnRetry(t *testing.T) {
	b := &fakeTxnBackend{}
	r := newTestRelay(t, b)
	addOffsets(t, r, grp, 0)
	b.failMark = errors.New("shard loading")
	if resp, err := exchange(t, r, endTxn(true), endTxnAnswer(0), nil); err == nil {
		t.Fatalf("client got %v although the commit is not durable", resp)
	}
	b.failMark = nil
	forwarded := false
	// Whatever the client sends next, the commit is applied before it is forwarded.
	req, resp := initPID(pid, ep+1, 0)
	if _, err := exchange(t, r, req, resp, func() {
		forwarded = true
		wantMarks(t, b.taken(), mark{10, pid, ep, true})
	}); err != nil {
		t.Fatal(err)
	}
	if !forwarded {
		t.Fatal("InitProducerId was not forwarded")
	}
	if got := b.taken(); len(got) != 0 {
		t.Fatalf("the committed transaction was aborted afterwards: %+v", got)
	}
}

// An EndTxn whose answer never came is resolved with DescribeTransactions before the id's next
// request goes upstream; an upstream that cannot answer holds the request.
func TestLostEndTxnAnswerIsResolvedBeforeTheIdMovesOn(t *testing.T) {
	b := &fakeTxnBackend{states: map[string]upstream.TxnState{}}
	r := newTestRelay(t, b)
	addOffsets(t, r, grp, 0)
	if _, err := exchange(t, r, endTxn(true), nil, nil); err == nil {
		t.Fatal("a failed round trip answered")
	}
	b.descErr = errors.New("upstream unreachable")
	req, resp := initPID(pid, ep+1, 0)
	if _, err := exchange(t, r, req, resp, func() { t.Error("forwarded while the outcome is unknown") }); err == nil {
		t.Fatal("InitProducerId answered while the previous outcome is unknown")
	}
	b.descErr = nil
	b.states[tid] = upstream.TxnState{State: "CompleteCommit", ProducerID: pid, ProducerEpoch: ep}
	if _, err := exchange(t, r, req, resp, nil); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b.taken(), mark{10, pid, ep, true})
}

func TestResolveTable(t *testing.T) {
	st := func(state string, p int64, e int16) upstream.TxnState {
		return upstream.TxnState{State: state, ProducerID: p, ProducerEpoch: e}
	}
	for _, c := range []struct {
		st    upstream.TxnState
		found bool
		want  verdict
	}{
		{st("Ongoing", pid, ep), true, verdict{kind: verdictOpen}},
		{st("PrepareCommit", pid, ep), true, verdict{verdictCommit, ep}},
		{st("CompleteCommit", pid, ep), true, verdict{verdictCommit, ep}},
		{st("PrepareAbort", pid, ep), true, verdict{verdictAbort, ep}},
		{st("CompleteAbort", pid, ep+1), true, verdict{verdictAbort, ep + 1}}, // timeout abort fences
		{st("Empty", pid, ep), true, verdict{verdictAbort, ep}},
		// A later transaction of the id: its state says nothing of ours.
		{st("CompleteCommit", pid, ep+1), true, verdict{kind: verdictAmbiguous}},
		{st("Ongoing", pid, ep+1), true, verdict{kind: verdictAmbiguous}},
		{st("Empty", pid, ep+2), true, verdict{kind: verdictAmbiguous}},
		{st("CompleteCommit", pid+1, ep), true, verdict{kind: verdictAmbiguous}},
		{upstream.TxnState{}, false, verdict{kind: verdictAmbiguous}},
	} {
		if got := resolve(c.st, c.found, pid, ep); got != c.want {
			t.Errorf("%+v found=%v: %+v, want %+v", c.st, c.found, got, c.want)
		}
	}
}

// After a restart, staged offsets are resolved with the upstream before any transactional
// request is forwarded: ended transactions get their outcome, ongoing ones stay open and
// are ended by the client's EndTxn, and what cannot be told apart stays staged.
func TestRecoveryResolvesWhatARestartLeftStaged(t *testing.T) {
	b := &fakeTxnBackend{
		open: map[int64]OpenProducer{
			1: {Epoch: 5, Shards: []int32{2, 3}}, // committed upstream
			2: {Epoch: 0, Shards: []int32{4}},    // aborted by a timeout
			3: {Epoch: 7, Shards: []int32{6}},    // still ongoing
			4: {Epoch: 1, Shards: []int32{8}},    // the id moved on: ambiguous
			5: {Epoch: 1, Shards: []int32{9}},    // unknown upstream
		},
		idsOf: map[int64][]string{1: {"a"}, 2: {"b"}, 3: {tid}, 4: {"d"}},
		states: map[string]upstream.TxnState{
			"a": {State: "CompleteCommit", ProducerID: 1, ProducerEpoch: 5},
			"b": {State: "CompleteAbort", ProducerID: 2, ProducerEpoch: 1},
			tid: {State: "Ongoing", ProducerID: 3, ProducerEpoch: 7},
			"d": {State: "Ongoing", ProducerID: 4, ProducerEpoch: 2},
		},
	}
	r := newTxnRelay(b, zap.NewNop())
	held := make(chan error, 1)
	go func() {
		// Sent before recovery: it must wait for it.
		req := endTxn(true)
		req.ProducerID, req.ProducerEpoch = 3, 7
		_, err := exchange(t, r, req, endTxnAnswer(0), func() {
			select {
			case <-r.ready:
			default:
				t.Error("EndTxn forwarded before recovery resolved the staged transactions")
			}
		})
		held <- err
	}()
	r.recover(context.Background())
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b.taken(), mark{2, 1, 5, true}, mark{3, 1, 5, true}, mark{4, 2, 1, false}, mark{6, 3, 7, true})
	for _, c := range []struct {
		outcome, source string
		want            float64
	}{{"commit", "recovery", 1}, {"abort", "recovery", 1}, {"commit", "end_txn", 1}, {"ambiguous", "upstream_state", 2}} {
		var m dto.Metric
		if err := r.m.txnOutcomes.WithLabelValues(c.outcome, c.source).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != c.want {
			t.Errorf("coordinatord_gateway_txn_outcomes_total{outcome=%s,source=%s} = %v, want %v", c.outcome, c.source, got, c.want)
		}
	}
}

// stageAnswer is a local handler answering every TxnOffsetCommit partition with one code.
type stageAnswer int16

func (stageAnswer) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	return nil, false, false
}

func (c stageAnswer) Handle(_ context.Context, r *wire.Request) kmsg.Response {
	q := r.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := q.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range q.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, int16(c)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// A TxnOffsetCommit that staged names its shard for the outcome (even without an
// AddOffsetsToTxn seen, as after a restart between the two); a refused one is not remembered,
// so clients cannot make the relay hold ids no upstream transaction backs.
func TestTxnOffsetCommitNamesItsShardOnlyWhenStaged(t *testing.T) {
	b := &fakeTxnBackend{}
	r := newTestRelay(t, b)
	commit := func(group string, code int16) {
		q := kmsg.NewPtrTxnOffsetCommitRequest()
		q.SetVersion(4)
		q.TransactionalID, q.ProducerID, q.ProducerEpoch, q.Group = tid, pid, ep, group
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "in"
		rt.Partitions = append(rt.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
		q.Topics = append(q.Topics, rt)
		r.txnOffsetCommit(context.Background(), &wire.Request{Header: wire.Header{Key: 28, Version: 4}, Body: q}, stageAnswer(code))
	}
	commit(grp2, kerr.TransactionAbortable.Code)
	if len(r.ids) != 0 {
		t.Fatalf("a refused commit is remembered: %d ids", len(r.ids))
	}
	commit(grp, 0)
	if _, err := exchange(t, r, endTxn(true), endTxnAnswer(0), nil); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b.taken(), mark{10, pid, ep, true})
}

// A transaction the upstream aborted by its timeout while its producer is gone is found by the
// sweep once idle past its timeout; one still ongoing stays open, and an active one is not asked
// about.
func TestSweepResolvesIdleTransactions(t *testing.T) {
	b := &fakeTxnBackend{states: map[string]upstream.TxnState{tid: {State: "Ongoing", ProducerID: pid, ProducerEpoch: ep, TimeoutMs: 60000}}}
	r := newTestRelay(t, b)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	addOffsets(t, r, grp, 0)
	sweepAt := func(after time.Duration) {
		now = now.Add(after)
		r.sweep(context.Background())
	}

	sweepAt(sweepFirst / 2)
	if b.describe != 0 {
		t.Fatalf("a transaction active %v ago was described %d times", sweepFirst/2, b.describe)
	}
	sweepAt(sweepFirst)
	if b.describe != 1 || len(b.taken()) != 0 {
		t.Fatalf("an ongoing idle transaction: %d describes, want 1 and no marker", b.describe)
	}
	sweepAt(30 * time.Second) // within its 60 s timeout: not asked again
	if b.describe != 1 {
		t.Fatalf("asked again within the transaction's timeout: %d describes", b.describe)
	}
	b.states[tid] = upstream.TxnState{State: "CompleteAbort", ProducerID: pid, ProducerEpoch: ep + 1}
	sweepAt(time.Minute)
	wantMarks(t, b.taken(), mark{10, pid, ep + 1, false})
	if len(r.ids) != 0 {
		t.Fatalf("the relay still holds %d ids", len(r.ids))
	}
}

func seriesValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Recovery retries what KIP-1050 calls retriable (a loading transaction coordinator) and gets
// its answer; it gives up on a producer whose question the upstream refuses for good (our
// credentials lack DESCRIBE: invalid-configuration) instead of holding every transactional
// request forever: that producer's offsets stay staged (no marker), its own requests are held
// and not forwarded, everyone else's flow, and once the upstream answers, the producer's next
// request resolves it first and goes through.
func TestRecoveryRetriesRetriableErrorsAndGivesUpOnIncurableOnes(t *testing.T) {
	const denied = "denied-id"
	b := &fakeTxnBackend{
		open: map[int64]OpenProducer{
			1: {Epoch: 5, Shards: []int32{2}}, // committed upstream, asked through a flaky coordinator
			2: {Epoch: 4, Shards: []int32{3}}, // the upstream refuses to describe its id
		},
		idsOf: map[int64][]string{1: {"a"}, 2: {denied}},
		states: map[string]upstream.TxnState{
			"a":    {State: "CompleteCommit", ProducerID: 1, ProducerEpoch: 5},
			denied: {State: "CompleteAbort", ProducerID: 2, ProducerEpoch: 4},
		},
		idErr: map[string]error{denied: kerr.TransactionalIDAuthorizationFailed},
		gate:  denied, // a round after the give-up must not give up again
		flaky: 2,
	}
	r := newTxnRelay(b, zap.NewNop())
	var clockMu sync.Mutex
	clock := time.Unix(1000, 0)
	r.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	advance := func(d time.Duration) { clockMu.Lock(); clock = clock.Add(d); clockMu.Unlock() }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.recover(ctx)
	select {
	case <-r.ready:
	default:
		t.Fatal("recovery did not finish: an incurable error holds every transactional request")
	}
	wantMarks(t, b.taken(), mark{2, 1, 5, true})
	if got := seriesValue(t, r.m.txnGiveUps.WithLabelValues("invalid-configuration")); got != 1 {
		t.Fatalf("given-up counter = %v, want 1", got)
	}
	if got := seriesValue(t, r.m.txnGiveUps.WithLabelValues("retriable")); got != 0 {
		t.Fatalf("a retriable error was given up on (%v)", got)
	}

	// The set-aside producer's EndTxn is held, not forwarded, and its retries ask the upstream
	// at most once a second; another producer's goes through.
	req := endTxn(true)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = denied, 2, 4
	forwarded := false
	asked := func() int { b.mu.Lock(); defer b.mu.Unlock(); return b.describe }
	for i, before := 0, asked(); i < 3; i++ {
		if i == 2 {
			advance(stuckForcedEvery)
		}
		if _, err := exchange(t, r, req, endTxnAnswer(0), func() { forwarded = true }); !errors.Is(err, errRelay) || forwarded {
			t.Fatalf("EndTxn of a producer recovery could not resolve: err %v, forwarded %v; want it held", err, forwarded)
		}
		if want := before + i/2; asked() != want {
			t.Fatalf("try %d of the held EndTxn: the upstream was asked %d times, want %d", i, asked()-before, i/2)
		}
	}
	if got := seriesValue(t, r.m.txnGiveUps.WithLabelValues("invalid-configuration")); got != 1 {
		t.Fatalf("given-up counter = %v after further failed tries, want 1 (once per producer)", got)
	}
	if m := b.taken(); len(m) != 0 {
		t.Fatalf("markers %+v for a producer whose outcome is unknown", m)
	}
	other := endTxn(true)
	other.TransactionalID, other.ProducerID = "fresh", 9
	if _, err := exchange(t, r, other, endTxnAnswer(0), nil); err != nil {
		t.Fatalf("another producer's EndTxn: %v", err)
	}

	// The operator grants DESCRIBE: the producer's retry resolves the abort, then is forwarded.
	b.mu.Lock()
	delete(b.idErr, denied)
	b.mu.Unlock()
	advance(stuckForcedEvery)
	forwarded = false
	if _, err := exchange(t, r, req, endTxnAnswer(0), func() { forwarded = true }); err != nil || !forwarded {
		t.Fatalf("EndTxn after the grant: err %v, forwarded %v", err, forwarded)
	}
	wantMarks(t, b.taken(), mark{3, 2, 4, false})
	if r.isStuck(2) {
		t.Fatal("the producer is still set aside after its resolution")
	}
}

// A shard handed to this node after its start brings the previous owner's staged transactions:
// once it is loaded, the relay resolves them from the upstream as a restart would (an ended one
// gets its marker, an ongoing one is recorded so that the EndTxn seen here marks it), and only
// those of the gained shards. A try that cannot read the shards keeps them for the next one.
func TestGainedShardsStagedTransactionsAreRecovered(t *testing.T) {
	b := &fakeTxnBackend{}
	r := newTestRelay(t, b)
	g := &Gateway{relay: r}
	b.mu.Lock()
	b.open = map[int64]OpenProducer{
		1: {Epoch: 5, Shards: []int32{2}}, // committed upstream while its owner was lost
		2: {Epoch: 0, Shards: []int32{4}}, // still ongoing
		3: {Epoch: 1, Shards: []int32{7}}, // on a shard this node did not gain
	}
	b.idsOf = map[int64][]string{1: {"a"}, 2: {tid}, 3: {"c"}}
	b.states = map[string]upstream.TxnState{
		"a": {State: "CompleteCommit", ProducerID: 1, ProducerEpoch: 5},
		tid: {State: "Ongoing", ProducerID: 2, ProducerEpoch: 0},
		"c": {State: "CompleteAbort", ProducerID: 3, ProducerEpoch: 1},
	}
	b.openErr = errors.New("shard 2: loading")
	b.mu.Unlock()

	var wg sync.WaitGroup
	for _, sh := range []int32{2, 4, 2} {
		wg.Go(func() { g.TxnShardLoaded(sh) }) // on shard goroutines, concurrently
	}
	wg.Wait()
	select {
	case <-r.kick:
	default:
		t.Fatal("no wake-up for the recovery goroutine")
	}
	r.recoverGained(context.Background())
	wantMarks(t, b.taken())
	b.mu.Lock()
	b.openErr = nil
	b.mu.Unlock()
	r.recoverGained(context.Background()) // the sweep tick's retry
	wantMarks(t, b.taken(), mark{2, 1, 5, true})
	if got := seriesValue(t, r.m.txnOutcomes.WithLabelValues("commit", "shard_load")); got != 1 {
		t.Fatalf("coordinatord_gateway_txn_outcomes_total{commit,shard_load} = %v, want 1", got)
	}
	r.recoverGained(context.Background()) // nothing gained since: nothing asked again
	wantMarks(t, b.taken())

	// The ongoing transaction is known now: its EndTxn through this node marks its shard.
	req := endTxn(false)
	req.ProducerID, req.ProducerEpoch = 2, 0
	if _, err := exchange(t, r, req, endTxnAnswer(0), nil); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b.taken(), mark{4, 2, 0, false})
}

// Another node's settle request: this node decides and applies the producer's open transaction
// at that epoch (durably, before answering), and answers for the shards it serves except a
// gained one not yet recovered; a transaction at another epoch is not its to decide, and a
// producer set aside makes it answer for nothing.
func TestPeerOutcomeSettlesTheRecordAndAnswersForKnownShards(t *testing.T) {
	b := &fakeTxnBackend{serving: []int32{1, 2, 3}}
	r := newTestRelay(t, b)
	g := &Gateway{relay: r}
	r.stagedFor(tid, pid, ep, "group-a")   // shard 7 (fakeTxnBackend.ShardOf: the length)
	r.stagedFor("other", 99, 3, "group-b") // another producer
	g.TxnShardLoaded(3)                    // gained, not yet recovered

	got := g.TxnPeerOutcome(context.Background(), pid, ep, true)
	wantMarks(t, b.taken(), mark{7, pid, ep, true})
	if len(got) != 2 || got[1] != 0 || got[2] != 0 {
		t.Fatalf("answered for %v, want shards 1 and 2", got)
	}
	if got := g.TxnPeerOutcome(context.Background(), 99, 4, true); len(got) != 2 {
		t.Fatalf("answered for %v, want shards 1 and 2", got)
	}
	wantMarks(t, b.taken()) // the record is at epoch 3: not decided by a marker for epoch 4
	if got := seriesValue(t, r.m.txnOutcomes.WithLabelValues("commit", "peer")); got != 1 {
		t.Fatalf("coordinatord_gateway_txn_outcomes_total{commit,peer} = %v, want 1", got)
	}
	r.recoverGained(context.Background())
	if got := g.TxnPeerOutcome(context.Background(), pid, ep, false); len(got) != 3 {
		t.Fatalf("after the gained shard's recovery: answered for %v, want shards 1 to 3", got)
	}
	r.mu.Lock()
	r.stuck[pid] = &stuckProducer{}
	r.mu.Unlock()
	if got := g.TxnPeerOutcome(context.Background(), pid, ep, false); len(got) != 0 {
		t.Fatalf("for a producer set aside: answered for %v, want nothing", got)
	}
}

// An EndTxn answered NONE is released only once every shard's owner settled the outcome
// (Settle): when some shard is not answered for, the client's connection is closed without the
// answer, and its retry, once the shards are answered for, gets it.
func TestEndTxnAnswerWaitsForEveryShardsOwner(t *testing.T) {
	b := &fakeTxnBackend{serving: []int32{0, 1}}
	r := newTestRelay(t, b)
	var asked []map[int32]bool
	fail := true
	b.settle = func(gotPID int64, epoch int16, commit bool, covered map[int32]bool) error {
		if gotPID != pid || epoch != ep || !commit {
			t.Errorf("settle %d/%d commit=%v", gotPID, epoch, commit)
		}
		asked = append(asked, covered)
		if fail {
			return errors.New("no node answered for shard 5")
		}
		return nil
	}
	if _, err := exchange(t, r, endTxn(true), endTxnAnswer(0), nil); !errors.Is(err, errRelay) {
		t.Fatalf("answer released with shard 5 unsettled: %v", err)
	}
	fail = false
	if _, err := exchange(t, r, endTxn(true), endTxnAnswer(0), nil); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || !asked[0][0] || !asked[0][1] || len(asked[0]) != 2 {
		t.Fatalf("settle asked %v, want twice with this node's shards 0 and 1", asked)
	}
	// A failed EndTxn answer is no outcome: nothing to settle.
	if _, err := exchange(t, r, endTxn(true), endTxnAnswer(kerr.ConcurrentTransactions.Code), nil); err != nil || len(asked) != 2 {
		t.Fatalf("an error answer: %v, settle asked %d times", err, len(asked))
	}
}

// Before an InitProducerId is forwarded with several nodes, the id's last transaction as the
// upstream shows it is settled everywhere: an abort at the epoch shown and the one before (a
// fence bumps it), a commit at its epoch; this node's own record of it takes that outcome
// rather than the abort an InitProducerId answer is otherwise read as. An upstream that cannot
// answer holds the InitProducerId.
func TestInitProducerIDSettlesTheLastTransactionEverywhereFirst(t *testing.T) {
	type settled struct {
		epoch  int16
		commit bool
	}
	var got []settled
	forwarded := false
	b := &fakeTxnBackend{states: map[string]upstream.TxnState{}}
	b.settle = func(gotPID int64, epoch int16, commit bool, _ map[int32]bool) error {
		if gotPID != pid {
			t.Errorf("settle for producer %d", gotPID)
		}
		if forwarded {
			t.Error("InitProducerId forwarded before the settle")
		}
		got = append(got, settled{epoch, commit})
		return nil
	}
	r := newTestRelay(t, b)
	seen := func() { forwarded = true }

	b.states[tid] = upstream.TxnState{State: "CompleteAbort", ProducerID: pid, ProducerEpoch: ep + 1}
	req, resp := initPID(pid, ep+2, 0)
	if _, err := exchange(t, r, req, resp, seen); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (settled{ep + 1, false}) || got[1] != (settled{ep, false}) {
		t.Fatalf("settled %v, want aborts at epochs %d and %d", got, ep+1, ep)
	}

	// Staged here, committed upstream through another node: committed here, not aborted.
	got, forwarded = nil, false
	r.stagedFor(tid, pid, ep, "group-a")
	b.states[tid] = upstream.TxnState{State: "CompleteCommit", ProducerID: pid, ProducerEpoch: ep}
	req, resp = initPID(pid, ep+1, 0)
	if _, err := exchange(t, r, req, resp, seen); err != nil {
		t.Fatal(err)
	}
	wantMarks(t, b.taken(), mark{7, pid, ep, true})
	if len(got) != 1 || got[0] != (settled{ep, true}) {
		t.Fatalf("settled %v, want a commit at epoch %d", got, ep)
	}

	got, forwarded = nil, false
	b.mu.Lock()
	b.descErr = errors.New("upstream unreachable")
	b.mu.Unlock()
	req, resp = initPID(pid, ep+1, 0)
	if _, err := exchange(t, r, req, resp, seen); !errors.Is(err, errRelay) || forwarded {
		t.Fatalf("with the upstream unreachable: %v, forwarded=%v; want it held", err, forwarded)
	}
}
