package kafkalog

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkBrokerNodeCommits is the 64-client offset-commit benchmark's shape inside one
// node: 64 clients, each committing one offset to a shard of its own picking among 50 and
// waiting until it is durable, again and again, all shards written by the node's rounds.
// Reported: commits/s, commits per transaction, the latency's p50/p99, the requests per
// transaction and their time on the wire, and (with KAFKALOG_KAFKA_PID, the broker's pid) the
// CPU the broker and this process spent per commit: where a round's time goes (issue 18).
// Each shard count runs with the rounds' gather off (gatherMax=0) and on, twice, alternating.
func BenchmarkBrokerNodeCommits(b *testing.B) {
	for _, shards := range []int32{50, 1} {
		for _, gm := range []time.Duration{0, gatherMax, 0, gatherMax} {
			b.Run(fmt.Sprintf("shards=%d,gatherMax=%v", shards, gm), func(b *testing.B) {
				defer func(g time.Duration) { gatherMax = g }(gatherMax)
				gatherMax = gm
				benchNodeCommits(b, shards, 64)
			})
		}
	}
}

// cpuTicks is the user+system CPU of pid in clock ticks (1/100 s), or -1.
func cpuTicks(pid string) int64 {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return -1
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchNodeCommits(b *testing.B, shards int32, clients int) {
	st := newRoundStats()
	be, err := newBenchBackend(b, st, "nodecommits", shards)
	if err != nil {
		b.Fatal(err)
	}
	type shardLog struct {
		l       log.Log
		mu      sync.Mutex // serializes Append, as the shard's goroutine does
		dmu     sync.Mutex
		cond    *sync.Cond
		durable int64
		failed  error
	}
	logs := make([]*shardLog, shards)
	for i := range logs {
		s := &shardLog{durable: -1}
		s.cond = sync.NewCond(&s.dmu)
		s.l, err = be.Open(int32(i), log.Callbacks{
			Durable: func(o int64) { s.dmu.Lock(); s.durable = max(s.durable, o); s.dmu.Unlock(); s.cond.Broadcast() },
			Failed:  func(err error) { s.dmu.Lock(); s.failed = err; s.dmu.Unlock(); s.cond.Broadcast() },
		})
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
	st.mu.Unlock()
	pid := os.Getenv("KAFKALOG_KAFKA_PID")
	brokerBefore, selfBefore := cpuTicks(pid), selfCPU()
	var (
		latMu sync.Mutex
		lats  []time.Duration
		errs  = make(chan error, clients)
		wg    sync.WaitGroup
	)
	b.ResetTimer()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			mine := make([]time.Duration, 0, b.N)
			for n := 0; n < b.N; n++ {
				s := logs[(c*7919+n*31)%int(shards)]
				start := time.Now()
				s.mu.Lock()
				last, err := s.l.Append([]log.Record{offsetRecord(c*b.N + n)})
				s.mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
				s.dmu.Lock()
				for s.durable < last && s.failed == nil {
					s.cond.Wait()
				}
				err = s.failed
				s.dmu.Unlock()
				if err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(start))
			}
			latMu.Lock()
			lats = append(lats, mine...)
			latMu.Unlock()
		}(c)
	}
	wg.Wait()
	b.StopTimer()
	brokerAfter, selfAfter := cpuTicks(pid), selfCPU()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	slices.Sort(lats)
	commits := float64(len(lats))
	b.ReportMetric(commits/b.Elapsed().Seconds(), "commits/s")
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
	if brokerBefore >= 0 && brokerAfter >= 0 {
		b.ReportMetric(float64(brokerAfter-brokerBefore)*10000/commits, "broker-µs/commit")
	}
	b.ReportMetric(float64((selfAfter-selfBefore).Microseconds())/commits, "self-µs/commit")
	st.mu.Lock()
	defer st.mu.Unlock()
	txns := float64(st.reqs[kmsg.EndTxn.Int16()])
	if txns > 0 {
		b.ReportMetric(commits/txns, "commits/txn")
	}
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.EndTxn, kmsg.AddPartitionsToTxn} {
		n := st.reqs[k.Int16()]
		if txns > 0 {
			b.ReportMetric(float64(n)/txns, k.Name()+"/txn")
		}
		if n > 0 {
			b.ReportMetric(float64(st.wire[k.Int16()].Microseconds())/1000/float64(n), k.Name()+"-ms")
		}
	}
}
