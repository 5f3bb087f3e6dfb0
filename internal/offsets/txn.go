package offsets

// Transactional offsets (spec coordinator-apis §4.3). A TxnOffsetCommit stages offsets per
// producer id; they stay invisible until the transaction's COMMIT marker, which makes each one
// the committed offset unless a regular commit landed after it in the log; an ABORT marker drops
// them. Each staged offset is its own record (KindTxnOffset), and a marker is applied by writing
// explicit records — the materialized commits and tombstones of the staged ones — so that the
// latest value of every key stays self-contained and log compaction can never resurrect a staged
// offset or lose a materialized one. A producer's epoch survives in a KindTxnProducer record so
// that a zombie with an older epoch is fenced even after its staged offsets are gone.

import (
	"fmt"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Pending is one staged transactional offset. Committed.LogOffset is the staged record's
// position in the shard log.
type Pending struct {
	ProducerEpoch int16
	Committed
}

// Producer is what the shard remembers about a transactional producer.
type Producer struct {
	Epoch            int16
	CoordinatorEpoch int32 // -1: no marker seen yet
	LastTimestamp    int64 // ms of its last staged offset or marker
}

// txn is one producer's staged offsets: group -> topic -> partition.
type txn struct {
	groups map[string]map[string]map[int32]Pending
}

// OpenTxn is one producer's open transaction in a group, as an operator sees it.
type OpenTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	// SinceMs is the commit time of its earliest offset still staged in the group. It is
	// derived from the staged offsets rather than kept apart so that a compacted log replays
	// to the same state; an offset staged again in the same transaction makes it look younger,
	// which Kafka Streams, staging each partition once per transaction, never does.
	SinceMs    int64
	Partitions int
}

// StagedEntry is one staged offset with where it belongs.
type StagedEntry struct {
	ProducerID int64
	Group      string
	TopicPartition
	Pending
}

// OpenTxns lists the transactions holding staged offsets of a group, oldest first.
func (s *State) OpenTxns(groupID string) []OpenTxn {
	out := make([]OpenTxn, 0, len(s.open[groupID]))
	for pid := range s.open[groupID] {
		out = append(out, s.openTxn(pid, groupID))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SinceMs != out[j].SinceMs {
			return out[i].SinceMs < out[j].SinceMs
		}
		return out[i].ProducerID < out[j].ProducerID
	})
	return out
}

func (s *State) openTxn(pid int64, groupID string) OpenTxn {
	o := OpenTxn{ProducerID: pid, SinceMs: -1}
	for _, parts := range s.txns[pid].groups[groupID] {
		for _, p := range parts {
			o.ProducerEpoch = max(o.ProducerEpoch, p.ProducerEpoch)
			if o.SinceMs < 0 || p.CommitTimestamp < o.SinceMs {
				o.SinceMs = p.CommitTimestamp
			}
			o.Partitions++
		}
	}
	return o
}

// OldestOpenTxnSince maps each group with an open transaction to the start (ms) of its oldest
// one. It walks the staged offsets only, never the shard's other groups.
func (s *State) OldestOpenTxnSince() map[string]int64 {
	out := make(map[string]int64, len(s.open))
	for g, pids := range s.open {
		for pid := range pids {
			since := s.openTxn(pid, g).SinceMs
			if cur, ok := out[g]; !ok || since < cur {
				out[g] = since
			}
		}
	}
	return out
}

// HasOpenTxns reports whether any producer has offsets staged for the group.
func (s *State) HasOpenTxns(groupID string) bool { return len(s.open[groupID]) > 0 }

// HasPending reports whether any open transaction has staged an offset for the partition.
func (s *State) HasPending(groupID, topic string, partition int32) bool {
	for pid := range s.open[groupID] {
		if _, ok := s.txns[pid].groups[groupID][topic][partition]; ok {
			return true
		}
	}
	return false
}

// Staged returns the offset a producer staged for a partition.
func (s *State) Staged(producerID int64, groupID, topic string, partition int32) (Pending, bool) {
	t := s.txns[producerID]
	if t == nil {
		return Pending{}, false
	}
	p, ok := t.groups[groupID][topic][partition]
	return p, ok
}

// ProducerCount is how many producer ids the state remembers.
func (s *State) ProducerCount() int { return len(s.producers) }

// HasStaged reports whether a producer has offsets staged in any group.
func (s *State) HasStaged(producerID int64) bool { _, ok := s.txns[producerID]; return ok }

// Producer returns what is known about a producer id.
func (s *State) Producer(producerID int64) (Producer, bool) {
	p, ok := s.producers[producerID]
	return p, ok
}

