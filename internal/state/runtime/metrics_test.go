package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/prometheus/client_golang/prometheus"
)

// Issue 10, defect 12: inbox depth, durable lag and the size of each appended batch were not
// observable. They are, per shard, and the gauges follow the shard's state.
func TestShardGaugesAndBatchSizes(t *testing.T) {
	b := memlog.New()
	reg := prometheus.NewRegistry()
	s := New(Options[*counters]{Shard: 3, New: newCounters, Backend: b, Metrics: NewMetrics(reg)})
	s.Start()
	t.Cleanup(func() { s.Close(context.Background()) })
	waitState(t, s, StateActive)
	ctx := context.Background()
	gauge := func(name string, labels ...string) float64 {
		t.Helper()
		return gatheredAll(t, reg, name, labels...)
	}

	// Inbox depth: hold the shard goroutine inside an operation and queue reads behind it.
	release := make(chan struct{})
	inside := make(chan struct{})
	go s.Write(ctx, func(*Ctx[*counters], *counters) Result { close(inside); <-release; return Result{} })
	<-inside
	const queued = 5
	done := make(chan struct{}, queued)
	for range queued {
		go func() { s.Read(ctx, get("a")); done <- struct{}{} }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for gauge("coordinatord_shard_inbox_depth", "kind", "group", "shard", "3", "lane", "normal") != queued {
		if time.Now().After(deadline) {
			t.Fatalf("inbox depth %v, want %d", gauge("coordinatord_shard_inbox_depth", "kind", "group", "shard", "3", "lane", "normal"), queued)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range queued {
		<-done
	}
	if got := gauge("coordinatord_shard_inbox_depth", "kind", "group", "shard", "3", "lane", "normal"); got != 0 {
		t.Fatalf("inbox depth %v after draining, want 0", got)
	}

	// Durable lag and batch size: a two-record batch waits on a held fsync.
	b.Hold(true)
	answered := make(chan error, 1)
	recs := []log.Record{setRecord("a", 1), setRecord("bb", 2)}
	size := len(recs[0].Key) + len(recs[0].Value) + len(recs[1].Key) + len(recs[1].Value)
	go func() {
		_, err := s.Write(ctx, func(*Ctx[*counters], *counters) Result { return Result{Records: recs} })
		answered <- err
	}()
	for b.Pending(3) == 0 {
		time.Sleep(time.Millisecond)
	}
	if got := gauge("coordinatord_shard_durable_lag_records", "shard", "3"); got != 2 {
		t.Fatalf("durable lag %v with two records waiting, want 2", got)
	}
	b.Release(3)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if got := gauge("coordinatord_shard_durable_lag_records", "shard", "3"); got != 0 {
		t.Fatalf("durable lag %v once durable, want 0", got)
	}
	if got := gauge("coordinatord_shard_append_batch_records_sum"); got != 2 {
		t.Fatalf("batch records sum %v, want 2", got)
	}
	if got := gauge("coordinatord_shard_append_batch_bytes_sum"); got != float64(size) {
		t.Fatalf("batch bytes sum %v, want %d", got, size)
	}
	if got := gauge("coordinatord_shard_append_batch_records_count"); got != 1 {
		t.Fatalf("batch count %v, want 1", got)
	}
}

// gatheredAll is the value of the series name (a counter, gauge, or a histogram's _sum or
// _count) whose labels include every name/value pair given.
func gatheredAll(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		base, part := mf.GetName(), ""
		switch name {
		case base:
		case base + "_sum":
			part = "sum"
		case base + "_count":
			part = "count"
		default:
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			switch {
			case part == "sum":
				return m.GetHistogram().GetSampleSum()
			case part == "count":
				return float64(m.GetHistogram().GetSampleCount())
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			default:
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
