package integration

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The process sets GOGC itself (internal/gcpace) unless the operator did: with GOGC in the
// environment it says so at start and the collector keeps the operator's value through the
// collections after the start (the forced one that returns the load's heap among them); without,
// it paces within [50, 100] (a heap of a few MB gets about the runtime's 4 MiB of headroom).
func TestGCPacingLeavesOperatorGOGC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, pacing  string
		lowest, most int
	}{
		{"GOGC=80", "GOGC from the environment", 80, 80},
		{"GOGC=", "headroom of the scannable heap", 50, 100}, // empty: not set, whatever the test runs with
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Parallel()
			d := &daemon{t: t, DataDir: t.TempDir(), exited: make(chan struct{}), env: []string{tc.env}}
			d.start("log.level=debug")
			if got := d.logged("coordinatord started")[0]["gc_pacing"]; got != tc.pacing {
				t.Errorf("started line: gc_pacing = %v, want %q", got, tc.pacing)
			}
			d.waitLogged("returned the heap freed by shard loads to the OS", nil)
			for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if got := gogcPercent(t, d); got < tc.lowest || got > tc.most {
					t.Fatalf("go_gc_gogc_percent = %d, want %d-%d", got, tc.lowest, tc.most)
				}
			}
		})
	}
}

func gogcPercent(t *testing.T, d *daemon) int {
	t.Helper()
	resp, err := d.adminGet("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_gc_gogc_percent "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("go_gc_gogc_percent %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("/metrics has no go_gc_gogc_percent")
	return 0
}
