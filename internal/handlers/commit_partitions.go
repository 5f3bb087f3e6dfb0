package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// commitTopic is one topic of an OffsetCommit or TxnOffsetCommit: by name, or by id in the
// versions that carry ids. Its partitions' TopicPartition.Topic is filled in by resolveCommit.
type commitTopic struct {
	name  string
	id    [16]byte
	parts []shard.CommitPartition
}

// pendingCode marks a partition whose answer comes from the group.
const pendingCode = -2

// resolveCommit applies the catalog check of spec coordinator-apis §3.2 step 1: a partition of
// an unknown topic (unknown id when byID) or beyond the topic's partitions is refused alone, with
// catCode(catErr) for all when the catalog cannot be read. codes[i][j] answers topic i, partition
// j, or is pendingCode for the partitions returned for the group to decide, in request order.
// A topic denied (TOPIC READ) answers TOPIC_AUTHORIZATION_FAILED before its existence is
// looked at, as Kafka's; by id, an unknown id is UNKNOWN_TOPIC_ID first since it has no name.
// commit is built in into when it has room: into may be the array that holds every topic's parts
// one after the other in request order, since each partition passed on is written at or before
// the place it was read from (and that array is then the caller's no longer).
// codesInto (one entry per topic) and flatInto (one per partition) are used for codes when
// they have room, so that a caller may lend them from its stack or from an array it shares.
func resolveCommit(snap *meta.Snapshot, catErr error, catCode func(error) int16, byID bool, topics []commitTopic, into []shard.CommitPartition, codesInto [][]int16, flatInto []int16, denied func(topic string) bool) (codes [][]int16, commit []shard.CommitPartition) {
	// One array for every code and one for the partitions passed on: per-topic slices and an
	// appended commit list were several allocations per request on the commit hot path.
	total := 0
	for _, ct := range topics {
		total += len(ct.parts)
	}
	if codes = codesInto; len(codes) != len(topics) {
		codes = make([][]int16, len(topics))
	}
	flat := flatInto
	if len(flat) < total {
		flat = make([]int16, total)
	}
	if commit = into[:0]; cap(commit) < total {
		commit = make([]shard.CommitPartition, 0, total)
	}
	for i, ct := range topics {
		codes[i], flat = flat[:len(ct.parts):len(ct.parts)], flat[len(ct.parts):]
		var (
			topic *meta.Topic
			code  int16
		)
		switch {
		case !byID && denied(ct.name):
			code = kerr.TopicAuthorizationFailed.Code
		case catErr != nil:
			code = catCode(catErr)
		case byID:
			var ok bool
			if topic, ok = snap.TopicByID(ct.id); !ok {
				code = kerr.UnknownTopicID.Code
			} else if denied(topic.Name) {
				code = kerr.TopicAuthorizationFailed.Code
			}
		default:
			var ok bool
			if topic, ok = snap.Topic(ct.name); !ok {
				code = kerr.UnknownTopicOrPartition.Code
			}
		}
		for j, p := range ct.parts {
			switch {
			case code != 0:
				codes[i][j] = code
			case p.Partition < 0 || p.Partition >= topic.Partitions:
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			default:
				codes[i][j] = pendingCode
				p.Topic, p.TopicID = topic.Name, topic.ID
				commit = append(commit, p)
			}
		}
	}
	return codes, commit
}

// answerCodes replaces the pendingCode entries of codes, in order, with the group's answers;
// when the group could not be asked, err's code (through errCode) answers them all.
func answerCodes(codes [][]int16, group []int16, err error, errCode func(error) int16) {
	k := 0
	for i := range codes {
		for j, c := range codes[i] {
			if c != pendingCode {
				continue
			}
			if err != nil {
				codes[i][j] = errCode(err)
			} else {
				codes[i][j] = group[k]
			}
			k++
		}
	}
}

// catalogForCommit reads the catalog for a commit's topics, and in gateway mode looks at the
// upstream again first (spec gateway G6.3) when a topic or a partition the commit names is not
// in it: a topic created, or partitions added, upstream a moment ago, which the committing
// consumer already learned of from the Metadata the gateway forwarded. Without the look the
// commit would be refused until the next periodic refresh, where Kafka takes it.
func (t *Table) catalogForCommit(ctx context.Context, byID bool, topics []commitTopic) (*meta.Snapshot, error) {
	snap, err := t.catalog(ctx)
	if err != nil || t.deps.RefreshCatalog == nil || commitCovered(snap, byID, topics) {
		return snap, err
	}
	if err := t.deps.RefreshCatalog(ctx); err != nil {
		t.log.Debug("catalog refresh for an unknown topic or partition failed", zap.Error(err))
		return snap, nil
	}
	return t.catalog(ctx)
}

// commitCovered reports whether the catalog has every topic a commit names and each partition
// it names of them. An empty name or a zero id is no topic to look for (resolveCommit refuses
// it), nor is a negative partition.
func commitCovered(snap *meta.Snapshot, byID bool, topics []commitTopic) bool {
	for _, ct := range topics {
		var (
			topic *meta.Topic
			ok    bool
		)
		switch {
		case byID && ct.id == [16]byte{}, !byID && ct.name == "":
			continue
		case byID:
			topic, ok = snap.TopicByID(ct.id)
		default:
			topic, ok = snap.Topic(ct.name)
		}
		if !ok {
			return false
		}
		for _, p := range ct.parts {
			if p.Partition >= topic.Partitions {
				return false
			}
		}
	}
	return true
}
