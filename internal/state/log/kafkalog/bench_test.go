package kafkalog

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// offsetRecord is about the size of an offset commit record (key: kind, group, topic,
// partition; value: version, offset, leader epoch, metadata, timestamps).
func offsetRecord(i int) log.Record {
	return log.Record{Key: []byte(fmt.Sprintf("\x00\x01group-%04d/topic-%03d/%d", i%1000, i%100, i%16)), Value: make([]byte, 40)}
}

// BenchmarkBrokerAppend: batches of 4 records appended without waiting, as many shard
// operations land in one round; the writer commits one transaction per round. Reported per
// record, with records/s.
func BenchmarkBrokerAppend(b *testing.B) {
	be := newBackend(b, 1)
	l, r := open(b, be, 0)
	defer l.Close()
	load(b, l)
	b.ResetTimer()
	var last int64
	for i := 0; i < b.N; i += 4 {
		batch := []log.Record{offsetRecord(i), offsetRecord(i + 1), offsetRecord(i + 2), offsetRecord(i + 3)}
		var err error
		if last, err = l.Append(batch); err != nil {
			b.Fatal(err)
		}
		// Bound what is in flight, as the shard's inbox does.
		if i%4096 == 4092 {
			waitDurable(b, r, last)
		}
	}
	waitDurable(b, r, last)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// loadBenchRecords is the shard size of the fail-over goal (issue 18): 1M offsets.
const loadBenchRecords = 1_000_000

// loadBenchBackend is a partition of loadBenchRecords offset commits, written once per process
// so that the variants of BenchmarkBrokerLoad (and -count) read the same partition.
var loadBenchBackend struct {
	once sync.Once
	be   *Backend
}

// commitValue is shaped like an offset commit's value (version, offset, leader epoch, empty
// metadata, commit timestamp), so that it compresses as real ones do rather than as zeros.
func commitValue(i int) []byte {
	v := make([]byte, 0, 40)
	v = binary.BigEndian.AppendUint16(v, 3)
	v = binary.BigEndian.AppendUint64(v, uint64(1000+i*7))
	v = binary.BigEndian.AppendUint32(v, uint32(i/50_000))
	v = binary.BigEndian.AppendUint16(v, 0)
	v = binary.BigEndian.AppendUint64(v, uint64(1_764_800_000_000+i*3))
	return v
}

func loadBench(b *testing.B) *Backend {
	loadBenchBackend.once.Do(func() {
		be := newBackend(b, 1)
		l, r := open(b, be, 0)
		load(b, l)
		writeCommits(b, l, r, loadBenchRecords)
		l.Close()
		loadBenchBackend.be = be
	})
	if loadBenchBackend.be == nil {
		b.Fatal("writing the partition failed earlier")
	}
	return loadBenchBackend.be
}

// BenchmarkBrokerLoad: a shard load (fence, load marker, read_committed replay) of a partition
// of 1M offset commits written in rounds of 1000. The records are handed to a callback that
// keeps nothing. Reported per load, with records/s. The variants (fetch size, and the
// kgo.Record slices recycled or not, the baseline before issue 18's tuning) alternate, three
// rounds, so that a comparison on a shared machine sees the same load.
func BenchmarkBrokerLoad(b *testing.B) {
	be := loadBench(b)
	for round := 0; round < 3; round++ {
		for _, v := range []struct {
			fetchKiB int32
			recycle  bool
		}{{1024, false}, {1024, true}, {256, true}, {4096, true}} {
			b.Run(fmt.Sprintf("fetch=%dKiB,recycle=%v", v.fetchKiB, v.recycle), func(b *testing.B) {
				defer func(fb int32, rc bool) { loadFetchBytes, loadRecycle = fb, rc }(loadFetchBytes, loadRecycle)
				loadFetchBytes, loadRecycle = v.fetchKiB<<10, v.recycle
				benchLoad(b, be)
			})
		}
	}
}

func benchLoad(b *testing.B, be *Backend) {
	for i := 0; i < b.N; i++ {
		l, _ := open(b, be, 0)
		n := 0
		if _, err := l.Load(func(int64, log.Record) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		l.Close()
		if n != loadBenchRecords {
			b.Fatalf("loaded %d records, want %d", n, loadBenchRecords)
		}
	}
	b.ReportMetric(float64(loadBenchRecords*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkBrokerRoundLatency: one record per round, waited for: the latency a lone offset
// commit pays (a transaction: produce, EndTxn, with acks=all).
func BenchmarkBrokerRoundLatency(b *testing.B) {
	be := newBackend(b, 1)
	l, r := open(b, be, 0)
	defer l.Close()
	load(b, l)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		last, err := l.Append([]log.Record{offsetRecord(i)})
		if err != nil {
			b.Fatal(err)
		}
		waitDurable(b, r, last)
	}
}
