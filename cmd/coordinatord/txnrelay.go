package main

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/gateway"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/upstream"
)

// txnBackend is the marker relay's access to the shards and the upstream (gateway/txnrelay.go).
type txnBackend struct {
	groups *shard.Set
	up     func() *upstream.Client
}

var _ gateway.TxnBackend = (*txnBackend)(nil)

func (b *txnBackend) ShardOf(group string) int32 { return shard.For(group, b.groups.Count()) }

func (b *txnBackend) Mark(ctx context.Context, sh int32, pid int64, epoch int16, commit bool) (int16, error) {
	v, err := b.groups.Shard(sh).Write(ctx, shard.RelayTxn(pid, epoch, commit))
	if err != nil {
		return 0, err
	}
	return v.(int16), nil
}

func (b *txnBackend) OpenProducers(ctx context.Context) (map[int64]gateway.OpenProducer, error) {
	out := map[int64]gateway.OpenProducer{}
	for i := range b.groups.Count() {
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

func (b *txnBackend) Describe(ctx context.Context, txnID string) (upstream.TxnState, bool, error) {
	return b.up().DescribeTxn(ctx, txnID)
}

func (b *txnBackend) TxnIDsOf(ctx context.Context, pid int64) ([]string, error) {
	return b.up().TxnIDsOf(ctx, pid)
}
