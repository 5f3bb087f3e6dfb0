package handlers

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorDoc is one error code a handler can answer and when: the source of docs/errors.md,
// which TestErrorsDoc regenerates (go test ./internal/handlers -run TestErrorsDoc -update) and
// checks against this table, the handlers' per-version translation (wireCode) and the codes
// each version of the API knows. Add a row with every new code a handler answers.
type errorDoc struct {
	api kmsg.Key
	// code is the semantic code, before wireCode translates it for old versions.
	code int16
	// from is the first request version on which the condition can arise (a field it needs
	// appears there); the advertised minimum when lower.
	from int16
	// until is the last request version on which it can arise; 0: the advertised maximum.
	until     int16
	condition string
}

// availabilityDocs are the shard-runtime outcomes every shard-backed API maps with
// availabilityCode (OffsetFetch and the commit paths map them with their own functions).
func availabilityDocs(api kmsg.Key) []errorDoc {
	return []errorDoc{
		{api, kerr.CoordinatorLoadInProgress.Code, 0, 0, "the group's shard is loading its log"},
		{api, kerr.NotCoordinator.Code, 0, 0, "the group's shard FAILED (a bug recovered on its goroutine)"},
		{api, kerr.CoordinatorNotAvailable.Code, 0, 0, "the shard is closed or overloaded, or the write was not made durable"},
	}
}

