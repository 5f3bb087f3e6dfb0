package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaTool runs one of Apache Kafka 4.4's command-line tools (the class behind the .sh script)
// against addr and returns its standard output.
func kafkaTool(t *testing.T, class, addr string, args ...string) string {
	t.Helper()
	cmd := toolCommand(t, class, addr, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", class, args, err, out.String(), tail(errb.Bytes(), 3000))
	}
	return out.String()
}

// toolCommand is the JVM running one tool. A tool lives a second or two, so the JIT's first tier
// and the serial collector serve it best: they start it in well under half the time the defaults
// take on a loaded machine.
func toolCommand(t *testing.T, class, addr string, args ...string) *exec.Cmd {
	t.Helper()
	return exec.Command("java", append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", wordCountClasspath(t), class, "--bootstrap-server", addr}, args...)...)
}

// rows returns the whitespace-separated rows of a tool's table whose first column is first.
func rows(out, first string) [][]string {
	var rs [][]string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			rs = append(rs, f)
		}
	}
	return rs
}

// Every kafka-streams-groups.sh sub-command an operator uses, against a running Kafka Streams
// application through the gateway: --list (plain, --state), --describe --state/--members/--offsets
// (verbose too); then, with the application stopped, --reset-offsets (--to-current,
// --to-earliest), --delete-offsets and --delete. kafka-groups.sh --list shows the streams group beside a classic one.
func TestGateway_KafkasStreamsGroupToolEverySubCommand(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "group.streams.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	a := startWordCount(t, "tooled", g.Addr, r.appID, r.in, r.out, "streams")
	a.waitState("RUNNING", 90*time.Second)
	r.produce(t, ctx, 1)
	waitCounts(t, ctx, g.Addr, r.out, r.expected)
	tool := func(args ...string) string {
		return kafkaTool(t, "org.apache.kafka.tools.streams.StreamsGroupCommand", g.Addr, args...)
	}

	if out := tool("--list"); !hasLine(out, r.appID) {
		t.Fatalf("--list does not list %s:\n%s", r.appID, out)
	}
	if rs := rows(tool("--list", "--state"), r.appID); len(rs) != 1 || rs[0][1] != "Stable" {
		t.Fatalf("--list --state: %v, want %s Stable", rs, r.appID)
	}
	out := tool("--describe", "--group", r.appID, "--state", "--verbose")
	// GROUP COORDINATOR (ID) ASSIGNOR STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
	if rs := rows(out, r.appID); len(rs) != 1 || !strings.Contains(out, "("+strconv.Itoa(nodeID)+")") ||
		rs[0][3] != "sticky" || rs[0][4] != "Stable" || rs[0][5] != rs[0][6] || rs[0][7] != "1" {
		t.Fatalf("--describe --state --verbose, want coordinatord as coordinator, sticky, Stable, target epoch = group epoch, 1 member:\n%s", out)
	}
	out = tool("--describe", "--group", r.appID, "--members", "--verbose")
	if members := rows(out, r.appID); len(members) != 1 || !strings.Contains(out, " streams ") {
		t.Fatalf("--describe --members --verbose lists %d members, want the one instance, on the streams protocol:\n%s", len(members), out)
	}
	if !strings.Contains(out, "ACTIVE: 0:[0,1,2,3]; 1:[0,1,2,3]") || !strings.Contains(out, "TARGET-ACTIVE: 0:[0,1,2,3]; 1:[0,1,2,3]") {
		t.Fatalf("the one instance does not hold (and target) every task of both subtopologies:\n%s", out)
	}
	out = tool("--describe", "--group", r.appID, "--offsets", "--verbose")
	inputRows := 0
	for _, row := range rows(out, r.appID) {
		// GROUP TOPIC PARTITION CURRENT-OFFSET LEADER-EPOCH LOG-END-OFFSET OFFSET-LAG
		if row[1] == r.in && row[3] != "-" {
			inputRows++
			if row[3] != row[5] || row[6] != "0" {
				t.Fatalf("input partition %v: the application has processed everything, want current = log end and lag 0:\n%s", row, out)
			}
		}
	}
	if inputRows == 0 {
		t.Fatalf("--describe --offsets shows no committed offset of the input topic %s:\n%s", r.in, out)
	}

	classic := "classic-beside-" + r.appID
	adm := kadm.NewClient(newClient(t, g.Addr))
	if resp, err := adm.CommitOffsets(ctx, classic, kadm.Offsets{r.in: {0: {Topic: r.in, Partition: 0, At: 1}}}); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	out = kafkaTool(t, "org.apache.kafka.tools.GroupsCommand", g.Addr, "--list")
	// GROUP TYPE PROTOCOL
	if s, c := rows(out, r.appID), rows(out, classic); len(s) != 1 || s[0][1] != "Streams" || s[0][2] != "streams" || len(c) != 1 || c[0][1] != "Classic" {
		t.Fatalf("kafka-groups --list, want %s as Streams/streams and %s as Classic:\n%s", r.appID, classic, out)
	}

	a.stop()
	waitGroupState(t, ctx, adm, r.appID, "Empty")
	held, err := adm.FetchOffsets(ctx, r.appID)
	if err != nil {
		t.Fatal(err)
	}
	// GROUP TOPIC PARTITION NEW-OFFSET: --to-current rewrites what the group holds.
	out = tool("--reset-offsets", "--group", r.appID, "--all-input-topics", "--to-current", "--execute")
	rs := rows(out, r.appID)
	for _, row := range rs {
		p, _ := strconv.Atoi(row[2])
		if o, ok := held.Lookup(row[1], int32(p)); row[1] != r.in || !ok || row[3] != strconv.FormatInt(o.At, 10) {
			t.Fatalf("--reset-offsets --to-current plans %v, want the offset the group holds (%+v):\n%s", row, o, out)
		}
	}
	if len(rs) != inputRows {
		t.Fatalf("--reset-offsets --all-input-topics --to-current, want the %d committed input partitions:\n%s", inputRows, out)
	}
	out = tool("--reset-offsets", "--group", r.appID, "--all-input-topics", "--to-earliest", "--execute")
	if rs := rows(out, r.appID); len(rs) != inputRows || rs[0][1] != r.in || rs[0][3] != "0" {
		t.Fatalf("--reset-offsets --all-input-topics --to-earliest, want the %d committed input partitions at 0:\n%s", inputRows, out)
	}
	if offs, err := adm.FetchOffsets(ctx, r.appID); err != nil {
		t.Fatal(err)
	} else {
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == r.in && o.At != 0 {
				t.Errorf("after the reset, input partition %d is at %d, want 0", o.Partition, o.At)
			}
		})
	}
	out = tool("--delete-offsets", "--group", r.appID, "--input-topic", r.in)
	if !strings.Contains(out, "Request succeeded") || strings.Count(out, "Successful") != 4 {
		t.Fatalf("--delete-offsets --input-topic, want all 4 input partitions deleted:\n%s", out)
	}
	if offs, err := adm.FetchOffsets(ctx, r.appID); err != nil {
		t.Fatal(err)
	} else if _, ok := offs[r.in]; ok {
		t.Fatalf("after --delete-offsets the group still holds offsets of %s: %v", r.in, offs[r.in])
	}
	if out := tool("--delete", "--group", r.appID); !strings.Contains(out, "Deletion of requested streams groups ('"+r.appID+"') was successful") {
		t.Fatalf("--delete:\n%s", out)
	}
	if out := tool("--list"); hasLine(out, r.appID) {
		t.Fatalf("--list still lists the deleted group:\n%s", out)
	}
}

