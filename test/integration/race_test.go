package integration

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// raceExitCode is the status a -race binary exits with when GORACE=halt_on_error=1 and the
// race detector has found a data race.
const raceExitCode = 66

// daemonEnv is the environment every exec of a coordinatord binary gets. For a -race build it
// makes the first data race end the process, so the test fails instead of passing with only a
// "WARNING: DATA RACE" on stderr.
func daemonEnv(bin string) []string {
	env := os.Environ()
	if isRaceBinary(bin) {
		env = append(env, "GORACE=halt_on_error=1")
	}
	return env
}

func isRaceBinary(bin string) bool {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// exitReport describes how a coordinatord process ended, naming the race detector when it was
// what stopped it.
func exitReport(ps *os.ProcessState) string {
	if ps == nil {
		return "still running"
	}
	if ps.ExitCode() == raceExitCode {
		return fmt.Sprintf("%v: the race detector halted it (GORACE=halt_on_error=1); see WARNING: DATA RACE on stderr above", ps)
	}
	return ps.String()
}

// failIfRaced fails the test when the race detector ended the process: a test that expects
// the binary to exit non-zero would otherwise take the race's exit for the failure it wanted.
func failIfRaced(t testing.TB, ps *os.ProcessState) {
	t.Helper()
	if ps != nil && ps.ExitCode() == raceExitCode {
		t.Fatalf("coordinatord %s", exitReport(ps))
	}
}

// The race-built daemons halt on their first data race; the plain one, built without the
// detector, is left alone. A race then shows as exit status 66, which the helpers name.
func TestRaceBuildDaemonsHaltOnFirstRace(t *testing.T) {
	t.Parallel()
	environ := func(d *daemon) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", d.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		return "\x00" + string(b)
	}
	const halt = "\x00GORACE=halt_on_error=1\x00"
	if env := environ(startDaemon(t)); !strings.Contains(env, halt) {
		t.Error("the -race daemon runs without GORACE=halt_on_error=1: a race would only be printed")
	}
	if env := environ(startPlainDaemon(t)); strings.Contains(env, halt) {
		t.Error("the daemon built without -race got GORACE=halt_on_error=1")
	}

	cmd := exec.Command("sh", "-c", "exit 66")
	cmd.Run()
	if got := exitReport(cmd.ProcessState); !strings.Contains(got, "exit status 66") || !strings.Contains(got, "race detector") {
		t.Errorf("exit status 66 is reported as %q, without naming the race detector", got)
	}
}
