package kafkalog

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// endTransaction ends kc's transaction once franz-go's partition table holds partition, which
// the transaction produced to. franz-go (v1.22.3) decides whether a transaction reached any
// partition by walking that table, and on a client's first produce to a topic it hands the
// records to the partition's buffer before it stores the table: a transaction produced, flushed
// and ended inside that window ends without an EndTxn, as if it were empty, while the broker
// holds it open. A round "committed" so was acknowledged and never committed (its records are
// aborted at the transaction timeout), and the client, which still counts the partition as
// added, sends the next transaction's records into the open one without adding it again. Seen
// 1 run in 40-120 of TestStuckReplayAbortsTheNodeProducersHangingTransaction under -race.
//
// produced says whether any record of the transaction was acknowledged by the broker: only
// then is partition known to be in the table soon; otherwise there is nothing to wait for.
func endTransaction(ctx context.Context, kc *kgo.Client, topic string, partition int32, produced bool, try kgo.TransactionEndTry) error {
	if produced {
		awaitPartitionTable(ctx, kc, topic, partition)
	}
	return kc.EndTransaction(ctx, try)
}

// partitionTableWait bounds awaitPartitionTable: the table is stored right after the records
// are handed over, so anything longer means the table is not coming, and ending the
// transaction then is no worse than before.
const partitionTableWait = 2 * time.Second

// awaitPartitionTable waits until kc's producer partition table has topic's partition.
func awaitPartitionTable(ctx context.Context, kc *kgo.Client, topic string, partition int32) {
	deadline := time.Now().Add(partitionTableWait)
	for {
		if leader, _, _ := kc.PartitionLeader(topic, partition); leader >= 0 {
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}
