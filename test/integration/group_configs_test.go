package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupConfigChange struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

func setGroupConfig(name, value string) groupConfigChange {
	return groupConfigChange{name: name, value: &value}
}

func alterGroupConfigs(t *testing.T, cl *kgo.Client, group string, validateOnly bool, changes ...groupConfigChange) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, c := range changes {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op, rc.Value = c.name, c.op, c.value
		r.Configs = append(r.Configs, rc)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	res := resp.Resources[0]
	msg := ""
	if res.ErrorMessage != nil {
		msg = *res.ErrorMessage
	}
	return res.ErrorCode, msg
}

// describeGroupConfigs returns name -> "value/source" for the group's described keys.
func describeGroupConfigs(t *testing.T, cl *kgo.Client, group string, names ...string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	r.ConfigNames = names
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Resources[0].ErrorCode; c != 0 {
		t.Fatalf("describe configs of %s: error %d", group, c)
	}
	out := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = fmt.Sprintf("%s/%d", *c.Value, c.Source)
	}
	return out
}

// kafka-configs.sh --entity-type groups against coordinatord: a streams group's
// streams.num.standby.replicas set at run time gives it standbys at its next heartbeats, the
// override survives a restart, bad values get Kafka's errors, and ValidateOnly writes nothing.
func TestGroupConfigsStandbysRestartAndValidation(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
	createStreamsTopics(t, d.Addr, 4, "gc-in-0")
	cl := d.client()
	defer cl.Close()

	app := newStreamsApp(t, d.Addr, "gc-app", streamsTopology("gc-in", 1))
	app.interval = 200 * time.Millisecond
	var live []*simMember
	for i := range 3 {
		m := app.newMember(fmt.Sprint("m", i), fmt.Sprint("p", i), nil)
		m.start()
		live = append(live, m)
	}
	app.waitConverged(live, 1, 4, 0, 30*time.Second)

	if code, msg := alterGroupConfigs(t, cl, "gc-app", false, setGroupConfig("streams.num.standby.replicas", "3")); code != 40 ||
		msg != "streams.num.standby.replicas must be less than or equal to 2" {
		t.Fatalf("standbys above group.streams.max.standby.replicas: %d %q", code, msg)
	}
	if code, msg := alterGroupConfigs(t, cl, "gc-app", false, setGroupConfig("streams.session.timeout.ms", "500")); code != 40 ||
		msg != "streams.session.timeout.ms must be in the range 1000 to 60000 inclusive." {
		t.Fatalf("session timeout below the broker minimum: %d %q", code, msg)
	}
	if code, msg := alterGroupConfigs(t, cl, "gc-app", false, groupConfigChange{name: "streams.num.standby.replicas"}); code != 42 {
		t.Fatalf("SET without a value: %d %q", code, msg)
	}
	if code, _ := alterGroupConfigs(t, cl, "gc-app", true, setGroupConfig("streams.num.standby.replicas", "2")); code != 0 {
		t.Fatalf("validate only: %d", code)
	}
	if got := describeGroupConfigs(t, cl, "gc-app", "streams.num.standby.replicas")["streams.num.standby.replicas"]; got != "0/5" {
		t.Fatalf("after validate-only: %s, want the default 0/5", got)
	}

	if code, msg := alterGroupConfigs(t, cl, "gc-app", false, setGroupConfig("streams.num.standby.replicas", "1")); code != 0 {
		t.Fatalf("set standbys: %d %q", code, msg)
	}
	if l := d.waitLogged("group configs altered", func(l map[string]any) bool { return l["group"] == "gc-app" }); fmt.Sprint(l["changes"]) != "[SET streams.num.standby.replicas]" {
		t.Fatalf("logged %v", l)
	}
	if n := len(d.logged("group configs altered")); n != 1 {
		t.Fatalf("%d changes logged, want 1 (rejected and validate-only changes write nothing)", n)
	}
	app.waitConverged(live, 1, 4, 1, 30*time.Second)
	app.stopAll()

	d.stop()
	d.start(append(append([]string{}, streamsTestSettings...), "group.streams.initial.rebalance.delay.ms=0")...)
	cl2 := d.client()
	defer cl2.Close()
	if got := describeGroupConfigs(t, cl2, "gc-app")["streams.num.standby.replicas"]; got != "1/8" {
		t.Fatalf("after restart: %s, want 1 from the group (source 8)", got)
	}
	// Unset: the broker's value again.
	if code, _ := alterGroupConfigs(t, cl2, "gc-app", false, groupConfigChange{name: "streams.num.standby.replicas", op: kmsg.IncrementalAlterConfigOpDelete}); code != 0 {
		t.Fatalf("delete: %d", code)
	}
	if got := describeGroupConfigs(t, cl2, "gc-app")["streams.num.standby.replicas"]; got != "0/5" {
		t.Fatalf("after delete: %s", got)
	}
}

