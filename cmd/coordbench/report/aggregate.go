// Package report turns results files into docs/benchmarks.md: per scenario, a table comparing
// the targets (with a ratio column) and PNG charts drawn with gonum/plot. Aggregation merges
// the rounds of one (scenario, clients, target): operations and seconds add up, latency
// histograms merge, the per-round throughput range shows the noise.
package report

import (
	"fmt"
	"math"
	"sort"

	"github.com/coordinatord/coordinatord/cmd/coordbench/hist"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
)

// Key identifies one cell group of the report.
type Key struct {
	Scenario string
	Clients  int
	Target   string
}

// Agg is every round of one Key.
type Agg struct {
	Key
	Status string // ok if any round was ok
	Notes  []string
	Rounds int // rounds measured ok

	// Rate is the aggregate rate the clients were paced at (result.Measurement.Rate); 0: closed loop.
	Rate float64

	Ops, Errors      uint64
	Seconds          float64
	Latency          *hist.Histogram
	RoundThroughputs []float64

	CPUSeconds  float64 // summed over ok rounds that measured it
	CPUMeasured bool
	// The target's upstream process (a gateway's broker), summed like CPUSeconds.
	UpstreamCPUSeconds  float64
	UpstreamCPUMeasured bool
	PeakRSS             int64 // max over rounds
	RSSLifetime         bool
	BenchCPU            float64
	Extras              map[string][]float64 // per round
	Versions            map[string]int16
	ErrorsByRound       []uint64
}

// Throughput is successful operations per second over all rounds.
func (a *Agg) Throughput() float64 {
	if a.Seconds <= 0 {
		return 0
	}
	return float64(a.Ops) / a.Seconds
}

// CPUPerOp is server CPU microseconds per successful operation.
func (a *Agg) CPUPerOp() float64 {
	if !a.CPUMeasured || a.Ops == 0 {
		return math.NaN()
	}
	return a.CPUSeconds * 1e6 / float64(a.Ops)
}

// UpstreamCPUPerOp is the upstream process's CPU microseconds per successful operation.
func (a *Agg) UpstreamCPUPerOp() float64 {
	if !a.UpstreamCPUMeasured || a.Ops == 0 {
		return math.NaN()
	}
	return a.UpstreamCPUSeconds * 1e6 / float64(a.Ops)
}

// CPUCores is server CPU seconds per wall second: how many cores it kept busy.
func (a *Agg) CPUCores() float64 {
	if !a.CPUMeasured || a.Seconds <= 0 {
		return math.NaN()
	}
	return a.CPUSeconds / a.Seconds
}

// Extra is the mean of an extra figure over rounds, and whether it exists.
func (a *Agg) Extra(name string) (mean, lo, hi float64, ok bool) {
	vs := a.Extras[name]
	if len(vs) == 0 {
		return 0, 0, 0, false
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		mean += v
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return mean / float64(len(vs)), lo, hi, true
}

// Set is everything the report shows.
type Set struct {
	Files     []*result.File
	Targets   []result.Target // in first-seen order
	Scenarios []string        // in first-seen order
	Aggs      map[Key]*Agg
}

// Clients lists the client counts measured for scenario, ascending.
func (s *Set) Clients(scenario string) []int {
	seen := map[int]bool{}
	for k := range s.Aggs {
		if k.Scenario == scenario {
			seen[k.Clients] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// Aggregate merges the measurements of every file. A later file's target of the same name is
// the same column.
func Aggregate(files []*result.File) (*Set, error) {
	s := &Set{Files: files, Aggs: map[Key]*Agg{}}
	seenT := map[string]bool{}
	seenS := map[string]bool{}
	for _, f := range files {
		for _, t := range f.Targets {
			if !seenT[t.Name] {
				seenT[t.Name] = true
				s.Targets = append(s.Targets, t)
			}
		}
		for _, m := range f.Results {
			if !seenS[m.Scenario] {
				seenS[m.Scenario] = true
				s.Scenarios = append(s.Scenarios, m.Scenario)
			}
			if !seenT[m.Target] {
				seenT[m.Target] = true
				s.Targets = append(s.Targets, result.Target{Name: m.Target})
			}
			k := Key{m.Scenario, m.Clients, m.Target}
			a := s.Aggs[k]
			if a == nil {
				a = &Agg{Key: k, Status: m.Status, Latency: hist.New(), Extras: map[string][]float64{}, Versions: map[string]int16{}}
				s.Aggs[k] = a
			}
			if m.Note != "" && !contains(a.Notes, m.Note) {
				a.Notes = append(a.Notes, m.Note)
			}
			if m.Status != result.StatusOK {
				if a.Rounds == 0 {
					a.Status = m.Status
				}
				continue
			}
			h, err := hist.FromSnapshot(m.Latency)
			if err != nil {
				return nil, fmt.Errorf("%s/%s/%d round %d: %w", m.Scenario, m.Target, m.Clients, m.Round, err)
			}
			if a.Rounds > 0 && m.Rate != a.Rate {
				return nil, fmt.Errorf("%s/%s/%d: rounds paced at %g and %g ops/s cannot be merged", m.Scenario, m.Target, m.Clients, a.Rate, m.Rate)
			}
			a.Rate = m.Rate
			a.Status = result.StatusOK
			a.Rounds++
			a.Ops += m.Ops
			a.Errors += m.Errors
			a.ErrorsByRound = append(a.ErrorsByRound, m.Errors)
			a.Seconds += m.Seconds
			a.Latency.Merge(h)
			a.RoundThroughputs = append(a.RoundThroughputs, m.Throughput())
			a.BenchCPU += m.BenchCPUSeconds
			if m.CPUSeconds != nil {
				a.CPUSeconds += *m.CPUSeconds
				a.CPUMeasured = true
			}
			if m.UpstreamCPUSeconds != nil {
				a.UpstreamCPUSeconds += *m.UpstreamCPUSeconds
				a.UpstreamCPUMeasured = true
			}
			if m.PeakRSSBytes != nil && *m.PeakRSSBytes > a.PeakRSS {
				a.PeakRSS = *m.PeakRSSBytes
			}
			a.RSSLifetime = a.RSSLifetime || m.PeakRSSLifetime
			for name, v := range m.Extras {
				a.Extras[name] = append(a.Extras[name], v)
			}
			for name, v := range m.Versions {
				a.Versions[name] = v
			}
		}
	}
	return s, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
