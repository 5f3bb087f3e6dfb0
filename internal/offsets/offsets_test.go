package offsets

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// The compact per-topic storage must read back exactly what a plain map of Committed would
// hold, whatever order partitions are committed, overwritten and deleted in, with the fields
// kept apart (a topic id other than the topic's, an explicit expiry) and without them.
func TestCommittedOffsetsReadBackAsCommitted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	idA, idB := [16]byte{1}, [16]byte{2}
	for round := 0; round < 200; round++ {
		l := newShardLog(t)
		model := map[TopicPartition]Committed{}
		for op := 0; op < 300; op++ {
			tp := TopicPartition{Topic: []string{"t1", "t2"}[rng.IntN(2)], Partition: int32(rng.IntN(40))}
			if rng.IntN(4) == 0 {
				l.append(DeleteRecord("g", tp))
				delete(model, tp)
				continue
			}
			c := Committed{Offset: rng.Int64N(1 << 40), LeaderEpoch: int32(rng.IntN(5)) - 1, CommitTimestamp: rng.Int64N(1 << 41),
				ExpireTimestamp: -1, TopicID: idA}
			if rng.IntN(3) == 0 {
				c.Metadata = "m" + string(rune('a'+rng.IntN(26)))
			}
			if rng.IntN(5) == 0 {
				c.TopicID = idB // re-created under a new id, or an old commit's
			}
			if rng.IntN(7) == 0 {
				c.TopicID = [16]byte{} // committed before ids were recorded
			}
			if rng.IntN(6) == 0 {
				c.ExpireTimestamp = rng.Int64N(1 << 41)
			}
			c.LogOffset = l.next
			l.append(CommitRecord("g", tp, c))
			model[tp] = c
		}
		for tp, want := range model {
			if got, ok := l.s.Get("g", tp.Topic, tp.Partition); !ok || got != want {
				t.Fatalf("round %d: Get %v = %+v, %v; want %+v", round, tp, got, ok, want)
			}
		}
		if _, ok := l.s.Get("g", "t1", 40); ok {
			t.Fatal("Get of a partition never committed found one")
		}
		var want []TopicPartition
		for tp := range model {
			want = append(want, tp)
		}
		sort.Slice(want, func(i, j int) bool {
			if want[i].Topic != want[j].Topic {
				return want[i].Topic < want[j].Topic
			}
			return want[i].Partition < want[j].Partition
		})
		var got []TopicPartition
		for _, e := range l.s.All("g") {
			got = append(got, e.TopicPartition)
			if e.Committed != model[e.TopicPartition] {
				t.Fatalf("round %d: All %v = %+v, want %+v", round, e.TopicPartition, e.Committed, model[e.TopicPartition])
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: All lists %v, want %v in order", round, got, want)
		}
		if l.s.HasCommitted("g") != (len(model) > 0) {
			t.Fatalf("round %d: HasCommitted %v with %d offsets", round, l.s.HasCommitted("g"), len(model))
		}
	}
}
