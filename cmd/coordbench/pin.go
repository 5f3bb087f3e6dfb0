package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cpuPlan is where `coordbench gateway --cpus` puts each process, as CPU lists; a gateway
// is deployed on cores of its own, and on a shared machine the CPU it spends would otherwise
// come out of the upstream's throughput, so the ratio would measure CPU theft, not the hop.
// The direct target runs with the upstream and the load generator on the same CPUs as the
// gateway target does, so both give Kafka the same CPU.
type cpuPlan struct {
	upstream, loadgen, gateway []int
}

func (p cpuPlan) set() bool { return p.upstream != nil }

func (p cpuPlan) String() string {
	if !p.set() {
		return "shared (no pinning)"
	}
	return fmt.Sprintf("upstream on CPU %s, load generator on CPU %s, gateway on CPU %s",
		cpuList(p.upstream), cpuList(p.loadgen), cpuList(p.gateway))
}

// parseCPUPlan reads "upstream=0,loadgen=0,gateway=1"; a role's list may name several CPUs
// and ranges ("upstream=0,2-3,loadgen=..."): a part without "=" continues the role before it.
// Empty: no pinning.
func parseCPUPlan(s string) (cpuPlan, error) {
	var p cpuPlan
	if s == "" {
		return p, nil
	}
	roles := map[string]*[]int{"upstream": &p.upstream, "loadgen": &p.loadgen, "gateway": &p.gateway}
	var cur *[]int
	for _, part := range strings.Split(s, ",") {
		if role, list, ok := strings.Cut(part, "="); ok {
			dst, known := roles[role]
			if !known {
				return cpuPlan{}, fmt.Errorf("--cpus %q: unknown role %q (known: upstream, loadgen, gateway)", s, role)
			}
			if *dst != nil {
				return cpuPlan{}, fmt.Errorf("--cpus %q: %s given twice", s, role)
			}
			cur, part = dst, list
		}
		if cur == nil {
			return cpuPlan{}, fmt.Errorf("--cpus %q: want role=cpus,... first", s)
		}
		cpus, err := parseCPURange(part)
		if err != nil {
			return cpuPlan{}, fmt.Errorf("--cpus %q: %w", s, err)
		}
		*cur = append(*cur, cpus...)
	}
	for role, dst := range roles {
		if *dst == nil {
			return cpuPlan{}, fmt.Errorf("--cpus %q: no CPUs for %s (every role needs its set)", s, role)
		}
		slices.Sort(*dst)
		*dst = slices.Compact(*dst)
	}
	return p, nil
}

func parseCPURange(s string) ([]int, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := strconv.Atoi(lo)
	if err != nil || a < 0 {
		return nil, fmt.Errorf("%q is not a CPU number or range", s)
	}
	b := a
	if isRange {
		if b, err = strconv.Atoi(hi); err != nil || b < a {
			return nil, fmt.Errorf("%q is not a CPU range", s)
		}
	}
	var out []int
	for c := a; c <= b; c++ {
		out = append(out, c)
	}
	return out, nil
}

// cpuList is a CPU set in taskset's list form.
func cpuList(cpus []int) string {
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// pinProcess sets the CPU affinity of every thread of pid with taskset, then checks every
// thread's: a thread the process started while taskset walked its threads may have been
// cloned from one not yet pinned, so the walk is repeated until none differs.
func pinProcess(pid int, cpus []int) error {
	if _, err := exec.LookPath("taskset"); err != nil {
		return fmt.Errorf("--cpus needs taskset (util-linux): %w", err)
	}
	for try := 0; try < 5; try++ {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", cpuList(cpus), strconv.Itoa(pid)).CombinedOutput(); err != nil {
			return fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpuList(cpus), pid, err, bytes.TrimSpace(out))
		}
		stray, err := threadsNotOn(pid, cpus)
		if err != nil {
			return err
		}
		if stray == 0 {
			return nil
		}
	}
	return fmt.Errorf("pid %d: threads still off CPUs %s after 5 passes", pid, cpuList(cpus))
}

// threadsNotOn counts the threads of pid whose allowed CPUs are not exactly cpus.
func threadsNotOn(pid int, cpus []int) (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("pid %d: no threads in /proc (%v)", pid, err)
	}
	stray := 0
	for _, t := range tasks {
		got, err := allowedCPUs(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		if !slices.Equal(got, cpus) {
			stray++
		}
	}
	return stray, nil
}

// allowedCPUs reads Cpus_allowed_list from a /proc status file.
func allowedCPUs(statusFile string) ([]int, error) {
	b, err := os.ReadFile(statusFile)
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			var out []int
			for _, part := range strings.Split(strings.TrimSpace(v), ",") {
				cpus, err := parseCPURange(part)
				if err != nil {
					return nil, err
				}
				out = append(out, cpus...)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: no Cpus_allowed_list", statusFile)
}

// processCPUs is the CPU set of pid's main thread, to give a process back what it had.
func processCPUs(pid int) ([]int, error) {
	return allowedCPUs(fmt.Sprintf("/proc/%d/status", pid))
}
