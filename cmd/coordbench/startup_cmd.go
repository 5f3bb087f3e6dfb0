package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startupTarget is one way of running the word count: where its clients bootstrap and which
// group protocol they use.
type startupTarget struct {
	name, addr, protocol string
	sets                 []string // coordinatord settings of this target's own gateway
}

type startupFlags struct {
	targets      []string
	rounds       int
	instances    int
	upstream     string
	coordinatord string
	sets         []string
	classpath    string
	out          string
	work         string
}

func newStartupCommand() *cobra.Command {
	var f startupFlags
	cmd := &cobra.Command{
		Use:   "startup --target name=host:port,protocol=streams|classic ... [--upstream host:port]",
		Short: "Time the Kafka Streams word count (test/e2e/streamsapp) from start to RUNNING, 1 instance then 3",
		Long: "Each round visits every target in turn. Per target: a fresh application id and input and output\n" +
			"topics (created through the target), one instance started and timed from its JVM's start to its\n" +
			"first \"STATE RUNNING\"; then two more started at once and timed until both are RUNNING; then all\n" +
			"three closed. The address word \"gateway\" is a coordinatord started here in gateway mode in front\n" +
			"of --upstream (with --set settings). Needs java and the application (built with\n" +
			"test/e2e/streamsapp/build.sh unless --classpath is given).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runStartup(ctx, &f, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringArrayVar(&f.targets, "target", nil, "name=host:port|gateway,protocol=streams|classic[,set=key=value...] (repeatable, in the order visited; each gateway target gets a coordinatord of its own, with --set and its own set= settings)")
	cmd.Flags().IntVar(&f.rounds, "rounds", 3, "rounds; each visits every target in turn")
	cmd.Flags().IntVar(&f.instances, "instances", 3, "instances in the second step (the first one included)")
	cmd.Flags().StringVar(&f.upstream, "upstream", "", "upstream broker of the coordinatord started for targets at address \"gateway\"")
	cmd.Flags().StringVar(&f.coordinatord, "coordinatord", "bin/coordinatord", "coordinatord binary")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "coordinatord setting key=value for the gateway (repeatable)")
	cmd.Flags().StringVar(&f.classpath, "classpath", "", "the word count's classpath (default: what test/e2e/streamsapp/build.sh prints)")
	cmd.Flags().StringVar(&f.out, "out", "", "also write the markdown table here")
	cmd.Flags().StringVar(&f.work, "work", "", "folder for state directories and logs (default: a temporary one, removed afterwards)")
	cmd.MarkFlagRequired("target")
	return cmd
}

func parseStartupTarget(spec string) (startupTarget, error) {
	parts := strings.Split(spec, ",")
	name, addr, ok := strings.Cut(parts[0], "=")
	if !ok || name == "" || addr == "" {
		return startupTarget{}, fmt.Errorf("target %q: want name=host:port,protocol=streams|classic", spec)
	}
	t := startupTarget{name: name, addr: addr, protocol: "streams"}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		switch {
		case k == "protocol" && (v == "streams" || v == "classic"):
			t.protocol = v
		case k == "set" && strings.Contains(v, "=") && addr == "gateway":
			t.sets = append(t.sets, v)
		default:
			return startupTarget{}, fmt.Errorf("target %q: unknown option %q (known: protocol=streams|classic, and set=key=value for a gateway)", spec, p)
		}
	}
	return t, nil
}

