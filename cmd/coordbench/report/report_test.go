package report

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/hist"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
)

// lat builds a latency snapshot of n values equal to v nanoseconds.
func lat(v int64, n int) hist.Snapshot {
	h := hist.New()
	for range n {
		h.Record(v)
	}
	return h.Snapshot()
}

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

func sample() *result.File {
	ok := func(sc, target string, clients, round int, ops uint64, latNs int64, cpu float64) result.Measurement {
		return result.Measurement{Scenario: sc, Target: target, Clients: clients, Round: round, Status: result.StatusOK,
			Ops: ops, Seconds: 2, Latency: lat(latNs, int(ops)), CPUSeconds: f64(cpu), PeakRSSBytes: i64(64 << 20),
			Versions: map[string]int16{"Metadata": 13}}
	}
	f := &result.File{
		Started:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Host:     result.Host{CPUs: 2, GoVersion: "go1.26"},
		Settings: result.Settings{Duration: 2 * time.Second, Warmup: time.Second, Rounds: 2},
		Targets: []result.Target{{Name: "coordinatord", PID: 10}, {Name: "kafka", PID: 11},
			{Name: "kfake"}},
	}
	f.Results = []result.Measurement{
		// metadata at 1 and 8 clients; coordinatord twice as fast as kafka; rounds 1000 and 3000 ops.
		ok("metadata", "coordinatord", 1, 1, 1000, 100_000, 0.5),
		ok("metadata", "kafka", 1, 1, 500, 400_000, 1.0),
		ok("metadata", "coordinatord", 1, 2, 3000, 100_000, 0.5),
		ok("metadata", "kafka", 1, 2, 1500, 400_000, 1.0),
		ok("metadata", "coordinatord", 8, 1, 8000, 200_000, 1.0),
		ok("metadata", "kafka", 8, 1, 2000, 800_000, 1.0),
		{Scenario: "metadata", Target: "kfake", Clients: 1, Status: result.StatusError, Note: "setup: boom"},
		// classic-join: coordinatord not supported yet, kafka with an extra.
		{Scenario: "classic-join", Target: "coordinatord", Clients: 8, Status: result.StatusUnsupported,
			Note: "lacks JoinGroup (11)"},
	}
	cj := ok("classic-join", "kafka", 8, 1, 100, 1_000_000, 0.1)
	cj.Extras = map[string]float64{"join_stable_ms": 40}
	cj2 := ok("classic-join", "kafka", 8, 2, 100, 1_000_000, 0.1)
	cj2.Extras = map[string]float64{"join_stable_ms": 60}
	f.Results = append(f.Results, cj, cj2)
	return f
}

func TestAggregateMergesRounds(t *testing.T) {
	s, err := Aggregate([]*result.File{sample()})
	if err != nil {
		t.Fatal(err)
	}
	a := s.Aggs[Key{"metadata", 1, "coordinatord"}]
	if a.Rounds != 2 || a.Ops != 4000 || a.Seconds != 4 {
		t.Fatalf("rounds %d ops %d seconds %v", a.Rounds, a.Ops, a.Seconds)
	}
	if a.Throughput() != 1000 {
		t.Errorf("throughput %v, want 1000 (4000 ops / 4 s)", a.Throughput())
	}
	if lo, hi := minMax(a.RoundThroughputs); lo != 500 || hi != 1500 {
		t.Errorf("round range %v-%v, want 500-1500", lo, hi)
	}
	if got := a.CPUPerOp(); got != 250 { // 1.0 s / 4000 ops
		t.Errorf("cpu per op %v µs, want 250", got)
	}
	if got := a.CPUCores(); got != 0.25 {
		t.Errorf("cpu cores %v, want 0.25", got)
	}
	if a.Latency.Count() != 4000 {
		t.Errorf("merged latency count %d", a.Latency.Count())
	}
	if mean, lo, hi, ok := s.Aggs[Key{"classic-join", 8, "kafka"}].Extra("join_stable_ms"); !ok || mean != 50 || lo != 40 || hi != 60 {
		t.Errorf("extra mean %v range %v-%v ok %v", mean, lo, hi, ok)
	}
	if got := s.Clients("metadata"); len(got) != 2 || got[0] != 1 || got[1] != 8 {
		t.Errorf("clients %v", got)
	}
}

