package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// connectBuild resolves Kafka Connect 4.4 and compiles the file connectors' wrappers
// (test/e2e/connectapp).
var connectBuild = setupOnce{script: "connectapp/build.sh", what: "building the Kafka Connect worker classpath"}

// connectWorker is one Kafka Connect distributed worker (Kafka's own ConnectDistributed), a JVM
// of its own.
type connectWorker struct {
	t      *testing.T
	name   string
	rest   string // host:port of its REST API, also its worker_id
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startConnectWorker starts a worker of the Connect cluster groupID that bootstraps to bootstrap.
// Its timeouts are the shortest the gateway accepts, so that a killed worker's tasks move within
// seconds: session 6 s for the worker and for its sink tasks' consumers, and a 3 s
// scheduled.rebalance.max.delay.ms before a departed worker's tasks are handed out again.
func startConnectWorker(t *testing.T, name, bootstrap, groupID string, restPort int) *connectWorker {
	t.Helper()
	cp := connectBuild.path(t)
	dir := t.TempDir()
	w := &connectWorker{t: t, name: name, rest: "127.0.0.1:" + strconv.Itoa(restPort),
		log: filepath.Join(dir, "worker.log"), exited: make(chan struct{})}
	props := strings.Join([]string{
		"bootstrap.servers=" + bootstrap,
		"group.id=" + groupID,
		"key.converter=org.apache.kafka.connect.storage.StringConverter",
		"value.converter=org.apache.kafka.connect.storage.StringConverter",
		"config.storage.topic=" + groupID + "-configs",
		"offset.storage.topic=" + groupID + "-offsets",
		"status.storage.topic=" + groupID + "-status",
		"config.storage.replication.factor=1",
		"offset.storage.replication.factor=1",
		"offset.storage.partitions=2",
		"status.storage.replication.factor=1",
		"status.storage.partitions=1",
		"listeners=http://" + w.rest,
		"rest.advertised.host.name=127.0.0.1",
		"plugin.discovery=service_load",
		"offset.flush.interval.ms=500",
		"session.timeout.ms=6000",
		"heartbeat.interval.ms=2000",
		"scheduled.rebalance.max.delay.ms=3000",
		"consumer.session.timeout.ms=6000",
		"consumer.heartbeat.interval.ms=2000",
	}, "\n") + "\n"
	propsFile := filepath.Join(dir, "worker.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(w.log)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command("java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp", cp,
		"org.apache.kafka.connect.cli.ConnectDistributed", propsFile)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.cmd.Wait(); logf.Close(); close(w.exited) }()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			b, _ := os.ReadFile(w.log)
			t.Logf("%s output (last 3000 bytes):\n%s", name, tail(b, 3000))
		}
	})
	return w
}

func (w *connectWorker) kill() {
	w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
}

// waitReady waits until the worker's REST API answers, which it does once the worker has read
// its config topic and joined its group.
func (w *connectWorker) waitReady(within time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-w.exited:
			w.t.Fatalf("%s exited before its REST API answered", w.name)
		default:
		}
		if resp, err := http.Get("http://" + w.rest + "/connectors"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	w.t.Fatalf("%s's REST API did not answer within %s", w.name, within)
}

// putConnector creates or reconfigures a connector through the worker's REST API.
func (w *connectWorker) putConnector(name string, config map[string]string) {
	w.t.Helper()
	body, _ := json.Marshal(config)
	req, _ := http.NewRequest(http.MethodPut, "http://"+w.rest+"/connectors/"+name+"/config", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		w.t.Fatalf("PUT connector %s: %s %s", name, resp.Status, b)
	}
}

