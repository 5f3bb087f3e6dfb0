// Package integration drives the real coordinatord binary over loopback with real Kafka clients.
package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var binaryPath string

// plainBinary is built without the race detector, for tests that measure the daemon's memory:
// the race detector's own per-goroutine state would hide (or fake) a leak.
var plainBinary = sync.OnceValues(func() (string, error) {
	path := binaryPath + "-norace"
	out, err := exec.Command("go", "build", "-o", path, "../../cmd/coordinatord").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building coordinatord without -race: %v\n%s", err, out)
	}
	return path, nil
})

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coordinatord-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaryPath = filepath.Join(dir, "coordinatord")
	build := exec.Command("go", "build", "-race", "-o", binaryPath, "../../cmd/coordinatord")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building coordinatord:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one running coordinatord process.
type daemon struct {
	t       testing.TB
	cmd     *exec.Cmd
	DataDir string
	Addr    string // Kafka listener host:port
	// Listeners are the bound listeners' host:port by name (the first is Addr).
	Listeners map[string]string
	Admin     string // admin HTTP host:port
	exited    chan struct{}
	// binary overrides the daemon binary (plainBinary for memory measurements).
	binary string
	// noWaitReady makes start return as soon as the listeners are up, before shards load.
	noWaitReady bool
	// adminTLS, when set, is how to reach an HTTPS admin listener (admin.listener.security.protocol=SSL).
	adminTLS *tls.Config
	// env are KEY=value entries added to (and overriding) the test process's environment.
	env []string

	mu   sync.Mutex
	logs []map[string]any
}

// startPlainDaemon is startDaemon with the binary built without the race detector.
func startPlainDaemon(t testing.TB, sets ...string) *daemon {
	t.Helper()
	bin, err := plainBinary()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, DataDir: t.TempDir(), exited: make(chan struct{}), binary: bin}
	return d.start(sets...)
}

// startDaemon runs the binary on free loopback ports with a fresh data directory (unless one is
// given in sets as log.dirs) and waits for its "started" line.
func startDaemon(t testing.TB, sets ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, DataDir: t.TempDir(), exited: make(chan struct{})}
	return d.start(sets...)
}

func (d *daemon) start(sets ...string) *daemon {
	t := d.t
	t.Helper()
	args := []string{"serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0",
		"--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs=" + d.DataDir,
		"--set", "shutdown.timeout.ms=5000",
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	bin := binaryPath
	if d.binary != "" {
		bin = d.binary
	}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = append(daemonEnv(bin), d.env...)
	d.cmd.Stderr = os.Stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := d.cmd, make(chan struct{})
	d.exited = exited
	started := make(chan map[string]any, 1)
	go d.readLogs(out, started)
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Checked per process, before the kill, so that a race which ended this process
		// fails the test even when the test stopped it or never noticed it was gone.
		select {
		case <-exited:
			if cmd.ProcessState.ExitCode() == raceExitCode {
				t.Errorf("coordinatord (pid %d) %s", cmd.Process.Pid, exitReport(cmd.ProcessState))
			}
		default:
		}
		d.kill()
	})
	select {
	case line := <-started:
		d.Addr = strings.TrimPrefix(line["listeners"].([]any)[0].(string), "PLAINTEXT://")
		d.Listeners = map[string]string{}
		for _, l := range line["listeners"].([]any) {
			name, addr, _ := strings.Cut(l.(string), "://")
			d.Listeners[name] = addr
		}
		d.Admin = line["admin"].(string)
	case <-exited:
		t.Fatalf("coordinatord exited before starting: %s", exitReport(cmd.ProcessState))
	case <-time.After(30 * time.Second):
		t.Fatal("coordinatord did not start within 30s")
	}
	if !d.noWaitReady {
		d.waitReady()
	}
	return d
}

// waitReady polls /readyz until every shard is loaded.
func (d *daemon) waitReady() {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			d.t.Fatalf("coordinatord exited before it was ready: %s", exitReport(d.cmd.ProcessState))
		default:
		}
		resp, err := d.adminGet("/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Fatal("coordinatord not ready within 30s")
}

// adminGet asks the admin listener for a path, over HTTPS when the daemon serves it so.
func (d *daemon) adminGet(path string) (*http.Response, error) {
	if d.adminTLS == nil {
		return http.Get("http://" + d.Admin + path)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: d.adminTLS}, Timeout: 10 * time.Second}
	return client.Get("https://" + d.Admin + path)
}

func (d *daemon) readLogs(r io.Reader, started chan<- map[string]any) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue
		}
		d.mu.Lock()
		d.logs = append(d.logs, line)
		d.mu.Unlock()
		if line["msg"] == "coordinatord started" {
			started <- line
		}
	}
}

// allLogs returns every log line so far.
func (d *daemon) allLogs() []map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]map[string]any(nil), d.logs...)
}

// logged returns the log lines whose message is msg.
func (d *daemon) logged(msg string) []map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []map[string]any
	for _, l := range d.logs {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// waitLogged polls until a line with msg satisfying match appears.
func (d *daemon) waitLogged(msg string, match func(map[string]any) bool) map[string]any {
	d.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range d.logged(msg) {
			if match == nil || match(l) {
				return l
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-d.exited:
		d.t.Fatalf("no log line %q; coordinatord exited: %s", msg, exitReport(d.cmd.ProcessState))
	default:
	}
	d.t.Fatalf("no log line %q within 10s", msg)
	return nil
}

func (d *daemon) kill() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.exited
	}
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop() int {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.t.Fatal("coordinatord did not exit within 30s of SIGTERM")
	}
	return d.cmd.ProcessState.ExitCode()
}

// client returns a franz-go client seeded with the daemon.
func (d *daemon) client(opts ...kgo.Opt) *kgo.Client {
	d.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(d.Addr)}, opts...)...)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(cl.Close)
	return cl
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
