package kafkalog

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundStats counts, over every client of a backend, the requests sent per API and their time
// on the wire, and what kgo logs about CONCURRENT_TRANSACTIONS and the metadata updates a
// retried produce waits for: where a round's time goes (issue 18).
type roundStats struct {
	mu      sync.Mutex
	reqs    map[int16]int
	wire    map[int16]time.Duration
	concTxn atomic.Int64 // CONCURRENT_TRANSACTIONS retries kgo logged (EndTxn, InitProducerId, AddPartitionsToTxn)
	metaWhy map[string]int
}

func newRoundStats() *roundStats {
	return &roundStats{reqs: map[int16]int{}, wire: map[int16]time.Duration{}, metaWhy: map[string]int{}}
}

func (s *roundStats) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	s.mu.Lock()
	s.reqs[key]++
	s.wire[key] += e2e.DurationE2E()
	s.mu.Unlock()
}

func (s *roundStats) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (s *roundStats) Log(_ kgo.LogLevel, msg string, kv ...any) {
	if strings.Contains(msg, "CONCURRENT_TRANSACTIONS") {
		s.concTxn.Add(1)
	}
	if msg == "produced" {
		for i := 0; i+1 < len(kv); i += 2 {
			if to, ok := kv[i+1].(string); ok && kv[i] == "to" && strings.Contains(to, "retrying") {
				s.mu.Lock()
				s.metaWhy["produce "+to[strings.Index(to, "retrying"):]]++
				s.mu.Unlock()
			}
		}
	}
	if strings.Contains(msg, "metadata update triggered") {
		why := ""
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == "why" {
				why = fmt.Sprint(kv[i+1])
			}
		}
		s.mu.Lock()
		s.metaWhy[why]++
		s.mu.Unlock()
	}
}

// BenchmarkBrokerShardRounds: 50 shards (the default offsets.topic.num.partitions), each with
// one client appending one offset commit and waiting until it is durable, again and again: the
// shape of the 64-client offset-commit benchmark, where a round carries about one commit. Each
// shard does b.N rounds. Reported: rounds/s over all shards, the round latency's p50/p99/max,
// per round the requests of each API and their mean time on the wire, and the
// CONCURRENT_TRANSACTIONS retries and metadata updates kgo logged.
func BenchmarkBrokerShardRounds(b *testing.B) {
	for _, shards := range []int32{1, 50} {
		for _, v := range []struct {
			producers int
			age       time.Duration
		}{{1, 5 * time.Second}, {1, 100 * time.Millisecond}, {2, 100 * time.Millisecond}} {
			b.Run(fmt.Sprintf("shards=%d,producers=%d,metaMinAge=%v", shards, v.producers, v.age), func(b *testing.B) {
				defer func(p int, a time.Duration) { shardProducers, shardMetadataMinAge = p, a }(shardProducers, shardMetadataMinAge)
				shardProducers, shardMetadataMinAge = v.producers, v.age
				benchShardRounds(b, shards)
			})
		}
	}
}

