package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
	"github.com/coordinatord/coordinatord/cmd/coordbench/runner"
	"github.com/coordinatord/coordinatord/cmd/coordbench/scenario"
)

type restartFlags struct {
	coordinatord string
	kafka        string
	groups       int
	partitions   int
	clients      int
	rounds       int
	sample       int
	out          string
	work         string
	failover     bool
	// traffic, when positive, is a window of offset-commit load after the last restart, then
	// resident memory is read again: the heap grows back between collections under traffic,
	// which the figure right after a restart does not show.
	traffic        time.Duration
	trafficClients int
}

func newRestartCommand() *cobra.Command {
	var f restartFlags
	cmd := &cobra.Command{
		Use:   "restart",
		Short: "Commit offsets of many groups, restart the server, time until it serves them again; resident memory",
		Long: "Per target (coordinatord, and Kafka 4.4 from test/kafka unless --kafka off): start it empty,\n" +
			"read its resident memory, commit --groups x --partitions offsets (one OffsetCommit per group,\n" +
			"--clients connections in parallel), stop it gracefully, start it again on the same data and\n" +
			"time from the process start until OffsetFetch of --sample groups spread over all of them\n" +
			"answers every committed offset; then read its resident memory again. Kafka runs with\n" +
			"offsets.topic.num.partitions=50 (its default) so both spread the offsets the same way.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runRestart(ctx, &f, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.coordinatord, "coordinatord", "bin/coordinatord", "coordinatord binary")
	cmd.Flags().StringVar(&f.kafka, "kafka", "auto", "auto: also measure Kafka 4.4 (test/kafka/kafka.sh); off")
	cmd.Flags().IntVar(&f.groups, "groups", 10000, "groups committing")
	cmd.Flags().IntVar(&f.partitions, "partitions", 100, "partitions each group commits (one topic of that many partitions)")
	cmd.Flags().IntVar(&f.clients, "clients", 8, "connections committing in parallel")
	cmd.Flags().IntVar(&f.rounds, "rounds", 1, "restarts measured per target (each on the same data)")
	cmd.Flags().IntVar(&f.sample, "sample", 200, "groups whose offsets must all read back for a restart to count as served")
	cmd.Flags().StringVar(&f.out, "out", "", "also write the markdown table here")
	cmd.Flags().StringVar(&f.work, "work", "", "folder for data and logs (default: a temporary one, removed afterwards)")
	cmd.Flags().BoolVar(&f.failover, "failover", false, "also measure a fail-over on log.backend=kafka: two nodes share one shard holding every offset on a broker of their own; kill -9 of the owner, time until the other serves every sampled offset")
	cmd.Flags().DurationVar(&f.traffic, "traffic", 0, "after the last restart, run the offset-commit scenario this long and read resident memory again (0: not)")
	cmd.Flags().IntVar(&f.trafficClients, "traffic-clients", 8, "connections of the --traffic window")
	return cmd
}

// restartTarget is a server the benchmark can start, stop and start again on the same data.
type restartTarget interface {
	name() string
	start(ctx context.Context) (addr string, pid int, err error) // the first start, empty
	stop() error                                                 // gracefully
	restart(ctx context.Context) (addr string, pid int, err error)
}

type restartResult struct {
	target           string
	offsets          int
	commitSeconds    float64
	restartSeconds   []float64
	rssEmpty, rssFul int64
	// after the --traffic window: resident memory, and the commits it made per second
	rssTraffic  int64
	trafficRate float64
}

func runRestart(ctx context.Context, f *restartFlags, log io.Writer) error {
	if f.groups <= 0 || f.partitions <= 0 || f.clients <= 0 || f.rounds <= 0 || f.sample <= 0 {
		return errors.New("restart: --groups, --partitions, --clients, --rounds and --sample must be positive")
	}
	if f.traffic < 0 || (f.traffic > 0 && f.trafficClients <= 0) {
		return errors.New("restart: --traffic must not be negative, and --traffic-clients positive with it")
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work := f.work
	if work == "" {
		if work, err = os.MkdirTemp("", "coordbench-restart-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	targets := []restartTarget{&coordRestart{bin: f.coordinatord, data: filepath.Join(work, "coordinatord"), log: log}}
	switch f.kafka {
	case "off":
	case "auto":
		targets = append(targets, &kafkaRestart{script: filepath.Join(root, "test", "kafka", "kafka.sh"), dir: filepath.Join(work, "kafka"), log: log})
	default:
		return fmt.Errorf("--kafka %q: want auto or off", f.kafka)
	}
	if f.failover {
		targets = append(targets, &failoverTarget{bin: f.coordinatord, work: filepath.Join(work, "failover"), log: log,
			upstream: &kafkaRestart{script: filepath.Join(root, "test", "kafka", "kafka.sh"), dir: filepath.Join(work, "failover-kafka"), log: log}})
	}
	var results []restartResult
	for _, t := range targets {
		r, err := measureRestart(ctx, t, f, log)
		if c, ok := t.(interface{ close() }); ok {
			c.close()
		} else {
			t.stop()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t.name(), err)
		}
		results = append(results, r)
	}
	table := restartTable(results, f)
	for i, t := range targets {
		if n, ok := t.(interface{ note(restartResult) string }); ok && i < len(results) {
			table += n.note(results[i])
		}
	}
	fmt.Fprint(os.Stdout, table)
	if f.out != "" {
		return os.WriteFile(f.out, []byte(table), 0o644)
	}
	return nil
}

func measureRestart(ctx context.Context, t restartTarget, f *restartFlags, log io.Writer) (restartResult, error) {
	r := restartResult{target: t.name(), offsets: f.groups * f.partitions}
	addr, pid, err := t.start(ctx)
	if err != nil {
		return r, err
	}
	const topic = "coordbench-restart"
	if err := createRestartTopic(ctx, addr, topic, f.partitions); err != nil {
		return r, err
	}
	r.rssEmpty = residentBytes(pid)
	fmt.Fprintf(log, "restart: %s: committing %d offsets (%d groups x %d partitions)\n", t.name(), r.offsets, f.groups, f.partitions)
	began := time.Now()
	if err := commitAll(ctx, addr, topic, f); err != nil {
		return r, err
	}
	r.commitSeconds = time.Since(began).Seconds()
	for round := 0; round < f.rounds; round++ {
		if err := t.stop(); err != nil {
			return r, err
		}
		began := time.Now()
		addr, pid, err = t.restart(ctx)
		if err != nil {
			return r, err
		}
		if err := waitServed(ctx, addr, topic, f); err != nil {
			return r, err
		}
		d := time.Since(began).Seconds()
		r.restartSeconds = append(r.restartSeconds, d)
		fmt.Fprintf(log, "restart: %s: round %d: serving every sampled offset %.2f s after the stop\n", t.name(), round+1, d)
	}
	r.rssFul = residentBytes(pid)
	if f.traffic > 0 {
		if err := commitTraffic(ctx, &r, result.Target{Name: t.name(), Addr: addr, PID: pid}, f, log); err != nil {
			return r, err
		}
	}
	return r, nil
}

// commitTraffic runs the offset-commit scenario against the restarted target for f.traffic and
// reads its resident memory after.
func commitTraffic(ctx context.Context, r *restartResult, t result.Target, f *restartFlags, log io.Writer) error {
	sc, ok := scenario.Get("offset-commit")
	if !ok {
		return errors.New("restart: the offset-commit scenario is not registered")
	}
	fmt.Fprintf(log, "restart: %s: %s of offset-commit, %d clients\n", t.Name, f.traffic, f.trafficClients)
	ms, err := runner.Run(ctx, runner.Config{Scenarios: []scenario.Scenario{sc}, Targets: []result.Target{t},
		Clients: []int{f.trafficClients}, Duration: f.traffic, Rounds: 1, Log: log})
	if err != nil {
		return fmt.Errorf("traffic: %w", err)
	}
	for _, m := range ms {
		if m.Status != result.StatusOK {
			return fmt.Errorf("traffic: %s %s", m.Status, m.Note)
		}
		r.trafficRate = m.Throughput()
	}
	r.rssTraffic = residentBytes(t.PID)
	return nil
}

func createRestartTopic(ctx context.Context, addr, topic string, partitions int) error {
	c, err := kconn.Dial(ctx, addr, "coordbench-restart")
	if err != nil {
		return err
	}
	defer c.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, int32(partitions), 1
	req.Topics, req.TimeoutMillis = append(req.Topics, t), 30000
	resp, err := c.Request(ctx, req)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 && code != kerr.TopicAlreadyExists.Code {
		return fmt.Errorf("creating %s: %v", topic, kerr.ErrorForCode(code))
	}
	return nil
}

func restartGroup(i int) string { return "coordbench-restart-" + strconv.Itoa(i) }

// committedOffset is what group i committed for partition p: distinct per entry, so a read
// back proves the very offset came back.
func committedOffset(i, p int) int64 { return int64(i)*1000 + int64(p) + 1 }

// commitAll commits every group's offsets with simple-consumer commits (no member, generation
// -1), by topic name (OffsetCommit v9: v10 names topics by id).
func commitAll(ctx context.Context, addr, topic string, f *restartFlags) error {
	if err := findCoordinator(ctx, addr); err != nil {
		return err
	}
	next := make(chan int)
	errc := make(chan error, f.clients)
	var wg sync.WaitGroup
	for c := 0; c < f.clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := kconn.Dial(ctx, addr, "coordbench-restart")
			if err != nil {
				errc <- err
				return
			}
			defer conn.Close()
			for i := range next {
				if err := commitGroup(ctx, conn, topic, i, f.partitions); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := 0; i < f.groups; i++ {
		select {
		case next <- i:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// findCoordinator asks until the server names a coordinator: Kafka creates __consumer_offsets
// on the first FindCoordinator, and answers commits NOT_COORDINATOR until then.
func findCoordinator(ctx context.Context, addr string) error {
	conn, err := kconn.Dial(ctx, addr, "coordbench-restart")
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = restartGroup(0)
		req.CoordinatorKeys = []string{restartGroup(0)}
		resp, err := conn.Request(ctx, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		code := r.ErrorCode
		if len(r.Coordinators) > 0 {
			code = r.Coordinators[0].ErrorCode
		}
		if code == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("FindCoordinator: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func commitGroup(ctx context.Context, conn *kconn.Conn, topic string, i, partitions int) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = restartGroup(i), -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p := 0; p < partitions; p++ {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = int32(p), committedOffset(i, p)
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	// A coordinator just started may still be loading, or (Kafka) creating __consumer_offsets.
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := conn.RequestCapped(ctx, req, 9)
		if err != nil {
			return err
		}
		code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			return nil
		}
		if e := kerr.ErrorForCode(code); !kerr.IsRetriable(e) || time.Now().After(deadline) {
			return fmt.Errorf("committing %s: %v", req.Group, e)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitServed polls until every sampled group (spread over all groups, the last one included)
// reads back every offset it committed.
func waitServed(ctx context.Context, addr, topic string, f *restartFlags) error {
	deadline := time.Now().Add(5 * time.Minute)
	var sample []int
	step := max(f.groups/f.sample, 1)
	for i := 0; i < f.groups; i += step {
		sample = append(sample, i)
	}
	if sample[len(sample)-1] != f.groups-1 {
		sample = append(sample, f.groups-1)
	}
	var conn *kconn.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var last error
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if conn == nil {
			c, err := kconn.Dial(ctx, addr, "coordbench-restart")
			if err != nil {
				last = err
				time.Sleep(5 * time.Millisecond)
				continue
			}
			conn = c
		}
		for len(sample) > 0 {
			ok, err := servesGroup(ctx, conn, topic, sample[0], f.partitions)
			if err != nil {
				last = err
				if errors.Is(err, kconn.ErrBroken) {
					conn.Close()
					conn = nil
				}
				break
			}
			if !ok {
				last = fmt.Errorf("group %s not served yet", restartGroup(sample[0]))
				break
			}
			sample = sample[1:] // once served, always served: the load is done for its shard
		}
		if len(sample) == 0 {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("offsets not served within 5 minutes of the restart: %v", last)
}

func servesGroup(ctx context.Context, conn *kconn.Conn, topic string, i, partitions int) (bool, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = restartGroup(i)
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic = topic
	for p := 0; p < partitions; p++ {
		t.Partitions = append(t.Partitions, int32(p))
	}
	req.Topics = append(req.Topics, t)
	resp, err := conn.RequestCapped(ctx, req, 7) // v8+ batches groups; one group here
	if err != nil {
		return false, err
	}
	r := resp.(*kmsg.OffsetFetchResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != partitions {
		return false, nil
	}
	for _, p := range r.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			return false, nil
		}
		if p.Offset != committedOffset(i, int(p.Partition)) {
			return false, fmt.Errorf("group %s partition %d read back offset %d after the restart, committed %d",
				req.Group, p.Partition, p.Offset, committedOffset(i, int(p.Partition)))
		}
	}
	return true, nil
}

// residentBytes is the process's VmRSS now (0 when unreadable).
func residentBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func restartTable(rs []restartResult, f *restartFlags) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| target | committed offsets | commit time | restart (fail-over: kill -9 of the owner) to serving every sampled offset | RSS empty | RSS after the restart | RSS per offset |")
	if f.traffic > 0 {
		fmt.Fprintf(&b, " RSS after %s of offset-commit (%d clients) | RSS per offset after it |", f.traffic, f.trafficClients)
	}
	fmt.Fprintf(&b, "\n| --- | --- | --- | --- | --- | --- | --- |")
	if f.traffic > 0 {
		fmt.Fprintf(&b, " --- | --- |")
	}
	fmt.Fprintln(&b)
	for _, r := range rs {
		var times []string
		for _, s := range r.restartSeconds {
			times = append(times, fmt.Sprintf("%.2f s", s))
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f s | %s | %d MiB | %d MiB | %s |", r.target, r.offsets, r.commitSeconds,
			strings.Join(times, ", "), r.rssEmpty>>20, r.rssFul>>20, perOffset(r.rssFul, r))
		if f.traffic > 0 {
			fmt.Fprintf(&b, " %d MiB (%.0f commits/s) | %s |", r.rssTraffic>>20, r.trafficRate, perOffset(r.rssTraffic, r))
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "\n`coordbench restart --groups %d --partitions %d --clients %d --rounds %d --sample %d",
		f.groups, f.partitions, f.clients, f.rounds, f.sample)
	if f.traffic > 0 {
		fmt.Fprintf(&b, " --traffic %s --traffic-clients %d", f.traffic, f.trafficClients)
	}
	fmt.Fprintf(&b, "`\n")
	return b.String()
}

// perOffset is resident memory beyond the empty server's per committed offset.
func perOffset(rss int64, r restartResult) string {
	if rss > r.rssEmpty && r.offsets > 0 {
		return fmt.Sprintf("%d B", (rss-r.rssEmpty)/int64(r.offsets))
	}
	return "n/a"
}

// coordRestart is coordinatord on a data folder of its own, with fsync as configured by default.
type coordRestart struct {
	bin, data string
	log       io.Writer
	stopFn    func()
}

func (c *coordRestart) name() string { return "coordinatord" }

func (c *coordRestart) start(ctx context.Context) (string, int, error) { return c.restart(ctx) }

func (c *coordRestart) restart(ctx context.Context) (string, int, error) {
	t, stop, err := startCoordinatordWith(ctx, c.bin, c.data, c.log, "coordinatord", []string{"listeners=PLAINTEXT://127.0.0.1:0"})
	if err != nil {
		return "", 0, err
	}
	c.stopFn = stop
	return t.Addr, t.PID, nil
}

func (c *coordRestart) stop() error {
	if c.stopFn != nil {
		c.stopFn()
		c.stopFn = nil
	}
	return nil
}

// kafkaRestart is the reference broker of test/kafka, restarted with `kafka.sh restart`.
type kafkaRestart struct {
	script, dir string
	log         io.Writer
	running     bool
}

func (k *kafkaRestart) name() string { return "kafka" }

func (k *kafkaRestart) start(ctx context.Context) (string, int, error) {
	return k.run(ctx, "start", "--dir", k.dir, "--no-warmup", "--config", "offsets.topic.num.partitions=50")
}

func (k *kafkaRestart) restart(ctx context.Context) (string, int, error) {
	return k.run(ctx, "restart", "--dir", k.dir)
}

func (k *kafkaRestart) run(ctx context.Context, args ...string) (string, int, error) {
	cmd := exec.CommandContext(ctx, k.script, args...)
	cmd.Stderr = k.log
	out, err := cmd.Output()
	if err != nil {
		return "", 0, fmt.Errorf("kafka.sh %s: %w", args[0], err)
	}
	k.running = true
	env := parseEnv(string(out))
	pid, _ := strconv.Atoi(env["KAFKA_PID"])
	if env["KAFKA_ADDR"] == "" {
		return "", 0, fmt.Errorf("kafka.sh %s printed no KAFKA_ADDR", args[0])
	}
	return env["KAFKA_ADDR"], pid, nil
}

func (k *kafkaRestart) stop() error {
	if !k.running {
		return nil
	}
	k.running = false
	cmd := exec.Command(k.script, "stop", "--dir", k.dir)
	cmd.Stdout, cmd.Stderr = k.log, k.log
	return cmd.Run()
}
