package offsets

// Retention (spec coordinator-apis §3.5): which committed offsets a sweep removes, which
// offsets of deleted topics go, and when a transactional producer is forgotten.

import (
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// ExpireRules is what the group's type says about expiring its offsets now.
type ExpireRules struct {
	// Subscribed reports whether the group is subscribed to a topic; offsets of subscribed
	// topics never expire. Nil: subscribed to nothing.
	Subscribed func(topic string) bool
	// Base is the time an offset's retention counts from when the commit set no explicit
	// expire timestamp (commit time, or when a classic group became Empty).
	Base func(Committed) int64
}

// Expire returns the tombstones of the group's offsets whose retention has passed at now (ms):
// an explicit expire timestamp (OffsetCommit v1-v4) wins; otherwise now - Base(offset) >=
// retention. A partition with a staged transactional offset never expires. allGone reports
// that after these tombstones the group has no committed offset and no open transaction, so
// an Empty group may be deleted.
func (s *State) Expire(groupID string, r ExpireRules, now, retentionMs int64) (recs []log.Record, allGone bool) {
	allGone = true
	for _, e := range s.All(groupID) {
		if r.Subscribed != nil && r.Subscribed(e.Topic) {
			allGone = false
			continue
		}
		expired := false
		if e.ExpireTimestamp >= 0 {
			expired = now >= e.ExpireTimestamp
		} else {
			expired = now-r.Base(e.Committed) >= retentionMs
		}
		if !expired || s.HasPending(groupID, e.Topic, e.Partition) {
			allGone = false
			continue
		}
		recs = append(recs, DeleteRecord(groupID, e.TopicPartition))
	}
	return recs, allGone && !s.HasOpenTxns(groupID)
}

// TopicLookup reads a catalog snapshot: the id of the topic with this name, if there is one.
type TopicLookup func(topic string) (id [16]byte, ok bool)

// DropDeletedTopics returns the tombstones of every committed and staged offset of topics the
// catalog no longer has (Kafka's onPartitionsDeleted), including offsets committed for an
// earlier topic of the same name that was deleted and re-created under a new id. topics reads a
// catalog snapshot taken at snapshotAt (ms); an offset written after that may be for a topic
// created after the snapshot, so only offsets committed or staged at or before it are dropped.
func (s *State) DropDeletedTopics(topics TopicLookup, snapshotAt int64) []log.Record {
	gone := func(topic string, c Committed) bool {
		if c.CommitTimestamp > snapshotAt {
			return false
		}
		id, ok := topics(topic)
		return !ok || !c.For(id)
	}
	var recs []log.Record
	for _, g := range s.Groups() {
		for _, e := range s.All(g) {
			if gone(e.Topic, e.Committed) {
				recs = append(recs, DeleteRecord(g, e.TopicPartition))
			}
		}
		for _, e := range s.stagedIn(g) {
			if gone(e.Topic, e.Committed) {
				recs = append(recs, log.Record{Key: txnOffsetKey(e.ProducerID, g, e.TopicPartition)})
			}
		}
	}
	return recs
}

// ExpireProducers returns the tombstones of producers with nothing staged whose last activity
// is at least expirationMs old (producer.id.expiration.ms): after that Kafka forgets a
// producer's epoch too.
func (s *State) ExpireProducers(now, expirationMs int64) []log.Record {
	var pids []int64
	for pid, p := range s.producers {
		if _, staged := s.txns[pid]; !staged && now-p.LastTimestamp >= expirationMs {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	recs := make([]log.Record, 0, len(pids))
	for _, pid := range pids {
		recs = append(recs, log.Record{Key: producerKey(pid)})
	}
	return recs
}
