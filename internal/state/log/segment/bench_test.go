package segment

// Benchmarks for docs/benchmarks-storage.md. They run on the real file system in the default
// temp directory (set TMPDIR to measure another disk), with fsync per batch, the default.
//
//	go test -run '^$' -bench . -benchtime 2s ./internal/state/log/segment/

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// benchShard plays the shard runtime: one goroutine owns the Log, takes append requests from
// the appenders, and completes each when the Durable callback covers its offset.
type benchShard struct {
	l       log.Log
	reqs    chan *benchReq
	durable chan int64
	serial  bool // wait for each append to be durable before the next: one fsync per write
	batches int  // Durable reports, one per fsync
}

type benchReq struct {
	recs []log.Record
	done chan struct{}
	off  int64
}

func (s *benchShard) run(stop chan struct{}, finished chan struct{}) {
	defer close(finished)
	var waiting []*benchReq
	complete := func(off int64) {
		s.batches++
		i := 0
		for ; i < len(waiting) && waiting[i].off <= off; i++ {
			close(waiting[i].done)
		}
		waiting = waiting[i:]
	}
	for {
		select {
		case r := <-s.reqs:
			off, err := s.l.Append(r.recs)
			if err != nil {
				panic(err)
			}
			r.off = off
			waiting = append(waiting, r)
			if s.serial {
				for len(waiting) > 0 {
					complete(<-s.durable)
				}
			}
		case off := <-s.durable:
			complete(off)
		case <-stop:
			return
		}
	}
}

func offsetRecord(i int) log.Record {
	return log.Record{
		Key:   fmt.Appendf(nil, "\x00\x01group-%08d\x00\x0ftopic-%06d-%04d", i%1000, i%97, i%50), // ~40 bytes
		Value: fmt.Appendf(nil, "\x00\x03%016d-meta-%06d", i, i%1000),                            // ~30 bytes
	}
}

