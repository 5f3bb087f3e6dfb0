// Package kafkalog is a log.Backend that keeps every shard's log in one partition of a
// compacted topic on the upstream Kafka cluster, the way Kafka keeps group state in
// __consumer_offsets. The record key is the Kafka key, so Kafka's own compaction keeps exactly
// the newest fact per key that a replay needs, and a tombstone is a null value.
//
// One writer per partition is enforced by Kafka, not by us: each shard writes in transactions
// under the transactional id <prefix><shard>. Opening a shard's log bumps the producer epoch,
// which aborts whatever a previous owner left open and fences it: its next commit fails with
// PRODUCER_FENCED and its shard goes FAILED, so it never acknowledges again.
package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/pkg/kerrclass"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Options configure the backend.
type Options struct {
	// Client is how to reach the upstream cluster (seeds, TLS, SASL, timeouts); the backend
	// adds its own producer and consumer settings.
	Client []kgo.Opt
	// Topic holds one partition per shard.
	Topic string
	// Partitions is the shard count; an existing topic must have exactly this many.
	Partitions int32
	// ReplicationFactor and MinInsyncReplicas are used when the topic is created.
	ReplicationFactor int16
	MinInsyncReplicas int
	// TransactionalIDPrefix is followed by the shard number, e.g. "coordinatord-c1-shard-":
	// the ids under which earlier versions wrote each shard, which a load still fences so that
	// a node of such a version cannot write on.
	TransactionalIDPrefix string
	// NodeTransactionalIDPrefix is followed by a node id, e.g. "coordinatord-c1-node-": the
	// ids of the node producers that write every shard's rounds (nodewriter.go). NodeID is this
	// node's, as the ownership records name it.
	NodeTransactionalIDPrefix string
	NodeID                    int32
	// TransactionTimeout bounds how long a dead owner's open transaction holds back the last
	// stable offset, and so the next owner's load.
	TransactionTimeout time.Duration
	// MaxBatchBytes caps the encoded size of one appended batch (message.max.bytes), as the
	// local log does, so that a client cannot make a write the topic would refuse and so fail
	// the shard; 0 means Kafka's default.
	MaxBatchBytes int
	Logger        *zap.Logger
}

// defaultMaxBatchBytes is message.max.bytes' default (Kafka's).
const defaultMaxBatchBytes = 1048588

// batchSlack is room above MaxBatchBytes for the Kafka batch header and per-record framing, in
// the topic's max.message.bytes and the producer's batch limit, so that any batch CheckBatch
// accepts is one the broker takes.
const batchSlack = 4096

// Backend opens shard logs on the upstream topic.
type Backend struct {
	opts Options
	lg   *zap.Logger

	wOnce sync.Once
	w     *nodeWriter
}

