package runner

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/hist"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
	"github.com/coordinatord/coordinatord/cmd/coordbench/scenario"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func mustScenario(t *testing.T, name string) scenario.Scenario {
	t.Helper()
	s, ok := scenario.Get(name)
	if !ok {
		t.Fatalf("no scenario %s", name)
	}
	return s
}

// Two kfake clusters stand in for two targets: rounds alternate between them, a scenario
// whose API kfake lacks (streams, key 88) is recorded as not supported, and the classic group
// settles and reports its figures.
func TestRunAlternatesTargetsAndSkipsUnsupported(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kfake clusters")
	}
	var targets []result.Target
	for _, name := range []string{"a", "b"} {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		targets = append(targets, result.Target{Name: name, Addr: c.ListenAddrs()[0]})
	}
	// b stands for a gateway: the process behind it (kfake runs in this one) has its CPU read.
	targets[1].UpstreamPID = os.Getpid()
	var log bytes.Buffer
	ms, err := Run(context.Background(), Config{
		Scenarios: []scenario.Scenario{mustScenario(t, "metadata"), mustScenario(t, "classic-join"),
			mustScenario(t, "streams-heartbeat"), mustScenario(t, "offset-commit")},
		Targets: targets, Clients: []int{2}, Duration: 150 * time.Millisecond, Rounds: 2, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range ms {
		switch m.Scenario {
		case "metadata":
			order = append(order, m.Target)
		case "streams-heartbeat":
			if m.Status != result.StatusUnsupported || m.Note != "lacks StreamsGroupHeartbeat (88)" {
				t.Errorf("streams on kfake: %s %q", m.Status, m.Note)
			}
			continue
		}
		if (m.UpstreamCPUSeconds != nil) != (m.Target == "b") {
			t.Errorf("%s on %s: upstream CPU %v, want it read for b alone", m.Scenario, m.Target, m.UpstreamCPUSeconds)
		}
		if m.Status != result.StatusOK || m.Ops == 0 || m.Errors != 0 {
			t.Errorf("%s on %s round %d: %s, %d ops, %d errors, %s", m.Scenario, m.Target, m.Round, m.Status, m.Ops, m.Errors, m.Note)
		}
		h, err := hist.FromSnapshot(m.Latency)
		if err != nil || h.Count() != m.Ops {
			t.Errorf("%s: latency count %d for %d ops (%v)", m.Scenario, h.Count(), m.Ops, err)
		}
		if m.Scenario == "classic-join" {
			for _, x := range []string{"join_stable_ms", "rejoin_stable_ms", "join_generations", "rejoin_generations"} {
				if _, ok := m.Extras[x]; !ok {
					t.Errorf("classic-join lacks %s: %v", x, m.Extras)
				}
			}
		}
	}
	if got := len(order); got != 4 || order[0] != "a" || order[1] != "b" || order[2] != "a" || order[3] != "b" {
		t.Errorf("metadata windows visited %v, want a b a b", order)
	}
	if t.Failed() {
		t.Log(log.String())
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	if _, err := Run(context.Background(), Config{Rounds: 0, Duration: time.Second}); err == nil {
		t.Error("zero rounds accepted")
	}
	if _, err := Run(context.Background(), Config{Rounds: 1}); err == nil {
		t.Error("zero duration accepted")
	}
}

// With MixedCommitsAt, mixed-load's heartbeats go to the target and its commits to the other
// server: the committers' group and its offsets exist there and not on the target.
func TestMixedLoadCommitsElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kfake clusters")
	}
	var addrs []string
	for range 2 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		addrs = append(addrs, c.ListenAddrs()[0])
	}
	ms, err := Run(context.Background(), Config{
		Scenarios: []scenario.Scenario{mustScenario(t, "mixed-load")},
		Targets:   []result.Target{{Name: "hb", Addr: addrs[0]}}, Clients: []int{2},
		Duration: 150 * time.Millisecond, Rounds: 1, MixedCommitsAt: addrs[1],
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Status != result.StatusOK || ms[0].Ops == 0 || ms[0].Extras["commits_per_s"] <= 0 {
		t.Fatalf("mixed-load window: %+v", ms)
	}
	committed := func(addr string) []string {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		groups, err := kadm.NewClient(cl).ListGroups(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range groups.Groups() {
			if strings.HasSuffix(g, "-mixBB") {
				out = append(out, g)
			}
		}
		return out
	}
	if got := committed(addrs[1]); len(got) != 1 {
		t.Errorf("committers' groups on the other server: %v, want one", got)
	}
	if got := committed(addrs[0]); len(got) != 0 {
		t.Errorf("committers' groups on the target: %v, want none", got)
	}
}
