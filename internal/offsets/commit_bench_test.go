package offsets

import (
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// BenchmarkCommitEncodeReplay is what the shard does per partition of a steady OffsetCommit:
// encode the record, then apply it to the speculative state (a group and topic that already
// have offsets). Its allocations are per commit on the hot path.
func BenchmarkCommitEncodeReplay(b *testing.B) {
	s := New()
	c := Committed{Offset: 1, LeaderEpoch: -1, CommitTimestamp: 1_764_000_000_000, ExpireTimestamp: -1, TopicID: [16]byte{7}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Offset = int64(i)
		rec := CommitRecord("coordbench-group-0042", TopicPartition{Topic: "coordbench-offsets", Partition: int32(i % 4)}, c)
		if err := s.Replay(int64(i), rec); err != nil {
			b.Fatal(err)
		}
	}
}

// Replay looks names up without copying them from the record; the group, topic and metadata
// it keeps must still be its own: the log's buffer that held the record is reused later.
func TestReplayKeepsNamesApartFromRecordBytes(t *testing.T) {
	s := New()
	rec := CommitRecord("group-a", TopicPartition{Topic: "topic-a", Partition: 0}, Committed{Offset: 5, LeaderEpoch: -1, Metadata: "meta-a", ExpireTimestamp: -1})
	if err := s.Replay(0, rec); err != nil {
		t.Fatal(err)
	}
	for i := range rec.Key[2:] {
		rec.Key[2+i] = 'x'
	}
	for i := range rec.Value[2:] {
		rec.Value[2+i] = 'x'
	}
	if c, ok := s.Get("group-a", "topic-a", 0); !ok || c.Offset != 5 || c.Metadata != "meta-a" {
		t.Fatalf("after the record's bytes changed: Get = %+v, %v; want offset 5, metadata meta-a", c, ok)
	}
	if !s.HasGroup("group-a") {
		t.Fatal("group-a is gone after the record's bytes changed")
	}
}

// The records of one OffsetCommit share a buffer: each must read back as its own commit,
// whether the buffer was sized for all of them or had to grow.
func TestCommitRecordsSharingABufferReadBackApart(t *testing.T) {
	for _, size := range []int{0, 7, 4096} {
		buf := make([]byte, 0, size)
		var recs []log.Record
		for p := range int32(4) {
			meta := strings.Repeat("m", int(p)*3)
			var rec log.Record
			rec, buf = AppendCommitRecord(buf, "g", TopicPartition{Topic: "t", Partition: p}, Committed{Offset: int64(100 + p), LeaderEpoch: p, Metadata: meta, ExpireTimestamp: -1})
			recs = append(recs, rec)
		}
		s := New()
		for i, rec := range recs {
			if err := s.Replay(int64(i), rec); err != nil {
				t.Fatalf("buffer of %d bytes: record %d: %v", size, i, err)
			}
		}
		for p := range int32(4) {
			c, ok := s.Get("g", "t", p)
			if !ok || c.Offset != int64(100+p) || c.LeaderEpoch != p || c.Metadata != strings.Repeat("m", int(p)*3) {
				t.Fatalf("buffer of %d bytes: partition %d read back as %+v, %v", size, p, c, ok)
			}
		}
	}
}