// kafka-configs.sh --entity-type brokers --entity-name <node id> --describe: coordinatord's
// own BROKER resource lists its effective keys; other resources are refused in standalone mode.
func TestGroupConfigsBrokerSelfDescribe(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "node.id=7", "group.max.size=10")
	adm := kadm.NewClient(d.client())
	defer adm.Close()
	rcs, err := adm.DescribeBrokerConfigs(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("7", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("%v %v", err, rc.Err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		got[c.Key] = c
	}
	if c := got["group.max.size"]; c.MaybeValue() != "10" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("group.max.size: %+v", c)
	}
	if c := got["group.min.session.timeout.ms"]; c.MaybeValue() != "6000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("group.min.session.timeout.ms: %+v", c)
	}
	// kafka-configs.sh --describe --entity-type brokers (no name) then describes the cluster's
	// dynamic broker defaults, the resource "": there are none, and altering them is refused
	// as coordinatord's own configuration is.
	rcs, err = adm.DescribeBrokerConfigs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := rcs.On("", nil); err != nil || rc.Err != nil || len(rc.Configs) != 0 {
		t.Fatalf("the cluster's broker defaults: %+v %v, want none", rc, err)
	}
	ars, err := adm.ValidateAlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Name: "group.max.size", Value: kmsg.StringPtr("5")}})
	if err != nil {
		t.Fatal(err)
	}
	if ar, err := ars.On("", nil); err != nil || !errorsIs(ar.Err, kerr.InvalidRequest) || !strings.Contains(ar.ErrMessage, "static") {
		t.Fatalf("altering the cluster's broker defaults: %+v %v, want INVALID_REQUEST, the configuration is static", ar, err)
	}
	trcs, err := adm.DescribeTopicConfigs(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if trc, _ := trcs.On("t", nil); trc.Err == nil {
		t.Fatal("a TOPIC resource was answered in standalone mode")
	}
}

// kafka-configs --describe shows a coordinatord-only (internal) group key an operator set, with
// source DYNAMIC_GROUP_CONFIG, and still hides it on a group where it is unset, as Kafka does.
func TestGroupConfigsInternalKeyShownWhenSet(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cl := d.client()
	if code, msg := alterGroupConfigs(t, cl, "g", false, setGroupConfig("streams.migration.policy", "upgrade")); code != 0 {
		t.Fatalf("set streams.migration.policy: %d %s", code, msg)
	}
	if got := describeGroupConfigs(t, cl, "g")["streams.migration.policy"]; got != "upgrade/8" {
		t.Fatalf("described streams.migration.policy %q, want upgrade from DYNAMIC_GROUP_CONFIG (8)", got)
	}
	if got, ok := describeGroupConfigs(t, cl, "h")["streams.migration.policy"]; ok {
		t.Fatalf("unset streams.migration.policy described as %q", got)
	}
}