func runStartup(ctx context.Context, f *startupFlags, log io.Writer) error {
	var targets []startupTarget
	for _, s := range f.targets {
		t, err := parseStartupTarget(s)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	work := f.work
	var err error
	if work == "" {
		if work, err = os.MkdirTemp("", "coordbench-startup-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	cp := f.classpath
	if cp == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		build := exec.CommandContext(ctx, filepath.Join(root, "test", "e2e", "streamsapp", "build.sh"))
		build.Stderr = log
		out, err := build.Output()
		if err != nil {
			return fmt.Errorf("building the word count: %w", err)
		}
		cp = strings.TrimSpace(string(out))
	}
	for i, t := range targets {
		if t.addr != "gateway" {
			continue
		}
		if f.upstream == "" {
			return errors.New("a target at address \"gateway\" needs --upstream")
		}
		base, err := freePortRange(11)
		if err != nil {
			return err
		}
		sets := append([]string{
			"listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(base),
			"node.id=" + strconv.Itoa(gatewayNodeID),
			"upstream.bootstrap.servers=" + f.upstream,
			fmt.Sprintf("gateway.broker.port.range=%d-%d", base+1, base+10),
		}, f.sets...)
		sets = append(sets, t.sets...)
		logf, err := os.Create(filepath.Join(work, t.name+"-coordinatord.log"))
		if err != nil {
			return err
		}
		defer logf.Close()
		gt, stop, err := startCoordinatordWith(ctx, f.coordinatord, filepath.Join(work, t.name+"-data"), logf, t.name, sets)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(log, "startup: %s: coordinatord gateway at %s in front of %s, settings %s\n", t.name, gt.Addr, f.upstream, strings.Join(sets, " "))
		targets[i].addr = gt.Addr
	}

	type key struct{ target, step string }
	times := map[key][]float64{}
	for r := 1; r <= f.rounds; r++ {
		for _, t := range targets {
			one, join, all, settled, settledJoin, err := startupRound(ctx, t, cp, f.instances, filepath.Join(work, fmt.Sprintf("%s-r%d", t.name, r)), log)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", t.name, r, err)
			}
			fmt.Fprintf(log, "startup: %-22s round %d: 1 instance RUNNING after %.2f s (%.2f s after it began to join), %d instances after %.2f s more, all settled RUNNING after %.2f s (%.2f s after the last began to join)\n", t.name, r, one, join, f.instances, all, settled, settledJoin)
			times[key{t.name, "1"}] = append(times[key{t.name, "1"}], one)
			times[key{t.name, "j"}] = append(times[key{t.name, "j"}], join)
			times[key{t.name, "n"}] = append(times[key{t.name, "n"}], all)
			times[key{t.name, "s"}] = append(times[key{t.name, "s"}], settled)
			times[key{t.name, "sj"}] = append(times[key{t.name, "sj"}], settledJoin)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| target | group.protocol | 1 instance: start to RUNNING (s) | 1 instance: first REBALANCING to RUNNING (s) | +%d instances to RUNNING (s) | +%d instances: all settled RUNNING (s) | +%d instances: last first REBALANCING to all settled (s) |\n", f.instances-1, f.instances-1, f.instances-1)
	b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", t.name, t.protocol,
			medianRange(times[key{t.name, "1"}]), medianRange(times[key{t.name, "j"}]), medianRange(times[key{t.name, "n"}]), medianRange(times[key{t.name, "s"}]), medianRange(times[key{t.name, "sj"}]))
	}
	fmt.Fprint(os.Stdout, b.String())
	if f.out != "" {
		return os.WriteFile(f.out, []byte(b.String()), 0o644)
	}
	return nil
}

// medianRange prints the median and, with several rounds, the range.
func medianRange(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) == 1 {
		return fmt.Sprintf("%.2f", med)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", med, s[0], s[len(s)-1])
}

// startupRound runs one target's measurement: seconds to RUNNING for the first instance, and
// for the others started together afterwards: until each was first RUNNING (all), and until
// the last move to RUNNING of any instance after which all stay RUNNING for settleQuiet
// (settled; settledJoin from the latest first REBALANCING of the new instances, i.e. once the
// last JVM is up and joins, which leaves the JVMs' start out). A new instance is RUNNING at once while it holds no task yet, and the first one
// goes back to REBALANCING to hand tasks over, so only settled says when the tasks are spread.
func startupRound(ctx context.Context, t startupTarget, cp string, n int, dir string, log io.Writer) (one, join, all, settled, settledJoin float64, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, 0, 0, 0, err
	}
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	app, in, out := "startup-"+stamp, "startup-in-"+stamp, "startup-out-"+stamp
	if err := createTopics(ctx, t.addr, 4, in, out); err != nil {
		return 0, 0, 0, 0, 0, err
	}
	var apps []*wordCount
	defer func() {
		for _, a := range apps {
			a.close()
		}
	}()
	start := func(i int) *wordCount {
		a := startWordCountJVM(cp, t.addr, app, in, out, t.protocol, filepath.Join(dir, fmt.Sprintf("state-%d", i)), filepath.Join(dir, fmt.Sprintf("instance-%d.log", i)))
		apps = append(apps, a)
		return a
	}
	const within = 120 * time.Second
	first := start(1)
	if err := first.waitRunning(ctx, within); err != nil {
		return 0, 0, 0, 0, 0, err
	}
	one, join = first.runningAfter.Seconds(), first.joinToRunning.Seconds()
	t0 := time.Now()
	var more []*wordCount
	for i := 2; i <= n; i++ {
		more = append(more, start(i))
	}
	for _, a := range more {
		if err := a.waitRunning(ctx, within); err != nil {
			return 0, 0, 0, 0, 0, err
		}
	}
	var lastJoin time.Time
	for _, a := range more {
		if j := a.joinedAt(); j.After(lastJoin) {
			lastJoin = j
		}
	}
	all = time.Since(t0).Seconds()
	// Settled: every instance RUNNING and no change of state for settleQuiet, longer than the
	// default heartbeat interval so that a hand-over waiting on a heartbeat is not taken for
	// the end.
	const settleQuiet = 8 * time.Second
	for deadline := time.Now().Add(within); ; {
		last, running := t0, true
		for _, a := range apps {
			st, at := a.lastState()
			running = running && st == "RUNNING"
			if at.After(last) {
				last = at
			}
		}
		if running && time.Since(last) >= settleQuiet {
			return one, join, all, last.Sub(t0).Seconds(), last.Sub(lastJoin).Seconds(), nil
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, 0, 0, fmt.Errorf("instances not settled RUNNING after %s", within)
		}
		select {
		case <-ctx.Done():
			return 0, 0, 0, 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func createTopics(ctx context.Context, addr string, partitions int32, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	rs, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// wordCount is one JVM of test/e2e/streamsapp's WordCount.
type wordCount struct {
	cmd          *exec.Cmd
	stdin        io.WriteCloser
	started      time.Time
	running      chan struct{}
	exited       chan struct{}
	runningAfter time.Duration
	// joinToRunning is from the first REBALANCING (the client is up and joins its group) to
	// RUNNING: the coordination share, without the JVM's start.
	joinToRunning time.Duration
	mu            sync.Mutex
	state         string // the last STATE line's state, and when it was seen
	stateAt       time.Time
	joining       time.Time // the first REBALANCING
	err           error
}

func (a *wordCount) joinedAt() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.joining
}

func (a *wordCount) lastState() (string, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state, a.stateAt
}

func startWordCountJVM(cp, bootstrap, app, in, out, protocol, stateDir, logPath string) *wordCount {
	a := &wordCount{running: make(chan struct{}), exited: make(chan struct{})}
	a.cmd = exec.Command("java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
		"-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", cp, "WordCount", bootstrap, app, in, out, protocol, stateDir)
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(logPath)
	if err != nil {
		a.err = err
		close(a.exited)
		return a
	}
	a.cmd.Stderr = logf
	stdout, err := a.cmd.StdoutPipe()
	if err == nil {
		a.stdin, err = a.cmd.StdinPipe()
	}
	if err == nil {
		a.started = time.Now()
		err = a.cmd.Start()
	}
	if err != nil {
		a.err = err
		logf.Close()
		close(a.exited)
		return a
	}
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stdout)
		seen := false
		var joining time.Time
		for sc.Scan() {
			if sc.Text() == "STATE REBALANCING" && joining.IsZero() {
				joining = time.Now()
			}
			fmt.Fprintf(logf, "%s STDOUT %s\n", time.Now().UTC().Format("15:04:05.000"), sc.Text())
			if st, ok := strings.CutPrefix(sc.Text(), "STATE "); ok {
				a.mu.Lock()
				a.state, a.stateAt = st, time.Now()
				if st == "REBALANCING" && a.joining.IsZero() {
					a.joining = a.stateAt
				}
				a.mu.Unlock()
			}
			if sc.Text() == "STATE RUNNING" && !seen {
				seen = true
				a.runningAfter = time.Since(a.started)
				if !joining.IsZero() {
					a.joinToRunning = time.Since(joining)
				}
				close(a.running)
			}
		}
		a.cmd.Wait()
		close(a.exited)
	}()
	return a
}

func (a *wordCount) waitRunning(ctx context.Context, within time.Duration) error {
	select {
	case <-a.running:
		return nil
	case <-a.exited:
		if a.err != nil {
			return a.err
		}
		return fmt.Errorf("word count exited before RUNNING: %v", a.cmd.ProcessState)
	case <-time.After(within):
		return fmt.Errorf("word count not RUNNING after %s", within)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close closes the instance as an operator would (stdin EOF: it leaves its group), killing it
// when it takes too long.
func (a *wordCount) close() {
	if a.stdin != nil {
		a.stdin.Close()
	}
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		a.cmd.Process.Kill()
		<-a.exited
	}
}
