package kafkalog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/pkg/kerrclass"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// nodeWriter commits the rounds of every shard this node has loaded as one transaction per
// round under the node's own transactional producers: with 64 clients over 50 shards a
// transaction per shard carried about one commit and the broker's transaction rate was the
// limit (issue 18). A round takes everything each attached shard has queued, plus the claims of
// shards being loaded and the releases of shards being closed, produces it in one flush (one
// produce per broker, every partition with records) and ends it with one EndTxn; only then
// does each shard of the round get Durable.
//
// Who may write a shard's partition is kept in the partition itself (ownership records,
// storage.md "Fencing"): a load claims the shard in a round of this writer before it reads the
// partition, and a close releases it in a round after every round holding its records. A
// loader fences every other node whose latest record in the partition is a claim.
type nodeWriter struct {
	b    *Backend
	lg   *zap.Logger
	kick chan struct{}
	// appended counts the batches appended to attached shards, ever: what gather waits on.
	appended atomic.Int64

	mu sync.Mutex
	// logs are the attached shards: claimed, and not yet released, failed or abandoned.
	logs []*kafkaLog
	// jobs wait for the next round.
	jobs []*ownershipJob
	// prod is nil until a round needs it and after it broke; a new one's InitProducerId
	// completes (or aborts) whatever the previous one left open.
	prod *nodeProducers
	// inflight are the shards with records or a job in the round being committed.
	inflight map[*kafkaLog]bool
	running  bool
	first    int // where the next round begins among logs
}

// roundMaxRecords bounds the records of one round (a batch is never split: a larger one goes
// alone), so that a round of every shard stays within what the producer buffers.
const roundMaxRecords = 16384

// ownershipJob is a claim (a load's, with the load marker) or a release (a close's) of a
// shard, written in a round of the node's transaction.
type ownershipJob struct {
	l       *kafkaLog
	release bool
	// abortPID: not a claim or release but the abort of a transaction of the node's own
	// producer pid left hanging in the shard's partition (reportOpenTransactions).
	abortPID int64
	done     chan error // buffered; gets exactly one answer
	marker   int64      // a claim's load marker offset, once done answered nil
	tries    int        // rounds a release was in that were aborted
}

func (j *ownershipJob) finish(err error) { j.done <- err }

func (b *Backend) writer() *nodeWriter {
	b.wOnce.Do(func() {
		b.w = &nodeWriter{b: b, lg: b.lg.With(zap.Int32("node", b.opts.NodeID)), kick: make(chan struct{}, 1)}
	})
	return b.w
}

func (w *nodeWriter) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// startLocked starts the writer goroutine if it is not running; w.mu held.
func (w *nodeWriter) startLocked() {
	if !w.running {
		w.running = true
		go w.run()
	}
	w.wake()
}

// submit queues a claim or a release for the next round.
func (w *nodeWriter) submit(l *kafkaLog, release bool) *ownershipJob {
	j := &ownershipJob{l: l, release: release, done: make(chan error, 1)}
	w.mu.Lock()
	w.jobs = append(w.jobs, j)
	w.startLocked()
	w.mu.Unlock()
	return j
}

// attach makes l's appends part of the node's rounds (after its claim committed).
func (w *nodeWriter) attach(l *kafkaLog) {
	w.mu.Lock()
	w.logs = append(w.logs, l)
	w.startLocked()
	w.mu.Unlock()
}

// release queues l's release and returns its job, or nil when l is not attached (never
// claimed, or already failed, lost to a broken producer, or abandoned: then the next owner
// fences this node instead).
func (w *nodeWriter) release(l *kafkaLog) *ownershipJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.release != nil {
		return l.release
	}
	if !w.attachedLocked(l) && !w.inflight[l] {
		// A claim not yet sent is dropped: nothing of it reaches the topic.
		for i, j := range w.jobs {
			if j.l == l && !j.release {
				w.jobs = append(w.jobs[:i], w.jobs[i+1:]...)
				j.finish(fmt.Errorf("shard %d: %w", l.shard, log.ErrClosed))
				break
			}
		}
		return nil
	}
	// Attached, or its claim is in the round in flight (which may commit): released in a
	// round after it.
	return w.queueReleaseLocked(l)
}

func (w *nodeWriter) attachedLocked(l *kafkaLog) bool {
	for _, a := range w.logs {
		if a == l {
			return true
		}
	}
	return false
}

