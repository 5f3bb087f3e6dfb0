package handlers

import (
	"context"

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
				resp.Topics = append(resp.Topics, t.topicMetadata(topic))
			}
		}
		return resp
	}
	for _, rt := range req.Topics {
		var (
			topic *meta.Topic
			found bool
		)
		st := kmsg.NewMetadataResponseTopic()
		switch {
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
		if found {
			st = t.topicMetadata(topic)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (t *Table) topicMetadata(topic *meta.Topic) kmsg.MetadataResponseTopic {
	st := kmsg.NewMetadataResponseTopic()
	st.Topic, st.TopicID = strPtr(topic.Name), topic.ID
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
