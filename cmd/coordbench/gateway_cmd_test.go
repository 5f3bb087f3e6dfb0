package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/hist"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
)

// An --also target's own settings: every set= after the binary, values with '=' kept whole;
// anything else after a comma is refused rather than dropped.
func TestTargetSets(t *testing.T) {
	bin, sets, err := targetSets("bin/coordinatord,set=log.backend=kafka,set=cluster.id=a=b")
	if err != nil || bin != "bin/coordinatord" || !slices.Equal(sets, []string{"log.backend=kafka", "cluster.id=a=b"}) {
		t.Fatalf("got %q %q %v", bin, sets, err)
	}
	if bin, sets, err := targetSets("bin/coordinatord"); err != nil || bin != "bin/coordinatord" || sets != nil {
		t.Fatalf("plain binary: got %q %q %v", bin, sets, err)
	}
	for _, bad := range []string{"bin/c,log.backend=kafka", "bin/c,set=nokey"} {
		if _, _, err := targetSets(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// --cpus: each role gets exactly the CPUs named, ranges and lists included; a plan that
// leaves a role out is refused, since direct and gateway would then not give Kafka the same CPU.
func TestParseCPUPlan(t *testing.T) {
	p, err := parseCPUPlan("upstream=0,2-3,loadgen=0,gateway=1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.upstream, []int{0, 2, 3}) || !slices.Equal(p.loadgen, []int{0}) || !slices.Equal(p.gateway, []int{1}) {
		t.Fatalf("got %+v", p)
	}
	if p, err := parseCPUPlan(""); err != nil || p.set() {
		t.Fatalf("empty: got %+v %v", p, err)
	}
	for _, bad := range []string{"upstream=0,loadgen=0", "0,upstream=0,loadgen=0,gateway=1", "upstream=0,loadgen=0,gateway=1,kafka=2",
		"upstream=0,loadgen=0,gateway=x", "upstream=3-1,loadgen=0,gateway=1", "upstream=0,upstream=1,loadgen=0,gateway=1"} {
		if _, err := parseCPUPlan(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The allowed CPUs of this very process read back as the scheduler reports them.
func TestProcessCPUsReadsThisProcess(t *testing.T) {
	cpus, err := processCPUs(os.Getpid())
	if err != nil || len(cpus) == 0 {
		t.Fatalf("got %v %v", cpus, err)
	}
}

// The gateway table carries the upstream broker's CPU in the gateway's windows beside its CPU
// in the direct ones, per MiB moved: a broker that spends more per request through the gateway
// shows there. A gateway row whose windows did not read the broker says n/a.
func TestGatewayTableShowsTheUpstreamsCPUThroughTheGateway(t *testing.T) {
	lat := hist.New()
	for range 100 {
		lat.RecordDuration(100 * time.Microsecond)
	}
	cpu := func(s float64) *float64 { return &s }
	m := func(target string, ops uint64, serverCPU, upstreamCPU *float64) result.Measurement {
		return result.Measurement{Scenario: "produce-1k", Target: target, Clients: 16, Round: 1, Status: result.StatusOK,
			Ops: ops, Seconds: 1, Latency: lat.Snapshot(), CPUSeconds: serverCPU, UpstreamCPUSeconds: upstreamCPU}
	}
	file := &result.File{
		Targets: []result.Target{{Name: "direct", PID: 1}, {Name: "gateway", PID: 2, UpstreamPID: 1}, {Name: "unread", PID: 3}},
		// 1024 ops of 1 KiB = 1 MiB: direct's broker 1.0 s, through the gateway 1.5 s per MiB.
		Results: []result.Measurement{m("direct", 1024, cpu(1.0), nil), m("gateway", 1024, cpu(0.5), cpu(1.5)), m("unread", 1024, cpu(0.5), nil)},
	}
	md, err := gatewayTable(file, cpuPlan{})
	if err != nil {
		t.Fatal(err)
	}
	var gw, unread string
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "| produce-1k | 16 | gateway |"):
			gw = line
		case strings.HasPrefix(line, "| produce-1k | 16 | unread |"):
			unread = line
		}
	}
	if !strings.HasSuffix(gw, "| 500.00 | 1000.00 | 1500.00 |") {
		t.Errorf("gateway row %q: want coordinatord 500, Kafka direct 1000 and through the gateway 1500 ms per MiB", gw)
	}
	if !strings.HasSuffix(unread, "| 500.00 | 1000.00 | n/a |") {
		t.Errorf("row without the broker's CPU %q: want n/a in the last column", unread)
	}
	if !strings.Contains(md, "Kafka CPU ms per MiB (through the gateway) |") {
		t.Errorf("no column for the broker's CPU through the gateway:\n%s", md)
	}
}

// Offset commits carry no payload, so their rows give CPU per commit: coordinatord's, Kafka's
// own commits' and the broker's while it serves coordinatord's log.backend=kafka (what a
// backend costs the upstream). The broker's settings, which decide what the direct row
// measures, stand above the table.
func TestGatewayTableGivesCPUPerCommitAndTheBrokersSettings(t *testing.T) {
	lat := hist.New()
	for range 100 {
		lat.RecordDuration(100 * time.Microsecond)
	}
	cpu := func(s float64) *float64 { return &s }
	m := func(target string, serverCPU, upstreamCPU *float64) result.Measurement {
		return result.Measurement{Scenario: "offset-commit", Target: target, Clients: 64, Round: 1, Status: result.StatusOK,
			Ops: 1000, Seconds: 1, Latency: lat.Snapshot(), CPUSeconds: serverCPU, UpstreamCPUSeconds: upstreamCPU}
	}
	file := &result.File{
		Targets: []result.Target{{Name: "direct", PID: 1, Kind: "Apache Kafka (started with `offsets.topic.num.partitions=50`)"},
			{Name: "kafka-backend", PID: 2, UpstreamPID: 1}},
		// 1000 commits: Kafka's own 36 ms, coordinatord 30 ms and the broker 25 ms for it.
		Results: []result.Measurement{m("direct", cpu(0.036), nil), m("kafka-backend", cpu(0.030), cpu(0.025))},
	}
	md, err := gatewayTable(file, cpuPlan{})
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| offset-commit | 64 | kafka-backend |") {
			row = line
		}
	}
	if !strings.HasSuffix(row, "| 30.0 µs/op | 36.0 µs/op | 25.0 µs/op |") {
		t.Errorf("offset-commit row %q: want coordinatord 30, Kafka direct 36 and the broker through the gateway 25 µs per commit", row)
	}
	if !strings.Contains(md, "direct: Apache Kafka (started with `offsets.topic.num.partitions=50`).") {
		t.Errorf("the broker's settings are not above the table:\n%s", md)
	}
}

// --upstream-config is refused for a broker the caller started: the table would claim settings
// that broker may not have.
func TestUpstreamConfigOnlyForTheBrokerItStarts(t *testing.T) {
	f := &gatewayFlags{upstream: "127.0.0.1:1", upstreamConfig: []string{"offsets.topic.num.partitions=50"}}
	err := runGateway(t.Context(), f, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--upstream-config") {
		t.Fatalf("got %v", err)
	}
	f = &gatewayFlags{upstream: "auto", upstreamConfig: []string{"=50"}}
	if err := runGateway(t.Context(), f, io.Discard); err == nil || !strings.Contains(err.Error(), "key=value") {
		t.Fatalf("a setting without a key: got %v", err)
	}
}
