package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
	"github.com/spf13/cobra"
)

// startTimeout bounds how long a target may take to come up (Kafka's own script has its own).
const startTimeout = 60 * time.Second

type suiteFlags struct {
	runFlags
	coordinatord string
	kafka        string
	kfake        string
	out          string
	charts       string
	work         string
	also         []string
}

func newSuiteCommand() *cobra.Command {
	var f suiteFlags
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "Start coordinatord, Kafka (test/kafka) and kfake, run every scenario against all three, write the report",
		Long: "Builds coordinatord (unless --coordinatord names a binary), starts it, the Kafka reference\n" +
			"broker (skipped with a note when test/kafka/kafka.sh finds no java) and kfake, runs the scenarios\n" +
			"with targets alternating every round, writes the JSON results, docs/benchmarks.md and the charts,\n" +
			"and stops everything it started. Run it from the repository.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runSuite(ctx, &f, cmd.ErrOrStderr())
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&f.coordinatord, "coordinatord", "", "coordinatord binary (default: go build ./cmd/coordinatord into the work folder)")
	cmd.Flags().StringVar(&f.kafka, "kafka", "auto", "auto: start test/kafka/kafka.sh, skipped when java is missing; off")
	cmd.Flags().StringVar(&f.kfake, "kfake", "process", "process: kfake in a child process (CPU and RSS measured); inproc; off")
	cmd.Flags().StringVar(&f.out, "out", "docs/benchmarks.md", "markdown report to write")
	cmd.Flags().StringVar(&f.charts, "charts", "docs/img", "folder for the PNG charts")
	cmd.Flags().StringArrayVar(&f.also, "also", nil, "name=binary[,set=key=value]...: one more coordinatord target (repeatable), "+
		"visited in turn with the others every round: another build, to compare before and after a change")
	cmd.Flags().StringVar(&f.work, "work", "", "folder for binaries, data and logs (default: a temporary one, removed afterwards)")
	return cmd
}

func runSuite(ctx context.Context, f *suiteFlags, log io.Writer) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work := f.work
	if work == "" {
		if work, err = os.MkdirTemp("", "coordbench-suite-"); err != nil {
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
	var targets []result.Target

	// coordinatord
	bin := f.coordinatord
	if bin == "" {
		bin = filepath.Join(work, "coordinatord")
		fmt.Fprintf(log, "suite: building coordinatord into %s\n", bin)
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/coordinatord")
		build.Dir, build.Stdout, build.Stderr = root, log, log
		if err := build.Run(); err != nil {
			return fmt.Errorf("build coordinatord: %w", err)
		}
	}
	ct, stopC, err := startCoordinatord(ctx, bin, filepath.Join(work, "coordinatord-data"), log)
	if err != nil {
		return err
	}
	stops = append(stops, stopC)
	targets = append(targets, ct)
	for _, spec := range f.also {
		name, rest, ok := strings.Cut(spec, "=")
		abin, own, err := targetSets(rest)
		if !ok || name == "" || abin == "" || name == "coordinatord" || name == "kafka" || name == "kfake" || err != nil {
			return fmt.Errorf("--also %q: want name=binary[,set=key=value]... (a name other than coordinatord, kafka, kfake)", spec)
		}
		at, stopA, err := startCoordinatordWith(ctx, abin, filepath.Join(work, name+"-data"), log, name,
			append([]string{"listeners=PLAINTEXT://127.0.0.1:0"}, own...))
		if err != nil {
			return err
		}
		stops = append(stops, stopA)
		at.Kind = "coordinatord (" + abin + ")"
		targets = append(targets, at)
	}

	// Kafka
	switch f.kafka {
	case "off":
	case "auto":
		kt, stopK, err := startKafka(ctx, root, filepath.Join(work, "kafka"), log)
		if err != nil {
			return err
		}
		if stopK != nil {
			stops = append(stops, stopK)
		}
		targets = append(targets, kt)
	default:
		return fmt.Errorf("--kafka %q: want auto or off", f.kafka)
	}

	// kfake
	switch f.kfake {
	case "off":
	case "inproc":
		addr, stopF, err := startKfake()
		if err != nil {
			return err
		}
		stops = append(stops, stopF)
		targets = append(targets, result.Target{Name: "kfake", Addr: addr, Kind: "kfake (in-process)", Version: kfakeVersion()})
	case "process":
		kt, stopF, err := startKfakeProcess(ctx, log)
		if err != nil {
			return err
		}
		stops = append(stops, stopF)
		targets = append(targets, kt)
	default:
		return fmt.Errorf("--kfake %q: want process, inproc or off", f.kfake)
	}

	for _, t := range targets {
		if t.Addr != "" {
			fmt.Fprintf(log, "suite: target %s at %s (pid %d)\n", t.Name, t.Addr, t.PID)
		} else {
			fmt.Fprintf(log, "suite: target %s skipped: %s\n", t.Name, t.Note)
		}
	}
	if _, err := runAndWrite(ctx, &f.runFlags, targets, log, suiteCommands(f)); err != nil {
		return err
	}
	return writeReport(&reportFlags{results: []string{f.results}, out: f.out, charts: f.charts,
		subject: "coordinatord", baseline: "kafka"})
}

// suiteCommands is the Reproducing section: the suite itself, then what it does by hand.
func suiteCommands(f *suiteFlags) []string {
	common := fmt.Sprintf("--duration %s --rounds %d --warmup %s", f.duration, f.rounds, f.warmup)
	if f.rate > 0 {
		common += fmt.Sprintf(" --rate %g", f.rate)
	}
	scen := ""
	for _, s := range f.scenarios {
		if s != "all" {
			scen += " --scenario " + s
		}
	}
	return []string{
		"# everything (what `make bench` runs):",
		fmt.Sprintf("go run ./cmd/coordbench suite %s%s --out %s --charts %s", common, scen, f.out, f.charts),
		"",
		"# the same by hand:",
		"go build -o bin/coordinatord ./cmd/coordinatord && (cd cmd/coordbench && go build -o ../../bin/coordbench .)",
		"bin/coordinatord serve --set listeners=PLAINTEXT://127.0.0.1:0 --set admin.listener=127.0.0.1:0 --set log.dirs=$(mktemp -d) " +
			"--set " + strings.Join(sameAsKafka, " --set ") + " &",
		"#   its \"coordinatord started\" log line gives the port: C_ADDR=127.0.0.1:PORT, C_PID=$!",
		"eval \"$(test/kafka/kafka.sh start --dir $(mktemp -d))\"   # KAFKA_ADDR, KAFKA_PID",
		"bin/coordbench kfake > kfake.env & sleep 1; . ./kfake.env     # KFAKE_ADDR, KFAKE_PID",
		fmt.Sprintf("bin/coordbench run --target coordinatord=$C_ADDR,pid=$C_PID --target kafka=$KAFKA_ADDR,pid=$KAFKA_PID "+
			"--target kfake=$KFAKE_ADDR,pid=$KFAKE_PID %s%s --results %s", common, scen, f.results),
		fmt.Sprintf("bin/coordbench report --results %s --out %s --charts %s", f.results, f.out, f.charts),
	}
}

// moduleRoot finds the folder of go.mod from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("suite: run it from inside the coordinatord repository (no go.mod found)")
		}
		dir = parent
	}
}

