// Package offsets is the committed-offset state of a shard: what every group has committed for
// each partition, how commits are validated and encoded as records, and how they are read back.
// Group membership rules (generations, member epochs) belong to the group types, which decide
// before calling in here whether a commit is allowed at all.
package offsets

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/twmb/franz-go/pkg/kbin"
)

// Committed is one partition's committed offset.
type Committed struct {
	Offset          int64
	LeaderEpoch     int32 // -1: unknown
	Metadata        string
	CommitTimestamp int64 // ms
	ExpireTimestamp int64 // ms; -1: none (only v1-v4 commits set one)
	// LogOffset is the record's position in the shard log; it orders regular against
	// transactional commits.
	LogOffset int64
	// TopicID is the id of the topic the offset was committed for: a topic deleted and
	// re-created under the same name has a new id, and the old topic's offsets are not its
	// offsets (Kafka drops them with the topic). Zero: committed before ids were recorded.
	TopicID [16]byte
}

// For reports whether the offset can belong to the topic with this id: it was committed for
// it, or its topic is unknown (an offset from before ids were recorded, or no id to compare).
func (c Committed) For(topicID [16]byte) bool {
	return c.TopicID == [16]byte{} || topicID == [16]byte{} || c.TopicID == topicID
}

// TopicPartition identifies a partition by topic name.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// group holds one group's committed offsets, one topicOffsets per topic sorted by name. A
// group commits to a few topics, so a sorted slice finds one in a few comparisons and costs a
// fraction of a map's buckets (most groups are small: the per-group cost is per offset there).
type group struct {
	topics []topicOffsets
}