func TestMarkdownTables(t *testing.T) {
	s, err := Aggregate([]*result.File{sample()})
	if err != nil {
		t.Fatal(err)
	}
	md := Markdown(s, Options{Subject: "coordinatord", Baseline: "kafka", ChartsLink: "img",
		Commands: []string{"make bench"}, Descriptions: map[string]string{"metadata": "Metadata for no topics."},
		Charts: map[string][]Chart{"metadata": {{File: "latency-metadata.png", Caption: "lat"}}}})
	for _, want := range []string{
		"| clients | metric | coordinatord | kafka | kfake | coordinatord ÷ kafka |",
		// 4000 ops / 4 s vs 2000 / 4 s: ratio 2, with the per-round range.
		"| 1 | throughput (ops/s) | 1,000 (500–1,500) | 500 (250–750) | error | 2.00× |",
		"| | p50 | 100 µs | 400 µs | | 0.25× |",
		"| | server CPU (µs/op) | 250.0 | 1000.0 | | 0.25× |",
		"| | peak RSS (MiB) | 64 | 64 | | 1.00× |",
		"| 8 | throughput (ops/s) | 4,000 | 1,000 | — | 4.00× |",
		"kfake (error): setup: boom",
		"Metadata for no topics.",
		"![lat](img/latency-metadata.png)",
		"API versions used: coordinatord Metadata v13; kafka Metadata v13.",
		// classic-join: no kfake column, coordinatord not supported yet, the extra row.
		"| clients | metric | coordinatord | kafka | coordinatord ÷ kafka |",
		"| 8 | throughput (ops/s) | not supported yet | 50 (50–50) | — |",
		"| | join_stable_ms | | 50 (40–60) | — |",
		"coordinatord (not supported yet): lacks JoinGroup (11)",
		"```sh\nmake bench\n```",
		// at a glance: throughput (p99) per target; kfake has no metadata at 8 clients.
		"| metadata | 8 | 4,000 (200 µs) | 1,000 (800 µs) | — | 4.00× |",
		"| classic-join | 8 | not supported yet | 50 (1 ms) | — | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

func TestMarkdownWithoutBaselineHasNoRatio(t *testing.T) {
	s, err := Aggregate([]*result.File{sample()})
	if err != nil {
		t.Fatal(err)
	}
	md := Markdown(s, Options{Subject: "coordinatord", Baseline: "absent"})
	if strings.Contains(md, "÷") {
		t.Error("ratio column present without its baseline target")
	}
}

func TestWriteChartsMakesPNGs(t *testing.T) {
	s, err := Aggregate([]*result.File{sample()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	charts, err := WriteCharts(s, dir)
	if err != nil {
		t.Fatal(err)
	}
	// metadata: latency (two panels) and throughput (two client counts); classic-join: latency
	// only (one client count), so no against-clients charts.
	want := map[string][]string{
		"metadata":     {"latency-metadata.png", "throughput-metadata.png"},
		"classic-join": {"latency-classic-join.png"},
	}
	for sc, files := range want {
		if len(charts[sc]) != len(files) {
			t.Fatalf("%s: charts %+v, want %v", sc, charts[sc], files)
		}
		for i, f := range files {
			if charts[sc][i].File != f {
				t.Errorf("%s chart %d is %s, want %s", sc, i, charts[sc][i].File, f)
			}
			r, err := os.Open(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(r)
			r.Close()
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
				t.Errorf("%s is only %v", f, b)
			}
		}
	}
}

func TestNum(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -4500: "-4,500"} {
		if got := num(in); got != want {
			t.Errorf("num(%v) = %q, want %q", in, got, want)
		}
	}
}

// The issue-12 ratios appear for the targets that measured both rows, computed from them, and
// not at all when the scenarios were not run.
func TestIssue12Comparisons(t *testing.T) {
	if got := Markdown(mustAggregate(t, sample()), Options{}); strings.Contains(got, "Issue 12 comparisons") {
		t.Fatal("comparisons written without their scenarios")
	}
	f := sample()
	ok := func(sc, target string, clients int, ops uint64, latNs int64, cpu float64) result.Measurement {
		return result.Measurement{Scenario: sc, Target: target, Clients: clients, Round: 1, Status: result.StatusOK,
			Ops: ops, Seconds: 2, Latency: lat(latNs, int(ops)), CPUSeconds: f64(cpu)}
	}
	f.Results = append(f.Results,
		ok("mixed-load-idle", "coordinatord", 8, 1000, 1_000_000, 1),
		ok("mixed-load", "coordinatord", 8, 1000, 3_000_000, 1),
		ok("mixed-load-idle", "kafka", 8, 1000, 2_000_000, 1),
		ok("streams-heartbeat-scaling", "coordinatord", 10, 1000, 1_000_000, 0.01),   // 10 µs/op
		ok("streams-heartbeat-scaling", "coordinatord", 1000, 1000, 1_000_000, 0.05), // 50 µs/op
	)
	paced := func(clients int, ops uint64, cpu float64) result.Measurement {
		m := ok("streams-heartbeat-paced", "coordinatord", clients, ops, 1_000_000, cpu)
		m.Rate = 20_000
		return m
	}
	f.Results = append(f.Results,
		paced(10, 40_000, 0.4),    // 20,000/s, 10 µs/op
		paced(1000, 30_000, 0.36), // 15,000/s: short of the rate, 12 µs/op
	)
	got := Markdown(mustAggregate(t, f), Options{})
	for _, want := range []string{
		"| heartbeat p99 beside another group's commits in its shard ÷ idle shard | coordinatord | 3.00 |",
		"| streams heartbeat server CPU per op, 1000 ÷ 10 members | coordinatord | 5.00 | 50.0 µs ÷ 10.0 µs |",
		"| streams heartbeat server CPU per op at equal request rate, 1000 ÷ 10 members (both paced at 20,000 ops/s) | coordinatord | 1.20 | " +
			"12.0 µs ÷ 10.0 µs; 1000 members reached 15,000 ops/s, not the rate | ≤ 1.2 (flat) |",
		"| 10 | throughput (ops/s) | 20,000, paced at 20,000 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "10 members reached") {
		t.Error("the 10-member row reached its rate, yet is marked short of it")
	}
	if strings.Contains(got, "idle shard | kafka") {
		t.Error("kafka has no mixed-load row, yet got a ratio")
	}
}

func mustAggregate(t *testing.T, f *result.File) *Set {
	t.Helper()
	s, err := Aggregate([]*result.File{f})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Rounds paced at different rates are not one row: merging them would average two rates.
func TestAggregateRefusesRoundsAtDifferentRates(t *testing.T) {
	f := sample()
	for i, rate := range []float64{20_000, 30_000} {
		f.Results = append(f.Results, result.Measurement{Scenario: "streams-heartbeat-paced", Target: "coordinatord", Clients: 10,
			Round: i + 1, Status: result.StatusOK, Rate: rate, Ops: 10, Seconds: 1, Latency: lat(1000, 10)})
	}
	if _, err := Aggregate([]*result.File{f}); err == nil || !strings.Contains(err.Error(), "paced at") {
		t.Errorf("rounds at 20,000 and 30,000 ops/s merged: %v", err)
	}
}
