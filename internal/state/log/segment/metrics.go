package segment

import (
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the segment log's series. They are taken at the FS seam, so the log's code needs
// no hooks: every fsync the log makes passes through File.Sync or FS.SyncDir.
type Metrics struct {
	fsync  *prometheus.HistogramVec
	rounds prometheus.Histogram
}

// NewMetrics creates the series and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		fsync: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "coordinatord_log_fsync_seconds",
			Help: "Time one fsync of the shard logs took, by target: file (fdatasync of a segment: group commits, rolls, compaction output) or dir (a directory's entries).",
			// From a page-cache no-op (tens of µs) to a stalled disk (seconds).
			Buckets: prometheus.ExponentialBuckets(0.00002, 2, 20),
		}, []string{"target"}),
		rounds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coordinatord_log_journal_round_groups",
			Help: "Shard write groups made durable by one journal round (one fsync); its count is the number of journal fsyncs.",
			// 1 up to the 50 default shards and beyond.
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.fsync, m.rounds)
	}
	return m
}

// ObserveRound is an Options.RoundObserver recording the size of every journal round.
func (m *Metrics) ObserveRound(groups int) { m.rounds.Observe(float64(groups)) }

// FS returns fs with its fsyncs timed.
func (m *Metrics) FS(fs FS) FS {
	return timedFS{FS: fs, file: m.fsync.WithLabelValues("file"), dir: m.fsync.WithLabelValues("dir")}
}

type timedFS struct {
	FS
	file, dir prometheus.Observer
}

func (t timedFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := t.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return timedFile{File: f, sync: t.file}, nil
}

func (t timedFS) SyncDir(dir string) error {
	start := time.Now()
	err := t.FS.SyncDir(dir)
	t.dir.Observe(time.Since(start).Seconds())
	return err
}

type timedFile struct {
	File
	sync prometheus.Observer
}

func (f timedFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.sync.Observe(time.Since(start).Seconds())
	return err
}
