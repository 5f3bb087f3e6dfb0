package wire

import (
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are the transport's Prometheus series. Each Server owns its set (registered on the
// registry it is given) so that tests can run many servers in one process.
type Metrics struct {
	requests            *prometheus.CounterVec
	errors              *prometheus.CounterVec
	latency             *prometheus.HistogramVec
	connectionsOpen     prometheus.Gauge
	connectionsClosed   *prometheus.CounterVec
	connectionsRejected prometheus.Counter
	bytesIn             prometheus.Counter
	bytesOut            prometheus.Counter
	// apis caches each API key's series (filled on first use).
	apis [128]atomic.Pointer[apiMetrics]
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
	am := m.forAPI(key)
	am.requests.Inc()
	am.latency.Observe(took.Seconds())
	if resp == nil {
		return
	}
	eachErrorCode(resp, func(code int16) {
		name := strconv.Itoa(int(code))
		if err := kerr.ErrorForCode(code); err != nil {
			if ke, ok := err.(*kerr.Error); ok {
				name = ke.Message
			}
		}
		m.errors.WithLabelValues(am.name, name).Inc()
	})
}

// apiMetrics are one API's series, looked up once: resolving labels per request hashed the API
// name twice on every round trip.
type apiMetrics struct {
	name     string
	requests prometheus.Counter
	latency  prometheus.Observer
}

func (m *Metrics) forAPI(key int16) *apiMetrics {
	if key >= 0 && int(key) < len(m.apis) {
		if am := m.apis[key].Load(); am != nil {
			return am
		}
	}
	name := kmsg.NameForKey(key)
	if name == "" {
		name = strconv.Itoa(int(key))
	}
	am := &apiMetrics{name: name, requests: m.requests.WithLabelValues(name), latency: m.latency.WithLabelValues(name)}
	if key >= 0 && int(key) < len(m.apis) {
		m.apis[key].Store(am)
	}
	return am
}

// eachErrorCode calls fn for every non-zero int16 field named ErrorCode anywhere in the
// response, so per-partition and per-group errors are counted without every handler having to
// report them. The response type's layout is analysed with reflection once (codeWalker); each
// response is then walked by field offsets, without reflect.Value or allocation.
func eachErrorCode(resp kmsg.Response, fn func(int16)) {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	walkerFor(v.Type().Elem()).walk(v.UnsafePointer(), fn)
}

// codeWalker visits the error codes of one struct type: the int16 ErrorCode fields at offsets
// of it, then nested structs and slices of structs that contain any. Fields whose types hold no
// error code are left out when the walker is built, so a walk never visits plain data.
type codeWalker struct {
	codes   []uintptr
	structs []nestedWalker
	slices  []nestedWalker
}

type nestedWalker struct {
	offset   uintptr
	elemSize uintptr // slices only
	w        *codeWalker
}

// sliceHeader is the runtime layout of a slice value.
type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

func (w *codeWalker) walk(p unsafe.Pointer, fn func(int16)) {
	for _, off := range w.codes {
		if c := *(*int16)(unsafe.Add(p, off)); c != 0 {
			fn(c)
		}
	}
	for _, n := range w.structs {
		n.w.walk(unsafe.Add(p, n.offset), fn)
	}
	for _, n := range w.slices {
		h := (*sliceHeader)(unsafe.Add(p, n.offset))
		for i := 0; i < h.len; i++ {
			n.w.walk(unsafe.Add(h.data, uintptr(i)*n.elemSize), fn)
		}
	}
}

var walkers sync.Map // reflect.Type -> *codeWalker

func walkerFor(t reflect.Type) *codeWalker {
	if w, ok := walkers.Load(t); ok {
		return w.(*codeWalker)
	}
	w := buildWalker(t, map[reflect.Type]*codeWalker{})
	if w == nil {
		w = &codeWalker{}
	}
	actual, _ := walkers.LoadOrStore(t, w)
	return actual.(*codeWalker)
}

// buildWalker returns the walker of struct type t, nil when t holds no error code. Kafka
// messages are trees, but seen guards against a recursive type all the same.
func buildWalker(t reflect.Type, seen map[reflect.Type]*codeWalker) *codeWalker {
	if w, ok := seen[t]; ok {
		return w
	}
	w := &codeWalker{}
	seen[t] = w
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		switch {
		case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
			w.codes = append(w.codes, f.Offset)
		case f.Type.Kind() == reflect.Struct:
			if n := buildWalker(f.Type, seen); n != nil {
				w.structs = append(w.structs, nestedWalker{offset: f.Offset, w: n})
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			if n := buildWalker(f.Type.Elem(), seen); n != nil {
				w.slices = append(w.slices, nestedWalker{offset: f.Offset, elemSize: f.Type.Elem().Size(), w: n})
			}
		}
	}
	if len(w.codes) == 0 && len(w.structs) == 0 && len(w.slices) == 0 {
		seen[t] = nil
		return nil
	}
	return w
}

// observeForwarded counts a request passed on to an upstream broker; its latency includes the
// upstream's time, and a failure closes the connection (counted by the close reason).
func (m *Metrics) observeForwarded(key int16, err error, took time.Duration) {
	am := m.forAPI(key)
	am.requests.Inc()
	if err == nil {
		am.latency.Observe(took.Seconds())
	}
}