// sameAsKafka are the group settings test/kafka gives the reference broker (its README says
// why); coordinatord gets the same so settle times compare like with like. A key this build of
// coordinatord does not know yet is left out.
var sameAsKafka = []string{
	"group.initial.rebalance.delay.ms=0",
	"group.streams.initial.rebalance.delay.ms=0",
}

// startCoordinatord runs the daemon on free loopback ports and waits for its started line.
func startCoordinatord(ctx context.Context, bin, data string, log io.Writer) (result.Target, func(), error) {
	return startCoordinatordWith(ctx, bin, data, log, "coordinatord", []string{"listeners=PLAINTEXT://127.0.0.1:0"})
}

// startCoordinatordWith is startCoordinatord with the target's name and settings of its own
// (listeners among them).
func startCoordinatordWith(ctx context.Context, bin, data string, log io.Writer, name string, sets []string) (result.Target, func(), error) {
	return startCoordinatordOn(ctx, bin, data, log, name, sets, nil)
}

// startCoordinatordOn is startCoordinatordWith on the given CPUs (nil: wherever the scheduler
// puts it), set by taskset before the binary starts, so that the Go runtime sizes GOMAXPROCS
// and every thread it makes to them.
func startCoordinatordOn(ctx context.Context, bin, data string, log io.Writer, name string, sets []string, cpus []int) (result.Target, func(), error) {
	t := result.Target{Name: name, Kind: "coordinatord (built from this tree)"}
	if out, err := exec.Command(bin, "version").Output(); err == nil {
		t.Version = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "coordinatord"))
	}
	args := []string{"serve",
		"--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs=" + data}
	for _, kv := range sets {
		args = append(args, "--set", kv)
	}
	var used []string
	for _, kv := range sameAsKafka {
		if exec.Command(bin, "config", "check", "--set", kv).Run() == nil {
			args = append(args, "--set", kv)
			used = append(used, "`"+kv+"`")
		}
	}
	if len(used) > 0 {
		t.Note = "started with " + strings.Join(used, ", ") + " (as test/kafka configures Kafka); every other key at its default"
	}
	cmd := exec.Command(bin, args...)
	if cpus != nil {
		cmd = exec.Command("taskset", append([]string{"-c", cpuList(cpus), bin}, args...)...)
	}
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return t, nil, err
	}
	if err := cmd.Start(); err != nil {
		return t, nil, fmt.Errorf("start coordinatord: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	type startedLine struct {
		Msg       string   `json:"msg"`
		Listeners []string `json:"listeners"`
		Admin     string   `json:"admin"`
	}
	started := make(chan startedLine, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line startedLine
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "coordinatord started" && len(line.Listeners) > 0 {
				select {
				case started <- line:
				default:
				}
			}
		}
	}()
	select {
	case line := <-started:
		_, addr, ok := strings.Cut(line.Listeners[0], "://")
		if !ok {
			stop()
			return t, nil, fmt.Errorf("coordinatord listener %q: no scheme", line.Listeners[0])
		}
		// Listening is not loaded: a shard still replaying its log answers
		// COORDINATOR_LOAD_IN_PROGRESS, which would fail the first window's setup.
		if err := waitReady(ctx, "http://"+line.Admin+"/readyz", exited); err != nil {
			stop()
			return t, nil, err
		}
		t.Addr, t.PID = addr, cmd.Process.Pid
		return t, stop, nil
	case <-exited:
		return t, nil, fmt.Errorf("coordinatord exited before starting: %v", cmd.ProcessState)
	case <-time.After(startTimeout):
		stop()
		return t, nil, fmt.Errorf("coordinatord did not start within %s", startTimeout)
	case <-ctx.Done():
		stop()
		return t, nil, ctx.Err()
	}
}