func (w *nodeWriter) detachLocked(l *kafkaLog) {
	for i, a := range w.logs {
		if a == l {
			w.logs = append(w.logs[:i], w.logs[i+1:]...)
			return
		}
	}
}

// abandon takes l out of the node's rounds at once: its queued records are dropped (nobody
// waits for them), a round in flight holding some of them reports nothing to it, and its
// release is queued (unless it already is), to be written after that round, so that the
// shard's next owner need not fence this node. A round that reaches the upstream late (kgo
// retries a produce through an outage) is harmless: if the release committed before the next
// owner's claim, so did the round, and the next owner replays it; otherwise the next owner
// fences this node and the late round fails (storage.md, Fencing). A claim not yet sent is
// dropped.
func (w *nodeWriter) abandon(l *kafkaLog) {
	w.mu.Lock()
	var dropped []*ownershipJob
	kept := w.jobs[:0]
	for _, j := range w.jobs {
		if j.l == l && !j.release {
			dropped = append(dropped, j)
			continue
		}
		kept = append(kept, j)
	}
	w.jobs = kept
	if w.attachedLocked(l) {
		w.detachLocked(l)
		w.queueReleaseLocked(l)
	}
	w.mu.Unlock()
	l.mu.Lock()
	l.pending = nil
	l.mu.Unlock()
	for _, j := range dropped {
		j.finish(fmt.Errorf("shard %d: %w", l.shard, log.ErrClosed))
	}
}

// queueReleaseLocked queues l's release unless one is queued or written already; w.mu held.
func (w *nodeWriter) queueReleaseLocked(l *kafkaLog) *ownershipJob {
	if l.release != nil {
		return l.release
	}
	l.release = &ownershipJob{l: l, release: true, done: make(chan error, 1)}
	w.jobs = append(w.jobs, l.release)
	w.startLocked()
	return l.release
}

// nodeProducers are the node's two transactional producers; rounds alternate between them,
// for the reason shardProducers gives.
type nodeProducers struct {
	kcs  []*kgo.Client
	pids []int64 // of kcs, from their InitProducerId
	turn int
}

func (p *nodeProducers) close() {
	if p == nil {
		return
	}
	for _, kc := range p.kcs {
		kc.Close()
	}
}

// nodeTransactionalID is the id of node's i-th producer.
func (b *Backend) nodeTransactionalID(node int32, i int) string {
	id := b.opts.NodeTransactionalIDPrefix + strconv.Itoa(int(node))
	if i > 0 {
		id += "-" + strconv.Itoa(i)
	}
	return id
}

func (b *Backend) producerOpts(transactionalID string) []kgo.Opt {
	return append(append([]kgo.Opt{}, b.opts.Client...),
		kgo.TransactionalID(transactionalID),
		kgo.TransactionTimeout(b.opts.TransactionTimeout),
		kgo.DefaultProduceTopic(b.opts.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// One flush per round: records wait in the client until then.
		kgo.ManualFlushing(),
		// A round's records wait in the client until its flush (with manual flushing a full
		// buffer fails the produce): roundMaxRecords, or one batch of the largest size
		// CheckBatch lets through.
		kgo.MaxBufferedRecords(roundMaxRecords+b.opts.MaxBatchBytes/recordOverhead+1),
		kgo.ProducerBatchMaxBytes(int32(b.opts.MaxBatchBytes+batchSlack)),
		kgo.RecordDeliveryTimeout(b.opts.TransactionTimeout),
		kgo.MetadataMinAge(shardMetadataMinAge),
	)
}

// newProducers creates the node's producers; each InitProducerId bumps the id's epoch, which
// completes or aborts whatever an earlier producer of this node left open under it.
func (w *nodeWriter) newProducers() (*nodeProducers, error) {
	p := &nodeProducers{}
	for i := 0; i < shardProducers; i++ {
		kc, err := kgo.NewClient(w.b.producerOpts(w.b.nodeTransactionalID(w.b.opts.NodeID, i))...)
		if err != nil {
			p.close()
			return nil, err
		}
		p.kcs = append(p.kcs, kc)
		ctx, cancel := context.WithTimeout(context.Background(), w.b.opts.TransactionTimeout)
		var pid int64
		pid, _, err = kc.ProducerID(ctx)
		err = inAPI(kmsg.InitProducerID, err)
		cancel()
		p.pids = append(p.pids, pid)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("init node producer %s: %w", w.b.nodeTransactionalID(w.b.opts.NodeID, i), err)
		}
	}
	return p, nil
}

