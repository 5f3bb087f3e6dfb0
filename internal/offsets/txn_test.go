package offsets

import (
	"reflect"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/twmb/franz-go/pkg/kerr"
)

// shardLog is a shard log in miniature: records get increasing offsets and are replayed into
// the state, and the log can be compacted (newest record per key, offsets kept, tombstones
// dropped) and reloaded into a fresh state.
type shardLog struct {
	t    *testing.T
	s    *State
	recs []entry
	next int64
}

type entry struct {
	offset int64
	rec    log.Record
}

func newShardLog(t *testing.T) *shardLog { return &shardLog{t: t, s: New()} }

func (l *shardLog) append(recs ...log.Record) {
	l.t.Helper()
	for _, r := range recs {
		if err := l.s.Replay(l.next, r); err != nil {
			l.t.Fatalf("replay offset %d: %v", l.next, err)
		}
		l.recs = append(l.recs, entry{l.next, r})
		l.next++
	}
}

// reload replays the (optionally compacted) log into a fresh state and checks it equals the
// live one: Replay equivalence, spec ARCHITECTURE §6.1.
func (l *shardLog) reload(compact bool) {
	l.t.Helper()
	recs := l.recs
	if compact {
		last := map[string]int{}
		for i, e := range recs {
			last[string(e.rec.Key)] = i
		}
		var kept []entry
		for i, e := range recs {
			if last[string(e.rec.Key)] == i && !e.rec.Tombstone() {
				kept = append(kept, e)
			}
		}
		recs = kept
	}
	fresh := New()
	for _, e := range recs {
		if err := fresh.Replay(e.offset, e.rec); err != nil {
			l.t.Fatalf("reload offset %d: %v", e.offset, err)
		}
	}
	// A shard settles its state after a load; settling changes how offsets are held (which
	// topic id is the common one, spare capacity), never what they read back as.
	fresh.Settle()
	l.s.Settle()
	if !reflect.DeepEqual(fresh, l.s) {
		l.t.Fatalf("reloaded state (compact=%v) differs:\n got %#v\nwant %#v", compact, fresh, l.s)
	}
	l.s = fresh
}

var t0 = TopicPartition{"t", 0}

func (l *shardLog) commit(group string, tp TopicPartition, offset int64) {
	l.append(CommitRecord(group, tp, Committed{Offset: offset, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1}))
}

func (l *shardLog) stage(pid int64, epoch int16, group string, tp TopicPartition, offset int64) {
	l.t.Helper()
	if code := l.s.StageCheck(pid, epoch); code != 0 {
		l.t.Fatalf("stage check: %d", code)
	}
	l.append(StageRecord(pid, group, tp, Pending{ProducerEpoch: epoch, Committed: Committed{Offset: offset, LeaderEpoch: -1, CommitTimestamp: 1}}),
		l.s.ProducerRecord(pid, epoch, -1, 1))
}

func (l *shardLog) marker(pid int64, epoch int16, commit bool) int16 {
	l.t.Helper()
	recs, code := l.s.CompleteTxn(pid, epoch, 0, commit, 2)
	l.append(recs...)
	return code
}

func (l *shardLog) offset(group string, tp TopicPartition) int64 {
	c, ok := l.s.Get(group, tp.Topic, tp.Partition)
	if !ok {
		return -1
	}
	return c.Offset
}

// Spec coordinator-apis §4.3 / T71: staged offsets are invisible until COMMIT; ABORT keeps the
// previous value.
func TestSpec4_3_CommitMarkerMaterializesAbortDrops(t *testing.T) {
	for _, commit := range []bool{true, false} {
		l := newShardLog(t)
		l.commit("g", t0, 10)
		l.stage(7, 0, "g", t0, 100)
		if l.offset("g", t0) != 10 || !l.s.HasPending("g", "t", 0) {
			t.Fatalf("staged offset visible or not pending: %d", l.offset("g", t0))
		}
		l.reload(false)
		l.reload(true) // a staged offset survives restart and compaction
		if code := l.marker(7, 0, commit); code != 0 {
			t.Fatalf("marker: %d", code)
		}
		want := int64(10)
		if commit {
			want = 100
		}
		if got := l.offset("g", t0); got != want || l.s.HasPending("g", "t", 0) || l.s.HasOpenTxns("g") {
			t.Fatalf("commit=%v: offset %d want %d, pending %v", commit, got, want, l.s.HasPending("g", "t", 0))
		}
		l.reload(false)
		l.reload(true)
	}
}

