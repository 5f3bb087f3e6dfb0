package handlers

import (
	"context"
	"fmt"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
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
	if snap, err := t.catalog(ctx); err == nil {
		added := int64(0)
		for _, inc := range incs {
			if cur, ok := snap.Topic(inc.Name); ok && inc.Count > cur.Partitions {
				added += int64(inc.Count - cur.Partitions)
			}
		}
		if added > maxPartitionsPerRequest {
			for _, inc := range incs {
				st := kmsg.NewCreatePartitionsResponseTopic()
				st.Topic, st.ErrorCode = inc.Name, kerr.PolicyViolation.Code
				st.ErrorMessage = strPtr(fmt.Sprintf("A request may add at most %d partitions; this one asks for %d.", maxPartitionsPerRequest, added))
				resp.Topics = append(resp.Topics, st)
			}
			return resp
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