type roundPart struct {
	l       *kafkaLog
	batches []pendingBatch
}

func roundBatches(parts []roundPart) int {
	n := 0
	for _, p := range parts {
		n += len(p.batches)
	}
	return n
}

// A round's commit acknowledges its shards' operations, and under load the clients behind
// them send their next ones at once: a round begun right away carries only what arrived while
// the previous one was in flight, so with every client waiting on its commit the rounds
// alternate between two halves of the clients, and a commit waits for the other half's round
// before its own. The broker's cost of a transaction is mostly per partition it touches (the
// produce's append, the commit marker's append, the coordinator's bookkeeping), so two half
// rounds cost it nearly twice one full round. So after a round with records the writer waits
// until as many batches have been appended since its commit as it carried (the clients it
// answered are back), or at most gatherBound; claims, releases and aborts never wait. Measured
// (benchmarks-storage.md, "Gathering node rounds"): +18-62 % commits/s at 64 clients over 50
// shards, +53-67 % at 8, and a lower p50 in both.
type gather struct {
	target int64     // appended count that ends the wait
	until  time.Time // the wait's bound
}

// gatherMax caps gather's wait, which is otherwise as long as the previous round took: a
// client answered by a round is back within about a round even on a loaded machine, and a
// commit arriving on its own (an open stream of commits rather than clients waiting on each)
// waits at most one round longer than it would have, into a round that costs the broker less.
// Half a round waited too little in the daemon (the clients' turnaround through the wire and
// the shard goroutines is about a round there): +3-8 % instead of +18-33 % in the same runs.
// Benchmarks and tests set it (0: no wait).
var gatherMax = 5 * time.Millisecond

// gatherBound is how long to wait after a round that took d.
func gatherBound(d time.Duration) time.Duration { return min(d, gatherMax) }

// wait blocks until the gather ends (w.mu not held).
func (g *gather) wait(w *nodeWriter) {
	if g.until.IsZero() {
		return
	}
	defer func() { g.until = time.Time{} }()
	var bound *time.Timer
	for w.appended.Load() < g.target {
		left := time.Until(g.until)
		if left <= 0 {
			return
		}
		w.mu.Lock()
		jobs := len(w.jobs)
		w.mu.Unlock()
		if jobs > 0 {
			return
		}
		if bound == nil {
			bound = time.NewTimer(left)
			defer bound.Stop()
		}
		select {
		case <-w.kick: // an append or a job: look again
		case <-bound.C:
			return
		}
	}
}

// run commits rounds while any shard is attached or any job waits; it ends, closing the
// producers, when neither is left.
func (w *nodeWriter) run() {
	var g gather
	for {
		g.wait(w)
		w.mu.Lock()
		var parts []roundPart
		records := 0
		// Whole batches, up to roundMaxRecords, starting with the shard after the one the
		// previous round began with, so that no shard waits behind busier ones for long.
		for i := range w.logs {
			l := w.logs[(w.first+i)%len(w.logs)]
			l.mu.Lock()
			n := 0
			for n < len(l.pending) && (records == 0 || records+len(l.pending[n].recs) <= roundMaxRecords) {
				records += len(l.pending[n].recs)
				n++
			}
			if n > 0 {
				parts = append(parts, roundPart{l: l, batches: l.pending[:n:n]})
				l.pending = l.pending[n:]
			}
			l.mu.Unlock()
		}
		w.first++
		jobs := w.jobs
		w.jobs = nil
		var aborts []*ownershipJob
		kept := jobs[:0]
		for _, j := range jobs {
			if j.abortPID != 0 {
				aborts = append(aborts, j)
				continue
			}
			kept = append(kept, j)
		}
		jobs = kept
		if prod := w.prod; len(aborts) > 0 {
			w.mu.Unlock()
			for _, j := range aborts {
				j.finish(w.abortHanging(prod, j))
			}
			w.mu.Lock()
		}
		if len(parts) == 0 && len(jobs) == 0 {
			if len(w.logs) == 0 {
				w.running = false
				p := w.prod
				w.prod = nil
				w.mu.Unlock()
				p.close()
				return
			}
			w.mu.Unlock()
			<-w.kick
			continue
		}
		w.inflight = map[*kafkaLog]bool{}
		for _, p := range parts {
			w.inflight[p.l] = true
		}
		for _, j := range jobs {
			w.inflight[j.l] = true
		}
		prod := w.prod
		w.mu.Unlock()
		var err error
		if prod == nil {
			if prod, err = w.newProducers(); err == nil {
				w.mu.Lock()
				w.prod = prod
				w.mu.Unlock()
			}
		}
		var markers map[*ownershipJob]*kgo.Record
		began := time.Now()
		if err == nil {
			markers, err = w.commit(prod, parts, jobs)
		}
		if batches := roundBatches(parts); err == nil && batches > 0 {
			// Before finish acknowledges anyone: every batch appended from here on came
			// after this round's answer.
			g.target = w.appended.Load() + int64(batches)
			g.until = time.Now().Add(gatherBound(time.Since(began)))
		}
		w.finish(prod, parts, jobs, markers, err)
	}
}

