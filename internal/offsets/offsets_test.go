package offsets

import (
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The compact per-topic storage must read back exactly what a plain map of Committed would
// hold, whatever order partitions are committed, overwritten and deleted in, with the fields
// kept apart (metadata, a topic id other than the topic's, an explicit expiry) and without
// them, at the edges of every field's range; and a log replayed again (compacted, keys in any
// order, slices settled or not) must make the very same state.
func TestCommittedOffsetsReadBackAsCommitted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	idA, idB := [16]byte{1}, [16]byte{2}
	pick := func(vals ...int64) int64 {
		if i := rng.IntN(len(vals) + 1); i < len(vals) {
			return vals[i]
		}
		return rng.Int64N(1 << 41)
	}
	long := strings.Repeat("ü", 3000) // 6000 bytes, past any size class of a small string
	for round := 0; round < 200; round++ {
		l := newShardLog(t)
		type groupPartition struct {
			group string
			TopicPartition
		}
		model := map[groupPartition]Committed{} // two groups share the topics (and their names)
		for op := 0; op < 300; op++ {
			tp := TopicPartition{Topic: []string{"t1", "t2", "t3"}[rng.IntN(3)], Partition: int32(rng.IntN(40))}
			gp := groupPartition{[]string{"g", "h"}[rng.IntN(2)], tp}
			if rng.IntN(4) == 0 {
				l.append(DeleteRecord(gp.group, tp))
				delete(model, gp)
				continue
			}
			c := Committed{Offset: pick(-1, 0, math.MaxInt64), LeaderEpoch: int32(pick(-1, 0, math.MaxInt32) % (1 << 31)),
				CommitTimestamp: pick(-1, 0, 1, math.MinInt64, math.MaxInt64), ExpireTimestamp: -1, TopicID: idA}
			switch rng.IntN(8) {
			case 0:
				c.Metadata = "m" + string(rune('a'+rng.IntN(3))) // often equal to a neighbour's
			case 1:
				c.Metadata = long
			case 2:
				c.Metadata = "streams-" + strconv.Itoa(rng.IntN(1000))
			case 3: // the longest kept in an entry's slot, and one byte more
				c.Metadata = strings.Repeat(string(rune('a'+rng.IntN(2))), inlineMetadata+rng.IntN(2))
			}
			if rng.IntN(5) < 1+3*(round%2) { // in odd rounds most commits move the topic to idB
				c.TopicID = idB // re-created under a new id, or an old commit's
			}
			if rng.IntN(7) == 0 {
				c.TopicID = [16]byte{} // committed before ids were recorded
			}
			if rng.IntN(6) == 0 {
				c.ExpireTimestamp = pick(0, math.MaxInt64)
			}
			c.LogOffset = l.next
			l.append(CommitRecord(gp.group, tp, c))
			model[gp] = c
		}
		check := func(stage string) {
			for gp, want := range model {
				if got, ok := l.s.Get(gp.group, gp.Topic, gp.Partition); !ok || got != want {
					t.Fatalf("round %d, %s: Get %v = %+v, %v; want %+v", round, stage, gp, got, ok, want)
				}
			}
			if _, ok := l.s.Get("g", "t1", 40); ok {
				t.Fatalf("round %d, %s: Get of a partition never committed found one", round, stage)
			}
			var want []TopicPartition
			for gp := range model {
				if gp.group == "g" {
					want = append(want, gp.TopicPartition)
				}
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
				if w := model[groupPartition{"g", e.TopicPartition}]; e.Committed != w {
					t.Fatalf("round %d, %s: All %v = %+v, want %+v", round, stage, e.TopicPartition, e.Committed, w)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, %s: All lists %v, want %v in order", round, stage, got, want)
			}
			if l.s.HasCommitted("g") != (len(want) > 0) {
				t.Fatalf("round %d, %s: HasCommitted %v with %d offsets", round, stage, l.s.HasCommitted("g"), len(want))
			}
		}
		checkThroughReloads(t, l, rng, check)
	}
}

// checkThroughReloads runs check on the state as committed, settled, reloaded from its log,
// reloaded from the compacted log, and replayed from it in random order.
func checkThroughReloads(t *testing.T, l *shardLog, rng *rand.Rand, check func(stage string)) {
	t.Helper()
	check("as committed")
	l.s.Settle()
	check("settled")
	l.reload(false)
	check("reloaded")
	l.reload(true)
	check("reloaded compacted")
	replayShuffled(t, l, rng)
}

// replayShuffled replays the latest record of every key, in random order, into a fresh state:
// records of different keys may come in any order (a compacted log), and the state must not
// depend on it, nor on whether the slices were settled.
func replayShuffled(t *testing.T, l *shardLog, rng *rand.Rand) {
	t.Helper()
	last := map[string]entry{}
	for _, e := range l.recs {
		last[string(e.rec.Key)] = e
	}
	var kept []entry
	for _, e := range last {
		if !e.rec.Tombstone() {
			kept = append(kept, e)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].offset < kept[j].offset })
	rng.Shuffle(len(kept), func(i, j int) { kept[i], kept[j] = kept[j], kept[i] })
	fresh := New()
	for _, e := range kept {
		if err := fresh.Replay(e.offset, e.rec); err != nil {
			t.Fatalf("replay offset %d: %v", e.offset, err)
		}
	}
	fresh.Settle()
	if !reflect.DeepEqual(fresh, l.s) {
		t.Fatalf("state replayed in another order differs:\n got %#v\nwant %#v", fresh, l.s)
	}
}

