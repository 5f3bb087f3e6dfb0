package main

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/handlers"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/upstream"
)

// verifyTxnOffsets verifies a TxnOffsetCommit's transaction with the upstream's transaction
// coordinator (KIP-890). The group's offsets partition is numbered as the upstream numbers
// its __consumer_offsets partitions, since that is the partition AddOffsetsToTxn added; while
// the view does not show that topic, as this node numbers its shards (the two must be equal for
// transactions to work at all, docs/transactions.md).
func (m *gatewayMode) verifyTxnOffsets(ctx context.Context, v handlers.TxnVerification) int16 {
	n := m.shards
	if view := m.up.Current(); view != nil && view.OffsetsPartitions() > 0 {
		n = view.OffsetsPartitions()
	}
	return m.up.VerifyTxnOffsets(ctx, upstream.TxnOffsetsCheck{
		TransactionalID: v.TransactionalID, ProducerID: v.ProducerID, ProducerEpoch: v.ProducerEpoch,
		OffsetsPartition: shard.For(v.Group, n),
	})
}
