package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// setupOnce runs a set-up script of the tree once per test binary and keeps the path it
// prints (a classpath, an interpreter): the first test that needs it pays for it, a failure
// fails every test that needs it.
type setupOnce struct {
	script, what string
	once         sync.Once
	out          string
	err          error
}

func (s *setupOnce) path(t *testing.T) string {
	t.Helper()
	s.once.Do(func() {
		var out, errb bytes.Buffer
		cmd := exec.Command(s.script)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if s.err = cmd.Run(); s.err != nil {
			s.err = fmt.Errorf("%s: %v\n%s", s.what, s.err, errb.String())
		}
		s.out = strings.TrimSpace(out.String())
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.out
}

// streamsBuild compiles the word-count application (test/e2e/streamsapp).
var streamsBuild = setupOnce{script: "streamsapp/build.sh", what: "building the word-count application"}

func wordCountClasspath(t *testing.T) string { return streamsBuild.path(t) }

// streamsApp is one instance of the word-count application, a JVM of its own.
type streamsApp struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *os.File // stderr and stdout, kept for a failure's report

	mu      sync.Mutex
	lines   []string
	state   string
	changed chan struct{}
	exited  chan struct{}
}

func startWordCount(t *testing.T, name, bootstrap, appID, in, out, protocol string, extra ...string) *streamsApp {
	t.Helper()
	return startWordCountIn(t, t.TempDir(), name, bootstrap, appID, in, out, protocol, extra...)
}

// startWordCountIn starts an instance on the state directory given, so that a restarted instance
// finds the task state its predecessor left there.
func startWordCountIn(t *testing.T, stateDir, name, bootstrap, appID, in, out, protocol string, extra ...string) *streamsApp {
	t.Helper()
	cp := wordCountClasspath(t)
	logf, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	a := &streamsApp{t: t, name: name, out: logf, changed: make(chan struct{}), exited: make(chan struct{})}
	a.cmd = exec.Command("java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "WordCount",
		bootstrap, appID, in, out, protocol, stateDir)
	a.cmd.Args = append(a.cmd.Args, extra...)
	a.cmd.Stderr = logf
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			a.mu.Lock()
			a.lines = append(a.lines, line)
			a.mu.Unlock()
			if s, ok := strings.CutPrefix(line, "STATE "); ok {
				a.mu.Lock()
				a.state = s
				close(a.changed)
				a.changed = make(chan struct{})
				a.mu.Unlock()
			}
		}
		a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		a.cmd.Process.Signal(syscall.SIGKILL)
		<-a.exited
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s output (last 3000 bytes):\n%s", name, tail(b, 3000))
		}
	})
	return a
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitState waits until the instance reports state (RUNNING, ...).
func (a *streamsApp) waitState(state string, within time.Duration) {
	a.t.Helper()
	deadline := time.After(within)
	for {
		a.mu.Lock()
		cur, ch := a.state, a.changed
		a.mu.Unlock()
		if cur == state {
			return
		}
		select {
		case <-ch:
		case <-a.exited:
			a.t.Fatalf("%s exited in state %q while waiting for %s", a.name, cur, state)
		case <-deadline:
			a.t.Fatalf("%s is in state %q after %s, want %s", a.name, cur, within, state)
		}
	}
}

// stop closes the instance as an operator would (it leaves the group), killing it if it hangs.
func (a *streamsApp) stop() {
	a.stdin.Close()
	select {
	case <-a.exited:
	case <-time.After(40 * time.Second):
		a.cmd.Process.Signal(syscall.SIGKILL)
		<-a.exited
	}
}

// wordCountInput is a deterministic batch of lines and the counts it adds.
func wordCountInput(batch, lines int) ([]string, map[string]int64) {
	words := []string{"kafka", "streams", "coordinator", "gateway", "group", "offset", "topology", "task"}
	counts := map[string]int64{}
	out := make([]string, 0, lines)
	for i := 0; i < lines; i++ {
		n := 1 + (i+batch)%4
		var line []string
		for j := 0; j < n; j++ {
			w := words[(i*7+j*3+batch)%len(words)]
			line = append(line, w)
			counts[w]++
		}
		out = append(out, strings.Join(line, " "))
	}
	return out, counts
}

func addCounts(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

// output is what the instance printed on standard output so far.
func (a *streamsApp) output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.lines, "\n")
}
