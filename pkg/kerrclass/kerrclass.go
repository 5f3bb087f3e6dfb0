// Package kerrclass sorts Kafka error codes into the categories of KIP-1050 ("Consistent error
// handling for Transactions"), so that a transactional client can decide, for each error it
// meets, whether to retry, abort the transaction, or rebuild its producer.
//
// The categories are those of the KIP's final exception hierarchy as shipped in
// kafka-clients 4.1 and later (RetriableException, RefreshRetriableException,
// TransactionAbortableException, ApplicationRecoverableException,
// InvalidConfigurationException). Where the KIP classifies a code differently per API (an
// invalid transaction state is abortable on Produce and application-recoverable on the
// transactional APIs), Of takes the API key of the request that got the code.
//
// The package depends on nothing but franz-go; it is meant for any Go program that talks to
// Kafka, and coordinatord uses it for its own upstream client.
package kerrclass

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Category is a KIP-1050 error category.
type Category uint8

const (
	// None is the category of code 0 and of a nil error.
	None Category = iota
	// Retriable: the client retries the request as it is (a loading coordinator, concurrent
	// transactions, a timeout). An application that sees one after the client's own retries
	// ran out must abort the transaction rather than repeat it (KAFKA-19176).
	Retriable
	// RefreshRetriable: the client refreshes metadata or finds the coordinator again, then
	// retries (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION).
	RefreshRetriable
	// Abortable: the application aborts the transaction; the producer stays usable.
	Abortable
	// ApplicationRecoverable: the producer is finished (fenced, unknown producer id, lost
	// group membership). The application closes it, creates a new one and restarts from its
	// last committed state.
	ApplicationRecoverable
	// InvalidConfiguration: an operator must act (ACLs, versions, configs); retrying or
	// restarting cannot help. This is KIP-1050's fatal category.
	InvalidConfiguration
	// Unclassified: a code the KIP gives no category (a Java client raises a plain
	// KafkaException, which the Java transactional producer treats as fatal). The KIP's advice
	// for such errors is to handle them as application-recoverable; Action does.
	Unclassified
)

var categoryNames = [...]string{"none", "retriable", "refresh-retriable", "abortable", "application-recoverable", "invalid-configuration", "unclassified"}

func (c Category) String() string {
	if int(c) < len(categoryNames) {
		return categoryNames[c]
	}
	return "category(" + itoa(int(c)) + ")"
}

// Action is what a transactional consume-process-produce loop does about an error.
type Action uint8

const (
	// Continue: no error.
	Continue Action = iota
	// Retry the call (the client usually already has; a loop retries a step it can repeat
	// without side effects, such as a commit that was not acknowledged).
	Retry
	// Abort the transaction and process the same input again.
	Abort
	// Restart: close the client, create a new one, and resume from committed offsets.
	Restart
	// Stop: give up and report; configuration or permissions are wrong.
	Stop
)

var actionNames = [...]string{"continue", "retry", "abort", "restart", "stop"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action(" + itoa(int(a)) + ")"
}

// Action is the category's answer for an error that reached the application.
func (c Category) Action() Action {
	switch c {
	case None:
		return Continue
	case Retriable, RefreshRetriable:
		return Retry
	case Abortable:
		return Abort
	case InvalidConfiguration:
		return Stop
	default:
		return Restart
	}
}

