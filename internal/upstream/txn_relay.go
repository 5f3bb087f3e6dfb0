package upstream

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnState is the upstream transaction coordinator's view of a transactional id.
type TxnState struct {
	TransactionalID string
	State           string // Empty, Ongoing, PrepareCommit, CompleteCommit, PrepareAbort, CompleteAbort, Dead, PrepareEpochFence
	ProducerID      int64
	ProducerEpoch   int16
	TimeoutMs       int32
}

func (c *Client) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.opts.RequestTimeout > 0 {
		return context.WithTimeout(ctx, c.opts.RequestTimeout)
	}
	return context.WithCancel(ctx)
}

// DescribeTxn asks the upstream for a transactional id's current transaction. found is false
// when the upstream does not know the id (TRANSACTIONAL_ID_NOT_FOUND).
func (c *Client) DescribeTxn(ctx context.Context, txnID string) (st TxnState, found bool, err error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{txnID}
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return st, false, err
	}
	if len(resp.TransactionStates) != 1 {
		return st, false, fmt.Errorf("DescribeTransactions answered %d states for one id", len(resp.TransactionStates))
	}
	s := resp.TransactionStates[0]
	if s.ErrorCode == kerr.TransactionalIDNotFound.Code {
		return st, false, nil
	}
	if err := kerr.ErrorForCode(s.ErrorCode); err != nil {
		return st, false, err
	}
	return TxnState{TransactionalID: s.TransactionalID, State: s.State, ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch, TimeoutMs: s.TimeoutMillis}, true, nil
}

// TxnIDsOf lists the transactional ids the upstream maps to a producer id (ListTransactions
// with a producer id filter, across every broker).
func (c *Client) TxnIDsOf(ctx context.Context, producerID int64) ([]string, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	req := kmsg.NewPtrListTransactionsRequest()
	req.ProducerIDFilters = []int64{producerID}
	shards := c.kc.RequestSharded(ctx, req)
	var ids []string
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, sh.Err
		}
		resp := sh.Resp.(*kmsg.ListTransactionsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range resp.TransactionStates {
			if t.ProducerID == producerID {
				ids = append(ids, t.TransactionalID)
			}
		}
	}
	return ids, nil
}
