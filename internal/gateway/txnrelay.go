package gateway

// The marker relay (docs/transactions.md, "Gateway mode: the marker relay on the forwarded
// path"). Every transactional request of a client passes through the gateway, so the outcome of
// each transaction is learned where Kafka's transaction coordinator decides it: the EndTxn answer
// (commit or abort), and an InitProducerId answer, which under transaction version 1 means the
// id's open transaction was aborted. The outcome is applied to the producer's staged offsets on
// every shard it staged on (WriteTxnMarkers semantics) and made durable before the answer is
// handed to the client. What the gateway could not see (an EndTxn without a NONE answer, a
// restart) is resolved with DescribeTransactions before any request that could move the id's
// history on is forwarded, so a past outcome is never read from a later transaction.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/pkg/kerrclass"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// TxnBackend is what the relay needs from the rest of coordinatord.
type TxnBackend interface {
	// ShardOf is the shard (coordinatord's __consumer_offsets partition) of a group.
	ShardOf(group string) int32
	// Mark applies an outcome to a producer's staged offsets on one shard and returns once it
	// is durable; code is the marker's answer (WriteTxnMarkers semantics).
	Mark(ctx context.Context, shard int32, producerID int64, epoch int16, commit bool) (code int16, err error)
	// OpenProducers lists every producer with staged offsets on the given shards (nil: every
	// shard this node holds): its epoch and the shards.
	OpenProducers(ctx context.Context, shards []int32) (map[int64]OpenProducer, error)
	// Describe is the upstream's current transaction of an id; found=false for an unknown id.
	Describe(ctx context.Context, txnID string) (st upstream.TxnState, found bool, err error)
	// TxnIDsOf lists the transactional ids the upstream maps to a producer id.
	TxnIDsOf(ctx context.Context, producerID int64) ([]string, error)
	// ServingShards are the shards this node owns and has loaded.
	ServingShards() []int32
	// Shared says whether other nodes may hold staged offsets (log.backend=kafka).
	Shared() bool
	// Settle has every other node of the cluster (log.backend=kafka) settle a producer's
	// transaction wherever it holds staged offsets of it (TxnPeerOutcome there), and returns nil
	// once every shard is answered for, by covered() (this node's) or another node's answer;
	// without log.backend=kafka it returns nil at once.
	Settle(ctx context.Context, producerID int64, epoch int16, commit bool, covered func() map[int32]bool) error
}

// OpenProducer is a producer with staged offsets found on the shards.
type OpenProducer struct {
	Epoch  int16
	Shards []int32
}

// relayKeys are the forwarded APIs the relay observes or holds: InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn. Under transaction version 1 (the version the
// gateway advertises, apiversions.go) no transaction begins without AddPartitionsToTxn or
// AddOffsetsToTxn, so a transactional Produce need not be held.
var relayKeys = map[int16]bool{22: true, 24: true, 25: true, 26: true}

// txnPhase is what the relay knows of an id's transaction with staged offsets.
type txnPhase int8

const (
	phaseOpen       txnPhase = iota // ongoing as far as the relay knows
	phaseUnresolved                 // an EndTxn went upstream without a NONE answer: ask the upstream
	phaseDecided                    // the outcome is known but not yet applied everywhere
)

type openTxn struct {
	pid    int64
	epoch  int16
	shards map[int32]bool
	phase  txnPhase
	// commit and markEpoch are the decided outcome (phaseDecided).
	commit    bool
	markEpoch int16
	source    txnSource // where the outcome was learned, for the metric
	// touched is when the relay last saw the transaction or asked the upstream about it;
	// timeout is the transaction's timeout once the upstream named it (sweep).
	touched time.Time
	timeout time.Duration
}

// txnIDState serializes the relay's work for one transactional id: a request is forwarded and its
// outcome applied before the next one of the id is forwarded, so a fencing InitProducerId can
// never be read as the abort of a transaction whose EndTxn commit is still being applied.
type txnIDState struct {
	sem  chan struct{}
	open *openTxn // guarded by txnRelay.mu
}

type txnRelay struct {
	b     TxnBackend
	lg    *zap.Logger
	m     *Metrics
	now   func() time.Time
	ready chan struct{} // closed when recovery has resolved what a restart left staged

	mu  sync.Mutex
	ids map[string]*txnIDState
	// stuck are producers recovery had to set aside (giveUp), by producer id.
	stuck map[int64]*stuckProducer
	// gained are shards this node loaded after its start (log.backend=kafka: a hand-over gave
	// them to it) whose staged transactions are not yet recovered, with the number of their
	// load (a shard loaded again while it is recovered needs another round); at most one entry
	// per shard.
	gained    map[int32]uint64
	gainedSeq uint64
	kick      chan struct{} // a shard was added to gained
}

func newTxnRelay(b TxnBackend, lg *zap.Logger) *txnRelay {
	return &txnRelay{b: b, lg: lg, m: NewMetrics(nil), now: time.Now, ready: make(chan struct{}), ids: map[string]*txnIDState{}, stuck: map[int64]*stuckProducer{},
		gained: map[int32]uint64{}, kick: make(chan struct{}, 1)}
}

