// Package result is the JSON results file that `coordbench run` writes and `coordbench report`
// reads: one Measurement per (scenario, clients, target, round), so rounds can be compared and
// merged later.
package result

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/hist"
)

// Status of one measurement.
const (
	StatusOK          = "ok"
	StatusUnsupported = "not supported yet"
	StatusError       = "error"
)

// File is one run of coordbench.
type File struct {
	Started time.Time `json:"started"`
	Command string    `json:"command"`
	// Reproduce are the commands that redo this run, for the report.
	Reproduce []string      `json:"reproduce,omitempty"`
	Host      Host          `json:"host"`
	Settings  Settings      `json:"settings"`
	Targets   []Target      `json:"targets"`
	Results   []Measurement `json:"results"`
}

// Host describes the machine the numbers come from.
type Host struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go_version"`
	MemTotal  string `json:"mem_total,omitempty"`
	// /proc/loadavg's 1-minute figure when the run started and ended: other work on the
	// machine shows here.
	LoadStart float64 `json:"load_start,omitempty"`
	LoadEnd   float64 `json:"load_end,omitempty"`
}

// Settings are the run's knobs.
type Settings struct {
	Duration time.Duration `json:"duration_ns"`
	Warmup   time.Duration `json:"warmup_ns"`
	Rounds   int           `json:"rounds"`
}

// Target is one server under test.
type Target struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	PID  int    `json:"pid,omitempty"` // 0: not measured (e.g. in-process)
	// UpstreamPID is a process behind the target whose CPU is read in each window as well: a
	// gateway's upstream broker, which may spend more per request through the gateway than
	// when its clients come straight to it. 0: none.
	UpstreamPID int    `json:"upstream_pid,omitempty"`
	Kind        string `json:"kind,omitempty"`
	Version     string `json:"version,omitempty"`
	Note        string `json:"note,omitempty"`
}

// Measurement is one timed window of one scenario against one target.
type Measurement struct {
	Scenario string `json:"scenario"`
	Target   string `json:"target"`
	Clients  int    `json:"clients"`
	Round    int    `json:"round"`
	Status   string `json:"status"`
	Note     string `json:"note,omitempty"`
	// Rate is the aggregate rate (operations per second) the clients were paced at; 0: each
	// client in a closed loop, one request in flight.
	Rate float64 `json:"rate,omitempty"`

	Ops     uint64  `json:"ops"`
	Errors  uint64  `json:"errors"`
	Seconds float64 `json:"seconds"`
	// Latency of successful operations, nanoseconds.
	Latency hist.Snapshot `json:"latency"`
	// Server process use during the window; nil when not measured.
	CPUSeconds   *float64 `json:"cpu_seconds,omitempty"`
	PeakRSSBytes *int64   `json:"peak_rss_bytes,omitempty"`
	// The target's UpstreamPID's CPU seconds in the window; nil when not measured.
	UpstreamCPUSeconds *float64 `json:"upstream_cpu_seconds,omitempty"`
	// PeakRSSLifetime is set when the peak could not be reset before the window.
	PeakRSSLifetime bool `json:"peak_rss_lifetime,omitempty"`
	// The load generator's own CPU seconds in the window: it shares the machine.
	BenchCPUSeconds float64 `json:"bench_cpu_seconds"`
	// Scenario-specific figures, e.g. join_stable_ms; names end in their unit.
	Extras map[string]float64 `json:"extras,omitempty"`
	// API versions used, e.g. {"OffsetCommit": 9}.
	Versions map[string]int16 `json:"versions,omitempty"`
}

// Throughput is successful operations per second.
func (m *Measurement) Throughput() float64 {
	if m.Seconds <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Seconds
}

// Write stores f as indented JSON.
func Write(path string, f *File) error {
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results %s: %w", path, err)
	}
	return nil
}

// Read loads a results file.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse results %s: %w", path, err)
	}
	return &f, nil
}
