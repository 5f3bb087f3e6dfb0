package integration

import (
	"bufio"
	"bytes"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A gateway whose upstream cannot be reached retries for upstream.startup.timeout.ms with a
// progress line per attempt, then refuses to start with one line that says why; it never
// serves clients a cluster it cannot reach.
func TestGatewayRefusesToStartWithoutUpstream(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now

	cmd := exec.Command(binaryPath, "serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+t.TempDir(), "--set", "upstream.bootstrap.servers="+dead,
		"--set", "upstream.startup.timeout.ms=1500", "--set", "upstream.socket.connection.setup.timeout.ms=200")
	cmd.Env = daemonEnv(binaryPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("coordinatord kept running without an upstream")
	}
	failIfRaced(t, cmd.ProcessState)
	if err == nil {
		t.Fatal("coordinatord exited 0 without an upstream")
	}
	if !strings.Contains(stdout.String(), "upstream not reachable yet; retrying") {
		t.Errorf("no progress line while retrying; stdout:\n%s", stdout.String())
	}
	if strings.Contains(stdout.String(), "coordinatord started") {
		t.Error("coordinatord said it started although its upstream was unreachable")
	}
	if last := stderr.String(); !strings.Contains(last, "gateway mode") || !strings.Contains(last, dead) || !strings.Contains(last, "not reachable") {
		t.Errorf("the refusal does not name the mode, the address and the reason: %q", last)
	}
}

// A stop (SIGTERM) while the gateway still waits for its upstream is an operator's stop, as
// during a shard load: exit 0 and the usual last line, no error with a stack trace.
func TestGatewayStoppedWhileWaitingForUpstreamExitsCleanly(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	cmd := exec.Command(binaryPath, "serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+t.TempDir(), "--set", "upstream.bootstrap.servers="+dead,
		"--set", "upstream.startup.timeout.ms=600000", "--set", "upstream.socket.connection.setup.timeout.ms=200")
	cmd.Env = daemonEnv(binaryPath)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var log []string
	waitFor := func(msg string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("coordinatord exited before logging %q:\n%s\n%s", msg, strings.Join(log, "\n"), stderr.String())
				}
				log = append(log, l)
				if strings.Contains(l, msg) {
					return
				}
			case <-timeout:
				t.Fatalf("no %q within 30s:\n%s", msg, strings.Join(log, "\n"))
			}
		}
	}
	waitFor("upstream not reachable yet; retrying")
	cmd.Process.Signal(syscall.SIGTERM)
	waitFor(`"msg":"coordinatord stopped"`)
	for range lines {
	}
	err = cmd.Wait()
	failIfRaced(t, cmd.ProcessState)
	if err != nil || strings.Contains(strings.Join(log, "\n"), "stopped with an error") {
		t.Fatalf("stopped while waiting for the upstream: %v\n%s\n%s", err, strings.Join(log, "\n"), stderr.String())
	}
}
