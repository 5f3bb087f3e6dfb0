package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadata answers with this node as the only broker, controller and leader of every
// partition, and the topics of the catalog. Auto-creation is never done: the catalog is
// authoritative.
func (t *Table) metadata(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	ep := t.deps.Node.endpointFor(r.Conn.Listener)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = t.deps.Node.ID, ep.Host, ep.Port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	cid := t.deps.Node.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = t.deps.Node.ID

	// Topic ids are in the schema from v10 but only usable from v12: Kafka refuses the whole
	// request, answering with no brokers, no cluster and each topic marked INVALID_REQUEST.
	if r.Version < 12 {
		for _, rt := range req.Topics {
			if rt.TopicID != [16]byte{} {
				resp.Brokers, resp.ClusterID, resp.ControllerID = []kmsg.MetadataResponseBroker{}, nil, -1
				for _, rt := range req.Topics {
					st := kmsg.NewMetadataResponseTopic()
					st.Topic, st.TopicID, st.ErrorCode = rt.Topic, rt.TopicID, kerr.InvalidRequest.Code
					resp.Topics = append(resp.Topics, st)
				}
				return resp
			}
		}
	}
	if r.Version >= 8 && r.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = t.authorizedOps(r, acl.ResourceCluster, acl.ClusterName)
	}
	includeTopicOps := r.Version >= 8 && req.IncludeTopicAuthorizedOperations

	snap, err := t.catalog(ctx)
	if err != nil {
		// Metadata has no coordinator error; an unavailable catalog reads as no topics yet, and
		// named topics as temporarily unavailable so clients retry.
		snap = nil
	}
	// v0: an empty list means all topics. v1+: null means all, empty means none.
	if req.Topics == nil || (r.Version == 0 && len(req.Topics) == 0) {
		if snap != nil {
			for _, topic := range snap.Topics() {
				// Topics the principal may not DESCRIBE are left out silently, as Kafka does.
				if t.allowed(r, acl.ResourceTopic, topic.Name, acl.OpDescribe) {
					resp.Topics = append(resp.Topics, t.topicMetadata(r, topic, includeTopicOps))
				}
			}
		}
		return resp
	}
	// Kafka lists unknown topic ids first, then the topics it found, then unknown or invalid
	// names; within each group, request order.
	var unknownIDs, foundTopics, unknownNames, unauthorized []kmsg.MetadataResponseTopic
	seen := map[string]bool{}
	for _, rt := range req.Topics {
		var (
			topic *meta.Topic
			found bool
		)
		// A name asked for twice is answered once, as Kafka does.
		if rt.Topic != nil {
			if seen[*rt.Topic] {
				continue
			}
			seen[*rt.Topic] = true
		}
		st := kmsg.NewMetadataResponseTopic()
		// A named topic is authorized before its existence is looked at, so that a denied
		// client cannot tell which topics exist (KafkaApis.getTopicMetadata).
		if rt.Topic != nil && !t.topicAllowed(r, *rt.Topic, acl.OpDescribe) {
			st.Topic, st.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
			unauthorized = append(unauthorized, st)
			continue
		}
		switch {
		case rt.Topic != nil && meta.ValidateTopicName(*rt.Topic) != nil:
			st.Topic, st.ErrorCode = rt.Topic, kerr.InvalidTopicException.Code
		case snap == nil:
			st.Topic, st.TopicID, st.ErrorCode = rt.Topic, rt.TopicID, kerr.LeaderNotAvailable.Code
		case rt.Topic != nil:
			if topic, found = snap.Topic(*rt.Topic); !found {
				st.Topic, st.ErrorCode = rt.Topic, kerr.UnknownTopicOrPartition.Code
			}
		case rt.TopicID != [16]byte{}:
			if topic, found = snap.TopicByID(rt.TopicID); !found {
				st.TopicID, st.ErrorCode = rt.TopicID, kerr.UnknownTopicID.Code
			}
		default:
			st.ErrorCode = kerr.InvalidTopicException.Code
		}
		if found && rt.Topic == nil && !t.topicAllowed(r, topic.Name, acl.OpDescribe) {
			// By id: the name is not revealed to a client that may not describe it.
			st.TopicID, st.ErrorCode = rt.TopicID, kerr.TopicAuthorizationFailed.Code
			unauthorized = append(unauthorized, st)
			continue
		}
		switch {
		case found:
			st = t.topicMetadata(r, topic, includeTopicOps)
			foundTopics = append(foundTopics, st)
		case rt.Topic == nil:
			unknownIDs = append(unknownIDs, st)
		default:
			unknownNames = append(unknownNames, st)
		}
	}
	resp.Topics = append(append(append(append(resp.Topics, unknownIDs...), foundTopics...), unknownNames...), unauthorized...)
	return resp
}

func (t *Table) topicMetadata(r *wire.Request, topic *meta.Topic, includeOps bool) kmsg.MetadataResponseTopic {
	st := kmsg.NewMetadataResponseTopic()
	st.Topic, st.TopicID = strPtr(topic.Name), topic.ID
	if includeOps {
		st.AuthorizedOperations = t.authorizedOps(r, acl.ResourceTopic, topic.Name)
	}
	node := t.deps.Node.ID
	st.Partitions = make([]kmsg.MetadataResponseTopicPartition, topic.Partitions)
	for p := range st.Partitions {
		sp := kmsg.NewMetadataResponseTopicPartition()
		sp.Partition, sp.Leader, sp.LeaderEpoch = int32(p), node, 0
		sp.Replicas, sp.ISR = []int32{node}, []int32{node}
		st.Partitions[p] = sp
	}
	return st
}