// OpenProducers lists the producers with offsets staged for a group, sorted.
func (s *State) OpenProducers(groupID string) []int64 {
	out := make([]int64, 0, len(s.open[groupID]))
	for pid := range s.open[groupID] {
		out = append(out, pid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// StagedBy lists a producer's staged offsets sorted by group, topic, partition.
func (s *State) StagedBy(producerID int64) []StagedEntry {
	t := s.txns[producerID]
	if t == nil {
		return nil
	}
	var out []StagedEntry
	for g, topics := range t.groups {
		for topic, parts := range topics {
			for p, v := range parts {
				out = append(out, StagedEntry{ProducerID: producerID, Group: g, TopicPartition: TopicPartition{topic, p}, Pending: v})
			}
		}
	}
	sortStaged(out)
	return out
}

// stagedIn lists every staged offset of a group, sorted.
func (s *State) stagedIn(groupID string) []StagedEntry {
	var out []StagedEntry
	for pid := range s.open[groupID] {
		for topic, parts := range s.txns[pid].groups[groupID] {
			for p, v := range parts {
				out = append(out, StagedEntry{ProducerID: pid, Group: groupID, TopicPartition: TopicPartition{topic, p}, Pending: v})
			}
		}
	}
	sortStaged(out)
	return out
}

func sortStaged(out []StagedEntry) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Group != b.Group:
			return a.Group < b.Group
		case a.Topic != b.Topic:
			return a.Topic < b.Topic
		case a.Partition != b.Partition:
			return a.Partition < b.Partition
		}
		return a.ProducerID < b.ProducerID
	})
}

// StageCheck applies the producer-epoch rule of a transactional commit (spec §4.2 step 4):
// an epoch lower than the highest this shard has seen for the producer id is
// INVALID_PRODUCER_EPOCH, as Kafka's log append of the transactional batch would say.
func (s *State) StageCheck(producerID int64, epoch int16) int16 {
	if p, ok := s.producers[producerID]; ok && epoch < p.Epoch {
		return kerr.InvalidProducerEpoch.Code
	}
	return 0
}

// StageRecord encodes one staged transactional offset. Value version 1 adds the topic id to
// version 0's fields; both are read.
func StageRecord(producerID int64, groupID string, tp TopicPartition, p Pending) log.Record {
	return log.Record{
		Key: txnOffsetKey(producerID, groupID, tp),
		Value: records.NewValue(1).Int16(p.ProducerEpoch).Int64(p.Offset).Int32(p.LeaderEpoch).String(p.Metadata).
			Int64(p.CommitTimestamp).UUID(p.TopicID).Build(),
	}
}

// ProducerRecord records a producer's epochs after a staged commit or a marker: the epoch and
// coordinator epoch never go down.
func (s *State) ProducerRecord(producerID int64, epoch int16, coordinatorEpoch int32, now int64) log.Record {
	p, ok := s.producers[producerID]
	if !ok {
		p = Producer{Epoch: epoch, CoordinatorEpoch: coordinatorEpoch}
	}
	p.Epoch = max(p.Epoch, epoch)
	p.CoordinatorEpoch = max(p.CoordinatorEpoch, coordinatorEpoch)
	p.LastTimestamp = now
	return log.Record{
		Key:   producerKey(producerID),
		Value: records.NewValue(0).Int16(p.Epoch).Int32(p.CoordinatorEpoch).Int64(p.LastTimestamp).Build(),
	}
}

func txnOffsetKey(producerID int64, groupID string, tp TopicPartition) []byte {
	return records.NewKey(records.KindTxnOffset).Int64(producerID).String(groupID).String(tp.Topic).Int32(tp.Partition).Build()
}

func producerKey(producerID int64) []byte {
	return records.NewKey(records.KindTxnProducer).Int64(producerID).Build()
}

// CompleteTxn applies a transaction marker for a producer (spec §4.3, §4.4 option A): on
// commit each staged offset becomes the committed one if it is newer in log order than the
// committed value; either way the staged offsets are removed. The code is non-zero when the
// marker is refused: an epoch below the producer's (INVALID_PRODUCER_EPOCH) or a transaction
// coordinator epoch below the last one seen (TRANSACTION_COORDINATOR_FENCED), as Kafka's log
// would answer. A marker for a producer with nothing staged changes no offset, but its epochs
// are still recorded when they are new: a transaction coordinator bumps the epoch when it ends
// a transaction (transaction version 2), and Kafka's log remembers the marker's epoch for the
// partition even where the producer never wrote, so a zombie's later TxnOffsetCommit with the
// older epoch is INVALID_PRODUCER_EPOCH.
func (s *State) CompleteTxn(producerID int64, epoch int16, coordinatorEpoch int32, commit bool, now int64) ([]log.Record, int16) {
	p, known := s.producers[producerID]
	if known && epoch < p.Epoch {
		return nil, kerr.InvalidProducerEpoch.Code
	}
	if known && coordinatorEpoch < p.CoordinatorEpoch {
		return nil, kerr.TransactionCoordinatorFenced.Code
	}
	staged := s.StagedBy(producerID)
	if len(staged) == 0 {
		if known && epoch == p.Epoch && coordinatorEpoch == p.CoordinatorEpoch {
			return nil, 0 // nothing new to remember: a repeated marker writes nothing
		}
		return []log.Record{s.ProducerRecord(producerID, epoch, coordinatorEpoch, now)}, 0
	}
	recs := make([]log.Record, 0, 2*len(staged)+1)
	for _, e := range staged {
		if commit {
			c, ok := s.Get(e.Group, e.Topic, e.Partition)
			if !ok || e.LogOffset > c.LogOffset {
				recs = append(recs, materializedRecord(e.Group, e.TopicPartition, e.Committed))
			}
		}
		recs = append(recs, log.Record{Key: txnOffsetKey(producerID, e.Group, e.TopicPartition)})
	}
	recs = append(recs, s.ProducerRecord(producerID, epoch, coordinatorEpoch, now))
	return recs, 0
}

