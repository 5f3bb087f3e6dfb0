package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Reading
		want int
	}{
		// 1M committed offsets: 31 MB live, 3 MB of it holding pointers (measured,
		// docs/benchmarks-storage.md). Scanning 3.5 MB would allow 11%; the bound keeps 50.
		{"mostly pointer-free state", Reading{Live: 31 * mib, Scan: 3 * mib, Stacks: mib / 8, Globals: mib / 4}, MinPercent},
		{"mostly pointers", Reading{Live: 100 * mib, Scan: 90 * mib, Stacks: mib, Globals: mib / 4}, 91},
		{"between the bounds", Reading{Live: 40 * mib, Scan: 28 * mib}, 70},
		{"only pointers", Reading{Live: 50 * mib, Scan: 50 * mib, Stacks: mib}, MaxPercent},
		{"small heap keeps the runtime's minimum", Reading{Live: 2 * mib, Scan: mib / 10}, MaxPercent},
		{"nothing measured yet", Reading{}, MaxPercent},
	} {
		if got := Percent(tc.r); got != tc.want {
			t.Errorf("%s: Percent(%+v) = %d, want %d", tc.name, tc.r, got, tc.want)
		}
	}
}

// The headroom actually in force: what go_gc_gogc_percent exports.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitGOGC collects until the pacer's cleanup (which runs after a collection, on another
// goroutine) has left GOGC at want.
func waitGOGC(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %d", gogc(), want)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

var keep []byte

// A heap that is mostly pointer-free data gets the smaller headroom once no load is running,
// and gets the runtime's back once that data is gone: the pacer re-reads the collector after
// every collection.
func TestPacerFollowsTheHeap(t *testing.T) {
	prior := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prior) })
	var loading atomic.Bool
	loading.Store(true)
	p := Start(func(string) string { return "" }, loading.Load)
	if p == nil {
		t.Fatal("Start with no GOGC in the environment did not pace")
	}
	t.Cleanup(p.Stop)

	keep = make([]byte, 64*mib)
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if got := gogc(); got != MaxPercent {
		t.Errorf("while loading, GOGC = %d, want the runtime's %d", got, MaxPercent)
	}
	loading.Store(false)
	waitGOGC(t, MinPercent)
	if p.Percent() != MinPercent {
		t.Errorf("Percent() = %d, want %d", p.Percent(), MinPercent)
	}

	keep = nil
	waitGOGC(t, MaxPercent)

	p.Stop()
	debug.SetGCPercent(77)
	keep = make([]byte, 64*mib)
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	keep = nil
	if got := gogc(); got != 77 {
		t.Errorf("after Stop, GOGC = %d: the pacer still sets it (want the 77 set after Stop)", got)
	}
}

// An operator who sets GOGC keeps it: no pacer, GOGC untouched.
func TestOperatorGOGCWins(t *testing.T) {
	prior := debug.SetGCPercent(150)
	t.Cleanup(func() { debug.SetGCPercent(prior) })
	if p := Start(func(k string) string {
		if k == "GOGC" {
			return "150"
		}
		return ""
	}, nil); p != nil {
		p.Stop()
		t.Fatal("Start paced although GOGC was set in the environment")
	}
	keep = make([]byte, 64*mib)
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	keep = nil
	if got := gogc(); got != 150 {
		t.Errorf("GOGC = %d, want the operator's 150", got)
	}
}