// Offsets whose metadata, other topic id or expiry were overwritten by plain commits must be
// held as if they never had them: the same state a compacted log replays to, without the side
// tables (a consumer that stopped sending metadata must not keep paying for it).
func TestOverwrittenRareFieldsLeaveNothingBehind(t *testing.T) {
	l := newShardLog(t)
	tp := TopicPartition{Topic: "t", Partition: 3}
	l.append(CommitRecord("g", tp, Committed{Offset: 1, LeaderEpoch: -1, Metadata: "m", ExpireTimestamp: 99, TopicID: [16]byte{9}}))
	l.append(CommitRecord("g", TopicPartition{Topic: "t", Partition: 4}, Committed{Offset: 1, LeaderEpoch: -1, ExpireTimestamp: -1}))
	l.append(CommitRecord("g", tp, Committed{Offset: 2, LeaderEpoch: -1, ExpireTimestamp: -1}))
	if c, _ := l.s.Get("g", "t", 3); c.Metadata != "" || c.ExpireTimestamp != -1 || c.TopicID != [16]byte{} {
		t.Fatalf("overwritten commit reads back as %+v", c)
	}
	l.reload(true)
}

// Commit times and log positions are held as differences from a topic's bases, and those too
// far from them in full beside the entries: whatever the spread, each must read back as
// committed, at the edges of int64 and of the differences an entry holds, for a topic whose
// entries straddle that range and whose bases move on as time and the log do; and a log
// replayed again (compacted, keys shuffled) must make the very same state.
func TestCommitTimesAndLogPositionsFarApartReadBackAsCommitted(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const now = 1_764_000_000_000
	step := int64(baseStep)
	edges := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64, math.MaxInt64 - 1,
		now, now - 1, baseOf(now), baseOf(now) - 1,
		baseOf(now) + math.MinInt32, baseOf(now) + math.MinInt32 + 1, baseOf(now) + math.MinInt32 - 1,
		baseOf(now) + math.MaxInt32, baseOf(now) + math.MaxInt32 + 1,
		now + step, now + 2*step, now + 3*step, now - 2*step, now - 3*step}
	pick := func() int64 {
		if rng.IntN(3) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return now + rng.Int64N(8*step) - 4*step // a topic straddling the difference range
	}
	jumps := []int64{1, 2, math.MaxInt32 - 1, math.MaxInt32, math.MaxInt32 + 1, 1 << 32, 1 << 40, step}
	for round := 0; round < 100; round++ {
		l := newShardLog(t)
		l.next = []int64{0, math.MaxInt32 - 5, 1 << 50}[round%3]
		type groupPartition struct {
			group string
			TopicPartition
		}
		model := map[groupPartition]Committed{}
		check := func(stage string) {
			t.Helper()
			for gp, want := range model {
				if got, ok := l.s.Get(gp.group, gp.Topic, gp.Partition); !ok || got != want {
					t.Fatalf("round %d, %s: Get %v = %+v, %v; want %+v", round, stage, gp, got, ok, want)
				}
			}
			n := 0
			for _, g := range []string{"g", "h"} {
				for _, e := range l.s.All(g) {
					n++
					if w := model[groupPartition{g, e.TopicPartition}]; e.Committed != w {
						t.Fatalf("round %d, %s: All %s %v = %+v, want %+v", round, stage, g, e.TopicPartition, e.Committed, w)
					}
				}
			}
			if n != len(model) {
				t.Fatalf("round %d, %s: All lists %d offsets, want %d", round, stage, n, len(model))
			}
		}
		for op := 0; op < 200; op++ {
			tp := TopicPartition{Topic: []string{"t1", "t2"}[rng.IntN(2)], Partition: int32(rng.IntN(20))}
			gp := groupPartition{[]string{"g", "h"}[rng.IntN(2)], tp}
			if rng.IntN(2) == 0 {
				l.next += jumps[rng.IntN(len(jumps))] - 1 // a busy shard's log between two commits
			}
			if rng.IntN(6) == 0 {
				l.append(DeleteRecord(gp.group, tp))
				delete(model, gp)
				continue
			}
			c := Committed{Offset: []int64{-1, 0, math.MaxInt64, rng.Int64()}[rng.IntN(4)], LeaderEpoch: []int32{-1, 0, math.MaxInt32}[rng.IntN(3)],
				CommitTimestamp: pick(), ExpireTimestamp: -1, LogOffset: l.next}
			if rng.IntN(10) == 0 {
				c.Metadata = "m"
			}
			l.append(CommitRecord(gp.group, tp, c))
			model[gp] = c
			if op%20 == 0 {
				check("as committed")
			}
		}
		checkThroughReloads(t, l, rng, check)
	}
}

// A steady consumer commits every partition again and again while time and the shard's log go
// on: once every partition was committed after the bases last moved, none may still be held
// in full beside the entries, and each reads back as its latest commit.
func TestSteadyCommitsLeaveNothingHeldInFull(t *testing.T) {
	l := newShardLog(t)
	now := int64(1_764_000_000_000)
	for round := 0; round < 40; round++ {
		now += baseStep / 3 // four days
		l.next += baseStep / 3
		for p := range int32(8) {
			l.append(CommitRecord("g", TopicPartition{Topic: "t", Partition: p}, Committed{Offset: int64(round), LeaderEpoch: -1, CommitTimestamp: now, ExpireTimestamp: -1}))
		}
	}
	g := l.s.groups["g"]
	if x := g.topics[0].extra; x != nil {
		t.Fatalf("after steady commits the topic keeps %d offsets' times in full", len(x.wide))
	}
	for p := range int32(8) {
		if c, _ := l.s.Get("g", "t", p); c.CommitTimestamp != now || c.LogOffset != l.next-8+int64(p) || c.Offset != 39 {
			t.Fatalf("partition %d reads back as %+v", p, c)
		}
	}
	l.reload(true)
}
