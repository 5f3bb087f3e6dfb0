package kafkalog

import (
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// A produce that Kafka answers CONCURRENT_TRANSACTIONS (the previous round's markers are still
// being written) is retried by kgo only after a metadata update, spaced by MetadataMinAge. With
// kgo's default of 5 s such a round held its shard's acknowledgements for up to 5 s (issue 18's
// p99); the shard producer must space them as Kafka's own clients space retries (100 ms). How
// long the rounds take is measured by BenchmarkBrokerShardRounds; this guards the setting.
func TestShardProducerRetriesConcurrentTransactionsSoon(t *testing.T) {
	b := &Backend{opts: Options{Client: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Topic: "t", Partitions: 2,
		TransactionalIDPrefix: "p-", TransactionTimeout: time.Second, MaxBatchBytes: defaultMaxBatchBytes}}
	b.lg = zap.NewNop()
	l, err := b.Open(1, log.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, kc := range l.(*kafkaLog).kcs {
		age, _ := kc.OptValue(kgo.MetadataMinAge).(time.Duration)
		if age <= 0 || age > 100*time.Millisecond {
			t.Fatalf("shard producer %d MetadataMinAge %v: a produce answered CONCURRENT_TRANSACTIONS would wait that long for its retry; want at most 100ms", i, age)
		}
	}
}