// SetTxnBackend turns the marker relay on; call before any broker port serves. Until Recover
// has run, relayed requests wait.
func (g *Gateway) SetTxnBackend(b TxnBackend) {
	g.relay = newTxnRelay(b, g.lg.With(zap.String("part", "txn-relay")))
	g.relay.m = g.opts.Metrics
}

// RecoverTxns resolves the staged offsets a previous run left, retrying while the upstream
// cannot answer; relayed requests are held until it succeeds (a shutdown gives up on it, and
// they stay held).
func (g *Gateway) RecoverTxns(ctx context.Context) {
	if g.relay == nil {
		return
	}
	g.relay.recover(ctx)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.relay.kick:
			g.relay.recoverGained(ctx)
		case <-t.C:
			g.relay.sweep(ctx)
			g.relay.retryStuck(ctx)
			g.relay.recoverGained(ctx) // what a failed try put back
		}
	}
}

// TxnShardLoaded tells the relay that this node finished loading a shard after its start (a
// hand-over gave it the shard, log.backend=kafka): the transactions staged there by the previous
// owner are resolved from the upstream as at a restart, by the RecoverTxns goroutine. It does not
// block (it is called on the shard's goroutine).
func (g *Gateway) TxnShardLoaded(shard int32) {
	if g.relay == nil {
		return
	}
	g.relay.mu.Lock()
	g.relay.gainedSeq++
	g.relay.gained[shard] = g.relay.gainedSeq
	g.relay.mu.Unlock()
	select {
	case g.relay.kick <- struct{}{}:
	default:
	}
}

// settleBeforeInit is the barrier for an InitProducerId across nodes: the id's previous
// transaction may have staged offsets on shards of other nodes, seen by another node's relay or
// by none (its requests went through a node that died). Kafka answers an InitProducerId for an
// ongoing transaction CONCURRENT_TRANSACTIONS while it aborts it, so the NONE answer that starts
// the new producer session comes only once the upstream shows that transaction ended, which is
// what is read here before each forward: an ended transaction is settled on every shard's owner
// before the id can move on (it cannot be read upstream any more once the new session began).
// Settling twice is harmless (a settled transaction leaves nothing staged).
func (r *txnRelay) settleBeforeInit(ctx context.Context, txnID string, s *txnIDState) error {
	if !r.b.Shared() {
		return nil // this node's relay saw the id's requests, and holds them (settle)
	}
	st, found, err := r.b.Describe(ctx, txnID)
	if err != nil {
		r.lg.Warn("cannot read an id's last transaction before its InitProducerId; holding it", zap.String("transactional_id", txnID), zap.Error(err))
		return fmt.Errorf("%w: %v", errRelay, err)
	}
	if !found {
		return nil
	}
	covered := func() map[int32]bool { return r.coveredShards(st.ProducerID) }
	settle := func(epoch int16, commit bool) error {
		// This node's own record of the transaction (its TxnOffsetCommit came here while its
		// EndTxn went elsewhere) takes the upstream's outcome too, rather than the abort an
		// InitProducerId answer would otherwise be read as.
		r.mu.Lock()
		o := s.open
		mine := o != nil && o.pid == st.ProducerID && o.epoch == epoch
		r.mu.Unlock()
		if mine {
			if err := r.decide(ctx, txnID, s, st.ProducerID, commit, epoch, fromUpstreamState); err != nil {
				return err
			}
		}
		if err := r.b.Settle(ctx, st.ProducerID, epoch, commit, covered); err != nil {
			r.lg.Warn("not every shard's owner settled an id's last transaction; its InitProducerId is held",
				zap.String("transactional_id", txnID), zap.Int64("producer_id", st.ProducerID), zap.Int16("epoch", epoch),
				zap.Bool("commit", commit), zap.Error(err))
			return fmt.Errorf("%w: %v", errRelay, err)
		}
		return nil
	}
	switch st.State {
	case "PrepareCommit", "CompleteCommit":
		return settle(st.ProducerEpoch, true)
	case "PrepareAbort", "CompleteAbort", "PrepareEpochFence":
		if err := settle(st.ProducerEpoch, false); err != nil {
			return err
		}
		if st.ProducerEpoch > 0 {
			// A timeout or a fence aborts with the epoch bumped once (the table in
			// docs/transactions.md): offsets staged at the epoch before are that transaction's.
			return settle(st.ProducerEpoch-1, false)
		}
	}
	return nil
}

// peerLockWait bounds how long another node's settle request waits for a request of the same
// id in flight here (two nodes each waiting for the other's answer give up after it).
const peerLockWait = 2 * time.Second

