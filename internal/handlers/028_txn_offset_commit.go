package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnOffsetCommit stages offsets in a producer's open transaction (spec coordinator-apis §4.1,
// §4.2): partitions of unknown topics (v6: unknown topic ids) are refused one by one, the group
// and the producer epoch decide the rest, and the staged offsets stay invisible until a COMMIT
// marker arrives through WriteTxnMarkers. The response has no top-level error at any version.
//
// Where a transaction coordinator can be asked (gateway mode), a v0-4 commit (transaction
// version 1, whose producer added the offsets partition with AddOffsetsToTxn) is verified
// first, as Kafka's group coordinator does since KIP-890: offsets staged for a transaction the
// coordinator does not know as ongoing would never see a marker. v5+ producers leave adding
// the partition to the group coordinator, which the marker relay is to do (docs/transactions.md).
//
// Not done here: the TRANSACTIONAL_ID WRITE / GROUP READ / TOPIC READ checks (with ACLs).
func (t *Table) txnOffsetCommit(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)

	// Kafka's order: the transactional id, then the group, then each topic.
	if !t.authorize(r, acl.ResourceTransactionalID, req.TransactionalID, acl.OpWrite) {
		return txnCommitFailed(req, resp, kerr.TransactionalIDAuthorizationFailed.Code)
	}
	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		return txnCommitFailed(req, resp, kerr.GroupAuthorizationFailed.Code)
	}
	topics := make([]commitTopic, len(req.Topics))
	for i, rt := range req.Topics {
		topics[i] = commitTopic{name: rt.Topic, id: rt.TopicID}
		for _, p := range rt.Partitions {
			topics[i].parts = append(topics[i].parts, shard.CommitPartition{
				TopicPartition: offsets.TopicPartition{Partition: p.Partition},
				Offset:         p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, RetentionMs: -1,
			})
		}
	}
	snap, catErr := t.catalogForCommit(ctx, r.Version >= 6, topics)
	codes, stage := resolveCommit(snap, catErr, coordinatorCode, r.Version >= 6, topics, nil, nil, nil, func(topic string) bool {
		return !t.topicAllowed(r, topic, acl.OpRead)
	})

	var (
		groupCodes []int16
		err        error
	)
	switch {
	case len(stage) == 0:
	case req.Group == "":
		groupCodes = make([]int16, len(stage))
		fillCodes(groupCodes, kerr.InvalidGroupID.Code)
	default:
		if code := t.verifyTxn(ctx, r.Version, req); code != 0 {
			groupCodes = make([]int16, len(stage))
			fillCodes(groupCodes, code)
			break
		}
		var v any
		v, err = t.deps.Groups.For(req.Group).Write(ctx, shard.TxnCommitOffsets(shard.TxnCommitRequest{
			CommitRequest: shard.CommitRequest{
				Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
				Version: r.Version, Partitions: stage, MaxMetadata: t.deps.Limits.OffsetMetadataMaxBytes,
			},
			ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		}))
		if err == nil {
			groupCodes = v.([]int16)
		}
	}
	answerCodes(codes, groupCodes, err, commitWriteCode)

	for i, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for j, p := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, txnOffsetCommitCode(r.Version, codes[i][j])
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// verifyTxn is the commit's verification: 0, or the code of every partition to be staged.
func (t *Table) verifyTxn(ctx context.Context, version int16, req *kmsg.TxnOffsetCommitRequest) int16 {
	if version > 4 || t.deps.VerifyTxnOffsets == nil {
		return 0
	}
	return t.deps.VerifyTxnOffsets(ctx, TxnVerification{
		TransactionalID: req.TransactionalID, Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
	})
}

func fillCodes(codes []int16, code int16) {
	for i := range codes {
		codes[i] = code
	}
}

// txnOffsetCommitCode translates a semantic code into the one a TxnOffsetCommit version
// understands (spec coordinator-apis §4.5): the Java producer turns any code it does not expect
// into a fatal error.
func txnOffsetCommitCode(version, code int16) int16 {
	switch code {
	case kerr.CoordinatorLoadInProgress.Code:
		if version < 2 {
			return kerr.CoordinatorNotAvailable.Code // pre-2.0 producers crash on the loading code
		}
	case kerr.TransactionAbortable.Code:
		if version < 4 {
			return kerr.InvalidTxnState.Code
		}
	case kerr.GroupIDNotFound.Code, kerr.StaleMemberEpoch.Code:
		if version < 6 {
			return kerr.IllegalGeneration.Code
		}
	}
	return code
}

// txnCommitFailed answers every partition with one code (TxnOffsetCommit has no top level).
func txnCommitFailed(req *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse, code int16) kmsg.Response {
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, p := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
