package e2e

import (
	"context"
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
// --state/--members --verbose, of an empty classic group and of live KIP-848 and classic groups;
// every --reset-offsets mode, --delete-offsets and --delete; kafka-groups.sh --list --consumer;
// and kafka-topics.sh --describe.
func TestGateway_KafkasConsumerGroupToolEverySubCommand(t *testing.T) {
	t.Parallel()
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
	// Beside it, live groups on the same topic: two franz-go members of a KIP-848 consumer group
	// and two of a classic group, each group having consumed and committed every record.
	live848, liveClassic := "ops-848-"+run, "ops-classic-"+run
	for range 2 {
		consumeAndCommit(t, ctx, newClient(t, g.Addr, kgo.ConsumerGroup(live848), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()))
		consumeAndCommit(t, ctx, newClient(t, g.Addr, kgo.ConsumerGroup(liveClassic), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()))
	}
	waitLiveGroups(t, ctx, adm, live848, liveClassic, 30)
	tool := func(args ...string) string { return kafkaTool(t, consumerGroupCommand, g.Addr, args...) }

	if out := tool("--list"); !hasLine(out, group) || !hasLine(out, live848) || !hasLine(out, liveClassic) {
		t.Fatalf("--list does not list %s, %s and %s:\n%s", group, live848, liveClassic, out)
	}
	out := tool("--list", "--state")
	if r, n, c := rows(out, group), rows(out, live848), rows(out, liveClassic); len(r) != 1 || r[0][1] != "Empty" ||
		len(n) != 1 || n[0][1] != "Stable" || len(c) != 1 || c[0][1] != "Stable" {
		t.Fatalf("--list --state, want %s Empty, %s and %s Stable:\n%s", group, live848, liveClassic, out)
	}
	out = tool("--list", "--type")
	if r, n, c := rows(out, group), rows(out, live848), rows(out, liveClassic); len(r) != 1 || r[0][1] != "Classic" ||
		len(n) != 1 || n[0][1] != "Consumer" || len(c) != 1 || c[0][1] != "Classic" {
		t.Fatalf("--list --type, want %s and %s Classic, %s Consumer:\n%s", group, liveClassic, live848, out)
	}
	out = kafkaTool(t, "org.apache.kafka.tools.GroupsCommand", g.Addr, "--list", "--consumer")
	// GROUP TYPE PROTOCOL
	if r, n, c := rows(out, group), rows(out, live848), rows(out, liveClassic); len(r) != 1 || len(r[0]) != 2 || r[0][1] != "Classic" ||
		len(n) != 1 || strings.Join(n[0][1:], " ") != "Consumer consumer" || len(c) != 1 || strings.Join(c[0][1:], " ") != "Classic consumer" {
		t.Fatalf("kafka-groups --list --consumer, want %s Classic, %s Consumer consumer, %s Classic consumer:\n%s", group, live848, liveClassic, out)
	}
	out = tool("--describe", "--group", group, "--group", live848, "--group", liveClassic, "--state")
	// GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS: the coordinator is coordinatord.
	if r := rows(out, group); len(r) != 1 || !strings.Contains(out, "("+strconv.Itoa(nodeID)+")") || r[0][len(r[0])-2] != "Empty" || r[0][len(r[0])-1] != "0" {
		t.Fatalf("--describe --state, want coordinatord (node %d) as coordinator, Empty, 0 members:\n%s", nodeID, out)
	}
	for g, strategy := range map[string]string{live848: "uniform", liveClassic: "cooperative-sticky"} {
		if r := rows(out, g); len(r) != 1 || strings.Join(r[0][len(r[0])-3:], " ") != strategy+" Stable 2" {
			t.Fatalf("--describe --state of %s, want %s, Stable, 2 members:\n%s", g, strategy, out)
		}
	}
	out = tool("--describe", "--group", group, "--group", live848, "--group", liveClassic, "--members", "--verbose")
	if len(rows(out, group)) != 0 || strings.Count(out, "CONSUMER-ID") != 3 {
		t.Fatalf("--describe --members of the three groups, want a table for each and no row of the empty %s:\n%s", group, out)
	}
	checkConsumerMembers(t, out, live848, topic, 2, 3, true)
	checkConsumerMembers(t, out, liveClassic, topic, 2, 3, false)
	out = tool("--describe", "--group", group, "--group", live848, "--group", liveClassic)
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
	// GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID: every
	// partition of the live groups consumed to the end, by one of their members.
	for _, g := range []string{live848, liveClassic} {
		rs := rows(out, g)
		if len(rs) != 3 {
			t.Fatalf("--describe lists %d partitions of %s, want 3:\n%s", len(rs), g, out)
		}
		for _, r := range rs {
			if r[1] != topic || r[3] != "10" || r[4] != "10" || r[5] != "0" || r[6] == "-" || r[8] != "kgo" {
				t.Fatalf("partition row %v of %s, want current 10 = log end, lag 0, held by a member:\n%s", r, g, out)
			}
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

// consumeAndCommit polls with cl, a member of a consumer group, committing what it got, until the
// test ends.
func consumeAndCommit(t *testing.T, ctx context.Context, cl *kgo.Client) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
			cl.CommitUncommittedOffsets(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitLiveGroups waits until the KIP-848 group consumer and the classic group classic are
// Stable with two members and have each committed records offsets (what the members hold is for
// the tools to show).
func waitLiveGroups(t *testing.T, ctx context.Context, adm *kadm.Client, consumer, classic string, records int64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		cg, err1 := adm.DescribeConsumerGroups(ctx, consumer)
		g, err2 := adm.DescribeGroups(ctx, classic)
		if err1 == nil && err2 == nil && cg[consumer].State == "Stable" && len(cg[consumer].Members) == 2 &&
			g[classic].State == "Stable" && len(g[classic].Members) == 2 &&
			committedSum(t, ctx, adm, consumer) == records && committedSum(t, ctx, adm, classic) == records {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live groups never settled: consumer group %+v (%v), classic group %+v (%v), committed %d and %d of %d",
				cg[consumer], err1, g[classic], err2, committedSum(t, ctx, adm, consumer), committedSum(t, ctx, adm, classic), records)
		}
		time.Sleep(200 * time.Millisecond)
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
	out, err := toolCommand(t, class, addr, args...).CombinedOutput()
	return string(out), err
}

// Against a standalone coordinatord (no upstream, so no record data) Kafka's tools do what a
// coordinator can answer, for groups of every type with live members — list (every type and
// filter), describe state and members, delete offsets and groups, topics, --reset-offsets
// --to-current, group and broker configs — and the sub-commands that need log offsets (lag, the
// other resets) fail with the tool's own message naming ListOffsets, as docs/operations.md lists
// them.
func TestStandalone_KafkasToolsAnswerOrSayWhyNot(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	d := startStandalone(t, "group.streams.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group, consumerGroup, app := "sa-"+run, "sa-group-"+run, "sa-848-"+run, "sa-app-"+run
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
	// A live KIP-848 consumer group and a live streams group, two members each, one partition
	// (task) per member.
	var consumers, streamers []*liveMember
	for i := range 2 {
		consumers = append(consumers, startConsumerMember(t, newClient(t, d.Addr), consumerGroup, "c"+strconv.Itoa(i), topic))
		streamers = append(streamers, startStreamsMember(t, newClient(t, d.Addr), app, "s"+strconv.Itoa(i), "process-"+strconv.Itoa(i), topic))
	}
	for _, m := range append(consumers, streamers...) {
		m.waitHolding(1)
	}
	waitGroupState(t, ctx, adm, consumerGroup, "Stable")
	waitGroupState(t, ctx, adm, app, "Stable")

	t.Run("groups of every type", func(t *testing.T) {
		groupsTool := func(args ...string) string {
			return kafkaTool(t, "org.apache.kafka.tools.GroupsCommand", d.Addr, append([]string{"--list"}, args...)...)
		}
		// GROUP TYPE PROTOCOL: what each filter of kafka-groups.sh shows of the three groups.
		for _, c := range []struct {
			filter []string
			want   map[string]string
		}{
			{nil, map[string]string{group: "Classic", consumerGroup: "Consumer consumer", app: "Streams streams"}},
			{[]string{"--consumer"}, map[string]string{group: "Classic", consumerGroup: "Consumer consumer"}},
			{[]string{"--streams"}, map[string]string{app: "Streams streams"}},
			{[]string{"--group-type", "classic"}, map[string]string{group: "Classic"}},
		} {
			out := groupsTool(c.filter...)
			for _, g := range []string{group, consumerGroup, app} {
				r := rows(out, g)
				got := ""
				if len(r) == 1 {
					got = strings.Join(r[0][1:], " ")
				}
				if got != c.want[g] || len(r) > 1 {
					t.Errorf("kafka-groups --list %v shows %s as %q, want %q:\n%s", c.filter, g, got, c.want[g], out)
				}
			}
		}
	})

	t.Run("consumer groups", func(t *testing.T) {
		tool := func(args ...string) string { return kafkaTool(t, consumerGroupCommand, d.Addr, args...) }
		// GROUP TYPE STATE; kafka-consumer-groups.sh lists consumer groups only, not the streams one.
		out := tool("--list", "--state", "--type")
		if c, n := rows(out, group), rows(out, consumerGroup); len(c) != 1 || c[0][1] != "Classic" || c[0][2] != "Empty" ||
			len(n) != 1 || n[0][1] != "Consumer" || n[0][2] != "Stable" || len(rows(out, app)) != 0 {
			t.Fatalf("--list --state --type, want %s Classic Empty and %s Consumer Stable, and not the streams group:\n%s", group, consumerGroup, out)
		}
		out = tool("--describe", "--group", group, "--group", consumerGroup, "--state")
		// GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
		if c, n := rows(out, group), rows(out, consumerGroup); len(c) != 1 || c[0][len(c[0])-2] != "Empty" ||
			len(n) != 1 || n[0][len(n[0])-3] != "uniform" || n[0][len(n[0])-2] != "Stable" || n[0][len(n[0])-1] != "2" {
			t.Fatalf("--describe --state, want %s Empty and %s uniform Stable with 2 members:\n%s", group, consumerGroup, out)
		}
		checkConsumerMembers(t, tool("--describe", "--group", consumerGroup, "--members", "--verbose"), consumerGroup, topic, 2, 2, true)
		for _, args := range [][]string{
			{"--describe", "--group", group},
			{"--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "1", "--execute"},
			{"--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"},
		} {
			// Kafka 4.4's kafka-consumer-groups.sh prints the error and still exits 0.
			out, err := kafkaToolResult(t, consumerGroupCommand, d.Addr, args...)
			if err != nil || !strings.Contains(out, "UnsupportedVersionException: The node does not support LIST_OFFSETS") {
				t.Fatalf("%v against a standalone coordinatord: %v, want the tool to say ListOffsets is not served (and exit 0, as it does):\n%s", args, err, tail([]byte(out), 2000))
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
	})

	t.Run("streams groups", func(t *testing.T) {
		checkStandaloneStreamsTool(t, ctx, d.Addr, adm, app, topic, streamers)
	})

	t.Run("configs", func(t *testing.T) {
		checkConfigsTool(t, d.Addr, consumerGroup)
		// Without --entity-name the tool describes every broker, then the cluster's dynamic
		// defaults (the BROKER resource ""): a standalone coordinatord is the cluster and has none.
		out := kafkaTool(t, "org.apache.kafka.tools.ConfigCommand", d.Addr, "--describe", "--entity-type", "brokers")
		if !strings.Contains(out, "Dynamic configs for broker "+strconv.Itoa(nodeID)+" are:") || !strings.Contains(out, "Default configs for brokers in the cluster are:") {
			t.Fatalf("kafka-configs --describe --entity-type brokers:\n%s", out)
		}
	})

	// Topic configs live in the data cluster, which a standalone coordinator does not have.
	out, err := kafkaToolResult(t, "org.apache.kafka.tools.TopicCommand", d.Addr, "--describe", "--topic", topic)
	if err == nil || !strings.Contains(out, "coordinatord serves the configs of GROUP resources and of its own BROKER resource") {
		t.Fatalf("kafka-topics --describe against a standalone coordinatord: %v\n%s", err, tail([]byte(out), 2000))
	}
}

// memberTable is kafka-consumer-groups.sh --describe --members as one map per member row of
// group, keyed by the header's column names (no cell of that table holds a space).
func memberTable(t *testing.T, out, group string) []map[string]string {
	t.Helper()
	var header []string
	var table []map[string]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "GROUP" && f[1] == "CONSUMER-ID":
			header = f
		case len(f) > 0 && f[0] == group:
			if len(f) != len(header) {
				t.Fatalf("member row %v does not match the header %v:\n%s", f, header, out)
			}
			row := map[string]string{}
			for i, h := range header {
				row[h] = f[i]
			}
			table = append(table, row)
		}
	}
	return table
}

// checkConsumerMembers checks kafka-consumer-groups.sh --describe --members --verbose of a live
// group: n members, each holding at least one partition of topic, between them every one of its
// partitions exactly once. A KIP-848 member of a stable group is at its target epoch and
// assignment; a classic group has neither (the tool prints "-").
func checkConsumerMembers(t *testing.T, out, group, topic string, n, partitions int, kip848 bool) {
	t.Helper()
	members := memberTable(t, out, group)
	if len(members) != n {
		t.Fatalf("--describe --members --verbose lists %d members of %s, want %d:\n%s", len(members), group, n, out)
	}
	held := map[string]int{}
	for _, m := range members {
		tp, ok := strings.CutPrefix(m["CURRENT-ASSIGNMENT"], topic+":")
		if !ok || m["#PARTITIONS"] != strconv.Itoa(len(strings.Split(tp, ","))) {
			t.Fatalf("member %s holds %s (%s partitions), want partitions of %s:\n%s", m["CONSUMER-ID"], m["CURRENT-ASSIGNMENT"], m["#PARTITIONS"], topic, out)
		}
		if kip848 && (m["CURRENT-EPOCH"] == "-" || m["CURRENT-EPOCH"] != m["TARGET-EPOCH"] || m["TARGET-ASSIGNMENT"] != m["CURRENT-ASSIGNMENT"]) {
			t.Fatalf("member %s of a stable consumer group is not at its target:\n%s", m["CONSUMER-ID"], out)
		}
		if !kip848 && (m["CURRENT-EPOCH"] != "-" || m["TARGET-ASSIGNMENT"] != "-") {
			t.Fatalf("member %s of a classic group shows KIP-848 epochs or targets:\n%s", m["CONSUMER-ID"], out)
		}
		for _, p := range strings.Split(tp, ",") {
			held[p]++
		}
	}
	for p := range partitions {
		if held[strconv.Itoa(p)] != 1 {
			t.Fatalf("partition %d is held by %d members, want 1:\n%s", p, held[strconv.Itoa(p)], out)
		}
	}
}
