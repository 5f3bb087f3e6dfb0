package kafkalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// These tests need the reference broker: test/kafka/kafka.sh start --dir D --port P, then
// KAFKALOG_KAFKA_ADDR=127.0.0.1:P go test ./internal/state/log/kafkalog.
func brokerAddr(t testing.TB) string {
	t.Helper()
	a := os.Getenv("KAFKALOG_KAFKA_ADDR")
	if a == "" {
		t.Skip("needs the reference broker: KAFKALOG_KAFKA_ADDR=host:port (test/kafka/kafka.sh start)")
	}
	return a
}

func newBackend(t testing.TB, partitions int32) *Backend {
	t.Helper()
	return newBackendTimeout(t, partitions, 10*time.Second)
}

func newBackendTimeout(t testing.TB, partitions int32, txnTimeout time.Duration) *Backend {
	t.Helper()
	addr := brokerAddr(t)
	topic := fmt.Sprintf("kafkalog-%s-%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := New(ctx, Options{
		Client: []kgo.Opt{kgo.SeedBrokers(addr)}, Topic: topic, Partitions: partitions,
		ReplicationFactor: 1, MinInsyncReplicas: 1, TransactionalIDPrefix: topic + "-shard-",
		NodeTransactionalIDPrefix: topic + "-node-", NodeID: 1,
		TransactionTimeout: txnTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// otherNode is a backend on b's topic as the node with id node: its own node producers, its own
// writer, as another coordinatord process would have.
func otherNode(b *Backend, node int32) *Backend {
	opts := b.opts
	opts.NodeID = node
	return &Backend{opts: opts, lg: b.lg}
}

type reports struct {
	durable chan int64
	failed  chan error
}

func open(t testing.TB, b *Backend, shard int32) (log.Log, *reports) {
	t.Helper()
	r := &reports{durable: make(chan int64, 1<<16), failed: make(chan error, 1)}
	l, err := b.Open(shard, log.Callbacks{Durable: func(o int64) { r.durable <- o }, Failed: func(err error) { r.failed <- err }})
	if err != nil {
		t.Fatal(err)
	}
	return l, r
}

// lossyReports also take Lost, as the shard runtime does.
type lossyReports struct {
	reports
	lost   chan *log.WriteError
	resume func() // set before the report is sent on lost
}

func openLossy(t testing.TB, b *Backend, shard int32) (log.Log, *lossyReports) {
	t.Helper()
	r := &lossyReports{reports: reports{durable: make(chan int64, 1<<16), failed: make(chan error, 1)}, lost: make(chan *log.WriteError, 1)}
	l, err := b.Open(shard, log.Callbacks{
		Durable: func(o int64) { r.durable <- o },
		Failed:  func(err error) { r.failed <- err },
		Lost:    func(err *log.WriteError, res func()) { r.resume = res; r.lost <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, r
}

// appendUntilDurable appends recs again after each lost round until one is durable, and returns
// its last offset. Tests with a short transaction timeout use it where a round that misses the
// timeout on a loaded machine is not what they are about.
func appendUntilDurable(t testing.TB, l log.Log, r *lossyReports, recs ...log.Record) int64 {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		last, err := l.Append(recs)
		if err != nil {
			t.Fatal(err)
		}
	wait:
		for {
			select {
			case o := <-r.durable:
				if o >= last {
					return last
				}
			case werr := <-r.lost:
				t.Logf("round lost, appending again: %v", werr)
				r.resume()
				break wait
			case err := <-r.failed:
				t.Fatalf("log failed: %v", err)
			case <-deadline:
				t.Fatalf("no round became durable")
			}
		}
	}
}

func load(t testing.TB, l log.Log) ([]log.Record, int64) {
	t.Helper()
	var got []log.Record
	prev := int64(-1)
	next, err := l.Load(func(o int64, rec log.Record) error {
		if o <= prev {
			t.Fatalf("offset %d after %d", o, prev)
		}
		prev = o
		got = append(got, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next <= prev {
		t.Fatalf("next offset %d not after the last loaded %d", next, prev)
	}
	return got, next
}

func waitDurable(t testing.TB, r *reports, last int64) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case o := <-r.durable:
			if o >= last {
				return
			}
		case err := <-r.failed:
			t.Fatalf("log failed: %v", err)
		case <-timeout:
			t.Fatalf("offset %d never durable", last)
		}
	}
}

func rec(k, v string) log.Record {
	r := log.Record{Key: []byte("\x00\x01" + k)}
	if v != "-" {
		r.Value = []byte(v)
	}
	return r
}

// What was reported durable is what the next owner loads, in order, tombstones and empty
// values included; the load continues offsets after everything it read.
func TestBrokerAppendLoadRoundTrip(t *testing.T) {
	b := newBackend(t, 2)
	l, r := open(t, b, 1)
	if got, _ := load(t, l); len(got) != 0 {
		t.Fatalf("fresh partition loaded %d records", len(got))
	}
	want := []log.Record{rec("a", "1"), rec("b", ""), rec("a", "2"), rec("b", "-"), rec("c", "3")}
	var last int64
	for i := 0; i < len(want); i += 2 {
		var err error
		if last, err = l.Append(want[i:min(i+2, len(want))]); err != nil {
			t.Fatal(err)
		}
	}
	waitDurable(t, r, last)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, r2 := open(t, b, 1)
	defer l2.Close()
	got, next := load(t, l2)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("loaded %v, want %v", got, want)
	}
	if got[1].Tombstone() || !got[3].Tombstone() {
		t.Fatalf("empty value and tombstone mixed up: %+v", got)
	}
	// Appends go on after a reload, at offsets past everything loaded.
	o, err := l2.Append([]log.Record{rec("d", "4")})
	if err != nil || o < next {
		t.Fatalf("append after reload: offset %d (next %d), %v", o, next, err)
	}
	waitDurable(t, r2, o)
	// The other shard's partition saw none of it.
	l0, _ := open(t, b, 0)
	defer l0.Close()
	if got, _ := load(t, l0); len(got) != 0 {
		t.Fatalf("shard 0 loaded shard 1's records: %v", got)
	}
}

// A second owner of a shard fences the first: the first's next round fails the log for good
// (the shard goes FAILED and answers NOT_COORDINATOR), and nothing it tried to append after
// the fence reaches the new owner.
func TestBrokerSecondOwnerFencesFirst(t *testing.T) {
	// The rounds of a shard alternate between its producers (shardProducers); the old owner's
	// stale round must be fenced whichever producer it lands on, so the old owner commits 1 up
	// to shardProducers rounds before the new owner loads.
	for before := 1; before <= shardProducers; before++ {
		t.Run(fmt.Sprintf("rounds_before_%d", before), func(t *testing.T) { secondOwnerFencesFirst(t, before) })
	}
}

func secondOwnerFencesFirst(t *testing.T, before int) {
	b := newBackend(t, 1)
	b2 := otherNode(b, 2)
	old, oldR := open(t, b, 0)
	defer old.Close()
	load(t, old)
	var want []log.Record
	for i := 0; i < before; i++ {
		r := rec(fmt.Sprintf("a%d", i), "before")
		last, err := old.Append([]log.Record{r})
		if err != nil {
			t.Fatal(err)
		}
		waitDurable(t, oldR, last)
		want = append(want, r)
	}

	cur, curR := open(t, b2, 0)
	defer cur.Close()
	got, _ := load(t, cur)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("new owner loaded %v", got)
	}

	if _, err := old.Append([]log.Record{rec("a", "stale")}); err != nil {
		t.Fatal(err) // the fence is discovered by the round, asynchronously
	}
	select {
	case err := <-oldR.failed:
		if !errors.Is(err, log.ErrFailed) {
			t.Fatalf("failure %v does not match log.ErrFailed", err)
		}
	case o := <-oldR.durable:
		t.Fatalf("fenced owner reported offset %d durable", o)
	case <-time.After(time.Minute):
		t.Fatal("fenced owner never failed")
	}
	if _, err := old.Append([]log.Record{rec("a", "again")}); !errors.Is(err, log.ErrFailed) {
		t.Fatalf("append after the fence: %v, want log.ErrFailed", err)
	}

	o, err := cur.Append([]log.Record{rec("b", "new")})
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, curR, o)
	third, _ := open(t, otherNode(b, 3), 0)
	defer third.Close()
	got, _ = load(t, third)
	if want = append(want, rec("b", "new")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the fence the log holds %v", got)
	}
}

// Kafka's cleaner drops superseded values and, after delete.retention.ms, tombstones; a load
// of the compacted partition must still give the state replay needs: the newest value of each
// live key and nothing of deleted ones.
func TestBrokerCompactedTombstonesReplay(t *testing.T) {
	b := newBackend(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc, err := kgo.NewClient(b.opts.Client...)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	// Make the cleaner act within seconds: tiny segments, any dirt is enough, tombstones expire.
	set := func(k, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)}
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("segment.ms", "100"), set("min.cleanable.dirty.ratio", "0.01"),
		set("delete.retention.ms", "0"), set("min.compaction.lag.ms", "0"), set("max.compaction.lag.ms", "1000")}, b.opts.Topic)
	if err == nil {
		_, err = rs.On(b.opts.Topic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	l, r := open(t, b, 0)
	load(t, l)
	var last int64
	for i := 0; i < 20; i++ {
		last, err = l.Append([]log.Record{rec("live", fmt.Sprint(i)), rec("gone", fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		waitDurable(t, r, last)
	}
	if last, err = l.Append([]log.Record{rec("gone", "-")}); err != nil {
		t.Fatal(err)
	}
	waitDurable(t, r, last)
	l.Close()
	// Roll the segment holding the tombstone (segment.ms) by writing once more a moment later,
	// then wait until the cleaner has removed the history: the partition's raw record count
	// drops. Each load writes a marker, which also keeps new segments coming.
	// Every load on the way, whatever the cleaner has done so far, must replay to the same
	// state; the test ends once the cleaner has dropped the history and the tombstone itself.
	want := map[string]string{string(rec("live", "").Key): "19"}
	for {
		raw := rawCount(t, ctx, kc, b.opts.Topic)
		l, _ := open(t, b, 0)
		got, _ := load(t, l)
		l.Close()
		if st := replayState(got); fmt.Sprint(st) != fmt.Sprint(want) {
			t.Fatalf("log with %d raw records replays to %v, want %v (records %v)", raw, st, want, got)
		}
		tombstoneGone := true
		for _, r := range got {
			tombstoneGone = tombstoneGone && string(r.Key) != string(rec("gone", "").Key)
		}
		if raw <= 2 && tombstoneGone {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the cleaner never compacted the partition (%d raw records, tombstone gone %v)", raw, tombstoneGone)
		case <-time.After(time.Second):
		}
	}
}

// replayState applies records as a shard does: the newest value per key, a tombstone deletes.
func replayState(recs []log.Record) map[string]string {
	st := map[string]string{}
	for _, r := range recs {
		if r.Tombstone() {
			delete(st, string(r.Key))
		} else {
			st[string(r.Key)] = string(r.Value)
		}
	}
	return st
}

// rawCount counts the shard's own records (not the load markers and ownership records, nor
// transaction markers) a read_committed consumer sees in partition 0, superseded ones
// included: what the cleaner has not dropped yet. (Each load and close writes three markers
// and ownership records; counting them kept the count above the test's bound between two
// passes of the cleaner.)
func rawCount(t testing.TB, ctx context.Context, kc *kgo.Client, topic string) int {
	t.Helper()
	adm := kadm.NewClient(kc)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cc, err := kgo.NewClient(append(append([]kgo.Opt{}, kgo.SeedBrokers(brokerAddr(t))),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	n := 0
	for {
		fs := cc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		reached := false
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() && (len(r.Key) == 0 || r.Key[0] != loadMarkerKey[0]) {
				n++
			}
			if r.Offset >= end.Offset-1 {
				reached = true
			}
		})
		if reached {
			return n
		}
	}
}

// The largest batch CheckBatch accepts is one the topic takes: a shard never fails on a batch
// the backend said fits.
func TestBrokerLargestAcceptedBatchIsWritten(t *testing.T) {
	b := newBackend(t, 1)
	l, r := open(t, b, 0)
	defer l.Close()
	load(t, l)
	key := []byte{0, 1, 'k'}
	value := make([]byte, b.opts.MaxBatchBytes-len(key)-recordOverhead)
	batch := []log.Record{{Key: key, Value: value}}
	if err := l.(log.BatchChecker).CheckBatch(batch); err != nil {
		t.Fatal(err)
	}
	last, err := l.Append(batch)
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, r, last)
	l2, _ := open(t, b, 0)
	defer l2.Close()
	if got, _ := load(t, l2); len(got) != 1 || len(got[0].Value) != len(value) {
		t.Fatalf("reloaded %d records", len(got))
	}
}

// A round that cannot be produced (here: the topic vanished, so every attempt times out) is
// aborted and reported through Lost for exactly the offsets not yet durable, so the shard drops
// them and reloads; it is not acknowledged, and it does not fail the shard for good.
func TestBrokerAbortedRoundIsLostNotFailed(t *testing.T) {
	b := newBackendTimeout(t, 1, 3*time.Second)
	l, r := openLossy(t, b, 0)
	defer l.Close()
	load(t, l)
	ok := appendUntilDurable(t, l, r, rec("a", "1"))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deleteStateTopic(t, ctx, b)
	last, err := l.Append([]log.Record{rec("b", "2"), rec("c", "3")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case werr := <-r.lost:
		if werr.First != ok+1 || werr.Last != last {
			t.Fatalf("lost offsets %d..%d, want %d..%d", werr.First, werr.Last, ok+1, last)
		}
	case err := <-r.failed:
		t.Fatalf("an aborted round failed the log for good: %v", err)
	case o := <-r.durable:
		t.Fatalf("offset %d reported durable on a deleted topic", o)
	case <-ctx.Done():
		t.Fatal("the round never gave up")
	}
	var werr *log.WriteError
	if _, err := l.Append([]log.Record{rec("d", "4")}); !errors.As(err, &werr) {
		t.Fatalf("append before resume: %v, want the WriteError", err)
	}
	r.resume()
	if _, err := l.Append([]log.Record{rec("d", "4")}); err != nil {
		t.Fatalf("append after resume: %v", err)
	}
}

// A load whose marker cannot be written keeps the shard loading and retries; once the topic is
// back the load completes and the log takes appends. It must not return an error: the shard
// would go FAILED until the process restarts. The topic is deleted to make every attempt fail,
// either as soon as kgo gives up on the missing topic (UNKNOWN_TOPIC_OR_PARTITION) or, when kgo
// waits for it, once the transaction timeout runs out: "records have timed out", what a slow
// upstream gives.
func TestBrokerLoadRetriesMarkerUntilTopicIsBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []kgo.Opt
		failure string
	}{
		{"UnknownTopic", nil, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"RecordTimeout", []kgo.Opt{kgo.UnknownTopicRetries(-1)}, "records have timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackendTimeout(t, 1, 3*time.Second)
			b.opts.Client = append(b.opts.Client, tc.opts...)
			core, logs := observer.New(zap.WarnLevel)
			b.lg = zap.New(core)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			deleteStateTopic(t, ctx, b)
			l, r := openLossy(t, b, 0)
			defer l.Close()
			loaded := make(chan error, 1)
			go func() {
				_, err := l.Load(func(int64, log.Record) error { return nil })
				loaded <- err
			}()
			retried := func() bool {
				for _, e := range logs.FilterMessageSnippet("retrying with a new producer").All() {
					if strings.Contains(fmt.Sprint(e.ContextMap()["error"]), tc.failure) {
						return true
					}
				}
				return false
			}
			for !retried() {
				select {
				case err := <-loaded:
					t.Fatalf("load ended while the topic is missing: %v", err)
				case <-ctx.Done():
					t.Fatalf("the load never retried after %q (logged: %v)", tc.failure, logs.All())
				case <-time.After(50 * time.Millisecond):
				}
			}
			// Deletion finishes asynchronously: creating the topic again may be refused for a while.
			for {
				_, err := New(ctx, b.opts)
				if err == nil {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("could not create the topic again: %v", err)
				case <-time.After(200 * time.Millisecond):
				}
			}
			select {
			case err := <-loaded:
				if err != nil {
					t.Fatalf("load after the topic came back: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("the load never finished after the topic came back")
			}
			appendUntilDurable(t, l, r, rec("a", "1"))
		})
	}
}

// deleteStateTopic deletes the backend's state topic under it, as an operator's mistake or a
// lost cluster would.
func deleteStateTopic(t *testing.T, ctx context.Context, b *Backend) {
	t.Helper()
	kc, err := kgo.NewClient(b.opts.Client...)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	if _, err := adm.DeleteTopic(ctx, b.opts.Topic); err != nil {
		t.Fatal(err)
	}
	// DeleteTopics answers once the controller took the deletion; the broker may still take a
	// produce until its metadata drops the topic (a run saw a round made durable after the
	// answer). The tests mean a topic that is gone.
	for {
		topics, err := adm.ListTopics(ctx, b.opts.Topic)
		if err == nil && !topics.Has(b.opts.Topic) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the state topic %s is still listed after its deletion", b.opts.Topic)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeCommits appends n offset-commit-shaped records in rounds of 1000 and returns them.
func writeCommits(t testing.TB, l log.Log, r *reports, n int) []log.Record {
	t.Helper()
	var all []log.Record
	var last int64
	for i := 0; i < n; i += 1000 {
		batch := make([]log.Record, min(1000, n-i))
		for j := range batch {
			k := i + j
			batch[j] = log.Record{Key: []byte(fmt.Sprintf("\x00\x01group-%05d/topic-%03d/%d", k/100, k%10, k%100/10)), Value: commitValue(k)}
		}
		all = append(all, batch...)
		var err error
		if last, err = l.Append(batch); err != nil {
			t.Fatal(err)
		}
		// A round holds at most what the producer buffers (kgo.MaxBufferedRecords).
		if i%5000 == 4000 || i+1000 >= n {
			waitDurable(t, r, last)
		}
	}
	return all
}

// A load decodes through a pool of kgo.Record slices reused from batch to batch, but the keys
// and values it hands the shard are the shard's to keep: after a load spanning many compressed
// batches and fetches, every record kept from it is still the one written.
func TestBrokerLoadedRecordsOutliveTheLoad(t *testing.T) {
	defer func(old int32) { loadFetchBytes = old }(loadFetchBytes)
	loadFetchBytes = 64 << 10 // several fetches, so slices are recycled while earlier records are kept
	b := newBackend(t, 1)
	l, r := open(t, b, 0)
	load(t, l)
	want := writeCommits(t, l, r, 40_000)
	l.Close()
	l2, _ := open(t, b, 0)
	defer l2.Close()
	got, _ := load(t, l2)
	if len(got) != len(want) {
		t.Fatalf("loaded %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("record %d kept from the load is %q=%x, was written %q=%x", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
}

// A load's memory is bounded by what is in flight, not by the shard's size: it allocates the
// fetched bytes, not also a kgo.Record (~170 bytes) for every record replayed. Measured against
// the same load decoding into fresh Records (loadRecycle off), so that what every load
// allocates besides (its producer and consumer, the fetched bytes) cancels out.
func TestBrokerLoadAllocatesNoRecordPerRecord(t *testing.T) {
	const n = 100_000
	b := newBackend(t, 1)
	l, r := open(t, b, 0)
	load(t, l)
	writeCommits(t, l, r, n)
	l.Close()
	defer func(old bool) { loadRecycle = old }(loadRecycle)
	// No collection runs meanwhile, so that what is measured is the reuse, not how often a
	// collection emptied the sync.Pool. A first recycled load warms the pool.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	perRecord := map[bool]float64{}
	for _, recycle := range []bool{true, false, true} {
		loadRecycle = recycle
		l, _ := open(t, b, 0)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		replayed := 0
		if _, err := l.Load(func(int64, log.Record) error { replayed++; return nil }); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		l.Close()
		if replayed != n {
			t.Fatalf("loaded %d records, want %d", replayed, n)
		}
		perRecord[recycle] = float64(after.TotalAlloc-before.TotalAlloc) / n
	}
	t.Logf("bytes allocated per record loaded: %.0f recycling the Records, %.0f without", perRecord[true], perRecord[false])
	// Measured: 170-220 against 280 (a slice too short for the next batch is dropped, so how
	// many are reused depends on how the rounds were batched). The race detector's sync.Pool
	// drops a share of what is put back.
	if saved := perRecord[false] - perRecord[true]; saved < 40 && !raceEnabled {
		t.Fatalf("recycling the Records saved %.0f bytes per record loaded, want at least 40 (%.0f with, %.0f without)",
			saved, perRecord[true], perRecord[false])
	}
}

// Consecutive rounds (the claim and load marker included) are written by different producers of
// the node, so that a round's produce never waits for the markers of the transaction its
// producer just ended (shardProducers; the speed is BenchmarkBrokerShardRounds').
func TestBrokerRoundsAlternateProducers(t *testing.T) {
	b := newBackend(t, 1)
	l, r := open(t, b, 0)
	defer l.Close()
	load(t, l)
	const rounds = 4
	for i := 0; i < rounds; i++ {
		last, err := l.Append([]log.Record{rec(fmt.Sprintf("k%d", i), "v")})
		if err != nil {
			t.Fatal(err)
		}
		waitDurable(t, r, last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cc, err := kgo.NewClient(kgo.SeedBrokers(brokerAddr(t)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{b.opts.Topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var producers []int64 // of the claim round (ownership record and marker), then of each round
	for n := 0; n < 2+rounds; {
		fs := cc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %d: %v", n, 2+rounds, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if n++; n != 2 { // the claim round's second record
				producers = append(producers, r.ProducerID)
			}
		})
	}
	for i := 1; i < len(producers); i++ {
		if producers[i] == producers[i-1] {
			t.Fatalf("records %d and %d of the partition (the load marker first) were written by the same producer %d: producer ids %v",
				i-1, i, producers[i], producers)
		}
	}
}

// A node that loads a shard whose last owner never released it (killed, paused past its
// session) fences that owner's node producers, and so every shard that node holds: the old
// node's next round, of a shard the new owner never touched, fails, and nothing it appends is
// acknowledged. The new owner loads everything the old node acknowledged for the shard.
func TestBrokerLoadFencesTheOldNodeWhoseClaimWasNotReleased(t *testing.T) {
	b := newBackend(t, 2)
	old0, old0R := open(t, b, 0)
	defer old0.Close()
	old1, old1R := open(t, b, 1)
	defer old1.Close()
	load(t, old0)
	load(t, old1)
	want := rec("a", "acknowledged")
	last, err := old0.Append([]log.Record{want})
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, old0R, last)
	last1, err := old1.Append([]log.Record{rec("b", "1")})
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, old1R, last1)

	cur, curR := open(t, otherNode(b, 2), 0)
	defer cur.Close()
	if got, _ := load(t, cur); fmt.Sprint(got) != fmt.Sprint([]log.Record{want}) {
		t.Fatalf("new owner loaded %v, want %v", got, want)
	}
	// The old node's shard 1, which nobody else loaded, is fenced with it.
	if _, err := old1.Append([]log.Record{rec("b", "stale")}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-old1R.failed:
		if !errors.Is(err, log.ErrFailed) {
			t.Fatalf("failure %v does not match log.ErrFailed", err)
		}
	case o := <-old1R.durable:
		t.Fatalf("the fenced node reported offset %d of its other shard durable", o)
	case <-time.After(time.Minute):
		t.Fatal("the fenced node's other shard never failed")
	}
	select {
	case err := <-old0R.failed:
		if !errors.Is(err, log.ErrFailed) {
			t.Fatalf("failure %v does not match log.ErrFailed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the fenced node's shard 0 did not fail with the node's producer")
	}
	o, err := cur.Append([]log.Record{rec("c", "new")})
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, curR, o)
}

// A node that closes one of its shards releases it after the last round holding its records
// (which may also hold records of a shard it keeps): the next owner finds it released, loads
// what was acknowledged and fences nobody, and the old node's other shard goes on.
func TestBrokerReleasedShardMovesAndTheOldNodeKeepsItsOtherShard(t *testing.T) {
	b := newBackend(t, 2)
	old0, old0R := open(t, b, 0)
	old1, old1R := open(t, b, 1)
	defer old1.Close()
	load(t, old0)
	load(t, old1)
	// One round of the node holds both shards' records; Close follows it at once.
	last0, err := old0.Append([]log.Record{rec("a", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old1.Append([]log.Record{rec("b", "1")}); err != nil {
		t.Fatal(err)
	}
	if err := old0.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-old0R.durable:
		if o != last0 {
			t.Fatalf("durable %d, want %d", o, last0)
		}
	default:
		t.Fatal("Close returned before the shard's last round was answered")
	}

	cur, curR := open(t, otherNode(b, 2), 0)
	defer cur.Close()
	if got, _ := load(t, cur); fmt.Sprint(got) != fmt.Sprint([]log.Record{rec("a", "1")}) {
		t.Fatalf("new owner loaded %v", got)
	}
	o, err := cur.Append([]log.Record{rec("c", "new")})
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, curR, o)
	for i := 0; i < shardProducers+1; i++ { // a round on each of the old node's producers
		last1, err := old1.Append([]log.Record{rec("b", fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		waitDurable(t, old1R, last1)
	}
}

// A node whose claim was not released can still commit a round after the new owner's first
// load marker, until the new owner's fence: the new owner fences it only once its replay to
// that marker found the claim. Such a round was acknowledged, so the new owner's load replays
// up to its second marker, past it (the gate runs between the first marker and the replay; a
// load that stopped at the first marker passed every other test).
func TestBrokerLoadReplaysWhatTheFencedNodeCommittedAfterTheFirstMarker(t *testing.T) {
	b := newBackend(t, 1)
	old, oldR := open(t, b, 0)
	defer old.Close()
	load(t, old)
	first := rec("a", "before the new owner's claim")
	last, err := old.Append([]log.Record{first})
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, oldR, last)

	cur, _ := open(t, otherNode(b, 2), 0)
	defer cur.Close()
	late := rec("b", "after the new owner's first marker")
	cur.(*kafkaLog).SetReplayGate(func() error {
		last, err := old.Append([]log.Record{late})
		if err != nil {
			return err
		}
		waitDurable(t, oldR, last) // acknowledged: the old node is not fenced yet
		return nil
	})
	if got, want := fmt.Sprint(loadAll(t, cur)), fmt.Sprint([]log.Record{first, late}); got != want {
		t.Fatalf("new owner loaded %v, want %v", got, want)
	}
}

// A load whose node producers break after its claim committed (another node's load fenced the
// node, found through a shard the node still holds) ends FAILED: its shard may not serve on
// them, and a shard that served from its load would answer reads another node may already
// have moved past. The breakage is seen by a round of the node's other shard during the load.
func TestBrokerLoadFailsWhenTheNodesProducersBreakAfterItsClaim(t *testing.T) {
	b := newBackend(t, 2)
	other, otherR := open(t, b, 1)
	defer other.Close()
	load(t, other)
	l, _ := open(t, b, 0)
	defer l.Close()
	l.(*kafkaLog).SetReplayGate(func() error {
		fenceNodeProducers(t, b, b.opts.NodeID)
		if _, err := other.Append([]log.Record{rec("b", "fenced")}); err != nil {
			return err
		}
		select {
		case <-otherR.failed:
		case o := <-otherR.durable:
			t.Errorf("the fenced node reported offset %d durable", o)
		case <-time.After(time.Minute):
			t.Error("the fenced node's round never failed")
		}
		return nil
	})
	if _, err := l.Load(func(int64, log.Record) error { return nil }); !errors.Is(err, log.ErrFailed) {
		t.Fatalf("load after the node's producers broke: %v, want log.ErrFailed", err)
	}
}

// loadAll is load without its checks of the next offset, for logs loaded under test hooks.
func loadAll(t *testing.T, l log.Log) []log.Record {
	t.Helper()
	var got []log.Record
	if _, err := l.Load(func(_ int64, rec log.Record) error { got = append(got, rec); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// fenceNodeProducers bumps the epoch of both of node's producers from outside, as another
// node's load does.
func fenceNodeProducers(t *testing.T, b *Backend, node int32) {
	t.Helper()
	for i := 0; i < shardProducers; i++ {
		kc, err := kgo.NewClient(b.producerOpts(b.nodeTransactionalID(node, i))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, _, err = kc.ProducerID(ctx)
		cancel()
		kc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// After a fence failed every shard of the node, a shard the node loads again (its membership
// reloads an assigned shard that FAILED at the next heartbeat) claims and writes with new node
// producers: the fenced ones are dropped. (Keeping them passed every other test: the node would
// not serve again until restarted.)
func TestBrokerFencedNodeServesAShardItLoadsAgain(t *testing.T) {
	b := newBackend(t, 1)
	l, r := open(t, b, 0)
	defer l.Close()
	load(t, l)
	fenceNodeProducers(t, b, b.opts.NodeID)
	if _, err := l.Append([]log.Record{rec("a", "fenced")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.failed:
	case o := <-r.durable:
		t.Fatalf("the fenced node reported offset %d durable", o)
	case <-time.After(time.Minute):
		t.Fatal("the fenced node's round never failed")
	}
	again, againR := open(t, b, 0)
	defer again.Close()
	load(t, again)
	last, err := again.Append([]log.Record{rec("b", "after the reload")})
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, againR, last)
}

// A load whose claim is refused because the node's producers were fenced (another node's load
// found a claim of this node unreleased) ends FAILED at once (storage.md, Failures), as every
// other shard of the node does; the membership reloads it at the next heartbeat. (Retrying it
// like a timed-out attempt passed every other test.)
func TestBrokerLoadOfAFencedNodeEndsFailed(t *testing.T) {
	b := newBackend(t, 2)
	first, _ := open(t, b, 0)
	defer first.Close()
	load(t, first)
	fenceNodeProducers(t, b, b.opts.NodeID)
	l, _ := open(t, b, 1)
	defer l.Close()
	if _, err := l.Load(func(int64, log.Record) error { return nil }); !errors.Is(err, log.ErrFailed) {
		t.Fatalf("load of a fenced node: %v, want log.ErrFailed", err)
	}
}

// A disowned shard's log is abandoned (the runtime stops waiting for it at once) and then
// closed; its release is still written, so the next owner finds it released and the node's
// other shard goes on unfenced. (Abandon without queueing the release passed every other test:
// each hand-over between live nodes would then fence the old node and fail every shard it
// keeps.)
func TestBrokerAbandonedShardIsReleasedAndTheNodeKeepsItsOtherShard(t *testing.T) {
	b := newBackend(t, 2)
	old0, old0R := open(t, b, 0)
	old1, old1R := open(t, b, 1)
	defer old1.Close()
	load(t, old0)
	load(t, old1)
	last0, err := old0.Append([]log.Record{rec("a", "1")})
	if err != nil {
		t.Fatal(err)
	}
	waitDurable(t, old0R, last0)
	old0.(log.Abandoner).Abandon()
	// Abandon does not wait for the release (Close neither, once abandoned); the next owner's
	// load waits for it here, as a rebalance and the new owner's fence and marker do in the
	// daemon, so that the test does not race it.
	k := old0.(*kafkaLog)
	k.w.mu.Lock()
	release := k.release
	k.w.mu.Unlock()
	if release == nil {
		t.Fatal("the abandoned shard's release was not queued")
	}
	select {
	case err := <-release.done:
		if err != nil {
			t.Fatalf("release: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the release was never written")
	}
	if err := old0.Close(); err != nil {
		t.Fatal(err)
	}

	cur, _ := open(t, otherNode(b, 2), 0)
	defer cur.Close()
	if got, _ := load(t, cur); fmt.Sprint(got) != fmt.Sprint([]log.Record{rec("a", "1")}) {
		t.Fatalf("new owner loaded %v", got)
	}
	for i := 0; i < shardProducers+1; i++ { // a round on each of the old node's producers
		last1, err := old1.Append([]log.Record{rec("b", fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		waitDurable(t, old1R, last1)
	}
}
