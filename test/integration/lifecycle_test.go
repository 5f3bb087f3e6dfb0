package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminEndpointsAndMetrics(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if code, _ := httpGet(t, "http://"+d.Admin+"/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _ := httpGet(t, "http://"+d.Admin+"/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	if code, out, stderr := runCLI(t, "healthcheck", "--admin", d.Admin); code != 0 || out != "ready\n" {
		t.Fatalf("healthcheck: exit %d, %q %q; want 0 and \"ready\"", code, out, stderr)
	}
	c := dialRaw(t, d.Addr)
	c.write(frame(kmsg.NewPtrMetadataRequest(), 12, 1, strp("c"), nil))
	c.read(kmsg.NewPtrMetadataResponse(), 12, 1)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType = 7
	fc.CoordinatorKeys = []string{"g"}
	c.write(frame(fc, 4, 2, strp("c"), nil))
	c.read(kmsg.NewPtrFindCoordinatorResponse(), 4, 2)

	_, body := httpGet(t, "http://"+d.Admin+"/metrics")
	for _, want := range []string{
		`coordinatord_requests_total{api="Metadata"} 1`,
		`coordinatord_requests_total{api="FindCoordinator"} 1`,
		`coordinatord_request_errors_total{api="FindCoordinator",error="INVALID_REQUEST"} 1`,
		`coordinatord_request_duration_seconds_count{api="Metadata"} 1`,
		`coordinatord_connections_open 1`,
		`coordinatord_bytes_received_total`,
		`coordinatord_bytes_sent_total`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// Issue 10, defect 12: storage and shard series of the real binary, after a durable write
	// (CreateTopics appends to the metadata shard).
	createTopic(t, kadm.NewClient(d.client()), "t", 1)
	wants := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^coordinatord_log_fsync_seconds_count\{target="file"\} [1-9]`),
		regexp.MustCompile(`(?m)^coordinatord_log_fsync_seconds_count\{target="dir"\} [1-9]`),
		regexp.MustCompile(`(?m)^coordinatord_shard_append_batch_records_count [1-9]`),
		regexp.MustCompile(`(?m)^coordinatord_shard_append_batch_bytes_sum [1-9]`),
		regexp.MustCompile(`(?m)^coordinatord_shard_inbox_depth\{kind="group",lane="normal",shard="49"\} 0$`),
		regexp.MustCompile(`(?m)^coordinatord_shard_inbox_depth\{kind="meta",lane="priority",shard="0"\} 0$`),
		regexp.MustCompile(`(?m)^coordinatord_shard_durable_lag_records\{kind="meta",shard="0"\} 0$`),
		regexp.MustCompile(`(?m)^coordinatord_shard_state\{kind="meta",shard="0"\} 2$`),
		regexp.MustCompile(`(?m)^coordinatord_shard_state\{kind="group",shard="0"\} 2$`),
	}
	// A shard's inbox can hold a moment's work (its load at start, a timer, a retention check):
	// an idle daemon's inboxes drain to 0, which is what the series must then show, so poll.
	var missing []*regexp.Regexp
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body = httpGet(t, "http://"+d.Admin+"/metrics")
		missing = missing[:0]
		for _, want := range wants {
			if !want.MatchString(body) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range missing {
		t.Errorf("metrics lack %s", want)
	}
}

func TestGracefulShutdownAnswersThenExitsZero(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d.Addr)
	c.write(frame(kmsg.NewPtrApiVersionsRequest(), 0, 1, strp("c"), nil))
	c.read(kmsg.NewPtrApiVersionsResponse(), 0, 1)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if len(d.logged("coordinatord stopped")) != 1 {
		t.Fatal("no 'coordinatord stopped' log line")
	}
	// A field named after a key holds that key's value in its unit (the harness sets 5000).
	if l := d.logged("shutting down: draining in-flight requests"); len(l) != 1 || l[0]["shutdown.timeout.ms"] != 5000.0 {
		t.Fatalf("the shutdown line %v, want shutdown.timeout.ms 5000", l)
	}
	c.expectClosed()
}

// SIGHUP stops coordinatord as SIGTERM does (Kafka's JVM runs its shutdown hook on it): in-flight
// requests are answered, the exit is clean. Go's default would kill the process on the spot.
func TestSIGHUPShutsDownGracefully(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d.Addr)
	c.write(frame(kmsg.NewPtrApiVersionsRequest(), 0, 1, strp("c"), nil))
	c.read(kmsg.NewPtrApiVersionsResponse(), 0, 1)
	d.cmd.Process.Signal(syscall.SIGHUP)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("coordinatord did not exit within 30s of SIGHUP")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 || len(d.logged("coordinatord stopped")) != 1 {
		t.Fatalf("after SIGHUP: exit %d (%s), stopped lines %d; want a clean stop", code, exitReport(d.cmd.ProcessState), len(d.logged("coordinatord stopped")))
	}
	// The shutdown line names the signal, as Kafka's "Terminating process due to signal SIGHUP".
	if l := d.logged("shutting down: draining in-flight requests"); len(l) != 1 || !strings.Contains(fmt.Sprint(l[0]["cause"]), "hangup") {
		t.Fatalf("the shutdown line %v does not name the signal", l)
	}
	c.expectClosed()
}

// A JoinGroup parked for a rebalance does not hold a shutdown: it is answered with a retriable
// coordinator error at once (Kafka answers NOT_COORDINATOR as it unloads the group), and the
// process exits long before shutdown.timeout.ms, here ten minutes.
func TestShutdownAnswersAParkedJoinGroup(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0", "shutdown.timeout.ms=600000")
	slow := func(member string) *kmsg.JoinGroupRequest {
		req := joinReq("g", member, nil)
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 300000, 600000
		return req
	}
	first := join(t, d, 3, slow(""))
	wantCode(t, "first join", first.ErrorCode, 0)
	wantCode(t, "first sync", syncG(t, d, 3, "g", first.MemberID, nil, first.Generation, map[string]string{first.MemberID: "a"}).ErrorCode, 0)
	// A second member: its join waits for the first to rejoin, which it never does.
	parked := dialRaw(t, d.Addr)
	parked.write(frame(slow(""), 3, 1, strp("c"), nil))
	adm := kadm.NewClient(d.client())
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, err := adm.DescribeGroups(ctxT(t), "g")
		if err == nil && g["g"].State == "PreparingRebalance" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group never started rebalancing: %+v %v", g["g"], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	adm.Close()
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	resp := kmsg.NewPtrJoinGroupResponse()
	parked.read(resp, 3, 1)
	if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code && resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("the parked join was answered %v, want a coordinator error the client retries", kerr.ErrorForCode(resp.ErrorCode))
	}
}

func TestClusterIDIsStableAcrossRestarts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	first := d.logged("coordinatord started")[0]["cluster_id"]
	if d.stop() != 0 {
		t.Fatal("stop")
	}
	d.logs = nil
	d.start()
	second := d.logged("coordinatord started")[0]["cluster_id"]
	if first == "" || first != second {
		t.Fatalf("cluster id changed across restart: %v -> %v", first, second)
	}
}

// A cluster.id other than the one the data under log.dirs was written under is refused at
// start, in one line naming both ids and the way out, as Kafka refuses a meta.properties of
// another cluster: clients would otherwise be told another cluster id than their offsets' one.
func TestClusterIDOtherThanTheDataRefusesToStart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "cluster.id=blue")
	if d.stop() != 0 {
		t.Fatal("stop")
	}
	code, out, errOut := runCLI(t, "serve", "--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+d.DataDir, "--set", "cluster.id=green")
	if code == 0 || strings.Contains(out, "coordinatord started") {
		t.Fatalf("started on data of cluster blue with cluster.id=green (exit %d):\n%s%s", code, out, errOut)
	}
	var refusal string
	for _, line := range strings.Split(out+errOut, "\n") {
		if strings.Contains(line, "cluster.id=green is configured") {
			refusal = line
		}
	}
	if !strings.Contains(refusal, "belongs to cluster blue") || !strings.Contains(refusal, "set cluster.id=blue") {
		t.Fatalf("no line naming both ids and what to do:\n%s%s", out, errOut)
	}
	// The data's own id, or none, starts it as before.
	d.logs = nil
	d.start("cluster.id=blue")
	if got := d.logged("coordinatord started")[0]["cluster_id"]; got != "blue" {
		t.Fatalf("cluster id %v, want blue", got)
	}
	d.stop()
	d.logs = nil
	d.start()
	if got := d.logged("coordinatord started")[0]["cluster_id"]; got != "blue" {
		t.Fatalf("cluster id %v with cluster.id empty, want the data's blue", got)
	}
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binaryPath, args...)
	cmd.Env = daemonEnv(binaryPath)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("CLI did not finish")
	}
	failIfRaced(t, cmd.ProcessState)
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	good := write("good.properties", "node.id=4\nlog.dirs=/var/lib/x\n")
	code, out, _ := runCLI(t, "config", "check", "--config", good, "--set", "offsets.topic.num.partitions=8")
	if code != 0 {
		t.Fatalf("good config: exit %d", code)
	}
	for _, want := range []string{"node.id=4\t# file", "offsets.topic.num.partitions=8\t# flag", "socket.request.max.bytes=104857600\t# default"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	bad := []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"--config", write("u.properties", "no.such=1\n")}, "no.such"},
		{"bad value", []string{"--config", write("b.properties", "offsets.topic.num.partitions=-1\n")}, "offsets.topic.num.partitions"},
		{"unreadable file", []string{"--config", filepath.Join(dir, "absent.properties")}, "absent.properties"},
		{"bad flag override", []string{"--set", "socket.request.max.bytes=lots"}, "socket.request.max.bytes"},
		{"admin listener on the Kafka listener's port", []string{"--set", "admin.listener=127.0.0.1:9092"}, "both use port 9092"},
		{"unknown flag", []string{"--bogus"}, "bogus"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"config", "check"}, tc.args...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "goroutine") {
				t.Fatalf("want one line naming %q, got %q", tc.want, stderr)
			}
		})
	}
	// serve refuses a bad config the same way, before binding anything.
	code, _, stderr := runCLI(t, "serve", "--set", "node.id=-3")
	if code != 2 || !strings.Contains(stderr, "node.id") {
		t.Fatalf("serve with bad config: exit %d, %q", code, stderr)
	}
}

// listeners=PLAINTEXT://:port (Kafka's way to bind every interface) serves on every interface
// and tells clients the machine's host name, as Kafka does, never the empty host (which each
// client would dial as its own machine). A routable address cannot be guessed for 0.0.0.0, so
// advertising it is refused before anything binds, as Kafka refuses it.
func TestListenerWithoutHostAdvertisesTheHostName(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no host name:", err)
	}
	d := startDaemon(t, "listeners=PLAINTEXT://:0")
	_, port, _ := strings.Cut(strings.TrimPrefix(d.Addr, "[::]"), ":")
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	found := rawCall(t, d, fc, 4, kmsg.NewPtrFindCoordinatorResponse())
	if c := found.Coordinators[0]; c.Host != host || strconv.Itoa(int(c.Port)) != port {
		t.Fatalf("FindCoordinator answers %s:%d, want %s:%s", c.Host, c.Port, host, port)
	}
	md := rawCall(t, d, kmsg.NewPtrMetadataRequest(), 12, kmsg.NewPtrMetadataResponse())
	if len(md.Brokers) != 1 || md.Brokers[0].Host != host {
		t.Fatalf("Metadata lists brokers %+v, want one at %s", md.Brokers, host)
	}
	// The start line says what clients are told, beside what is bound.
	started := d.logged("coordinatord started")
	if adv, _ := started[0]["advertised"].([]any); len(adv) != 1 || adv[0] != "PLAINTEXT://"+net.JoinHostPort(host, port) {
		t.Fatalf("the start line advertises %v, want PLAINTEXT://%s", started[0]["advertised"], net.JoinHostPort(host, port))
	}

	code, _, stderr := runCLI(t, "serve", "--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "advertised.listeners=PLAINTEXT://0.0.0.0:9092")
	if code != 2 || !strings.Contains(stderr, "advertised.listeners") {
		t.Fatalf("serve advertising 0.0.0.0: exit %d, %q; want 2 and a line naming advertised.listeners", code, stderr)
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "coordinatord ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

// Issue 10, defect 12: net/http/pprof on the admin listener only with admin.pprof.enable=true;
// off by default, since profiles expose internals and cost CPU.
func TestAdminPprof(t *testing.T) {
	t.Parallel()
	off := startDaemon(t)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, _ := httpGet(t, "http://"+off.Admin+path); code != http.StatusNotFound {
			t.Errorf("%s without admin.pprof.enable: HTTP %d, want 404", path, code)
		}
	}
	on := startDaemon(t, "admin.pprof.enable=true")
	if code, body := httpGet(t, "http://"+on.Admin+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ with admin.pprof.enable=true: HTTP %d", code)
	}
	if code, body := httpGet(t, "http://"+on.Admin+"/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "runtime.(*Shard") {
		t.Errorf("goroutine profile: HTTP %d, no shard goroutine in it", code)
	}
	if code, body := httpGet(t, "http://"+on.Admin+"/debug/pprof/cmdline"); code != 200 || !strings.Contains(body, "serve") {
		t.Errorf("/debug/pprof/cmdline: HTTP %d %q", code, body)
	}
	if code, _ := httpGet(t, "http://"+on.Admin+"/metrics"); code != 200 {
		t.Errorf("/metrics with pprof on: HTTP %d", code)
	}
}

// log.backend changed on a log.dirs that holds the local group shards is refused at start, in
// one line saying what the data is kept with and how to go on: the Kafka backend does not read
// them, and the start would otherwise serve the metadata shard of log.dirs and not one group,
// so every consumer would reset by auto.offset.reset. Refused before the upstream is dialed.
func TestLogBackendOtherThanTheDataRefusesToStart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	clusterID, _ := d.logged("coordinatord started")[0]["cluster_id"].(string)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "kept", 1)
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: "kept", Partition: 0, At: 42, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctxT(t), "kept-group", o); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if d.stop() != 0 {
		t.Fatal("stop")
	}
	code, out, errOut := runCLI(t, "serve", "--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+d.DataDir, "--set", "cluster.id="+clusterID, "--set", "log.backend=kafka",
		"--set", "upstream.bootstrap.servers=127.0.0.1:1", "--set", "upstream.startup.timeout.ms=2000")
	if code == 0 || strings.Contains(out, "coordinatord started") {
		t.Fatalf("started on the Kafka backend beside local group shards (exit %d):\n%s%s", code, out, errOut)
	}
	var refusal string
	for _, line := range strings.Split(out+errOut, "\n") {
		if strings.Contains(line, "log.backend=kafka with log.kafka.topic=__coordinatord_state is configured") {
			refusal = line
		}
	}
	if !strings.Contains(refusal, "holds the group shards of log.backend=local") || !strings.Contains(refusal, "Set log.backend=local to keep them") {
		t.Fatalf("no line naming the data's backend and what to do:\n%s%s", out, errOut)
	}
	// The local backend starts on it as before, offsets and all.
	d.logs = nil
	d.start()
	got, err := kadm.NewClient(d.client()).FetchOffsets(ctxT(t), "kept-group")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch: %v %v", err, got.Error())
	}
	if off, _ := got.Lookup("kept", 0); off.At != 42 {
		t.Fatalf("offset after the refused start: %d, want 42", off.At)
	}
}
