package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// A Java 4.4 consumer (group.protocol=consumer) subscribed by name to a topic that does not
// exist yet, which an operator then creates straight on the cluster (kafka-topics.sh against
// a broker, not through the gateway): on Kafka the member is assigned the new topic at its next
// heartbeat. The Java consumer names its topics in a ConsumerGroupHeartbeat only when its
// subscription changes, so the gateway's catalog must learn of the topic some other way than
// from the heartbeat; the consumer's own Metadata requests, forwarded upstream, show it at
// once. The gateway's periodic look at the upstream is set far beyond the test's deadline, so
// only such a look can make the member consume.
func TestGateway_JavaConsumerSubscribedBeforeItsTopicIsCreatedUpstream(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "upstream.metadata.max.age.ms=600000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, g.Addr))
	direct := newClient(t, upstreamAddr)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "late-"+run, "late-group-"+run
	const records = 40
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", wordCountClasspath(t),
		"GroupConsumer", g.Addr, group, topic, strconv.Itoa(records), "consumer")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// The member has joined, subscribed to a topic nobody has yet.
	for {
		described, err := adm.DescribeConsumerGroups(ctx, group)
		if err == nil && described[group].Err == nil && len(described[group].Members) == 1 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the Java consumer exited before joining: %v\n%s", err, tail(out.Bytes(), 3000))
		case <-ctx.Done():
			t.Fatalf("the Java consumer never joined: %v %+v\n%s", err, described, tail(out.Bytes(), 3000))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := kadm.NewClient(direct).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, direct, topic, records)

	select {
	case err := <-exited:
		if err != nil || !strings.Contains(out.String(), "CONSUMED "+strconv.Itoa(records)) {
			t.Fatalf("the Java consumer subscribed before its topic was created upstream never got it assigned: %v\n%s", err, tail(out.Bytes(), 3000))
		}
	case <-ctx.Done():
		t.Fatalf("the Java consumer did not finish: %s", tail(out.Bytes(), 3000))
	}
	if sum := committedSum(t, ctx, adm, group); sum != records {
		t.Fatalf("the Java consumer's committed offsets sum to %d, want %d", sum, records)
	}
}
