package wire

import (
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are the transport's Prometheus series. Each Server owns its set (registered on the
// registry it is given) so that tests can run many servers in one process.
type Metrics struct {
	forwardedSeries     sync.Map // request key: *forwardedSeries
	requests            *prometheus.CounterVec
	errors              *prometheus.CounterVec
	latency             *prometheus.HistogramVec
	connectionsOpen     prometheus.Gauge
	connectionsClosed   *prometheus.CounterVec
	connectionsRejected prometheus.Counter
	bytesIn             prometheus.Counter
	bytesOut            prometheus.Counter
}

// NewMetrics creates the series and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_requests_total", Help: "Requests answered, by API.",
		}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_request_errors_total", Help: "Non-zero error codes in responses (top-level and per entry), by API and error name.",
		}, []string{"api", "error"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "coordinatord_request_duration_seconds",
			Help:    "Time from a decoded request to its response, by API (includes waiting for durable writes and parked joins).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"api"}),
		connectionsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coordinatord_connections_open", Help: "Kafka-protocol connections open now.",
		}),
		connectionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_connections_closed_total", Help: "Connections closed, by reason (peer closed, idle, bad frame, bad request, shutdown, ...).",
		}, []string{"reason"}),
		connectionsRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_connections_rejected_total", Help: "Connections closed at accept because max.connections was reached.",
		}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_bytes_received_total", Help: "Bytes read from Kafka-protocol connections.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_bytes_sent_total", Help: "Bytes written to Kafka-protocol connections.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.errors, m.latency, m.connectionsOpen, m.connectionsClosed, m.connectionsRejected, m.bytesIn, m.bytesOut)
	}
	return m
}

func (m *Metrics) observe(key int16, resp kmsg.Response, took time.Duration) {
	api := kmsg.NameForKey(key)
	if api == "" {
		api = strconv.Itoa(int(key))
	}
	m.requests.WithLabelValues(api).Inc()
	m.latency.WithLabelValues(api).Observe(took.Seconds())
	if resp == nil {
		return
	}
	m.eachErrorCode(resp, func(code int16) {
		name := strconv.Itoa(int(code))
		if err := kerr.ErrorForCode(code); err != nil {
			if ke, ok := err.(*kerr.Error); ok {
				name = ke.Message
			}
		}
		m.errors.WithLabelValues(api, name).Inc()
	})
}

// eachErrorCode calls fn for every non-zero int16 field named ErrorCode anywhere in the
// response, so per-partition and per-group errors are counted without every handler having to
// report them.
func (m *Metrics) eachErrorCode(resp kmsg.Response, fn func(int16)) {
	v := reflect.ValueOf(resp)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	walkCodes(v, fn)
}

func walkCodes(v reflect.Value, fn func(int16)) {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			if f.Name == "ErrorCode" && fv.Kind() == reflect.Int16 {
				if c := int16(fv.Int()); c != 0 {
					fn(c)
				}
				continue
			}
			if k := fv.Kind(); k == reflect.Slice || k == reflect.Struct {
				walkCodes(fv, fn)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		for i := 0; i < v.Len(); i++ {
			walkCodes(v.Index(i), fn)
		}
	}
}

// observeForwarded counts a request passed on to an upstream broker; its latency includes the
// upstream's time, and a failure closes the connection (counted by the close reason).
func (m *Metrics) observeForwarded(key int16, err error, took time.Duration) {
	// The key's series are found once: by label values per request, they were a few percent
	// of the gateway's forwarding CPU.
	v, ok := m.forwardedSeries.Load(key)
	if !ok {
		api := kmsg.NameForKey(key)
		if api == "" {
			api = strconv.Itoa(int(key))
		}
		v, _ = m.forwardedSeries.LoadOrStore(key, &forwardedSeries{m.requests.WithLabelValues(api), m.latency.WithLabelValues(api)})
	}
	s := v.(*forwardedSeries)
	s.requests.Inc()
	if err == nil {
		s.latency.Observe(took.Seconds())
	}
}

type forwardedSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}
