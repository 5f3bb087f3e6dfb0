package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/shard"
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
// second no shards and it says why, while the first keeps every shard and serves on. The
// second is not ready (/readyz names the refusal), and a client bootstrapped to it is sent to
// the first for the group: before, it answered 200, listed itself under the shared id in
// Metadata and FindCoordinator, and every commit through it got NOT_COORDINATOR for good.
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
	second := startGatewayUnready(t, sets...)
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
	resp, err := http.Get("http://" + second.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "node.id "+strconv.Itoa(nodeID)+" is used by another coordinatord node") {
		t.Fatalf("the refused node's /readyz answers %d: %s", resp.StatusCode, body)
	}
	secondAdm := client(second)
	meta, err := secondAdm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range meta.Brokers {
		if b.NodeID == nodeID && net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != first.Addr {
			t.Fatalf("the refused node lists node %d at %s:%d, the first node is at %s", nodeID, b.Host, b.Port, first.Addr)
		}
	}
	// Java's client dials the address FindCoordinator names, kgo the broker of its id.
	if c := secondAdm.FindGroupCoordinators(ctx, group)[group]; c.Err != nil || net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) != first.Addr {
		t.Fatalf("the refused node names %d at %s:%d as the group's coordinator (%v), the first node is at %s", c.NodeID, c.Host, c.Port, c.Err, first.Addr)
	}
	if err := commit(secondAdm, 30); err != nil {
		t.Fatalf("a client bootstrapped to the refused node cannot commit: %v", err)
	}
	got, err := firstAdm.FetchOffsets(ctx, group)
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup(topic, 0); !ok || o.At != 30 {
		t.Fatalf("the first node reads %v (found %v), want 30", o.At, ok)
	}
}

