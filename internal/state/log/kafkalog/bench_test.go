package kafkalog

import (
	"fmt"
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

// BenchmarkBrokerLoad: a shard load of 200k records written in rounds of 1000.
func BenchmarkBrokerLoad(b *testing.B) {
	const n = 200_000
	be := newBackend(b, 1)
	l, r := open(b, be, 0)
	load(b, l)
	var last int64
	for i := 0; i < n; i += 1000 {
		batch := make([]log.Record, 1000)
		for j := range batch {
			batch[j] = offsetRecord(i + j)
		}
		var err error
		if last, err = l.Append(batch); err != nil {
			b.Fatal(err)
		}
		if i%20000 == 0 {
			waitDurable(b, r, last)
		}
	}
	waitDurable(b, r, last)
	l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, _ := open(b, be, 0)
		got, _ := load(b, l)
		l.Close()
		if len(got) != n {
			b.Fatalf("loaded %d records, want %d", len(got), n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
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
