package runtime

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the shard runtime's series, shared by every shard of a process.
type Metrics struct {
	state           *prometheus.GaugeVec
	appendedRecords prometheus.Counter
	durableWait     prometheus.Histogram
	rejected        prometheus.Counter
	failures        prometheus.Counter
	loads           *prometheus.CounterVec
	loadSeconds     prometheus.Histogram
	compactSeconds  prometheus.Histogram
}

// NewMetrics creates the series and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "coordinatord_shard_state", Help: "Shard lifecycle state: 0 initial, 1 loading, 2 active, 3 failed, 4 closed.",
		}, []string{"shard"}),
		appendedRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_shard_appended_records_total", Help: "Records appended to shard logs.",
		}),
		durableWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "coordinatord_shard_durable_wait_seconds",
			Help:    "Time a write operation's response waited for its records to become durable (group commit + fsync).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_shard_rejected_total", Help: "Operations refused because a shard inbox was full.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_shard_failures_total", Help: "Shards that went FAILED (storage or replay errors); see the ERROR log line.",
		}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_shard_loads_total", Help: "Shard loads by result.",
		}, []string{"result"}),
		loadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinatord_shard_load_seconds", Help: "Time to load a shard from its log.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		compactSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinatord_shard_compaction_seconds", Help: "Time a shard log compaction took, deciding included (it runs beside the shard, which keeps serving).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.state, m.appendedRecords, m.durableWait, m.rejected, m.failures, m.loads, m.loadSeconds, m.compactSeconds)
	}
	return m
}
