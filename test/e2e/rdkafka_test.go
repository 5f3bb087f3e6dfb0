package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rdkafkaVenv makes the venv of rdkafka/requirements.txt: confluent-kafka's wheel bundles a
// librdkafka recent enough for KIP-848, which the distributions' packages are not.
var rdkafkaVenv = setupOnce{script: "rdkafka/setup.sh", what: "installing confluent-kafka"}

func rdkafkaPythonPath(t *testing.T) string { return rdkafkaVenv.path(t) }

// rdkafkaConsumer is one rdkafka/consumer.py process.
type rdkafkaConsumer struct {
	clientID string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	done     chan struct{}
	mu       sync.Mutex
	out      []string
}

func startRdkafkaConsumer(t *testing.T, ctx context.Context, python, bootstrap, group, topic, clientID string) *rdkafkaConsumer {
	t.Helper()
	c := &rdkafkaConsumer{clientID: clientID, done: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, python, "rdkafka/consumer.py", bootstrap, group, topic, clientID)
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	c.cmd.Stdout, c.cmd.Stderr = pw, pw
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			c.mu.Lock()
			c.out = append(c.out, sc.Text())
			c.mu.Unlock()
		}
	}()
	go func() {
		_ = c.cmd.Wait()
		pw.Close()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
		}
	})
	return c
}

func (c *rdkafkaConsumer) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.out...)
}

// Three librdkafka consumers (confluent-kafka's bundled librdkafka) with group.protocol=consumer
// share a topic through the gateway: coordinatord gives each a disjoint share, every record is
// consumed exactly once between them and committed, and ConsumerGroupDescribe shows the three
// as consumer-protocol members.
func TestGateway_RdkafkaConsumerProtocolMembersShareATopic(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	python := rdkafkaPythonPath(t)
	g := startGateway(t, "group.consumer.min.heartbeat.interval.ms=500", "group.consumer.heartbeat.interval.ms=500")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "rdk848-"+run, "rdk848-group-"+run
	const partitions, perPartition = 6, 50
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var consumers []*rdkafkaConsumer
	for i := 0; i < 3; i++ {
		consumers = append(consumers, startRdkafkaConsumer(t, ctx, python, g.Addr, group, topic, "rdkafka-"+strconv.Itoa(i)))
	}
	report := func() string {
		var b strings.Builder
		for _, c := range consumers {
			fmt.Fprintf(&b, "--- %s\n%s\n", c.clientID, tail([]byte(strings.Join(c.lines(), "\n")), 2000))
		}
		return b.String()
	}

	// Records are produced only once the group has settled, so no partition moves while they
	// are consumed and exactly-once between the members is what a user would see.
	var described kadm.DescribedConsumerGroup
	deadline := time.Now().Add(90 * time.Second)
	for {
		all, err := adm.DescribeConsumerGroups(ctx, group)
		described = all[group]
		if err == nil && described.Err == nil && settledRdkafkaGroup(described, topic, partitions) == "" {
			break
		}
		if time.Now().After(deadline) {
			why := fmt.Sprint(err)
			if err == nil {
				why = fmt.Sprint(described.Err, " ", settledRdkafkaGroup(described, topic, partitions))
			}
			t.Fatalf("the three librdkafka consumers never settled as a consumer group: %s\n%+v\n%s", why, described, report())
		}
		time.Sleep(300 * time.Millisecond)
	}
	clients := []string{}
	for _, m := range described.Members {
		clients = append(clients, m.ClientID)
	}
	sort.Strings(clients)
	if strings.Join(clients, ",") != "rdkafka-0,rdkafka-1,rdkafka-2" {
		t.Fatalf("ConsumerGroupDescribe lists clients %v, want rdkafka-0..2", clients)
	}

	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	const records = partitions * perPartition
	deadline = time.Now().Add(60 * time.Second)
	for committedSum(t, ctx, adm, group) != records {
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets sum to %d, want %d\n%s", committedSum(t, ctx, adm, group), records, report())
		}
		time.Sleep(300 * time.Millisecond)
	}

	seen := map[string]string{}
	for _, c := range consumers {
		c.stdin.Close()
		select {
		case <-c.done:
		case <-ctx.Done():
			t.Fatalf("%s did not leave\n%s", c.clientID, report())
		}
		if c.cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("%s exited %d\n%s", c.clientID, c.cmd.ProcessState.ExitCode(), report())
		}
		for _, line := range c.lines() {
			switch {
			case strings.HasPrefix(line, "R "):
				if other, dup := seen[line[2:]]; dup {
					t.Errorf("record %s consumed by %s and %s", line[2:], other, c.clientID)
				}
				seen[line[2:]] = c.clientID
			case strings.HasPrefix(line, "ERROR"):
				t.Errorf("%s: %s", c.clientID, line)
			case strings.HasPrefix(line, "VERSION "):
				t.Logf("%s: librdkafka %s", c.clientID, line[len("VERSION "):])
			}
		}
	}
	if len(seen) != records {
		t.Fatalf("the librdkafka consumers consumed %d distinct records of %d\n%s", len(seen), records, report())
	}
	all, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil || all[group].Err != nil || all[group].State != "Empty" || len(all[group].Members) != 0 {
		t.Fatalf("ConsumerGroupDescribe after the consumers left: %v %+v", err, all[group])
	}
}

// settledRdkafkaGroup says why a described group is not yet three consumer-protocol members
// that own, between them and without overlap, every partition of the topic ("" once it is).
func settledRdkafkaGroup(d kadm.DescribedConsumerGroup, topic string, partitions int) string {
	if d.State != "Stable" {
		return "state " + d.State
	}
	if len(d.Members) != 3 {
		return fmt.Sprintf("%d members", len(d.Members))
	}
	owner := map[int32]string{}
	for _, m := range d.Members {
		if m.MemberType != 1 {
			return fmt.Sprintf("member %s has type %d", m.MemberID, m.MemberType)
		}
		if len(m.SubscribedTopics) != 1 || m.SubscribedTopics[0] != topic {
			return fmt.Sprintf("member %s subscribes to %v", m.MemberID, m.SubscribedTopics)
		}
		if len(m.Assignment[topic]) == 0 {
			return "member " + m.MemberID + " owns nothing"
		}
		for p := range m.Assignment[topic] {
			if o, ok := owner[p]; ok {
				return fmt.Sprintf("partition %d owned by %s and %s", p, o, m.MemberID)
			}
			owner[p] = m.MemberID
		}
	}
	if len(owner) != partitions {
		return fmt.Sprintf("%d of %d partitions owned", len(owner), partitions)
	}
	return ""
}