func benchmarkAppenders(b *testing.B, appenders int, serial bool) {
	dir := b.TempDir()
	st, err := Open(Options{Dir: dir, Shards: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	sh := &benchShard{reqs: make(chan *benchReq, appenders), durable: make(chan int64, 1<<16), serial: serial}
	sh.l, err = st.Open(0, log.Callbacks{
		Durable: func(off int64) { sh.durable <- off },
		Failed:  func(err error) { panic(err) },
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sh.l.Load(func(int64, log.Record) error { return nil }); err != nil {
		b.Fatal(err)
	}
	stop, finished := make(chan struct{}), make(chan struct{})
	go sh.run(stop, finished)

	lat := make([][]time.Duration, appenders)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for a := 0; a < appenders; a++ {
		n := b.N / appenders
		if a < b.N%appenders {
			n++
		}
		wg.Add(1)
		go func(a, n int) {
			defer wg.Done()
			lat[a] = make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				r := &benchReq{recs: []log.Record{offsetRecord(a*1_000_000 + i)}, done: make(chan struct{})}
				t0 := time.Now()
				sh.reqs <- r
				<-r.done
				lat[a] = append(lat[a], time.Since(t0))
			}
		}(a, n)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(stop)
	<-finished
	sh.l.Close()

	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(b.N)/float64(max(sh.batches, 1)), "appends/fsync")
}

// BenchmarkGroupCommit: appenders each hand one offset-commit-sized record to the shard and
// wait until it is durable; the syncer group-commits whatever queued during the last fsync.
func BenchmarkGroupCommit(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("appenders=%d", n), func(b *testing.B) { benchmarkAppenders(b, n, false) })
	}
}

// BenchmarkFsyncPerWrite is the baseline without group commit: the shard waits for each
// append to be durable before the next, so every write pays its own fsync.
func BenchmarkFsyncPerWrite(b *testing.B) {
	b.Run("appenders=64", func(b *testing.B) { benchmarkAppenders(b, 64, true) })
}

// fixture is a log directory written once per process and shared by benchmarks.
type fixture struct {
	once  sync.Once
	dir   string
	bytes int64
	recs  int64
	err   error
}

var (
	fixtureRoot string
	fixtures    = map[string]*fixture{}
	fixturesMu  sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureRoot != "" {
		os.RemoveAll(fixtureRoot)
	}
	os.Exit(code)
}

// getFixture writes n records produced by gen in batches of batchSize into a one-shard log.
func getFixture(b *testing.B, name string, n, batchSize int, segBytes int64, gen func(i int) log.Record) *fixture {
	fixturesMu.Lock()
	if fixtureRoot == "" {
		fixtureRoot, _ = os.MkdirTemp("", "segment-bench-")
	}
	f := fixtures[name]
	if f == nil {
		f = &fixture{dir: filepath.Join(fixtureRoot, name)}
		fixtures[name] = f
	}
	fixturesMu.Unlock()
	f.once.Do(func() {
		st, err := Open(Options{Dir: f.dir, Shards: 1, SegmentBytes: segBytes, MaxBatchBytes: MaxFrameBytes})
		if err != nil {
			f.err = err
			return
		}
		defer st.Close()
		l, err := st.Open(0, log.Callbacks{Durable: func(int64) {}, Failed: func(err error) { panic(err) }})
		if err != nil {
			f.err = err
			return
		}
		l.Load(func(int64, log.Record) error { return nil })
		batch := make([]log.Record, 0, batchSize)
		for i := 0; i < n; i++ {
			batch = append(batch, gen(i))
			if len(batch) == batchSize || i == n-1 {
				if _, err := l.Append(batch); err != nil {
					f.err = err
					return
				}
				batch = batch[:0]
			}
		}
		// Close waits until everything appended is durable.
		if f.err = l.Close(); f.err != nil {
			return
		}
		f.recs = int64(n)
		filepath.Walk(f.dir, func(_ string, info os.FileInfo, _ error) error {
			if info != nil && filepath.Ext(info.Name()) == logExt {
				f.bytes += info.Size()
			}
			return nil
		})
	})
	if f.err != nil {
		b.Fatal(f.err)
	}
	return f
}

func loadFixture(b *testing.B, dir string) int64 {
	st, err := Open(Options{Dir: dir, Shards: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	l, err := st.Open(0, log.Callbacks{Durable: func(int64) {}, Failed: func(error) {}})
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	if _, err := l.Load(func(int64, log.Record) error { n++; return nil }); err != nil {
		b.Fatal(err)
	}
	l.Close()
	return n
}

// BenchmarkReplay: Load of ~64 MiB of 256-byte records (page cache warm), in MB/s.
func BenchmarkReplay(b *testing.B) {
	f := getFixture(b, "replay", 250_000, 100, DefaultSegmentBytes, func(i int) log.Record {
		r := offsetRecord(i)
		r.Value = append(r.Value, make([]byte, 200)...)
		return r
	})
	b.SetBytes(f.bytes)
	b.ResetTimer()
	for range b.N {
		if n := loadFixture(b, f.dir); n != f.recs {
			b.Fatalf("loaded %d records of %d", n, f.recs)
		}
	}
}

// BenchmarkReplay1M: Load of 1,000,000 offset-commit-sized records (key ~40 B, value ~30 B),
// written in batches of 100; reports seconds per load.
func BenchmarkReplay1M(b *testing.B) {
	f := getFixture(b, "replay1m", 1_000_000, 100, DefaultSegmentBytes, offsetRecord)
	b.SetBytes(f.bytes)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if n := loadFixture(b, f.dir); n != f.recs {
			b.Fatalf("loaded %d records of %d", n, f.recs)
		}
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/load")
	b.ReportMetric(float64(f.recs)*float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkCompaction: compaction of 500,000 offset-commit records over 50,000 keys (each key
// written ten times) in 4 MiB segments; MB/s of sealed input.
func BenchmarkCompaction(b *testing.B) {
	f := getFixture(b, "compact", 500_000, 100, 4<<20, func(i int) log.Record {
		r := offsetRecord(i)
		r.Key = fmt.Appendf(nil, "\x00\x01group-%08d\x00\x0ftopic-%06d-%04d", (i%50_000)/50, i%50_000, 0)
		return r
	})
	b.SetBytes(f.bytes)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "copy")
		copyDir(b, f.dir, dir)
		st, err := Open(Options{Dir: dir, Shards: 1, SegmentBytes: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		l, _ := st.Open(0, log.Callbacks{Durable: func(int64) {}, Failed: func(error) {}})
		l.Load(func(int64, log.Record) error { return nil })
		b.StartTimer()
		if err := l.Compact(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if n := countRecords(b, l); n > 50_000+len4MiBSegment {
			b.Fatalf("%d records left after compaction", n)
		}
		st.Close()
		b.StartTimer()
	}
}

// len4MiBSegment bounds the records of the active segment, which compaction leaves alone.
const len4MiBSegment = 4 << 20 / 70

func countRecords(b *testing.B, l log.Log) int {
	sl := l.(*shardLog)
	n := 0
	for _, base := range sl.segs {
		f, err := sl.fs.OpenFile(sl.segPath(base), os.O_RDONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		res, err := scanSegment(f, scanOpts{shard: 0, path: sl.segPath(base), base: base, after: -1, below: -1, last: true, maxFrame: MaxFrameBytes})
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		n += int(res.records)
	}
	return n
}

func copyDir(b *testing.B, from, to string) {
	err := filepath.Walk(from, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if info.Name() == lockFileName {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// countingFS counts file fsyncs (the group commits; rolls and directory syncs aside).
type countingFS struct {
	FS
	syncs *atomic.Int64
}

func (c countingFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, syncs: c.syncs}, nil
}

type countingFile struct {
	File
	syncs *atomic.Int64
}

// syncNanos sums the time spent in fsyncs (one benchmark runs at a time).
var syncNanos atomic.Int64

func (f countingFile) Sync() error {
	f.syncs.Add(1)
	t := time.Now()
	err := f.File.Sync()
	syncNanos.Add(int64(time.Since(t)))
	return err
}

// benchmarkShards: appenders commit to 50 shards of one Store, each appender to its own
// shard (appender a to shard a%50, as clients committing to their own groups land on shards
// by hash), each waiting for its record to be durable before sending the next.
func benchmarkShards(b *testing.B, appenders, journals int, wait time.Duration) {
	const shards = 50
	var syncs atomic.Int64
	st, err := Open(Options{Dir: b.TempDir(), Shards: shards, FS: countingFS{FS: OSFS{}, syncs: &syncs}, Journals: journals, JournalWait: wait})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	stop := make(chan struct{})
	var finished []chan struct{}
	sh := make([]*benchShard, shards)
	for i := range sh {
		s := &benchShard{reqs: make(chan *benchReq, appenders), durable: make(chan int64, 1<<16)}
		s.l, err = st.Open(int32(i), log.Callbacks{
			Durable: func(off int64) { s.durable <- off },
			Failed:  func(err error) { panic(err) },
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.l.Load(func(int64, log.Record) error { return nil }); err != nil {
			b.Fatal(err)
		}
		f := make(chan struct{})
		finished = append(finished, f)
		go s.run(stop, f)
		sh[i] = s
	}
	lat := make([][]time.Duration, appenders)
	var wg sync.WaitGroup
	syncs.Store(0)
	syncNanos.Store(0)
	b.ResetTimer()
	start := time.Now()
	for a := 0; a < appenders; a++ {
		n := b.N / appenders
		if a < b.N%appenders {
			n++
		}
		wg.Add(1)
		go func(a, n int) {
			defer wg.Done()
			s := sh[a%shards]
			lat[a] = make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				r := &benchReq{recs: []log.Record{offsetRecord(a*1_000_000 + i)}, done: make(chan struct{})}
				t0 := time.Now()
				s.reqs <- r
				<-r.done
				lat[a] = append(lat[a], time.Since(t0))
			}
		}(a, n)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	fsyncs := syncs.Load()
	close(stop)
	for _, f := range finished {
		<-f
	}
	for _, s := range sh {
		s.l.Close()
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(fsyncs)/float64(b.N), "fsyncs/append")
	b.ReportMetric(float64(syncNanos.Load())/float64(max(fsyncs, 1))/1000, "µs/fsync")
	b.ReportMetric(float64(syncNanos.Load())/float64(elapsed), "busy")
}

// BenchmarkShards50: group commit across the 50 shards of one process (the default
// offsets.topic.num.partitions), 1, 8 and 64 appenders, through one journal (the default) and
// through four. fsyncs/append counts every file fsync (journal rounds, and segment fsyncs at
// roll and close); µs/fsync is the mean time of one, busy the mean number in flight. wait=off
// is one journal whose rounds never wait for expected groups (Options.JournalWait negative).
func BenchmarkShards50(b *testing.B) {
	for _, c := range []struct {
		journals int
		wait     time.Duration
		name     string
	}{{1, 0, "journals=1"}, {1, -1, "journals=1/wait=off"}, {4, 0, "journals=4"}} {
		for _, n := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/appenders=%d", c.name, n), func(b *testing.B) { benchmarkShards(b, n, c.journals, c.wait) })
		}
	}
}