// finish reports a round: Durable to each shard of a committed one; Lost to each shard of an
// aborted one (nothing of it is visible); and for anything else (fenced, the commit's outcome
// unknown, the abort failed) the producers are dropped and every attached shard fails, since
// any of them may have had records in the round and the next producer's InitProducerId
// aborts what was open.
func (w *nodeWriter) finish(prod *nodeProducers, parts []roundPart, jobs []*ownershipJob, markers map[*ownershipJob]*kgo.Record, err error) {
	var aborted *abortedRound
	class := categoryOf(kmsg.Produce.Int16(), err)
	act := class.Action()
	lost := err != nil && errors.As(err, &aborted) && !isFenced(err) && (act == kerrclass.Retry || act == kerrclass.Abort)
	w.mu.Lock()
	w.inflight = nil
	var failedLogs []*kafkaLog
	var dropJobs []*ownershipJob
	switch {
	case err == nil:
		for _, j := range jobs {
			if !j.release && !j.l.isClosedForClaim() && !w.attachedLocked(j.l) {
				w.logs = append(w.logs, j.l)
			} else if !j.release && !w.attachedLocked(j.l) {
				// Abandoned while its claim was in flight: released next round.
				w.queueReleaseLocked(j.l)
			}
		}
	case lost:
		// A release goes again in the next round (a few times): without it the shard's next
		// owner fences the whole node.
		kept := jobs[:0]
		for _, j := range jobs {
			if j.release && j.tries < releaseTries-1 {
				j.tries++
				w.jobs = append(w.jobs, j)
				continue
			}
			kept = append(kept, j)
		}
		jobs = kept
		for _, p := range parts {
			if p.l.cb.Lost == nil && w.attachedLocked(p.l) {
				w.detachLocked(p.l)
				failedLogs = append(failedLogs, p.l)
			}
		}
	default:
		if w.prod == prod {
			w.prod = nil
		}
		failedLogs = append(failedLogs, w.logs...)
		w.logs = nil
		kept := w.jobs[:0]
		for _, j := range w.jobs {
			if j.release {
				dropJobs = append(dropJobs, j) // its shard fails below
				continue
			}
			kept = append(kept, j)
		}
		w.jobs = kept
	}
	// Releases end their shard's part in the rounds; a failed one leaves it to the fence.
	for _, j := range jobs {
		if j.release {
			w.detachLocked(j.l)
		}
	}
	attached := map[*kafkaLog]bool{}
	for _, l := range w.logs {
		attached[l] = true
	}
	w.mu.Unlock()

	switch {
	case err == nil:
		for _, p := range parts {
			if attached[p.l] || p.l.releasedIn(jobs) {
				if p.l.cb.Durable != nil {
					p.l.cb.Durable(p.batches[len(p.batches)-1].last)
				}
			}
		}
		for _, j := range jobs {
			if !j.release {
				j.marker = markers[j].Offset
			}
			j.finish(nil)
		}
		return
	case lost:
		for _, p := range parts {
			if p.l.cb.Lost != nil && attached[p.l] {
				p.l.lose(p.batches, aborted.err, class)
			}
		}
	default:
		prod.close()
		w.lg.Error("state topic round failed; the node's producers are dropped and every shard it holds stops",
			zap.Error(err), zap.String("class", class.String()), zap.Int("shards", len(failedLogs)))
	}
	ferr := fmt.Errorf("%w: %w", log.ErrFailed, err)
	for _, l := range failedLogs {
		l.fail(ferr)
	}
	for _, j := range jobs {
		j.finish(err)
	}
	for _, j := range dropJobs {
		j.finish(err)
	}
}