// DeleteRecords returns the tombstones that remove the committed offset and every staged
// offset of each partition of a group (OffsetDelete, spec §3.4; a deleted topic, §3.5).
func (s *State) DeleteRecords(groupID string, tps []TopicPartition) []log.Record {
	var recs []log.Record
	for _, tp := range tps {
		if _, ok := s.Get(groupID, tp.Topic, tp.Partition); ok {
			recs = append(recs, DeleteRecord(groupID, tp))
		}
		for _, pid := range s.OpenProducers(groupID) {
			if _, ok := s.txns[pid].groups[groupID][tp.Topic][tp.Partition]; ok {
				recs = append(recs, log.Record{Key: txnOffsetKey(pid, groupID, tp)})
			}
		}
	}
	return recs
}

// DeleteGroupRecords returns the tombstones of every committed and staged offset of a group:
// what DeleteGroups appends next to the group's own tombstones. A marker arriving later for a
// producer whose staged offsets were deleted this way finds nothing and changes nothing.
func (s *State) DeleteGroupRecords(groupID string) []log.Record {
	var recs []log.Record
	for _, e := range s.All(groupID) {
		recs = append(recs, DeleteRecord(groupID, e.TopicPartition))
	}
	for _, e := range s.stagedIn(groupID) {
		recs = append(recs, log.Record{Key: txnOffsetKey(e.ProducerID, groupID, e.TopicPartition)})
	}
	return recs
}

func (s *State) replayTxnOffset(offset int64, rec log.Record) error {
	r, err := records.ReadKey(rec.Key, records.KindTxnOffset)
	if err != nil {
		return err
	}
	pid, groupID, topic, partition := r.Int64(), r.String(), r.String(), r.Int32()
	if err := r.Err(); err != nil {
		return fmt.Errorf("txn offset key: %w", err)
	}
	if rec.Tombstone() {
		s.unstage(pid, groupID, topic, partition)
		return nil
	}
	version, v, err := records.ReadValue(rec.Value)
	if err != nil {
		return err
	}
	if err := records.CheckVersion(records.KindTxnOffset, version, 1); err != nil {
		return err
	}
	p := Pending{ProducerEpoch: v.Int16()}
	p.Offset, p.LeaderEpoch, p.Metadata, p.CommitTimestamp = v.Int64(), v.Int32(), v.String(), v.Int64()
	if version >= 1 {
		p.TopicID = v.UUID()
	}
	p.ExpireTimestamp, p.LogOffset = -1, offset
	if err := v.Err(); err != nil {
		return fmt.Errorf("txn offset value: %w", err)
	}
	t := s.txns[pid]
	if t == nil {
		t = &txn{groups: map[string]map[string]map[int32]Pending{}}
		s.txns[pid] = t
	}
	topics := t.groups[groupID]
	if topics == nil {
		topics = map[string]map[int32]Pending{}
		t.groups[groupID] = topics
	}
	parts := topics[topic]
	if parts == nil {
		parts = map[int32]Pending{}
		topics[topic] = parts
	}
	parts[partition] = p
	if s.open[groupID] == nil {
		s.open[groupID] = map[int64]struct{}{}
	}
	s.open[groupID][pid] = struct{}{}
	return nil
}

func (s *State) unstage(pid int64, groupID, topic string, partition int32) {
	t := s.txns[pid]
	if t == nil {
		return
	}
	topics := t.groups[groupID]
	delete(topics[topic], partition)
	if len(topics[topic]) == 0 {
		delete(topics, topic)
	}
	if len(topics) == 0 {
		delete(t.groups, groupID)
		delete(s.open[groupID], pid)
		if len(s.open[groupID]) == 0 {
			delete(s.open, groupID)
		}
	}
	if len(t.groups) == 0 {
		delete(s.txns, pid)
	}
}

func (s *State) replayProducer(rec log.Record) error {
	r, err := records.ReadKey(rec.Key, records.KindTxnProducer)
	if err != nil {
		return err
	}
	pid := r.Int64()
	if err := r.Err(); err != nil {
		return fmt.Errorf("txn producer key: %w", err)
	}
	if rec.Tombstone() {
		delete(s.producers, pid)
		return nil
	}
	version, v, err := records.ReadValue(rec.Value)
	if err != nil {
		return err
	}
	if err := records.CheckVersion(records.KindTxnProducer, version, 0); err != nil {
		return err
	}
	p := Producer{Epoch: v.Int16(), CoordinatorEpoch: v.Int32(), LastTimestamp: v.Int64()}
	if err := v.Err(); err != nil {
		return fmt.Errorf("txn producer value: %w", err)
	}
	s.producers[pid] = p
	return nil
}
