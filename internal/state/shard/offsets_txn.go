package shard

// Transactional offset commits (spec coordinator-apis §4): TxnOffsetCommit stages offsets per
// producer id, WriteTxnMarkers commits or aborts them, and a RequireStable OffsetFetch reports
// partitions with staged offsets as unstable.

import (
	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TxnCommitRequest is a TxnOffsetCommit addressed to one group. The embedded CommitRequest's
// Version is the TxnOffsetCommit version; partitions' RetentionMs is ignored.
type TxnCommitRequest struct {
	CommitRequest
	ProducerID    int64
	ProducerEpoch int16
}

// TxnCommitOffsets validates a transactional commit and stages the partitions that pass. The
// response is one semantic error code per partition, in request order (the handler translates
// codes an old version does not know). Group state is never enforced beyond membership and
// generation: no REBALANCE_IN_PROGRESS on this path (§4.2 step 5).
func TxnCommitOffsets(r TxnCommitRequest) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		codes := make([]int16, len(r.Partitions))
		fail := func(code int16) runtime.Result {
			for i := range codes {
				codes[i] = code
			}
			return runtime.Result{Response: codes}
		}
		if code := m.validateTxnCommit(r.CommitRequest); code != 0 {
			return fail(code)
		}
		if code := m.Offsets.StageCheck(r.ProducerID, r.ProducerEpoch); code != 0 {
			return fail(code)
		}
		now := c.Now().UnixMilli()
		recs := make([]log.Record, 0, len(r.Partitions)+1)
		for i, p := range r.Partitions {
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			if offsets.MetadataLength(meta) > r.MaxMetadata {
				codes[i] = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			recs = append(recs, offsets.StageRecord(r.ProducerID, r.Group, p.TopicPartition, offsets.Pending{
				ProducerEpoch: r.ProducerEpoch,
				Committed:     offsets.Committed{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: meta, CommitTimestamp: now, ExpireTimestamp: -1, TopicID: p.TopicID},
			}))
		}
		if len(recs) > 0 {
			recs = append(recs, m.Offsets.ProducerRecord(r.ProducerID, r.ProducerEpoch, -1, now))
		}
		return runtime.Result{Records: recs, Response: codes}
	}
}

// validateTxnCommit asks the group type that owns the group (through the same validators as
// OffsetCommit, flagged Transactional), else applies the simple-group rules: a missing group
// accepts generation < 0 and is GROUP_ID_NOT_FOUND otherwise; an existing simple group has no
// members, so anything claiming membership is UNKNOWN_MEMBER_ID.
func (m *Machine) validateTxnCommit(r CommitRequest) int16 {
	r.Transactional = true
	if code, owned := m.ownerCode(r); owned {
		return code
	}
	if !m.Offsets.HasGroup(r.Group) {
		if r.Generation < 0 {
			return 0
		}
		return kerr.GroupIDNotFound.Code
	}
	if r.Generation < 0 && r.MemberID == "" && r.InstanceID == nil {
		return 0
	}
	return kerr.UnknownMemberID.Code
}

// CompleteTxn applies a WriteTxnMarkers marker for a producer to this shard (the
// __consumer_offsets partition with this shard's number). The response is the partition's
// error code. maxProducers (0: unbounded) caps the producer ids the shard remembers before a
// marker for an unknown producer with nothing staged stops recording anything.
func CompleteTxn(producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, maxProducers int) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		if _, known := m.Offsets.Producer(producerID); !known && !m.Offsets.HasStaged(producerID) &&
			maxProducers > 0 && m.Offsets.ProducerCount() >= maxProducers {
			// Such a marker changes no offset; remembering its epoch only fences a late
			// TxnOffsetCommit of the transaction it ended. Without a cap, markers for made-up
			// producer ids would add a record each until producer.id.expiration.ms.
			return runtime.Result{Response: int16(0)}
		}
		recs, code := m.Offsets.CompleteTxn(producerID, producerEpoch, coordinatorEpoch, commit, c.Now().UnixMilli())
		return runtime.Result{Records: recs, Response: code}
	}
}

// FetchOffsetsStable is FetchOffsets for RequireStable (OffsetFetch v7+): partitions with an
// offset staged by an open transaction come back Unstable. Like Kafka, it runs on the write
// path, so it sees every commit and marker already accepted, and it answers only once all of
// that is durable. A fetch of all partitions lists committed partitions only.
func FetchOffsetsStable(group string, parts []offsets.TopicPartition) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		v, err := FetchOffsets(group, parts)(m)
		if err != nil {
			return runtime.Result{Err: err}
		}
		out := v.([]FetchPartition)
		for i := range out {
			out[i].Unstable = m.Offsets.HasPending(group, out[i].Topic, out[i].Partition)
		}
		return runtime.Result{Response: out}
	}
}
