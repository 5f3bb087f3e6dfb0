package segment

import (
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/prometheus/client_golang/prometheus"
)

// Issue 10, defect 12: fsync latency was not observable. Every fsync of an append (group commit)
// and of the directory while a shard log is created is counted in coordinatord_log_fsync_seconds.
func TestFsyncLatencyIsObserved(t *testing.T) {
	e := newMemEnv(t)
	reg := prometheus.NewRegistry()
	e.opts.FS = NewMetrics(reg).FS(e.mem)
	o := e.open(0)
	defer o.close(t)
	o.load(t)
	count := func(target string) uint64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "coordinatord_log_fsync_seconds" && m.GetLabel()[0].GetValue() == target {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
		return 0
	}
	dirs, files := count("dir"), count("file")
	if dirs == 0 || files == 0 {
		t.Fatalf("creating a shard log observed %d directory and %d file fsyncs, want both > 0", dirs, files)
	}
	last, err := o.log.Append([]log.Record{{Key: []byte("k"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	o.rec.waitDurable(t, last)
	if got := count("file"); got <= files {
		t.Fatalf("a durable append observed no file fsync (%d before, %d after)", files, got)
	}
}

// The size of every journal round (write groups per journal fsync) is observed.
func TestJournalRoundSizeIsObserved(t *testing.T) {
	e := newMemEnv(t)
	reg := prometheus.NewRegistry()
	e.opts.RoundObserver = NewMetrics(reg).ObserveRound
	o := e.open(0)
	defer o.close(t)
	o.load(t)
	o.rec.waitDurable(t, o.mustAppend(t, rec("k", "v")))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "coordinatord_log_journal_round_groups" {
			if h := mf.GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 1 {
				t.Fatalf("rounds %d, groups %v; want one round of one group", h.GetSampleCount(), h.GetSampleSum())
			}
			return
		}
	}
	t.Fatal("coordinatord_log_journal_round_groups not registered")
}
