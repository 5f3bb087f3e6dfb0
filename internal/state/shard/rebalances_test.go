package shard

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type metricsHarness struct {
	t   *testing.T
	b   *memlog.Backend
	set *Set
	reg *prometheus.Registry
	gm  *GroupMetrics
}

func newMetricsHarness(t *testing.T, b *memlog.Backend) *metricsHarness {
	h := &metricsHarness{t: t, b: b, reg: prometheus.NewRegistry()}
	h.gm = NewGroupMetrics(h.reg)
	h.set = NewSet(SetOptions{Count: 1, Backend: b, GroupMetrics: h.gm})
	h.set.Start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.set.WaitReady(ctx)
	t.Cleanup(func() { h.set.Close(context.Background()) })
	return h
}

// write appends records through the shard as an operation would, waiting until durable.
func (h *metricsHarness) write(recs ...log.Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := h.set.Shard(0).Write(ctx, func(*runtime.Ctx[*Machine], *Machine) runtime.Result {
		return runtime.Result{Records: recs}
	})
	return err
}

func (h *metricsHarness) history(group string) []Rebalance {
	v, err := h.set.Shard(0).Read(context.Background(), RecentRebalancesOf(group))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.([]Rebalance)
}

func classicGen(id string, gen int32, state classic.GroupState, members ...string) log.Record {
	g := &classic.Group{ID: id, Generation: gen, State: state, ProtocolType: "consumer"}
	for _, m := range members {
		// Long timeouts: a reload re-arms the members' timers, which must not fire mid-test.
		g.Members = append(g.Members, &classic.Member{ID: m, SessionTimeoutMs: 3_600_000, RebalanceTimeout: 3_600_000})
	}
	return g.Record()
}