// byCode is the API-independent category of each code that has one: the place of the code's
// exception class in the kafka-clients 4.4 hierarchy (every InvalidMetadataException is
// refresh-retriable). Codes not listed are Unclassified unless an API rule below says otherwise.
var byCode = map[int16]Category{
	kerr.CorruptMessage.Code:                     Retriable,
	kerr.RequestTimedOut.Code:                    Retriable,
	kerr.CoordinatorLoadInProgress.Code:          Retriable,
	kerr.NotEnoughReplicas.Code:                  Retriable,
	kerr.NotEnoughReplicasAfterAppend.Code:       Retriable,
	kerr.NotController.Code:                      Retriable,
	kerr.ConcurrentTransactions.Code:             Retriable,
	kerr.FetchSessionIDNotFound.Code:             Retriable,
	kerr.InvalidFetchSessionEpoch.Code:           Retriable,
	kerr.UnknownLeaderEpoch.Code:                 Retriable,
	kerr.OffsetNotAvailable.Code:                 Retriable,
	kerr.UnstableOffsetCommit.Code:               Retriable,
	kerr.ThrottlingQuotaExceeded.Code:            Retriable,
	kerr.FetchSessionTopicIDError.Code:           Retriable,
	kerr.ShareSessionNotFound.Code:               Retriable,
	kerr.InvalidShareSessionEpoch.Code:           Retriable,
	kerr.ShareSessionLimitReached.Code:           Retriable,
	kerr.UnknownTopicOrPartition.Code:            RefreshRetriable,
	kerr.LeaderNotAvailable.Code:                 RefreshRetriable,
	kerr.NotLeaderForPartition.Code:              RefreshRetriable,
	kerr.ReplicaNotAvailable.Code:                RefreshRetriable,
	kerr.NetworkException.Code:                   RefreshRetriable,
	kerr.CoordinatorNotAvailable.Code:            RefreshRetriable,
	kerr.NotCoordinator.Code:                     RefreshRetriable,
	kerr.KafkaStorageError.Code:                  RefreshRetriable,
	kerr.ListenerNotFound.Code:                   RefreshRetriable,
	kerr.FencedLeaderEpoch.Code:                  RefreshRetriable,
	kerr.PreferredLeaderNotAvailable.Code:        RefreshRetriable,
	kerr.EligibleLeadersNotAvailable.Code:        RefreshRetriable,
	kerr.ElectionNotNeeded.Code:                  RefreshRetriable,
	kerr.UnknownTopicID.Code:                     RefreshRetriable,
	kerr.InconsistentTopicID.Code:                RefreshRetriable,
	kerr.TransactionAbortable.Code:               Abortable,
	kerr.IllegalGeneration.Code:                  ApplicationRecoverable,
	kerr.UnknownMemberID.Code:                    ApplicationRecoverable,
	kerr.InvalidProducerEpoch.Code:               ApplicationRecoverable,
	kerr.InvalidProducerIDMapping.Code:           ApplicationRecoverable,
	kerr.FencedInstanceID.Code:                   ApplicationRecoverable,
	kerr.ProducerFenced.Code:                     ApplicationRecoverable,
	kerr.UnknownProducerID.Code:                  ApplicationRecoverable, // KIP-1050 table; no 4.4 base class
	kerr.InvalidTxnState.Code:                    ApplicationRecoverable, // on Produce: Abortable (below)
	kerr.InvalidTopicException.Code:              InvalidConfiguration,
	kerr.RecordListTooLarge.Code:                 InvalidConfiguration,
	kerr.InvalidRequiredAcks.Code:                InvalidConfiguration,
	kerr.TopicAuthorizationFailed.Code:           InvalidConfiguration,
	kerr.GroupAuthorizationFailed.Code:           InvalidConfiguration,
	kerr.ClusterAuthorizationFailed.Code:         InvalidConfiguration,
	kerr.UnsupportedSaslMechanism.Code:           InvalidConfiguration,
	kerr.IllegalSaslState.Code:                   InvalidConfiguration,
	kerr.UnsupportedVersion.Code:                 InvalidConfiguration,
	kerr.InvalidReplicationFactor.Code:           InvalidConfiguration,
	kerr.InvalidConfig.Code:                      InvalidConfiguration,
	kerr.UnsupportedForMessageFormat.Code:        InvalidConfiguration,
	kerr.TransactionalIDAuthorizationFailed.Code: InvalidConfiguration,
	kerr.SaslAuthenticationFailed.Code:           InvalidConfiguration,
	kerr.DelegationTokenAuthorizationFailed.Code: InvalidConfiguration,
	kerr.InvalidRecord.Code:                      InvalidConfiguration,
}

// Of returns the category of code in an answer to the request with API key api (a kmsg.Key
// as int16; -1 when unknown).
//
// API rules, from the KIP's table and the Kafka 4.4 producer:
//   - INVALID_TXN_STATE is abortable on Produce (KIP-890 relies on it) and
//     application-recoverable on every transactional API.
//   - OUT_OF_ORDER_SEQUENCE_NUMBER is retriable on Produce and unclassified elsewhere.
//   - On TxnOffsetCommit, GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH (v6+) mean the same as
//     ILLEGAL_GENERATION: the consumer's group metadata is stale (the producer raises
//     CommitFailedException for all of them), application-recoverable.
func Of(api int16, code int16) Category {
	if code == 0 {
		return None
	}
	switch code {
	case kerr.InvalidTxnState.Code:
		if api == kmsg.Produce.Int16() {
			return Abortable
		}
	case kerr.OutOfOrderSequenceNumber.Code:
		if api == kmsg.Produce.Int16() {
			return Retriable
		}
	case kerr.GroupIDNotFound.Code, kerr.StaleMemberEpoch.Code:
		if api == kmsg.TxnOffsetCommit.Int16() {
			return ApplicationRecoverable
		}
	}
	if c, ok := byCode[code]; ok {
		return c
	}
	return Unclassified
}

// OfError classifies err as met in an answer to api: a *kerr.Error anywhere in its chain by
// its code; franz-go's "retries ran out" errors (kgo.ErrRecordTimeout, kgo.ErrRecordRetries)
// and kgo.ErrAborting as Abortable, because inside a transaction a record that could not be
// produced leaves the transaction incomplete (KAFKA-19176 makes the Java producer raise
// TransactionAbortableException in that case); anything else as Unclassified, nil as None.
func OfError(api int16, err error) Category {
	if err == nil {
		return None
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return Of(api, ke.Code)
	}
	if errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) || errors.Is(err, kgo.ErrAborting) {
		return Abortable
	}
	return Unclassified
}

// IsRetriable reports whether a client may send the same request again, after refreshing
// metadata or the coordinator for RefreshRetriable codes.
func IsRetriable(api, code int16) bool {
	c := Of(api, code)
	return c == Retriable || c == RefreshRetriable
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
