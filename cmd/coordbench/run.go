package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/report"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
	"github.com/coordinatord/coordinatord/cmd/coordbench/runner"
	"github.com/coordinatord/coordinatord/cmd/coordbench/scenario"
	"github.com/spf13/cobra"
)

// inprocKfake is the address word that makes `run` start kfake inside its own process.
const inprocKfake = "kfake"

type runFlags struct {
	scenarios []string
	targets   []string
	clients   []int
	duration  time.Duration
	warmup    time.Duration
	rounds    int
	results   string
	// mixedCommitsAt: where mixed-load's committers commit ("" : the target itself).
	mixedCommitsAt string
	// rate: aggregate operations per second of the paced scenarios (0: each one's own).
	rate float64
}

func (f *runFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.scenarios, "scenario", []string{"all"}, "scenario to run (repeatable); all: every registered one")
	cmd.Flags().IntSliceVar(&f.clients, "clients", nil, "client counts, e.g. 1,8,64 (default: each scenario's own)")
	cmd.Flags().DurationVar(&f.duration, "duration", 3*time.Second, "timed window per target per round")
	cmd.Flags().DurationVar(&f.warmup, "warmup", time.Second, "untimed window per target before the rounds (0: none)")
	cmd.Flags().IntVar(&f.rounds, "rounds", 2, "rounds; each visits every target in turn")
	cmd.Flags().StringVar(&f.results, "results", "bin/coordbench-results.json", "JSON results file to write")
	cmd.Flags().Float64Var(&f.rate, "rate", 0, "aggregate operations per second of the paced scenarios (streams-heartbeat-paced), "+
		"spread evenly over the clients; 0: each one's default. Closed-loop scenarios ignore it")
}

func newRunCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --target name=addr[,pid=PID] ... [--scenario NAME] [--clients N,...] [--duration D] [--rounds R]",
		Short: "Measure scenarios against targets, alternating targets every round; print a table and write JSON",
		Long: "Each --target is name=host:port, optionally ,pid=PID of the server process so its CPU seconds\n" +
			"and peak RSS are read from /proc. The address word \"kfake\" starts franz-go's kfake inside this\n" +
			"process (its CPU and memory are then not reported).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			targets, cleanup, err := resolveTargets(f.targets)
			defer cleanup()
			if err != nil {
				return err
			}
			file, err := runAndWrite(ctx, &f, targets, cmd.ErrOrStderr(), []string{commandLine()})
			if err != nil {
				return err
			}
			return printTable(cmd.OutOrStdout(), file)
		},
	}
	f.register(cmd)
	cmd.Flags().StringArrayVar(&f.targets, "target", nil, "name=host:port[,pid=PID] (repeatable, in the order visited)")
	cmd.Flags().StringVar(&f.mixedCommitsAt, "mixed-commits-at", "", "host:port of another server that mixed-load's committers commit to instead of the target: "+
		"the same load on the machine with the commits' server work in another process (separates the machine's share of the heartbeat p99 from the server's)")
	cmd.MarkFlagRequired("target")
	return cmd
}

// runAndWrite runs the scenarios and writes the results file.
func runAndWrite(ctx context.Context, f *runFlags, targets []result.Target, log io.Writer, reproduce []string) (*result.File, error) {
	scs, err := pickScenarios(f.scenarios)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(f.results), 0o755); err != nil {
		return nil, fmt.Errorf("results folder: %w", err)
	}
	file := &result.File{Started: time.Now(), Command: commandLine(), Reproduce: reproduce, Host: hostInfo(), Targets: targets,
		Settings: result.Settings{Duration: f.duration, Warmup: f.warmup, Rounds: f.rounds}}
	var live []result.Target
	for _, t := range targets {
		if t.Addr != "" {
			live = append(live, t)
		}
	}
	ms, err := runner.Run(ctx, runner.Config{Scenarios: scs, Targets: live, Clients: f.clients,
		Duration: f.duration, Warmup: f.warmup, Rounds: f.rounds, Log: log, MixedCommitsAt: f.mixedCommitsAt, Rate: f.rate})
	file.Results = ms
	file.Host.LoadEnd = loadAverage()
	if werr := result.Write(f.results, file); werr != nil {
		return nil, werr
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "results written to %s\n", f.results)
	return file, nil
}

