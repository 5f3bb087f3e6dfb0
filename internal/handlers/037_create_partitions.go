package handlers

import (
	"context"
	"fmt"
	"github.com/coordinatord/coordinatord/internal/acl"

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
	// TOPIC ALTER per topic: the denied ones are answered and the rest changed.
	denied := make([]bool, len(incs))
	var allowedIncs []meta.PartitionIncrease
	for i, inc := range incs {
		denied[i] = !t.topicAllowed(r, inc.Name, acl.OpAlter)
		if !denied[i] {
			allowedIncs = append(allowedIncs, inc)
		}
	}
	var results []meta.TopicResult
	var err error
	if len(allowedIncs) > 0 {
		var v any
		if v, err = t.deps.Meta.Write(ctx, meta.CreatePartitions(allowedIncs, req.ValidateOnly, t.metaDefaults())); err == nil {
			results = v.([]meta.TopicResult)
		}
	}
	k := 0
	for i, inc := range incs {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = inc.Name
		if denied[i] {
			st.ErrorCode, st.ErrorMessage = kerr.TopicAuthorizationFailed.Code, strPtr("The topic authorization is failed.")
			resp.Topics = append(resp.Topics, st)
			continue
		}
		res := meta.TopicResult{}
		if err == nil {
			res = results[k]
			k++
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = availabilityCode(err), strPtr(err.Error())
		} else if res.Code != 0 {
			st.ErrorCode, st.ErrorMessage = res.Code, strPtr(res.Message)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
