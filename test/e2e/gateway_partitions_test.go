package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Partitions added upstream behind the gateway's back (kafka-topics --alter against the
// cluster) are consumed at once by clients, whose Metadata is forwarded, and their commits must
// be taken as Kafka takes them, not refused until the gateway's next metadata refresh; so must a
// transactional producer's offsets for a topic created upstream a moment ago. The same sequence
// runs against the broker itself.
func TestGateway_CommitsForPartitionsAndTopicsJustAddedUpstream(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "upstream.metadata.max.age.ms=600000")
	for _, target := range []struct{ name, addr string }{{"kafka", upstreamAddr}, {"gateway", g.Addr}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		direct := kadm.NewClient(newClient(t, upstreamAddr))
		byName := newClient(t, target.addr, kgo.MaxVersions(func() *kversion.Versions {
			v := kversion.Stable()
			v.SetMaxKeyVersion(8, 9)
			return v
		}()))
		cl := newClient(t, target.addr)
		run := target.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		topic, group := "gw-grown-"+run, "gw-grown-group-"+run
		if _, err := direct.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		listed, err := direct.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		id := listed[topic].ID
		commit := func(c *kgo.Client, partition int32) int16 {
			t.Helper()
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.Generation = group, -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = topic, id // v10 on: by id
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = partition, 9
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, c)
			if err != nil {
				t.Fatalf("%s: commit: %v", target.name, err)
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
		if code := commit(byName, 0); code != 0 {
			t.Fatalf("%s: commit for partition 0: code %d", target.name, code)
		}
		if _, err := direct.UpdatePartitions(ctx, 3, topic); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			md, err := newClientMetadata(ctx, cl, topic)
			if err == nil && md == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the client never saw 3 partitions of %s (%d, %v)", target.name, topic, md, err)
			}
		}
		if code := commit(byName, 2); code != 0 {
			t.Fatalf("%s: commit by name for a partition just added upstream: code %d, Kafka takes it", target.name, code)
		}
		if code := commit(cl, 1); code != 0 {
			t.Fatalf("%s: commit by id for a partition just added upstream: code %d, Kafka takes it", target.name, code)
		}

		fresh := "gw-fresh-txn-" + run
		if _, err := direct.CreateTopic(ctx, 1, 1, nil, fresh); err != nil {
			t.Fatal(err)
		}
		freshListed, err := direct.ListTopics(ctx, fresh)
		if err != nil {
			t.Fatal(err)
		}
		if code := txnOffsetCommit(ctx, t, cl, "gw-txn-"+run, group, fresh, freshListed[fresh].ID); code != 0 {
			t.Fatalf("%s: TxnOffsetCommit for a topic just created upstream: code %d, Kafka takes it", target.name, code)
		}
	}
}

// newClientMetadata is the partition count the client's Metadata (through its bootstrap) shows.
func newClientMetadata(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 {
		return 0, err
	}
	return len(resp.Topics[0].Partitions), nil
}

// txnOffsetCommit stages an offset of topic's partition 0 (named by name and id) for group in a transaction of txnID,
// aborts it, and returns the TxnOffsetCommit's code.
func txnOffsetCommit(ctx context.Context, t *testing.T, cl *kgo.Client, txnID, group, topic string, id [16]byte) int16 {
	t.Helper()
	var pid int64
	var epoch int16
	retry(t, "InitProducerId", func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &txnID, 60000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return -2
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return resp.ErrorCode
	})
	retry(t, "AddOffsetsToTxn", func() int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, epoch, group
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return -2
		}
		return resp.ErrorCode
	})
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txnID, group, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, id // v6 on: by id
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, false
	end.RequestWith(ctx, cl)
	return resp.Topics[0].Partitions[0].ErrorCode
}