// A rebalance is counted and listed once its records are durable, with what changed; records
// that rewrite a group without a new generation are not rebalances.
func TestRebalancesCountedWithCause(t *testing.T) {
	h := newMetricsHarness(t, memlog.New())
	steps := []log.Record{
		// A new group's first record already lists its first members, joining generation 1.
		classicGen("g", 0, classic.PreparingRebalance, "a"),
		classicGen("g", 0, classic.PreparingRebalance, "a", "b"),
		classicGen("g", 1, classic.CompletingRebalance, "a", "b"),
		classicGen("g", 1, classic.Stable, "a", "b"),
		classicGen("g", 2, classic.CompletingRebalance, "a"),
		classicGen("g", 3, classic.CompletingRebalance, "a"),
		consumer.GroupMetadataRecord("c", 1, 7),
		consumer.GroupMetadataRecord("c", 2, 8),
	}
	for _, r := range steps {
		if err := h.write(r); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.rebalances("classic"); n != 3 {
		t.Errorf("classic rebalances = %v, want 3", n)
	}
	if n := h.rebalances("consumer"); n != 2 {
		t.Errorf("consumer rebalances = %v, want 2", n)
	}
	got := h.history("g")
	want := []struct {
		epoch int32
		cause string
	}{{1, "2 member(s) joined"}, {2, "1 member(s) left"}, {3, "members rejoined"}}
	if len(got) != len(want) {
		t.Fatalf("history %+v, want %d entries", got, len(want))
	}
	for i, w := range want {
		if got[i].Epoch != w.epoch || got[i].Cause != w.cause || got[i].At.IsZero() {
			t.Errorf("history[%d] = %+v, want epoch %d cause %q", i, got[i], w.epoch, w.cause)
		}
	}
	if c := h.history("c"); len(c) != 2 || !strings.HasPrefix(c[0].Cause, "group created") || c[1].Cause != "topic metadata changed" {
		t.Errorf("consumer history %+v", c)
	}

	// Deleting a group drops its history, so the ledger holds only live groups.
	if err := h.write(log.Record{Key: classicGen("g", 0, classic.Empty).Key}); err != nil {
		t.Fatal(err)
	}
	if g := h.history("g"); len(g) != 0 {
		t.Errorf("history of a deleted group: %+v", g)
	}
}

// The history is bounded per group.
func TestRebalanceHistoryBounded(t *testing.T) {
	h := newMetricsHarness(t, memlog.New())
	for gen := int32(0); gen < 3*RecentRebalances; gen++ {
		if err := h.write(classicGen("g", gen, classic.CompletingRebalance, "a")); err != nil {
			t.Fatal(err)
		}
	}
	got := h.history("g")
	if len(got) != RecentRebalances || got[len(got)-1].Epoch != 3*RecentRebalances-1 {
		t.Fatalf("history has %d entries ending at %+v, want the last %d", len(got), got[len(got)-1], RecentRebalances)
	}
}

// A bump whose records are not durable yet is not counted; one whose write was lost never is;
// reloading the log does not count its history again.
func TestRebalancesOnlyDurableAndNotOnLoad(t *testing.T) {
	b := memlog.New()
	h := newMetricsHarness(t, b)
	if err := h.write(classicGen("g", 1, classic.CompletingRebalance, "a")); err != nil {
		t.Fatal(err)
	}
	b.Hold(true)
	done := make(chan error, 1)
	go func() { done <- h.write(classicGen("g", 2, classic.CompletingRebalance, "a", "b")) }()
	for b.Pending(0) == 0 {
		time.Sleep(time.Millisecond)
	}
	if n := h.rebalances("classic"); n != 1 {
		t.Errorf("rebalances while the bump is not durable = %v, want 1", n)
	}
	b.Lose(0, errors.New("disk gone"))
	if err := <-done; !errors.Is(err, runtime.ErrNotDurable) {
		t.Fatalf("lost write answered %v", err)
	}
	b.Hold(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.set.WaitReady(ctx)
	for h.set.Shard(0).State() != runtime.StateActive {
		time.Sleep(time.Millisecond)
	}
	if err := h.write(classicGen("g", 2, classic.CompletingRebalance, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if n := h.rebalances("classic"); n != 2 {
		t.Errorf("rebalances after a lost bump, a reload and a durable bump = %v, want 2", n)
	}
	if got := h.history("g"); len(got) != 2 || got[1].Cause != "2 member(s) joined" {
		t.Errorf("history %+v: the lost bump must not show, the durable one compares with generation 1", got)
	}
	h.set.Close(context.Background())

	again := newMetricsHarness(t, b)
	if n := again.rebalances("classic"); n != 0 {
		t.Errorf("loading a log counted %v rebalances", n)
	}
}

// coordinatord_groups counts groups by type and Kafka's state name, 0 for states no group is
// in, and a group with only committed offsets as an Empty classic group.
func TestGroupsGauge(t *testing.T) {
	h := newMetricsHarness(t, memlog.New())
	if err := h.write(classicGen("a", 1, classic.Stable, "m"), classicGen("b", 1, classic.Stable, "m"),
		classicGen("c", 2, classic.PreparingRebalance, "m"), consumer.GroupMetadataRecord("d", 1, 0)); err != nil {
		t.Fatal(err)
	}
	want := `classic CompletingRebalance 0
classic Dead 0
classic Empty 0
classic PreparingRebalance 1
classic Stable 2
consumer Assigning 0
consumer Empty 1
consumer Reconciling 0
consumer Stable 0
streams Assigning 0
streams Empty 0
streams NotReady 0
streams Reconciling 0
streams Stable 0
`
	if got := h.groups(); got != want {
		t.Errorf("coordinatord_groups:\n%s\nwant:\n%s", got, want)
	}
}

func (h *metricsHarness) rebalances(typ string) float64 {
	var m dto.Metric
	if err := h.gm.rebalances.WithLabelValues(typ).Write(&m); err != nil {
		h.t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// groups renders the coordinatord_groups series as "type state value" lines, sorted.
func (h *metricsHarness) groups() string {
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		if mf.GetName() != "coordinatord_groups" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			lines = append(lines, fmt.Sprintf("%s %s %v\n", l["type"], l["state"], m.GetGauge().GetValue()))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}

// The transaction-age series name the oldest open transaction overall and, for the
// OldestTxnGroups groups holding the oldest ones, per group; a shard full of open
// transactions does not grow the scrape past that.
func TestTxnAgeSeriesAreBoundedAndOldestFirst(t *testing.T) {
	gm := NewGroupMetrics(nil)
	now := time.UnixMilli(100_000)
	perShard := []map[string]int64{{}, {}}
	for i := range 3 * OldestTxnGroups {
		perShard[i%2][fmt.Sprintf("g%02d", i)] = int64(50_000 + 1000*i)
	}
	ch := make(chan prometheus.Metric, 100)
	gm.collectTxnAges(ch, perShard, now)
	close(ch)
	overall, perGroup := -1.0, map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		if len(d.GetLabel()) == 0 {
			overall = d.GetGauge().GetValue()
			continue
		}
		perGroup[d.GetLabel()[0].GetValue()] = d.GetGauge().GetValue()
	}
	if overall != 50 {
		t.Errorf("oldest open transaction age = %v s, want 50", overall)
	}
	if len(perGroup) != OldestTxnGroups {
		t.Fatalf("%d groups have a series, want %d: %v", len(perGroup), OldestTxnGroups, perGroup)
	}
	for i := range OldestTxnGroups {
		g := fmt.Sprintf("g%02d", i)
		if want := float64(50 - i); perGroup[g] != want {
			t.Errorf("age of %s = %v, want %v (all: %v)", g, perGroup[g], want, perGroup)
		}
	}

	ch = make(chan prometheus.Metric, 1)
	gm.collectTxnAges(ch, []map[string]int64{{}}, now)
	close(ch)
	var d dto.Metric
	if err := (<-ch).Write(&d); err != nil || d.GetGauge().GetValue() != 0 {
		t.Errorf("with no open transaction the age is %v (%v), want 0", d.GetGauge().GetValue(), err)
	}
}