// group.config.max.groups.per.shard bounds the group ids that have configs: with one shard and
// a bound of 2, a third id is refused with INVALID_CONFIG naming the key, and deleting an id's
// configs makes room.
func TestGroupConfigsCountBounded(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "offsets.topic.num.partitions=1", "group.config.max.groups.per.shard=2")
	cl := d.client()
	for _, g := range []string{"never-a-group-1", "never-a-group-2"} {
		if code, msg := alterGroupConfigs(t, cl, g, false, setGroupConfig("streams.num.standby.replicas", "1")); code != 0 {
			t.Fatalf("configs of %s: %d %s", g, code, msg)
		}
	}
	code, msg := alterGroupConfigs(t, cl, "never-a-group-3", false, setGroupConfig("streams.num.standby.replicas", "1"))
	if code != kerr.InvalidConfig.Code || !strings.Contains(msg, "group.config.max.groups.per.shard") {
		t.Fatalf("configs of a third id: %d %q, want INVALID_CONFIG naming group.config.max.groups.per.shard", code, msg)
	}
	if code, msg := alterGroupConfigs(t, cl, "never-a-group-1", false, groupConfigChange{name: "streams.num.standby.replicas", op: kmsg.IncrementalAlterConfigOpDelete}); code != 0 {
		t.Fatalf("deleting configs: %d %s", code, msg)
	}
	if code, msg := alterGroupConfigs(t, cl, "never-a-group-3", false, setGroupConfig("streams.num.standby.replicas", "1")); code != 0 {
		t.Fatalf("configs of a third id after one was deleted: %d %s", code, msg)
	}
}

// kafka-configs.sh --entity-type groups --alter --add-config consumer.heartbeat.interval.ms=...,
// consumer.session.timeout.ms=... on a live KIP-848 group: as in Kafka, the member's next
// ConsumerGroupHeartbeat answers with the group's interval, and from that heartbeat on the
// member is removed after the group's session timeout rather than the broker's.
func TestGroupConfigsConsumerTimingsApplyAtNextHeartbeat(t *testing.T) {
	t.Parallel()
	// The broker's session timeout is long enough that a removal within it can only come from
	// the group's override.
	d := startDaemon(t, "group.consumer.min.heartbeat.interval.ms=100", "group.consumer.heartbeat.interval.ms=200",
		"group.consumer.min.session.timeout.ms=1000", "group.consumer.session.timeout.ms=40000")
	cl := d.client()
	defer cl.Close()
	const group, member = "cg-timings", "cg-timings-member-000001"
	var epoch int32
	heartbeat := func() *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, member, epoch, -1
		if epoch == 0 {
			req.RebalanceTimeoutMillis, req.SubscribedTopicNames, req.Topics = 10000, []string{}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("ConsumerGroupHeartbeat: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
		}
		epoch = resp.MemberEpoch
		return resp
	}
	members := func() int {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.Groups[0].ErrorCode; c != 0 {
			t.Fatalf("ConsumerGroupDescribe: %v", kerr.ErrorForCode(c))
		}
		return len(resp.Groups[0].Members)
	}

	if got := heartbeat().HeartbeatIntervalMillis; got != 200 {
		t.Fatalf("join answered heartbeat interval %d ms, want the broker's 200", got)
	}
	if code, msg := alterGroupConfigs(t, cl, group, false, setGroupConfig("consumer.heartbeat.interval.ms", "99")); code != kerr.InvalidConfig.Code ||
		msg != "consumer.heartbeat.interval.ms must be in the range 100 to 15000 inclusive." {
		t.Fatalf("heartbeat interval below group.consumer.min.heartbeat.interval.ms: %d %q", code, msg)
	}
	if code, msg := alterGroupConfigs(t, cl, group, false, setGroupConfig("consumer.heartbeat.interval.ms", "300"), setGroupConfig("consumer.session.timeout.ms", "1500")); code != 0 {
		t.Fatalf("set consumer timings: %d %q", code, msg)
	}
	if got := describeGroupConfigs(t, cl, group, "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"); fmt.Sprint(got) != "map[consumer.heartbeat.interval.ms:300/8 consumer.session.timeout.ms:1500/8]" {
		t.Fatalf("described %v", got)
	}
	if got := heartbeat().HeartbeatIntervalMillis; got != 300 {
		t.Fatalf("next heartbeat answered interval %d ms, want the group's 300", got)
	}
	// The member goes silent: the group's 1.5 s session removes it, long before the broker's 40 s.
	silent := time.Now()
	deadline := silent.Add(20 * time.Second)
	for members() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("member still in the group %v after its last heartbeat; consumer.session.timeout.ms=1500 did not apply", time.Since(silent))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(silent); took < 1500*time.Millisecond {
		t.Fatalf("member removed %v after its last heartbeat, before its 1.5 s session ended", took)
	}
}
