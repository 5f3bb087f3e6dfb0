package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/report"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
	"github.com/coordinatord/coordinatord/cmd/coordbench/scenario"
	"github.com/spf13/cobra"
)

// gatewayNodeID is coordinatord's node.id in the gateway run; test/kafka's broker is node 1.
const gatewayNodeID = 1000

type gatewayFlags struct {
	runFlags
	coordinatord string
	also         []string
	upstream     string
	// upstreamConfig: broker settings for the broker --upstream auto starts.
	upstreamConfig []string
	sets           []string
	out            string
	work           string
	cpus           string
}

func newGatewayCommand() *cobra.Command {
	var f gatewayFlags
	cmd := &cobra.Command{
		Use:   "gateway [--upstream name=host:port[,pid=PID]]",
		Short: "Produce and fetch straight to a Kafka broker against through coordinatord's gateway; write a markdown table",
		Long: "Starts coordinatord in gateway mode in front of the upstream broker (--upstream, or a Kafka\n" +
			"started with test/kafka/kafka.sh when it is \"auto\"), runs the gateway suite's scenarios\n" +
			"(produce-1k, produce-64k, fetch-1k, fetch-64k) against the broker directly (target \"direct\") and\n" +
			"through the gateway (target \"gateway\"), alternating every round, and writes the JSON results and\n" +
			"a markdown table (throughput ratio, p50 difference, coordinatord CPU per MiB forwarded).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runGateway(ctx, &f, cmd.ErrOrStderr())
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("scenario").DefValue = scenario.SuiteGateway
	f.scenarios = []string{scenario.SuiteGateway}
	f.results = "bin/coordbench-gateway-results.json"
	cmd.Flags().Lookup("results").DefValue = f.results
	cmd.Flags().StringVar(&f.coordinatord, "coordinatord", "bin/coordinatord", "coordinatord binary")
	cmd.Flags().StringArrayVar(&f.also, "also", nil, "name=binary[,set=key=value]...: one more gateway target, another coordinatord build or settings in front of the same upstream (repeatable), e.g. to compare before and after a change, or log.backend=kafka against the local log")
	cmd.Flags().StringVar(&f.upstream, "upstream", "auto", "the upstream broker as host:port[,pid=PID] (its CPU is read with a pid); auto: start test/kafka/kafka.sh")
	cmd.Flags().StringArrayVar(&f.upstreamConfig, "upstream-config", nil, "key=value: a broker setting for the broker --upstream auto starts (kafka.sh start --config, repeatable), e.g. offsets.topic.num.partitions=50 to compare Kafka's own commits over as many partitions as coordinatord has shards")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "extra coordinatord setting key=value (repeatable), e.g. admin.pprof.enable=true")
	cmd.Flags().StringVar(&f.out, "out", "bin/benchmarks-gateway.md", "markdown table to write")
	cmd.Flags().StringVar(&f.cpus, "cpus", "", "upstream=CPUS,loadgen=CPUS,gateway=CPUS: pin the upstream broker (needs its pid), this process (the load generator) and the gateways to these CPUs with taskset, e.g. upstream=0,loadgen=0,gateway=1 to measure the hop as deployed, on cores of its own; the direct target runs with the same upstream and load generator CPUs (default: no pinning, all share the machine)")
	cmd.Flags().StringVar(&f.work, "work", "", "folder for data and logs (default: a temporary one, removed afterwards)")
	return cmd
}

