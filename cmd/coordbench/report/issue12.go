package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
)

// comparison is a figure of issue 12 that no single scenario row shows: one scenario's metric
// divided by another's (or by the same scenario's at another size), per target.
type comparison struct {
	name, goal string
	num, den   Key // Target left empty: filled per target
	metric     func(a *Agg) float64
	unit       func(v float64) string
	// paced: both rows are measured at one request rate, which the row names; a row whose
	// throughput fell short of it is marked, as it was not measured at that rate.
	paced bool
}

// rateShortfall is how far below its paced rate a row's throughput may be and still count as
// measured at that rate (the pacer drops slots a stalled client missed).
const rateShortfall = 0.05

var issue12 = []comparison{
	{name: "heartbeat p99 beside another group's commits in its shard ÷ idle shard", goal: "≤ 1.2",
		num: Key{Scenario: "mixed-load", Clients: 8}, den: Key{Scenario: "mixed-load-idle", Clients: 8},
		metric: func(a *Agg) float64 { return float64(a.Latency.Quantile(0.99)) },
		unit:   func(v float64) string { return FormatLatency(int64(v)) }},
	{name: "streams heartbeat server CPU per op, 1000 ÷ 10 members", goal: "≤ 1.2 (flat)",
		num: Key{Scenario: "streams-heartbeat-scaling", Clients: 1000}, den: Key{Scenario: "streams-heartbeat-scaling", Clients: 10},
		metric: func(a *Agg) float64 { return a.CPUPerOp() },
		unit:   func(v float64) string { return fmt.Sprintf("%.1f µs", v) }},
	{name: "streams heartbeat server CPU per op at equal request rate, 1000 ÷ 10 members", goal: "≤ 1.2 (flat)",
		num: Key{Scenario: "streams-heartbeat-paced", Clients: 1000}, den: Key{Scenario: "streams-heartbeat-paced", Clients: 10},
		metric: func(a *Agg) float64 { return a.CPUPerOp() },
		unit:   func(v float64) string { return fmt.Sprintf("%.1f µs", v) }, paced: true},
}

// comparisons writes the issue-12 ratios whose scenarios were measured; nothing when none was.
func (s *Set) comparisons(b *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	header := false
	for _, c := range issue12 {
		for _, t := range s.Targets {
			n, d := c.num, c.den
			n.Target, d.Target = t.Name, t.Name
			na, da := s.Aggs[n], s.Aggs[d]
			if na == nil || da == nil || na.Status != result.StatusOK || da.Status != result.StatusOK {
				continue
			}
			nv, dv := c.metric(na), c.metric(da)
			if math.IsNaN(nv) || math.IsNaN(dv) || dv <= 0 {
				continue
			}
			if !header {
				w("## Issue 12 comparisons\n\nRatios between rows of the scenarios below, per target (the goal is coordinatord's).\n\n")
				w("| comparison | target | ratio | from | goal |\n|---|---|---:|---|---|\n")
				header = true
			}
			name, from := c.name, c.unit(nv)+" ÷ "+c.unit(dv)
			if c.paced {
				name += fmt.Sprintf(" (both paced at %s ops/s)", num(da.Rate))
				if na.Rate != da.Rate {
					name = c.name + fmt.Sprintf(" (paced at %s and %s ops/s: not equal)", num(na.Rate), num(da.Rate))
				}
				for _, a := range []*Agg{na, da} {
					if a.Rate <= 0 || a.Throughput() < a.Rate*(1-rateShortfall) {
						from += fmt.Sprintf("; %d members reached %s ops/s, not the rate", a.Clients, num(a.Throughput()))
					}
				}
			}
			w("| %s | %s | %.2f | %s | %s |\n", name, t.Name, nv/dv, from, c.goal)
		}
	}
	if header {
		w("\n")
	}
}
