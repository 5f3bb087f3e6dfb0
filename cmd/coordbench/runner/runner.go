// Package runner times scenarios against targets. For each scenario and client count it warms
// every target up, then measures round after round, each round visiting every target in turn
// (A, B, C, A, B, C, ...), so a slow drift of the machine (thermal, other work) lands on every
// target alike instead of on whichever ran last.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/hist"
	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/coordinatord/coordinatord/cmd/coordbench/proc"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
	"github.com/coordinatord/coordinatord/cmd/coordbench/scenario"
)

// Config is one run.
type Config struct {
	Scenarios []scenario.Scenario
	Targets   []result.Target
	// Clients overrides every scenario's DefaultClients when non-empty.
	Clients  []int
	Duration time.Duration
	Warmup   time.Duration // per target, scenario and client count; 0 skips warm-up
	Rounds   int
	Log      io.Writer // progress lines; nil discards
	// MixedCommitsAt is scenario.Env.CommitAddr for every window.
	MixedCommitsAt string
	// Rate overrides the aggregate rate (operations per second) of paced scenarios
	// (scenario.Paced); 0 keeps each one's own. Closed-loop scenarios ignore it.
	Rate float64
}

// rateOf is the aggregate rate sc is paced at, 0 for a closed loop.
func rateOf(sc scenario.Scenario, override float64) float64 {
	p, ok := sc.(scenario.Paced)
	if !ok || p.Rate() <= 0 {
		return 0
	}
	if override > 0 {
		return override
	}
	return p.Rate()
}

// setupTimeout bounds a window's setup and teardown (connections, topics, a group settling).
const setupTimeout = 2 * time.Minute

// Run measures everything in cfg and returns one Measurement per (scenario, clients, target,
// round); a target that lacks a scenario's APIs gets one "not supported yet" entry per client
// count instead.
func Run(ctx context.Context, cfg Config) ([]result.Measurement, error) {
	if cfg.Rounds < 1 {
		return nil, fmt.Errorf("rounds must be at least 1, got %d", cfg.Rounds)
	}
	if cfg.Duration <= 0 {
		return nil, fmt.Errorf("duration must be positive, got %s", cfg.Duration)
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	var out []result.Measurement
	for _, sc := range cfg.Scenarios {
		levels := cfg.Clients
		if len(levels) == 0 {
			levels = sc.DefaultClients()
		}
		var live []result.Target
		for _, t := range cfg.Targets {
			missing, err := check(ctx, t, sc)
			switch {
			case err != nil:
				fmt.Fprintf(logw, "%-18s %-13s cannot check support: %v\n", sc.Name(), t.Name, err)
				for _, n := range levels {
					out = append(out, result.Measurement{Scenario: sc.Name(), Target: t.Name, Clients: n,
						Status: result.StatusError, Note: err.Error()})
				}
			case len(missing) > 0:
				note := "lacks " + strings.Join(missing, ", ")
				fmt.Fprintf(logw, "%-18s %-13s not supported yet: %s\n", sc.Name(), t.Name, note)
				for _, n := range levels {
					out = append(out, result.Measurement{Scenario: sc.Name(), Target: t.Name, Clients: n,
						Status: result.StatusUnsupported, Note: note})
				}
			default:
				live = append(live, t)
			}
		}
		rate := rateOf(sc, cfg.Rate)
		for _, n := range levels {
			if cfg.Warmup > 0 {
				for _, t := range live {
					m := window(ctx, sc, t, n, cfg.Warmup, 0, cfg.MixedCommitsAt, rate)
					fmt.Fprintf(logw, "%-18s %-13s clients=%-3d warm-up  %s\n", sc.Name(), t.Name, n, line(&m))
				}
			}
			for r := 1; r <= cfg.Rounds; r++ {
				for _, t := range live {
					if ctx.Err() != nil {
						return out, ctx.Err()
					}
					m := window(ctx, sc, t, n, cfg.Duration, r, cfg.MixedCommitsAt, rate)
					fmt.Fprintf(logw, "%-18s %-13s clients=%-3d round %d  %s\n", sc.Name(), t.Name, n, r, line(&m))
					out = append(out, m)
				}
			}
		}
	}
	return out, nil
}

// check lists the APIs of sc that t does not advertise.
func check(ctx context.Context, t result.Target, sc scenario.Scenario) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := kconn.Dial(ctx, t.Addr, "coordbench-check")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return scenario.Missing(c, sc.Needs()), nil
}

func line(m *result.Measurement) string {
	if m.Status != result.StatusOK {
		return m.Status + ": " + m.Note
	}
	h, _ := hist.FromSnapshot(m.Latency)
	s := fmt.Sprintf("%9.0f ops/s  p50 %-9s p99 %-9s p999 %-9s errors %d", m.Throughput(),
		FormatNanos(h.Quantile(0.5)), FormatNanos(h.Quantile(0.99)), FormatNanos(h.Quantile(0.999)), m.Errors)
	if m.CPUSeconds != nil {
		s += fmt.Sprintf("  cpu %.2fs", *m.CPUSeconds)
	}
	names := make([]string, 0, len(m.Extras))
	for k := range m.Extras {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s += fmt.Sprintf("  %s %.1f", k, m.Extras[k])
	}
	return s
}

