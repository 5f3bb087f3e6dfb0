package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// In gateway mode a Streams group's internal topics are created in the upstream cluster; when
// the upstream refuses one (here a changelog asking for 3 replicas of a one-broker cluster), the
// member hears it as Kafka tells it: MISSING_INTERNAL_TOPICS with the upstream's reason in the
// status detail, no tasks, and the same on its next heartbeat, which tries again. Nothing half
// made is left upstream.
func TestGateway_UpstreamRefusingAnInternalTopicReachesTheMember(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	name := "gw-refused-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	source, group := name+"-in", name+"-app"
	changelog := group + "-store-changelog"
	createTopic(t, ctx, cl, source)

	beat := func(epoch int32, withTopology bool) *kmsg.StreamsGroupHeartbeatResponse {
		t.Helper()
		r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, "member-1", epoch, 30000
		process := "process-1"
		r.ProcessID = &process
		if withTopology {
			st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
			st.SubtopologyID, st.SourceTopics = "0", []string{source}
			ti := kmsg.NewTopicInfo()
			ti.Topic, ti.ReplicationFactor = changelog, 3
			st.StateChangelogTopics = []kmsg.TopicInfo{ti}
			tp := kmsg.NewStreamsGroupHeartbeatRequestTopology()
			tp.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}
			r.Topology = &tp
		}
		r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		resp, err := r.RequestWith(ctx, cl.Broker(nodeID))
		if err != nil {
			t.Fatal(err)
		}
		if err := kerrOf(resp.ErrorCode, resp.ErrorMessage); err != nil {
			t.Fatalf("heartbeat at epoch %d: %v", epoch, err)
		}
		return resp
	}
	missing := func(resp *kmsg.StreamsGroupHeartbeatResponse) string {
		for _, s := range resp.Status {
			if s.StatusCode == 3 { // MISSING_INTERNAL_TOPICS
				return s.StatusDetail
			}
		}
		return ""
	}
	want := "Creation failed: " + changelog + " (INVALID_REPLICATION_FACTOR)"
	first := beat(0, true)
	if d := missing(first); !strings.Contains(d, want) {
		t.Fatalf("joining member's status %+v, want MISSING_INTERNAL_TOPICS whose detail says %q", first.Status, want)
	}
	if len(first.ActiveTasks) > 0 {
		t.Fatalf("a member whose changelog could not be created got tasks %+v", first.ActiveTasks)
	}
	again := beat(first.MemberEpoch, false)
	if d := missing(again); !strings.Contains(d, want) {
		t.Fatalf("next heartbeat's status %+v: the creation is not tried again or its failure not reported", again.Status)
	}
	topics, err := kadm.NewClient(newClient(t, upstreamAddr)).ListTopics(ctx, changelog)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := topics[changelog]; ok && d.Err == nil {
		t.Fatalf("the upstream has %s although creating it failed", changelog)
	}
}