// waitReady polls a coordinatord's /readyz until it answers 200 (every shard loaded).
func waitReady(ctx context.Context, url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("coordinatord exited before it was ready")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("coordinatord not ready (%s) within %s", url, startTimeout)
		}
	}
}

// startKafka starts the reference broker with test/kafka/kafka.sh, with config (key=value) on
// top of the script's own settings. A missing java (the script's exit 2) is not an error: the
// target is returned without an address and a note.
func startKafka(ctx context.Context, root, dir string, log io.Writer, config ...string) (result.Target, func(), error) {
	t := result.Target{Name: "kafka", Kind: "Apache Kafka (test/kafka, one KRaft node)"}
	script := filepath.Join(root, "test", "kafka", "kafka.sh")
	if jars, _ := filepath.Glob(filepath.Join(root, "test", "kafka", ".cache", "lib", "kafka_2.13-*.jar")); len(jars) > 0 {
		t.Version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "kafka_2.13-"), ".jar")
	}
	fetch := exec.CommandContext(ctx, script, "fetch")
	fetch.Stdout, fetch.Stderr = log, log
	if err := fetch.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 2 {
			t.Note = "skipped: test/kafka/kafka.sh found no usable java (17+) or mvn"
			return t, nil, nil
		}
		return t, nil, fmt.Errorf("kafka.sh fetch: %w", err)
	}
	if jars, _ := filepath.Glob(filepath.Join(root, "test", "kafka", ".cache", "lib", "kafka_2.13-*.jar")); len(jars) > 0 {
		t.Version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "kafka_2.13-"), ".jar")
	}
	fmt.Fprintf(log, "suite: starting Kafka in %s\n", dir)
	args := []string{"start", "--dir", dir}
	for _, kv := range config {
		args = append(args, "--config", kv)
	}
	start := exec.CommandContext(ctx, script, args...)
	start.Stderr = log
	stop := func() {
		s := exec.Command(script, "stop", "--dir", dir)
		s.Stdout, s.Stderr = log, log
		s.Run()
	}
	out, err := start.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 2 {
			t.Note = "skipped: test/kafka/kafka.sh found no usable java (17+)"
			return t, nil, nil
		}
		stop() // an interrupted start may have left the JVM running (it runs under setsid)
		return t, nil, fmt.Errorf("kafka.sh start: %w", err)
	}
	env := parseEnv(string(out))
	t.Addr = env["KAFKA_ADDR"]
	t.PID, _ = strconv.Atoi(env["KAFKA_PID"])
	if t.Addr == "" {
		stop()
		return t, nil, fmt.Errorf("kafka.sh start printed no KAFKA_ADDR: %q", out)
	}
	return t, stop, nil
}

// startKfakeProcess runs `coordbench kfake` as a child and reads its address and pid.
func startKfakeProcess(ctx context.Context, log io.Writer) (result.Target, func(), error) {
	t := result.Target{Name: "kfake", Kind: "kfake (own process)", Version: kfakeVersion()}
	self, err := os.Executable()
	if err != nil {
		return t, nil, err
	}
	cmd := exec.Command(self, "kfake")
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return t, nil, err
	}
	if err := cmd.Start(); err != nil {
		return t, nil, fmt.Errorf("start kfake: %w", err)
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	lines := make(chan map[string]string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		got := map[string]string{}
		for sc.Scan() {
			for k, v := range parseEnv(sc.Text()) {
				got[k] = v
			}
			if got["KFAKE_ADDR"] != "" && got["KFAKE_PID"] != "" {
				lines <- got
				io.Copy(io.Discard, out)
				return
			}
		}
	}()
	select {
	case env := <-lines:
		t.Addr = env["KFAKE_ADDR"]
		t.PID = cmd.Process.Pid
		return t, stop, nil
	case <-time.After(startTimeout):
		stop()
		return t, nil, errors.New("kfake did not print its address")
	case <-ctx.Done():
		stop()
		return t, nil, ctx.Err()
	}
}

// parseEnv reads KEY=VALUE lines.
func parseEnv(s string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && k != "" {
			out[k] = strings.Trim(v, `"'`)
		}
	}
	return out
}