// TxnPeerOutcome applies an outcome another node learned from an EndTxn answer to this node's
// records of the producer (Settle there): each open transaction of the producer at that epoch is
// decided and applied to its shards, durably. It returns the shards this node answers for: those
// it serves whose staged transactions are all known to the relay (a gained shard not yet
// recovered is not), none when something could not be applied or the producer is set aside.
func (g *Gateway) TxnPeerOutcome(ctx context.Context, pid int64, epoch int16, commit bool) map[int32]int16 {
	r := g.relay
	if r == nil {
		return nil
	}
	select {
	case <-r.ready:
	default:
		return nil // recovery has not read the shards yet
	}
	r.mu.Lock()
	var ids []string
	for id, s := range r.ids {
		if s.open != nil && s.open.pid == pid {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	for _, id := range ids {
		lctx, cancel := context.WithTimeout(ctx, peerLockWait)
		s, err := r.lock(lctx, id)
		cancel()
		if err != nil {
			return nil
		}
		r.mu.Lock()
		match := s.open != nil && s.open.pid == pid && s.open.epoch == epoch
		r.mu.Unlock()
		if match {
			err = r.decide(ctx, id, s, pid, commit, epoch, fromPeer)
		}
		r.release(id, s)
		if err != nil {
			return nil
		}
	}
	out := map[int32]int16{}
	for sh := range r.coveredShards(pid) {
		out[sh] = 0
	}
	return out
}

// coveredShards are the shards whose staged transactions of pid this node's relay knows: those
// it serves, less the gained ones not yet recovered; none while pid is set aside.
func (r *txnRelay) coveredShards(pid int64) map[int32]bool {
	serving := r.b.ServingShards()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int32]bool{}
	if r.stuck[pid] != nil {
		return out
	}
	for _, sh := range serving {
		if _, pending := r.gained[sh]; !pending {
			out[sh] = true
		}
	}
	return out
}

// recoverGained resolves the staged transactions of the shards gained since the last call.
// Nothing the previous owner's relay knew survives the hand-over, but the staged offsets do
// (they are in the shard's log), so this is a restart's recovery limited to those shards: a
// transaction the upstream shows ended gets its marker here, an ongoing one is recorded as open
// (the sweep asks about it again when it stays idle, and the marker of whichever node sees its
// EndTxn settles it first). A failed try puts the shards back for the next sweep tick.
func (r *txnRelay) recoverGained(ctx context.Context) {
	r.mu.Lock()
	if len(r.gained) == 0 {
		r.mu.Unlock()
		return
	}
	// They stay in gained until they are recovered: until then this node does not answer for
	// them when another node settles an outcome (TxnPeerOutcome).
	shards := make([]int32, 0, len(r.gained))
	seqs := make(map[int32]uint64, len(r.gained))
	for sh, seq := range r.gained {
		shards = append(shards, sh)
		seqs[sh] = seq
	}
	r.mu.Unlock()
	putBack := func(err error) {
		r.lg.Warn("cannot resolve the staged transactions of shards this node gained yet; retrying", zap.Int32s("shards", shards), zap.Error(err))
	}
	open, err := r.b.OpenProducers(ctx, shards)
	if err != nil {
		putBack(err)
		return
	}
	resolved, retry := r.recoverProducers(ctx, open, fromShardLoad)
	if retry != nil {
		putBack(retry)
		return
	}
	r.mu.Lock()
	for sh, seq := range seqs {
		if r.gained[sh] == seq {
			delete(r.gained, sh)
		}
	}
	r.mu.Unlock()
	r.lg.Info("staged transactions of shards this node gained recovered", zap.Int32s("shards", shards),
		zap.Int("producers", len(open)), zap.Int("resolved", resolved))
}

// A transaction the upstream aborts by its timeout while its producer is gone shows on no
// forwarded path: the sweep asks the upstream about open transactions idle for sweepFirst, and
// then each time they stay idle for their timeout (which the upstream's answer names) plus
// sweepGrace, the period of Kafka's timed-out transaction check
// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
const (
	sweepEvery = 5 * time.Second
	sweepFirst = 15 * time.Second
	sweepGrace = 10 * time.Second
)

func (r *txnRelay) sweep(ctx context.Context) {
	now := r.now()
	r.mu.Lock()
	var due []string
	for id, s := range r.ids {
		if s.open == nil {
			continue
		}
		idle := sweepFirst
		if s.open.timeout > 0 {
			idle = s.open.timeout + sweepGrace
		}
		if now.Sub(s.open.touched) > idle {
			due = append(due, id)
		}
	}
	r.mu.Unlock()
	for _, id := range due {
		s := r.id(id)
		select {
		case s.sem <- struct{}{}:
		default:
			continue // a request of the id is in flight: it is not idle
		}
		r.mu.Lock()
		o := s.open
		current := r.ids[id] == s
		r.mu.Unlock()
		if current && o != nil {
			r.mu.Lock()
			if o.phase == phaseOpen {
				o.phase = phaseUnresolved
			}
			r.mu.Unlock()
			// On an error the phase stays unresolved or decided: the id's next request, or the
			// next sweep, tries again.
			_ = r.settle(ctx, id, s)
			r.mu.Lock()
			if s.open == o {
				o.touched = now
			}
			r.mu.Unlock()
		}
		r.release(id, s)
	}
}

func (r *txnRelay) id(txnID string) *txnIDState {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.ids[txnID]
	if s == nil {
		s = &txnIDState{sem: make(chan struct{}, 1)}
		r.ids[txnID] = s
	}
	return s
}

// release unlocks an id and forgets it when nothing of it is open: the map holds only ids with
// staged offsets or a request in flight.
func (r *txnRelay) release(txnID string, s *txnIDState) {
	r.mu.Lock()
	if s.open == nil && r.ids[txnID] == s {
		delete(r.ids, txnID)
	}
	r.mu.Unlock()
	<-s.sem
}

func (r *txnRelay) lock(ctx context.Context, txnID string) (*txnIDState, error) {
	for {
		s := r.id(txnID)
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		r.mu.Lock()
		current := r.ids[txnID] == s
		r.mu.Unlock()
		if current {
			return s, nil
		}
		<-s.sem // forgotten by a release between id() and the lock: take the new one
	}
}

// txnOffsetCommit serves a TxnOffsetCommit and records the shard it staged on: the relay must
// know every shard holding the transaction's offsets when its outcome passes by. Only a commit
// that staged something is recorded, so what a client can make the relay hold is bounded by
// the transactions the upstream verified (a crash in between is covered by recovery, which
// reads the shards).
func (r *txnRelay) txnOffsetCommit(ctx context.Context, req *wire.Request, local wire.Handler) kmsg.Response {
	resp := local.Handle(ctx, req)
	q := req.Body.(*kmsg.TxnOffsetCommitRequest)
	if a, ok := resp.(*kmsg.TxnOffsetCommitResponse); ok {
		for _, t := range a.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					r.stagedFor(q.TransactionalID, q.ProducerID, q.ProducerEpoch, q.Group)
					return resp
				}
			}
		}
	}
	return resp
}

