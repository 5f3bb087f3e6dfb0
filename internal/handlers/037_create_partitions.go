package handlers

import (
	"context"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createPartitions raises topics' partition counts in the catalog.
func (t *Table) createPartitions(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	incs := make([]meta.PartitionIncrease, len(req.Topics))
	for i, rt := range req.Topics {
		incs[i] = meta.PartitionIncrease{Name: rt.Topic, Count: rt.Count}
		if rt.Assignment != nil {
			incs[i].Assignment = make([][]int32, len(rt.Assignment))
			for j, a := range rt.Assignment {
				incs[i].Assignment[j] = a.Replicas
			}
		}
	}
	v, err := t.deps.Meta.Write(ctx, meta.CreatePartitions(incs, req.ValidateOnly, t.metaDefaults()))
	for i, inc := range incs {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = inc.Name
		if err != nil {
			st.ErrorCode, st.ErrorMessage = availabilityCode(err), strPtr(err.Error())
		} else if res := v.([]meta.TopicResult)[i]; res.Code != 0 {
			st.ErrorCode, st.ErrorMessage = res.Code, strPtr(res.Message)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
