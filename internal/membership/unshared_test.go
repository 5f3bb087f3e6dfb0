package membership

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// upstreamGroups answers ListGroups and DescribeGroups with the groups given, each a protocol
// type and its members' metadata.
func upstreamGroups(groups map[string][]memberMeta, types map[string]string, describeErr map[string]int16) func(context.Context, kmsg.Request) (kmsg.Response, error) {
	return func(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
		switch r := req.(type) {
		case *kmsg.ListGroupsRequest:
			resp := kmsg.NewPtrListGroupsResponse()
			for g := range groups {
				lg := kmsg.NewListGroupsResponseGroup()
				lg.Group, lg.ProtocolType = g, types[g]
				resp.Groups = append(resp.Groups, lg)
			}
			return resp, nil
		case *kmsg.DescribeGroupsRequest:
			resp := kmsg.NewPtrDescribeGroupsResponse()
			for _, g := range r.Groups {
				dg := kmsg.NewDescribeGroupsResponseGroup()
				dg.Group, dg.ProtocolType, dg.ErrorCode = g, types[g], describeErr[g]
				for _, m := range groups[g] {
					dm := kmsg.NewDescribeGroupsResponseGroupMember()
					dm.ProtocolMetadata = encodeMeta(m)
					dg.Members = append(dg.Members, dm)
				}
				resp.Groups = append(resp.Groups, dg)
			}
			return resp, nil
		}
		panic("unexpected request")
	}
}

// The live nodes of another cluster.id writing the topic refuse the start, naming their
// cluster.id, group and a node; this node's own group, another cluster's other topic, a
// consumer group whose metadata happens to parse, an empty group, a group this principal may
// not describe and members of versions that do not name their topic do not.
func TestCheckStateTopicUnsharedRefusesAnotherClustersLiveNodes(t *testing.T) {
	types := map[string]string{"coordinatord-c1": protocolType, "coordinatord-c2": protocolType, "coordinatord-c3": protocolType,
		"coordinatord-c4": protocolType, "coordinatord-old": protocolType, "app": "consumer", "hidden": protocolType}
	groups := map[string][]memberMeta{
		"coordinatord-c1":  {{Node: 1, Host: "h1", Port: 9092, Topic: "state", Cluster: "c1"}},
		"coordinatord-c3":  {{Node: 3, Host: "h3", Port: 9092, Topic: "other", Cluster: "c3"}},
		"coordinatord-c4":  {},
		"coordinatord-old": {{Node: 5, Host: "h5", Port: 9092}},
		"app":              {{Node: 6, Topic: "state", Cluster: "x"}},
		"hidden":           {{Node: 7, Topic: "state", Cluster: "h"}},
	}
	deny := map[string]int16{"hidden": kerr.GroupAuthorizationFailed.Code}
	if err := CheckStateTopicUnshared(context.Background(), upstreamGroups(groups, types, deny), "coordinatord-c1", "state", "c1"); err != nil {
		t.Fatalf("refused with only its own group writing the topic: %v", err)
	}
	groups["coordinatord-c2"] = []memberMeta{{Node: 2, Host: "h2", Port: 9093, Topic: "state", Cluster: "c2"}}
	err := CheckStateTopicUnshared(context.Background(), upstreamGroups(groups, types, deny), "coordinatord-c1", "state", "c1")
	if err == nil || !strings.Contains(err.Error(), "cluster.id c2 (upstream group coordinatord-c2, node.id 2 at h2:9093)") ||
		!strings.Contains(err.Error(), "this node has cluster.id c1") {
		t.Fatalf("got %v, want a refusal naming cluster.id c2 and its node", err)
	}
	// One cluster.id, two log.kafka.group.id values: the same split, named as such.
	delete(groups, "coordinatord-c2")
	groups["custom"], types["custom"] = []memberMeta{{Node: 8, Host: "h8", Port: 9092, Topic: "state", Cluster: "c1"}}, protocolType
	err = CheckStateTopicUnshared(context.Background(), upstreamGroups(groups, types, deny), "coordinatord-c1", "state", "c1")
	if err == nil || !strings.Contains(err.Error(), "upstream group custom (node.id 8 at h8:9092)") ||
		!strings.Contains(err.Error(), "the same log.kafka.group.id") {
		t.Fatalf("got %v, want a refusal naming the other group", err)
	}
}