// stagedFor records the shard a producer staged offsets on.
func (r *txnRelay) stagedFor(txnID string, pid int64, epoch int16, group string) {
	shard := r.b.ShardOf(group)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.ids[txnID]
	if s == nil {
		s = &txnIDState{sem: make(chan struct{}, 1)}
		r.ids[txnID] = s
	}
	r.addLocked(s, txnID, pid, epoch, shard)
}

func (r *txnRelay) addLocked(s *txnIDState, txnID string, pid int64, epoch int16, shard int32) {
	if s.open != nil && s.open.pid != pid {
		// Only a producer the gateway never saw re-initialize can do this (a client that
		// bypasses this coordinatord, docs/transactions.md): the older one's outcome cannot be
		// learned here any more.
		r.lg.Error("a transactional id changed producer id without an InitProducerId through this gateway; the older producer's staged offsets stay until an operator aborts them (WriteTxnMarkers ABORT, docs/transactions.md)",
			zap.String("transactional_id", txnID), zap.Int64("old_producer_id", s.open.pid), zap.Int64("producer_id", pid))
		s.open = nil
	}
	if s.open == nil {
		s.open = &openTxn{pid: pid, epoch: epoch, shards: map[int32]bool{}}
	}
	s.open.touched = r.now()
	if epoch > s.open.epoch {
		s.open.epoch = epoch
	}
	s.open.shards[shard] = true
}

// relayedRequest is what the relay reads from a forwarded request.
type relayedRequest struct {
	txnID  string
	pid    int64
	epoch  int16
	group  string // AddOffsetsToTxn
	commit bool   // EndTxn
}

func parseRelayed(h wire.Header, frame []byte) (relayedRequest, bool) {
	_, rest, err := wire.ParseHeader(frame)
	if err != nil {
		return relayedRequest{}, false
	}
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		if rest, err = wire.SkipHeaderTags(rest); err != nil {
			return relayedRequest{}, false
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return relayedRequest{}, false
	}
	switch q := req.(type) {
	case *kmsg.InitProducerIDRequest:
		if q.TransactionalID == nil {
			return relayedRequest{}, false // idempotent producer: no transaction
		}
		return relayedRequest{txnID: *q.TransactionalID, pid: q.ProducerID, epoch: q.ProducerEpoch}, true
	case *kmsg.AddPartitionsToTxnRequest:
		if h.Version >= 4 {
			return relayedRequest{}, false // the broker-only form is never forwarded (forwardMax)
		}
		return relayedRequest{txnID: q.TransactionalID, pid: q.ProducerID, epoch: q.ProducerEpoch}, true
	case *kmsg.AddOffsetsToTxnRequest:
		return relayedRequest{txnID: q.TransactionalID, pid: q.ProducerID, epoch: q.ProducerEpoch, group: q.Group}, true
	case *kmsg.EndTxnRequest:
		return relayedRequest{txnID: q.TransactionalID, pid: q.ProducerID, epoch: q.ProducerEpoch, commit: q.Commit}, true
	}
	return relayedRequest{}, false
}

// parseAnswer decodes a forwarded answer frame (size prefix included).
func parseAnswer(h wire.Header, out []byte) (kmsg.Response, error) {
	resp := kmsg.ResponseForKey(h.Key)
	resp.SetVersion(h.Version)
	bodyAt := 8
	if resp.IsFlexible() {
		var err error
		if bodyAt, err = headerEnd(out); err != nil {
			return nil, err
		}
	}
	if len(out) < bodyAt {
		return nil, errors.New("short answer frame")
	}
	if err := resp.ReadFrom(out[bodyAt:]); err != nil {
		return nil, err
	}
	return resp, nil
}

