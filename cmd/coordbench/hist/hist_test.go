package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactQuantile is the nearest-rank quantile of sorted values: the ceil(q*n)-th smallest.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

func TestBucketsAreContiguousAndNarrow(t *testing.T) {
	prevHi := int64(-1)
	for i := 0; i < nBuckets; i++ {
		lo, hi := bounds(i)
		if lo > hi {
			t.Fatalf("bucket %d: lo %d > hi %d", i, lo, hi)
		}
		if lo < 0 { // past the int64 range: the layout's tail is unused
			break
		}
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if lo >= 2*sub && float64(hi-lo+1)/float64(lo) > 1.0/sub+1e-12 {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d of its start", i, lo, hi, sub)
		}
		if index(lo) != i || index(hi) != i {
			t.Fatalf("bucket %d [%d,%d]: index(lo)=%d index(hi)=%d", i, lo, hi, index(lo), index(hi))
		}
		prevHi = hi
		if hi == math.MaxInt64 {
			break
		}
	}
	if prevHi != math.MaxInt64 {
		t.Fatalf("buckets end at %d, not MaxInt64", prevHi)
	}
}

func TestSmallValuesAreExact(t *testing.T) {
	h := New()
	for v := int64(1); v <= 100; v++ {
		h.Record(v)
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 50}, {0.99, 99}, {0.999, 100}, {0.01, 1}, {0, 1}, {1, 100}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
	if h.Mean() != 50.5 {
		t.Errorf("Mean = %v, want 50.5", h.Mean())
	}
}

// The quantile is never below the exact nearest-rank value and at most 1/128 above it.
func TestQuantileWithinRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := New()
	vals := make([]int64, 200_000)
	for i := range vals {
		// log-normal-ish latencies from 10µs to ~1s, in ns
		v := int64(math.Exp(rng.NormFloat64()*1.5 + 12))
		vals[i] = v
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		want := exactQuantile(vals, q)
		got := h.Quantile(q)
		if got < want || float64(got-want) > float64(want)/sub {
			t.Errorf("Quantile(%v) = %d, exact %d: outside [exact, exact*(1+1/%d)]", q, got, want, sub)
		}
	}
	if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] {
		t.Errorf("min/max = %d/%d, want %d/%d", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
	}
}

func TestMergeEqualsRecordingEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all, a, b := New(), New(), New()
	for i := 0; i < 10_000; i++ {
		v := rng.Int64N(1 << 30)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	a.Merge(New()) // merging an empty histogram changes nothing
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("q%v: merged %d, direct %d", q, a.Quantile(q), all.Quantile(q))
		}
	}
	if a.Count() != all.Count() || a.Min() != all.Min() || a.Max() != all.Max() || a.Mean() != all.Mean() {
		t.Errorf("merged summary differs from direct")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := New()
	for _, v := range []int64{5, 300, 300, 70_000, 1 << 40, -3} {
		h.Record(v)
	}
	g, err := FromSnapshot(h.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []float64{0, 0.3, 0.5, 0.8, 1} {
		if g.Quantile(q) != h.Quantile(q) {
			t.Errorf("q%v: %d after round trip, %d before", q, g.Quantile(q), h.Quantile(q))
		}
	}
	if g.Min() != 0 || g.Max() != 1<<40 {
		t.Errorf("min/max %d/%d", g.Min(), g.Max())
	}
}

func TestFromSnapshotRejectsCorruption(t *testing.T) {
	if _, err := FromSnapshot(Snapshot{Buckets: [][2]uint64{{nBuckets, 1}}, Count: 1}); err == nil {
		t.Error("bucket index out of range accepted")
	}
	if _, err := FromSnapshot(Snapshot{Buckets: [][2]uint64{{3, 1}}, Count: 2}); err == nil {
		t.Error("count mismatch accepted")
	}
}

func TestEmpty(t *testing.T) {
	h := New()
	if h.Quantile(0.99) != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 || len(h.CDF()) != 0 {
		t.Error("empty histogram should report zeros")
	}
}

func TestCDFEndsAtOne(t *testing.T) {
	h := New()
	for v := int64(0); v < 5000; v += 7 {
		h.Record(v)
	}
	c := h.CDF()
	if c[len(c)-1].Fraction != 1 || c[len(c)-1].Value != h.Max() {
		t.Errorf("last CDF point %+v", c[len(c)-1])
	}
	for i := 1; i < len(c); i++ {
		if c[i].Value <= c[i-1].Value || c[i].Fraction <= c[i-1].Fraction {
			t.Fatalf("CDF not increasing at %d: %+v then %+v", i, c[i-1], c[i])
		}
	}
}
