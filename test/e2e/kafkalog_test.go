package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With log.backend=kafka the committed offsets live on the upstream cluster: after kill -9 a
// coordinatord started on an empty log.dirs (another machine, a lost disk) loads them from the
// state topic and answers them.
func TestKafkaLogBackendKeepsCommittedOffsetsAcrossKill(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	run := time.Now().UnixNano()
	sets := []string{"log.backend=kafka", fmt.Sprintf("log.kafka.topic=state-%d", run), fmt.Sprintf("cluster.id=kl%d", run),
		"offsets.topic.num.partitions=4", "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	g := startGateway(t, sets...)
	topic := fmt.Sprintf("kl-topic-%d", run)
	kc, err := kgo.NewClient(kgo.SeedBrokers(g.Addr))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(kc)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for i := 0; i < 6; i++ {
		group := fmt.Sprintf("kl-group-%d", i)
		var os kadm.Offsets
		for p := int32(0); p < 3; p++ {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(100*i) + int64(p), LeaderEpoch: -1})
			want[fmt.Sprintf("%s/%d", group, p)] = int64(100*i) + int64(p)
		}
		res, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("commit for %s: %v", group, err)
		}
	}
	kc.Close()
	g.kill()

	g2 := startGateway(t, sets...) // a fresh log.dirs
	kc2, err := kgo.NewClient(kgo.SeedBrokers(g2.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer kc2.Close()
	adm2 := kadm.NewClient(kc2)
	for i := 0; i < 6; i++ {
		group := fmt.Sprintf("kl-group-%d", i)
		got, err := adm2.FetchOffsets(ctx, group)
		if err == nil {
			err = got.Error()
		}
		if err != nil {
			t.Fatalf("fetch for %s: %v", group, err)
		}
		for p := int32(0); p < 3; p++ {
			o, ok := got.Lookup(topic, p)
			if w := want[fmt.Sprintf("%s/%d", group, p)]; !ok || o.At != w {
				t.Fatalf("%s %s/%d after kill -9 and restart: %v (found %v), want %d", group, topic, p, o.At, ok, w)
			}
		}
	}
}

// Two nodes of one cluster.id with the same node.id: the upstream group's leader gives the
// second no shards and it says why, while the first keeps every shard and serves on.
func TestKafkaLogBackendDuplicateNodeIDGetsNoShards(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	run := time.Now().UnixNano()
	sets := append([]string{"log.backend=kafka", fmt.Sprintf("log.kafka.topic=state-%d", run), fmt.Sprintf("cluster.id=kf%d", run),
		"offsets.topic.num.partitions=2", "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1"}, scaleOutTimings...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("kf-topic-%d", run)
	const group = "kf-group"
	commit := func(adm *kadm.Client, at int64) error {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		res, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = res.Error()
		}
		return err
	}
	client := func(g *gateway) *kadm.Client {
		kc, err := kgo.NewClient(kgo.SeedBrokers(g.Addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kc.Close)
		return kadm.NewClient(kc)
	}

	first := startGateway(t, sets...)
	firstAdm := client(first)
	if _, err := firstAdm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if err := commit(firstAdm, 10); err != nil {
		t.Fatal(err)
	}
	second := startGateway(t, sets...)
	const refused = "the upstream group's leader gave this node no shards; fix the configuration"
	deadline := time.Now().Add(30 * time.Second)
	for second.logCount(refused) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the node with a duplicate node.id did not say it got no shards")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := metric(second, "coordinatord_membership_shards_owned"); n != 0 {
		t.Fatalf("the duplicate node owns %v shards", n)
	}
	if n := metric(first, "coordinatord_membership_shards_owned"); n != 2 {
		t.Fatalf("the first node owns %v shards, want both", n)
	}
	if err := commit(firstAdm, 20); err != nil {
		t.Fatalf("the first node stopped serving: %v", err)
	}
	got, err := firstAdm.FetchOffsets(ctx, group)
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup(topic, 0); !ok || o.At != 20 {
		t.Fatalf("the first node reads %v (found %v), want 20", o.At, ok)
	}
}
