package e2e

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const consumerGroupCommand = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

// Every kafka-consumer-groups.sh sub-command an operator uses, through the gateway, each checked by
// what it prints and by the offsets it leaves behind: --list (plain, --state, --type),
// --describe (with lag, which needs ListOffsets from the upstream) and --describe
// --state/--members, every --reset-offsets mode, --delete-offsets and --delete; and
// kafka-topics.sh --describe.
func TestGateway_KafkasConsumerGroupToolEverySubCommand(t *testing.T) {
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "ops-"+run, "ops-group-"+run
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 10; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	commit := kadm.Offsets{}
	for p := int32(0); p < 3; p++ {
		commit.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(4 + p)})
	}
	if resp, err := adm.CommitOffsets(ctx, group, commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	tool := func(args ...string) string { return kafkaTool(t, consumerGroupCommand, g.Addr, args...) }

	if out := tool("--list"); !hasLine(out, group) {
		t.Fatalf("--list does not list %s:\n%s", group, out)
	}
	if r := rows(tool("--list", "--state"), group); len(r) != 1 || r[0][1] != "Empty" {
		t.Fatalf("--list --state: %v, want %s Empty", r, group)
	}
	if r := rows(tool("--list", "--type"), group); len(r) != 1 || r[0][1] != "Classic" {
		t.Fatalf("--list --type: %v, want %s Classic", r, group)
	}
	out := tool("--describe", "--group", group, "--state")
	// GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS: the coordinator is coordinatord.
	if r := rows(out, group); len(r) != 1 || !strings.Contains(out, "("+strconv.Itoa(nodeID)+")") || r[0][len(r[0])-2] != "Empty" || r[0][len(r[0])-1] != "0" {
		t.Fatalf("--describe --state, want coordinatord (node %d) as coordinator, Empty, 0 members:\n%s", nodeID, out)
	}
	if out := tool("--describe", "--group", group, "--members"); len(rows(out, group)) != 0 || !strings.Contains(out, "CONSUMER-ID") {
		t.Fatalf("--describe --members of an empty group:\n%s", out)
	}
	out = tool("--describe", "--group", group)
	described := rows(out, group)
	if len(described) != 3 {
		t.Fatalf("--describe lists %d partitions of %s, want 3:\n%s", len(described), group, out)
	}
	for _, r := range described {
		// GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
		p, _ := strconv.Atoi(r[2])
		if r[1] != topic || r[3] != strconv.Itoa(4+p) || r[4] != "10" || r[5] != strconv.Itoa(6-p) {
			t.Fatalf("partition row %v, want current %d, log end 10, lag %d:\n%s", r, 4+p, 6-p, out)
		}
	}

	// Each reset mode, then what the group holds afterwards. The records were produced just now,
	// so "an hour ago" and "2020" both resolve to the earliest offset.
	for _, c := range []struct {
		args []string
		want [3]int64
	}{
		{[]string{"--topic", topic, "--to-earliest"}, [3]int64{0, 0, 0}},
		{[]string{"--topic", topic, "--to-latest"}, [3]int64{10, 10, 10}},
		{[]string{"--topic", topic, "--to-offset", "2"}, [3]int64{2, 2, 2}},
		{[]string{"--topic", topic + ":1", "--shift-by", "3"}, [3]int64{2, 5, 2}},
		{[]string{"--all-topics", "--shift-by", "-1"}, [3]int64{1, 4, 1}},
		{[]string{"--all-topics", "--to-datetime", "2020-01-01T00:00:00.000"}, [3]int64{0, 0, 0}},
		{[]string{"--all-topics", "--to-latest"}, [3]int64{10, 10, 10}},
		{[]string{"--all-topics", "--by-duration", "PT1H"}, [3]int64{0, 0, 0}},
		{[]string{"--topic", topic + ":2", "--to-offset", "7"}, [3]int64{0, 0, 7}},
		{[]string{"--all-topics", "--to-current"}, [3]int64{0, 0, 7}},
	} {
		args := append([]string{"--reset-offsets", "--group", group, "--execute"}, c.args...)
		if out := tool(args...); len(rows(out, group)) == 0 {
			t.Fatalf("%v reports no partition:\n%s", c.args, out)
		}
		if got := committed(t, ctx, adm, group, topic); got != c.want {
			t.Fatalf("after --reset-offsets %v the group holds %v, want %v", c.args, got, c.want)
		}
	}
	// Without --execute a reset is a dry run: it prints the plan and changes nothing.
	if out := tool("--reset-offsets", "--group", group, "--all-topics", "--to-latest"); rows(out, group)[0][3] != "10" {
		t.Fatalf("--reset-offsets --to-latest (dry run) plans:\n%s", out)
	}
	if got := committed(t, ctx, adm, group, topic); got != [3]int64{0, 0, 7} {
		t.Fatalf("a dry-run reset changed the offsets to %v", got)
	}

	out = tool("--delete-offsets", "--group", group, "--topic", topic+":0")
	if !strings.Contains(out, "Request succeeded") || !strings.Contains(out, "Successful") {
		t.Fatalf("--delete-offsets:\n%s", out)
	}
	if r := rows(tool("--describe", "--group", group), group); len(r) != 2 || r[0][2] != "1" || r[1][2] != "2" || r[1][3] != "7" || r[1][5] != "3" {
		t.Fatalf("--describe after deleting partition 0's offset: %v, want partitions 1 and 2 (2 at 7, lag 3)", r)
	}
	if out := tool("--delete", "--group", group); !strings.Contains(out, "Deletion of requested consumer groups ('"+group+"') was successful") {
		t.Fatalf("--delete:\n%s", out)
	}
	if out := tool("--list"); hasLine(out, group) {
		t.Fatalf("--list still lists the deleted group:\n%s", out)
	}

	out = kafkaTool(t, "org.apache.kafka.tools.TopicCommand", g.Addr, "--describe", "--topic", topic)
	if !strings.Contains(out, "PartitionCount: 3") || strings.Count(out, "Leader: 1") != 3 {
		t.Fatalf("kafka-topics --describe:\n%s", out)
	}
	if strings.Contains(out, upstreamAddr) {
		t.Fatalf("kafka-topics --describe shows the upstream address:\n%s", out)
	}
}