// kafka-streams-groups.sh against a standalone coordinatord, for a live streams group app of two
// members (s0 on process-0, s1 on process-1) reading the two partitions of topic: list, describe
// state and members (verbose), then, with the members gone, --reset-offsets --to-current,
// --delete-offsets and --delete; the default --describe (offsets and lag) and the resets that
// need log offsets fail with the tool's message naming ListOffsets.
func checkStandaloneStreamsTool(t *testing.T, ctx context.Context, addr string, adm *kadm.Client, app, topic string, members []*liveMember) {
	t.Helper()
	tool := func(args ...string) string {
		return kafkaTool(t, "org.apache.kafka.tools.streams.StreamsGroupCommand", addr, args...)
	}
	wantsListOffsets := func(args ...string) {
		t.Helper()
		out, err := kafkaToolResult(t, "org.apache.kafka.tools.streams.StreamsGroupCommand", addr, args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "UnsupportedVersionException: The node does not support LIST_OFFSETS") {
			t.Fatalf("kafka-streams-groups %v against a standalone coordinatord: %v, want the tool to exit 1 saying ListOffsets is not served:\n%s", args, err, tail([]byte(out), 2000))
		}
	}
	if rs := rows(tool("--list", "--state"), app); len(rs) != 1 || rs[0][1] != "Stable" {
		t.Fatalf("--list --state: %v, want %s Stable", rs, app)
	}
	out := tool("--describe", "--group", app, "--state", "--verbose")
	// GROUP COORDINATOR (ID) ASSIGNOR STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
	if rs := rows(out, app); len(rs) != 1 || rs[0][2] != "("+strconv.Itoa(nodeID)+")" ||
		rs[0][3] != "sticky" || rs[0][4] != "Stable" || rs[0][5] != rs[0][6] || rs[0][7] != "2" {
		t.Fatalf("--describe --state --verbose, want coordinatord as coordinator, sticky, Stable, target epoch = group epoch, 2 members:\n%s", out)
	}
	out = tool("--describe", "--group", app, "--members", "--verbose")
	// GROUP TARGET-ASSIGNMENT-EPOCH TOPOLOGY-EPOCH MEMBER MEMBER-PROTOCOL MEMBER-EPOCH PROCESS CLIENT-ID ASSIGNMENTS
	rs := rows(out, app)
	if len(rs) != 2 {
		t.Fatalf("--describe --members --verbose lists %d members, want 2:\n%s", len(rs), out)
	}
	tasks := map[string]bool{}
	for _, r := range rs {
		member, assignments := r[3], strings.Join(r[8:], " ")
		var task string
		if n, err := fmt.Sscanf(assignments, "ACTIVE: 0:[%1s]; TARGET-ACTIVE: 0:[", &task); n != 1 || err != nil ||
			assignments != "ACTIVE: 0:["+task+"]; TARGET-ACTIVE: 0:["+task+"];" {
			t.Fatalf("member %s: assignments %q, want one active task of subtopology 0, its target too:\n%s", member, assignments, out)
		}
		tasks[task] = true
		if r[4] != "streams" || r[5] != r[1] || r[6] != "process-"+strings.TrimPrefix(member, "s") {
			t.Fatalf("member %s, want the streams protocol, at the target epoch, on process-%s:\n%s", member, strings.TrimPrefix(member, "s"), out)
		}
	}
	if !tasks["0"] || !tasks["1"] {
		t.Fatalf("the two members do not hold tasks 0 and 1 between them:\n%s", out)
	}
	wantsListOffsets("--describe", "--group", app)

	for _, m := range members {
		m.leave()
	}
	waitGroupState(t, ctx, adm, app, "Empty")
	if resp, err := adm.CommitOffsets(ctx, app, kadm.Offsets{topic: {0: {Topic: topic, At: 3}, 1: {Topic: topic, Partition: 1, At: 5}}}); err != nil || resp.Error() != nil {
		t.Fatalf("commit to the empty streams group: %v %v", err, resp.Error())
	}
	// GROUP TOPIC PARTITION NEW-OFFSET
	out = tool("--reset-offsets", "--group", app, "--all-input-topics", "--to-current", "--execute")
	if rs := rows(out, app); len(rs) != 2 || rs[0][1] != topic || rs[0][3] != map[string]string{"0": "3", "1": "5"}[rs[0][2]] || rs[1][3] != map[string]string{"0": "3", "1": "5"}[rs[1][2]] {
		t.Fatalf("--reset-offsets --to-current, want partition 0 at 3 and 1 at 5:\n%s", out)
	}
	wantsListOffsets("--reset-offsets", "--group", app, "--all-input-topics", "--to-offset", "1", "--execute")
	wantsListOffsets("--reset-offsets", "--group", app, "--input-topic", topic, "--to-earliest", "--dry-run")
	if got := committed(t, ctx, adm, app, topic); got != [3]int64{3, 5, -1} {
		t.Fatalf("after the resets the group holds %v, want what it held", got)
	}
	out = tool("--delete-offsets", "--group", app, "--input-topic", topic)
	if !strings.Contains(out, "Request succeeded") || strings.Count(out, "Successful") != 2 {
		t.Fatalf("--delete-offsets --input-topic, want both partitions deleted:\n%s", out)
	}
	if got := committed(t, ctx, adm, app, topic); got != [3]int64{-1, -1, -1} {
		t.Fatalf("after --delete-offsets the group holds %v", got)
	}
	if out := tool("--delete", "--group", app); !strings.Contains(out, "Deletion of requested streams groups ('"+app+"') was successful") {
		t.Fatalf("--delete:\n%s", out)
	}
	if listed, err := adm.ListGroups(ctx); err != nil {
		t.Fatalf("ListGroups: %v", err)
	} else if _, ok := listed[app]; ok {
		t.Fatalf("the deleted streams group is still listed: %v", listed[app])
	}
}

