package deploy

import (
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/test/metricsdoc"
)

// The label checker flags what would make a real alert or panel silently empty, and only that.
func TestLabelCheckerFindsWrongLabels(t *testing.T) {
	series, err := metricsdoc.Parse("| `coordinatord_loads_total` | counter | `result` (`ok`, `failed`), `kind` | x |\n" +
		"| `coordinatord_wait_seconds` | histogram | `api` | x |\n" +
		"| `coordinatord_state` | gauge | `kind`, `shard` | x |\n")
	if err != nil {
		t.Fatal(err)
	}
	c := &labelChecker{series: series, targetLabels: targetLabels}
	for expr, want := range map[string]string{
		// Good expressions.
		`sum by (instance, kind) (increase(coordinatord_loads_total{result="failed"}[15m])) > 0`:              "",
		`histogram_quantile(0.99, sum by (api, le) (rate(coordinatord_wait_seconds_bucket{api=~"A|B"}[5m])))`: "",
		`coordinatord_loads_total{result!=""} or on (kind) coordinatord_state`:                                "",
		`label_replace(sum by (instance) (coordinatord_loads_total), "method", "Set", "", "") > 0.1`:          "",
		`sum without (shard) (coordinatord_state) * on (kind) group_left (result) coordinatord_loads_total`:   "",
		`topk(5, sum by (kind, shard) (coordinatord_state{instance=~".*"}))`:                                  "",
		`count(up{whatever="x"})`: "",
		// Bad ones.
		`coordinatord_loads_total{outcome="failed"}`:                                      `label "outcome" is not a label of coordinatord_loads_total`,
		`coordinatord_loads_total{result="error"}`:                                        `"error" is not a value coordinatord gives result`,
		`coordinatord_loads_total{result!="aborted"}`:                                     `"aborted" is not a value`,
		`sum by (shard) (rate(coordinatord_loads_total[5m]))`:                             `sum by (shard): label "shard" is not on coordinatord_loads_total`,
		`sum by (kind) (sum by (instance) (coordinatord_state))`:                          `sum by (kind): label "kind" is not on`,
		`sum without (kind) (coordinatord_state) / on (kind) coordinatord_state`:          `on (kind): label "kind" is not on`,
		`histogram_quantile(0.99, sum by (le) (rate(coordinatord_wait_seconds_sum[5m])))`: `label "le" is not on coordinatord_wait_seconds_sum`,
		`label_replace(coordinatord_state, "x", "$1", "node", "(.*)")`:                    `label "node" is not on`,
	} {
		_, problems, err := c.checkExpr(expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		got := strings.Join(problems, "\n")
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", expr, got, want)
		}
	}
	out, _, _ := c.checkExpr(`max by (instance, kind) (coordinatord_state) == 3`)
	if !out.has("kind") || out.has("shard") {
		t.Errorf("the result of a by (instance, kind) has %s", out.describe())
	}
}
