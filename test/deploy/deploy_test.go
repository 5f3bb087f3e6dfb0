// Package deploy checks deploy/ with the tools operators use: Prometheus' promtool for the alert
// rules and the dashboard's queries, kubeconform for the Kubernetes manifests (against the
// Kubernetes API's own OpenAPI schemas, fetched as a Go module, since kubeconform's default
// schema host is not reachable from CI), and coordinatord's own config check for the ConfigMap.
// Beyond syntax, the alerts' and dashboard's series, label names and closed label values are
// held to docs/operations.md's metrics table (promql.go), which the server's tests hold to the
// code.
// `make deploy-check` runs it; test/install-tools.sh installs the tools.
package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/test/metricsdoc"
	"go.yaml.in/yaml/v3"
)

const (
	rules     = "../../deploy/prometheus/coordinatord-alerts.yaml"
	ruleTests = "../../deploy/prometheus/coordinatord-alerts_test.yaml"
	dashboard = "../../deploy/grafana/coordinatord-dashboard.json"
	manifests = "../../deploy/kubernetes"
	// The Kubernetes release whose API schemas the manifests are checked against, and the
	// Prometheus Operator release whose ServiceMonitor CRD is.
	kubernetesModule = "k8s.io/kubernetes@v1.34.1"
	operatorModule   = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// tool finds a checker; missing, the test fails and says how to install it.
func tool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s is not installed: run test/install-tools.sh", name)
	return ""
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

func TestAlertRulesPassPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	if out, err := run(t, promtool, "check", "rules", rules); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := run(t, promtool, "test", "rules", ruleTests); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// The checker is not vacuous: a rule with a broken expression fails it.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: sum(rate(coordinatord_requests_total[5m])\n"), 0o644)
	if out, err := run(t, promtool, "check", "rules", bad); err == nil {
		t.Fatalf("promtool accepted a broken expression:\n%s", out)
	}
}

type grafanaDashboard struct {
	UID    string         `json:"uid"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	return d
}

// Every query of the dashboard is valid PromQL: with Grafana's variables replaced, promtool
// checks them as recording rules.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := tool(t, "promtool")
	d := readDashboard(t)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	ids := map[int]bool{}
	n := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			expr, _ := json.Marshal(vars.Replace(tg.Expr))
			b.WriteString("      - record: dashboard:query\n        expr: " + string(expr) + "\n")
			n++
		}
	}
	f := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	os.WriteFile(f, []byte(b.String()), 0o644)
	if out, err := run(t, promtool, "check", "rules", f); err != nil {
		t.Fatalf("dashboard queries do not parse: %v\n%s", err, out)
	}
	if n < 20 {
		t.Fatalf("only %d dashboard queries", n)
	}
}

// The dashboard shows what issue 16 asks of it: groups by type and state, rebalances per
// minute, and the latencies, shard, plugin and gateway signals, each from its own series.
func TestDashboardShowsEverySignal(t *testing.T) {
	d := readDashboard(t)
	var exprs strings.Builder
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs.WriteString(tg.Expr + "\n")
		}
	}
	for _, want := range []string{
		"sum by (type, state) (coordinatord_groups", "coordinatord_rebalances_total",
		"coordinatord_request_duration_seconds_bucket", "coordinatord_log_fsync_seconds_bucket",
		"coordinatord_shard_state", "coordinatord_streams_group_topology_description_backoff_groups",
		"coordinatord_gateway_forwarded_request_bytes_total", "coordinatord_gateway_forward_duration_seconds_bucket",
		"coordinatord_gateway_added_latency_seconds_bucket",
	} {
		if !strings.Contains(exprs.String(), want) {
			t.Errorf("no dashboard query uses %s", want)
		}
	}
}

// The dashboard and the alerts name only series coordinatord serves (the metric table of
// docs/operations.md, which cmd/coordinatord/metrics_docs_test.go checks against the code).
func TestDeployNamesOnlyServedSeries(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(coordinatord_[a-z_]+)`").FindAllStringSubmatch(string(doc), -1) {
		served[m[1]] = true
	}
	for _, f := range []string{rules, dashboard} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range regexp.MustCompile(`coordinatord_[a-z_]+`).FindAllString(string(b), -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if s, ok := strings.CutSuffix(name, suffix); ok && served[s] {
					base = s
				}
			}
			if !served[base] {
				t.Errorf("%s names %s, which coordinatord does not serve", filepath.Base(f), name)
			}
		}
	}
}

