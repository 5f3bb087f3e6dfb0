package handlers

import (
	"net"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authorizations names, per served API key, the checks its handler makes before it reads or
// writes any state, as Kafka's KafkaApis makes them. A test requires an entry for every
// registered key, so that a new API cannot be served without deciding its authorization.
var authorizations = map[int16]string{
	3:  "TOPIC DESCRIBE per named topic (TOPIC_AUTHORIZATION_FAILED); all-topics requests list only describable topics; bitfields: TOPIC and CLUSTER authorized operations",
	8:  "GROUP READ (every partition GROUP_AUTHORIZATION_FAILED); TOPIC READ per topic (its partitions TOPIC_AUTHORIZATION_FAILED)",
	9:  "GROUP DESCRIBE per group (GROUP_AUTHORIZATION_FAILED; v0-1 in every partition); TOPIC DESCRIBE per named topic (partitions TOPIC_AUTHORIZATION_FAILED), fetch-all lists only describable topics",
	10: "GROUP DESCRIBE per group key (GROUP_AUTHORIZATION_FAILED), TRANSACTIONAL_ID DESCRIBE per transaction key (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)",
	11: "GROUP READ (GROUP_AUTHORIZATION_FAILED)",
	12: "GROUP READ (GROUP_AUTHORIZATION_FAILED)",
	13: "GROUP READ (GROUP_AUTHORIZATION_FAILED)",
	14: "GROUP READ (GROUP_AUTHORIZATION_FAILED), after the v5 protocol type/name check as Kafka",
	15: "GROUP DESCRIBE per group (GROUP_AUTHORIZATION_FAILED); v3+ bitfield: GROUP authorized operations",
	16: "CLUSTER DESCRIBE lists every group, else only groups with GROUP DESCRIBE (never an error)",
	17: "none: SaslHandshake is authentication, answered before a principal exists (as Kafka)",
	18: "none (before authentication too)",
	19: "CLUSTER CREATE, else TOPIC CREATE per topic (TOPIC_AUTHORIZATION_FAILED); configs in the answer need TOPIC DESCRIBE_CONFIGS (else TOPIC_AUTHORIZATION_FAILED as the configs error)",
	20: "TOPIC DELETE per topic (TOPIC_AUTHORIZATION_FAILED); by id, unauthorized ids answer TOPIC_AUTHORIZATION_FAILED",
	27: "CLUSTER ALTER, else CLUSTER CLUSTER_ACTION (every partition CLUSTER_AUTHORIZATION_FAILED)",
	28: "TRANSACTIONAL_ID WRITE (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED); GROUP READ (every partition GROUP_AUTHORIZATION_FAILED); TOPIC READ per topic (TOPIC_AUTHORIZATION_FAILED)",
	29: "CLUSTER DESCRIBE (CLUSTER_AUTHORIZATION_FAILED); SECURITY_DISABLED without an authorizer",
	30: "CLUSTER ALTER (CLUSTER_AUTHORIZATION_FAILED in every result); SECURITY_DISABLED without an authorizer",
	31: "CLUSTER ALTER (CLUSTER_AUTHORIZATION_FAILED in every filter result); SECURITY_DISABLED without an authorizer",
	32: "TOPIC DESCRIBE_CONFIGS, GROUP DESCRIBE_CONFIGS or CLUSTER DESCRIBE_CONFIGS per resource (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED)",
	33: "TOPIC ALTER_CONFIGS, GROUP ALTER_CONFIGS or CLUSTER ALTER_CONFIGS per resource (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED)",
	36: "none: SaslAuthenticate is authentication, answered before a principal exists (as Kafka)",
	37: "TOPIC ALTER per topic (TOPIC_AUTHORIZATION_FAILED)",
	42: "GROUP DELETE per group (GROUP_AUTHORIZATION_FAILED)",
	44: "TOPIC ALTER_CONFIGS, GROUP ALTER_CONFIGS or CLUSTER ALTER_CONFIGS per resource (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED)",
	47: "GROUP DELETE (GROUP_AUTHORIZATION_FAILED); TOPIC READ per topic (its partitions TOPIC_AUTHORIZATION_FAILED)",
	48: "CLUSTER DESCRIBE_CONFIGS (top-level CLUSTER_AUTHORIZATION_FAILED, null entries)",
	50: "CLUSTER DESCRIBE (top-level CLUSTER_AUTHORIZATION_FAILED, and in one result per requested user)",
	51: "CLUSTER ALTER (CLUSTER_AUTHORIZATION_FAILED for every user named)",
	68: "GROUP READ (GROUP_AUTHORIZATION_FAILED); TOPIC DESCRIBE on every subscribed topic name (TOPIC_AUTHORIZATION_FAILED if any is denied); a regex resolved by the heartbeat keeps only topics its client may describe",
	69: "GROUP DESCRIBE per group (GROUP_AUTHORIZATION_FAILED); TOPIC DESCRIBE on every topic of the members' current and target assignments (the group answers TOPIC_AUTHORIZATION_FAILED); bitfield: GROUP authorized operations",
	74: "CLUSTER DESCRIBE_CONFIGS (top-level CLUSTER_AUTHORIZATION_FAILED)",
	88: "GROUP READ (GROUP_AUTHORIZATION_FAILED); TOPIC DESCRIBE on every topology topic (TOPIC_AUTHORIZATION_FAILED); CLUSTER CREATE, else TOPIC CREATE on each internal topic to create (a status detail)",
	89: "GROUP DESCRIBE per group (GROUP_AUTHORIZATION_FAILED); TOPIC DESCRIBE on the group's topology topics (TOPIC_AUTHORIZATION_FAILED); bitfield: GROUP authorized operations",
	93: "GROUP READ (GROUP_AUTHORIZATION_FAILED)",
}

// clusterAuthorizationFailedMessage is the message Kafka's default ClusterAuthorizationException
// carries into the error answers that have a message field.
const clusterAuthorizationFailedMessage = "Cluster authorization failed."

// principal and host of a request, as the authorizer matches them.
func who(r *wire.Request) (acl.Principal, string) {
	if r.Conn == nil {
		return acl.Principal{Type: wire.Anonymous.Type, Name: wire.Anonymous.Name}, ""
	}
	p := r.Conn.Principal()
	host := ""
	switch a := r.Conn.Remote.(type) {
	case *net.TCPAddr:
		host = acl.HostOfIP(a.IP)
	case nil:
	default:
		host = acl.HostOf(a.String())
	}
	return acl.Principal{Type: p.Type, Name: p.Name}, host
}

// authorize checks, logging and counting a denial. Without an authorizer it costs nothing.
func (t *Table) authorize(r *wire.Request, rt acl.ResourceType, name string, op acl.Operation) bool {
	if !t.deps.Authorizer.Enabled() {
		return true
	}
	p, host := who(r)
	return t.deps.Authorizer.Authorize(p, host, rt, name, op)
}

// allowed checks without logging: for filtering lists, where Kafka does not log either.
func (t *Table) allowed(r *wire.Request, rt acl.ResourceType, name string, op acl.Operation) bool {
	if !t.deps.Authorizer.Enabled() {
		return true
	}
	p, host := who(r)
	return t.deps.Authorizer.Allowed(p, host, rt, name, op)
}

// authorizedOps is the authorized_operations bitfield of a resource.
func (t *Table) authorizedOps(r *wire.Request, rt acl.ResourceType, name string) int32 {
	p, host := who(r)
	return t.deps.Authorizer.AuthorizedOperations(p, host, rt, name)
}

func (t *Table) groupAllowed(r *wire.Request, group string, op acl.Operation) bool {
	return t.authorize(r, acl.ResourceGroup, group, op)
}

func (t *Table) topicAllowed(r *wire.Request, topic string, op acl.Operation) bool {
	return t.authorize(r, acl.ResourceTopic, topic, op)
}

func (t *Table) clusterAllowed(r *wire.Request, op acl.Operation) bool {
	return t.authorize(r, acl.ResourceCluster, acl.ClusterName, op)
}

// configResourceAllowed is the check of a DescribeConfigs or (Incremental)AlterConfigs
// resource, with the code Kafka answers a denial with (ConfigHelper / KafkaApis): BROKER and
// BROKER_LOGGER (and CLIENT_METRICS) are CLUSTER resources; no message, as Kafka's. Unknown
// types pass, to get the error their type gets.
func (t *Table) configResourceAllowed(r *wire.Request, typ kmsg.ConfigResourceType, name string, op acl.Operation) (int16, *string) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !t.topicAllowed(r, name, op) {
			return kerr.TopicAuthorizationFailed.Code, nil
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !t.groupAllowed(r, name, op) {
			return kerr.GroupAuthorizationFailed.Code, nil
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !t.clusterAllowed(r, op) {
			return kerr.ClusterAuthorizationFailed.Code, nil
		}
	}
	return 0, nil
}
