package soak

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binaryPath is the daemon under test. It is built without the race detector unless
// -soak.race is given: the RSS ceiling is about the server's own memory, and the race
// detector's shadow memory would hide (or fake) a leak.
var binaryPath string

func TestMain(m *testing.M) {
	flagsParse()
	dir, err := os.MkdirTemp("", "coordinatord-soak")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaryPath = filepath.Join(dir, "coordinatord")
	args := []string{"build", "-o", binaryPath}
	if *raceBinary {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../../cmd/coordinatord")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building coordinatord:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is the one coordinatord process a soak runs against. Unlike test/integration's
// harness it keeps no log lines but the ones that matter (errors, panics): a soak makes the
// server log every connection it closes, hundreds of thousands of lines.
type daemon struct {
	t       testing.TB
	cmd     *exec.Cmd
	DataDir string
	Addr    string
	Admin   string
	exited  chan struct{}
	sets    []string

	mu       sync.Mutex
	errLines []string
	warns    int
}

func startDaemon(t testing.TB, sets ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, DataDir: t.TempDir(), sets: sets}
	d.start()
	return d
}

func (d *daemon) start() {
	t := d.t
	t.Helper()
	args := []string{"serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0",
		"--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs=" + d.DataDir,
		"--set", "shutdown.timeout.ms=5000",
	}
	for _, s := range d.sets {
		args = append(args, "--set", s)
	}
	d.cmd = exec.Command(binaryPath, args...)
	if *raceBinary {
		// A data race ends the daemon, and so fails the soak, instead of being printed and
		// passed over.
		d.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	}
	var stderr bytes.Buffer
	d.cmd.Stderr = &limitedWriter{w: &stderr, left: 1 << 20}
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
	go func() {
		cmd.Wait()
		if stderr.Len() > 0 {
			d.mu.Lock()
			d.errLines = append(d.errLines, "stderr: "+stderr.String())
			d.mu.Unlock()
		}
		close(exited)
	}()
	t.Cleanup(func() {
		// Checked per process, before the kill, so that a race which ended this process
		// fails the soak even where the soak did not look at how it ended.
		select {
		case <-exited:
			if cmd.ProcessState.ExitCode() == raceExitCode {
				t.Errorf("coordinatord (pid %d) %s\n%.8000s", cmd.Process.Pid, exitReport(cmd.ProcessState), d.stderr())
			}
		default:
		}
		d.kill()
	})
	select {
	case line := <-started:
		d.Addr = strings.TrimPrefix(line["listeners"].([]any)[0].(string), "PLAINTEXT://")
		d.Admin = line["admin"].(string)
	case <-exited:
		t.Fatalf("coordinatord exited before starting: %s\n%v", exitReport(cmd.ProcessState), d.errors())
	case <-time.After(60 * time.Second):
		t.Fatal("coordinatord did not start within 60s")
	}
	deadline := time.Now().Add(60 * time.Second)
	for !d.ready() {
		if !d.alive() {
			t.Fatalf("coordinatord exited before it was ready: %s\n%v", exitReport(cmd.ProcessState), d.errors())
		}
		if time.Now().After(deadline) {
			t.Fatal("coordinatord not ready within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ready reports whether /readyz answers 200 (every shard loaded, none failed).
func (d *daemon) ready() bool {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + d.Admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (d *daemon) readLogs(r io.Reader, started chan<- map[string]any) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	sentStarted := false
	for sc.Scan() {
		b := sc.Bytes()
		switch {
		case bytes.Contains(b, []byte(`"level":"warn"`)):
			d.mu.Lock()
			d.warns++
			d.mu.Unlock()
			continue
		case bytes.Contains(b, []byte(`"level":"error"`)), bytes.Contains(b, []byte(`"level":"dpanic"`)),
			bytes.Contains(b, []byte(`"level":"panic"`)), bytes.Contains(b, []byte(`"level":"fatal"`)):
			d.mu.Lock()
			if len(d.errLines) < 50 {
				d.errLines = append(d.errLines, string(b))
			}
			d.mu.Unlock()
			continue
		}
		if sentStarted {
			continue
		}
		var line map[string]any
		if json.Unmarshal(b, &line) == nil && line["msg"] == "coordinatord started" {
			sentStarted = true
			started <- line
		}
	}
}

// stderr returns what the daemons wrote to stderr (a race report, a panic), once they exited.
func (d *daemon) stderr() string {
	var b strings.Builder
	for _, l := range d.errors() {
		if s, ok := strings.CutPrefix(l, "stderr: "); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}

// errors returns the error-level log lines (and stderr) seen so far.
func (d *daemon) errors() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.errLines...)
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// alive reports whether the process started last is still running.
func (d *daemon) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// rssBytes reads the daemon's resident set size from /proc; 0 when it is gone.
func (d *daemon) rssBytes() int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.pid()) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
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
	case <-time.After(60 * time.Second):
		d.t.Fatal("coordinatord did not exit within 60s of SIGTERM")
	}
	return d.cmd.ProcessState.ExitCode()
}

// limitedWriter keeps the first bytes written to it and drops the rest.
type limitedWriter struct {
	mu   sync.Mutex
	w    io.Writer
	left int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.left > 0 {
		n := min(len(p), l.left)
		l.w.Write(p[:n])
		l.left -= n
	}
	return len(p), nil
}

// raceExitCode is the status a -race binary exits with when GORACE=halt_on_error=1 and the
// race detector has found a data race.
const raceExitCode = 66

// exitReport describes how a coordinatord process ended, naming the race detector when it was
// what stopped it.
func exitReport(ps *os.ProcessState) string {
	if ps == nil {
		return "still running"
	}
	if ps.ExitCode() == raceExitCode {
		return fmt.Sprintf("%v: the race detector halted it (GORACE=halt_on_error=1); its stderr has the WARNING: DATA RACE report", ps)
	}
	return ps.String()
}
