package kerrclass_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordinatord/coordinatord/pkg/kerrclass"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumeProcessProduce is an exactly-once copy from one topic to another with franz-go: each
// batch is produced and its input offsets committed in one transaction. It runs until ctx ends
// or an error needs an operator; an error that only needs a new producer starts a new session,
// which fences the old one and resumes from the offsets last committed.
func consumeProcessProduce(ctx context.Context, brokers []string, txnID, group, in, out string) error {
	for {
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(brokers...),
			kgo.TransactionalID(txnID),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
		)
		if err != nil {
			return err
		}
		err = transactBatches(ctx, sess, out)
		sess.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if afterEnd(err) != kerrclass.Restart {
			return err
		}
	}
}

// transactBatches runs transactions until one fails in a way the session cannot survive.
func transactBatches(ctx context.Context, sess *kgo.GroupTransactSession, out string) error {
	for {
		fetches := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if afterFetch(err) != kerrclass.Retry && fetchErr == nil {
				fetchErr = err
			}
		})
		if fetchErr != nil {
			return fetchErr
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		var records []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			records = append(records, &kgo.Record{Topic: out, Key: r.Key, Value: r.Value})
		})
		end := kgo.TryCommit
		if err := sess.ProduceSync(ctx, records...).FirstErr(); err != nil {
			switch afterProduce(err) {
			case kerrclass.Abort:
				end = kgo.TryAbort // the same input is fetched again after the abort
			default:
				return err
			}
		}
		// End commits the consumed offsets with TxnOffsetCommit and the transaction with
		// EndTxn, and aborts instead when the group rebalanced or a commit was refused.
		if _, err := sess.End(ctx, end); err != nil {
			return err
		}
	}
}

// afterFetch: fetch errors the client keeps retrying are logged and polled past.
func afterFetch(err error) kerrclass.Action {
	return kerrclass.OfError(kmsg.Fetch.Int16(), err).Action()
}

// afterProduce: a record that could not be produced leaves the transaction incomplete, so even
// a retriable cause (the client's retries ran out) means aborting it.
func afterProduce(err error) kerrclass.Action {
	a := kerrclass.OfError(kmsg.Produce.Int16(), err).Action()
	if a == kerrclass.Retry {
		return kerrclass.Abort
	}
	return a
}

// afterEnd: franz-go retries End's requests itself and aborts when it can, so an error from End
// (or anything else that ends a session) leaves the producer in a state only a new session
// clears, unless an operator must act first.
func afterEnd(err error) kerrclass.Action {
	if kerrclass.OfError(kmsg.EndTxn.Int16(), err).Action() == kerrclass.Stop {
		return kerrclass.Stop
	}
	return kerrclass.Restart
}

// The decisions of the loop above for errors it can meet, simulated so that the example runs
// without a broker; connect it to one with consumeProcessProduce(ctx, brokers, ...).
func Example_transactionalLoop() {
	_ = consumeProcessProduce

	for _, e := range []struct {
		step string
		err  error
		do   func(error) kerrclass.Action
	}{
		{"fetch", kerr.NotLeaderForPartition, afterFetch},
		{"produce", kgo.ErrRecordTimeout, afterProduce},
		{"produce", kerr.InvalidTxnState, afterProduce},
		{"produce", kerr.ProducerFenced, afterProduce},
		{"end", fmt.Errorf("commit offsets: %w", kerr.CoordinatorLoadInProgress), afterEnd},
		{"end", kerr.ProducerFenced, afterEnd},
		{"end", kerr.TransactionalIDAuthorizationFailed, afterEnd},
	} {
		fmt.Printf("%s, %s: %s\n", e.step, nameOf(e.err), e.do(e.err))
	}
	fmt.Println(kerrclass.Of(kmsg.TxnOffsetCommit.Int16(), kerr.CoordinatorLoadInProgress.Code))
	fmt.Println(kerrclass.Of(kmsg.TxnOffsetCommit.Int16(), kerr.InvalidProducerEpoch.Code))
	// Output:
	// fetch, NOT_LEADER_FOR_PARTITION: retry
	// produce, records have timed out before they were able to be produced: abort
	// produce, INVALID_TXN_STATE: abort
	// produce, PRODUCER_FENCED: restart
	// end, COORDINATOR_LOAD_IN_PROGRESS: restart
	// end, PRODUCER_FENCED: restart
	// end, TRANSACTIONAL_ID_AUTHORIZATION_FAILED: stop
	// retriable
	// application-recoverable
}

func nameOf(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}
