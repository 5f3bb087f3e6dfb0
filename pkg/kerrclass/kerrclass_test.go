package kerrclass

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	produce = kmsg.Produce.Int16()
	// The KIP's "Transaction API" column: every request of the transactional protocol.
	txnAPIs = []int16{
		kmsg.InitProducerID.Int16(), kmsg.AddPartitionsToTxn.Int16(), kmsg.AddOffsetsToTxn.Int16(),
		kmsg.EndTxn.Int16(), kmsg.TxnOffsetCommit.Int16(), kmsg.FindCoordinator.Int16(),
	}
	txnOffsetCommit = kmsg.TxnOffsetCommit.Int16()
)

// na marks a column where the KIP's table says the exception cannot occur.
const na Category = 255

// TestKIP1050Table is the KIP's final exception table, row by row: every exception it names,
// the wire codes that raise it (none for client-side exceptions, which a Go client meets as
// plain errors) and the expected category on the Produce API and on the transactional APIs.
func TestKIP1050Table(t *testing.T) {
	plain := errors.New("client-side failure")
	rows := []struct {
		exception    string
		codes        []int16
		goErr        error // for exceptions without a code
		produce, txn Category
	}{
		{"TransactionAbortableException", []int16{kerr.TransactionAbortable.Code}, nil, Abortable, Abortable},

		{"CorruptRecordException", []int16{kerr.CorruptMessage.Code}, nil, Retriable, Retriable},
		{"NotEnoughReplicasAfterAppendException", []int16{kerr.NotEnoughReplicasAfterAppend.Code}, nil, Retriable, Retriable},
		{"NotEnoughReplicasException", []int16{kerr.NotEnoughReplicas.Code}, nil, Retriable, Retriable},
		{"TimeoutException", []int16{kerr.RequestTimedOut.Code}, nil, Retriable, Retriable},
		{"ConcurrentTransactionsException", []int16{kerr.ConcurrentTransactions.Code}, nil, Retriable, Retriable},
		{"CoordinatorLoadInProgressException", []int16{kerr.CoordinatorLoadInProgress.Code}, nil, Retriable, Retriable},
		{"OutOfOrderSequenceException", []int16{kerr.OutOfOrderSequenceNumber.Code}, nil, Retriable, na},

		{"UnknownTopicOrPartitionException", []int16{kerr.UnknownTopicOrPartition.Code}, nil, RefreshRetriable, RefreshRetriable},
		{"NotLeaderOrFollowerException", []int16{kerr.NotLeaderForPartition.Code}, nil, RefreshRetriable, RefreshRetriable},
		{"NotCoordinatorException", []int16{kerr.NotCoordinator.Code}, nil, RefreshRetriable, RefreshRetriable},
		{"CoordinatorNotAvailableException", []int16{kerr.CoordinatorNotAvailable.Code}, nil, RefreshRetriable, RefreshRetriable},

		{"UnknownProducerIdException", []int16{kerr.UnknownProducerID.Code}, nil, ApplicationRecoverable, ApplicationRecoverable},
		{"ProducerFencedException", []int16{kerr.ProducerFenced.Code}, nil, ApplicationRecoverable, ApplicationRecoverable},
		{"InvalidProducerEpochException", []int16{kerr.InvalidProducerEpoch.Code}, nil, ApplicationRecoverable, ApplicationRecoverable},
		{"InvalidPidMappingException", []int16{kerr.InvalidProducerIDMapping.Code}, nil, ApplicationRecoverable, ApplicationRecoverable},
		{"FencedInstanceIdException", []int16{kerr.FencedInstanceID.Code}, nil, na, ApplicationRecoverable},
		{"UnknownMemberIdException", []int16{kerr.UnknownMemberID.Code}, nil, na, ApplicationRecoverable},
		{"IllegalGenerationException", []int16{kerr.IllegalGeneration.Code}, nil, na, ApplicationRecoverable},

		{"InvalidTxnStateException", []int16{kerr.InvalidTxnState.Code}, nil, Abortable, ApplicationRecoverable},

		{"AuthenticationException", []int16{kerr.SaslAuthenticationFailed.Code, kerr.UnsupportedSaslMechanism.Code, kerr.IllegalSaslState.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"ClusterAuthorizationException", []int16{kerr.ClusterAuthorizationFailed.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"TransactionalIdAuthorizationException", []int16{kerr.TransactionalIDAuthorizationFailed.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"UnsupportedVersionException", []int16{kerr.UnsupportedVersion.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"UnsupportedForMessageFormatException", []int16{kerr.UnsupportedForMessageFormat.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"InvalidRecordException", []int16{kerr.InvalidRecord.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"InvalidRequiredAcksException", []int16{kerr.InvalidRequiredAcks.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"RecordBatchTooLargeException", []int16{kerr.RecordListTooLarge.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"InvalidTopicException", []int16{kerr.InvalidTopicException.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"TopicAuthorizationException", []int16{kerr.TopicAuthorizationFailed.Code}, nil, InvalidConfiguration, InvalidConfiguration},
		{"GroupAuthorizationException", []int16{kerr.GroupAuthorizationFailed.Code}, nil, InvalidConfiguration, InvalidConfiguration},

		// Client-side exceptions: the KIP files them under application-recoverable ("not
		// expected"); a Go client meets them as non-Kafka errors, which are Unclassified and
		// whose Action is Restart, the application-recoverable answer.
		{"IllegalStateException", nil, plain, Unclassified, Unclassified},
		{"KafkaException", nil, plain, Unclassified, Unclassified},
		{"RuntimeException", nil, plain, Unclassified, Unclassified},
		{"CorrelationIdMismatchException", nil, plain, Unclassified, Unclassified},
	}
	for _, r := range rows {
		check := func(api int16, want Category) {
			t.Helper()
			if want == na {
				return
			}
			for _, c := range r.codes {
				if got := Of(api, c); got != want {
					t.Errorf("%s: Of(%s, %d) = %s, want %s", r.exception, kmsg.NameForKey(api), c, got, want)
				}
				if got := OfError(api, fmt.Errorf("wrapped: %w", kerr.ErrorForCode(c))); got != want {
					t.Errorf("%s: OfError(%s, wrapped %d) = %s, want %s", r.exception, kmsg.NameForKey(api), c, got, want)
				}
			}
			if r.goErr != nil {
				if got := OfError(api, r.goErr); got != want {
					t.Errorf("%s: OfError(%s) = %s, want %s", r.exception, kmsg.NameForKey(api), got, want)
				}
				if got := OfError(api, r.goErr).Action(); got != ApplicationRecoverable.Action() {
					t.Errorf("%s: action %s, want the application-recoverable %s", r.exception, got, ApplicationRecoverable.Action())
				}
			}
		}
		check(produce, r.produce)
		for _, api := range txnAPIs {
			check(api, r.txn)
		}
	}
}

// CommitFailedException is what a Kafka 4.4 producer raises on TxnOffsetCommit for every code
// that says the consumer's group metadata is stale, v6's two included.
func TestCommitFailedCodesOnTxnOffsetCommit(t *testing.T) {
	for _, c := range []int16{kerr.UnknownMemberID.Code, kerr.IllegalGeneration.Code, kerr.GroupIDNotFound.Code, kerr.StaleMemberEpoch.Code} {
		if got := Of(txnOffsetCommit, c); got != ApplicationRecoverable {
			t.Errorf("TxnOffsetCommit code %d: %s, want application-recoverable", c, got)
		}
	}
	// Elsewhere the KIP gives them no category.
	if got := Of(kmsg.DescribeGroups.Int16(), kerr.GroupIDNotFound.Code); got != Unclassified {
		t.Errorf("DescribeGroups GROUP_ID_NOT_FOUND: %s, want unclassified", got)
	}
}

// A fenced producer must never be retried: whatever API reported it, the answer is a restart.
func TestFencedIsNeverRetriable(t *testing.T) {
	for api := int16(0); api <= kmsg.MaxKey; api++ {
		for _, c := range []int16{kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code} {
			if IsRetriable(api, c) {
				t.Errorf("%s code %d is retriable", kmsg.NameForKey(api), c)
			}
		}
	}
}

func TestRetriesExhaustedAbort(t *testing.T) {
	for _, err := range []error{kgo.ErrRecordTimeout, kgo.ErrRecordRetries, kgo.ErrAborting} {
		if got := OfError(produce, err); got != Abortable {
			t.Errorf("%v: %s, want abortable", err, got)
		}
	}
	if OfError(produce, nil) != None || Of(produce, 0) != None || None.Action() != Continue {
		t.Error("no error must be None / Continue")
	}
}

func TestUnknownCodesAreUnclassified(t *testing.T) {
	for _, c := range []int16{kerr.UnknownServerError.Code, kerr.RebalanceInProgress.Code, kerr.OffsetMetadataTooLarge.Code, kerr.InvalidGroupID.Code, 9999} {
		if got := Of(txnOffsetCommit, c); got != Unclassified || got.Action() != Restart {
			t.Errorf("code %d: %s/%s, want unclassified/restart", c, got, got.Action())
		}
	}
	if Category(42).String() != "category(42)" || Action(9).String() != "action(9)" {
		t.Error("out-of-range names")
	}
}
