package kafkalog

import (
	"errors"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/coordinatord/coordinatord/internal/wire/wiretest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// fakeCluster is a one-broker cluster on loopback for the load's failure tests: the broker
// advertises apis ({key, min, max}), leads every partition of topic (none when topic is empty)
// and is its own group and transaction coordinator; every other request goes to serve, whose
// nil answers nothing (as a broker that never answers).
type fakeCluster struct {
	apis       [][3]int16
	topic      string
	partitions int32
	serve      func(h wire.Header, body []byte) kmsg.Response
}

// start serves c until the test ends and returns its address.
func (c fakeCluster) start(t *testing.T) string {
	t.Helper()
	s := wiretest.Listen(t)
	port := int32(s.Addr.Port)
	s.Start(func(h wire.Header, body []byte) kmsg.Response {
		switch kmsg.Key(h.Key) {
		case kmsg.ApiVersions:
			r := kmsg.NewPtrApiVersionsResponse()
			for _, k := range c.apis {
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MinVersion, ak.MaxVersion = k[0], k[1], k[2]
				r.ApiKeys = append(r.ApiKeys, ak)
			}
			return r
		case kmsg.Metadata:
			r := kmsg.NewPtrMetadataResponse()
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = 1, "127.0.0.1", port
			r.Brokers = append(r.Brokers, b)
			r.ControllerID = 1
			if c.topic != "" {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = kmsg.StringPtr(c.topic)
				for p := int32(0); p < c.partitions; p++ {
					mp := kmsg.NewMetadataResponseTopicPartition()
					mp.Partition, mp.Leader, mp.Replicas, mp.ISR = p, 1, []int32{1}, []int32{1}
					mt.Partitions = append(mt.Partitions, mp)
				}
				r.Topics = append(r.Topics, mt)
			}
			return r
		case kmsg.FindCoordinator:
			r := kmsg.NewPtrFindCoordinatorResponse()
			r.NodeID, r.Host, r.Port = 1, "127.0.0.1", port
			return r
		}
		if c.serve == nil {
			return nil
		}
		return c.serve(h, body)
	})
	return s.Addr.String()
}

// addPartitionsAnswer accepts every partition an AddPartitionsToTxn request adds.
func addPartitionsAnswer(h wire.Header, body []byte) kmsg.Response {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	if !wiretest.Request(h, body, req) {
		return nil
	}
	r := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewAddPartitionsToTxnResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			pp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			pp.Partition = p
			t.Partitions = append(t.Partitions, pp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// describeProducersAnswer reports active(partition) as the producers of each partition asked for.
func describeProducersAnswer(h wire.Header, body []byte, active func(partition int32) []kmsg.DescribeProducersResponseTopicPartitionActiveProducer) kmsg.Response {
	req := kmsg.NewPtrDescribeProducersRequest()
	if !wiretest.Request(h, body, req) {
		return nil
	}
	r := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			pp := kmsg.NewDescribeProducersResponseTopicPartition()
			pp.Partition, pp.ActiveProducers = p, active(p)
			t.Partitions = append(t.Partitions, pp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// stateBackend is a backend on the topic "state" of the cluster that client reaches.
func stateBackend(lg *zap.Logger, prefix string, partitions int32, txnTimeout time.Duration, client ...kgo.Opt) *Backend {
	return &Backend{lg: lg, opts: Options{Client: client, Topic: "state", Partitions: partitions,
		TransactionalIDPrefix: prefix, NodeTransactionalIDPrefix: prefix + "node-", NodeID: 1,
		TransactionTimeout: txnTimeout, MaxBatchBytes: defaultMaxBatchBytes}}
}

// loadInBackground runs l's Load, replaying into nothing; the channel gets its error.
func loadInBackground(l log.Log) <-chan error {
	loaded := make(chan error, 1)
	go func() {
		_, err := l.Load(func(int64, log.Record) error { return nil })
		loaded <- err
	}()
	return loaded
}

// closeEndsLoad closes l and fails the test unless the load running in the background (loaded,
// from loadInBackground) then ends with log.ErrClosed before deadline.
func closeEndsLoad(t *testing.T, l log.Log, loaded <-chan error, deadline <-chan time.Time) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-loaded:
		if !errors.Is(err, log.ErrClosed) {
			t.Fatalf("load after close: %v, want log.ErrClosed", err)
		}
	case <-deadline:
		t.Fatal("close did not end the load")
	}
}
