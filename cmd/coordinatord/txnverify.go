package main

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/handlers"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/upstream"
)

// verifyTxnOffsets verifies a TxnOffsetCommit's transaction with the upstream's transaction
// coordinator (KIP-890). The group's offsets partition is numbered as the upstream numbers
// its __consumer_offsets partitions, since that is the partition AddOffsetsToTxn added. While
// the view does not show that topic, the upstream numbers by a configuration coordinatord
// cannot read, so any offsets partition in the transaction verifies it.
func (m *gatewayMode) verifyTxnOffsets(ctx context.Context, v handlers.TxnVerification) int16 {
	part := int32(-1)
	if view := m.up.Current(); view != nil && view.OffsetsPartitions() > 0 {
		part = shard.For(v.Group, view.OffsetsPartitions())
	}
	return m.up.VerifyTxnOffsets(ctx, upstream.TxnOffsetsCheck{
		TransactionalID: v.TransactionalID, ProducerID: v.ProducerID, ProducerEpoch: v.ProducerEpoch,
		OffsetsPartition: part,
	})
}