// waitGroupState waits until ListGroups shows group in state (a stopped Streams instance leaves
// with its last heartbeat; the tools that change offsets need the group empty).
func waitGroupState(t *testing.T, ctx context.Context, adm *kadm.Client, group, state string) {
	t.Helper()
	for {
		listed, err := adm.ListGroups(ctx)
		if err == nil {
			if l, ok := listed[group]; ok && l.State == state {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s never reached state %s (last listing: %v, %v)", group, state, listed, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// A plain Java KafkaConsumer (classic protocol) consumes and commits through the gateway, in a
// group coordinatord serves.
func TestGateway_JavaConsumerGroupConsumesAndCommits(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	adm := kadm.NewClient(cl)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "java-"+run, "java-group-"+run
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	const records = 150
	for i := 0; i < records; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", wordCountClasspath(t),
		"GroupConsumer", g.Addr, group, topic, strconv.Itoa(records), "classic")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CONSUMED 150") {
		t.Fatalf("Java consumer: %v\n%s", err, tail(out, 3000))
	}
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offsets.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != records {
		t.Fatalf("the Java consumer's committed offsets sum to %d, want %d", sum, records)
	}
}

// kafka-transactions.sh list and kafka-log-dirs.sh --describe ask every broker Metadata lists,
// coordinatord's node included: through the gateway, an open transaction is listed once (by
// the upstream broker that coordinates it), and coordinatord's node shows one log directory
// with no partitions while the upstream broker shows its own.
func TestGateway_KafkasTransactionAndLogDirToolsWork(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, txnID := "txn-tools-"+run, "txn-tools-"+run
	cl := newClient(t, g.Addr, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	defer cl.EndTransaction(context.Background(), kgo.TryAbort)

	out := kafkaTool(t, "org.apache.kafka.tools.TransactionsCommand", g.Addr, "list")
	if rs := rows(out, txnID); len(rs) != 1 || !strings.Contains(out, "Ongoing") {
		t.Fatalf("kafka-transactions list shows the open transaction %d times, want once:\n%s", len(rs), out)
	}

	out = kafkaTool(t, "org.apache.kafka.tools.LogDirsCommand", g.Addr, "--describe")
	var report struct {
		Brokers []struct {
			Broker  int32 `json:"broker"`
			LogDirs []struct {
				LogDir     string `json:"logDir"`
				Error      any    `json:"error"`
				Partitions []any  `json:"partitions"`
			} `json:"logDirs"`
		} `json:"brokers"`
	}
	start := strings.Index(out, `{"brokers"`)
	if start < 0 {
		t.Fatalf("kafka-log-dirs --describe printed no report:\n%s", out)
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out[start:])), &report); err != nil {
		t.Fatalf("kafka-log-dirs report: %v\n%s", err, out)
	}
	var own, upstreamWithPartitions int
	for _, b := range report.Brokers {
		if b.Broker == nodeID {
			own++
			if len(b.LogDirs) != 1 || b.LogDirs[0].LogDir != g.DataDir || len(b.LogDirs[0].Partitions) != 0 || b.LogDirs[0].Error != nil {
				t.Fatalf("coordinatord's node in kafka-log-dirs: %+v\n%s", b, out)
			}
			continue
		}
		for _, d := range b.LogDirs {
			if len(d.Partitions) > 0 {
				upstreamWithPartitions++
			}
		}
	}
	if own != 1 || upstreamWithPartitions == 0 {
		t.Fatalf("kafka-log-dirs lists coordinatord's node %d times and %d upstream log directories with partitions:\n%s", own, upstreamWithPartitions, out)
	}
}
