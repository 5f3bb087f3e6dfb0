package main

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/gateway"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/upstream"
	"go.uber.org/zap"
)

// txnBackend is the marker relay's access to the shards and the upstream (gateway/txnrelay.go).
type txnBackend struct {
	groups *shard.Set
	up     func() *upstream.Client
	lg     *zap.Logger
	// peers delivers markers for shards another node owns (log.backend=kafka); nil otherwise.
	peers *gateway.PeerMarkers
	// announced is the shard runtime whose load was last announced to the relay.
	announced func(i int32) *runtime.Shard[*shard.Machine]
}

var _ gateway.TxnBackend = (*txnBackend)(nil)

func (b *txnBackend) ShardOf(group string) int32 { return shard.For(group, b.groups.Count()) }

func (b *txnBackend) Mark(ctx context.Context, sh int32, pid int64, epoch int16, commit bool) (int16, error) {
	if b.peers != nil && !b.groups.Owned(sh) {
		// The producer's TxnOffsetCommit went to the shard's owner; its outcome goes there too.
		return b.peers.Mark(ctx, sh, pid, epoch, commit)
	}
	v, err := b.groups.Shard(sh).Write(ctx, shard.RelayTxn(pid, epoch, commit))
	if err != nil {
		return 0, err
	}
	return v.(int16), nil
}

func (b *txnBackend) OpenProducers(ctx context.Context, shards []int32) (map[int64]gateway.OpenProducer, error) {
	b.groups.WaitReady(ctx) // loading shards would only make recovery retry
	if shards == nil {
		for i := range b.groups.Count() {
			shards = append(shards, i)
		}
	}
	out := map[int64]gateway.OpenProducer{}
	for _, i := range shards {
		if b.groups.Shard(i).State() == runtime.StateNotOwned {
			continue // another node's (log.backend=kafka): its staged offsets are that node's to recover
		}
		if b.groups.Shard(i).State() == runtime.StateFailed {
			// Its offsets cannot be read or changed until an operator repairs it; holding every
			// transactional request for it would stop the shards that work too.
			b.lg.Error("a failed shard's staged transactions are not recovered", zap.Int32("shard", i))
			continue
		}
		v, err := b.groups.Shard(i).Read(ctx, shard.OpenProducers())
		if err != nil {
			return nil, err
		}
		for pid, epoch := range v.(map[int64]int16) {
			p := out[pid]
			p.Epoch = max(p.Epoch, epoch)
			p.Shards = append(p.Shards, i)
			out[pid] = p
		}
	}
	return out, nil
}

// ServingShards are the shards that are loaded here and whose load the marker relay was told
// of (state.onGroupLoaded): a shard turns active just before its OnLoaded hook runs, and the
// relay must not answer for a gained shard before it knows to recover it.
func (b *txnBackend) ServingShards() []int32 {
	var out []int32
	for i := range b.groups.Count() {
		sh := b.groups.Shard(i)
		if sh.State() == runtime.StateActive && b.announced != nil && b.announced(i) == sh {
			out = append(out, i)
		}
	}
	return out
}

func (b *txnBackend) Shared() bool { return b.peers != nil }

func (b *txnBackend) Settle(ctx context.Context, pid int64, epoch int16, commit bool, covered func() map[int32]bool) error {
	if b.peers == nil {
		return nil
	}
	return b.peers.Settle(ctx, pid, epoch, commit, covered(), b.groups.Count())
}

func (b *txnBackend) Describe(ctx context.Context, txnID string) (upstream.TxnState, bool, error) {
	return b.up().DescribeTxn(ctx, txnID)
}

func (b *txnBackend) TxnIDsOf(ctx context.Context, pid int64) ([]string, error) {
	return b.up().TxnIDsOf(ctx, pid)
}
