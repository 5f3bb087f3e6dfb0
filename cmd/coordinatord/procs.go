package main

import (
	"os"
	"runtime"
	"strconv"
)

// schedulerProcs is the GOMAXPROCS the daemon runs with and why.
//
// A goroutine in fdatasync keeps its P: the runtime hands it to another thread only after
// sysmon has seen the same syscall on two of its ticks (20 µs at best, longer when sysmon
// itself waits for a core), and a sync of a few hundred µs usually ends before that. Under
// offset commits at full rate the journal is syncing most of the time, so a node of N Ps ran
// Go code on N-1 of them for most of it, and heartbeats of other groups waited for a P
// (docs/benchmarks-hotpath.md, "What a heartbeat waits for beside another group's commits").
// One P more than the runtime's choice gives the syncing thread a P of its own. The Kafka log
// backend syncs nothing locally on its hot path (only the rarely written metadata shard), so it
// keeps the runtime's choice, as does an operator's GOMAXPROCS.
//
// The extra P costs nothing in CPU per commit that measurement can see. At 8 committing
// clients it made the runtime look for work up to ~2 µs/op more often, but rounds were as full
// or fuller. With GOMAXPROCS=1, rounds carried 1.5 groups (docs/benchmarks-storage.md, "Where
// a commit's CPU goes at 8 clients, the extra P, and a 200 µs gathering bound").
func schedulerProcs(operatorSet, kafkaLog bool, runtimeChoice int) (procs int, why string) {
	switch {
	case operatorSet:
		return runtimeChoice, "GOMAXPROCS from the environment"
	case kafkaLog:
		return runtimeChoice, "the runtime's choice (log.backend=kafka)"
	}
	return runtimeChoice + 1, "one more than the runtime's choice, for the journal's fsyncs"
}

// setSchedulerProcs applies schedulerProcs before any shard starts. Setting GOMAXPROCS stops
// the runtime from following later changes of the container's CPU limit; a restart picks a
// new limit up.
func setSchedulerProcs(kafkaLog bool) (int, string) {
	// The runtime ignores a GOMAXPROCS that is not a positive number, so the daemon does too.
	n, err := strconv.Atoi(os.Getenv("GOMAXPROCS"))
	operatorSet := err == nil && n > 0
	procs, why := schedulerProcs(operatorSet, kafkaLog, runtime.GOMAXPROCS(0))
	if procs != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(procs)
	}
	return procs, why
}
