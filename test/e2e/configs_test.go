package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A DescribeConfigs naming [TOPIC t, GROUP g, TOPIC u] through the gateway: the topics are
// answered by the upstream, the group by coordinatord, all three in request order.
func TestGateway_MixedDescribeConfigsAnsweredInOrder(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topicT, topicU, group := "cfg-t-"+run, "cfg-u-"+run, "cfg-g-"+run
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("123456")}, topicT); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topicU); err != nil {
		t.Fatal(err)
	}
	alt := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "streams.num.standby.replicas", kmsg.StringPtr("1")
	ar.Configs = append(ar.Configs, ac)
	alt.Resources = append(alt.Resources, ar)
	if resp, err := alt.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group config: %v %+v", err, resp)
	}

	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, topicT}, {kmsg.ConfigResourceTypeGroupConfig, group}, {kmsg.ConfigResourceTypeTopic, topicU}} {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = r.typ, r.name
		req.Resources = append(req.Resources, res)
	}
	// Sent on coordinatord's own port: it must both answer the group and forward the topics.
	resp, err := req.RequestWith(ctx, cl.Broker(nodeID))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 3 {
		t.Fatalf("%d resources answered, want 3", len(resp.Resources))
	}
	value := func(i int, key string) string {
		for _, c := range resp.Resources[i].Configs {
			if c.Name == key && c.Value != nil {
				return *c.Value
			}
		}
		return "<absent>"
	}
	for i, want := range []string{topicT, group, topicU} {
		if r := resp.Resources[i]; r.ResourceName != want || r.ErrorCode != 0 {
			t.Fatalf("resource %d: %s error %d, want %s", i, r.ResourceName, r.ErrorCode, want)
		}
	}
	if v := value(0, "retention.ms"); v != "123456" {
		t.Fatalf("topic %s retention.ms %s (the upstream's answer expected)", topicT, v)
	}
	if v := value(1, "streams.num.standby.replicas"); v != "1" {
		t.Fatalf("group streams.num.standby.replicas %s", v)
	}
	// coordinatord's answer, not the upstream's: it has no share groups, so no share.* configs.
	if v := value(1, "share.session.timeout.ms"); v != "<absent>" {
		t.Fatalf("the group resource was answered by the upstream (share.session.timeout.ms=%s)", v)
	}
	if v := value(2, "retention.ms"); v == "<absent>" || v == "123456" {
		t.Fatalf("topic %s retention.ms %s", topicU, v)
	}
}

// Kafka's own kafka-configs.sh through the gateway: alter and describe a group config, and
// describe coordinatord's broker entry.
func TestGateway_KafkaConfigsToolGroupsAndBroker(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	checkConfigsTool(t, g.Addr, "cfgtool-"+strconv.FormatInt(time.Now().UnixNano(), 36))
}

// checkConfigsTool runs kafka-configs.sh against coordinatord at addr: it alters a consumer and
// a streams key of group (refusing a value out of the broker's bounds with Kafka's message),
// describes the group alone and among every group, deletes the keys again and describes
// coordinatord's broker entry.
func checkConfigsTool(t *testing.T, addr, group string) {
	t.Helper()
	const tool = "org.apache.kafka.tools.ConfigCommand"
	out, err := kafkaToolResult(t, tool, addr, "--alter", "--entity-type", "groups", "--entity-name", group, "--add-config", "consumer.session.timeout.ms=1000")
	if err == nil || !strings.Contains(out, "InvalidConfigurationException: consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.") {
		t.Fatalf("kafka-configs --alter consumer.session.timeout.ms=1000, want it refused by the broker's bounds: %v\n%s", err, tail([]byte(out), 2000))
	}
	out = kafkaTool(t, tool, addr, "--alter", "--entity-type", "groups", "--entity-name", group, "--add-config", "streams.num.standby.replicas=1,consumer.session.timeout.ms=50000")
	if !strings.Contains(out, "Completed updating config for group "+group) {
		t.Fatalf("kafka-configs --alter:\n%s", out)
	}
	out = kafkaTool(t, tool, addr, "--describe", "--entity-type", "groups", "--entity-name", group)
	if !strings.Contains(out, "Dynamic configs for group "+group+" are:") ||
		!strings.Contains(out, "streams.num.standby.replicas=1 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:streams.num.standby.replicas=1") ||
		!strings.Contains(out, "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}") {
		t.Fatalf("kafka-configs --describe groups:\n%s", out)
	}
	out = kafkaTool(t, tool, addr, "--describe", "--entity-type", "groups")
	if !strings.Contains(out, "Dynamic configs for group "+group+" are:") {
		t.Fatalf("kafka-configs --describe --entity-type groups (every group) does not list %s:\n%s", group, out)
	}
	kafkaTool(t, tool, addr, "--alter", "--entity-type", "groups", "--entity-name", group, "--delete-config", "streams.num.standby.replicas,consumer.session.timeout.ms")
	out = kafkaTool(t, tool, addr, "--describe", "--entity-type", "groups", "--entity-name", group)
	if strings.Contains(out, "streams.num.standby.replicas=") || strings.Contains(out, "consumer.session.timeout.ms=") {
		t.Fatalf("kafka-configs --delete-config left a value:\n%s", out)
	}
	out = kafkaTool(t, tool, addr, "--describe", "--all", "--entity-type", "brokers", "--entity-name", strconv.Itoa(nodeID))
	if !strings.Contains(out, "All configs for broker "+strconv.Itoa(nodeID)+" are:") ||
		!strings.Contains(out, "node.id="+strconv.Itoa(nodeID)+" sensitive=false") {
		t.Fatalf("kafka-configs --describe brokers:\n%s", out)
	}
	t.Logf("kafka-configs --describe --all brokers (head):\n%s", tail([]byte(out), 600))
}

// The word count with three instances and the group's streams.num.standby.replicas=1, set
// before the group exists: every instance holds standby tasks.
func TestGateway_WordCountStandbysFromGroupConfig(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t)
	g := startGateway(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	kafkaTool(t, "org.apache.kafka.tools.ConfigCommand", g.Addr, "--alter", "--entity-type", "groups", "--entity-name", r.appID,
		"--add-config", "streams.num.standby.replicas=1")
	var apps []*streamsApp
	for i := range 3 {
		a := startWordCount(t, fmt.Sprint("standby-", i), g.Addr, r.appID, r.in, r.out, "streams")
		apps = append(apps, a)
	}
	for _, a := range apps {
		a.waitState("RUNNING", 120*time.Second)
	}
	r.produce(t, ctx, 1)
	waitStandbys(t, ctx, r.cl, r.appID, 3)
	waitCounts(t, ctx, g.Addr, r.out, r.expected)
	for _, a := range apps {
		a.stop()
	}
}

// waitStandbys waits until the streams group has n members that each hold standby tasks.
func waitStandbys(t *testing.T, ctx context.Context, cl *kgo.Client, group string, n int) {
	t.Helper()
	waitEveryMemberHolds(t, ctx, cl, group, n, "standby", func(a kmsg.StreamsAssignment) []kmsg.TaskIDs { return a.StandbyTasks })
}
