package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/gateway"
	"github.com/coordinatord/coordinatord/internal/membership"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/test/metricsdoc"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// namesRegisterer records the name of every series a collector describes, including vectors
// that have no child yet (a scrape would show those only after their first event).
type namesRegisterer struct {
	prometheus.Registerer
	names  map[string]bool
	labels map[string][]string // each series' label names, constant and variable, sorted
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// descLabels takes the label names out of a Desc's String(), the only way client_golang shows
// them: "..., constLabels: {a=\"x\"}, variableLabels: {b,c(d)}}", a constrained label as c(d).
var descLabels = regexp.MustCompile(`constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}\}$`)

func (r *namesRegisterer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			continue
		}
		r.names[m[1]] = true
		var labels []string
		if l := descLabels.FindStringSubmatch(d.String()); l != nil {
			for _, pair := range strings.Split(l[1], ",") {
				if name, _, ok := strings.Cut(pair, "="); ok {
					labels = append(labels, name)
				}
			}
			for _, name := range strings.Split(l[2], ",") {
				if name != "" {
					labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")"))
				}
			}
		}
		slices.Sort(labels)
		r.labels[m[1]] = labels
	}
	return r.Registerer.Register(c)
}

func (r *namesRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var docRow = regexp.MustCompile("(?m)^\\| `(coordinatord_[a-z0-9_]+)` \\|")

// registeredSeries collects the series from the same constructors serve calls, with a plugin
// that reports its stats so that its optional gauges are included.
func registeredSeries(t *testing.T) *namesRegisterer {
	t.Helper()
	reg := &namesRegisterer{Registerer: prometheus.NewRegistry(), names: map[string]bool{}, labels: map[string][]string{}}
	cfg, err := config.Load("", []string{
		"log.dirs=" + t.TempDir(),
		"offsets.topic.num.partitions=2",
		"group.streams.topology.description.plugin.class=memory",
	})
	if err != nil {
		t.Fatal(err)
	}
	wire.NewMetrics(reg)
	gateway.NewMetrics(reg)                                                                // gateway mode's series
	gateway.NewACLMirror(gateway.ACLMirrorOptions{Registerer: reg, Interval: time.Minute}) // gateway mode with an authorizer
	gateway.NewPeerMarkers(gateway.PeerMarkersOptions{Registerer: reg})                    // gateway mode, log.backend=kafka
	wire.NewBudget(1<<20, reg, zap.NewNop())
	membership.New(membership.Options{Registerer: reg}) // log.backend=kafka's series
	if _, err := newAuthorizer(cfg, zap.NewNop(), reg); err != nil {
		t.Fatal(err)
	}
	topology, err := openTopologyPlugin(cfg, zap.NewNop(), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topology.Close() })
	st, err := openState(cfg, "test", zap.NewNop(), reg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close(zap.NewNop()) })
	return reg
}

// Issue 10, defect 12: the operator page lists every series the server registers, and lists
// nothing it does not, as internal/config/docs_test.go does for config keys.
func TestOperationsDocListsEveryMetric(t *testing.T) {
	reg := registeredSeries(t)

	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range docRow.FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = true
	}
	for name := range reg.names {
		if strings.HasPrefix(name, "coordinatord_") && !documented[name] {
			t.Errorf("docs/operations.md has no row for %s", name)
		}
	}
	for name := range documented {
		if !reg.names[name] {
			t.Errorf("docs/operations.md documents %s, which the server does not register", name)
		}
	}

	// Every other page may mention only series that exist.
	pages, _ := filepath.Glob("../../docs/*.md")
	// A series name stands alone: `__coordinatord_state` (a topic) is not one.
	mention := regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(coordinatord_[a-z0-9_]+)`)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range mention.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if !reg.names[name] && !reg.names[base] {
				t.Errorf("%s mentions %s, which the server does not register", filepath.Base(p), name)
			}
		}
	}
}

// The label column of the metrics table names exactly the labels each series has in the code.
// The deploy checks (test/deploy) hold the alert rules and the dashboard to that column, so a
// label renamed in the code fails here until the docs follow, and then there until deploy/ does.
func TestOperationsDocListsEveryLabel(t *testing.T) {
	reg := registeredSeries(t)
	documented, err := metricsdoc.Read("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range documented {
		code, ok := reg.labels[name]
		if !ok {
			continue // TestOperationsDocListsEveryMetric reports it
		}
		doc := slices.Sorted(slices.Values(s.LabelNames()))
		if !slices.Equal(doc, code) {
			t.Errorf("docs/operations.md gives %s the labels %v; the code registers it with %v", name, doc, code)
		}
	}
}

// A closed label whose values the code declares as constants of one type lists exactly those
// in the label column: a documented value the code cannot produce would let an alert rule
// match nothing (make deploy-check trusts the column), and an undocumented one would fail
// deploy-check for a rule that matches it rightly.
func TestOperationsDocListsTheClosedLabelValuesTheCodeDeclares(t *testing.T) {
	documented, err := metricsdoc.Read("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ series, label, dir, typeName string }{
		{"coordinatord_connections_closed_total", "reason", "../../internal/wire", "closeReason"},
		{"coordinatord_group_migrations_total", "protocol", "../../internal/state/shard", "MigrationProtocol"},
		{"coordinatord_group_migrations_total", "direction", "../../internal/state/shard", "MigrationDirection"},
		{"coordinatord_group_migrations_total", "result", "../../internal/state/shard", "MigrationResult"},
		{"coordinatord_gateway_txn_outcomes_total", "outcome", "../../internal/gateway", "txnOutcome"},
		{"coordinatord_gateway_txn_outcomes_total", "source", "../../internal/gateway", "txnSource"},
		{"coordinatord_gateway_txn_peer_markers_total", "result", "../../internal/gateway", "peerMarkerResult"},
	} {
		code, err := metricsdoc.ConstValues(c.dir, c.typeName)
		if err != nil {
			t.Fatal(err)
		}
		if len(code) == 0 {
			t.Errorf("%s declares no constant of type %s: the check of %s{%s} reads nothing", c.dir, c.typeName, c.series, c.label)
			continue
		}
		l, _ := documented[c.series].Label(c.label)
		doc := slices.Sorted(slices.Values(l.Values))
		if code := slices.Sorted(slices.Values(code)); !slices.Equal(doc, code) {
			t.Errorf("docs/operations.md lists %s{%s} as %q; the code declares %q (%s in %s)", c.series, c.label, doc, code, c.typeName, c.dir)
		}
	}
}