// errRelay closes the client's connection without the answer: the client retries, and the
// retry finds the outcome applied or resolves it first.
var errRelay = errors.New("transaction outcome not yet applied to the staged offsets")

// around runs a forwarded round trip, holding and observing the transactional ones.
func (r *txnRelay) around(ctx context.Context, h wire.Header, frame []byte, rt func() ([]byte, error)) ([]byte, error) {
	if r == nil || !relayKeys[h.Key] {
		return rt()
	}
	q, ok := parseRelayed(h, frame)
	if !ok || q.txnID == "" {
		return rt()
	}
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if q.pid >= 0 && r.isStuck(q.pid) {
		// Forwarding it could start a later transaction of the producer, whose marker would
		// also settle the offsets recovery could not resolve: resolve them first or hold it.
		if err := r.tryStuck(ctx, q.pid, true); err != nil {
			return nil, err
		}
	}
	s, err := r.lock(ctx, q.txnID)
	if err != nil {
		return nil, err
	}
	defer r.release(q.txnID, s)
	if err := r.settle(ctx, q.txnID, s); err != nil {
		return nil, err
	}
	if h.Key == 22 {
		if err := r.settleBeforeInit(ctx, q.txnID, s); err != nil {
			return nil, err
		}
	}
	out, err := rt()
	if err != nil || out == nil {
		if h.Key == 26 {
			r.setPhase(s, q.pid, phaseUnresolved)
		}
		return out, err
	}
	resp, perr := parseAnswer(h, out)
	if perr != nil {
		if h.Key == 26 {
			r.setPhase(s, q.pid, phaseUnresolved)
		}
		return out, nil // not ours to refuse; the next relayed request of the id resolves it
	}
	switch a := resp.(type) {
	case *kmsg.AddOffsetsToTxnResponse:
		if a.ErrorCode == 0 {
			r.mu.Lock()
			r.addLocked(s, q.txnID, q.pid, q.epoch, r.b.ShardOf(q.group))
			r.mu.Unlock()
		}
	case *kmsg.EndTxnResponse:
		if a.ErrorCode != 0 {
			// Not an outcome: an error answer may come from a transaction that ended anyway
			// (a timeout abort, a retry after a lost answer). Ask the upstream before the id
			// moves on.
			r.setPhase(s, q.pid, phaseUnresolved)
			break
		}
		epoch := q.epoch
		if h.Version >= 5 && a.ProducerEpoch > epoch {
			epoch = a.ProducerEpoch // transaction version 2 bumps the epoch at each end
		}
		if err := r.decide(ctx, q.txnID, s, q.pid, q.commit, epoch, fromEndTxn); err != nil {
			putBuffer(out)
			return nil, err
		}
		// This node may not have seen every request of the transaction (the producer's
		// coordinator lookup can land on another node after a disconnect, or a node that saw
		// its AddOffsetsToTxn died): the owners of the shards settle what they hold of it
		// before the client is told, so no later transaction of the id can mix with it.
		if err := r.b.Settle(ctx, q.pid, epoch, q.commit, func() map[int32]bool { return r.coveredShards(q.pid) }); err != nil {
			r.lg.Warn("not every shard's owner settled a transaction's outcome; the client's answer is held and its retry settles it",
				zap.String("transactional_id", q.txnID), zap.Int64("producer_id", q.pid), zap.Bool("commit", q.commit), zap.Error(err))
			putBuffer(out)
			return nil, fmt.Errorf("%w: %v", errRelay, err)
		}
	case *kmsg.InitProducerIDResponse:
		if a.ErrorCode != 0 {
			break
		}
		r.mu.Lock()
		o := s.open
		r.mu.Unlock()
		if o == nil {
			break
		}
		// The id's open transaction was aborted upstream before this answer could be NONE (a
		// timeout or this InitProducerId's fencing): settle() resolved any EndTxn in flight, so
		// no commit can hide here.
		epoch := o.epoch
		if a.ProducerID == o.pid && a.ProducerEpoch > epoch {
			epoch = a.ProducerEpoch
		}
		if err := r.decide(ctx, q.txnID, s, o.pid, false, epoch, fromInitProducerID); err != nil {
			putBuffer(out)
			return nil, err
		}
	}
	return out, nil
}

func (r *txnRelay) setPhase(s *txnIDState, pid int64, p txnPhase) {
	r.mu.Lock()
	if s.open != nil && s.open.pid == pid && s.open.phase == phaseOpen {
		s.open.phase = p
	}
	r.mu.Unlock()
}

// decide records an outcome and applies it; on failure it stays decided, and the id's next
// relayed request applies it again before anything else.
func (r *txnRelay) decide(ctx context.Context, txnID string, s *txnIDState, pid int64, commit bool, epoch int16, source txnSource) error {
	r.mu.Lock()
	o := s.open
	if o == nil || o.pid != pid {
		r.mu.Unlock()
		return nil // nothing staged through this gateway for that producer
	}
	o.phase, o.commit, o.markEpoch, o.source = phaseDecided, commit, epoch, source
	r.mu.Unlock()
	return r.apply(ctx, txnID, s)
}

