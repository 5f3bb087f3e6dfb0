package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An unmodified Kafka Streams 4.4 word count with group.protocol=streams runs through the
// gateway in front of a broker whose own streams groups are off: coordinatord is its group
// coordinator and creates its repartition and changelog topics upstream. It scales 1 -> 3 -> 1
// instances with input flowing, tasks spread while three run, and the final counts are exact.
func TestGateway_StreamsWordCountScalesAndCountsExactly(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t) // build before any clock starts
	g := startGateway(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	adm := kadm.NewClient(cl)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	appID, in, out := "wc-"+run, "wc-in-"+run, "wc-out-"+run
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, in); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, out); err != nil {
		t.Fatal(err)
	}

	expected := map[string]int64{}
	produce := func(batch int) {
		lines, counts := wordCountInput(batch, 200)
		for _, l := range lines {
			cl.Produce(ctx, &kgo.Record{Topic: in, Value: []byte(l)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		addCounts(expected, counts)
	}

	start := time.Now()
	a1 := startWordCount(t, "instance-1", g.Addr, appID, in, out, "streams")
	a1.waitState("RUNNING", 90*time.Second)
	t.Logf("1 instance RUNNING %.1f s after start", time.Since(start).Seconds())
	produce(1)

	a2 := startWordCount(t, "instance-2", g.Addr, appID, in, out, "streams")
	a3 := startWordCount(t, "instance-3", g.Addr, appID, in, out, "streams")
	a2.waitState("RUNNING", 90*time.Second)
	a3.waitState("RUNNING", 90*time.Second)
	produce(2)
	waitSpread(t, ctx, cl, appID, 3)

	a2.stop()
	a3.stop()
	produce(3)
	waitCounts(t, ctx, g.Addr, out, expected)

	// The internal topics exist upstream, where the data is, created by coordinatord.
	direct := kadm.NewClient(newClient(t, upstreamAddr))
	topics, err := direct.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{appID + "-counts-changelog", appID + "-counts-repartition"} {
		if !topics.Has(want) {
			t.Errorf("internal topic %s was not created upstream (topics: %v)", want, topics.Names())
		}
	}
	a1.stop()
}

// waitSpread waits until the streams group has n members that each own active tasks.
func waitSpread(t *testing.T, ctx context.Context, cl *kgo.Client, group string, n int) {
	t.Helper()
	waitEveryMemberHolds(t, ctx, cl, group, n, "active", func(a kmsg.StreamsAssignment) []kmsg.TaskIDs { return a.ActiveTasks })
}

// waitEveryMemberHolds waits (at most 90 s) until the streams group has n members and each
// holds at least one task of the kind tasks picks from its assignment.
func waitEveryMemberHolds(t *testing.T, ctx context.Context, cl *kgo.Client, group string, n int, kind string, tasks func(kmsg.StreamsAssignment) []kmsg.TaskIDs) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl.Broker(nodeID))
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
			members := resp.Groups[0].Members
			holding := 0
			last = ""
			for _, m := range members {
				count := 0
				for _, ids := range tasks(m.Assignment) {
					count += len(ids.Partitions)
				}
				if count > 0 {
					holding++
				}
				last += fmt.Sprintf("%s: %d %s; ", m.MemberID, count, kind)
			}
			if len(members) == n && holding == n {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("not every one of %d members holds %s tasks: %s", n, kind, last)
}

// waitCounts reads the output topic from the start until the latest count of every word is the
// expected one.
func waitCounts(t *testing.T, ctx context.Context, addr, topic string, expected map[string]int64) {
	t.Helper()
	if got, ok := readCountsUntil(t, ctx, addr, topic, func(got map[string]int64) bool { return equalCounts(got, expected) }); !ok {
		t.Fatalf("final counts %v, want %v", got, expected)
	}
}

// waitCountsAtLeast is waitCounts for at-least-once: every word's latest count reaches at
// least the expected one.
func waitCountsAtLeast(t *testing.T, ctx context.Context, addr, topic string, expected map[string]int64) {
	t.Helper()
	if got, ok := readCountsUntil(t, ctx, addr, topic, countsAtLeast(expected)); !ok {
		t.Fatalf("counts %v, want at least %v", got, expected)
	}
}

// waitCommittedCountsAtLeast is waitCountsAtLeast with read_committed: the application's
// committed output has caught up with at least the expected counts.
func waitCommittedCountsAtLeast(t *testing.T, ctx context.Context, addr, topic string, expected map[string]int64) {
	t.Helper()
	if got, ok := readCountsUntil(t, ctx, addr, topic, countsAtLeast(expected), kgo.FetchIsolationLevel(kgo.ReadCommitted())); !ok {
		t.Fatalf("read_committed counts %v, want at least %v", got, expected)
	}
}

func countsAtLeast(expected map[string]int64) func(map[string]int64) bool {
	return func(got map[string]int64) bool {
		ok := len(got) == len(expected)
		for k, v := range expected {
			ok = ok && got[k] >= v
		}
		return ok
	}
}

// readCountsUntil reads the output topic from the start, keeping each word's latest count,
// until done accepts the counts or two minutes pass.
func readCountsUntil(t *testing.T, ctx context.Context, addr, topic string, done func(map[string]int64) bool, opts ...kgo.Opt) (map[string]int64, bool) {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	got := map[string]int64{}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) == 8 {
				got[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
			}
		})
		if done(got) {
			return got, true
		}
	}
	return got, false
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// wordCountSetup creates the input and output topics of one application run.
type wordCountRun struct {
	appID, in, out string
	cl             *kgo.Client
	expected       map[string]int64
}

