package kafkalog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// Compaction keeps the newest value per Kafka key, so the Kafka key must be the record key
// byte for byte; a tombstone must be a null value for compaction to drop it; an empty value is
// a live fact and must never come back as a tombstone.
func TestMappingRoundTrip(t *testing.T) {
	for _, rec := range []log.Record{
		{Key: []byte{0, 1, 'g'}, Value: []byte("v")},
		{Key: []byte{0, 1, 'g'}, Value: []byte{}},
		{Key: []byte{0, 1, 'g'}},
	} {
		k, v := toKafka(rec)
		if !bytes.Equal(k, rec.Key) {
			t.Fatalf("kafka key %x, want the record key %x", k, rec.Key)
		}
		if rec.Tombstone() != (v == nil) {
			t.Fatalf("record tombstone=%v but kafka value %x", rec.Tombstone(), v)
		}
		// A client library may hand a zero-length value back as nil or empty; both must decode
		// the same way, and only a null value is a tombstone.
		got, ok, err := fromKafka(k, v)
		if err != nil || !ok {
			t.Fatalf("fromKafka(%x, %x) = %v, %v", k, v, ok, err)
		}
		if !bytes.Equal(got.Key, rec.Key) || !bytes.Equal(got.Value, rec.Value) || got.Tombstone() != rec.Tombstone() {
			t.Fatalf("round trip of %+v gave %+v", rec, got)
		}
	}
}

func TestMappingHidesLoadMarkerAndRefusesUnknownFormat(t *testing.T) {
	if _, ok, err := fromKafka(loadMarkerKey, []byte("2026")); ok || err != nil {
		t.Fatalf("load marker: ok=%v err=%v, want hidden", ok, err)
	}
	if _, _, err := fromKafka([]byte{0, 1}, []byte{7, 1}); err == nil {
		t.Fatal("a value of an unknown format was accepted; it must fail the load rather than be dropped")
	}
	if _, _, err := fromKafka([]byte{0, 1}, []byte{}); err == nil {
		t.Fatal("a zero-length value (no format byte) was accepted")
	}
}

func TestAppendRefusesReservedKey(t *testing.T) {
	l := &kafkaLog{b: &Backend{opts: Options{MaxBatchBytes: defaultMaxBatchBytes}}, started: true}
	if _, err := l.Append([]log.Record{{Key: loadMarkerKey, Value: []byte{1}}}); err == nil {
		t.Fatal("a record with the load marker's key was accepted")
	}
}

// A client can make a shard write a big batch (a large JoinGroup metadata); the backend must
// turn it down as the local log does, leaving the log usable, instead of letting the topic
// refuse it and fail the whole shard.
func TestOversizeBatchIsRefusedAndLogStaysUsable(t *testing.T) {
	l := &kafkaLog{b: &Backend{opts: Options{MaxBatchBytes: 1000}}, started: true}
	big := []log.Record{{Key: []byte{0, 1}, Value: make([]byte, 600)}, {Key: []byte{0, 1}, Value: make([]byte, 600)}}
	if err := l.CheckBatch(big); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("CheckBatch of 1200 bytes with a limit of 1000: %v", err)
	}
	if _, err := l.Append(big); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("Append of an oversize batch: %v", err)
	}
	if _, err := l.Append(big[:1]); err != nil {
		t.Fatalf("the log refused a fitting batch after an oversize one: %v", err)
	}
}

var _ log.BatchChecker = (*kafkaLog)(nil)