// apply writes a decided outcome on every shard of the transaction, durably.
func (r *txnRelay) apply(ctx context.Context, txnID string, s *txnIDState) error {
	r.mu.Lock()
	o := s.open
	shards := make([]int32, 0, len(o.shards))
	for sh := range o.shards {
		shards = append(shards, sh)
	}
	pid, epoch, commit, source := o.pid, o.markEpoch, o.commit, o.source
	r.mu.Unlock()
	for _, sh := range shards {
		code, err := r.b.Mark(ctx, sh, pid, epoch, commit)
		if err != nil {
			r.lg.Warn("could not apply a transaction's outcome to a shard; the client's answer is held and its retry applies it",
				zap.String("transactional_id", txnID), zap.Int64("producer_id", pid), zap.Int32("shard", sh), zap.Bool("commit", commit), zap.Error(err))
			return fmt.Errorf("%w: %v", errRelay, err)
		}
		if code != 0 {
			// Only a marker with a later epoch (an operator's abort, a newer producer) makes a
			// shard refuse: it has already dropped what this one would change.
			r.lg.Warn("a shard refused a relayed transaction marker", zap.String("transactional_id", txnID),
				zap.Int64("producer_id", pid), zap.Int32("shard", sh), zap.Error(kerr.ErrorForCode(code)))
		}
	}
	r.mu.Lock()
	if s.open == o {
		s.open = nil
	}
	r.mu.Unlock()
	outcome := txnAborted
	if commit {
		outcome = txnCommitted
	}
	r.m.txnOutcomes.WithLabelValues(string(outcome), string(source)).Inc()
	return nil
}

// settle brings an id's transaction to a state the next forwarded request cannot misread: a
// decided outcome is applied, an unresolved one is asked of the upstream.
func (r *txnRelay) settle(ctx context.Context, txnID string, s *txnIDState) error {
	r.mu.Lock()
	o := s.open
	var phase txnPhase
	var pid int64
	var epoch int16
	if o != nil {
		phase, pid, epoch = o.phase, o.pid, o.epoch
	}
	r.mu.Unlock()
	if o == nil || phase == phaseOpen {
		return nil
	}
	if phase == phaseDecided {
		return r.apply(ctx, txnID, s)
	}
	st, found, err := r.b.Describe(ctx, txnID)
	if err != nil {
		r.lg.Warn("cannot resolve a transaction with the upstream; holding the id's requests", zap.String("transactional_id", txnID), zap.Error(err))
		return fmt.Errorf("%w: %v", errRelay, err)
	}
	v := resolve(st, found, pid, epoch)
	switch v.kind {
	case verdictOpen:
		r.mu.Lock()
		if s.open == o {
			o.phase = phaseOpen
			o.timeout = time.Duration(st.TimeoutMs) * time.Millisecond
		}
		r.mu.Unlock()
		return nil
	case verdictAmbiguous:
		r.ambiguous(txnID, pid, epoch, st, found)
		r.mu.Lock()
		if s.open == o {
			s.open = nil
		}
		r.mu.Unlock()
		return nil
	}
	return r.decide(ctx, txnID, s, pid, v.kind == verdictCommit, v.epoch, fromUpstreamState)
}

func (r *txnRelay) setPhaseAny(s *txnIDState, o *openTxn, p txnPhase) {
	r.mu.Lock()
	if s.open == o {
		o.phase = p
	}
	r.mu.Unlock()
}

func (r *txnRelay) ambiguous(txnID string, pid int64, epoch int16, st upstream.TxnState, found bool) {
	r.m.txnOutcomes.WithLabelValues(string(txnAmbiguous), string(fromUpstreamState)).Inc()
	r.lg.Error("cannot tell how a transaction with staged offsets ended; they stay staged (RequireStable fetches of its partitions answer UNSTABLE_OFFSET_COMMIT). Operator path: check the transaction upstream and send WriteTxnMarkers for the producer to coordinatord (docs/transactions.md, Hanging transactions)",
		zap.String("transactional_id", txnID), zap.Int64("producer_id", pid), zap.Int16("staged_epoch", epoch),
		zap.Bool("upstream_knows_id", found), zap.String("upstream_state", st.State),
		zap.Int64("upstream_producer_id", st.ProducerID), zap.Int16("upstream_epoch", st.ProducerEpoch))
}

type verdictKind int8

const (
	verdictOpen verdictKind = iota
	verdictCommit
	verdictAbort
	verdictAmbiguous
)

type verdict struct {
	kind  verdictKind
	epoch int16 // the marker's epoch
}

// resolve reads an outcome from the upstream's current transaction of the id, for a producer
// that staged with epoch (the table in docs/transactions.md, transaction version 1). It is
// called only while no request of the id can be forwarded, so the current transaction is the
// one that staged, or its end.
func resolve(st upstream.TxnState, found bool, pid int64, epoch int16) verdict {
	if !found || st.ProducerID != pid {
		return verdict{kind: verdictAmbiguous}
	}
	switch st.State {
	case "Ongoing":
		if st.ProducerEpoch == epoch {
			return verdict{kind: verdictOpen}
		}
	case "PrepareCommit", "CompleteCommit":
		if st.ProducerEpoch == epoch {
			return verdict{kind: verdictCommit, epoch: epoch}
		}
	case "PrepareAbort", "CompleteAbort", "PrepareEpochFence":
		// A timeout abort fences by bumping the epoch once.
		if st.ProducerEpoch == epoch || st.ProducerEpoch == epoch+1 {
			return verdict{kind: verdictAbort, epoch: st.ProducerEpoch}
		}
	case "Empty":
		// Under version 1 a transaction that began never returns to Empty at its epoch:
		// nothing staged at this epoch was ever part of one.
		if st.ProducerEpoch == epoch {
			return verdict{kind: verdictAbort, epoch: epoch}
		}
	}
	return verdict{kind: verdictAmbiguous}
}

