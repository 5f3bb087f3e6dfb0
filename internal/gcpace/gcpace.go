// Package gcpace sizes the Go collector's headroom by the heap it has to scan rather than by the
// whole live heap.
//
// With GOGC=100 the heap grows to twice its live data between collections, and all of that
// headroom is resident under traffic. A collection's cost, though, is mostly marking: it follows
// the scannable part of the heap (objects holding pointers, stacks, globals), not the bytes of
// pointer-free objects such as the committed-offset entries, which are most of a busy
// coordinator's heap and are only marked, never scanned. Allocating as many bytes between
// collections as there are to scan keeps the collector's mark work per allocated byte where
// GOGC=100 puts it for a heap without such data, while the pointer-free state no longer doubles
// (docs/architecture.md, "Freed heap goes back after loads"; docs/benchmarks-storage.md,
// "Resident memory under traffic").
//
// After every collection the Pacer reads what the collector measured (runtime/metrics) and sets
// GOGC so that the next goal is the live heap plus that headroom, never more than GOGC=100 would
// give and never less than MinPercent of it. While the process says it is loading state, the
// runtime's default stands: a load is mostly garbage (decoded batches, slices grown as the state
// is built) that the process returns to the OS afterwards, and more collections during it would
// only lengthen a start. An operator's own GOGC is left alone.
package gcpace

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

const (
	// MaxPercent is the runtime's default: the Pacer only ever shrinks the headroom.
	MaxPercent = 100
	// MinPercent bounds how often a heap of mostly pointer-free data is collected: each cycle
	// also sweeps every span and has fixed stop-the-world phases, which the scannable size does
	// not measure.
	MinPercent = 50
	// MinHeadroom is the runtime's own minimum heap goal (4 MiB at GOGC=100): a small heap is
	// paced as the runtime paces it.
	MinHeadroom = 4 << 20
)

// Reading is what the collector measured in its last cycle.
type Reading struct {
	Live    uint64 // heap bytes marked live (/gc/heap/live:bytes)
	Scan    uint64 // scannable heap bytes (/gc/scan/heap:bytes)
	Stacks  uint64 // stack bytes scanned (/gc/scan/stack:bytes)
	Globals uint64 // scannable global bytes (/gc/scan/globals:bytes)
}

// Percent is the GOGC that makes the next heap goal the live heap plus a headroom of the
// scannable bytes (at least MinHeadroom), clamped to [MinPercent, MaxPercent]. The runtime's goal
// is live + (live + stacks + globals) × GOGC/100.
func Percent(r Reading) int {
	base := r.Live + r.Stacks + r.Globals
	if base == 0 {
		return MaxPercent
	}
	headroom := max(r.Scan+r.Stacks+r.Globals, MinHeadroom)
	p := (100*headroom + base - 1) / base // rounded up: never below the headroom wanted
	return int(min(max(p, MinPercent), MaxPercent))
}

var sampleNames = [...]string{"/gc/heap/live:bytes", "/gc/scan/heap:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// read takes a Reading from runtime/metrics.
func read(samples []metrics.Sample) Reading {
	metrics.Read(samples)
	v := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	return Reading{Live: v(0), Scan: v(1), Stacks: v(2), Globals: v(3)}
}

// Pacer re-sets GOGC after every collection until stopped.
type Pacer struct {
	mu      sync.Mutex
	stopped bool
	loading func() bool
	prior   int // GOGC before the Pacer started, restored by Stop
	current int
	samples []metrics.Sample
}

// Start begins pacing unless the operator set GOGC in the environment (then it returns nil and
// the runtime paces by that GOGC). getenv is os.Getenv outside tests. loading, if not nil, is
// asked after each collection; while it says true the headroom is MaxPercent's.
func Start(getenv func(string) string, loading func() bool) *Pacer {
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv("GOGC") != "" {
		return nil
	}
	p := &Pacer{current: MaxPercent, loading: loading, samples: make([]metrics.Sample, len(sampleNames))}
	for i, n := range sampleNames {
		p.samples[i].Name = n
	}
	p.prior = debug.SetGCPercent(MaxPercent)
	p.current = MaxPercent
	p.arm()
	return p
}

// sentinel is allocated once per collection; its cleanup runs after the collection that found
// it unreachable. It holds a pointer so the tiny allocator never packs it beside a live object
// (which would keep it, and the pacing, alive forever).
type sentinel struct{ _ *byte }

func (p *Pacer) arm() {
	runtime.AddCleanup(new(sentinel), (*Pacer).afterCollection, p)
}

// afterCollection runs on the runtime's cleanup goroutine after each collection.
func (p *Pacer) afterCollection() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	want := MaxPercent
	if p.loading == nil || !p.loading() {
		want = Percent(read(p.samples))
	}
	if want != p.current {
		debug.SetGCPercent(want)
		p.current = want
	}
	p.arm()
}

// Percent is the GOGC the Pacer set last.
func (p *Pacer) Percent() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}

// Stop ends the pacing and gives GOGC back its value from before Start. A nil Pacer (the
// operator's GOGC) is a no-op.
func (p *Pacer) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		debug.SetGCPercent(p.prior)
	}
}