// moduleDir downloads a module through the Go module proxy and returns its directory.
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir() // outside this module: go.mod and go.sum stay as they are
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", mod, err, out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: %s %v", mod, info.Error, err)
	}
	return info.Dir
}

// strict closes every object schema that lists its properties and does not keep unknown fields,
// as kubeconform's "-strict" schemas do: a misspelt field is an error, not ignored.
func strict(v any) {
	switch s := v.(type) {
	case map[string]any:
		_, hasProps := s["properties"]
		_, hasAdditional := s["additionalProperties"]
		preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool)
		if hasProps && !hasAdditional && !preserve {
			s["additionalProperties"] = false
		}
		for _, c := range s {
			strict(c)
		}
	case []any:
		for _, c := range s {
			strict(c)
		}
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// kubeSchemas writes, for every kind the manifests use, a standalone strict JSON schema named
// as kubeconform looks it up ({{ .ResourceKind }}{{ .KindSuffix }}.json): the kind's schema
// from the Kubernetes release's OpenAPI v3 document (self-contained per API group), and the
// ServiceMonitor's from the Prometheus Operator's CRD.
func kubeSchemas(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	k8s := filepath.Join(moduleDir(t, kubernetesModule), "api", "openapi-spec", "v3")
	for _, k := range []struct{ file, name, out string }{
		{"api__v1_openapi.json", "io.k8s.api.core.v1.ConfigMap", "configmap-v1.json"},
		{"api__v1_openapi.json", "io.k8s.api.core.v1.Service", "service-v1.json"},
		{"apis__apps__v1_openapi.json", "io.k8s.api.apps.v1.StatefulSet", "statefulset-apps-v1.json"},
		{"apis__policy__v1_openapi.json", "io.k8s.api.policy.v1.PodDisruptionBudget", "poddisruptionbudget-policy-v1.json"},
	} {
		b, err := os.ReadFile(filepath.Join(k8s, k.file))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Components map[string]any `json:"components"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if _, ok := doc.Components["schemas"].(map[string]any)[k.name]; !ok {
			t.Fatalf("%s has no schema %s", k.file, k.name)
		}
		strict(doc.Components)
		writeJSON(t, filepath.Join(dir, k.out), map[string]any{"$ref": "#/components/schemas/" + k.name, "components": doc.Components})
	}
	b, err := os.ReadFile(filepath.Join(moduleDir(t, operatorModule), "jsonnet", "prometheus-operator", "servicemonitors-crd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(crd.Spec.Versions, func(v struct {
		Name   string `json:"name"`
		Schema struct {
			OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
		} `json:"schema"`
	}) bool {
		return v.Name == "v1"
	})
	if i < 0 {
		t.Fatal("the ServiceMonitor CRD has no v1")
	}
	s := crd.Spec.Versions[i].Schema.OpenAPIV3Schema
	strict(s)
	writeJSON(t, filepath.Join(dir, "servicemonitor-monitoring-v1.json"), s)
	return dir
}

func kubeconform(t *testing.T, bin, schemas string, files ...string) (string, error) {
	t.Helper()
	args := append([]string{"-strict", "-summary", "-output", "text",
		"-schema-location", filepath.Join(schemas, "{{ .ResourceKind }}{{ .KindSuffix }}.json")}, files...)
	return run(t, bin, args...)
}

func TestKubernetesManifestsPassKubeconform(t *testing.T) {
	bin := tool(t, "kubeconform")
	schemas := kubeSchemas(t)
	files, _ := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	out, err := kubeconform(t, bin, schemas, files...)
	if err != nil {
		t.Fatalf("kubeconform: %v\n%s", err, out)
	}
	// Every kind the issue asks for is there and was checked.
	all := ""
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all += string(b)
	}
	for _, kind := range []string{"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget", "ServiceMonitor"} {
		if !strings.Contains(all, "\nkind: "+kind+"\n") {
			t.Errorf("deploy/kubernetes has no %s", kind)
		}
	}
	t.Logf("kubeconform: %s", out)
	if !regexp.MustCompile(`Valid: 6, Invalid: 0, Errors: 0, Skipped: 0`).MatchString(out) {
		t.Errorf("kubeconform did not check the 6 resources: %s", out)
	}
	// The schemas are not vacuous: a misspelt field, a wrong type and a missing schema fail.
	for name, bad := range map[string]string{
		"misspelt field": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  replica: 1\n  serviceName: x\n  selector: {matchLabels: {a: b}}\n  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}\n",
		"wrong type":     "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports: [{port: \"not a number\"}]\n",
		"probe typo":     "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  serviceName: x\n  selector: {matchLabels: {a: b}}\n  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i, readinessProbe: {httpGet: {paht: /readyz, port: 1}}}]}}\n",
		"monitor typo":   "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec:\n  selector: {}\n  endpoints: [{prot: admin}]\n",
		"unknown kind":   "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n",
	} {
		f := filepath.Join(t.TempDir(), "bad.yaml")
		os.WriteFile(f, []byte(bad), 0o644)
		out, err := kubeconform(t, bin, schemas, f)
		if err == nil {
			t.Errorf("kubeconform accepted a manifest with a %s:\n%s", name, out)
		}
		t.Logf("%s: %s", name, out)
	}
}

// The ConfigMap's properties file is one coordinatord accepts, with the settings the image's
// entrypoint adds.
func TestConfigMapPassesConfigCheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(manifests, "coordinatord.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "  coordinatord.properties: |\n")
	if !ok {
		t.Fatal("no coordinatord.properties in the ConfigMap")
	}
	var props []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "    ") {
			break
		}
		props = append(props, strings.TrimPrefix(line, "    "))
	}
	f := filepath.Join(t.TempDir(), "coordinatord.properties")
	os.WriteFile(f, []byte(strings.Join(props, "\n")+"\n"), 0o644)
	out, err := run(t, "go", "run", "../../cmd/coordinatord", "config", "check", "--config", f,
		"--set", "log.dirs="+t.TempDir(), "--set", "listeners=PLAINTEXT://0.0.0.0:9092", "--set", "admin.listener=0.0.0.0:9644",
		"--set", "advertised.listeners=PLAINTEXT://coordinatord-0.coordinatord-headless:9092")
	if err != nil {
		t.Fatalf("coordinatord config check on the ConfigMap: %v\n%s", err, out)
	}
}

// The compose files pass Compose's own validation (docker-compose config, which also checks that
// every build context exists), and the gateway set-up's coordinatord arguments pass `config
// check` on top of the image's entrypoint settings.
func TestComposeFilesValidate(t *testing.T) {
	bin := tool(t, "docker-compose")
	for _, f := range []string{"../../deploy/docker-compose.yml", "../../deploy/compose/docker-compose.yml"} {
		if out, err := run(t, bin, "-f", f, "config", "-q"); err != nil {
			t.Fatalf("docker-compose config %s: %v\n%s", f, err, out)
		}
	}
	b, err := os.ReadFile("../../deploy/compose/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	inService, inCommand := false, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case line == "  coordinatord:":
			inService = true
		case inService && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "    "):
			inService = false
		case inService && line == "    command:":
			inCommand = true
		case inCommand && strings.HasPrefix(line, "      - "):
			args = append(args, strings.TrimPrefix(line, "      - "))
		case inCommand && strings.HasPrefix(strings.TrimSpace(line), "#"):
		case inCommand:
			inCommand = false
		}
	}
	if len(args) == 0 || !slices.Contains(args, "upstream.bootstrap.servers=kafka:19092") {
		t.Fatalf("no gateway-mode command found for coordinatord in the compose file: %v", args)
	}
	// The Dockerfile's entrypoint: config file, data directory, listeners, admin listener.
	check := append([]string{"run", "../../cmd/coordinatord", "config", "check", "--config", "../../configs/coordinatord.properties",
		"--set", "log.dirs=" + t.TempDir(), "--set", "listeners=PLAINTEXT://0.0.0.0:9092", "--set", "admin.listener=0.0.0.0:9644"}, args...)
	if out, err := run(t, "go", check...); err != nil {
		t.Fatalf("coordinatord config check with the compose file's arguments: %v\n%s", err, out)
	}
}

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// deployQuery is one PromQL expression of deploy/, with where it is for messages.
type deployQuery struct {
	where, expr string
	templates   []string // alert labels and annotations, whose {{ $labels.x }} must be on the result
}

func deployQueries(t *testing.T) []deployQuery {
	t.Helper()
	b, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	var r alertRules
	if err := yaml.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", rules, err)
	}
	var qs []deployQuery
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			name := "alert " + rule.Alert
			if rule.Record != "" {
				name = "record " + rule.Record
			}
			q := deployQuery{where: fmt.Sprintf("%s: group %s, %s", filepath.Base(rules), g.Name, name), expr: rule.Expr}
			q.templates = append(slices.Collect(maps.Values(rule.Labels)), slices.Collect(maps.Values(rule.Annotations))...)
			qs = append(qs, q)
		}
	}
	// Grafana's variables stand for a range and a regex of instances.
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	for _, p := range readDashboard(t).Panels {
		for i, tg := range p.Targets {
			qs = append(qs, deployQuery{where: fmt.Sprintf("%s: panel %d %q, query %d", filepath.Base(dashboard), p.ID, p.Title, i+1), expr: vars.Replace(tg.Expr)})
		}
	}
	return qs
}