// T72: a regular commit that lands after the staged one wins over the COMMIT marker.
func TestSpec4_3_LaterRegularCommitWins(t *testing.T) {
	l := newShardLog(t)
	l.stage(7, 0, "g", t0, 100)
	l.commit("g", t0, 150)
	l.marker(7, 0, true)
	if got := l.offset("g", t0); got != 150 {
		t.Fatalf("offset %d, want 150", got)
	}
	l.reload(true)
}

// The log position of a materialized offset is that of its staged record, so two producers'
// transactions order by when they staged, not by when their markers came (Kafka keeps the
// staged record offset too).
func TestSpec4_3_MaterializedOffsetKeepsStagedPosition(t *testing.T) {
	l := newShardLog(t)
	l.stage(1, 0, "g", t0, 100) // staged first
	l.stage(2, 0, "g", t0, 200) // staged second
	l.marker(2, 0, true)
	l.marker(1, 0, true) // older staged value must not overwrite the newer one
	if got := l.offset("g", t0); got != 200 {
		t.Fatalf("offset %d, want 200", got)
	}
	l.reload(true)
	// And a reload must keep the staged position: a commit staged before a reload still loses.
	l.stage(3, 0, "g", t0, 300)
	l.reload(true)
	l.commit("g", t0, 350)
	l.reload(true)
	l.marker(3, 0, true)
	if got := l.offset("g", t0); got != 350 {
		t.Fatalf("offset %d, want 350", got)
	}
}

// T73: a marker for a producer with nothing staged succeeds and changes no offset; it only
// records the producer's epochs, and a repeated marker writes nothing.
func TestSpec4_3_MarkerWithNothingStagedIsNoop(t *testing.T) {
	l := newShardLog(t)
	l.commit("g", t0, 10)
	if code := l.marker(9, 0, true); code != 0 {
		t.Fatalf("code %d", code)
	}
	if l.offset("g", t0) != 10 || l.s.HasOpenTxns("g") {
		t.Fatalf("offset %d", l.offset("g", t0))
	}
	if recs, code := l.s.CompleteTxn(9, 0, 0, true, 3); code != 0 || len(recs) != 0 {
		t.Fatalf("repeated marker: %d records, code %d", len(recs), code)
	}
	l.reload(true)
}

// Kafka's TxnOffsetCommitRequestTest.testDelayedTxnOffsetCommitWithBumpedEpochIsRejected: a
// transaction that staged nothing here ends with a marker carrying the bumped epoch (transaction
// version 2); a delayed TxnOffsetCommit with the old epoch is then INVALID_PRODUCER_EPOCH, also
// after a restart and compaction.
func TestBumpedEpochFromMarkerWithNothingStagedFences(t *testing.T) {
	l := newShardLog(t)
	if code := l.marker(9, 1, true); code != 0 {
		t.Fatalf("marker: %d", code)
	}
	l.reload(true)
	if code := l.s.StageCheck(9, 0); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stage with the epoch before the bump: %d", code)
	}
	if code := l.s.StageCheck(9, 1); code != 0 {
		t.Fatalf("stage with the bumped epoch: %d", code)
	}
	// A later, higher epoch from a marker raises it again.
	l.marker(9, 2, false)
	if code := l.s.StageCheck(9, 1); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("after a second bump: %d", code)
	}
}

// T77 and Kafka's log producer-state checks: an older epoch is INVALID_PRODUCER_EPOCH, on a
// staged commit and on a marker; an older transaction coordinator epoch is fenced.
func TestSpec4_2_ProducerEpochFencing(t *testing.T) {
	l := newShardLog(t)
	l.stage(7, 5, "g", t0, 100)
	if code := l.s.StageCheck(7, 4); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stage with older epoch: %d", code)
	}
	if code := l.s.StageCheck(7, 6); code != 0 {
		t.Fatalf("stage with newer epoch: %d", code)
	}
	if code := l.marker(7, 4, true); code != kerr.InvalidProducerEpoch.Code || l.offset("g", t0) != -1 {
		t.Fatalf("marker with older epoch: code %d offset %d", code, l.offset("g", t0))
	}
	recs, code := l.s.CompleteTxn(7, 5, 3, false, 2)
	if code != 0 {
		t.Fatal(code)
	}
	l.append(recs...)
	l.reload(true)
	// The epoch is remembered after the staged offsets are gone, and so is the coordinator epoch.
	if code := l.s.StageCheck(7, 4); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("after marker, older epoch: %d", code)
	}
	l.stage(7, 5, "g", t0, 1)
	if _, code := l.s.CompleteTxn(7, 5, 2, true, 3); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("older coordinator epoch: %d", code)
	}
}

