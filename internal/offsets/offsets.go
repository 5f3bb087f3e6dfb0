// Package offsets is the committed-offset state of a shard: what every group has committed for
// each partition, how commits are validated and encoded as records, and how they are read back.
// Group membership rules (generations, member epochs) belong to the group types, which decide
// before calling in here whether a commit is allowed at all.
package offsets

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
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

// group holds one group's committed offsets.
type group struct {
	topics map[string]*topicOffsets
}

// topicOffsets is one topic's committed offsets in a group, sorted by partition. Committed
// offsets are most of a coordinator's memory, so an offset is a compact entry in a slice rather
// than a Committed in a map (72 bytes plus the map's overhead): the topic id, the same for
// almost every entry of a topic, is kept once per topic, and the fields few commits set (an id
// other than the topic's, an explicit expiry from OffsetCommit v1-v4) go to a side table.
type topicOffsets struct {
	id      [16]byte // the topic id of every entry without an own one in rare
	entries []offsetEntry
	rare    map[int32]rareFields
}

type offsetEntry struct {
	offset          int64
	commitTimestamp int64
	logOffset       int64
	metadata        string // Kafka Streams sets it on every partition it commits
	partition       int32
	leaderEpoch     int32
	hasRare         bool
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

func (t *topicOffsets) committed(e *offsetEntry) Committed {
	c := Committed{Offset: e.offset, LeaderEpoch: e.leaderEpoch, Metadata: e.metadata, CommitTimestamp: e.commitTimestamp,
		ExpireTimestamp: -1, LogOffset: e.logOffset, TopicID: t.id}
	if e.hasRare {
		r := t.rare[e.partition]
		c.TopicID, c.ExpireTimestamp = r.topicID, r.expireTimestamp
	}
	return c
}

func (t *topicOffsets) set(partition int32, c Committed) {
	if len(t.entries) == 0 {
		t.id = c.TopicID
	}
	e := offsetEntry{offset: c.Offset, commitTimestamp: c.CommitTimestamp, logOffset: c.LogOffset, metadata: c.Metadata,
		partition: partition, leaderEpoch: c.LeaderEpoch, hasRare: c.TopicID != t.id || c.ExpireTimestamp != -1}
	if e.hasRare {
		if t.rare == nil {
			t.rare = map[int32]rareFields{}
		}
		t.rare[partition] = rareFields{topicID: c.TopicID, expireTimestamp: c.ExpireTimestamp}
	} else if t.rare != nil {
		delete(t.rare, partition)
	}
	i, ok := t.find(partition)
	if ok {
		t.entries[i] = e
		return
	}
	t.entries = slices.Insert(t.entries, i, e)
}

func (t *topicOffsets) remove(partition int32) {
	i, ok := t.find(partition)
	if !ok {
		return
	}
	if t.entries[i].hasRare {
		delete(t.rare, partition)
	}
	t.entries = slices.Delete(t.entries, i, i+1)
}

// State is the offsets of every group on a shard: the committed ones and, separately, the
// offsets staged by open transactions (txn.go).
type State struct {
	groups map[string]*group
	// txns holds each producer's staged offsets; open indexes them by group.
	txns      map[int64]*txn
	open      map[string]map[int64]struct{}
	producers map[int64]Producer
}

// New returns empty offset state.
func New() *State {
	return &State{groups: map[string]*group{}, txns: map[int64]*txn{}, open: map[string]map[int64]struct{}{}, producers: map[int64]Producer{}}
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
	t := g.topics[topic]
	if t == nil {
		return Committed{}, false
	}
	i, ok := t.find(partition)
	if !ok {
		return Committed{}, false
	}
	return t.committed(&t.entries[i]), true
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
	topics := make([]string, 0, len(g.topics))
	for t := range g.topics {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, name := range topics {
		t := g.topics[name]
		for i := range t.entries {
			out = append(out, struct {
				TopicPartition
				Committed
			}{TopicPartition{name, t.entries[i].partition}, t.committed(&t.entries[i])})
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

// CommitRecordSize bounds the bytes of CommitRecord's key and value, so that the records of
// one OffsetCommit can share one buffer.
func CommitRecordSize(groupID string, tp TopicPartition, c Committed) int {
	// kind, two strings (each at most a 5-byte length), a varint partition; then version, three
	// varlongs, a varint, a string and a UUID.
	return 2 + 5 + len(groupID) + 5 + len(tp.Topic) + 5 + 2 + 3*10 + 5 + 5 + len(c.Metadata) + 16
}

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
	if version > commitValueNewestRead {
		return fmt.Errorf("offset commit value version %d is newer than this build understands", version)
	}
	c := Committed{Offset: v.Int64(), LeaderEpoch: v.Int32(), Metadata: v.String(), CommitTimestamp: v.Int64(), ExpireTimestamp: v.Int64(), LogOffset: offset}
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
		g = &group{topics: map[string]*topicOffsets{}}
		s.groups[strings.Clone(groupID)] = g
	}
	t := g.topics[topic]
	if t == nil {
		t = &topicOffsets{}
		g.topics[strings.Clone(topic)] = t
	}
	t.set(partition, c)
	return nil
}

func (s *State) remove(groupID, topic string, partition int32) {
	g := s.groups[groupID]
	if g == nil {
		return
	}
	if t := g.topics[topic]; t != nil {
		t.remove(partition)
		if len(t.entries) == 0 {
			delete(g.topics, topic)
		}
	}
	if len(g.topics) == 0 {
		delete(s.groups, groupID)
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