// topic returns the index of the topic's offsets, or where they would go, and whether they
// are there.
func (g *group) topic(name string) (int, bool) {
	lo, hi := 0, len(g.topics)
	for lo < hi { // slices.BinarySearchFunc would copy a topicOffsets per comparison
		m := int(uint(lo+hi) >> 1)
		if g.topics[m].name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(g.topics) && g.topics[lo].name == name
}

// topicOffsets is one topic's committed offsets in a group, sorted by partition. Committed
// offsets are most of a coordinator's memory (docs/architecture.md, "Committed offsets in
// memory"), so an offset is a 32-byte entry in a slice rather than a Committed in a map (72
// bytes plus the map's overhead): the topic id, the same for almost every entry of a topic, is
// kept once per topic, and what many commits leave empty (metadata) or few set (an id other
// than the topic's, an explicit expiry from OffsetCommit v1-v4) lives in extra, allocated only
// for a topic that has any.
type topicOffsets struct {
	name string   // shared by every group's offsets of the topic (State.names)
	id   [16]byte // the topic id of every entry without an own one in extra.rare
	// timeBase and logBase are what the entries' commit times and log positions count from
	// (see offsetEntry).
	timeBase, logBase int64
	entries           []offsetEntry
	extra             *topicExtra
}

// offsetEntry is what every committed offset needs: the offset, leader epoch and partition
// OffsetFetch answers, the commit time that retention counts from, and the log position that
// orders a regular commit against a transactional one, in 24 bytes. The offset is the client's
// full int64. A topic's commit times are the server's clock at its commits and its log
// positions those of one shard's log, so each lies within 2^31 (24 days of milliseconds, two
// billion records) of the topic's base for all but long-idle partitions: an entry holds both as
// int32 differences from the bases, and an entry whose difference does not fit holds wideMark
// instead and its two full values in extra.wide. Nothing is rounded: every answer is the value
// committed.
type offsetEntry struct {
	offset          int64
	commitTimestamp int32 // from timeBase; wideMark: see extra.wide
	logOffset       int32 // from logBase
	partition       int32
	leaderEpoch     int32
}

// wideMark as an entry's commitTimestamp: its commit time and log position are in extra.wide.
// It is no difference an entry holds otherwise (narrow never returns it).
const wideMark = math.MinInt32

// baseStep is what bases are multiples of. A base only moves forward, to the step below the
// newest value (so a new commit's difference always fits): once per 12 days of a topic's
// commits, or per billion records of its shard, its entries are rewritten once.
const baseStep = 1 << 30

func baseOf(v int64) int64 { return v &^ (baseStep - 1) }

// narrow returns v - base if it fits an entry's int32 and is not wideMark. The difference may
// wrap around int64: base + int64(d) wraps back to v all the same.
func narrow(v, base int64) (int32, bool) {
	d := v - base
	if d <= math.MinInt32 || d > math.MaxInt32 {
		return 0, false
	}
	return int32(d), true
}

// wideTimes is an entry's commit time and log position too far from the topic's bases.
type wideTimes struct {
	commitTimestamp, logOffset int64
}

// times returns entry e's commit time and log position.
func (t *topicOffsets) times(e *offsetEntry) (commitTimestamp, logOffset int64) {
	if e.commitTimestamp == wideMark {
		w := t.extra.wide[e.partition]
		return w.commitTimestamp, w.logOffset
	}
	return t.timeBase + int64(e.commitTimestamp), t.logBase + int64(e.logOffset)
}

// setTimes stores entry e's commit time and log position, in the entry when both fit, in
// extra.wide otherwise. e must not be in extra.wide already.
func (t *topicOffsets) setTimes(e *offsetEntry, commitTimestamp, logOffset int64) {
	ct, ok1 := narrow(commitTimestamp, t.timeBase)
	lo, ok2 := narrow(logOffset, t.logBase)
	if ok1 && ok2 {
		e.commitTimestamp, e.logOffset = ct, lo
		return
	}
	e.commitTimestamp, e.logOffset = wideMark, 0
	x := t.extraFields()
	if x.wide == nil {
		x.wide = map[int32]wideTimes{}
	}
	x.wide[e.partition] = wideTimes{commitTimestamp, logOffset}
}

// clearTimes forgets entry e's values in extra.wide, if it has any.
func (t *topicOffsets) clearTimes(e *offsetEntry) {
	if e.commitTimestamp == wideMark {
		delete(t.extra.wide, e.partition)
		e.commitTimestamp = 0
	}
}

// moveBases rewrites every entry's differences for new bases.
func (t *topicOffsets) moveBases(timeBase, logBase int64) {
	var wide map[int32]wideTimes
	if t.extra != nil {
		wide, t.extra.wide = t.extra.wide, nil
	}
	oldTime, oldLog := t.timeBase, t.logBase
	t.timeBase, t.logBase = timeBase, logBase
	for i := range t.entries {
		e := &t.entries[i]
		ct, lo := oldTime+int64(e.commitTimestamp), oldLog+int64(e.logOffset)
		if e.commitTimestamp == wideMark {
			w := wide[e.partition]
			ct, lo = w.commitTimestamp, w.logOffset
		}
		t.setTimes(e, ct, lo)
	}
	t.dropEmptyExtra()
}

// topicExtra holds a topic's fields that most commits leave empty. It exists only while one of
// them is set, so that equal offsets make equal states however they were reached (a replayed
// log must equal the live state it was written from).
type topicExtra struct {
	// metadata is parallel to entries while any entry has metadata (Kafka Streams sets it on
	// every partition it commits), nil otherwise; withMetadata counts the non-empty ones.
	metadata     []metaSlot
	withMetadata int
	// long holds by partition the metadata too long for its slot.
	long map[int32]string
	rare map[int32]rareFields
	// foreign counts the entries of rare whose topic id is not the topic's: when three
	// quarters of the topic's entries are, the topic's id is switched (a topic re-created
	// under a new id, committed again).
	foreign int
	// wide holds by partition the commit time and log position of the entries marked
	// wideMark.
	wide map[int32]wideTimes
}

// inlineMetadata is the longest metadata an entry's slot holds in place: Kafka Streams commits
// its partition time as 12 characters on every partition.
const inlineMetadata = 15

// longMetadata as a slot's length: the metadata is in topicExtra.long.
const longMetadata = 0xff

// metaSlot is one entry's metadata. In place, up to inlineMetadata bytes cost 16 bytes and
// nothing for the collector to follow; a string per entry cost a 16-byte header pointing at an
// allocation of its own (16 bytes for Kafka Streams' 12 characters), and each such pointer was
// scanned by every collection.
type metaSlot struct {
	n byte // length, or longMetadata
	b [inlineMetadata]byte
}

// metadata returns entry i's (at partition) metadata; a copy, so the answer shares nothing with
// the state.
func (x *topicExtra) metadataOf(i int, partition int32) string {
	sl := &x.metadata[i]
	if sl.n == longMetadata {
		return x.long[partition]
	}
	return string(sl.b[:sl.n])
}

// is reports whether entry i's (at partition) metadata is m, without allocating.
func (x *topicExtra) is(i int, partition int32, m string) bool {
	sl := &x.metadata[i]
	if sl.n == longMetadata {
		return x.long[partition] == m
	}
	return string(sl.b[:sl.n]) == m
}

type rareFields struct {
	topicID         [16]byte
	expireTimestamp int64
}

// find returns the index of partition's entry, or where it would go, and whether it is there.
func (t *topicOffsets) find(partition int32) (int, bool) {
	n := len(t.entries)
	if n > 0 && t.entries[n-1].partition < partition {
		return n, false // commits usually name partitions in order: appending is the common case
	}
	i := sort.Search(n, func(i int) bool { return t.entries[i].partition >= partition })
	return i, i < n && t.entries[i].partition == partition
}

func (t *topicOffsets) committed(i int) Committed {
	e := &t.entries[i]
	c := Committed{Offset: e.offset, LeaderEpoch: e.leaderEpoch, ExpireTimestamp: -1, TopicID: t.id}
	c.CommitTimestamp, c.LogOffset = t.times(e)
	if x := t.extra; x != nil {
		if x.metadata != nil {
			c.Metadata = x.metadataOf(i, e.partition)
		}
		if r, ok := x.rare[e.partition]; ok {
			c.TopicID, c.ExpireTimestamp = r.topicID, r.expireTimestamp
		}
	}
	return c
}

// set stores partition's committed offset. c.Metadata may alias a record's bytes: set keeps a
// copy (see setMetadata).
func (t *topicOffsets) set(partition int32, c Committed) {
	if len(t.entries) == 0 {
		t.id = c.TopicID
		t.timeBase, t.logBase = baseOf(c.CommitTimestamp), baseOf(c.LogOffset)
	} else if tb, lb := max(t.timeBase, baseOf(c.CommitTimestamp)), max(t.logBase, baseOf(c.LogOffset)); tb != t.timeBase || lb != t.logBase {
		t.moveBases(tb, lb)
	}
	e := offsetEntry{offset: c.Offset, partition: partition, leaderEpoch: c.LeaderEpoch}
	i, ok := t.find(partition)
	if ok {
		t.clearTimes(&t.entries[i])
		t.entries[i] = e
	} else {
		t.entries = slices.Insert(t.entries, i, e)
		if t.extra != nil && t.extra.metadata != nil {
			t.extra.metadata = slices.Insert(t.extra.metadata, i, metaSlot{})
		}
	}
	t.setTimes(&t.entries[i], c.CommitTimestamp, c.LogOffset)
	t.setMetadata(i, partition, c.Metadata)
	t.setRare(partition, c.TopicID, c.ExpireTimestamp)
	if x := t.extra; x != nil && x.foreign > 3*len(t.entries)/4 {
		t.rebase()
	}
	t.dropEmptyExtra()
}

// setRare records partition's topic id and explicit expiry in rare when they are not the
// common ones.
func (t *topicOffsets) setRare(partition int32, id [16]byte, expire int64) {
	t.clearRare(partition)
	if id == t.id && expire == -1 {
		return
	}
	x := t.extraFields()
	if x.rare == nil {
		x.rare = map[int32]rareFields{}
	}
	x.rare[partition] = rareFields{topicID: id, expireTimestamp: expire}
	if id != t.id {
		x.foreign++
	}
}

func (t *topicOffsets) clearRare(partition int32) {
	x := t.extra
	if x == nil {
		return
	}
	if r, ok := x.rare[partition]; ok {
		delete(x.rare, partition)
		if r.topicID != t.id {
			x.foreign--
		}
	}
}

// rebase makes the topic id most entries carry the topic's, moving the others to rare. It
// counts in partition order and keeps the first of equal counts, so equal offsets make equal
// states whatever order they were committed in.
func (t *topicOffsets) rebase() {
	var old map[int32]rareFields
	if t.extra != nil {
		old = t.extra.rare
	}
	idOf := func(p int32) ([16]byte, int64) {
		if r, ok := old[p]; ok {
			return r.topicID, r.expireTimestamp
		}
		return t.id, -1
	}
	type idCount struct {
		id [16]byte
		n  int
	}
	var counts []idCount // a topic's entries carry one or two ids, rarely more
	for i := range t.entries {
		id, _ := idOf(t.entries[i].partition)
		j := slices.IndexFunc(counts, func(c idCount) bool { return c.id == id })
		if j < 0 {
			j = len(counts)
			counts = append(counts, idCount{id: id})
		}
		counts[j].n++
	}
	if len(counts) == 0 {
		return
	}
	best := slices.MaxFunc(counts, func(a, b idCount) int { return a.n - b.n })
	if best.id == t.id {
		return
	}
	ids := make([][16]byte, len(t.entries))
	expires := make([]int64, len(t.entries))
	for i := range t.entries {
		ids[i], expires[i] = idOf(t.entries[i].partition)
	}
	t.id = best.id
	if t.extra != nil {
		t.extra.rare, t.extra.foreign = nil, 0
	}
	for i := range t.entries {
		t.setRare(t.entries[i].partition, ids[i], expires[i])
	}
}

func (t *topicOffsets) extraFields() *topicExtra {
	if t.extra == nil {
		t.extra = &topicExtra{}
	}
	return t.extra
}

// setMetadata stores entry i's (at partition) metadata: in its slot when short, otherwise in
// long, sharing an equal string a neighbouring partition holds (a client committing the same
// metadata for every partition).
func (t *topicOffsets) setMetadata(i int, partition int32, m string) {
	x := t.extra
	if x == nil || x.metadata == nil {
		if m == "" {
			return // the common case of no metadata before and after
		}
	} else {
		if x.is(i, partition, m) {
			return // a steady consumer commits the same metadata every time
		}
		if sl := &x.metadata[i]; sl.n != 0 {
			x.withMetadata--
			if sl.n == longMetadata {
				delete(x.long, partition)
			}
			*sl = metaSlot{}
		}
		if m == "" {
			return
		}
	}
	x = t.extraFields()
	if x.metadata == nil {
		x.metadata = make([]metaSlot, len(t.entries), cap(t.entries))
	}
	x.withMetadata++
	if len(m) <= inlineMetadata {
		sl := metaSlot{n: byte(len(m))}
		copy(sl.b[:], m)
		x.metadata[i] = sl
		return
	}
	x.metadata[i] = metaSlot{n: longMetadata}
	if x.long == nil {
		x.long = map[int32]string{}
	}
	switch {
	case i > 0 && x.metadata[i-1].n == longMetadata && x.long[t.entries[i-1].partition] == m:
		m = x.long[t.entries[i-1].partition]
	case i+1 < len(x.metadata) && x.metadata[i+1].n == longMetadata && x.long[t.entries[i+1].partition] == m:
		m = x.long[t.entries[i+1].partition]
	default:
		m = strings.Clone(m)
	}
	x.long[partition] = m
}

func (t *topicOffsets) remove(partition int32) {
	i, ok := t.find(partition)
	if !ok {
		return
	}
	t.setMetadata(i, partition, "")
	t.clearTimes(&t.entries[i])
	t.entries = slices.Delete(t.entries, i, i+1)
	t.clearRare(partition)
	if x := t.extra; x != nil && x.metadata != nil {
		x.metadata = slices.Delete(x.metadata, i, i+1)
	}
	t.dropEmptyExtra()
}

func (t *topicOffsets) dropEmptyExtra() {
	x := t.extra
	if x == nil {
		return
	}
	if x.withMetadata == 0 {
		x.metadata = nil
	}
	if len(x.long) == 0 {
		x.long = nil
	}
	if len(x.rare) == 0 {
		x.rare = nil
	}
	if len(x.wide) == 0 {
		x.wide = nil
	}
	if x.metadata == nil && x.rare == nil && x.wide == nil {
		t.extra = nil
	}
}

// settle gives back what growing the topic's slices one commit at a time left unused.
func (t *topicOffsets) settle() {
	t.rebase()
	t.settleBases()
	t.entries = clipped(t.entries)
	if t.extra != nil && t.extra.metadata != nil {
		t.extra.metadata = clipped(t.extra.metadata)
	}
}

// settleBases puts the bases where the newest commit time and log position alone put them, as
// committing them in order does: a topic's entries then come out the same however they were
// reached (a base only moves forward while commits come in, so one whose newest entry was
// deleted or overwritten with an older value can be further on than its entries need).
func (t *topicOffsets) settleBases() {
	if len(t.entries) == 0 {
		return
	}
	tb, lb := int64(math.MinInt64), int64(math.MinInt64)
	for i := range t.entries {
		ct, lo := t.times(&t.entries[i])
		tb, lb = max(tb, ct), max(lb, lo)
	}
	if tb, lb = baseOf(tb), baseOf(lb); tb != t.timeBase || lb != t.logBase {
		t.moveBases(tb, lb)
	}
}

// clipped returns s in an array of its own length: append grows a slice up to twice what it
// holds, and a load appends every offset, so without this up to half of the biggest
// structure of a shard would be spare capacity.
func clipped[E any](s []E) []E {
	if cap(s)-len(s) <= len(s)/16 {
		return s // within a few percent of the size class anyway
	}
	return append(make([]E, 0, len(s)), s...)
}

// State is the offsets of every group on a shard: the committed ones and, separately, the
// offsets staged by open transactions (txn.go).
type State struct {
	groups map[string]*group
	// names holds one copy of each topic name any group has offsets for, with how many
	// groups use it: thousands of groups committing to one topic share its name.
	names map[string]nameRefs
	// txns holds each producer's staged offsets; open indexes them by group.
	txns      map[int64]*txn
	open      map[string]map[int64]struct{}
	producers map[int64]Producer
}

// New returns empty offset state.
func New() *State {
	return &State{groups: map[string]*group{}, names: map[string]nameRefs{}, txns: map[int64]*txn{}, open: map[string]map[int64]struct{}{}, producers: map[int64]Producer{}}
}

// HasGroup reports whether the group has any committed offset or an open transaction with
// staged offsets: either makes a group without members exist (a simple group, as Kafka creates
// one for a commit from outside group management).
func (s *State) HasGroup(groupID string) bool {
	_, ok := s.groups[groupID]
	return ok || s.HasOpenTxns(groupID)
}

// HasCommitted reports whether the group has at least one committed offset.
func (s *State) HasCommitted(groupID string) bool { _, ok := s.groups[groupID]; return ok }

// Groups lists the groups with committed offsets or open transactions.
func (s *State) Groups() []string {
	out := make([]string, 0, len(s.groups)+len(s.open))
	for g := range s.groups {
		out = append(out, g)
	}
	for g := range s.open {
		if _, ok := s.groups[g]; !ok {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}

// Get returns one partition's committed offset.
func (s *State) Get(groupID, topic string, partition int32) (Committed, bool) {
	g := s.groups[groupID]
	if g == nil {
		return Committed{}, false
	}
	ti, ok := g.topic(topic)
	if !ok {
		return Committed{}, false
	}
	t := &g.topics[ti]
	i, ok := t.find(partition)
	if !ok {
		return Committed{}, false
	}
	return t.committed(i), true
}

// All returns every committed offset of a group, topics sorted, partitions sorted.
func (s *State) All(groupID string) []struct {
	TopicPartition
	Committed
} {
	g := s.groups[groupID]
	if g == nil {
		return nil
	}
	var out []struct {
		TopicPartition
		Committed
	}
	for ti := range g.topics {
		t := &g.topics[ti]
		for i := range t.entries {
			out = append(out, struct {
				TopicPartition
				Committed
			}{TopicPartition{t.name, t.entries[i].partition}, t.committed(i)})
		}
	}
	return out
}

// Commit value versions. 0 and 1 are what builds before topic ids wrote and are still read;
// 2 and 3 add the topic id. The odd versions are materialized transactional offsets, which
// carry the log position of the staged record they came from.
const (
	commitValueV0         = 0 // offset, leader epoch, metadata, commit and expire timestamps
	commitValueStagedV1   = 1 // v0 + staged record's log position
	commitValueV2         = 2 // v0 + topic id
	commitValueStagedV3   = 3 // v1 + topic id
	commitValueNewestRead = commitValueStagedV3
)

// CommitRecord encodes a commit. Key and value share one buffer sized up front: a commit of n
// partitions is n records on the hot path, and growing two builders cost four allocations each.
func CommitRecord(groupID string, tp TopicPartition, c Committed) log.Record {
	rec, _ := AppendCommitRecord(make([]byte, 0, CommitRecordSize(groupID, tp, c)), groupID, tp, c)
	return rec
}

// CommitRecordSize is the exact size of CommitRecord's key and value, so that the records of
// one OffsetCommit share one buffer of the size they need. (Bounding every length and number at
// its widest made that buffer half as large again: a third of the bytes an offset commit
// allocated on the shard, issue 12.)
func CommitRecordSize(groupID string, tp TopicPartition, c Committed) int {
	// kind, two strings, a varint partition; then version, a varlong, a varint, a string, two
	// varlongs and a UUID.
	return 2 + compactStringSize(groupID) + compactStringSize(tp.Topic) + kbin.VarintLen(tp.Partition) +
		2 + kbin.VarlongLen(c.Offset) + kbin.VarintLen(c.LeaderEpoch) + compactStringSize(c.Metadata) +
		kbin.VarlongLen(c.CommitTimestamp) + kbin.VarlongLen(c.ExpireTimestamp) + 16
}

func compactStringSize(s string) int { return kbin.UvarintLen(uint32(len(s)+1)) + len(s) }

// AppendCommitRecord encodes a commit at the end of buf and returns the record and buf after
// it. The record's key and value are capped at their length: appending to buf never writes
// into them.
func AppendCommitRecord(buf []byte, groupID string, tp TopicPartition, c Committed) (log.Record, []byte) {
	kb := records.AppendKey(buf, records.KindOffsetCommit)
	key := kb.String(groupID).String(tp.Topic).Int32(tp.Partition).Build()
	vb := records.AppendValue(key[len(key):], commitValueV2)
	value := vb.Int64(c.Offset).Int32(c.LeaderEpoch).String(c.Metadata).Int64(c.CommitTimestamp).
		Int64(c.ExpireTimestamp).UUID(c.TopicID).Build()
	return log.Record{Key: key[len(buf):len(key):len(key)], Value: value[:len(value):len(value)]}, value[len(value):]
}

// materializedRecord encodes a committed transactional offset: it carries the log position of
// the staged record it came from.
func materializedRecord(groupID string, tp TopicPartition, c Committed) log.Record {
	return log.Record{
		Key: commitKey(groupID, tp),
		Value: records.NewValue(commitValueStagedV3).Int64(c.Offset).Int32(c.LeaderEpoch).String(c.Metadata).
			Int64(c.CommitTimestamp).Int64(c.ExpireTimestamp).Int64(c.LogOffset).UUID(c.TopicID).Build(),
	}
}

// DeleteRecord is the tombstone of one partition's commit.
func DeleteRecord(groupID string, tp TopicPartition) log.Record {
	return log.Record{Key: commitKey(groupID, tp)}
}

func commitKey(groupID string, tp TopicPartition) []byte {
	return records.NewKey(records.KindOffsetCommit).String(groupID).String(tp.Topic).Int32(tp.Partition).Build()
}

// Replay applies a record of one of the offsets kinds (commits, staged transactional offsets,
// transactional producers).
func (s *State) Replay(offset int64, rec log.Record) error {
	kind, err := records.KindOf(rec.Key)
	if err != nil {
		return err
	}
	switch kind {
	case records.KindTxnOffset:
		return s.replayTxnOffset(offset, rec)
	case records.KindTxnProducer:
		return s.replayProducer(rec)
	}
	r, err := records.OpenKey(rec.Key, records.KindOffsetCommit)
	if err != nil {
		return err
	}
	// The names alias the key's bytes: they only look the maps up, and are copied when they
	// become a map key (every commit of a steady group would otherwise copy both).
	groupID, topic, partition := r.UnsafeString(), r.UnsafeString(), r.Int32()
	if err := r.Err(); err != nil {
		return fmt.Errorf("offset commit key: %w", err)
	}
	if rec.Tombstone() {
		s.remove(groupID, topic, partition)
		return nil
	}
	version, v, err := records.ReadValue(rec.Value)
	if err != nil {
		return err
	}
	if err := records.CheckVersion(records.KindOffsetCommit, version, commitValueNewestRead); err != nil {
		return err
	}
	// The metadata aliases the value's bytes too: set keeps a copy only when the topic holds no
	// equal string already (a steady consumer commits the same metadata every time).
	c := Committed{Offset: v.Int64(), LeaderEpoch: v.Int32(), Metadata: v.UnsafeString(), CommitTimestamp: v.Int64(), ExpireTimestamp: v.Int64(), LogOffset: offset}
	if version == commitValueStagedV1 || version == commitValueStagedV3 {
		// A materialized transactional offset keeps the log position of its staged record,
		// which is what orders it against regular commits (spec coordinator-apis §4.3).
		c.LogOffset = v.Int64()
	}
	if version >= commitValueV2 {
		c.TopicID = v.UUID()
	}
	if err := v.Err(); err != nil {
		return fmt.Errorf("offset commit value: %w", err)
	}
	g := s.groups[groupID]
	if g == nil {
		g = &group{}
		s.groups[strings.Clone(groupID)] = g
	}
	ti, ok := g.topic(topic)
	if !ok {
		g.topics = slices.Insert(g.topics, ti, topicOffsets{name: s.holdName(topic)})
	}
	g.topics[ti].set(partition, c)
	return nil
}

func (s *State) remove(groupID, topic string, partition int32) {
	g := s.groups[groupID]
	if g == nil {
		return
	}
	if ti, ok := g.topic(topic); ok {
		t := &g.topics[ti]
		t.remove(partition)
		if len(t.entries) == 0 {
			s.releaseName(t.name)
			g.topics = slices.Delete(g.topics, ti, ti+1)
		}
	}
	if len(g.topics) == 0 {
		delete(s.groups, groupID)
	}
}

type nameRefs struct {
	name string
	refs int
}

// holdName returns the shard's copy of a topic name (topic may alias a record's bytes).
func (s *State) holdName(topic string) string {
	n, ok := s.names[topic]
	if !ok {
		n.name = strings.Clone(topic)
	}
	n.refs++
	s.names[n.name] = n
	return n.name
}

func (s *State) releaseName(topic string) {
	n := s.names[topic]
	if n.refs--; n.refs <= 0 {
		delete(s.names, topic)
		return
	}
	s.names[topic] = n
}

// Settle gives back the spare capacity that replaying a log one record at a time leaves in
// the offsets' slices; the shard calls it once a load is done. Later commits grow them again
// only for partitions or topics a group had not committed before.
func (s *State) Settle() {
	for _, g := range s.groups {
		g.topics = clipped(g.topics)
		for i := range g.topics {
			g.topics[i].settle()
		}
	}
}

// MetadataLength is the length Kafka compares with offset.metadata.max.bytes: Java's
// String.length(), in UTF-16 code units.
func MetadataLength(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}