// T78 and §3.4: deleting a group's or a partition's offsets removes staged ones too; the
// producer's marker later finds nothing.
func TestSpec4_3_DeletesRemoveStagedOffsets(t *testing.T) {
	l := newShardLog(t)
	l.commit("g", t0, 1)
	l.stage(7, 0, "g", t0, 100)
	l.stage(7, 0, "g", TopicPartition{"u", 0}, 5)
	l.stage(7, 0, "h", t0, 9) // another group in the same transaction
	l.append(l.s.DeleteGroupRecords("g")...)
	if l.s.HasGroup("g") || l.s.HasPending("g", "t", 0) || !l.s.HasPending("h", "t", 0) {
		t.Fatalf("after DeleteGroupRecords: group %v, pending %v, other group pending %v", l.s.HasGroup("g"), l.s.HasPending("g", "t", 0), l.s.HasPending("h", "t", 0))
	}
	l.reload(true)
	l.marker(7, 0, true)
	if l.s.HasGroup("g") || l.offset("h", t0) != 9 {
		t.Fatalf("marker after delete: g exists %v, h offset %d", l.s.HasGroup("g"), l.offset("h", t0))
	}

	l.stage(8, 0, "h", TopicPartition{"u", 1}, 3)
	l.append(l.s.DeleteRecords("h", []TopicPartition{t0, {"u", 1}, {"nothing", 0}})...)
	if l.s.HasGroup("h") {
		t.Fatal("h still has offsets")
	}
	l.reload(true)
}

// §3.5: which offsets a sweep expires.
func TestSpec3_5_Expire(t *testing.T) {
	const day = int64(24 * 3600 * 1000)
	commitAt := func(l *shardLog, tp TopicPartition, at, expire int64) {
		l.append(CommitRecord("g", tp, Committed{Offset: 1, LeaderEpoch: -1, CommitTimestamp: at, ExpireTimestamp: expire}))
	}
	base := func(c Committed) int64 { return c.CommitTimestamp }
	cases := []struct {
		name       string
		now        int64
		subscribed func(string) bool
		stage      bool
		expired    int
		allGone    bool
	}{
		{name: "before retention", now: 7*day - 1, expired: 1}, // only the explicit expire timestamp
		{name: "at retention", now: 7 * day, expired: 3, allGone: true},
		{name: "subscribed topic kept", now: 8 * day, subscribed: func(t string) bool { return t == "t" }, expired: 1},
		{name: "staged offset kept", now: 8 * day, stage: true, expired: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newShardLog(t)
			commitAt(l, t0, 0, -1)
			commitAt(l, TopicPartition{"t", 1}, 0, -1)
			commitAt(l, TopicPartition{"u", 0}, 0, day) // v2-v4 retention of one day
			if c.stage {
				l.stage(7, 0, "g", t0, 5)
			}
			recs, allGone := l.s.Expire("g", ExpireRules{Subscribed: c.subscribed, Base: base}, c.now, 7*day)
			if len(recs) != c.expired || allGone != c.allGone {
				t.Fatalf("expired %d allGone %v, want %d %v", len(recs), allGone, c.expired, c.allGone)
			}
			l.append(recs...)
			l.reload(true)
		})
	}
}

// §3.5: a deleted topic's offsets go, committed and staged, but only those written before the
// catalog snapshot was taken.
func TestSpec3_5_DropDeletedTopics(t *testing.T) {
	l := newShardLog(t)
	l.append(CommitRecord("g", t0, Committed{Offset: 1, CommitTimestamp: 10, ExpireTimestamp: -1}))
	l.append(CommitRecord("g", TopicPartition{"gone", 0}, Committed{Offset: 1, CommitTimestamp: 10, ExpireTimestamp: -1}))
	l.append(CommitRecord("h", TopicPartition{"gone", 1}, Committed{Offset: 1, CommitTimestamp: 30, ExpireTimestamp: -1}))
	l.append(StageRecord(7, "g", TopicPartition{"gone", 2}, Pending{Committed: Committed{Offset: 1, CommitTimestamp: 10}}))
	exists := func(topic string) ([16]byte, bool) { return [16]byte{}, topic == "t" }
	recs := l.s.DropDeletedTopics(exists, 20)
	l.append(recs...)
	if len(recs) != 2 || l.s.HasPending("g", "gone", 2) || l.offset("g", TopicPartition{"gone", 0}) != -1 {
		t.Fatalf("dropped %d records", len(recs))
	}
	if l.offset("h", TopicPartition{"gone", 1}) != 1 || l.offset("g", t0) != 1 {
		t.Fatal("dropped an offset committed after the snapshot, or of an existing topic")
	}
	l.reload(true)
}