// releaseTries bounds the aborted rounds a release is put in again.
const releaseTries = 3

// abortHanging ends the transaction of the node's own producer j.abortPID left open in j's
// shard's partition below its load marker, which the transaction coordinator no longer knows
// (storage.md, "A hanging transaction after an upstream restart"): that producer, at its
// current epoch, adds the partition to a transaction of its own and aborts it, and the abort
// marker ends the open one as aborted whatever its epoch. Its records were never acknowledged:
// the producer's InitProducerId, before any round, completed every transaction the
// coordinator knew. Only when the producer that has the pid is still the node's.
func (w *nodeWriter) abortHanging(prod *nodeProducers, j *ownershipJob) error {
	if prod == nil {
		return errors.New("the node's producers were replaced since the hanging transaction was seen")
	}
	i := -1
	for k, pid := range prod.pids {
		if pid == j.abortPID {
			i = k
		}
	}
	if i < 0 {
		return fmt.Errorf("producer id %d is not one of the node's producers now", j.abortPID)
	}
	kc := prod.kcs[i]
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.b.opts.TransactionTimeout)
	defer cancel()
	if err := kc.BeginTransaction(); err != nil {
		return err
	}
	produced := make(chan error, 1)
	kc.Produce(ctx, &kgo.Record{Key: loadMarkerKey, Value: []byte("abort " + time.Now().UTC().Format(time.RFC3339Nano)), Partition: j.l.shard},
		func(_ *kgo.Record, err error) { produced <- err })
	if err := kc.Flush(ctx); err != nil {
		kc.AbortBufferedRecords(context.Background())
	}
	perr := <-produced
	if err := endTransaction(ctx, kc, w.b.opts.Topic, j.l.shard, perr == nil, kgo.TryAbort); err != nil {
		return fmt.Errorf("abort: %w (produce: %v)", err, perr)
	}
	if perr != nil {
		// Without its record in the partition the transaction added nothing there, so no abort
		// marker ended the hanging one: say why rather than let the check find it still open.
		return fmt.Errorf("the abort's record was not written: %w", perr)
	}
	return nil
}

// nodePIDs are the producer ids of the node's producers now (none before the first round).
func (w *nodeWriter) nodePIDs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.prod == nil {
		return nil
	}
	return append([]int64(nil), w.prod.pids...)
}

