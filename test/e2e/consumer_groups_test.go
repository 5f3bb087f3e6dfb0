package e2e

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KIP-848 consumer groups through the gateway: the records live upstream, the group (its
// ConsumerGroupHeartbeat, assignment and offsets) in coordinatord.

func produceN(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func committedSum(t *testing.T, ctx context.Context, adm *kadm.Client, group string) int64 {
	t.Helper()
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offsets.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// A Java 4.4 KafkaConsumer with group.protocol=consumer consumes and commits through the
// gateway; the group it leaves behind is a consumer group coordinatord describes.
func TestGateway_JavaConsumerProtocolConsumesAndCommits(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	adm := kadm.NewClient(cl)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "java848-"+run, "java848-group-"+run
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	const records = 150
	produceN(t, ctx, cl, topic, records)
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", wordCountClasspath(t),
		"GroupConsumer", g.Addr, group, topic, strconv.Itoa(records), "consumer")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CONSUMED 150") {
		t.Fatalf("Java consumer (group.protocol=consumer): %v\n%s", err, tail(out, 3000))
	}
	if sum := committedSum(t, ctx, adm, group); sum != records {
		t.Fatalf("the Java consumer's committed offsets sum to %d, want %d", sum, records)
	}
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil || described[group].Err != nil || described[group].State != "Empty" {
		t.Fatalf("ConsumerGroupDescribe after the consumer left: %v %+v", err, described[group])
	}
}

// Three franz-go next-gen members (ServerSideBalancer) share a topic through the gateway,
// consume every record once between them and commit.
func TestGateway_NextGenKgoMembersShareATopic(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "group.consumer.min.heartbeat.interval.ms=500", "group.consumer.heartbeat.interval.ms=500")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	adm := kadm.NewClient(cl)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "kgo848-"+run, "kgo848-group-"+run
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	const records = 300
	produceN(t, ctx, cl, topic, records)
	var mu sync.Mutex
	seen := map[string]int{}
	var members []*kgo.Client
	for i := 0; i < 3; i++ {
		members = append(members, newClient(t, g.Addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()))
	}
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				fs := m.PollFetches(pctx)
				pcancel()
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					mu.Unlock()
				})
				if err := m.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("commit: %v", err)
				}
				mu.Lock()
				done := len(seen) >= records
				mu.Unlock()
				if done {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != records {
		t.Fatalf("consumed %d distinct records of %d", len(seen), records)
	}
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil || described[group].Err != nil || len(described[group].Members) != 3 {
		t.Fatalf("ConsumerGroupDescribe: %v %+v", err, described[group])
	}
	deadline := time.Now().Add(30 * time.Second)
	for committedSum(t, ctx, adm, group) != records {
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets sum to %d, want %d", committedSum(t, ctx, adm, group), records)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