// Producers with nothing staged are forgotten after producer.id.expiration.ms.
func TestExpireProducers(t *testing.T) {
	l := newShardLog(t)
	l.stage(1, 0, "g", t0, 1) // staged: kept
	l.append(l.s.ProducerRecord(2, 3, 0, 100))
	l.append(l.s.ProducerRecord(3, 3, 0, 900))
	recs := l.s.ExpireProducers(1000, 500)
	l.append(recs...)
	if _, ok := l.s.Producer(2); ok || len(recs) != 1 {
		t.Fatalf("expired %d", len(recs))
	}
	if _, ok := l.s.Producer(3); !ok {
		t.Fatal("recent producer forgotten")
	}
	if _, ok := l.s.Producer(1); !ok {
		t.Fatal("producer with staged offsets forgotten")
	}
	l.reload(true)
}

// A group with only staged offsets exists (as a simple group) and is listed.
func TestGroupWithOnlyStagedOffsetsExists(t *testing.T) {
	l := newShardLog(t)
	l.stage(1, 0, "g", t0, 1)
	if !l.s.HasGroup("g") || l.s.HasCommitted("g") || !reflect.DeepEqual(l.s.Groups(), []string{"g"}) {
		t.Fatalf("groups %v", l.s.Groups())
	}
	l.marker(1, 0, false)
	if l.s.HasGroup("g") || len(l.s.Groups()) != 0 {
		t.Fatalf("groups after abort %v", l.s.Groups())
	}
}

var (
	idOld = [16]byte{0: 1}
	idNew = [16]byte{0: 2}
)

// Issue 10, defect 13 (OffsetFetchRequestTest.testFetchOffsetWithRecreatedTopic): an offset is
// bound to the id of the topic it was committed for, in regular and transactional commits, and
// keeps it through a reload and compaction.
func TestOffsetsKeepTheirTopicID(t *testing.T) {
	l := newShardLog(t)
	l.append(CommitRecord("g", t0, Committed{Offset: 5, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1, TopicID: idOld}))
	l.append(StageRecord(7, "g", TopicPartition{"t", 1}, Pending{Committed: Committed{Offset: 6, LeaderEpoch: -1, CommitTimestamp: 1, TopicID: idOld}}),
		l.s.ProducerRecord(7, 0, -1, 1))
	l.reload(true)
	if p, _ := l.s.Staged(7, "g", "t", 1); p.TopicID != idOld {
		t.Fatalf("staged offset's topic id %x", p.TopicID)
	}
	l.marker(7, 0, true)
	l.reload(true)
	for _, tp := range []TopicPartition{t0, {"t", 1}} {
		c, ok := l.s.Get("g", tp.Topic, tp.Partition)
		if !ok || c.TopicID != idOld || !c.For(idOld) || c.For(idNew) {
			t.Fatalf("%v: %+v", tp, c)
		}
	}
}

// Records written before topic ids (commit values 0 and 1, staged value 0) still load; their
// offsets belong to whatever topic has the name.
func TestOffsetRecordsWithoutTopicIDStillLoad(t *testing.T) {
	l := newShardLog(t)
	l.append(log.Record{Key: commitKey("g", t0), Value: records.NewValue(0).Int64(5).Int32(-1).String("m").Int64(10).Int64(-1).Build()})
	l.append(log.Record{Key: commitKey("g", TopicPartition{"t", 1}), Value: records.NewValue(1).Int64(6).Int32(-1).String("").Int64(10).Int64(-1).Int64(0).Build()})
	l.append(log.Record{Key: txnOffsetKey(7, "g", TopicPartition{"t", 2}), Value: records.NewValue(0).Int16(0).Int64(7).Int32(-1).String("").Int64(10).Build()})
	l.reload(true)
	c, ok := l.s.Get("g", "t", 0)
	if !ok || c.Offset != 5 || c.Metadata != "m" || c.TopicID != ([16]byte{}) || !c.For(idNew) {
		t.Fatalf("v0 commit: %+v", c)
	}
	if c, ok := l.s.Get("g", "t", 1); !ok || c.Offset != 6 || c.LogOffset != 0 {
		t.Fatalf("v1 commit: %+v", c)
	}
	if p, ok := l.s.Staged(7, "g", "t", 2); !ok || p.Offset != 7 {
		t.Fatalf("v0 staged: %+v", p)
	}
}