func benchShardRounds(b *testing.B, shards int32) {
	st := newRoundStats()
	be, err := newBenchBackend(b, st, "rounds", shards)
	if err != nil {
		b.Fatal(err)
	}
	type shardLog struct {
		l       log.Log
		durable chan int64
		failed  chan error
	}
	logs := make([]shardLog, shards)
	for i := range logs {
		s := shardLog{durable: make(chan int64, 1024), failed: make(chan error, 1)}
		s.l, err = be.Open(int32(i), log.Callbacks{Durable: func(o int64) { s.durable <- o }, Failed: func(err error) { s.failed <- err }})
		if err != nil {
			b.Fatal(err)
		}
		defer s.l.Close()
		load(b, s.l)
		logs[i] = s
	}
	st.mu.Lock()
	clear(st.reqs)
	clear(st.wire)
	clear(st.metaWhy)
	st.mu.Unlock()
	st.concTxn.Store(0)
	var (
		latMu sync.Mutex
		lats  []time.Duration
		errs  = make(chan error, shards)
		wg    sync.WaitGroup
	)
	b.ResetTimer()
	for i := range logs {
		wg.Add(1)
		go func(s shardLog, shard int) {
			defer wg.Done()
			mine := make([]time.Duration, 0, b.N)
			for n := 0; n < b.N; n++ {
				start := time.Now()
				last, err := s.l.Append([]log.Record{offsetRecord(shard*b.N + n)})
				if err != nil {
					errs <- err
					return
				}
			wait:
				for {
					select {
					case o := <-s.durable:
						if o >= last {
							break wait
						}
					case err := <-s.failed:
						errs <- err
						return
					case <-time.After(time.Minute):
						errs <- fmt.Errorf("shard %d: offset %d never durable", shard, last)
						return
					}
				}
				mine = append(mine, time.Since(start))
			}
			latMu.Lock()
			lats = append(lats, mine...)
			latMu.Unlock()
		}(logs[i], i)
	}
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	slices.Sort(lats)
	rounds := float64(len(lats))
	b.ReportMetric(rounds/b.Elapsed().Seconds(), "rounds/s")
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lats[len(lats)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(st.concTxn.Load())/rounds, "concTxnRetries/round")
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.EndTxn, kmsg.AddPartitionsToTxn, kmsg.Metadata, kmsg.InitProducerID} {
		n := st.reqs[k.Int16()]
		b.ReportMetric(float64(n)/rounds, k.Name()+"/round")
		if n > 0 {
			b.ReportMetric(float64(st.wire[k.Int16()].Microseconds())/1000/float64(n), k.Name()+"-ms")
		}
	}
	for why, n := range st.metaWhy {
		b.Logf("metadata updates: %d: %s", n, why)
	}
}

// BenchmarkBrokerOneTransactionAcrossShards measures what the next step of issue 18 (one
// transaction per node per round, docs/scale-out.md; not built) would pay: rounds of 64 offset
// commits, the 64 clients of the benchmark, spread over 1 or 50 partitions in one transaction,
// one round at a time, alternating between two transactional producers as the shards' do.
// Reported: rounds/s, commits/s, and the round latency's p50/p99.
func BenchmarkBrokerOneTransactionAcrossShards(b *testing.B) {
	for _, partitions := range []int32{1, 50} {
		b.Run(fmt.Sprintf("partitions_%d", partitions), func(b *testing.B) { benchOneTransactionAcross(b, partitions) })
	}
}

func benchOneTransactionAcross(b *testing.B, partitions int32) {
	const perRound = 64
	be := newBackend(b, partitions)
	var kcs []*kgo.Client
	for i := 0; i < 2; i++ {
		kc, err := kgo.NewClient(append(append([]kgo.Opt{}, be.opts.Client...),
			kgo.TransactionalID(fmt.Sprintf("%snode-%d", be.opts.TransactionalIDPrefix, i)),
			kgo.DefaultProduceTopic(be.opts.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ManualFlushing(), kgo.MetadataMinAge(shardMetadataMinAge))...)
		if err != nil {
			b.Fatal(err)
		}
		defer kc.Close()
		kcs = append(kcs, kc)
	}
	ctx := context.Background()
	lats := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		start := time.Now()
		kc := kcs[n%len(kcs)]
		if err := kc.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		var perr atomic.Value
		for j := 0; j < perRound; j++ {
			k, v := toKafka(offsetRecord(n*perRound + j))
			kc.Produce(ctx, &kgo.Record{Key: k, Value: v, Partition: int32(j) % partitions}, func(_ *kgo.Record, err error) {
				if err != nil {
					perr.Store(err)
				}
			})
		}
		if err := kc.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err, _ := perr.Load().(error); err != nil {
			b.Fatal(err)
		}
		if err := kc.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
		lats = append(lats, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lats)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rounds/s")
	b.ReportMetric(float64(b.N*perRound)/b.Elapsed().Seconds(), "commits/s")
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkBrokerSplitRounds measures the step after gathered rounds (issue 18, not built):
// rounds of 64 offset commits over 50 partitions, each round split over k transactions on
// disjoint partitions (partition p in the (p mod k)-th), committed side by side on producers of
// their own (two per part, alternating), the round over when every part's EndTxn is answered.
// k=1 is what the node writer does. Reported: commits/s, the round latency's p50/p99, and with
// KAFKALOG_KAFKA_PID the broker's CPU per commit.
func BenchmarkBrokerSplitRounds(b *testing.B) {
	for _, k := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("transactions_%d", k), func(b *testing.B) { benchSplitRounds(b, 50, k) })
	}
}

