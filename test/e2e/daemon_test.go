package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gateway is one coordinatord process in gateway mode.
type gateway struct {
	t       *testing.T
	cmd     *exec.Cmd
	DataDir string
	Addr    string // coordinatord's own listener: what clients bootstrap to
	Admin   string
	// PortMin..PortMax is the broker listener range, below the ephemeral range so that no
	// outgoing connection takes a port between the check and the bind.
	PortMin, PortMax int
	sets             []string
	// standalone runs coordinatord without an upstream (its embedded default), for the checks of
	// what Kafka's tools can and cannot do against a coordinator that has no data.
	standalone bool
	exited     chan struct{}

	mu   sync.Mutex
	logs []map[string]any
}

const nodeID = 100

func startGateway(t *testing.T, sets ...string) *gateway {
	t.Helper()
	g := &gateway{t: t, DataDir: t.TempDir(), sets: sets}
	base := freePortRange(t, 11)
	g.Addr = "127.0.0.1:" + strconv.Itoa(base)
	g.PortMin, g.PortMax = base+1, base+10
	g.start()
	return g
}

// startGatewayUnready starts a gateway and returns once it logged its start, without waiting
// for /readyz: for a node that is expected never to be ready.
func startGatewayUnready(t *testing.T, sets ...string) *gateway {
	t.Helper()
	g := &gateway{t: t, DataDir: t.TempDir(), sets: sets}
	base := freePortRange(t, 11)
	g.Addr = "127.0.0.1:" + strconv.Itoa(base)
	g.PortMin, g.PortMax = base+1, base+10
	select {
	case line := <-g.spawn():
		g.Admin = line["admin"].(string)
	case <-g.exited:
		t.Fatalf("coordinatord exited before starting: %v", g.cmd.ProcessState)
	case <-time.After(60 * time.Second):
		t.Fatal("coordinatord did not start within 60s")
	}
	return g
}

// startStandalone starts coordinatord on its embedded defaults: no upstream, no broker ports.
func startStandalone(t *testing.T, sets ...string) *gateway {
	t.Helper()
	g := &gateway{t: t, DataDir: t.TempDir(), sets: sets, standalone: true}
	g.Addr = "127.0.0.1:" + strconv.Itoa(freePortRange(t, 1))
	g.start()
	return g
}

func (g *gateway) start() {
	t := g.t
	t.Helper()
	started := g.spawn()
	select {
	case line := <-started:
		g.Admin = line["admin"].(string)
	case <-g.exited:
		t.Fatalf("coordinatord exited before starting: %v", g.cmd.ProcessState)
	case <-time.After(60 * time.Second):
		t.Fatal("coordinatord did not start within 60s")
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + g.Admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("coordinatord not ready within 30s")
}

// spawn starts the process and returns at once; the channel gets its "started" line. A test
// that kills the process at a moment of its start-up uses it instead of start.
func (g *gateway) spawn() <-chan map[string]any {
	t := g.t
	t.Helper()
	args := []string{"serve",
		"--set", "listeners=PLAINTEXT://" + g.Addr,
		"--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs=" + g.DataDir,
		"--set", "node.id=" + strconv.Itoa(nodeID),
		"--set", "shutdown.timeout.ms=5000",
	}
	if !g.standalone {
		args = append(args, "--set", "upstream.bootstrap.servers="+upstreamAddr,
			"--set", fmt.Sprintf("gateway.broker.port.range=%d-%d", g.PortMin, g.PortMax))
	}
	for _, s := range g.sets {
		args = append(args, "--set", s)
	}
	g.cmd = exec.Command(binaryPath, args...)
	// A data race in the daemon ends it, and so fails the test, instead of being printed and
	// passed over.
	g.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	g.cmd.Stderr = os.Stderr
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.exited = make(chan struct{})
	started := make(chan map[string]any, 1)
	go g.readLogs(out, started)
	go func() { g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		g.kill()
		if t.Failed() {
			g.reportProblems()
		}
	})
	return started
}

// loggedAt is the time of the first log line with the message.
func (g *gateway) loggedAt(msg string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.logs {
		if l["msg"] == msg {
			ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["ts"]))
			return ts, err == nil
		}
	}
	return time.Time{}, false
}

// logCount is how many log lines of every run so far have the message.
func (g *gateway) logCount(msg string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, l := range g.logs {
		if l["msg"] == msg {
			n++
		}
	}
	return n
}

func (g *gateway) readLogs(r io.Reader, started chan<- map[string]any) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		g.mu.Lock()
		g.logs = append(g.logs, line)
		g.mu.Unlock()
		if line["msg"] == "coordinatord started" {
			started <- line
		}
	}
}

func (g *gateway) kill() {
	if g.cmd.Process != nil {
		g.cmd.Process.Signal(syscall.SIGKILL)
		<-g.exited
	}
}

func (g *gateway) pid() int { return g.cmd.Process.Pid }

// freePortRange finds n consecutive free loopback ports below the ephemeral range.
func freePortRange(t *testing.T, n int) int {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, _ = strconv.Atoi(f[0])
		}
	}
	for try := 0; try < 200; try++ {
		base := 12000 + rand.IntN(lo-12000-n)
		ok := true
		for p := base; p < base+n && ok; p++ {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range below the ephemeral range")
	return 0
}

// reportProblems logs the daemon's warnings and errors, for a failed test's report.
func (g *gateway) reportProblems() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.logs {
		if l["level"] == "warn" || l["level"] == "error" {
			b, _ := json.Marshal(l)
			g.t.Logf("coordinatord %s", tail(b, 2000))
		}
	}
}
