package main

import (
	"os"
	"slices"
	"testing"
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
