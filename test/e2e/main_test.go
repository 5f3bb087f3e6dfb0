// Package e2e runs coordinatord in gateway mode in front of a real Apache Kafka 4.4 broker and
// drives it with real clients. `make e2e` (test/e2e/run.sh) installs Java and Maven when
// missing, fetches the broker and runs it with E2E=1; without E2E the tests say how to run them
// and skip, since they need a JVM.
package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var (
	binaryPath string
	// upstreamAddr is the reference broker's listener; only the gateway may connect to it.
	upstreamAddr string
	skipReason   string
)

const kafkaScript = "../kafka/kafka.sh"

func TestMain(m *testing.M) {
	if os.Getenv("E2E") == "" {
		skipReason = "end-to-end tests need a Kafka 4.4 broker: run `make e2e` (or E2E=1 go test ./test/e2e)"
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

// run starts what the tests need, runs them and stops it again, whatever their outcome.
func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "coordinatord-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binaryPath = filepath.Join(dir, "coordinatord")
	build := exec.Command("go", "build", "-race", "-o", binaryPath, "../../cmd/coordinatord")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building coordinatord:", err)
		return 1
	}
	kafkaDir := filepath.Join(dir, "kafka")
	if d := os.Getenv("E2E_KAFKA_DIR"); d != "" {
		kafkaDir = d
	}
	// E2E_KAFKA_ADDR reuses a broker already running (started as startKafka does), to iterate
	// on one test without paying for a broker start each time.
	upstreamAddr = os.Getenv("E2E_KAFKA_ADDR")
	if upstreamAddr == "" {
		if upstreamAddr, err = startKafka(kafkaDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() {
			stop := exec.Command(kafkaScript, "stop", "--dir", kafkaDir)
			stop.Stdout, stop.Stderr = os.Stderr, os.Stderr
			stop.Run()
		}()
	}
	// The classic bytes capture runs its applications against the upstream on purpose.
	if os.Getenv("CAPTURE_CLASSICPROTO") != "" {
		return m.Run()
	}
	watch, err := watchUpstream(upstreamAddr, gatewayOrBroker(upstreamAddr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "watching the upstream's connections:", err)
		return 1
	}
	status := m.Run()
	if leaks := watch.Stop(); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL: clients reached the upstream around the gateway:")
		for _, l := range leaks {
			fmt.Fprintln(os.Stderr, "  "+l)
		}
		return 1
	}
	fmt.Fprintln(os.Stderr, "e2e: every connection the upstream accepted came from coordinatord, the broker or the test's own checks")
	return status
}

// startKafka starts the reference broker with streams groups switched off, so that every
// streams group the tests see can only have come from coordinatord.
func startKafka(dir string) (string, error) {
	cmd := exec.Command(kafkaScript, "start", "--dir", dir, "--no-topology-plugin",
		"--config", "group.coordinator.rebalance.protocols=classic,consumer")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return "", fmt.Errorf("E2E=1 but the reference broker cannot run here (java 17+ or mvn missing; test/e2e/run.sh installs them): %w", err)
	}
	if err != nil {
		return "", fmt.Errorf("starting the reference broker: %w", err)
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "KAFKA_ADDR="); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("kafka.sh start printed no KAFKA_ADDR")
}

func requireE2E(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}