// placement is where the REST API says each connector and task runs: "name" and "name-N" map to
// the worker_id running it, for those in state RUNNING only.
func (w *connectWorker) placement() (map[string]string, error) {
	resp, err := http.Get("http://" + w.rest + "/connectors?expand=status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s", resp.Status)
	}
	var all map[string]struct {
		Status struct {
			Connector struct {
				State    string `json:"state"`
				WorkerID string `json:"worker_id"`
			} `json:"connector"`
			Tasks []struct {
				ID       int    `json:"id"`
				State    string `json:"state"`
				WorkerID string `json:"worker_id"`
			} `json:"tasks"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, c := range all {
		if c.Status.Connector.State == "RUNNING" {
			out[name] = c.Status.Connector.WorkerID
		}
		for _, task := range c.Status.Tasks {
			if task.State == "RUNNING" {
				out[fmt.Sprintf("%s-%d", name, task.ID)] = task.WorkerID
			}
		}
	}
	return out, nil
}

// waitLines waits until file has at least n lines.
func waitLines(t *testing.T, file string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	got := 0
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(file)
		if got = bytes.Count(b, []byte("\n")); got >= n {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s has %d lines after %s, want %d", file, got, within, n)
}

func describeClassicGroup(t *testing.T, ctx context.Context, addr, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, newClient(t, addr))
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("DescribeGroups %s: %v", group, err)
	}
	return resp.Groups[0]
}

func appendLines(t *testing.T, file, prefix string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		fmt.Fprintf(f, "%s-%d\n", prefix, i)
	}
	f.Close()
}

// A Kafka Connect cluster of two distributed workers runs through the gateway: the workers form
// their group (protocol type "connect", the sessioned incremental cooperative assignor), a file
// source and a file sink connector created over the REST API copy every line, and when one worker
// is killed (kill -9), its connectors and tasks move to the other, which goes on copying.
func TestConnect_DistributedWorkersThroughGateway(t *testing.T) {
	requireE2E(t)
	t.Parallel()
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const cluster = "e2e-connect"
	port := freePortRange(t, 2)
	a := startConnectWorker(t, "worker-a", g.Addr, cluster, port)
	b := startConnectWorker(t, "worker-b", g.Addr, cluster, port+1)
	a.waitReady(90 * time.Second)
	b.waitReady(90 * time.Second)

	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.txt")
	appendLines(t, in, "line", 0, 200)
	a.putConnector("lines-in", map[string]string{
		"connector.class": "LineConnectors$Source", "tasks.max": "1", "file": in, "topic": "e2e-connect-lines",
		// The upstream creates no topic on first use: the worker creates it through the gateway.
		"topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "2",
	})
	a.putConnector("lines-out", map[string]string{
		"connector.class": "LineConnectors$Sink", "tasks.max": "2", "file": out, "topics": "e2e-connect-lines",
	})
	waitLines(t, out, 200, 60*time.Second)

	wg := describeClassicGroup(t, ctx, g.Addr, cluster)
	if wg.ErrorCode != 0 || wg.State != "Stable" || wg.ProtocolType != "connect" || wg.Protocol != "sessioned" || len(wg.Members) != 2 {
		t.Fatalf("workers' group: error %d state %q protocol type %q protocol %q members %d, want Stable connect sessioned 2",
			wg.ErrorCode, wg.State, wg.ProtocolType, wg.Protocol, len(wg.Members))
	}
	sg := describeClassicGroup(t, ctx, g.Addr, "connect-lines-out")
	if sg.ErrorCode != 0 || sg.ProtocolType != "consumer" || len(sg.Members) != 2 {
		t.Fatalf("sink connector's group: error %d protocol type %q members %d, want consumer with 2 members",
			sg.ErrorCode, sg.ProtocolType, len(sg.Members))
	}

	killed := time.Now()
	b.kill()
	want := []string{"lines-in", "lines-in-0", "lines-out", "lines-out-0", "lines-out-1"}
	var last map[string]string
	for {
		p, err := a.placement()
		moved := err == nil
		for _, k := range want {
			moved = moved && p[k] == a.rest
		}
		if moved {
			break
		}
		last = p
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("60 s after worker-b was killed, RUNNING placement is %v (last error %v), want all on %s", last, err, a.rest)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("worker-b's connectors and tasks ran on worker-a %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	appendLines(t, in, "more", 0, 50)
	waitLines(t, out, 250, 60*time.Second)
	wg = describeClassicGroup(t, ctx, g.Addr, cluster)
	if wg.State != "Stable" || len(wg.Members) != 1 || wg.Members[0].ClientID != "connect-"+a.rest {
		t.Fatalf("workers' group after the kill: state %q members %d, want Stable with worker-a alone", wg.State, len(wg.Members))
	}
}
