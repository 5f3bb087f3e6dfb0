package membership

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CheckStateTopicUnshared refuses a state topic that the live nodes of another coordinatord
// cluster write: nodes of another cluster.id are in another upstream group (group is this
// node's), so neither side's assignment knows the other's nodes, both would serve every shard,
// and a load fences only the transactional ids of its own cluster.id, so both would
// acknowledge writes to one shard and each would lose the other's at its next load. Kafka
// refuses a broker whose cluster id is not the one its data belongs to; this is the same
// refusal, made before the node loads anything. Only groups of protocol type coordinatord with
// live members that name their topic (this version on) are seen; an empty group, whose nodes
// are all gone, is no conflict.
func CheckStateTopicUnshared(ctx context.Context, request func(context.Context, kmsg.Request) (kmsg.Response, error),
	group, topic, cluster string) error {
	lr, err := request(ctx, kmsg.NewPtrListGroupsRequest())
	if err != nil {
		return fmt.Errorf("listing the upstream's coordinatord groups: %w", err)
	}
	list := lr.(*kmsg.ListGroupsResponse)
	if err := kerr.ErrorForCode(list.ErrorCode); err != nil {
		return fmt.Errorf("listing the upstream's coordinatord groups: %w", err)
	}
	dr := kmsg.NewPtrDescribeGroupsRequest()
	for _, g := range list.Groups {
		if g.ProtocolType == protocolType && g.Group != group {
			dr.Groups = append(dr.Groups, g.Group)
		}
	}
	if len(dr.Groups) == 0 {
		return nil
	}
	resp, err := request(ctx, dr)
	if err != nil {
		return fmt.Errorf("describing the upstream's coordinatord groups: %w", err)
	}
	for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
		if g.ErrorCode != 0 || g.ProtocolType != protocolType {
			continue // not described to this principal, or gone meanwhile
		}
		for _, mem := range g.Members {
			meta, err := decodeMeta(mem.ProtocolMetadata)
			if err != nil || meta.Topic != topic {
				continue
			}
			addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
			if meta.Cluster == cluster {
				return fmt.Errorf("log.kafka.topic %s is written by the live coordinatord nodes of upstream group %s (node.id %d at %s), "+
					"and this node's log.kafka.group.id is %s: nodes of two groups would both serve every shard of the topic and lose each other's commits; "+
					"give every node of cluster.id %s the same log.kafka.group.id", topic, g.Group, meta.Node, addr, group, cluster)
			}
			other := meta.Cluster
			if other == "" {
				other = "(unknown)"
			}
			return fmt.Errorf("log.kafka.topic %s is written by the live coordinatord nodes of cluster.id %s (upstream group %s, node.id %d at %s), "+
				"and this node has cluster.id %s: nodes of two cluster.ids would both serve every shard of the topic and lose each other's commits; "+
				"give this node cluster.id=%s to join them, or a log.kafka.topic of its own",
				topic, other, g.Group, meta.Node, addr, cluster, other)
		}
	}
	return nil
}