var errorDocs = concatDocs(
	[]errorDoc{
		{kmsg.TxnOffsetCommit, kerr.UnknownTopicOrPartition.Code, 0, 0, "topic not in the catalog, or partition beyond its partitions"},
		{kmsg.TxnOffsetCommit, kerr.UnknownTopicID.Code, 6, 0, "topic id not in the catalog"},
		{kmsg.TxnOffsetCommit, kerr.InvalidGroupID.Code, 0, 0, "empty group id"},
		{kmsg.TxnOffsetCommit, kerr.CoordinatorLoadInProgress.Code, 0, 0, "the group's (or the catalog's) shard is loading"},
		{kmsg.TxnOffsetCommit, kerr.NotCoordinator.Code, 0, 0, "the group's shard FAILED"},
		{kmsg.TxnOffsetCommit, kerr.CoordinatorNotAvailable.Code, 0, 0, "shard closed or overloaded, store write not durable or timed out; classic group Dead"},
		{kmsg.TxnOffsetCommit, kerr.InvalidCommitOffsetSize.Code, 0, 0, "the staged records are too large for the log"},
		{kmsg.TxnOffsetCommit, kerr.InvalidProducerEpoch.Code, 0, 0, "producer epoch older than the newest seen for the producer id on this shard"},
		{kmsg.TxnOffsetCommit, kerr.GroupIDNotFound.Code, 0, 0, "no such group and generation >= 0"},
		{kmsg.TxnOffsetCommit, kerr.UnknownMemberID.Code, 0, 0, "member (or, for a group with offsets only, any claimed membership) unknown"},
		{kmsg.TxnOffsetCommit, kerr.FencedInstanceID.Code, 3, 0, "instance id held by another member id"},
		{kmsg.TxnOffsetCommit, kerr.IllegalGeneration.Code, 3, 0, "classic group: generation is not the group's"},
		{kmsg.TxnOffsetCommit, kerr.StaleMemberEpoch.Code, 3, 0, "streams group: member epoch newer than the member's, or older and the partition not held at it"},
		{kmsg.TxnOffsetCommit, kerr.OffsetMetadataTooLarge.Code, 0, 0, "metadata over offset.metadata.max.bytes (that partition only)"},
		{kmsg.TxnOffsetCommit, kerr.TransactionAbortable.Code, 0, 4, "gateway mode: the upstream's transaction is not ongoing with the group's __consumer_offsets partition (KIP-890 verification)"},
		{kmsg.TxnOffsetCommit, kerr.InvalidProducerIDMapping.Code, 0, 4, "gateway mode: the upstream does not know the transactional id, or maps it to another producer id"},
		{kmsg.TxnOffsetCommit, kerr.InvalidProducerEpoch.Code, 0, 4, "gateway mode: the upstream's transaction has another producer epoch"},
		{kmsg.TxnOffsetCommit, kerr.ConcurrentTransactions.Code, 0, 4, "gateway mode: the upstream's transaction is committing or aborting"},
		{kmsg.TxnOffsetCommit, kerr.CoordinatorLoadInProgress.Code, 0, 4, "gateway mode: the upstream did not answer the verification in upstream.request.timeout.ms"},
		{kmsg.TxnOffsetCommit, kerr.InvalidTxnState.Code, 0, 4, "gateway mode: the upstream refuses coordinatord DESCRIBE on the transactional id"},

		{kmsg.OffsetCommit, kerr.UnknownTopicOrPartition.Code, 0, 0, "topic not in the catalog (after one refresh in gateway mode), or partition beyond its partitions"},
		{kmsg.OffsetCommit, kerr.UnknownTopicID.Code, 10, 0, "topic id not in the catalog"},
		{kmsg.OffsetCommit, kerr.InvalidCommitOffsetSize.Code, 0, 0, "the commit's records are too large for the log"},
		{kmsg.OffsetCommit, kerr.GroupIDNotFound.Code, 0, 0, "no such group and generation >= 0"},
		{kmsg.OffsetCommit, kerr.UnknownMemberID.Code, 0, 0, "member unknown; or no member id on a non-Empty classic group"},
		{kmsg.OffsetCommit, kerr.FencedInstanceID.Code, 7, 0, "instance id held by another member id"},
		{kmsg.OffsetCommit, kerr.IllegalGeneration.Code, 0, 0, "classic group: generation is not the group's"},
		{kmsg.OffsetCommit, kerr.RebalanceInProgress.Code, 0, 0, "classic group in CompletingRebalance"},
		{kmsg.OffsetCommit, kerr.UnsupportedVersion.Code, 0, 0, "streams group member committing below v9"},
		{kmsg.OffsetCommit, kerr.StaleMemberEpoch.Code, 9, 0, "streams group: member epoch newer than the member's, or older and the partition not held at it"},
		{kmsg.OffsetCommit, kerr.OffsetMetadataTooLarge.Code, 0, 0, "metadata over offset.metadata.max.bytes (that partition only)"},

		{kmsg.OffsetFetch, kerr.CoordinatorLoadInProgress.Code, 0, 0, "the group's (or the catalog's) shard is loading"},
		{kmsg.OffsetFetch, kerr.NotCoordinator.Code, 0, 0, "any other availability failure, as Kafka answers so that consumers before 3.9 retry"},
		{kmsg.OffsetFetch, kerr.UnstableOffsetCommit.Code, 7, 0, "RequireStable and an open transaction staged an offset for the partition"},
		{kmsg.OffsetFetch, kerr.UnknownMemberID.Code, 9, 0, "streams group: the named member is unknown"},
		{kmsg.OffsetFetch, kerr.StaleMemberEpoch.Code, 9, 0, "streams group: the member epoch is not the member's"},
		{kmsg.OffsetFetch, kerr.UnknownTopicID.Code, 10, 0, "topic id not in the catalog"},

		{kmsg.JoinGroup, kerr.InvalidGroupID.Code, 0, 0, "empty group id"},
		{kmsg.JoinGroup, kerr.InvalidSessionTimeout.Code, 0, 0, "session timeout outside group.min/max.session.timeout.ms"},
		{kmsg.JoinGroup, kerr.InconsistentGroupProtocol.Code, 0, 0, "protocol type mismatch, no common protocol, or no protocols for a new group"},
		{kmsg.JoinGroup, kerr.UnknownMemberID.Code, 0, 0, "unknown member or instance, or a join that outlived its pending member id"},
		{kmsg.JoinGroup, kerr.MemberIDRequired.Code, 4, 0, "first join of a dynamic member"},
		{kmsg.JoinGroup, kerr.FencedInstanceID.Code, 5, 0, "instance id held by another member, or the old member of a replaced static member"},
		{kmsg.JoinGroup, kerr.GroupMaxSizeReached.Code, 0, 0, "group.max.size members already"},
		{kmsg.JoinGroup, kerr.RebalanceInProgress.Code, 0, 0, "the member's parked join was superseded"},
		{kmsg.JoinGroup, kerr.CoordinatorNotAvailable.Code, 0, 0, "the group is Dead (deleted under the request)"},
		{kmsg.JoinGroup, kerr.UnknownServerError.Code, 0, 0, "the group's records are too large for the log"},

		{kmsg.SyncGroup, kerr.InvalidGroupID.Code, 0, 0, "empty group id"},
		{kmsg.SyncGroup, kerr.InconsistentGroupProtocol.Code, 0, 0, "protocol type or name differs from the group's (v5: missing)"},
		{kmsg.SyncGroup, kerr.UnknownMemberID.Code, 0, 0, "unknown member"},
		{kmsg.SyncGroup, kerr.FencedInstanceID.Code, 3, 0, "instance id held by another member"},
		{kmsg.SyncGroup, kerr.IllegalGeneration.Code, 0, 0, "generation is not the group's"},
		{kmsg.SyncGroup, kerr.RebalanceInProgress.Code, 0, 0, "the group is rebalancing again"},
		{kmsg.SyncGroup, kerr.UnknownServerError.Code, 0, 0, "the assignment records are too large for the log"},

		{kmsg.Heartbeat, kerr.InvalidGroupID.Code, 0, 0, "empty group id"},
		{kmsg.Heartbeat, kerr.UnknownMemberID.Code, 0, 0, "unknown member"},
		{kmsg.Heartbeat, kerr.FencedInstanceID.Code, 3, 0, "instance id held by another member"},
		{kmsg.Heartbeat, kerr.IllegalGeneration.Code, 0, 0, "generation is not the group's"},
		{kmsg.Heartbeat, kerr.RebalanceInProgress.Code, 0, 0, "the group is rebalancing: rejoin"},

		{kmsg.LeaveGroup, kerr.InvalidGroupID.Code, 0, 0, "empty group id"},
		{kmsg.LeaveGroup, kerr.UnknownMemberID.Code, 0, 0, "unknown member (v3+: per member)"},
		{kmsg.LeaveGroup, kerr.FencedInstanceID.Code, 3, 0, "instance id held by another member (per member)"},

		{kmsg.DescribeGroups, kerr.GroupIDNotFound.Code, 6, 0, "no such group (below v6: state Dead, NONE)"},
		{kmsg.DeleteGroups, kerr.GroupIDNotFound.Code, 0, 0, "no such group"},
		{kmsg.DeleteGroups, kerr.NonEmptyGroup.Code, 0, 0, "the group has members"},
		{kmsg.DeleteGroups, kerr.GroupDeletionFailed.Code, 0, 0, "the topology description plugin could not delete the group's description"},
	},
	// Authorization (internal/acl, authorizations in authz.go): the checks come before any
	// state is read, so these answer whatever the group's state.
	[]errorDoc{
		{kmsg.TxnOffsetCommit, kerr.TransactionalIDAuthorizationFailed.Code, 0, 0, "no TRANSACTIONAL_ID WRITE on the transactional id (every partition)"},
		{kmsg.TxnOffsetCommit, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP READ on the group (every partition)"},
		{kmsg.TxnOffsetCommit, kerr.TopicAuthorizationFailed.Code, 0, 0, "no TOPIC READ on the topic (its partitions)"},
		{kmsg.OffsetFetch, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP DESCRIBE on the group (v1: in every partition; v8+: per group)"},
		{kmsg.OffsetFetch, kerr.TopicAuthorizationFailed.Code, 0, 0, "no TOPIC DESCRIBE on a named topic (its partitions); fetching all offsets leaves such topics out instead"},
		{kmsg.OffsetCommit, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP READ on the group (every partition)"},
		{kmsg.OffsetCommit, kerr.TopicAuthorizationFailed.Code, 0, 0, "no TOPIC READ on the topic (its partitions)"},
		{kmsg.JoinGroup, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP READ on the group"},
		{kmsg.SyncGroup, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP READ on the group (checked after the v5 protocol type and name)"},
		{kmsg.Heartbeat, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP READ on the group"},
		{kmsg.LeaveGroup, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP READ on the group"},
		{kmsg.DescribeGroups, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP DESCRIBE on the group (per group)"},
		{kmsg.DeleteGroups, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP DELETE on the group (per group)"},
	},
	availabilityDocs(kmsg.JoinGroup), availabilityDocs(kmsg.SyncGroup), availabilityDocs(kmsg.LeaveGroup),
	availabilityDocs(kmsg.DescribeGroups), availabilityDocs(kmsg.ListGroups), availabilityDocs(kmsg.DeleteGroups),
	[]errorDoc{
		{kmsg.Heartbeat, kerr.NotCoordinator.Code, 0, 0, "the group's shard FAILED (while loading the answer is NONE)"},
		{kmsg.Heartbeat, kerr.CoordinatorNotAvailable.Code, 0, 0, "the shard is closed or overloaded, or the write was not made durable"},
	},
	availabilityDocs(kmsg.OffsetCommit),
	[]errorDoc{
		{kmsg.SASLHandshake, kerr.IllegalSaslState.Code, 0, 0, "the listener has no SASL; or a re-authentication changes the mechanism or uses v0"},
		{kmsg.SASLHandshake, kerr.UnsupportedSaslMechanism.Code, 0, 0, "the mechanism is not enabled on the listener"},
		{kmsg.SASLAuthenticate, kerr.IllegalSaslState.Code, 0, 0, "no SASL exchange is in progress (no handshake, a listener without SASL, or after it completed)"},
		{kmsg.SASLAuthenticate, kerr.SaslAuthenticationFailed.Code, 0, 0, "wrong credentials or a malformed exchange"},

		{kmsg.DescribeClientQuotas, kerr.ClusterAuthorizationFailed.Code, 0, 0, "no CLUSTER DESCRIBE_CONFIGS"},
		{kmsg.DescribeUserSCRAMCredentials, kerr.ClusterAuthorizationFailed.Code, 0, 0, "no CLUSTER DESCRIBE (top level and every requested user)"},
		{kmsg.DescribeUserSCRAMCredentials, kerr.DuplicateResource.Code, 0, 0, "a user named twice (that user)"},
		{kmsg.DescribeUserSCRAMCredentials, kerr.ResourceNotFound.Code, 0, 0, "a named user has no credential (that user)"},
		{kmsg.AlterUserSCRAMCredentials, kerr.ClusterAuthorizationFailed.Code, 0, 0, "no CLUSTER ALTER (every user)"},
		{kmsg.AlterUserSCRAMCredentials, kerr.UnacceptableCredential.Code, 0, 0, "empty user name, or iterations outside the mechanism's bounds (that user)"},
		{kmsg.AlterUserSCRAMCredentials, kerr.UnsupportedSaslMechanism.Code, 0, 0, "unknown SCRAM mechanism (that user)"},
		{kmsg.AlterUserSCRAMCredentials, kerr.DuplicateResource.Code, 0, 0, "a user's credential altered twice in the request (that user)"},
		{kmsg.AlterUserSCRAMCredentials, kerr.ResourceNotFound.Code, 0, 0, "deletion of a credential that does not exist (that user)"},

		{kmsg.ConsumerGroupHeartbeat, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP READ on the group"},
		{kmsg.ConsumerGroupHeartbeat, kerr.TopicAuthorizationFailed.Code, 0, 0, "no TOPIC DESCRIBE on a subscribed topic name"},
		{kmsg.ConsumerGroupHeartbeat, kerr.InvalidRequest.Code, 0, 0, "a required field missing or blank, or inconsistent with the member epoch"},
		{kmsg.ConsumerGroupHeartbeat, kerr.UnsupportedAssignor.Code, 0, 0, "ServerAssignor names an assignor that is not configured"},
		{kmsg.ConsumerGroupHeartbeat, kerr.InvalidRegularExpression.Code, 0, 0, "SubscribedTopicRegex does not compile (RE2 syntax)"},
		{kmsg.ConsumerGroupHeartbeat, kerr.GroupIDNotFound.Code, 0, 0, "no such consumer group for a member epoch other than 0, or another group type owns the id"},
		{kmsg.ConsumerGroupHeartbeat, kerr.UnknownMemberID.Code, 0, 0, "member or instance id unknown"},
		{kmsg.ConsumerGroupHeartbeat, kerr.FencedInstanceID.Code, 0, 0, "instance id held by another member"},
		{kmsg.ConsumerGroupHeartbeat, kerr.UnreleasedInstanceID.Code, 0, 0, "a static member joins with an instance id another member still holds"},
		{kmsg.ConsumerGroupHeartbeat, kerr.FencedMemberEpoch.Code, 0, 0, "member epoch not the member's, or owned partitions inconsistent with it"},
		{kmsg.ConsumerGroupHeartbeat, kerr.GroupMaxSizeReached.Code, 0, 0, "a new member beyond group.consumer.max.size"},
		{kmsg.ConsumerGroupHeartbeat, kerr.UnknownServerError.Code, 0, 0, "the assignor failed"},
		{kmsg.ConsumerGroupDescribe, kerr.GroupAuthorizationFailed.Code, 0, 0, "no GROUP DESCRIBE on the group (per group)"},
		{kmsg.ConsumerGroupDescribe, kerr.TopicAuthorizationFailed.Code, 0, 0, "a member's current or target assignment names a topic without TOPIC DESCRIBE (the group)"},
		{kmsg.ConsumerGroupDescribe, kerr.InvalidGroupID.Code, 0, 0, "empty group id"},
		{kmsg.ConsumerGroupDescribe, kerr.GroupIDNotFound.Code, 0, 0, "no such consumer group (or another group type owns the id)"},
	},
	metaAvailabilityDocs(kmsg.DescribeUserSCRAMCredentials), metaAvailabilityDocs(kmsg.AlterUserSCRAMCredentials),
	availabilityDocs(kmsg.ConsumerGroupHeartbeat), availabilityDocs(kmsg.ConsumerGroupDescribe),
)

// metaAvailabilityDocs are availabilityDocs for the APIs served by the metadata shard.
func metaAvailabilityDocs(api kmsg.Key) []errorDoc {
	return []errorDoc{
		{api, kerr.CoordinatorLoadInProgress.Code, 0, 0, "the metadata shard is loading its log"},
		{api, kerr.NotCoordinator.Code, 0, 0, "the metadata shard FAILED (a bug recovered on its goroutine)"},
		{api, kerr.CoordinatorNotAvailable.Code, 0, 0, "the metadata shard is closed or overloaded, or the write was not made durable"},
	}
}

func concatDocs(parts ...[]errorDoc) []errorDoc {
	var out []errorDoc
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// wireCode is the code a response to api at version carries for the semantic code: the
// handlers answer through it, so that a client never gets a code its version does not know.
func wireCode(api kmsg.Key, version, code int16) int16 {
	switch api {
	case kmsg.TxnOffsetCommit:
		return txnOffsetCommitCode(version, code)
	case kmsg.OffsetCommit:
		return offsetCommitCode(version, code)
	case kmsg.DeleteGroups:
		if code == kerr.GroupDeletionFailed.Code && version < 3 {
			return kerr.UnknownServerError.Code
		}
	}
	return code
}

// offsetCommitCode translates OffsetCommit's semantic codes for versions before KIP-848's v9,
// which know neither GROUP_ID_NOT_FOUND nor STALE_MEMBER_EPOCH (spec coordinator-apis §4.5).
func offsetCommitCode(version, code int16) int16 {
	if version < 9 && (code == kerr.GroupIDNotFound.Code || code == kerr.StaleMemberEpoch.Code) {
		return kerr.IllegalGeneration.Code
	}
	return code
}
