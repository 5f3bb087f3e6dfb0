package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A franz-go producer and consumer group bootstrapped to coordinatord: topics are created,
// records produced and fetched upstream through the broker's gateway port, while the group and
// its offsets live in coordinatord; no client ever learns or reaches the upstream's address.
func TestGateway_ProduceConsumeCommitThroughGateway(t *testing.T) {
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl := newClient(t, g.Addr)
	adm := kadm.NewClient(cl)
	topic := "gw-orders-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopics through the gateway: %v", err)
	}

	// Metadata names the upstream broker by its own node id at a gateway port, plus
	// coordinatord itself, and nothing else.
	meta := metadata(t, ctx, cl)
	seen := map[int32]string{}
	for _, b := range meta.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		seen[b.NodeID] = addr
		if addr == upstreamAddr {
			t.Fatalf("Metadata leaks the upstream address %s for node %d", addr, b.NodeID)
		}
	}
	if seen[nodeID] != g.Addr {
		t.Fatalf("Metadata lists coordinatord (node %d) at %q, want %s; brokers %v", nodeID, seen[nodeID], g.Addr, seen)
	}
	if addr, ok := seen[1]; !ok || !g.isBrokerPort(addr) {
		t.Fatalf("upstream node 1 is listed at %q, want a port of the gateway's range %d-%d; brokers %v", addr, g.PortMin, g.PortMax, seen)
	}
	if len(seen) != 2 {
		t.Fatalf("Metadata lists brokers %v, want upstream node 1 and coordinatord", seen)
	}

	const records = 300
	for i := 0; i < records; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("order-%03d", i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("producing through the gateway: %v", err)
	}

	group := "gw-billing"
	consumer := newClient(t, g.Addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := map[string]bool{}
	for len(got) < records {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), records, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing through the gateway: %v", err)
	}

	// The group and its offsets are coordinatord's: the gateway answers, the upstream never
	// heard of the group.
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offsets.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != records {
		t.Fatalf("committed offsets of %s sum to %d, want %d", group, sum, records)
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil || described[group].State != "Stable" {
		t.Fatalf("DescribeGroups through the gateway: %v, %+v", err, described[group])
	}

	// The console's group page shows the lag from the upstream's log end offsets: ten records
	// more than the group committed, into a partition it committed.
	const more = 10
	var committedParts int
	var latePartition int32
	offsets.Each(func(o kadm.OffsetResponse) { committedParts++; latePartition = o.Partition })
	late := newClient(t, g.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < more; i++ {
		late.Produce(ctx, &kgo.Record{Topic: topic, Partition: latePartition, Value: []byte(fmt.Sprintf("late-%d", i))}, nil)
	}
	if err := late.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	consolePageLag(t, g, group, topic, committedParts, records+more, more)

	// Every connection the upstream has from outside is the gateway's.
	if n := connectionsTo(t, os.Getpid(), upstreamAddr); n != 0 {
		t.Fatalf("the test's clients hold %d connections to the upstream %s directly", n, upstreamAddr)
	}
	if n := connectionsTo(t, g.pid(), upstreamAddr); n == 0 {
		t.Fatalf("the gateway holds no connection to the upstream %s, yet data flowed", upstreamAddr)
	}
	consumer.Close()

	direct := kadm.NewClient(newClient(t, upstreamAddr))
	listed, err := direct.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed[group]; ok {
		t.Fatalf("the upstream knows group %s: group requests leaked upstream", group)
	}
}

// Admin clients ask every broker for its groups and concatenate: each group is listed once.
func TestGateway_ListGroupsListsEachGroupOnce(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	adm := kadm.NewClient(cl)
	topic := "gw-list-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	group := "gw-listed"
	resp, err := adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 4}))
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	// An admin client asks every broker in Metadata and concatenates the answers (kadm merges
	// them into a map, so ask each broker here as the Java Admin does and count).
	count := 0
	for _, b := range metadata(t, ctx, cl).Brokers {
		resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("ListGroups on node %d: %v (code %d)", b.NodeID, err, resp.ErrorCode)
		}
		for _, l := range resp.Groups {
			if l.Group == group {
				count++
			}
		}
	}
	if count != 1 {
		t.Fatalf("group %s listed %d times across the brokers in Metadata, want once", group, count)
	}
}

// A restart keeps every upstream node on its port, so clients' cached addresses and fetch
// sessions stay valid.
func TestGateway_BrokerPortsSurviveRestart(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := brokerAddrs(t, ctx, g.Addr)
	g.kill()
	g.start()
	after := brokerAddrs(t, ctx, g.Addr)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("broker addresses changed across a restart: %v, then %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(g.DataDir, "gateway-ports.json")); err != nil {
		t.Fatalf("the port mapping is not kept in log.dirs: %v", err)
	}
}

