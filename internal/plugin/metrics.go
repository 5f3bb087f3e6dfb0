package plugin

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

const metricPrefix = "coordinatord_streams_group_topology_description_"

// Metrics are the topology description series (spec §7.4). The caller records plugin calls;
// the coordinator records the rest through the exported methods. Each Caller owns its set,
// registered on the registerer it is given.
type Metrics struct {
	set, get, del   *prometheus.CounterVec // result, kind
	latency         *prometheus.HistogramVec
	inflight        prometheus.Gauge
	storedGroups    prometheus.Gauge
	cleanupCycles   prometheus.Counter
	cleanupEligible prometheus.Counter

	storedMu      sync.Mutex
	storedByShard map[int32]int // last count each shard reported; the gauge is their sum
}

func newMetrics(reg prometheus.Registerer, backoff *Backoff, p topologyplugin.Plugin) *Metrics {
	labels := []string{"result", "kind"}
	m := &Metrics{
		set: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "set_total",
			Help: "Plugin Set calls by result (success, error) and error kind (permanent, transient, timeout, panic).",
		}, labels),
		get: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "get_total",
			Help: "Plugin Get calls by result (a Get that found nothing is a success) and error kind (invalid: the plugin returned a malformed description).",
		}, labels),
		del: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "delete_total",
			Help: "Plugin Delete calls (DeleteGroups, cleanup, conversion) by result and error kind.",
		}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "plugin_call_seconds",
			Help:    "Time from a plugin call's start (including the wait for a free worker) to its result or timeout, by method.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"method"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "plugin_workers_busy",
			Help: "Plugin calls running now (at most group.streams.topology.description.plugin.max.concurrency), including calls that outlived their timeout.",
		}),
		storedGroups: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "stored_groups",
			Help: "Streams groups whose persisted stored description epoch is a real epoch (>= 0).",
		}),
		cleanupCycles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricPrefix + "cleanup_cycles_total", Help: "Periodic topology description cleanup cycles run.",
		}),
		cleanupEligible: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricPrefix + "cleanup_eligible_total", Help: "Groups found eligible for topology description cleanup.",
		}),
	}
	if reg == nil {
		return m
	}
	reg.MustRegister(m.set, m.get, m.del, m.latency, m.inflight, m.storedGroups, m.cleanupCycles, m.cleanupEligible)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricPrefix + "backoff_groups",
		Help: "Groups with an in-memory solicitation back-off entry.",
	}, func() float64 { return float64(backoff.Len()) }))
	if sr, ok := p.(topologyplugin.StatsReporter); ok {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: metricPrefix + "plugin_descriptions", Help: "Descriptions the plugin holds now.",
			}, func() float64 { return float64(sr.Stats().Descriptions) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: metricPrefix + "plugin_bytes", Help: "Bytes the plugin's descriptions take, in the plugin's accounting.",
			}, func() float64 { return float64(sr.Stats().Bytes) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: metricPrefix + "plugin_evictions_total", Help: "Descriptions the plugin dropped to stay within its bounds.",
			}, func() float64 { return float64(sr.Stats().Evictions) }),
		)
	}
	return m
}

func (m *Metrics) vec(method Method) *prometheus.CounterVec {
	switch method {
	case MethodSet:
		return m.set
	case MethodGet:
		return m.get
	}
	return m.del
}

// SetShardStoredGroups records that a shard's durable state has n groups whose stored epoch is
// real, and sets the stored-groups gauge to the sum over shards. Call it from the shard's
// goroutine (a read op), so that each shard's reports arrive in the order of its states.
func (m *Metrics) SetShardStoredGroups(shard int32, n int) {
	m.storedMu.Lock()
	defer m.storedMu.Unlock()
	if m.storedByShard == nil {
		m.storedByShard = map[int32]int{}
	}
	m.storedByShard[shard] = n
	sum := 0
	for _, v := range m.storedByShard {
		sum += v
	}
	m.storedGroups.Set(float64(sum))
}

// SetStoredGroups sets the number of groups whose stored epoch is real.
func (m *Metrics) SetStoredGroups(n int) { m.storedGroups.Set(float64(n)) }

// AddStoredGroups adds delta (may be negative) to the stored-groups gauge.
func (m *Metrics) AddStoredGroups(delta int) { m.storedGroups.Add(float64(delta)) }

// CleanupCycle counts one run of the periodic cleanup.
func (m *Metrics) CleanupCycle() { m.cleanupCycles.Inc() }

// CleanupEligible counts n groups found eligible by a cleanup scan.
func (m *Metrics) CleanupEligible(n int) { m.cleanupEligible.Add(float64(n)) }