func runGateway(ctx context.Context, f *gatewayFlags, log io.Writer) error {
	plan, err := parseCPUPlan(f.cpus)
	if err != nil {
		return err
	}
	work := f.work
	if work == "" {
		if work, err = os.MkdirTemp("", "coordbench-gateway-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()

	direct := result.Target{Name: "direct", Kind: "Apache Kafka (test/kafka), clients connected straight to it"}
	if len(f.upstreamConfig) > 0 && f.upstream != "auto" {
		// A broker of the caller's runs with whatever it was started with; saying otherwise in
		// the table would be wrong.
		return fmt.Errorf("--upstream-config is for the broker --upstream auto starts, not %s", f.upstream)
	}
	for _, kv := range f.upstreamConfig {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("--upstream-config %q: want key=value", kv)
		}
	}
	if f.upstream == "auto" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		kt, stopK, err := startKafka(ctx, root, filepath.Join(work, "kafka"), log, f.upstreamConfig...)
		if stopK != nil {
			stops = append(stops, stopK)
		}
		if err != nil {
			return err
		}
		if kt.Addr == "" {
			return fmt.Errorf("no upstream: %s", kt.Note)
		}
		direct.Addr, direct.PID, direct.Version = kt.Addr, kt.PID, kt.Version
		if len(f.upstreamConfig) > 0 {
			direct.Kind = "Apache Kafka (test/kafka, started with `" + strings.Join(f.upstreamConfig, "`, `") + "`), clients connected straight to it"
		}
	} else {
		t, err := parseTarget("direct=" + f.upstream)
		if err != nil {
			return err
		}
		direct.Addr, direct.PID = t.Addr, t.PID
	}

	if plan.set() {
		if direct.PID == 0 {
			return fmt.Errorf("--cpus pins the upstream: give its pid (--upstream host:port,pid=PID)")
		}
		before, err := processCPUs(direct.PID)
		if err != nil {
			return fmt.Errorf("upstream pid %d: %w", direct.PID, err)
		}
		if err := pinProcess(direct.PID, plan.upstream); err != nil {
			return err
		}
		// A broker of the caller's goes back to the CPUs it had.
		stops = append(stops, func() { pinProcess(direct.PID, before) })
		direct.Note = "CPUs: " + plan.String()
		fmt.Fprintf(log, "gateway: %s\n", plan)
	}

	targets := []result.Target{direct}
	bins := append([]string{"gateway=" + f.coordinatord}, f.also...)
	for _, spec := range bins {
		name, bin, ok := strings.Cut(spec, "=")
		bin, own, err := targetSets(bin)
		if !ok || name == "" || bin == "" || name == "direct" || err != nil {
			return fmt.Errorf("--also %q: want name=binary[,set=key=value]...", spec)
		}
		base, err := freePortRange(11)
		if err != nil {
			return err
		}
		sets := append([]string{
			"listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(base),
			"node.id=" + strconv.Itoa(gatewayNodeID),
			"upstream.bootstrap.servers=" + direct.Addr,
			fmt.Sprintf("gateway.broker.port.range=%d-%d", base+1, base+10),
		}, append(append([]string{}, f.sets...), own...)...)
		gt, stopG, err := startCoordinatordOn(ctx, bin, filepath.Join(work, name+"-data"), log, name, sets, plan.gateway)
		if err != nil {
			return err
		}
		stops = append(stops, stopG)
		gt.Kind = "coordinatord gateway (" + bin + ") in front of the same broker; CPU is coordinatord's alone"
		// The broker's CPU in the gateway's windows: requests that reach it through the gateway
		// may cost it more than the same requests straight from the clients (they come from
		// another CPU, one connection's at a time), and where the broker's CPU is the limit that
		// difference is the throughput the hop loses.
		gt.UpstreamPID = direct.PID
		gt.Note = "started with `" + strings.Join(sets, "`, `") + "`"
		fmt.Fprintf(log, "gateway: %s at %s (pid %d)\n", name, gt.Addr, gt.PID)
		targets = append(targets, gt)
	}
	fmt.Fprintf(log, "gateway: direct %s (pid %d)\n", direct.Addr, direct.PID)
	if plan.set() {
		// The load generator is this process: its own threads, and as many Ps as its CPUs, as
		// the runtime would have chosen had it started on them.
		if err := pinProcess(os.Getpid(), plan.loadgen); err != nil {
			return err
		}
		runtime.GOMAXPROCS(len(plan.loadgen))
	}

	var scs []string
	for _, s := range f.scenarios {
		if s == scenario.SuiteGateway {
			for _, sc := range scenario.InSuite(scenario.SuiteGateway) {
				scs = append(scs, sc.Name())
			}
			continue
		}
		scs = append(scs, s)
	}
	f.scenarios = scs
	file, err := runAndWrite(ctx, &f.runFlags, targets, log, nil)
	if err != nil {
		return err
	}
	md, err := gatewayTable(file, plan)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(f.out, []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(log, "table written to %s\n", f.out)
	fmt.Fprint(os.Stdout, md)
	return nil
}

// targetSets splits "binary,set=key=value,..." into the binary and its own settings (after
// --set's, so they win): the offset-commit rows of the Kafka backend run a gateway on
// log.backend=kafka beside one on the local log, in one run.
func targetSets(spec string) (bin string, sets []string, err error) {
	parts := strings.Split(spec, ",")
	for _, p := range parts[1:] {
		kv, ok := strings.CutPrefix(p, "set=")
		if !ok || !strings.Contains(kv, "=") {
			return "", nil, fmt.Errorf("%q: want set=key=value", p)
		}
		sets = append(sets, kv)
	}
	return parts[0], sets, nil
}

// gatewayTable compares target "gateway" with target "direct" per scenario and client count.
func gatewayTable(file *result.File, plan cpuPlan) (string, error) {
	set, err := report.Aggregate([]*result.File{file})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Run started %s: %d CPUs (%s), load average (1 min) %.2f at the start, %.2f at the end. "+
		"Each window %s after a %s warm-up, %d rounds, targets alternating (direct, gateway, direct, gateway, ...).\n\n",
		file.Started.UTC().Format(time.RFC3339), file.Host.CPUs, file.Host.CPUModel, file.Host.LoadStart, file.Host.LoadEnd,
		file.Settings.Duration, file.Settings.Warmup, file.Settings.Rounds)
	fmt.Fprintf(&b, "CPUs: %s.\n\n", plan)
	for _, t := range file.Targets {
		// The broker's settings decide what the direct row means (Kafka's own commits over one
		// offsets partition or fifty), so they stand above the table.
		if t.Name == "direct" && t.Kind != "" {
			fmt.Fprintf(&b, "direct: %s.\n\n", t.Kind)
		}
	}
	b.WriteString("| scenario | clients | gateway | direct ops/s | gateway ops/s | gateway ÷ direct | MiB/s through the gateway | p50 direct | p50 gateway | p50 added | p99 direct | p99 gateway | coordinatord CPU ms per MiB (µs per op without payload) | Kafka CPU ms per MiB (direct) | Kafka CPU ms per MiB (through the gateway) |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, sc := range set.Scenarios {
		s, ok := scenario.Get(sc)
		if !ok {
			continue
		}
		mib := float64(scenario.BatchBytes(s)) / (1 << 20)
		for _, n := range set.Clients(sc) {
			d := set.Aggs[report.Key{Scenario: sc, Clients: n, Target: "direct"}]
			for _, t := range set.Targets {
				if t.Name == "direct" {
					continue
				}
				g := set.Aggs[report.Key{Scenario: sc, Clients: n, Target: t.Name}]
				if d == nil || g == nil || d.Status != result.StatusOK || g.Status != result.StatusOK {
					fmt.Fprintf(&b, "| %s | %d | %s | %s |||||||||||||\n", sc, n, t.Name, "error: "+strings.Join(append(notes(d), notes(g)...), "; "))
					continue
				}
				dp50, gp50 := d.Latency.Quantile(0.5), g.Latency.Quantile(0.5)
				fmt.Fprintf(&b, "| %s | %d | %s | %s %s | %s %s | %.2f× | %.1f | %s | %s | %+.0f µs | %s | %s | %s | %s | %s |\n",
					sc, n, t.Name, fmtOps(d.Throughput()), roundRange(d.RoundThroughputs), fmtOps(g.Throughput()), roundRange(g.RoundThroughputs),
					g.Throughput()/d.Throughput(), g.Throughput()*mib,
					report.FormatLatency(dp50), report.FormatLatency(gp50), float64(gp50-dp50)/1e3,
					report.FormatLatency(d.Latency.Quantile(0.99)), report.FormatLatency(g.Latency.Quantile(0.99)),
					cpuCell(g.CPUPerOp(), mib), cpuCell(d.CPUPerOp(), mib), cpuCell(g.UpstreamCPUPerOp(), mib))
			}
		}
	}
	return b.String(), nil
}