// abortOwn asks the writer to abort the node producer pid's transaction hanging in l's
// partition, between two rounds.
func (w *nodeWriter) abortOwn(ctx context.Context, l *kafkaLog, pid int64) error {
	j := &ownershipJob{l: l, abortPID: pid, done: make(chan error, 1)}
	w.mu.Lock()
	w.jobs = append(w.jobs, j)
	w.startLocked()
	w.mu.Unlock()
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commit writes one round as one transaction and returns the claims' marker records.
func (w *nodeWriter) commit(prod *nodeProducers, parts []roundPart, jobs []*ownershipJob) (map[*ownershipJob]*kgo.Record, error) {
	// Bounded: a round that cannot finish within the transaction timeout gives up rather than
	// hold every shard's acknowledgements (and their Close) forever.
	timeout := w.b.opts.TransactionTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	kc := prod.kcs[prod.turn]
	prod.turn = (prod.turn + 1) % len(prod.kcs)
	if err := kc.BeginTransaction(); err != nil {
		return nil, err
	}
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
		acked    = int32(-1) // a partition the broker took a record of, for endTransaction
	)
	produce := func(r *kgo.Record) {
		wg.Add(1)
		kc.Produce(ctx, r, func(r *kgo.Record, err error) {
			errMu.Lock()
			if err != nil && firstErr == nil {
				// Under transactions v1 kgo hands an AddPartitionsToTxn refusal to the
				// records too; it is classed as the Produce's (storage.md, Failures).
				firstErr = inAPI(kmsg.Produce, err)
			} else if err == nil {
				acked = r.Partition
			}
			errMu.Unlock()
			wg.Done()
		})
	}
	for _, p := range parts {
		for _, b := range p.batches {
			for _, rec := range b.recs {
				k, v := toKafka(rec)
				produce(&kgo.Record{Key: k, Value: v, Partition: p.l.shard})
			}
		}
	}
	markers := map[*ownershipJob]*kgo.Record{}
	for _, j := range jobs {
		produce(ownershipRecord(j.l.shard, w.b.opts.NodeID, !j.release))
		if !j.release {
			m := &kgo.Record{Key: loadMarkerKey, Value: []byte(time.Now().UTC().Format(time.RFC3339Nano)), Partition: j.l.shard}
			markers[j] = m
			produce(m)
		}
	}
	if err := kc.Flush(ctx); err != nil {
		kc.AbortBufferedRecords(context.Background())
		errMu.Lock()
		if firstErr == nil {
			firstErr = inAPI(kmsg.Produce, err)
		}
		errMu.Unlock()
	}
	wg.Wait()
	if firstErr != nil {
		// Nothing of the round may become visible; a fenced producer cannot abort and is
		// reported as it is.
		actx, acancel := context.WithTimeout(context.Background(), timeout)
		defer acancel()
		if aerr := endTransaction(actx, kc, w.b.opts.Topic, acked, acked >= 0, kgo.TryAbort); aerr != nil {
			// Both in the chain: the produce's error is the round's cause, the abort's
			// answer may be the one that says the node was fenced (isFenced).
			return nil, fmt.Errorf("%w (abort: %w)", firstErr, inAPI(kmsg.EndTxn, aerr))
		}
		return nil, &abortedRound{err: firstErr}
	}
	if err := endTransaction(ctx, kc, w.b.opts.Topic, acked, acked >= 0, kgo.TryCommit); err != nil {
		return nil, inAPI(kmsg.EndTxn, err)
	}
	return markers, nil
}

// Ownership records: key [0xff 0x01][node id, int32 big-endian], value [format][state]. Their
// key starts with the load marker's byte, which no record kind does, so the shard never sees
// them (fromKafka), and compaction keeps each node's newest, which is all a loader needs.
const (
	ownershipKind    = 0x01
	ownershipClaim   = 1
	ownershipRelease = 2
)

func ownershipRecord(shard, node int32, claim bool) *kgo.Record {
	k := make([]byte, 6)
	k[0], k[1] = loadMarkerKey[0], ownershipKind
	binary.BigEndian.PutUint32(k[2:], uint32(node))
	state := byte(ownershipRelease)
	if claim {
		state = ownershipClaim
	}
	return &kgo.Record{Key: k, Value: []byte{valueFormat, state}, Partition: shard}
}

// parseOwnership reads an ownership record; ok is false for any other key.
func parseOwnership(key, value []byte) (node int32, claim, ok bool) {
	if len(key) != 6 || key[0] != loadMarkerKey[0] || key[1] != ownershipKind || len(value) < 2 || value[0] != valueFormat {
		return 0, false, false
	}
	return int32(binary.BigEndian.Uint32(key[2:])), value[1] == ownershipClaim, true
}

// releasedIn reports whether jobs hold l's release (l is detached by then, yet its records of
// the same round are durable).
func (l *kafkaLog) releasedIn(jobs []*ownershipJob) bool {
	for _, j := range jobs {
		if j.release && j.l == l {
			return true
		}
	}
	return false
}

// isClosedForClaim: the log was abandoned, so a claim of it that committed is not attached but
// released by the writer (nobody appends to it any more).
func (l *kafkaLog) isClosedForClaim() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.abandoned
}

// fail reports that l's records past its last Durable are lost for good.
func (l *kafkaLog) fail(err error) {
	l.mu.Lock()
	if l.failed != nil && !isWriteError(l.failed) {
		l.mu.Unlock()
		return
	}
	err = fmt.Errorf("%w (shard %d)", err, l.shard)
	l.failed = err
	l.pending = nil
	abandoned := l.abandoned
	l.mu.Unlock()
	if abandoned {
		l.lg.Info("state topic round given up: the shard was closed", zap.Error(err))
	}
	if l.cb.Failed != nil {
		l.cb.Failed(err)
	}
}

func isWriteError(err error) bool {
	var we *log.WriteError
	return errors.As(err, &we)
}