func pickScenarios(names []string) ([]scenario.Scenario, error) {
	var out []scenario.Scenario
	for _, n := range names {
		if n == "all" {
			return scenario.All(), nil
		}
		s, ok := scenario.Get(n)
		if !ok {
			var known []string
			for _, s := range scenario.All() {
				known = append(known, s.Name())
			}
			return nil, fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

// parseTarget reads name=addr[,pid=PID].
func parseTarget(spec string) (result.Target, error) {
	parts := strings.Split(spec, ",")
	name, addr, ok := strings.Cut(parts[0], "=")
	if !ok || name == "" || addr == "" {
		return result.Target{}, fmt.Errorf("target %q: want name=host:port[,pid=PID]", spec)
	}
	t := result.Target{Name: name, Addr: addr}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		switch {
		case ok && k == "pid":
			pid, err := strconv.Atoi(v)
			if err != nil || pid <= 0 {
				return result.Target{}, fmt.Errorf("target %q: pid %q is not a process id", spec, v)
			}
			t.PID = pid
		default:
			return result.Target{}, fmt.Errorf("target %q: unknown option %q (known: pid=PID)", spec, p)
		}
	}
	return t, nil
}

// resolveTargets parses the specs and starts an in-process kfake for the address "kfake".
func resolveTargets(specs []string) ([]result.Target, func(), error) {
	var stops []func()
	cleanup := func() {
		for _, s := range stops {
			s()
		}
	}
	seen := map[string]bool{}
	var out []result.Target
	for _, spec := range specs {
		t, err := parseTarget(spec)
		if err != nil {
			return nil, cleanup, err
		}
		if seen[t.Name] {
			return nil, cleanup, fmt.Errorf("target name %q given twice", t.Name)
		}
		seen[t.Name] = true
		if t.Addr == inprocKfake {
			addr, stop, err := startKfake()
			if err != nil {
				return nil, cleanup, err
			}
			stops = append(stops, stop)
			t.Addr, t.PID, t.Kind = addr, 0, "kfake (in-process)"
			t.Version = kfakeVersion()
		}
		out = append(out, t)
	}
	return out, cleanup, nil
}

// printTable prints one line per scenario, client count and target, rounds merged.
func printTable(w io.Writer, f *result.File) error {
	set, err := report.Aggregate([]*result.File{f})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tclients\ttarget\tops/s\tp50\tp99\tp99.9\tcpu µs/op\tpeak RSS MiB\terrors\textras\t")
	for _, sc := range set.Scenarios {
		for _, n := range set.Clients(sc) {
			for _, t := range set.Targets {
				a := set.Aggs[report.Key{Scenario: sc, Clients: n, Target: t.Name}]
				if a == nil {
					continue
				}
				if a.Status != result.StatusOK {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\t\t\t\t\t\t%s\t\n", sc, n, t.Name, a.Status, strings.Join(a.Notes, "; "))
					continue
				}
				cpu, rss := "n/a", "n/a"
				if a.CPUMeasured {
					cpu = fmt.Sprintf("%.1f", a.CPUPerOp())
				}
				if a.PeakRSS > 0 {
					rss = fmt.Sprintf("%.0f", float64(a.PeakRSS)/(1<<20))
				}
				var ex []string
				for name := range a.Extras {
					v, _, _, _ := a.Extra(name)
					ex = append(ex, fmt.Sprintf("%s=%.1f", name, v))
				}
				sort.Strings(ex)
				fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", sc, n, t.Name, a.Throughput(),
					report.FormatLatency(a.Latency.Quantile(0.5)), report.FormatLatency(a.Latency.Quantile(0.99)),
					report.FormatLatency(a.Latency.Quantile(0.999)), cpu, rss, a.Errors, strings.Join(ex, " "))
			}
		}
	}
	return tw.Flush()
}

// hostInfo describes this machine for the report.
func hostInfo() result.Host {
	h := result.Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				f := strings.Fields(v)
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					h.MemTotal = fmt.Sprintf("%.0f GiB", kb/(1<<20))
				}
			}
		}
	}
	return h
}

// loadAverage is the 1-minute load average, 0 when unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
