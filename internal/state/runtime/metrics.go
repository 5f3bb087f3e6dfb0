package runtime

import (
	"strconv"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the shard runtime's series, shared by every shard of a process. Series carrying
// a shard number also carry its kind ("group" or "meta"): the metadata shard is shard 0 of its
// own family.
type Metrics struct {
	state           *prometheus.GaugeVec
	appendedRecords prometheus.Counter
	batchRecords    prometheus.Histogram
	batchBytes      prometheus.Histogram
	durableWait     prometheus.Histogram
	rejected        prometheus.Counter
	failures        *prometheus.CounterVec
	panics          *prometheus.CounterVec
	loads           *prometheus.CounterVec
	loadSeconds     prometheus.Histogram
	compactSeconds  prometheus.Histogram

	inbox *inboxCollector
}

// NewMetrics creates the series and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "coordinatord_shard_state", Help: "Shard lifecycle state: 0 initial, 1 loading, 2 active, 3 failed, 4 closed.",
		}, []string{"kind", "shard"}),
		appendedRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_shard_appended_records_total", Help: "Records appended to shard logs.",
		}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "coordinatord_shard_append_batch_records",
			Help:    "Records in one appended batch (one write operation's records; the unit of atomicity).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9),
		}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "coordinatord_shard_append_batch_bytes",
			Help:    "Key and value bytes in one appended batch, before framing.",
			Buckets: prometheus.ExponentialBuckets(64, 4, 10),
		}),
		durableWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "coordinatord_shard_durable_wait_seconds",
			Help:    "Time a write operation's response waited for its records to become durable (group commit + fsync).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_shard_rejected_total", Help: "Operations refused because a shard inbox was full.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_shard_failures_total", Help: "Shards that went FAILED (storage error, unreplayable record, panic); see the ERROR log line.",
		}, []string{"kind"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_shard_panics_total", Help: "Panics recovered on a shard (each one FAILED it); the ERROR log line has the stack.",
		}, []string{"kind", "shard"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_shard_loads_total", Help: "Shard loads by result (ok, failed, aborted: the shard closed while it loaded).",
		}, []string{"result"}),
		loadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinatord_shard_load_seconds", Help: "Time to load a shard from its log.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		compactSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinatord_shard_compaction_seconds", Help: "Time a shard log compaction took, deciding included (it runs beside the shard, which keeps serving).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		inbox: &inboxCollector{
			desc: prometheus.NewDesc("coordinatord_shard_inbox_depth",
				"Events queued in a shard's inbox now, by lane: normal (operations, timer fires, async results) and priority (storage reports).",
				[]string{"kind", "shard", "lane"}, nil),
			lag: prometheus.NewDesc("coordinatord_shard_durable_lag_records",
				"Records a shard appended that its log has not reported durable yet (their writers wait).",
				[]string{"kind", "shard"}, nil),
			loading: prometheus.NewDesc("coordinatord_shard_loading_seconds",
				"Seconds the shard's current load has been running, waiting for a load slot included; 0 while it is not loading.",
				[]string{"kind", "shard"}, nil),
			shards: map[shardKey]func() shardGauges{},
		},
	}
	// Pre-create the zero series, so a dashboard sees 0 rather than nothing before the first event.
	m.failures.WithLabelValues("group")
	m.failures.WithLabelValues("meta")
	if reg != nil {
		reg.MustRegister(m.state, m.appendedRecords, m.batchRecords, m.batchBytes, m.durableWait, m.rejected,
			m.failures, m.panics, m.loads, m.loadSeconds, m.compactSeconds, m.inbox)
	}
	return m
}

// appended records one batch handed to the log.
func (m *Metrics) appended(n int, recs []log.Record) {
	size := 0
	for _, r := range recs {
		size += len(r.Key) + len(r.Value)
	}
	m.appendedRecords.Add(float64(n))
	m.batchRecords.Observe(float64(n))
	m.batchBytes.Observe(float64(size))
}

// shardGauges are a shard's instantaneous values, read at scrape time.
type shardGauges struct {
	priority, normal int           // inbox depth by lane
	lag              int64         // appended, not yet durable
	loading          time.Duration // since the current load began; 0 while not loading
}

// track makes a shard's gauges visible at scrape time; reading them there keeps the event loop
// free of metric updates per event.
func (m *Metrics) track(kind string, shard int32, read func() shardGauges) {
	m.inbox.mu.Lock()
	m.inbox.shards[shardKey{kind, shard}] = read
	m.inbox.mu.Unlock()
}

type shardKey struct {
	kind  string
	shard int32
}

type inboxCollector struct {
	desc, lag, loading *prometheus.Desc
	mu                 sync.Mutex
	shards             map[shardKey]func() shardGauges
}

func (c *inboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.lag
	ch <- c.loading
}

func (c *inboxCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, read := range c.shards {
		g := read()
		id := strconv.Itoa(int(k.shard))
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(g.normal), k.kind, id, "normal")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(g.priority), k.kind, id, "priority")
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(g.lag), k.kind, id)
		ch <- prometheus.MustNewConstMetric(c.loading, prometheus.GaugeValue, g.loading.Seconds(), k.kind, id)
	}
}
