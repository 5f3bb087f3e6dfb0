package gateway

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are the forwarding path's series, per upstream broker.
type Metrics struct {
	requests *prometheus.CounterVec
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
	failures *prometheus.CounterVec
	dials    *prometheus.CounterVec
	timeouts *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	added    prometheus.Histogram
	// txnOutcomes counts the marker relay's outcomes (txnrelay.go).
	txnOutcomes *prometheus.CounterVec
	// txnGiveUps counts producers whose recovery met an error no retry can cure (txnrelay.go).
	txnGiveUps *prometheus.CounterVec
	// aclNotices counts the reads of the upstream's ACLs an ACL change asked for (aclchange.go).
	aclNotices *prometheus.CounterVec

	series sync.Map // node<<16|key: *fwdSeries
}

// NewMetrics creates the series and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_forwarded_requests_total", Help: "Requests forwarded to the upstream cluster, by upstream node id and API.",
		}, []string{"node", "api"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_forwarded_request_bytes_total", Help: "Request bytes forwarded to each upstream broker.",
		}, []string{"node"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_forwarded_response_bytes_total", Help: "Response bytes relayed back from each upstream broker.",
		}, []string{"node"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_forward_failures_total", Help: "Forwarded requests whose upstream connection failed (the client's connection was closed), by upstream node id and API.",
		}, []string{"node", "api"}),
		dials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_upstream_dial_failures_total", Help: "Upstream connections that could not be opened, by upstream node id.",
		}, []string{"node"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_forward_timeouts_total", Help: "Forwarded requests the upstream did not answer within upstream.request.timeout.ms (plus the request's own wait); the client's connection was closed. Also counted in coordinatord_gateway_forward_failures_total. By upstream node id and API.",
		}, []string{"node", "api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "coordinatord_gateway_forward_duration_seconds",
			Help:    "Time from forwarding a request to having its answer ready for the client, by upstream node id (includes the upstream's own time, e.g. a fetch's wait).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}, []string{"node"}),
		added: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "coordinatord_gateway_added_latency_seconds",
			Help:    "Latency the gateway adds to a forwarded request that has an answer: from reading the request to starting its write upstream (routing, connecting upstream), plus from having read the upstream's answer to having written it to the client (rewriting, the write). The upstream's own time is not in it.",
			Buckets: []float64{.000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .5},
		}),
		txnOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_txn_outcomes_total", Help: "Transaction outcomes the marker relay applied to staged offsets (outcome commit or abort) or could not tell (ambiguous, left staged), by where it learned them.",
		}, []string{"outcome", "source"}),
		txnGiveUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_txn_recovery_given_up_total", Help: "Producers with staged offsets the marker relay's recovery set aside because the upstream refused the question with an error no retry cures, by KIP-1050 category of that error (counted once per producer); their offsets stay staged and their transactional requests are held until a later try resolves them.",
		}, []string{"category"}),
		aclNotices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_gateway_acl_change_rereads_total", Help: "Reads of the upstream's ACLs that a CreateAcls/DeleteAcls forwarded through this node asked for, by target (self: this node; peer: another node, told over the peer connections) and result (applied; failed: that node keeps the ACLs it read last until its next periodic read, upstream.acls.refresh.interval.ms).",
		}, []string{"target", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.bytesIn, m.bytesOut, m.failures, m.dials, m.timeouts, m.latency, m.added, m.txnOutcomes, m.txnGiveUps, m.aclNotices)
	}
	return m
}

func node(id int32) string { return strconv.Itoa(int(id)) }

func apiName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return strconv.Itoa(int(key))
}

// fwdSeries are the series one forwarded request of a key to a node touches.
type fwdSeries struct {
	requests, bytesIn, bytesOut prometheus.Counter
	latency                     prometheus.Observer
}

func (m *Metrics) forwarded(id int32, key int16, in, out int, took time.Duration) {
	// Looked up once per node and key: finding the series by label values (formatting the node
	// id, hashing the labels) on every request was a few percent of the forwarding path's CPU.
	k := int64(id)<<16 | int64(uint16(key))
	v, ok := m.series.Load(k)
	if !ok {
		n := node(id)
		v, _ = m.series.LoadOrStore(k, &fwdSeries{
			requests: m.requests.WithLabelValues(n, apiName(key)),
			bytesIn:  m.bytesIn.WithLabelValues(n),
			bytesOut: m.bytesOut.WithLabelValues(n),
			latency:  m.latency.WithLabelValues(n),
		})
	}
	s := v.(*fwdSeries)
	s.requests.Inc()
	s.bytesIn.Add(float64(in))
	s.bytesOut.Add(float64(out))
	s.latency.Observe(took.Seconds())
}

func (m *Metrics) failed(id int32, key int16) {
	m.failures.WithLabelValues(node(id), apiName(key)).Inc()
}

func (m *Metrics) timedOut(id int32, key int16) {
	m.timeouts.WithLabelValues(node(id), apiName(key)).Inc()
}

func (m *Metrics) dialFailed(id int32) { m.dials.WithLabelValues(node(id)).Inc() }

func (m *Metrics) aclNotice(where, result string) {
	if m != nil {
		m.aclNotices.WithLabelValues(where, result).Inc()
	}
}