func notes(a *report.Agg) []string {
	if a == nil {
		return []string{"not measured"}
	}
	return a.Notes
}

func fmtOps(v float64) string { return strconv.FormatFloat(math.Round(v), 'f', 0, 64) }

func roundRange(xs []float64) string {
	if len(xs) < 2 {
		return ""
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return fmt.Sprintf("(%s–%s)", fmtOps(lo), fmtOps(hi))
}

// cpuCell is CPU per MiB of payload, or per operation for a scenario without payload (offset
// commits: there the broker's CPU per commit is what a backend costs the upstream).
func cpuCell(usPerOp, mibPerOp float64) string {
	if mibPerOp == 0 && !math.IsNaN(usPerOp) {
		return fmt.Sprintf("%.1f µs/op", usPerOp)
	}
	return perMiB(usPerOp, mibPerOp)
}

// perMiB turns CPU µs per operation into CPU ms per MiB of payload.
func perMiB(usPerOp, mibPerOp float64) string {
	if math.IsNaN(usPerOp) || mibPerOp == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", usPerOp/mibPerOp/1e3)
}

// freePortRange finds n consecutive free loopback ports (the gateway's listener and its broker
// port range).
func freePortRange(n int) (int, error) {
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base+n > 65535 {
			continue
		}
		ok := true
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports found", n)
}