// upstreamCallError is an upstream call's failure during resolution, with the API it asked,
// so that its KIP-1050 category can be read (kerrclass categories depend on the API).
type upstreamCallError struct {
	api int16
	err error
}

func (e *upstreamCallError) Error() string { return kmsg.NameForKey(e.api) + ": " + e.err.Error() }
func (e *upstreamCallError) Unwrap() error { return e.err }

// incurable says whether err is one no retry can cure, and its category: an upstream answer
// whose code is neither retriable nor refresh-retriable for the API asked (KIP-1050; e.g. our
// credentials lack DESCRIBE on the transactional id, or the upstream does not support the API).
// An upstream that did not answer at all (a connection or a timeout) and a local shard that
// could not be read or written are worth retrying.
func incurable(err error) (kerrclass.Category, bool) {
	var ue *upstreamCallError
	var ke *kerr.Error
	if !errors.As(err, &ue) || !errors.As(ue.err, &ke) {
		return kerrclass.Retriable, false
	}
	c := kerrclass.Of(ue.api, ke.Code)
	return c, c != kerrclass.Retriable && c != kerrclass.RefreshRetriable
}

// recover resolves every producer a previous run left with staged offsets, then opens the
// relay. Until then relayed requests wait, so no id's history moves on before its staged
// transaction is read (the barrier holds across a restart). Retriable failures are retried with
// a backoff capped at recoverBackoffMax; a producer whose question the upstream refuses for good
// is set aside (giveUp) so that it does not hold every other id's requests forever.
func (r *txnRelay) recover(ctx context.Context) {
	backoff := recoverBackoffMin
	for {
		err := r.recoverOnce(ctx)
		if err == nil {
			close(r.ready)
			return
		}
		r.lg.Warn("cannot resolve staged transactions with the upstream yet; transactional requests wait", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, recoverBackoffMax)
	}
}

const (
	recoverBackoffMin = 100 * time.Millisecond
	recoverBackoffMax = 5 * time.Second
	// stuckRetryMax caps the interval between tries of a producer set aside: the cure (an ACL
	// grant, an upstream upgrade) comes from an operator, who should not wait long to see it work.
	stuckRetryMax = time.Minute
	// stuckForcedEvery bounds how often a set-aside producer's own retried requests ask the
	// upstream again (a client retries every 100 ms or so).
	stuckForcedEvery = time.Second
)

func (r *txnRelay) recoverOnce(ctx context.Context) error {
	open, err := r.b.OpenProducers(ctx, nil)
	if err != nil {
		return err
	}
	resolved, retry := r.recoverProducers(ctx, open, fromRecovery)
	if retry != nil {
		return retry
	}
	if len(open) > 0 {
		r.lg.Info("staged transactions recovered", zap.Int("producers", len(open)), zap.Int("resolved", resolved))
	}
	return nil
}

// recoverProducers resolves each producer of open from the upstream's state; resolved counts the
// outcomes applied, retry is the first failure worth retrying. Every producer is asked in each
// round, so that one the upstream refuses for good is set aside even while another's answer is
// still being retried.
func (r *txnRelay) recoverProducers(ctx context.Context, open map[int64]OpenProducer, source txnSource) (resolved int, retry error) {
	for pid, p := range open {
		if r.isStuck(pid) {
			continue // set aside by an earlier round: tryStuck retries it on its own backoff
		}
		done, err := r.recoverProducer(ctx, pid, p, source)
		if err != nil {
			if c, ok := incurable(err); ok {
				r.giveUp(pid, p, c, err)
			} else if retry == nil {
				retry = err
			}
			continue
		}
		if done {
			resolved++
		}
	}
	return resolved, retry
}