// Labels Prometheus attaches to every series it scrapes: the target's address and its job.
// The ServiceMonitor (deploy/kubernetes/servicemonitor.yaml) adds no relabelling, so the
// Operator's namespace, pod and service labels are not relied on.
var targetLabels = []string{"instance", "job"}

var templateLabel = regexp.MustCompile(`\$labels\.([A-Za-z_][A-Za-z0-9_]*)`)

// The alerts and the dashboard filter and group only by labels the series have, and compare
// closed labels only with values coordinatord gives them: the label column of the metrics table
// in docs/operations.md, which cmd/coordinatord's TestOperationsDocListsEveryLabel holds to the
// labels the code registers. A label renamed in the code fails there, then here until deploy/
// follows, instead of an alert that silently never fires.
func TestDeployUsesOnlyServedLabels(t *testing.T) {
	series, err := metricsdoc.Read("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	c := &labelChecker{series: series, targetLabels: targetLabels}
	qs := deployQueries(t)
	if len(qs) < 30 {
		t.Fatalf("found only %d queries in deploy/", len(qs))
	}
	for _, q := range qs {
		out, problems, err := c.checkExpr(q.expr)
		if err != nil {
			t.Errorf("%s: the label check cannot read the expression: %v\n%s", q.where, err, q.expr)
			continue
		}
		for _, p := range problems {
			t.Errorf("%s: %s", q.where, p)
		}
		for _, tmpl := range q.templates {
			for _, m := range templateLabel.FindAllStringSubmatch(tmpl, -1) {
				if !out.has(m[1]) {
					t.Errorf("%s: {{ $labels.%s }} is not a label of the alert's result, %s", q.where, m[1], out.describe())
				}
			}
		}
	}
}