// FormatNanos prints a latency with three significant digits.
func FormatNanos(ns int64) string {
	d := float64(ns)
	switch {
	case d >= 1e9:
		return fmt.Sprintf("%.3gs", d/1e9)
	case d >= 1e6:
		return fmt.Sprintf("%.3gms", d/1e6)
	default:
		return fmt.Sprintf("%.3gµs", d/1e3)
	}
}

// window sets up, times and tears down one window of sc against t with n clients, each in a
// closed loop (rate 0) or paced so that together they send rate operations per second.
func window(ctx context.Context, sc scenario.Scenario, t result.Target, n int, d time.Duration, round int, commitAddr string, rate float64) result.Measurement {
	m := result.Measurement{Scenario: sc.Name(), Target: t.Name, Clients: n, Round: round, Status: result.StatusOK, Rate: rate}
	env := &scenario.Env{Target: t.Name, Addr: t.Addr, CommitAddr: commitAddr, Clients: n, Info: &scenario.Info{},
		Tag: fmt.Sprintf("coordbench-%s-r%d-%d", t.Name, round, time.Now().UnixNano())}
	fail := func(what string, err error) result.Measurement {
		m.Status, m.Note = result.StatusError, fmt.Sprintf("%s: %v", what, err)
		return m
	}
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	inst, err := sc.Setup(sctx, env)
	cancel()
	if err != nil {
		return fail("setup", err)
	}

	self := os.Getpid()
	var before proc.Stat
	var measured bool
	if t.PID > 0 {
		if err := proc.ResetPeak(t.PID); err != nil {
			m.PeakRSSLifetime = true
		}
		if before, err = proc.Read(t.PID); err == nil {
			measured = true
		}
	}
	var upBefore proc.Stat
	upMeasured := false
	if t.UpstreamPID > 0 {
		if upBefore, err = proc.Read(t.UpstreamPID); err == nil {
			upMeasured = true
		}
	}
	selfBefore, _ := proc.Read(self)

	hs := make([]*hist.Histogram, n)
	ops := make([]uint64, n)
	errs := make([]uint64, n)
	firstErr := make([]error, n)
	behind := make([]uint64, n) // paced operations sent at once, their client behind its schedule
	start := time.Now()
	end := start.Add(d)
	wctx, wcancel := context.WithDeadline(ctx, end.Add(30*time.Second)) // an op in flight at the end may finish
	var wg sync.WaitGroup
	for i := range n {
		hs[i] = hist.New()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pace *pacer
			if rate > 0 {
				pace = newPacer(start, rate, i, n, paceMaxLag)
			}
			for time.Now().Before(end) {
				if pace != nil {
					now := time.Now()
					w := pace.wait(now)
					if !now.Add(w).Before(end) {
						return
					}
					if w == 0 {
						behind[i]++
					}
					time.Sleep(w)
				}
				t0 := time.Now()
				err := inst.Op(wctx, i)
				el := time.Since(t0)
				if err != nil {
					errs[i]++
					if firstErr[i] == nil {
						firstErr[i] = err
					}
					if errors.Is(err, kconn.ErrBroken) || wctx.Err() != nil {
						return
					}
					continue
				}
				ops[i]++
				hs[i].RecordDuration(el)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	wcancel()

	if measured {
		if after, err := proc.Read(t.PID); err == nil {
			cpu := after.CPUSeconds - before.CPUSeconds
			rss := after.PeakRSSBytes
			m.CPUSeconds, m.PeakRSSBytes = &cpu, &rss
		}
	}
	if upMeasured {
		if after, err := proc.Read(t.UpstreamPID); err == nil {
			cpu := after.CPUSeconds - upBefore.CPUSeconds
			m.UpstreamCPUSeconds = &cpu
		}
	}
	if selfAfter, err := proc.Read(self); err == nil {
		m.BenchCPUSeconds = selfAfter.CPUSeconds - selfBefore.CPUSeconds
	}

	all := hist.New()
	for i := range n {
		all.Merge(hs[i])
		m.Ops += ops[i]
		m.Errors += errs[i]
	}
	m.Latency = all.Snapshot()
	m.Seconds = elapsed.Seconds()
	if rate > 0 && m.Ops+m.Errors > 0 {
		// How even the arrivals were: sleeps shorter than the runtime's timer granularity (about
		// a millisecond when idle) end late, and the client then sends its next operations at
		// once, so at a high rate per client the server sees them in short bursts.
		var late uint64
		for _, b := range behind {
			late += b
		}
		env.Info.Extra("sent_behind_schedule_pct", 100*float64(late)/float64(m.Ops+m.Errors))
	}
	for _, e := range firstErr {
		if e != nil {
			m.Note = "first error: " + e.Error()
			break
		}
	}

	tctx, tcancel := context.WithTimeout(ctx, setupTimeout)
	err = inst.Teardown(tctx)
	tcancel()
	m.Extras, m.Versions = env.Info.Extras, env.Info.Versions
	if err != nil {
		return fail("teardown", err)
	}
	if m.Ops == 0 {
		m.Status = result.StatusError
	}
	return m
}