// recoverProducer resolves one producer's staged transaction from the upstream's state; done is
// true when an outcome was applied.
func (r *txnRelay) recoverProducer(ctx context.Context, pid int64, p OpenProducer, source txnSource) (done bool, err error) {
	ids, err := r.b.TxnIDsOf(ctx, pid)
	if err != nil {
		return false, &upstreamCallError{kmsg.ListTransactions.Int16(), err}
	}
	if len(ids) != 1 {
		r.ambiguous(fmt.Sprintf("<%d ids upstream>", len(ids)), pid, p.Epoch, upstream.TxnState{}, len(ids) > 0)
		r.unstick(pid)
		return false, nil
	}
	s, err := r.lock(ctx, ids[0])
	if err != nil {
		return false, err
	}
	defer r.release(ids[0], s)
	st, found, err := r.b.Describe(ctx, ids[0])
	if err != nil {
		return false, &upstreamCallError{kmsg.DescribeTransactions.Int16(), err}
	}
	r.mu.Lock()
	// A TxnOffsetCommit retried while recovery runs may have named its shard already.
	for _, sh := range p.Shards {
		r.addLocked(s, ids[0], pid, p.Epoch, sh)
	}
	o := s.open
	r.mu.Unlock()
	v := resolve(st, found, pid, p.Epoch)
	switch v.kind {
	case verdictOpen:
		r.unstick(pid)
		return false, nil // the client's EndTxn, or the upstream's timeout seen at the next InitProducerId, ends it
	case verdictAmbiguous:
		r.ambiguous(ids[0], pid, p.Epoch, st, found)
		r.mu.Lock()
		if s.open == o {
			s.open = nil
		}
		r.mu.Unlock()
		r.unstick(pid)
		return false, nil
	}
	r.mu.Lock()
	o.phase, o.commit, o.markEpoch, o.source = phaseDecided, v.kind == verdictCommit, v.epoch, source
	r.mu.Unlock()
	if err := r.apply(ctx, ids[0], s); err != nil {
		return false, err
	}
	r.unstick(pid)
	r.lg.Info("resolved a transaction left staged by a previous run", zap.String("transactional_id", ids[0]),
		zap.Int64("producer_id", pid), zap.Bool("commit", v.kind == verdictCommit), zap.String("upstream_state", st.State))
	return true, nil
}

// stuckProducer is a producer with staged offsets whose transaction recovery could not resolve
// because the upstream refused to say how it ended.
type stuckProducer struct {
	p       OpenProducer
	next    time.Time // earliest next try of the sweep
	tried   time.Time // the last try, which bounds how often the producer's own requests ask
	backoff time.Duration
}

// giveUp sets a producer aside. Nothing is guessed: its offsets stay staged, so RequireStable
// fetches of its partitions answer UNSTABLE_OFFSET_COMMIT, and any forwarded request carrying
// its producer id is held (tryStuck) until a later try resolves it, because a marker for a later
// transaction of that producer would also commit or abort these offsets. Other producers' requests
// flow again.
func (r *txnRelay) giveUp(pid int64, p OpenProducer, c kerrclass.Category, err error) {
	now := r.now()
	r.mu.Lock()
	st := r.stuck[pid]
	first := st == nil
	if first {
		st = &stuckProducer{p: p, backoff: recoverBackoffMax}
		r.stuck[pid] = st
	} else {
		st.backoff = min(2*st.backoff, stuckRetryMax)
	}
	st.next, st.tried = now.Add(st.backoff), now
	backoff := st.backoff
	r.mu.Unlock()
	fields := []zap.Field{zap.Int64("producer_id", pid), zap.Int16("staged_epoch", p.Epoch), zap.Int32s("shards", p.Shards),
		zap.String("category", c.String()), zap.Duration("next_try_in", backoff), zap.Error(err)}
	if !first {
		r.lg.Warn("a transaction set aside by recovery is still not resolved", fields...)
		return
	}
	r.m.txnGiveUps.WithLabelValues(c.String()).Inc()
	r.lg.Error("the upstream refuses to tell how a transaction with staged offsets ended; they stay staged (RequireStable fetches answer UNSTABLE_OFFSET_COMMIT) and the producer's transactional requests are held until a retry resolves it. Fix what the error names, e.g. grant the gateway's principal DESCRIBE on the transactional id (docs/transactions.md)",
		fields...)
}

func (r *txnRelay) unstick(pid int64) {
	r.mu.Lock()
	delete(r.stuck, pid)
	r.mu.Unlock()
}

func (r *txnRelay) isStuck(pid int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stuck[pid] != nil
}

// tryStuck tries again to resolve a producer set aside, when its backoff allows (force: a
// request of the producer is waiting, which may ask once every stuckForcedEvery). nil means it
// is resolved.
func (r *txnRelay) tryStuck(ctx context.Context, pid int64, force bool) error {
	r.mu.Lock()
	st := r.stuck[pid]
	var p OpenProducer
	due := false
	if st != nil {
		now := r.now()
		p, due = st.p, !now.Before(st.next) || force && now.Sub(st.tried) >= stuckForcedEvery
	}
	r.mu.Unlock()
	if st == nil {
		return nil
	}
	if !due {
		return fmt.Errorf("%w: producer %d is not resolved yet", errRelay, pid)
	}
	if _, err := r.recoverProducer(ctx, pid, p, fromRecovery); err != nil {
		if c, ok := incurable(err); ok {
			r.giveUp(pid, p, c, err)
		}
		return fmt.Errorf("%w: %v", errRelay, err)
	}
	return nil
}

// retryStuck is the sweep's try of every producer set aside whose backoff ran out.
func (r *txnRelay) retryStuck(ctx context.Context) {
	r.mu.Lock()
	var due []int64
	for pid, st := range r.stuck {
		if !r.now().Before(st.next) {
			due = append(due, pid)
		}
	}
	r.mu.Unlock()
	for _, pid := range due {
		_ = r.tryStuck(ctx, pid, false)
	}
}