func benchSplitRounds(b *testing.B, partitions int32, k int) {
	const perRound = 64
	be := newBackend(b, partitions)
	kcs := make([][]*kgo.Client, k)
	for part := range kcs {
		for i := 0; i < 2; i++ {
			kc, err := kgo.NewClient(append(append([]kgo.Opt{}, be.opts.Client...),
				kgo.TransactionalID(fmt.Sprintf("%snode-%d-%d", be.opts.TransactionalIDPrefix, part, i)),
				kgo.DefaultProduceTopic(be.opts.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ManualFlushing(), kgo.MetadataMinAge(shardMetadataMinAge))...)
			if err != nil {
				b.Fatal(err)
			}
			defer kc.Close()
			kcs[part] = append(kcs[part], kc)
		}
	}
	ctx := context.Background()
	lats := make([]time.Duration, 0, b.N)
	pid := os.Getenv("KAFKALOG_KAFKA_PID")
	brokerBefore := cpuTicks(pid)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, k)
		for part := 0; part < k; part++ {
			wg.Add(1)
			go func(part int) {
				defer wg.Done()
				kc := kcs[part][n%2]
				if err := kc.BeginTransaction(); err != nil {
					errs <- err
					return
				}
				var perr atomic.Value
				for j := 0; j < perRound; j++ {
					p := int32((j*7 + n) % int(partitions))
					if int(p)%k != part {
						continue
					}
					key, v := toKafka(offsetRecord(n*perRound + j))
					kc.Produce(ctx, &kgo.Record{Key: key, Value: v, Partition: p}, func(_ *kgo.Record, err error) {
						if err != nil {
							perr.Store(err)
						}
					})
				}
				if err := kc.Flush(ctx); err != nil {
					errs <- err
					return
				}
				if err, _ := perr.Load().(error); err != nil {
					errs <- err
					return
				}
				if err := kc.EndTransaction(ctx, kgo.TryCommit); err != nil {
					errs <- err
				}
			}(part)
		}
		wg.Wait()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
		lats = append(lats, time.Since(start))
	}
	b.StopTimer()
	brokerAfter := cpuTicks(pid)
	slices.Sort(lats)
	b.ReportMetric(float64(b.N*perRound)/b.Elapsed().Seconds(), "commits/s")
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
	if brokerBefore >= 0 && brokerAfter >= 0 {
		b.ReportMetric(float64(brokerAfter-brokerBefore)*10000/float64(b.N*perRound), "broker-µs/commit")
	}
}

// newBenchBackend is a node's backend on the broker of KAFKALOG_KAFKA_ADDR over a topic of its
// own with shards partitions, its clients reporting to st.
func newBenchBackend(b *testing.B, st *roundStats, name string, shards int32) (*Backend, error) {
	topic := fmt.Sprintf("kafkalog-%s-%d", name, time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return New(ctx, Options{
		Client: []kgo.Opt{kgo.SeedBrokers(brokerAddr(b)), kgo.WithHooks(st), kgo.WithLogger(st)},
		Topic:  topic, Partitions: shards, ReplicationFactor: 1, MinInsyncReplicas: 1,
		TransactionalIDPrefix: topic + "-shard-", NodeTransactionalIDPrefix: topic + "-node-", NodeID: 1,
		TransactionTimeout: 30 * time.Second,
	})
}
