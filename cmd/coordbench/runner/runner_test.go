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

// pacedStub is a paced scenario whose operation does nothing: what it counts is how often the
// runner calls it.
type pacedStub struct{ rate float64 }

func (pacedStub) Name() string          { return "paced-stub" }
func (pacedStub) Description() string   { return "" }
func (pacedStub) Needs() []int16        { return nil }
func (pacedStub) DefaultClients() []int { return []int{4} }
func (p pacedStub) Rate() float64       { return p.rate }
func (pacedStub) Setup(context.Context, *scenario.Env) (scenario.Instance, error) {
	return stubInstance{}, nil
}

type stubInstance struct{}

func (stubInstance) Op(context.Context, int) error  { return nil }
func (stubInstance) Teardown(context.Context) error { return nil }

// A paced scenario gets its rate, or --rate's, and no more (closed loop, an operation that does
// nothing would run millions of times); the measurement records the rate.
func TestRunPacesPacedScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kfake cluster")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const d = 400 * time.Millisecond
	for _, tc := range []struct {
		own, override, want float64
	}{{2000, 0, 2000}, {2000, 500, 500}} {
		ms, err := Run(context.Background(), Config{Scenarios: []scenario.Scenario{pacedStub{rate: tc.own}},
			Targets: []result.Target{{Name: "a", Addr: c.ListenAddrs()[0]}}, Duration: d, Rounds: 1, Rate: tc.override})
		if err != nil {
			t.Fatal(err)
		}
		m := ms[0]
		if pct, ok := m.Extras["sent_behind_schedule_pct"]; !ok || pct < 0 || pct > 100 {
			t.Errorf("paced window's share sent behind schedule: %v, %v", pct, ok)
		}
		if m.Rate != tc.want {
			t.Errorf("rate %v (override %v): measurement records %v, want %v", tc.own, tc.override, m.Rate, tc.want)
		}
		// Upper bound: the schedule, plus the catch-up the pacer allows each client once. Lower
		// bound loose: the machine is shared, and a late client drops slots.
		max := tc.want*d.Seconds()*1.05 + 4*(1+float64(paceMaxLag)*tc.want/4/float64(time.Second))
		if got := float64(m.Ops); got > max || got < tc.want*d.Seconds()/2 {
			t.Errorf("paced at %v/s for %s: %d operations, want about %.0f (at most %.0f)", tc.want, d, m.Ops, tc.want*d.Seconds(), max)
		}
	}
	// A scenario that is Paced with rate 0 runs in a closed loop, whatever --rate says.
	ms, err := Run(context.Background(), Config{Scenarios: []scenario.Scenario{pacedStub{}},
		Targets: []result.Target{{Name: "a", Addr: c.ListenAddrs()[0]}}, Duration: 50 * time.Millisecond, Rounds: 1, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ms[0].Extras["sent_behind_schedule_pct"]; ok {
		t.Error("a closed-loop window reports a share sent behind schedule")
	}
	if ms[0].Rate != 0 || ms[0].Ops < 1000 {
		t.Errorf("closed loop: rate %v, %d operations", ms[0].Rate, ms[0].Ops)
	}
}
