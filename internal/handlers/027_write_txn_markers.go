package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"
	"sync"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetsTopic is the topic whose partition N a transaction coordinator names when a
// transaction committed offsets of a group on shard N (spec coordinator-apis §1.5, §4.4).
const offsetsTopic = "__consumer_offsets"

// markerWorkers bounds the shard writes one WriteTxnMarkers request runs at once. A marker is
// one write per shard whatever the number of partition entries naming that shard, so a request
// costs at most markers × shards writes, run by this many goroutines: a frame listing 100 000
// partitions must not start 100 000 goroutines.
const markerWorkers = 16

// markerOp is one marker applied to one shard; every response partition naming that shard in
// that marker gets its code.
type markerOp struct {
	marker *kmsg.WriteTxnMarkersRequestMarker
	shard  int32
	code   int16
	parts  []*kmsg.WriteTxnMarkersResponseMarkerTopicPartition
}

// writeTxnMarkers applies transaction markers sent by a transaction coordinator (spec
// coordinator-apis §4.4 option A): for each marker, partition N of __consumer_offsets is shard N,
// where the producer's staged offsets are committed or dropped. coordinatord stores no data, so
// every other partition is UNKNOWN_TOPIC_OR_PARTITION. A shard that cannot take the marker now
// answers NOT_LEADER_OR_FOLLOWER, the only code a transaction coordinator retries.
func (t *Table) writeTxnMarkers(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	// Only the transaction coordinator may write markers: without this check any client could
	// commit or abort another producer's staged offsets. Kafka accepts CLUSTER ALTER as well.
	denied := !t.allowed(r, acl.ResourceCluster, acl.ClusterName, acl.OpAlter) && !t.clusterAllowed(r, acl.OpClusterAction)
	count := t.deps.Groups.Count()
	var ops []*markerOp
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for mi := range req.Markers {
		m := &req.Markers[mi]
		rm := &resp.Markers[mi]
		*rm = kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		byShard := map[int32]*markerOp{}
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for i, mt := range m.Topics {
			rt := &rm.Topics[i]
			*rt = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			if mt.Topic == offsetsTopic && len(mt.Partitions) == 0 && !denied && t.deps.TxnPeerOutcome != nil {
				// Another node's relay asks every node to settle the producer's transaction
				// where it holds staged offsets, and which shards it answers for (the
				// partitions of the answer): a transaction coordinator never sends an empty
				// partition list, which Kafka would answer with no partition either.
				for sh, code := range t.deps.TxnPeerOutcome(ctx, m.ProducerID, m.ProducerEpoch, m.Committed) {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = sh, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				continue
			}
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(mt.Partitions))
			for j, p := range mt.Partitions {
				rp := &rt.Partitions[j]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				if denied {
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
					continue
				}
				if mt.Topic != offsetsTopic || p < 0 || p >= count {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				op := byShard[p]
				if op == nil {
					op = &markerOp{marker: m, shard: p}
					byShard[p] = op
					ops = append(ops, op)
				}
				op.parts = append(op.parts, rp)
			}
		}
	}
	t.runMarkerOps(ctx, ops)
	for _, op := range ops {
		for _, rp := range op.parts {
			rp.ErrorCode = op.code
		}
	}
	return resp
}

// runMarkerOps runs the ops on at most markerWorkers goroutines and waits for all of them.
func (t *Table) runMarkerOps(ctx context.Context, ops []*markerOp) {
	next := make(chan *markerOp)
	var wg sync.WaitGroup
	for range min(len(ops), markerWorkers) {
		wg.Go(func() {
			for op := range next {
				m := op.marker
				v, err := t.deps.Groups.Shard(op.shard).Write(ctx, shard.CompleteTxn(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, t.deps.Limits.TxnMarkerMaxProducers))
				if err != nil {
					op.code = kerr.NotLeaderForPartition.Code
					continue
				}
				op.code = v.(int16)
			}
		})
	}
	for _, op := range ops {
		next <- op
	}
	close(next)
	wg.Wait()
}