// New checks the topic (creating it compacted if it is missing) and returns the backend.
func New(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.TransactionTimeout <= 0 {
		opts.TransactionTimeout = 30 * time.Second
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = defaultMaxBatchBytes
	}
	b := &Backend{opts: opts, lg: opts.Logger}
	if err := b.ensureTopic(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Backend) ensureTopic(ctx context.Context) error {
	kc, err := kgo.NewClient(b.opts.Client...)
	if err != nil {
		return err
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	topic := b.opts.Topic
	configs := map[string]*string{
		"cleanup.policy":      kadm.StringPtr("compact"),
		"min.insync.replicas": kadm.StringPtr(strconv.Itoa(b.opts.MinInsyncReplicas)),
		"max.message.bytes":   kadm.StringPtr(strconv.Itoa(b.opts.MaxBatchBytes + batchSlack)),
	}
	res, err := adm.CreateTopic(ctx, b.opts.Partitions, b.opts.ReplicationFactor, configs, topic)
	if err == nil {
		err = res.Err
	}
	if err == nil {
		b.lg.Info("created the state topic", zap.String("topic", topic), zap.Int32("partitions", b.opts.Partitions),
			zap.Int16("replication.factor", b.opts.ReplicationFactor))
		return nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create state topic %s: %w", topic, err)
	}
	// It exists: it must be shaped as we would have created it, or shards would map to the
	// wrong partitions or compaction would not keep what replay needs.
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("describe state topic %s: %w", topic, err)
	}
	td := details[topic]
	if td.Err != nil {
		return fmt.Errorf("describe state topic %s: %w", topic, td.Err)
	}
	if n := int32(len(td.Partitions)); n != b.opts.Partitions {
		return fmt.Errorf("state topic %s has %d partitions, offsets.topic.num.partitions is %d", topic, n, b.opts.Partitions)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("describe state topic %s configs: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return fmt.Errorf("describe state topic %s configs: %w", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.MaybeValue() != "compact" {
			return fmt.Errorf("state topic %s has cleanup.policy=%s, want compact (delete would lose state)", topic, c.MaybeValue())
		}
	}
	return nil
}

// Open implements log.Backend. The producers are created here; Load fences the previous owner.
func (b *Backend) Open(shard int32, cb log.Callbacks) (log.Log, error) {
	if shard < 0 || shard >= b.opts.Partitions {
		return nil, fmt.Errorf("shard %d out of range (%d partitions)", shard, b.opts.Partitions)
	}
	l := &kafkaLog{b: b, w: b.writer(), shard: shard, cb: cb, lg: b.lg.With(zap.Int32("shard", shard)),
		stop: make(chan struct{}), abandonedCh: make(chan struct{})}
	for i := 0; i < shardProducers; i++ {
		opts := b.producerOpts(b.transactionalID(shard, i))
		kc, err := kgo.NewClient(opts...)
		if err != nil {
			for _, c := range l.kcs {
				c.Close()
			}
			return nil, err
		}
		l.kcs = append(l.kcs, kc)
		l.producerOpts = append(l.producerOpts, opts)
	}
	return l, nil
}

// transactionalID is the id of a shard's i-th producer: the first keeps the name of the single
// producer of earlier versions, prefix+shard, so that they and this version fence each other
// through it; the others add "-i".
func (b *Backend) transactionalID(shard int32, i int) string {
	id := b.opts.TransactionalIDPrefix + strconv.Itoa(int(shard))
	if i > 0 {
		id += "-" + strconv.Itoa(i)
	}
	return id
}

// shardProducers is how many transactional producers a shard's rounds alternate between. A
// round's produce under transactions v2 is held by the broker until the previous transaction
// of the same transactional id has its markers written (CONCURRENT_TRANSACTIONS, retried
// inside the broker every add.partitions.to.txn.retry.backoff.ms, 20 ms), which the EndTxn
// answer does not wait for: with one producer nearly every round paid that wait (a produce of
// 10-19 ms against an EndTxn of 1-2 ms, BenchmarkBrokerShardRounds). With two, a round's
// transaction id last ended a transaction one round earlier, whose markers are written by then.
// Rounds stay one at a time, in order: a round begins only after the previous one's EndTxn is
// answered. Tests change it.
var shardProducers = 2

// shardMetadataMinAge is the shard producer's kgo.MetadataMinAge. Under transactions v2
// (KIP-890, Kafka 4.0+) a produce begun while the previous transaction's markers are still being
// written is answered CONCURRENT_TRANSACTIONS once the broker's own retries
// (add.partitions.to.txn.retry.backoff.max.ms, 100 ms) run out, and kgo retries such a
// produce only after a metadata update, which it spaces by MetadataMinAge: 5 s by default,
// so a round that met it once held its shard's acknowledgements up to 5 s (the 5 s p99 of
// issue 18's benchmark). Metadata is only refreshed on such errors, so a short age costs a
// Metadata request per retry. Tests change it.
var shardMetadataMinAge = 100 * time.Millisecond

type kafkaLog struct {
	b     *Backend
	w     *nodeWriter
	shard int32
	cb    log.Callbacks
	// kcs are the shard's own producers (shardProducers), which only fence: the ids earlier
	// versions wrote the shard under. Replaced only by Load, under mu.
	kcs []*kgo.Client
	lg  *zap.Logger

	producerOpts [][]kgo.Opt
	// pids are the producer ids the load's fences got (kcs', then those of other nodes'
	// producers, fenceClients), for telling transactions of the shard's writers from others'.
	pids         []int64
	fenceClients []*kgo.Client
	// replayGate (log.ReplayGate) is called between the marker and the replay.
	replayGate func() error

	mu      sync.Mutex
	next    int64 // logical offset of the next appended record
	pending []pendingBatch
	failed  error
	closed  bool
	started bool
	// abandoned: Abandon closed the producers; Close must not close them again.
	abandoned bool

	stop     chan struct{}
	stopOnce sync.Once
	// abandonedCh is closed by Abandon; release is the shard's release job once queued
	// (nodeWriter.mu).
	abandonedCh chan struct{}
	release     *ownershipJob
}

type pendingBatch struct {
	recs []log.Record
	last int64
}

// loadMarkerKey is the key of the record each Load writes to fence and to find the end of the
// partition. Record keys start with a two-byte kind, so a one-byte key never collides with
// one; being the newest record of its key, compaction always keeps the latest marker.
var loadMarkerKey = []byte{0xff}

// Load fences the shard's earlier writers and replays the partition from the start under
// read_committed: it fences the shard's own ids (earlier versions' writers), claims the shard
// (an ownership record and the load marker, in a round of the node's transaction), replays up
// to the marker, fences every other node whose latest ownership record there is a claim, and,
// if it fenced any, writes a second marker and replays up to it (a fenced node's round may
// have committed between the first marker and the fence). Offsets handed out afterwards
// continue after the last marker, so they stay increasing across owners.
func (l *kafkaLog) Load(fn func(offset int64, rec log.Record) error) (int64, error) {
	// Aborted before it began (the shard closed while it waited for a load slot): not one
	// request may leave, or an InitProducerId could fence the shard's new owner.
	if l.aborted() {
		return 0, log.ErrClosed
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	p := &loadProgress{start: time.Now()}
	p.set(phaseFence, 1)
	defer l.reportSlowLoad(ctx, p)()
	end, err := l.fenceAndMark(ctx, p)
	if err != nil {
		return 0, err
	}
	p.end.Store(end)
	if l.replayGate != nil {
		p.set(phaseReplayGate, p.attempt.Load())
		if err := l.replayGate(); err != nil {
			return 0, err
		}
	}
	p.set(phaseReplay, p.attempt.Load())
	rp, err := l.newReplayer(p)
	if err != nil {
		return 0, err
	}
	defer rp.close()
	if err := rp.until(ctx, end, fn); err != nil {
		return 0, err
	}
	var claimants []int32
	for node, claim := range rp.owners {
		if claim && node != l.b.opts.NodeID {
			claimants = append(claimants, node)
		}
	}
	if len(claimants) > 0 {
		slices.Sort(claimants)
		p.set(phaseFence, p.attempt.Load())
		if err := l.fenceNodes(ctx, claimants); err != nil {
			return 0, err
		}
		p.set(phaseMarker, p.attempt.Load())
		if end, err = l.claim(ctx); err != nil {
			return 0, fmt.Errorf("shard %d: second load marker: %w", l.shard, err)
		}
		p.end.Store(end)
		p.set(phaseReplay, p.attempt.Load())
		if err := rp.until(ctx, end, fn); err != nil {
			return 0, err
		}
	}
	l.lg.Info("shard loaded from the state topic", zap.Int64("records", rp.n), zap.Int64("end_offset", end),
		zap.Int32s("fenced_nodes", claimants), zap.Duration("took", time.Since(p.start)))
	l.mu.Lock()
	l.next = end + 2 // past the marker and its commit
	l.started = true
	failed := l.failed
	l.mu.Unlock()
	if failed != nil {
		// The node's producers broke after the claim: the shard may not serve on them.
		return 0, failed
	}
	return end + 2, nil
}

// claim writes the shard's claim and load marker in a round of the node's writer and returns
// the marker's offset. A claim whose round committed attaches the shard to the writer, so
// that Close releases it even if the load goes no further.
func (l *kafkaLog) claim(ctx context.Context) (int64, error) {
	j := l.w.submit(l, false)
	select {
	case err := <-j.done:
		if err != nil {
			return 0, err
		}
		return j.marker, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// fenceNodes bumps the epoch of both producers of each node: InitProducerId aborts what the
// node has open under the id (or waits until its commit is complete), and the node's next
// produce or EndTxn fails fenced, so it drops every shard it holds. Retried until done or the
// load is aborted: a load may not go on without it.
func (l *kafkaLog) fenceNodes(ctx context.Context, nodes []int32) error {
	backoff := loadRetryBackoffMin
	for _, node := range nodes {
		for i := 0; i < shardProducers; i++ {
			id := l.b.nodeTransactionalID(node, i)
			for {
				if err := l.fenceID(ctx, id); err == nil {
					break
				} else if ctx.Err() != nil {
					return log.ErrClosed
				} else if class := kerrclass.OfError(kmsg.InitProducerID.Int16(), err); class.Action() != kerrclass.Retry &&
					class.Action() != kerrclass.Abort && !isNetworkError(err) && !errors.Is(err, context.DeadlineExceeded) {
					return fmt.Errorf("shard %d: fence node %d (%s): %w", l.shard, node, id, err)
				} else {
					l.lg.Warn("load could not fence an earlier owner's producer; retrying", zap.String("transactional_id", id),
						zap.Int32("owner_node", node), zap.Error(err), zap.Duration("backoff", backoff))
				}
				select {
				case <-ctx.Done():
					return log.ErrClosed
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, loadRetryBackoffMax)
			}
		}
		l.lg.Info("fenced an earlier owner of the shard that had not released it", zap.Int32("owner_node", node))
	}
	return nil
}

func (l *kafkaLog) fenceID(ctx context.Context, id string) error {
	kc, err := kgo.NewClient(l.b.producerOpts(id)...)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, l.b.opts.TransactionTimeout)
	defer cancel()
	pid, _, err := kc.ProducerID(sctx)
	if err != nil {
		kc.Close()
		return err
	}
	// Kept until the log closes: it is what aborts a transaction of that producer left
	// hanging below the marker (reportOpenTransactions).
	l.mu.Lock()
	l.pids = append(l.pids, pid)
	l.fenceClients = append(l.fenceClients, kc)
	l.mu.Unlock()
	return nil
}

func (l *kafkaLog) aborted() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// Phases of a load, as its reports name them.
const (
	phaseFence  = "fence"  // InitProducerId under each of the shard's transactional ids
	phaseMarker = "marker" // the load marker's transaction
	phaseReplay = "replay" // reading the partition up to the marker
	// phaseReplayGate: fenced and marked, waiting for leave to replay (a load slot).
	phaseReplayGate = "load slot"
)

// loadProgress is where a load is, for the report of a load that takes long.
type loadProgress struct {
	start   time.Time
	phase   atomic.Pointer[string]
	attempt atomic.Int64 // of the fence and marker
	since   atomic.Int64 // UnixNano when the phase began
	records atomic.Int64 // replayed so far
	end     atomic.Int64 // the marker's offset, once written
}

func (p *loadProgress) set(phase string, attempt int64) {
	p.since.Store(time.Now().UnixNano())
	p.attempt.Store(attempt)
	p.phase.Store(&phase)
}

// loadReportEvery is how often a load that has not finished says where it is. Tests change it.
var loadReportEvery = 5 * time.Second

// reportSlowLoad logs, every loadReportEvery until the returned stop is called, where the load
// is: the fence and the marker end (each step is bounded and the attempt retried), the replay
// waits on the upstream's answers, and none of it may be silent. The
// replay is INFO while it makes progress; a load waiting on the upstream is a WARN an operator
// can act on: the phase says what it waits for.
func (l *kafkaLog) reportSlowLoad(ctx context.Context, p *loadProgress) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(loadReportEvery)
		defer t.Stop()
		lastRecords := int64(-1)
		var diagnosed time.Time
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			phase, records := *p.phase.Load(), p.records.Load()
			if phase == phaseReplayGate {
				continue // the gate's owner (the runtime's load slots) reports that wait
			}
			fields := []zap.Field{zap.String("phase", phase), zap.Int64("attempt", p.attempt.Load()),
				zap.Duration("elapsed", time.Since(p.start)), zap.Duration("phase_elapsed", time.Since(time.Unix(0, p.since.Load())))}
			if phase == phaseReplay {
				fields = append(fields, zap.Int64("records", records), zap.Int64("end_offset", p.end.Load()))
				if records != lastRecords {
					lastRecords = records
					l.lg.Info("loading shard from the state topic", fields...)
					continue
				}
			}
			l.lg.Warn("shard load is waiting on the state topic", append(fields, zap.String("waiting_for", waitingFor(phase)))...)
			if phase == phaseReplay && time.Since(diagnosed) >= loadDiagnoseEvery {
				diagnosed = time.Now()
				l.reportOpenTransactions(ctx, p.end.Load())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// loadDiagnoseEvery spaces the looks for open transactions of a replay that makes no progress
// (the first comes with its first report of no progress). Tests change it.
var loadDiagnoseEvery = 30 * time.Second

// reportOpenTransactions deals with the transactions open in the shard's partition that began
// below the load marker (DescribeProducers on its leader): under read_committed a replay cannot
// read past the first of them. The load's fence ended every transaction the coordinator knew
// under the shard's ids, so one of the shard's own producer ids still open there is a hanging
// transaction: its records reached the partition but the coordinator does not know it (seen
// after an upstream broker restart: a round's records written just before the broker stopped,
// the transactional id Empty after it, TestKafkaLogBackendUpstreamRestartLosesNoAcknowledgedCommit),
// so nothing would ever end it. Such a one is aborted with that producer (abortHanging). Any
// other is named with the command an operator ends it with.
func (l *kafkaLog) reportOpenTransactions(ctx context.Context, end int64) {
	kc, err := kgo.NewClient(l.b.opts.Client...)
	if err != nil {
		return
	}
	defer kc.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	topic := l.b.opts.Topic
	described, err := kadm.NewClient(kc).DescribeProducers(dctx, kadm.TopicsSet{topic: {l.shard: {}}})
	if err != nil {
		l.lg.Warn("could not look for open transactions holding the shard's load (DescribeProducers)", zap.Error(err))
		return
	}
	l.mu.Lock()
	pids := l.pids
	l.mu.Unlock()
	for _, dp := range described.SortedProducers() {
		if dp.Partition != l.shard || dp.CurrentTxnStartOffset < 0 || dp.CurrentTxnStartOffset >= end {
			continue
		}
		fields := []zap.Field{zap.Int64("producer_id", dp.ProducerID), zap.Int16("producer_epoch", dp.ProducerEpoch),
			zap.Int64("txn_start_offset", dp.CurrentTxnStartOffset), zap.Int64("end_offset", end),
			zap.Time("last_produce", time.UnixMilli(dp.LastTimestamp)),
			zap.String("abort_with", fmt.Sprintf("kafka-transactions.sh --bootstrap-server <upstream.bootstrap.servers> abort --topic %s --partition %d --start-offset %d",
				topic, l.shard, dp.CurrentTxnStartOffset))}
		own := slices.Contains(l.w.nodePIDs(), dp.ProducerID)
		if i := slices.Index(pids, dp.ProducerID); i >= 0 || own {
			var err error
			if own {
				err = l.w.abortOwn(ctx, l, dp.ProducerID)
			} else {
				err = l.abortHanging(ctx, i)
			}
			if err == nil && l.stillOpen(ctx, kc, dp) {
				err = errors.New("the transaction is still open after the abort")
			}
			if err != nil {
				l.lg.Warn("could not abort a transaction of this shard's own producer left open below the load marker; abort it by hand",
					append(fields, zap.Error(err))...)
				continue
			}
			l.lg.Warn("aborted a transaction of this shard's own producer left open below the load marker (its coordinator no longer knew it)", fields...)
			continue
		}
		l.lg.Warn("a transaction open below the load marker holds the shard's load back; if it stays open past its producer's transaction timeout, abort it", fields...)
	}
}

// stillOpen reports whether the partition still has dp's transaction open (or cannot tell)
// after the transaction timeout: EndTxn is answered once the abort is decided, before its
// markers are written, so the first looks after it may still see it open (the e2e runs did,
// 20-200 ms before the load went on).
func (l *kafkaLog) stillOpen(ctx context.Context, kc *kgo.Client, dp kadm.DescribedProducer) bool {
	ctx, cancel := context.WithTimeout(ctx, l.b.opts.TransactionTimeout)
	defer cancel()
	for {
		if !l.openNow(ctx, kc, dp) {
			return false
		}
		select {
		case <-ctx.Done():
			return true
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *kafkaLog) openNow(ctx context.Context, kc *kgo.Client, dp kadm.DescribedProducer) bool {
	described, err := kadm.NewClient(kc).DescribeProducers(ctx, kadm.TopicsSet{l.b.opts.Topic: {l.shard: {}}})
	if err != nil {
		return true
	}
	for _, now := range described.SortedProducers() {
		if now.Partition == l.shard && now.ProducerID == dp.ProducerID && now.CurrentTxnStartOffset == dp.CurrentTxnStartOffset {
			return true
		}
	}
	return false
}

// abortHanging ends the partition's open transaction of the shard's i-th producer id: that
// producer, at the epoch the fence gave it, adds the partition to a transaction of its own and
// aborts it. The abort marker the coordinator then writes ends whatever transaction of that
// producer id the partition has open, whatever its epoch, as aborted. Its records were never
// acknowledged: a round is acknowledged only once the coordinator answered its commit, which it
// does after logging the decision, and a decided commit is completed by the coordinator across
// restarts and holds the fence's InitProducerId back until it is (CONCURRENT_TRANSACTIONS), so
// a transaction still open once the fence returned was never committed. Its own record is a
// load marker, which a replay skips.
func (l *kafkaLog) abortHanging(ctx context.Context, i int) error {
	actx, cancel := context.WithTimeout(ctx, 2*l.b.opts.TransactionTimeout)
	defer cancel()
	l.mu.Lock()
	kc := l.kcs[0]
	if i < len(l.kcs) {
		kc = l.kcs[i]
	} else {
		kc = l.fenceClients[i-len(l.kcs)]
	}
	l.mu.Unlock()
	if err := kc.BeginTransaction(); err != nil {
		return err
	}
	produced := make(chan error, 1)
	kc.Produce(actx, &kgo.Record{Key: loadMarkerKey, Value: []byte("abort " + time.Now().UTC().Format(time.RFC3339Nano)), Partition: l.shard},
		func(_ *kgo.Record, err error) { produced <- err })
	if err := kc.Flush(actx); err != nil {
		kc.AbortBufferedRecords(context.Background())
	}
	perr := <-produced
	if err := endTransaction(actx, kc, l.b.opts.Topic, l.shard, perr == nil, kgo.TryAbort); err != nil {
		return fmt.Errorf("abort: %w (produce: %v)", err, perr)
	}
	if perr != nil {
		// The abort may have had no partition to end (kgo sends none for a transaction that
		// never reached one): stillOpen tells.
		l.lg.Info("the produce of the abort of a hanging transaction failed", zap.Error(perr))
	}
	return nil
}

// SetReplayGate implements log.ReplayGate: the fence and the marker wait on the upstream, not
// on the CPU, so they do not hold a load slot.
func (l *kafkaLog) SetReplayGate(gate func() error) { l.replayGate = gate }

func waitingFor(phase string) string {
	switch phase {
	case phaseFence:
		return "InitProducerId: the upstream's transaction coordinator (loading, moving, or finishing the previous owner's transaction)"
	case phaseMarker:
		return "the load marker's produce and commit: the partition's leader and the transaction coordinator"
	default:
		return "fetches up to the load marker: the partition's leader, or an open transaction below the marker holding back its last stable offset"
	}
}

// Bounds of the pause between two attempts of a load's fence and marker: short enough that a
// shard is back soon after its upstream is, long enough not to hammer a struggling cluster.
const (
	loadRetryBackoffMin = 100 * time.Millisecond
	loadRetryBackoffMax = 5 * time.Second
)

// fenceAndMark fences the previous owner and writes the load marker, and returns the marker's
// offset. Each step of an attempt is bounded by the transaction timeout (tryFenceAndMark): kgo
// retries CONCURRENT_TRANSACTIONS on InitProducerId and EndTxn for as long as the context lives,
// silently, so an attempt given the load's own context could wait forever on a coordinator
// that keeps answering it. A failure whose KIP-1050 action is retry, or abort and repeat (the
// marker timed out on a slow or unreachable upstream, the partition has no leader yet, the
// coordinator moved), or an attempt that ran out of time, has made nothing visible and
// acknowledged nothing, so the attempt is
// repeated with a new producer until it succeeds or the log is closed: the shard stays LOADING
// (COORDINATOR_LOAD_IN_PROGRESS) and clients retry, as while the replay waits for the upstream,
// instead of going FAILED until the process restarts. Being fenced (another owner loaded
// meanwhile) or a configuration error (authorization, versions) is returned: repeating cannot
// help.
func (l *kafkaLog) fenceAndMark(ctx context.Context, p *loadProgress) (int64, error) {
	backoff := loadRetryBackoffMin
	for attempt := 1; ; attempt++ {
		// An abort between attempts must stop the next one before it sends anything.
		if l.aborted() {
			return 0, log.ErrClosed
		}
		p.set(phaseFence, int64(attempt))
		end, api, bound, err := l.tryFenceAndMark(ctx, p)
		timedOut := bound > 0
		if err == nil {
			return end, nil
		}
		if ctx.Err() != nil {
			return 0, log.ErrClosed
		}
		err = fmt.Errorf("shard %d: %w", l.shard, err)
		if isFenced(err) {
			return 0, fmt.Errorf("%w: %w", log.ErrFailed, err)
		}
		class := categoryOf(api, err)
		if act := class.Action(); act != kerrclass.Retry && act != kerrclass.Abort && !isNetworkError(err) && !timedOut {
			return 0, err
		}
		fields := []zap.Field{zap.Error(err), zap.String("class", class.String()), zap.String("phase", *p.phase.Load()),
			zap.Int("attempt", attempt), zap.Duration("elapsed", time.Since(p.start)), zap.Duration("backoff", backoff)}
		if timedOut {
			fields = append(fields, zap.Duration("attempt_timeout", bound),
				zap.String("waiting_for", waitingFor(*p.phase.Load())))
		}
		l.lg.Warn("load could not write its marker to the state topic; retrying with a new producer", fields...)
		if err := l.renewProducer(); err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, log.ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, loadRetryBackoffMax)
	}
}

// tryFenceAndMark is one attempt; api is the request whose answer the error came in, and
// bound, when the attempt ran out of time, the deadline it ran out of. Each InitProducerId has
// the transaction timeout: the coordinator aborts a previous owner's open transaction at once,
// so a longer wait means it is stuck. The marker's transaction has twice that: its record gives
// up after one (RecordDeliveryTimeout, with kgo's own reason, which says more than a deadline),
// and its commit or abort has the other.
func (l *kafkaLog) tryFenceAndMark(ctx context.Context, p *loadProgress) (end int64, api int16, bound time.Duration, err error) {
	step := func(d time.Duration, fn func(context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		err := fn(sctx)
		if err != nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
			bound = d
		}
		return err
	}
	// Fencing: InitProducerId bumps the epoch and aborts the old owner's open transaction (and
	// whatever an earlier attempt of ours left open), so nothing that was not committed can
	// appear after our marker. Every producer of the shard is fenced before the marker: the old
	// owner may have a transaction under any of them.
	timeout := l.b.opts.TransactionTimeout
	pids := make([]int64, 0, len(l.kcs))
	for _, kc := range l.kcs {
		if err := step(timeout, func(ctx context.Context) error {
			id, _, err := kc.ProducerID(ctx)
			pids = append(pids, id)
			return inAPI(kmsg.InitProducerID, err)
		}); err != nil {
			return 0, kmsg.InitProducerID.Int16(), bound, fmt.Errorf("init producer: %w", err)
		}
	}
	l.mu.Lock()
	l.pids = pids
	l.mu.Unlock()
	p.set(phaseMarker, p.attempt.Load())
	if err := step(2*timeout, func(ctx context.Context) (err error) { end, err = l.claim(ctx); return err }); err != nil {
		return 0, kmsg.Produce.Int16(), bound, fmt.Errorf("write load marker: %w", err)
	}
	return end, -1, 0, nil
}

// renewProducer replaces the producers after a failed attempt. Fresh ones start from a known
// state whatever the failure left behind (a transaction whose abort did not get through, a
// producer id kgo marked failed); their InitProducerId fences the old ones.
func (l *kafkaLog) renewProducer() error {
	kcs := make([]*kgo.Client, 0, len(l.producerOpts))
	for _, opts := range l.producerOpts {
		kc, err := kgo.NewClient(opts...)
		if err != nil {
			for _, c := range kcs {
				c.Close()
			}
			return err
		}
		kcs = append(kcs, kc)
	}
	l.mu.Lock()
	if l.closed || l.abandoned {
		l.mu.Unlock()
		for _, c := range kcs {
			c.Close()
		}
		return log.ErrClosed
	}
	old := l.kcs
	l.kcs = kcs
	l.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
	return nil
}

// isNetworkError reports a connection that failed or timed out, which kgo hands back as it is
// and which the Java client raises as the retriable NetworkException or TimeoutException.
func isNetworkError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// loadFetchBytes caps each fetch of a load (the partition's share and the whole response),
// and so, with one fetch in flight and one buffered, what a load holds besides what the shard
// keeps. kgo's default partition share, 1 MiB, measured best (BenchmarkBrokerLoad): 256 KiB
// pays four times the round trips, and 4 MiB or more was slower too, presumably because
// fewer, longer decoding steps overlap less of the replay of the previous fetch. Tests change
// it (no test of this package runs in parallel).
var loadFetchBytes int32 = 1 << 20

// loadRecycle turns recordSlices on; off only in BenchmarkBrokerLoad's baseline and tests.
var loadRecycle = true

// recordSlices is a kgo.PoolRecords. kgo decodes each fetched batch into a fresh []kgo.Record
// (about 170 bytes per record: a 1M-record load allocated 170 MB of them, and collecting that
// was a quarter of the load's CPU); a load recycles each record once it is replayed, and kgo
// puts a batch's slice back here when all of its records are, so a load reuses the few slices
// in flight. Only the Record structs are pooled: the keys and values handed to the shard point
// into the fetched (or decompressed) bytes, which are not, so the shard may keep them.
type recordSlices struct{ p sync.Pool }

func (rs *recordSlices) GetRecords(n int) []kgo.Record {
	if s, ok := rs.p.Get().(*[]kgo.Record); ok && cap(*s) >= n {
		return (*s)[:n]
	}
	return make([]kgo.Record, n)
}

func (rs *recordSlices) PutRecords(s []kgo.Record) { rs.p.Put(&s) }

var loadRecordSlices = &recordSlices{}

// replayer reads the partition in order, under read_committed, handing the shard its records
// and keeping the latest ownership record of each node.
type replayer struct {
	l      *kafkaLog
	p      *loadProgress
	from   int64 // where the next until starts
	n      int64 // records handed to the shard
	owners map[int32]bool
}

func (l *kafkaLog) newReplayer(p *loadProgress) (*replayer, error) {
	return &replayer{l: l, p: p, owners: map[int32]bool{}}, nil
}

func (rp *replayer) close() {}

// until consumes the partition from where the previous call stopped up to offset end
// (exclusive: end is a load marker).
func (rp *replayer) until(ctx context.Context, end int64, fn func(int64, log.Record) error) error {
	l := rp.l
	start := kgo.NewOffset().AtStart()
	if rp.from > 0 {
		start = kgo.NewOffset().At(rp.from)
	}
	opts := append(append([]kgo.Opt{}, l.b.opts.Client...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.b.opts.Topic: {l.shard: start}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxPartitionBytes(loadFetchBytes),
		kgo.FetchMaxBytes(loadFetchBytes),
	)
	if loadRecycle {
		opts = append(opts, kgo.WithPools(loadRecordSlices))
	}
	cc, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cc.Close()
	for {
		fs := cc.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return log.ErrClosed
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("shard %d: read state topic: %w", l.shard, ferr)
		}
		done := false
		var cbErr error
		fs.EachRecord(func(r *kgo.Record) {
			if loadRecycle {
				defer r.Recycle()
			}
			if done || cbErr != nil {
				return
			}
			if r.Offset >= end {
				done = true
				return
			}
			if node, claim, ok := parseOwnership(r.Key, r.Value); ok {
				rp.owners[node] = claim
				return
			}
			rec, ok, err := fromKafka(r.Key, r.Value)
			if err != nil {
				cbErr = fmt.Errorf("shard %d: state topic offset %d: %w", l.shard, r.Offset, err)
				return
			}
			if !ok {
				return
			}
			rp.n++
			cbErr = fn(r.Offset, rec)
		})
		if cbErr != nil {
			return cbErr
		}
		if done {
			rp.from = end
			return nil
		}
		rp.p.records.Store(rp.n)
	}
}

// recordOverhead bounds a Kafka record's framing around its key and value (length, attributes,
// timestamp and offset deltas, key and value lengths, header count) plus our format byte.
const recordOverhead = 1 + 5 + 1 + 10 + 5 + 5 + 5 + 5 + 1

// CheckBatch implements log.BatchChecker: a batch larger than MaxBatchBytes once encoded is
// refused before the shard applies it, so it never reaches the topic.
func (l *kafkaLog) CheckBatch(recs []log.Record) error {
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value) + recordOverhead
	}
	if n > l.b.opts.MaxBatchBytes {
		return fmt.Errorf("%w: shard %d: %d records, about %d bytes encoded, message.max.bytes is %d",
			log.ErrBatchTooLarge, l.shard, len(recs), n, l.b.opts.MaxBatchBytes)
	}
	return nil
}

// Append implements log.Log: the batch joins the next round of the writer.
func (l *kafkaLog) Append(recs []log.Record) (int64, error) {
	if err := l.CheckBatch(recs); err != nil {
		return 0, err
	}
	for _, r := range recs {
		if len(r.Key) > 0 && r.Key[0] == loadMarkerKey[0] {
			return 0, fmt.Errorf("shard %d: key %x is reserved by the kafka log", l.shard, r.Key)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.failed != nil:
		return 0, l.failed
	case l.closed:
		return 0, log.ErrClosed
	case !l.started:
		return 0, fmt.Errorf("shard %d: append before load", l.shard)
	}
	l.next += int64(len(recs))
	last := l.next - 1
	l.pending = append(l.pending, pendingBatch{recs: recs, last: last})
	if l.w != nil {
		l.w.appended.Add(1)
		l.w.wake()
	}
	return last, nil
}

// abortedRound is a round whose records could not be produced and whose transaction was
// aborted: none of it will ever be visible, so the shard may drop it and go on. A failure of
// the commit itself is never one: its outcome is unknown.
type abortedRound struct{ err error }

func (e *abortedRound) Error() string { return e.err.Error() }
func (e *abortedRound) Unwrap() error { return e.err }

// lose reports a round that was aborted (and everything queued behind it) through Lost, so the
// shard drops what it computed from it; the log refuses appends until resume.
func (l *kafkaLog) lose(round []pendingBatch, cause error, class kerrclass.Category) {
	l.mu.Lock()
	werr := &log.WriteError{Shard: l.shard, First: round[0].last - int64(len(round[0].recs)) + 1, Last: l.next - 1, Err: cause}
	l.failed = werr
	l.pending = nil
	l.mu.Unlock()
	l.lg.Warn("state topic write aborted; the shard drops the round and goes on", zap.Error(werr), zap.String("class", class.String()))
	l.cb.Lost(werr, func() {
		l.mu.Lock()
		if l.failed == error(werr) {
			l.failed = nil
		}
		l.mu.Unlock()
	})
}

// apiError is an error met in the answer to one kind of request (or while kgo sent it), so
// that it is classed by that API's KIP-1050 table: INVALID_TXN_STATE, say, is abortable in a
// Produce answer (abort the round, the producer lives) and application-recoverable in an EndTxn
// or InitProducerId answer (the producer is finished).
type apiError struct {
	api int16
	err error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

// inAPI tags err with the request it came in; nil stays nil.
func inAPI(api kmsg.Key, err error) error {
	if err == nil {
		return nil
	}
	return &apiError{api: api.Int16(), err: err}
}

// categoryOf is err's KIP-1050 category by the table of the request it came in (the first
// tagged one in its chain: a round's cause comes before the failure of its abort), or by api's
// when nothing in it is tagged.
func categoryOf(api int16, err error) kerrclass.Category {
	var ae *apiError
	if errors.As(err, &ae) {
		return kerrclass.OfError(ae.api, ae.err)
	}
	return kerrclass.OfError(api, err)
}

// isFenced reports that this node's producers are finished: another owner fenced them (or the
// coordinator no longer knows them), so they can never write again and a load must not go on.
// Every error in err's chain is looked at by the table of the request it came in: in a round
// whose produce failed and whose abort was then refused, the abort's answer is the one that
// says so. An error of no known request (kgo's BeginTransaction hands back whatever failed the
// producer id earlier) is classed by EndTxn's table, which calls the most codes
// application-recoverable.
//
// INVALID_PRODUCER_EPOCH counts as fenced on every API. On EndTxn and InitProducerId a current
// coordinator answers PRODUCER_FENCED for a fenced producer and only an old one this code, which
// then means the same. On a Produce the partition leader answers it for a fenced producer too
// (KAFKA-10687: PRODUCER_FENCED is turned into it there); Kafka's producer treats it as
// abortable and lets the abort tell a fence from a transaction timeout (KIP-588), but kgo
// re-initializes the producer after it only without transactions v2, and under v2 (Kafka 4.x)
// refuses every later BeginTransaction: the producers have to go either way.
func isFenced(err error) bool { return fencedIn(kmsg.EndTxn.Int16(), err) }

func fencedIn(api int16, err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *apiError:
		return fencedIn(e.api, e.err)
	case *kerr.Error:
		return e.Code == kerr.ProducerFenced.Code || e.Code == kerr.InvalidProducerEpoch.Code ||
			kerrclass.Of(api, e.Code) == kerrclass.ApplicationRecoverable
	case interface{ Unwrap() []error }:
		for _, w := range e.Unwrap() {
			if fencedIn(api, w) {
				return true
			}
		}
		return false
	case interface{ Unwrap() error }:
		return fencedIn(api, e.Unwrap())
	}
	return false
}

// Compact implements log.Log: Kafka's log cleaner compacts the topic, so there is nothing to do.
func (l *kafkaLog) Compact() error { return nil }

// AbortLoad implements log.LoadAborter: the fence, the marker and the replay stop waiting.
// An InitProducerId already on the wire may still bump the epoch; the owner it fences then
// reloads (its shard goes FAILED and its node retries an owned FAILED shard).
func (l *kafkaLog) AbortLoad() { l.stopOnce.Do(func() { close(l.stop) }) }

// Abandon implements log.Abandoner: the shard leaves the node's rounds at once (its queued
// records are dropped, a round in flight reports nothing more to it, and Close stops waiting),
// while its release is still written after the round in flight (nodeWriter.abandon), so that
// the next owner does not have to fence the node and every shard it keeps. The producers are
// the node's and go on.
func (l *kafkaLog) Abandon() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.mu.Lock()
	if l.abandoned {
		l.mu.Unlock()
		return
	}
	l.abandoned = true
	close(l.abandonedCh)
	kcs := l.kcs
	waiting := len(l.pending) > 0
	l.mu.Unlock()
	l.w.mu.Lock()
	waiting = waiting || l.w.inflight[l]
	l.w.mu.Unlock()
	l.w.abandon(l)
	for _, kc := range kcs {
		kc.Close()
	}
	if waiting {
		l.fail(fmt.Errorf("%w: shard %d: the round was given up: the shard was closed", log.ErrFailed, l.shard))
	}
}

// Close waits for appended records to be committed (or fail) and for the shard's release,
// which follows every round holding its records, then releases the fence's clients.
func (l *kafkaLog) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.stopOnce.Do(func() { close(l.stop) })
	if j := l.w.release(l); j != nil {
		select {
		case err := <-j.done:
			if err != nil && !errors.Is(err, log.ErrClosed) {
				l.lg.Warn("the shard's release did not reach the state topic; its next owner fences this node", zap.Error(err))
			}
		case <-l.abandonedCh:
		}
	}
	l.mu.Lock()
	kcs := append(l.kcs, l.fenceClients...)
	if l.abandoned {
		kcs = l.fenceClients
	}
	l.abandoned = true
	l.fenceClients = nil
	l.mu.Unlock()
	for _, kc := range kcs {
		kc.Close()
	}
	return nil
}

// toKafka maps a record to a Kafka key and value: the key as it is, so that compaction keeps
// the newest value per key; a tombstone as a null value, so that compaction drops it after
// delete.retention.ms; any other value behind a one-byte format prefix, so that an empty value
// stays distinct from a tombstone whatever a client library makes of zero-length bytes.
func toKafka(r log.Record) (key, value []byte) {
	if r.Value == nil {
		return r.Key, nil
	}
	v := make([]byte, 1+len(r.Value))
	v[0] = valueFormat
	copy(v[1:], r.Value)
	return r.Key, v
}

const valueFormat = 0

// fromKafka is the inverse of toKafka; ok is false for the load markers, which the shard must
// not see. A value of an unknown format is an error, not skipped: skipping would lose state.
func fromKafka(key, value []byte) (rec log.Record, ok bool, err error) {
	if len(key) > 0 && key[0] == loadMarkerKey[0] {
		return log.Record{}, false, nil
	}
	if value == nil {
		return log.Record{Key: key}, true, nil
	}
	if len(value) < 1 || value[0] != valueFormat {
		return log.Record{}, false, fmt.Errorf("value of unknown format (%d bytes)", len(value))
	}
	return log.Record{Key: key, Value: value[1:]}, true, nil
}
