package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteTopics removes topics from the catalog, by name (v0-v5) or by name or id (v6).
func (t *Table) deleteTopics(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var refs []meta.TopicRef
	if r.Version >= 6 {
		for _, rt := range req.Topics {
			refs = append(refs, meta.TopicRef{Name: rt.Topic, ID: rt.TopicID})
		}
	} else {
		for _, name := range req.TopicNames {
			refs = append(refs, meta.TopicRef{Name: strPtr(name)})
		}
	}
	v, err := t.deps.Meta.Write(ctx, meta.DeleteTopics(refs))
	for i, ref := range refs {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = ref.Name, ref.ID
		if err != nil {
			st.ErrorCode, st.ErrorMessage = availabilityCode(err), strPtr(err.Error())
		} else {
			res := v.([]meta.TopicResult)[i]
			st.ErrorCode = res.Code
			if res.Code != 0 {
				st.ErrorMessage = strPtr(res.Message)
			}
			if res.Topic != nil {
				st.Topic, st.TopicID = strPtr(res.Topic.Name), res.Topic.ID
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
