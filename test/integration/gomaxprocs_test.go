package integration

import (
	"os"
	"runtime"
	"testing"
)

// runtimeProcs is the runtime's own GOMAXPROCS choice on this machine, read before `go test -cpu`
// could change it; valid as the daemon's choice only when the test runs without GOMAXPROCS.
var runtimeProcs = runtime.GOMAXPROCS(0)

// With the embedded log the daemon runs one P more than the runtime would choose, so a thread
// in the journal's fdatasync does not take a P from the goroutines answering heartbeats; an
// operator's GOMAXPROCS stands. /metrics shows what is in force.
func TestGOMAXPROCSSpareForFsyncs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, from string
		want      int
	}{
		{"GOMAXPROCS=1", "GOMAXPROCS from the environment", 1},
		{"GOMAXPROCS=", "one more than the runtime's choice, for the journal's fsyncs", runtimeProcs + 1}, // empty: not set
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Parallel()
			if tc.env == "GOMAXPROCS=" && os.Getenv("GOMAXPROCS") != "" {
				t.Skip("the test process runs with GOMAXPROCS, so the runtime's own choice is not known here")
			}
			d := &daemon{t: t, DataDir: t.TempDir(), exited: make(chan struct{}), env: []string{tc.env}}
			d.start()
			started := d.logged("coordinatord started")[0]
			if got := started["gomaxprocs_from"]; got != tc.from {
				t.Errorf("started line: gomaxprocs_from = %v, want %q", got, tc.from)
			}
			if got := started["gomaxprocs"]; got != float64(tc.want) {
				t.Errorf("started line: gomaxprocs = %v, want %d", got, tc.want)
			}
			if got := metricValue(t, d, "go_sched_gomaxprocs_threads"); got != float64(tc.want) {
				t.Errorf("go_sched_gomaxprocs_threads = %v, want %d", got, tc.want)
			}
		})
	}
}