// A deletion drops the offsets of a topic that is gone and of an earlier topic of a name that
// was re-created under a new id; the new topic's offsets and those of unknown id stay.
func TestDropDeletedTopicsByID(t *testing.T) {
	l := newShardLog(t)
	l.append(CommitRecord("g", t0, Committed{Offset: 1, CommitTimestamp: 10, ExpireTimestamp: -1, TopicID: idOld}))
	l.append(CommitRecord("h", t0, Committed{Offset: 2, CommitTimestamp: 10, ExpireTimestamp: -1, TopicID: idNew}))
	l.append(CommitRecord("i", t0, Committed{Offset: 3, CommitTimestamp: 10, ExpireTimestamp: -1}))
	l.append(StageRecord(7, "j", t0, Pending{Committed: Committed{Offset: 4, CommitTimestamp: 10, TopicID: idOld}}))
	lookup := func(topic string) ([16]byte, bool) { return idNew, topic == "t" }
	l.append(l.s.DropDeletedTopics(lookup, 20)...)
	if l.offset("g", t0) != -1 || l.s.HasPending("j", "t", 0) {
		t.Fatal("the old topic's offsets stayed")
	}
	if l.offset("h", t0) != 2 || l.offset("i", t0) != 3 {
		t.Fatal("dropped the new topic's offset or one of unknown id")
	}
	l.reload(true)
}

// An operator finds a hanging transaction by its age: each group's open transactions are
// listed oldest first, dated by their earliest staged offset, and a marker ends the listing.
func TestOpenTxnsAreDatedByTheirEarliestStagedOffset(t *testing.T) {
	l := newShardLog(t)
	stageAt := func(pid int64, group string, tp TopicPartition, at int64) {
		l.append(StageRecord(pid, group, tp, Pending{ProducerEpoch: 2, Committed: Committed{Offset: 5, LeaderEpoch: -1, CommitTimestamp: at}}),
			l.s.ProducerRecord(pid, 2, -1, at))
	}
	stageAt(7, "g", TopicPartition{"t", 0}, 3000)
	stageAt(7, "g", TopicPartition{"t", 1}, 1000)
	stageAt(9, "g", t0, 2000)
	stageAt(9, "h", t0, 500)

	want := []OpenTxn{{ProducerID: 7, ProducerEpoch: 2, SinceMs: 1000, Partitions: 2}, {ProducerID: 9, ProducerEpoch: 2, SinceMs: 2000, Partitions: 1}}
	if got := l.s.OpenTxns("g"); !reflect.DeepEqual(got, want) {
		t.Fatalf("OpenTxns(g) = %+v, want %+v", got, want)
	}
	if got, want := l.s.OldestOpenTxnSince(), map[string]int64{"g": 1000, "h": 500}; !reflect.DeepEqual(got, want) {
		t.Fatalf("OldestOpenTxnSince = %v, want %v", got, want)
	}
	l.reload(true)
	if got := l.s.OpenTxns("g"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a compacted reload OpenTxns(g) = %+v, want %+v", got, want)
	}

	if code := l.marker(7, 2, true); code != 0 {
		t.Fatalf("marker: %d", code)
	}
	if got, want := l.s.OldestOpenTxnSince(), map[string]int64{"g": 2000, "h": 500}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after producer 7 committed, OldestOpenTxnSince = %v, want %v", got, want)
	}
	if code := l.marker(9, 2, false); code != 0 {
		t.Fatalf("marker: %d", code)
	}
	if got := l.s.OldestOpenTxnSince(); len(got) != 0 {
		t.Fatalf("with every transaction ended, OldestOpenTxnSince = %v, want none", got)
	}
	if got := l.s.OpenTxns("g"); len(got) != 0 {
		t.Fatalf("with every transaction ended, OpenTxns(g) = %+v", got)
	}
}
