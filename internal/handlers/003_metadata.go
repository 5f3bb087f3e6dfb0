package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadata answers with this node as the only broker and controller. Topics come from the
// topic catalog; until it exists every named topic is unknown and "all topics" is empty.
func (t *Table) metadata(_ context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	ep := t.deps.Node.endpointFor(r.Conn.Listener)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = t.deps.Node.ID, ep.Host, ep.Port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	cid := t.deps.Node.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = t.deps.Node.ID

	// v0: an empty list means all topics. v1+: null means all, empty means none.
	all := req.Topics == nil || (r.Version == 0 && len(req.Topics) == 0)
	if all {
		return resp
	}
	for _, rt := range req.Topics {
		st := kmsg.NewMetadataResponseTopic()
		switch {
		case rt.Topic != nil:
			st.Topic = rt.Topic
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case rt.TopicID != [16]byte{}:
			st.TopicID = rt.TopicID
			st.ErrorCode = kerr.UnknownTopicID.Code
		default:
			st.ErrorCode = kerr.InvalidTopicException.Code
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