func newWordCountRun(t *testing.T, ctx context.Context, addr string) *wordCountRun {
	t.Helper()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	r := &wordCountRun{appID: "wc-" + run, in: "wc-in-" + run, out: "wc-out-" + run, cl: newClient(t, addr), expected: map[string]int64{}}
	adm := kadm.NewClient(r.cl)
	for _, topic := range []string{r.in, r.out} {
		if _, err := adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *wordCountRun) produce(t *testing.T, ctx context.Context, batch int) {
	t.Helper()
	lines, counts := wordCountInput(batch, 200)
	for _, l := range lines {
		r.cl.Produce(ctx, &kgo.Record{Topic: r.in, Value: []byte(l)}, nil)
	}
	if err := r.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	addCounts(r.expected, counts)
}

// The same application with the classic rebalance protocol: coordinatord serves it as a
// classic group through the gateway.
func TestGateway_StreamsWordCountClassicProtocol(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t)
	g := startGateway(t, "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	// Under the classic protocol the client creates its internal topics itself (forwarded).
	a1 := startWordCount(t, "classic-1", g.Addr, r.appID, r.in, r.out, "classic")
	start := time.Now()
	a1.waitState("RUNNING", 90*time.Second)
	t.Logf("classic: 1 instance RUNNING %.1f s after start", time.Since(start).Seconds())
	r.produce(t, ctx, 1)
	a2 := startWordCount(t, "classic-2", g.Addr, r.appID, r.in, r.out, "classic")
	a2.waitState("RUNNING", 90*time.Second)
	r.produce(t, ctx, 2)
	waitCounts(t, ctx, g.Addr, r.out, r.expected)
	described, err := kadm.NewClient(r.cl).DescribeGroups(ctx, r.appID)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[r.appID]; d.ProtocolType != "consumer" || len(d.Members) != 2 {
		t.Fatalf("the application's group as coordinatord sees it: %+v", d)
	}
	a2.stop()
	a1.stop()
}

// kill -9 of coordinatord while the application processes: after the restart the application,
// never restarted itself, goes on, and every input record is reflected in the output (counts
// are at least the expected ones: at-least-once may count a replayed record twice).
func TestGateway_StreamsWordCountSurvivesCoordinatordKill(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t)
	g := startGateway(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	a := startWordCount(t, "survivor", g.Addr, r.appID, r.in, r.out, "streams")
	a.waitState("RUNNING", 90*time.Second)
	r.produce(t, ctx, 1)
	time.Sleep(500 * time.Millisecond) // let it be mid-processing
	g.kill()
	g.start()
	r.cl = newClient(t, g.Addr)
	r.produce(t, ctx, 2)
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)
	select {
	case <-a.exited:
		t.Fatal("the application exited when coordinatord was killed")
	default:
	}
	a.stop()
}