func brokerAddrs(t *testing.T, ctx context.Context, addr string) map[int32]string {
	out := map[int32]string{}
	for _, b := range metadata(t, ctx, newClient(t, addr)).Brokers {
		out[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return out
}

func (g *gateway) isBrokerPort(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return err == nil && host == "127.0.0.1" && p >= g.PortMin && p <= g.PortMax
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// commitOnNewTopic creates topic (one partition) through adm and commits offset at of its
// partition 0 for group.
func commitOnNewTopic(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, at int64) {
	t.Helper()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
	if res, err := adm.CommitOffsets(ctx, group, offs); err != nil || res.Error() != nil {
		t.Fatal(err, res.Error())
	}
}

func metadata(t *testing.T, ctx context.Context, cl *kgo.Client) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// connectionsTo counts the established TCP connections process pid holds to addr.
func connectionsTo(t *testing.T, pid int, addr string) int {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	owners := socketOwners()
	n := 0
	for _, sk := range tcpSockets(tcpEstablished) {
		held := slices.ContainsFunc(owners[sk.inode], func(o socketOwner) bool { return o.pid == pid })
		if held && sk.remotePort == port {
			n++
		}
	}
	return n
}

// coordinatord's node id must differ from every upstream broker's, or clients could not tell
// the coordinator from the broker: such a gateway refuses to start, with an ERROR saying so.
func TestGateway_NodeIDClashRefusesStart(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	base := freePortRange(t, 3)
	cmd := exec.Command(binaryPath, "serve",
		"--set", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", base), "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+t.TempDir(), "--set", "node.id=1", // the reference broker's id
		"--set", "upstream.bootstrap.servers="+upstreamAddr,
		"--set", fmt.Sprintf("gateway.broker.port.range=%d-%d", base+1, base+2))
	cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("coordinatord started with the node id of an upstream broker:\n%s", out)
	}
	if cmd.ProcessState.ExitCode() == 66 {
		t.Fatalf("the race detector halted coordinatord (exit 66), not the node id check:\n%s", out)
	}
	if !strings.Contains(string(out), "node id clash with the upstream cluster") || strings.Contains(string(out), "coordinatord started") {
		t.Fatalf("no clear refusal:\n%s", out)
	}
}

// A topic deleted and re-created upstream behind the gateway's back (between two metadata
// refreshes) is a new topic: the old one's committed offsets are gone, as Kafka drops a deleted
// topic's offsets, and commits for the new one work.
func TestGateway_TopicRecreatedUpstreamStartsWithoutOffsets(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "upstream.metadata.max.age.ms=300")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, g.Addr))
	direct := kadm.NewClient(newClient(t, upstreamAddr))
	topic := "gw-recreated-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	group := topic + "-group"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	commit := func() error {
		resp, err := adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 41}))
		if err == nil {
			err = resp.Error()
		}
		return err
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	before, _ := direct.ListTopics(ctx, topic)
	oldID := before[topic].ID
	if _, err := direct.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := direct.CreateTopic(ctx, 1, 1, nil, topic); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("re-creating %s upstream: %v", topic, err)
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		after, _ := direct.ListTopics(ctx, topic)
		if d, ok := after[topic]; ok && d.Err == nil && d.ID != oldID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream never showed the re-created topic under a new id")
		}
	}
	// The gateway's catalog learns of the new id at its next refresh; then the old offsets are gone.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		offsets, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offsets.Lookup(topic, 0); !ok || o.At < 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the re-created topic %s still shows the old topic's committed offset", topic)
		}
	}
	if err := commit(); err != nil {
		t.Fatalf("committing for the re-created topic: %v", err)
	}
}

// A topic created upstream a moment before a commit names it (spec gateway G6.3): the commit
// refreshes the catalog instead of being refused, although the periodic refresh is far away.
func TestGateway_CommitForATopicJustCreatedUpstream(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "upstream.metadata.max.age.ms=600000")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, g.Addr))
	direct := kadm.NewClient(newClient(t, upstreamAddr))
	topic := "gw-fresh-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := direct.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l, err := direct.ListTopics(ctx, topic); err == nil && l.Has(topic) && l[topic].Err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the upstream never showed the new topic")
		}
	}
	resp, err := adm.CommitOffsets(ctx, topic+"-group", kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 1, Offset: 7}))
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit for a topic just created upstream: %v %v", err, resp.Error())
	}
}

// consolePageLag reads the console's group page and checks, per committed partition of topic,
// log end = committed + lag, and the totals of both columns.
func consolePageLag(t *testing.T, g *gateway, group, topic string, partitions int, wantLogEnd, wantLag int64) {
	t.Helper()
	resp, err := http.Get("http://" + g.Admin + "/console/group?id=" + url.QueryEscape(group))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	row := regexp.MustCompile(`<tr data-topic="` + regexp.QuoteMeta(topic) + `" data-partition="(\d+)"><td>[^<]*</td><td class="num">\d+</td><td class="num">(\d+)</td><td>[^<]*</td><td>[^<]*</td><td class="num log-end">([^<]*)</td><td class="num lag">([^<]*)</td>`)
	rows := row.FindAllStringSubmatch(string(body), -1)
	if len(rows) != partitions {
		t.Fatalf("console page of %s: %d offset rows for %s, want %d:\n%s", group, len(rows), topic, partitions, body)
	}
	var logEnd, lag int64
	for _, r := range rows {
		committed, _ := strconv.ParseInt(r[2], 10, 64)
		end, err1 := strconv.ParseInt(r[3], 10, 64)
		l, err2 := strconv.ParseInt(r[4], 10, 64)
		if err1 != nil || err2 != nil || end-committed != l {
			t.Fatalf("console page of %s, partition %s: committed %s, log end %q, lag %q", group, r[1], r[2], r[3], r[4])
		}
		logEnd += end
		lag += l
	}
	if logEnd != wantLogEnd || lag != wantLag {
		t.Fatalf("console page of %s: log end offsets sum to %d and lag to %d, want %d and %d", group, logEnd, lag, wantLogEnd, wantLag)
	}
}