// A node started with another cluster.id on a state topic that a running node writes (a typo in
// one node's cluster.id, log.kafka.topic left at its default on both) refuses to start, naming
// the topic and the cluster.id its nodes have. Before the check it joined a group of its own,
// was given every shard, and both nodes acknowledged commits of one group, each from its own
// state: the first node's load fences only transactional ids of its own cluster.id, so neither
// was fenced, and the group's committed offset depended on the node asked.
func TestKafkaLogBackendNodeOfAnotherClusterIDRefusesTheTopic(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	run := time.Now().UnixNano()
	state := fmt.Sprintf("state-%d", run)
	sets := func(cluster string) []string {
		return append([]string{"log.backend=kafka", "log.kafka.topic=" + state, "cluster.id=" + cluster,
			"offsets.topic.num.partitions=2", "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1"}, scaleOutTimings...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first := startGateway(t, sets(fmt.Sprintf("kf%d", run))...)
	topic := fmt.Sprintf("kf-topic-%d", run)
	adm := kadm.NewClient(newClient(t, first.Addr))
	commitOnNewTopic(ctx, t, adm, "kf-group", topic, 10)

	other := fmt.Sprintf("kx%d", run)
	base := freePortRange(t, 3)
	args := []string{"serve", "--set", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", base), "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs=" + t.TempDir(), "--set", "node.id=" + strconv.Itoa(nodeID+1), "--set", "shutdown.timeout.ms=5000",
		"--set", "upstream.bootstrap.servers=" + upstreamAddr, "--set", fmt.Sprintf("gateway.broker.port.range=%d-%d", base+1, base+2)}
	for _, s := range sets(other) {
		args = append(args, "--set", s)
	}
	// The refusal comes before any load; a node that started instead is stopped at the deadline.
	nctx, ncancel := context.WithTimeout(ctx, 30*time.Second)
	defer ncancel()
	cmd := exec.CommandContext(nctx, binaryPath, args...)
	cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	out, err := cmd.CombinedOutput()
	if err == nil || nctx.Err() != nil {
		t.Fatalf("a node of cluster.id %s started on the state topic of cluster.id kf%d (%v):\n%s", other, run, err, tail(out, 4000))
	}
	if cmd.ProcessState.ExitCode() == 66 {
		t.Fatalf("the race detector halted coordinatord (exit 66), not the cluster.id check:\n%s", out)
	}
	want := fmt.Sprintf("log.kafka.topic %s is written by the live coordinatord nodes of cluster.id kf%d", state, run)
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "coordinatord started") {
		t.Fatalf("no refusal naming the topic and its cluster.id (%q):\n%s", want, tail(out, 4000))
	}
	if n := metric(first, "coordinatord_membership_shards_owned"); n != 2 {
		t.Fatalf("the first node owns %v shards, want both", n)
	}
}

// The state topic deleted upstream under a running node (kafka-topics.sh --delete): the group
// state it held is gone. The node says so and stops serving what its shards still held in
// memory: every shard loads again, is not ready while the topic is missing, and serves what the
// topic holds once it exists again (here created anew: nothing). Before, a shard that wrote
// nothing went on answering the deleted commits, /readyz 200, until some write failed, and a
// shard that reloaded meanwhile answered none: what a group read depended on its shard's history.
func TestKafkaLogBackendStateTopicDeletedUpstreamIsNotServedFromMemory(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	run := time.Now().UnixNano()
	state := fmt.Sprintf("state-%d", run)
	g := startGateway(t, append([]string{"log.backend=kafka", "log.kafka.topic=" + state, fmt.Sprintf("cluster.id=kd%d", run),
		"offsets.topic.num.partitions=2", "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1",
		"upstream.metadata.max.age.ms=300"}, scaleOutTimings...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("kd-topic-%d", run)
	const group = "kd-group"
	adm := kadm.NewClient(newClient(t, g.Addr))
	commitOnNewTopic(ctx, t, adm, group, topic, 10)
	up, err := kgo.NewClient(kgo.SeedBrokers(upstreamAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	upAdm := kadm.NewClient(up)
	if _, err := upAdm.DeleteTopics(ctx, state); err != nil {
		t.Fatal(err)
	}
	const deleted = "the state topic was deleted upstream: the group state it held is gone; every shard of this node loads again from the topic, " +
		"once it exists again (a node creates it at start, compacted with offsets.topic.num.partitions partitions)"
	deadline := time.Now().Add(30 * time.Second)
	for g.logCount(deleted) == 0 || ready(g) {
		if time.Now().After(deadline) {
			got, _ := adm.FetchOffsets(ctx, group)
			o, _ := got.Lookup(topic, 0)
			t.Fatalf("30s after the state topic was deleted the node did not say so (%d lines) or is ready (%v); it reads offset %d",
				g.logCount(deleted), ready(g), o.At)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Created again as a node creates it at start: the shards load it, empty.
	if _, err := upAdm.CreateTopic(ctx, 2, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, state); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for !ready(g) {
		if time.Now().After(deadline) {
			t.Fatal("the node did not serve again within 60s of the state topic's re-creation")
		}
		time.Sleep(100 * time.Millisecond)
	}
	got, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup(topic, 0); ok && o.At >= 0 {
		t.Fatalf("after the state topic's re-creation the node still reads offset %d of the deleted topic", o.At)
	}
}

// The upstream cluster restarts under load (its only broker stopped and started again on its
// data) while offsets are committed through a node on log.backend=kafka. The node stops
// serving its shards when its lease lapses, rejoins once the broker is back, loads its shards
// again from the state topic and serves; every commit it acknowledged, before, during or after
// the outage, reads back afterwards, from it and from a node that loads the state topic anew.
// A broker of the test's own, since it is restarted.
func TestKafkaLogBackendUpstreamRestartLosesNoAcknowledgedCommit(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	dir := t.TempDir()
	kafka := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kafkaScript, append(args, "--dir", dir)...)
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kafka.sh %v: %v", args, err)
		}
		return stdout.String()
	}
	var addr string
	for _, line := range strings.Split(kafka("start", "--no-warmup"), "\n") {
		if v, ok := strings.CutPrefix(line, "KAFKA_ADDR="); ok {
			addr = strings.TrimSpace(v)
		}
	}
	if addr == "" {
		t.Fatal("kafka.sh start printed no KAFKA_ADDR")
	}
	t.Cleanup(func() {
		stop := exec.Command(kafkaScript, "stop", "--dir", dir)
		stop.Stdout, stop.Stderr = os.Stderr, os.Stderr
		stop.Run()
	})
	run := time.Now().UnixNano()
	const shards = 4
	sets := append([]string{"upstream.bootstrap.servers=" + addr, "log.backend=kafka", fmt.Sprintf("log.kafka.topic=state-%d", run),
		fmt.Sprintf("cluster.id=ur%d", run), fmt.Sprintf("offsets.topic.num.partitions=%d", shards), "offsets.topic.replication.factor=1",
		"log.kafka.min.insync.replicas=1"}, scaleOutTimings...)
	g := startGateway(t, sets...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("ur-topic-%d", run)
	kc, err := kgo.NewClient(kgo.SeedBrokers(g.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Groups until every shard has two.
	var cs []*committer
	per := map[int32]int{}
	for i := 0; len(cs) < 2*shards; i++ {
		group := fmt.Sprintf("ur-group-%d", i)
		if sh := shard.For(group, shards); per[sh] < 2 {
			per[sh]++
			cs = append(cs, newCommitter(t, group, topic, []string{g.Addr}))
		}
	}
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); c.run(t, wctx) }()
	}
	defer func() { stopWriters(); wg.Wait() }()
	waitAcked := func(since time.Time, within time.Duration, what string) {
		t.Helper()
		deadline := time.Now().Add(within)
		for _, c := range cs {
			for {
				if acks, _ := c.snapshot(); len(acks) > 0 && acks[len(acks)-1].sent.After(since) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: group %s has no commit acknowledged within %v", what, c.group, within)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	waitAcked(time.Now(), 60*time.Second, "before the restart")
	const loaded = "shard loaded from the state topic"
	loadsBefore := g.logCount(loaded)

	stopped := time.Now()
	kafka("stop")
	t.Logf("broker stopped in %v", time.Since(stopped))
	// The outage lasts until the node has stopped serving (its lease lapsed): then every shard
	// must be loaded again, whatever the broker kept of the node's membership.
	const lapsed = "no answer from the upstream group for log.kafka.session.timeout.ms: stopped serving every shard (others may own them now); rejoining"
	for g.logCount(lapsed) == 0 {
		if time.Since(stopped) > 60*time.Second {
			t.Fatal("the node did not stop serving within 60s of the broker's stop")
		}
		time.Sleep(50 * time.Millisecond)
	}
	restarted := time.Now()
	kafka("restart")
	t.Logf("broker restarted in %v; the node had stopped serving %v after the stop", time.Since(restarted), restarted.Sub(stopped))
	waitAcked(time.Now(), 90*time.Second, "after the restart")
	t.Logf("every group acknowledged again %v after the restart began", time.Since(restarted))
	// About one run in five the broker restart left a hanging transaction below a shard's load
	// marker, which held that load for good before the load learnt to abort it.
	if n := g.logCount("aborted a transaction of this shard's own producer left open below the load marker (its coordinator no longer knew it)"); n > 0 {
		t.Logf("%d hanging transactions aborted by the loads", n)
	}
	if n := g.logCount(loaded) - loadsBefore; n < shards {
		t.Fatalf("%d shard loads after the restart, want every one of the %d shards loaded again", n, shards)
	}
	stopWriters()
	wg.Wait()
	checkNoAckLost(ctx, t, adm, cs, topic)
	// What a node reads back after commits stopped could be its memory of them: a node on an
	// empty log.dirs loads every shard from the state topic alone, and must read them too.
	g.kill()
	fresh := startGateway(t, sets...)
	fc, err := kgo.NewClient(kgo.SeedBrokers(fresh.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	checkNoAckLost(ctx, t, kadm.NewClient(fc), cs, topic)
}

// /readyz on log.backend=kafka means serving: a load balancer or Kubernetes sends traffic once
// it answers 200, so the first commit to every shard (one try, no client retries) must be
// acknowledged. It used to answer 200 while the first assignment's shards were not yet loading
// (during the catalog refresh before the load), and commits then got NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS.
func TestKafkaLogBackendReadyMeansEveryShardServes(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	run := time.Now().UnixNano()
	const shards = 50 // the default: 50 loads after the first assignment
	topic := fmt.Sprintf("rd-topic-%d", run)
	// The topic exists before the node starts (created straight on the upstream), so that
	// nothing between /readyz and the commits gives the loads time.
	up, err := kgo.NewClient(kgo.SeedBrokers(upstreamAddr))
	if err != nil {
		t.Fatal(err)
	}
	_, err = kadm.NewClient(up).CreateTopic(context.Background(), 1, 1, nil, topic)
	up.Close()
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "log.backend=kafka", fmt.Sprintf("log.kafka.topic=state-%d", run), fmt.Sprintf("cluster.id=rd%d", run),
		fmt.Sprintf("offsets.topic.num.partitions=%d", shards), "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1")
	// startGateway returned on the first 200 from /readyz.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc, err := kgo.NewClient(kgo.SeedBrokers(g.Addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	groups := map[int32]string{}
	for i := 0; len(groups) < shards; i++ {
		group := fmt.Sprintf("rd-group-%d", i)
		if _, ok := groups[shard.For(group, shards)]; !ok {
			groups[shard.For(group, shards)] = group
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, shards)
	for sh, group := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
			res, err := adm.CommitOffsets(ctx, group, os)
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				errs <- fmt.Errorf("shard %d (%s): %w", sh, group, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("first commit after /readyz answered 200: %v", err)
	}
}
