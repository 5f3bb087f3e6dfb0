package upstream

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// LogEnd asks the upstream for the log end offsets of partitions, for the console's lag:
// ListOffsets for the latest offset, read_uncommitted, as kafka-consumer-groups.sh computes lag.
// The client routes each partition to its leader. A partition the upstream answers with an
// error is left out (the caller shows its lag as unknown); err is set only when no answer came.
func (c *Client) LogEnd(ctx context.Context, partitions map[string][]int32) (map[string]map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for topic, ps := range partitions {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	out := map[string]map[int32]int64{}
	if len(req.Topics) == 0 {
		return out, nil
	}
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return nil, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Offset < 0 {
				continue
			}
			if out[t.Topic] == nil {
				out[t.Topic] = map[int32]int64{}
			}
			out[t.Topic][p.Partition] = p.Offset
		}
	}
	return out, nil
}