// With a topology description plugin, the Streams 4.4 client pushes its topology description
// (API 93) when a heartbeat answer asks for it, through the gateway; StreamsGroupDescribe v1
// reads it back: the word count's source topic, its count store and its output topic.
func TestGateway_StreamsTopologyDescriptionPushedAndDescribed(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t)
	g := startGateway(t, "group.streams.initial.rebalance.delay.ms=0",
		"group.streams.topology.description.plugin.class=memory")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	a := startWordCount(t, "described", g.Addr, r.appID, r.in, r.out, "streams")
	a.waitState("RUNNING", 90*time.Second)

	const available = 3
	var last string
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Groups, req.IncludeTopologyDescription = []string{r.appID}, true
		resp, err := req.RequestWith(ctx, r.cl.Broker(nodeID))
		if err == nil && len(resp.Groups) == 1 {
			grp := resp.Groups[0]
			last = fmt.Sprintf("status %d", grp.TopologyDescriptionStatus)
			if grp.TopologyDescriptionStatus == available && grp.TopologyDescription != nil {
				var sources, sinks, stores []string
				for _, st := range grp.TopologyDescription.Subtopologies {
					for _, n := range st.Nodes {
						sources = append(sources, n.SourceTopics...)
						stores = append(stores, n.Stores...)
						if n.SinkTopic != nil {
							sinks = append(sinks, *n.SinkTopic)
						}
					}
				}
				want := map[string][]string{"source": {r.in}, "sink": {r.out}, "store": {"counts"}}
				got := map[string][]string{"source": sources, "sink": sinks, "store": stores}
				for kind, names := range want {
					for _, n := range names {
						if !contains(got[kind], n) {
							t.Fatalf("described topology has %s nodes %v, want %s among them", kind, got[kind], n)
						}
					}
				}
				a.stop()
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the topology description never became available (last: %s)", last)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Kafka Streams 4.4 with processing.guarantee=exactly_once_v2 through the gateway, two
// instances: its offsets are committed inside the producer's transactions, the gateway relays
// each transaction's outcome to them, and the output read with read_committed has the exact
// counts — across a kill -9 of coordinatord mid-run, then of one instance.
func TestGateway_WordCountExactlyOnceV2(t *testing.T) {
	requireE2E(t)
	wordCountClasspath(t)
	for _, tv := range []int16{2, 1} {
		t.Run(fmt.Sprintf("upstream_transaction_version_%d", tv), func(t *testing.T) {
			setUpstreamTransactionVersion(t, tv)
			wordCountExactlyOnce(t)
		})
	}
}

// setUpstreamTransactionVersion finalizes transaction.version on the upstream (UpdateFeatures,
// asked directly: the gateway never forwards it), restoring the level it had afterwards.
func setUpstreamTransactionVersion(t *testing.T, level int16) {
	t.Helper()
	up := newClient(t, upstreamAddr)
	ctx := context.Background() // each request is bounded by the client's own timeouts
	current := func() int16 {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "e2e", "1.0"
		resp, err := req.RequestWith(ctx, up)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" {
				return f.MaxVersionLevel
			}
		}
		return 0
	}
	set := func(level int16) {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel = "transaction.version", level
		fu.UpgradeType = 1 // upgrade
		if level < current() {
			fu.UpgradeType = 2 // safe downgrade
		}
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
		resp, err := req.RequestWith(ctx, up)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("UpdateFeatures transaction.version=%d: %v %v", level, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
		}
		for _, r := range resp.Results {
			if r.ErrorCode != 0 {
				t.Fatalf("UpdateFeatures transaction.version=%d: %v %v", level, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
			}
		}
		for deadline := time.Now().Add(20 * time.Second); current() != level; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("transaction.version not finalized at %d upstream", level)
			}
		}
	}
	was := current()
	if was == level {
		return
	}
	set(level)
	t.Cleanup(func() { set(was) }) // runs before up's Close, registered earlier
}

func wordCountExactlyOnce(t *testing.T) {
	// A short session: the instance killed below holds its tasks until its session ends, and at
	// the 45 s default the wait was most of this test's time.
	g := startGateway(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0",
		"group.streams.min.session.timeout.ms=6000", "group.streams.session.timeout.ms=6000",
		"group.streams.min.heartbeat.interval.ms=1000", "group.streams.heartbeat.interval.ms=1000")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	a := startWordCount(t, "eos-a", g.Addr, r.appID, r.in, r.out, "streams", "exactly_once_v2")
	b := startWordCount(t, "eos-b", g.Addr, r.appID, r.in, r.out, "streams", "exactly_once_v2")
	a.waitState("RUNNING", 2*time.Minute)
	b.waitState("RUNNING", 2*time.Minute)
	r.produce(t, ctx, 1)
	waitCommittedCounts(t, ctx, g.Addr, r.out, r.expected)
	r.produce(t, ctx, 2)
	time.Sleep(300 * time.Millisecond) // mid-processing
	g.kill()
	g.start()
	r.cl = newClient(t, g.Addr)
	r.produce(t, ctx, 3)
	waitCommittedCounts(t, ctx, g.Addr, r.out, r.expected)

	// kill -9 of one instance mid-run: an open transaction of its producers is aborted upstream
	// by its timeout, and the relay's sweep aborts its staged offsets.
	r.produce(t, ctx, 4)
	time.Sleep(300 * time.Millisecond)
	b.cmd.Process.Kill()
	<-b.exited
	r.produce(t, ctx, 5)
	waitCommittedCounts(t, ctx, g.Addr, r.out, r.expected)
	stopRunning(t, a)
}

// stopRunning fails if one of the instances exited by itself, and stops them.
func stopRunning(t *testing.T, apps ...*streamsApp) {
	t.Helper()
	for _, app := range apps {
		select {
		case <-app.exited:
			t.Fatalf("%s exited:\n%s", app.name, app.output())
		default:
		}
		app.stop()
	}
}

// waitCommittedCounts is waitCounts with read_committed, as an exactly-once reader reads: a
// duplicate or a lost record leaves some word's latest count off.
func waitCommittedCounts(t *testing.T, ctx context.Context, addr, topic string, expected map[string]int64) {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[string]int64{}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) == 8 {
				got[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
			}
		})
		if equalCounts(got, expected) {
			return
		}
	}
	t.Fatalf("read_committed counts %v, want %v", got, expected)
}
