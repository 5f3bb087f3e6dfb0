package shard

import "github.com/coordinatord/coordinatord/internal/state/runtime"

// RelayTxn applies a transaction's outcome that the gateway learned on the forwarded path
// (docs/transactions.md): CompleteTxn with the coordinator epoch this shard last saw for the
// producer. The relay is not a transaction coordinator and has no epoch of its own; reusing the
// recorded one keeps an operator's or a coordinator's earlier marker from fencing it.
func RelayTxn(producerID int64, producerEpoch int16, commit bool) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		coordEpoch := int32(-1)
		if p, ok := m.Offsets.Producer(producerID); ok {
			coordEpoch = p.CoordinatorEpoch
		}
		recs, code := m.Offsets.CompleteTxn(producerID, producerEpoch, coordEpoch, commit, c.Now().UnixMilli())
		return runtime.Result{Records: recs, Response: code}
	}
}

// OpenProducers reads the producers with offsets staged on this shard and their epochs.
func OpenProducers() runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) { return m.Offsets.OpenProducerEpochs(), nil }
}
