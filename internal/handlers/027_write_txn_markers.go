package handlers

import (
	"context"
	"sync"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetsTopic is the topic whose partition N a transaction coordinator names when a
// transaction committed offsets of a group on shard N (spec coordinator-apis §1.5, §4.4).
const offsetsTopic = "__consumer_offsets"

// writeTxnMarkers applies transaction markers sent by a transaction coordinator (spec
// coordinator-apis §4.4 option A): for each marker, partition N of __consumer_offsets is shard N,
// where the producer's staged offsets are committed or dropped. coordinatord stores no data, so
// every other partition is UNKNOWN_TOPIC_OR_PARTITION. A shard that cannot take the marker now
// answers NOT_LEADER_OR_FOLLOWER, the only code a transaction coordinator retries. The CLUSTER
// ALTER / CLUSTER_ACTION check (CLUSTER_AUTHORIZATION_FAILED) comes with ACLs.
func (t *Table) writeTxnMarkers(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	count := t.deps.Groups.Count()
	var wg sync.WaitGroup
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for i, mt := range m.Topics {
			rt := &rm.Topics[i]
			*rt = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(mt.Partitions))
			for j, p := range mt.Partitions {
				rp := &rt.Partitions[j]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				if mt.Topic != offsetsTopic || p < 0 || p >= count {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				wg.Add(1)
				go func(m kmsg.WriteTxnMarkersRequestMarker) {
					defer wg.Done()
					v, err := t.deps.Groups.Shard(p).Write(ctx, shard.CompleteTxn(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed))
					if err != nil {
						rp.ErrorCode = kerr.NotLeaderForPartition.Code
						return
					}
					rp.ErrorCode = v.(int16)
				}(m)
			}
		}
		resp.Markers = append(resp.Markers, rm)
	}
	wg.Wait()
	return resp
}
