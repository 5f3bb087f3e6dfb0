// Package proc reads a server process's resource use from Linux /proc: CPU seconds from
// /proc/PID/stat and peak resident memory (VmHWM) from /proc/PID/status. Peak RSS can be reset
// per measurement window by writing 5 to /proc/PID/clear_refs (Linux 4.0+, needs the same user
// or root); when that is refused the peak is the process's lifetime peak and Sample says so.
package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat. Linux fixes it at 100 on
// every architecture Go supports (sysconf(_SC_CLK_TCK) is not reachable without cgo).
const ClockTicks = 100

// Stat is one reading.
type Stat struct {
	CPUSeconds   float64 // user + system, all threads, since the process started
	PeakRSSBytes int64   // VmHWM
}

// Read returns the current counters of pid.
func Read(pid int) (Stat, error) {
	cpu, err := cpuSeconds(pid)
	if err != nil {
		return Stat{}, err
	}
	rss, err := peakRSS(pid)
	if err != nil {
		return Stat{}, err
	}
	return Stat{CPUSeconds: cpu, PeakRSSBytes: rss}, nil
}

func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu of pid %d: %w", pid, err)
	}
	return parseStatCPU(b)
}

// parseStatCPU takes utime and stime (fields 14 and 15) from a /proc/PID/stat line. The command
// name (field 2) is in parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc stat: no ')' in %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc stat: %d fields after the name", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc stat utime %q stime %q", f[11], f[12])
	}
	return float64(ut+st) / ClockTicks, nil
}

func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	return parseVmHWM(b)
}

// parseVmHWM reads the "VmHWM:   1234 kB" line of /proc/PID/status.
func parseVmHWM(b []byte) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("parse VmHWM line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse VmHWM line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmHWM line in /proc status")
}

// ResetPeak sets pid's VmHWM back to its current RSS, so the next reading is the peak of the
// window that follows.
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
