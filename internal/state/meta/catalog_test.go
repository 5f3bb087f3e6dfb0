package meta

import (
	"fmt"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

func topicRecords(n int) []log.Record {
	recs := make([]log.Record, n)
	for i := range recs {
		id := [16]byte{0: 1, 8: byte(i >> 16), 9: byte(i >> 8), 10: byte(i)}
		recs[i] = TopicRecord(&Topic{Name: fmt.Sprintf("topic-%06d", i), ID: id, Partitions: 3, ReplicationFactor: 1,
			Configs: map[string]string{"cleanup.policy": "compact"}})
	}
	return recs
}

func replayAll(t testing.TB, c *Catalog, recs []log.Record) {
	for i, r := range recs {
		if err := c.Replay(int64(i), r); err != nil {
			t.Fatal(err)
		}
	}
}

// Defect 6 of issue 10: replaying the catalog cloned both maps per record, so a restart with N
// topics cost O(N²). The work per record must not grow with the catalog: allocations per
// record replayed at 10 000 topics stay those at 1 000 (the old code allocated a copy of both
// maps, hundreds of allocations per record at 10 000).
func TestReplayWorkPerRecordDoesNotGrow(t *testing.T) {
	perRecord := func(n int) float64 {
		recs := topicRecords(n)
		return testing.AllocsPerRun(3, func() { replayAll(t, NewCatalog(), recs) }) / float64(n)
	}
	small, large := perRecord(1000), perRecord(10000)
	t.Logf("allocations per record: %.2f at 1k topics, %.2f at 10k", small, large)
	if large > small*1.25+1 {
		t.Fatalf("allocations per record grow with the catalog: %.2f at 1k, %.2f at 10k", small, large)
	}
}

// A snapshot handed out never changes, whatever is replayed after it; a snapshot is shared
// until the next change.
func TestSnapshotsAreImmutable(t *testing.T) {
	c := NewCatalog()
	recs := topicRecords(3)
	replayAll(t, c, recs[:2])
	before := c.Snapshot()
	if c.Snapshot() != before {
		t.Fatal("snapshot rebuilt without a change")
	}
	if err := c.Replay(2, recs[2]); err != nil {
		t.Fatal(err)
	}
	if err := c.Replay(3, DeleteTopicRecord("topic-000000")); err != nil {
		t.Fatal(err)
	}
	if before.Len() != 2 {
		t.Fatalf("old snapshot changed: %d topics", before.Len())
	}
	if _, ok := before.Topic("topic-000000"); !ok {
		t.Fatal("old snapshot lost a topic")
	}
	after := c.Snapshot()
	if _, ok := after.Topic("topic-000000"); ok || after.Len() != 2 {
		t.Fatalf("new snapshot: %d topics", after.Len())
	}
	if _, ok := after.TopicByID([16]byte{0: 1}); ok {
		t.Fatal("deleted topic still found by id")
	}
}

// Kafka refuses topics whose names differ only in '.' against '_'; the index that replaced the
// scan over every topic must follow deletions.
func TestCreateTopicsCollisionsFollowDeletes(t *testing.T) {
	c := NewCatalog()
	create := func(name string) TopicResult {
		t.Helper()
		res := CreateTopics([]NewTopic{{Name: name, Partitions: 1, ReplicationFactor: 1}}, false, Defaults{Partitions: 1, ReplicationFactor: 1})(nil, c)
		r := res.Response.([]TopicResult)[0]
		replayAll(t, c, res.Records)
		return r
	}
	if r := create("a.b"); r.Code != 0 {
		t.Fatalf("create a.b: %+v", r)
	}
	if r := create("a_b"); r.Code == 0 {
		t.Fatal("a_b collides with a.b")
	}
	del := DeleteTopics([]TopicRef{{Name: ptr("a.b")}})(nil, c)
	replayAll(t, c, del.Records)
	if r := create("a_b"); r.Code != 0 {
		t.Fatalf("a_b after a.b was deleted: %+v", r)
	}
}

func ptr(s string) *string { return &s }

// BenchmarkCatalogReplay replays a catalog of N topics (a restart): ns/op per record should be
// flat between 1k and 10k.
func BenchmarkCatalogReplay(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		recs := topicRecords(n)
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				replayAll(b, NewCatalog(), recs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}

// BenchmarkCreateTopics10k is one CreateTopics of 10 000 topics into a catalog of 10 000: the
// operation and the replay of its records.
func BenchmarkCreateTopics10k(b *testing.B) {
	existing := topicRecords(10000)
	news := make([]NewTopic, 10000)
	for i := range news {
		news[i] = NewTopic{Name: fmt.Sprintf("new-%06d", i), Partitions: -1, ReplicationFactor: -1}
	}
	for b.Loop() {
		b.StopTimer()
		c := NewCatalog()
		replayAll(b, c, existing)
		b.StartTimer()
		res := CreateTopics(news, false, Defaults{Partitions: 1, ReplicationFactor: 1})(nil, c)
		replayAll(b, c, res.Records)
	}
}
