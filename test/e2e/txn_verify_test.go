package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-890 verification through the gateway: a TxnOffsetCommit (v0-4, transaction version 1)
// for a transaction that has not added the group's offsets partition upstream is refused with
// the code Kafka's group coordinator uses, and accepted once AddOffsetsToTxn added it; a
// producer with an old epoch is fenced.
func TestGateway_TxnOffsetCommitVerifiedUpstream(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group, txnID := "gw-txn-"+suffix, "gw-txn-group-"+suffix, "gw-txn-id-"+suffix
	createTopic(t, ctx, cl, topic)

	var pid int64
	var epoch int16
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &txnID, 60000
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			pid, epoch = resp.ProducerID, resp.ProducerEpoch
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("InitProducerId through the gateway: %v %v", err, resp)
		}
	}
	c := dialWire(t, g.Addr)
	commit := func(version, withEpoch int16) int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txnID, group, pid, withEpoch, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Offset = 5
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		r, _ := c.roundTrip(req, version)
		return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}

	if got := commit(4, epoch); got != kerr.TransactionAbortable.Code {
		t.Errorf("v4 before AddOffsetsToTxn: %v, want TRANSACTION_ABORTABLE", kerr.ErrorForCode(got))
	}
	if got := commit(3, epoch); got != kerr.InvalidTxnState.Code {
		t.Errorf("v3 before AddOffsetsToTxn: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(got))
	}

	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := add.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("AddOffsetsToTxn: %v %v", err, resp)
		}
	}
	if got := commit(4, epoch); got != 0 {
		t.Errorf("v4 after AddOffsetsToTxn: %v, want NONE", kerr.ErrorForCode(got))
	}
	if epoch > 0 {
		if got := commit(4, epoch-1); got != kerr.InvalidProducerEpoch.Code {
			t.Errorf("v4 with an older epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(got))
		}
	}

	// Leave nothing open upstream (coordinatord keeps the staged offsets: no marker reaches it).
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, false
	if resp, err := end.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Logf("EndTxn abort: %v %v", err, resp)
	}
}