// committed is what group holds for the three partitions of topic (-1 where nothing).
func committed(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) [3]int64 {
	t.Helper()
	got := [3]int64{-1, -1, -1}
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Partition < 3 {
			got[o.Partition] = o.At
		}
	})
	return got
}

func hasLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// kafkaToolResult runs one of Kafka's tools and returns everything it printed and its exit error,
// for the sub-commands expected to fail.
func kafkaToolResult(t *testing.T, class, addr string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("java", append([]string{"-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", wordCountClasspath(t), class,
		"--bootstrap-server", addr}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Against a standalone coordinatord (no upstream, so no record data) Kafka's tools do what a
// coordinator can answer — list, describe state and members, delete offsets and groups, topics,
// --reset-offsets --to-current — and the sub-commands that need log offsets (lag, the other resets)
// fail with the tool's own message naming ListOffsets, as docs/operations.md lists them.
func TestStandalone_KafkasToolsAnswerOrSayWhyNot(t *testing.T) {
	requireE2E(t)
	d := startStandalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "sa-"+run, "sa-group-"+run
	if out := kafkaTool(t, "org.apache.kafka.tools.TopicCommand", d.Addr, "--create", "--topic", topic, "--partitions", "2"); !strings.Contains(out, "Created topic "+topic) {
		t.Fatalf("kafka-topics --create:\n%s", out)
	}
	if out := kafkaTool(t, "org.apache.kafka.tools.TopicCommand", d.Addr, "--list"); !hasLine(out, topic) {
		t.Fatalf("kafka-topics --list:\n%s", out)
	}
	adm := kadm.NewClient(newClient(t, d.Addr))
	if resp, err := adm.CommitOffsets(ctx, group, kadm.Offsets{topic: {0: {Topic: topic, At: 3}, 1: {Topic: topic, Partition: 1, At: 5}}}); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	tool := func(args ...string) string { return kafkaTool(t, consumerGroupCommand, d.Addr, args...) }
	if r := rows(tool("--list", "--state"), group); len(r) != 1 || r[0][1] != "Empty" {
		t.Fatalf("--list --state: %v", r)
	}
	if r := rows(kafkaTool(t, "org.apache.kafka.tools.GroupsCommand", d.Addr, "--list"), group); len(r) != 1 || r[0][1] != "Classic" {
		t.Fatalf("kafka-groups --list: %v", r)
	}
	if r := rows(tool("--describe", "--group", group, "--state"), group); len(r) != 1 || r[0][len(r[0])-2] != "Empty" {
		t.Fatalf("--describe --state: %v", r)
	}
	for _, args := range [][]string{
		{"--describe", "--group", group},
		{"--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "1", "--execute"},
		{"--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"},
	} {
		out, _ := kafkaToolResult(t, consumerGroupCommand, d.Addr, args...)
		if !strings.Contains(out, "The node does not support LIST_OFFSETS") {
			t.Fatalf("%v against a standalone coordinatord, want the tool to say ListOffsets is not served:\n%s", args, tail([]byte(out), 2000))
		}
	}
	if got := committed(t, ctx, adm, group, topic); got != [3]int64{3, 5, -1} {
		t.Fatalf("the failed resets changed the offsets to %v", got)
	}
	// --to-current needs no log offsets: it rewrites what the group holds.
	if r := rows(tool("--reset-offsets", "--group", group, "--topic", topic, "--to-current", "--execute"), group); len(r) != 2 || r[0][3]+r[1][3] != map[string]string{"0": "35", "1": "53"}[r[0][2]] {
		t.Fatalf("--reset-offsets --to-current: %v", r)
	}
	if out := tool("--delete-offsets", "--group", group, "--topic", topic+":0"); !strings.Contains(out, "Successful") {
		t.Fatalf("--delete-offsets:\n%s", out)
	}
	if got := committed(t, ctx, adm, group, topic); got != [3]int64{-1, 5, -1} {
		t.Fatalf("after --delete-offsets of partition 0 the group holds %v", got)
	}
	if out := tool("--delete", "--group", group); !strings.Contains(out, "was successful") {
		t.Fatalf("--delete:\n%s", out)
	}
	// Topic configs live in the data cluster, which a standalone coordinator does not have.
	out, err := kafkaToolResult(t, "org.apache.kafka.tools.TopicCommand", d.Addr, "--describe", "--topic", topic)
	if err == nil || !strings.Contains(out, "coordinatord serves the configs of GROUP resources and of its own BROKER resource") {
		t.Fatalf("kafka-topics --describe against a standalone coordinatord: %v\n%s", err, tail([]byte(out), 2000))
	}
}
