package upstream

import (
	"context"
	"errors"
	"slices"

	"github.com/coordinatord/coordinatord/pkg/kerrclass"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// TxnOffsetsCheck is a transactional offset commit to verify against the upstream's
// transaction coordinator: the producer's transaction must be ongoing there and contain the
// group's __consumer_offsets partition (added by AddOffsetsToTxn).
type TxnOffsetsCheck struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	// OffsetsPartition is the group's partition of __consumer_offsets as the upstream
	// numbers them; -1 while that is unknown (the upstream has no such topic yet and numbers
	// by its own offsets.topic.num.partitions), when any offsets partition verifies.
	OffsetsPartition int32
}

// offsetsTopic is Kafka's group-offsets topic, the partition a transaction adds for a group.
const offsetsTopic = "__consumer_offsets"

// OffsetsPartitions is how many partitions the upstream's __consumer_offsets has, 0 while the
// view does not show it.
func (v *View) OffsetsPartitions() int32 {
	if t, ok := v.topic(offsetsTopic); ok {
		return t.Partitions
	}
	return 0
}

// VerifyTxnOffsets answers what Kafka's group coordinator learns from KIP-890's verification
// (AddPartitionsToTxn with VerifyOnly, which needs CLUSTER_ACTION; DescribeTransactions tells
// the same with TRANSACTIONAL_ID DESCRIBE): 0 when the transaction may stage offsets, else the
// code the TxnOffsetCommit gets (the handler translates it for old versions).
//
//   - the transactional id is unknown, or maps to another producer id: INVALID_PRODUCER_ID_MAPPING;
//   - another epoch: INVALID_PRODUCER_EPOCH (Kafka's rewrite of PRODUCER_FENCED for this path);
//   - the transaction is committing or aborting: CONCURRENT_TRANSACTIONS (retriable);
//   - otherwise, unless the partition is in the transaction: TRANSACTION_ABORTABLE;
//   - the upstream could not answer (retries ran out): COORDINATOR_LOAD_IN_PROGRESS, which
//     every client retries without looking the coordinator up again, as Kafka answers when its
//     verification meets a network error;
//   - the upstream refuses to describe it (our credentials): INVALID_TXN_STATE, as Kafka
//     answers when its own verification is not authorized;
//   - an upstream too old for DescribeTransactions: 0, verification skipped, as Kafka skips
//     it for a transaction coordinator without verification.
func (c *Client) VerifyTxnOffsets(ctx context.Context, chk TxnOffsetsCheck) int16 {
	if !c.Current().serves(kmsg.DescribeTransactions.Int16()) {
		// Kafka before 3.0 lists no DescribeTransactions, and kgo refuses to send a request
		// its broker does not list: a local error, not UNSUPPORTED_VERSION, which would read
		// as a network failure and answer every commit COORDINATOR_LOAD_IN_PROGRESS for ever.
		return 0
	}
	if c.opts.RequestTimeout > 0 {
		// The commit waits for this answer: bound it by the upstream request timeout rather
		// than by the client's retries.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{chk.TransactionalID}
	resp, err := req.RequestWith(ctx, c.kc)
	code := int16(0)
	var st kmsg.DescribeTransactionsResponseTransactionState
	switch {
	case err != nil:
		var ke *kerr.Error
		if errors.As(err, &ke) {
			code = ke.Code
		} else {
			code = kerr.NetworkException.Code
		}
	case len(resp.TransactionStates) != 1:
		code = kerr.NetworkException.Code
	default:
		st = resp.TransactionStates[0]
		code = st.ErrorCode
	}
	if code != 0 {
		return c.verifyFailed(chk, code, err)
	}
	switch {
	case st.ProducerID != chk.ProducerID:
		return kerr.InvalidProducerIDMapping.Code
	case st.ProducerEpoch != chk.ProducerEpoch:
		return kerr.InvalidProducerEpoch.Code
	case st.State == "PrepareCommit" || st.State == "PrepareAbort":
		return kerr.ConcurrentTransactions.Code
	}
	for _, t := range st.Topics {
		if t.Topic == offsetsTopic && (chk.OffsetsPartition < 0 && len(t.Partitions) > 0 || slices.Contains(t.Partitions, chk.OffsetsPartition)) {
			return 0
		}
	}
	return kerr.TransactionAbortable.Code
}

// serves says whether the upstream can be sent key: some broker's ApiVersions lists it, or no
// broker's is known yet (then the request is tried). A nil view knows nothing either.
func (v *View) serves(key int16) bool {
	if v == nil || len(v.Versions) == 0 {
		return true
	}
	for _, av := range v.Versions {
		for _, k := range av.ApiKeys {
			if k.ApiKey == key {
				return true
			}
		}
	}
	return false
}

func (c *Client) verifyFailed(chk TxnOffsetsCheck, code int16, err error) int16 {
	api := kmsg.DescribeTransactions.Int16()
	switch {
	case code == kerr.TransactionalIDNotFound.Code:
		return kerr.InvalidProducerIDMapping.Code
	case code == kerr.UnsupportedVersion.Code:
		return 0
	case kerrclass.Of(api, code) == kerrclass.InvalidConfiguration:
		c.lg.Warn("the upstream refuses to describe a transaction, so transactional offset commits cannot be verified; grant DESCRIBE on the transactional ids",
			zap.String("transactional_id", chk.TransactionalID), zap.Int16("code", code))
		return kerr.InvalidTxnState.Code
	case kerrclass.IsRetriable(api, code):
		c.lg.Debug("could not verify a transaction with the upstream", zap.String("transactional_id", chk.TransactionalID), zap.Int16("code", code), zap.Error(err))
		return kerr.CoordinatorLoadInProgress.Code
	default:
		c.lg.Warn("the upstream answered a transaction's description with an unexpected code",
			zap.String("transactional_id", chk.TransactionalID), zap.Int16("code", code))
		return kerr.CoordinatorLoadInProgress.Code
	}
}
