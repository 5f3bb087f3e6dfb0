package handlers

import (
	"context"
	"fmt"
	"github.com/coordinatord/coordinatord/internal/acl"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxPartitionsPerRequest bounds the partitions one CreateTopics or CreatePartitions may add, as
// Kafka's controller bounds them (10 000, POLICY_VIOLATION for the whole request). A partition
// is only a count in the catalog, but every Metadata answer lists each one: a 30-byte request
// must not be able to make the next Metadata allocate 2^31 partition entries.
const maxPartitionsPerRequest = 10_000

// createTopics adds topics to the catalog. coordinatord stores no data, so a topic is its
// metadata: name, id, partition count, replication factor (recorded, not enforced) and configs.
// createTopics authorizes as Kafka: CLUSTER CREATE allows every topic, else TOPIC CREATE per
// topic; the denied ones are answered TOPIC_AUTHORIZATION_FAILED and the rest created. The
// configs of a created topic are shown only with TOPIC DESCRIBE_CONFIGS.
func (t *Table) createTopics(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	if !t.deps.Authorizer.Enabled() {
		return t.createTopicsOf(ctx, r, req)
	}
	all := t.allowed(r, acl.ResourceCluster, acl.ClusterName, acl.OpCreate)
	sub := *req
	sub.Topics = nil
	denied := make([]bool, len(req.Topics))
	for i, rt := range req.Topics {
		denied[i] = !all && !t.topicAllowed(r, rt.Topic, acl.OpCreate)
		if !denied[i] {
			sub.Topics = append(sub.Topics, rt)
		}
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	created := t.createTopicsOf(ctx, r, &sub).(*kmsg.CreateTopicsResponse)
	k := 0
	for i, rt := range req.Topics {
		if denied[i] || k >= len(created.Topics) {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.TopicAuthorizationFailed.Code, strPtr("Authorization failed.")
			st.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st := created.Topics[k]
		k++
		if st.ErrorCode == 0 && !t.topicAllowed(r, st.Topic, acl.OpDescribeConfigs) {
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			st.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (t *Table) createTopicsOf(ctx context.Context, r *wire.Request, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	total := int64(0)
	for _, rt := range req.Topics {
		switch {
		case len(rt.ReplicaAssignment) > 0:
			total += int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			total += int64(t.deps.Limits.DefaultPartitions)
		case rt.NumPartitions > 0:
			total += int64(rt.NumPartitions)
		}
	}
	if total > maxPartitionsPerRequest {
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = rt.Topic, kerr.PolicyViolation.Code
			st.ErrorMessage = strPtr(fmt.Sprintf("A request may create at most %d partitions; this one asks for %d.", maxPartitionsPerRequest, total))
			st.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	topics := make([]meta.NewTopic, len(req.Topics))
	for i, rt := range req.Topics {
		nt := meta.NewTopic{Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor, Configs: map[string]*string{}}
		if len(rt.ReplicaAssignment) > 0 {
			nt.Assignment = map[int32][]int32{}
			for _, a := range rt.ReplicaAssignment {
				nt.Assignment[a.Partition] = a.Replicas
			}
		}
		for _, c := range rt.Configs {
			nt.Configs[c.Name] = c.Value
		}
		topics[i] = nt
	}
	v, err := t.deps.Meta.Write(ctx, meta.CreateTopics(topics, req.ValidateOnly, t.metaDefaults()))
	if err != nil {
		code := availabilityCode(err)
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, code, strPtr(err.Error())
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	for _, res := range v.([]meta.TopicResult) {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic, st.ErrorCode = res.Name, res.Code
		if res.Code != 0 {
			st.ErrorMessage = strPtr(res.Message)
		} else {
			st.TopicID = res.Topic.ID
			st.NumPartitions, st.ReplicationFactor = res.Topic.Partitions, res.Topic.ReplicationFactor
			names := make([]string, 0, len(res.Topic.Configs))
			for name := range res.Topic.Configs {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name, c.Value, c.Source = name, strPtr(res.Topic.Configs[name]), 1 // DYNAMIC_TOPIC_CONFIG
				st.Configs = append(st.Configs, c)
			}
		}
		if st.Configs == nil {
			st.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (t *Table) metaDefaults() meta.Defaults {
	return meta.Defaults{Partitions: t.deps.Limits.DefaultPartitions, ReplicationFactor: t.deps.Limits.DefaultReplicationFactor, NodeID: t.deps.Node.ID}
}
