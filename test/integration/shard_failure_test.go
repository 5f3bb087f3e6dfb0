package integration

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hooksBinary is the daemon built with the testhooks tag: its admin listener has
// endpoints that break it on purpose (cmd/coordinatord/testhooks_on.go). Release builds lack them.
var hooksBinary = sync.OnceValues(func() (string, error) {
	path := binaryPath + "-testhooks"
	out, err := exec.Command("go", "build", "-race", "-tags", "testhooks", "-o", path, "../../cmd/coordinatord").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building coordinatord with test hooks: %v\n%s", err, out)
	}
	return path, nil
})

func startHooksDaemon(t *testing.T, sets ...string) *daemon {
	t.Helper()
	bin, err := hooksBinary()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, DataDir: t.TempDir(), exited: make(chan struct{}), binary: bin}
	return d.start(sets...)
}

func httpPost(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// groupsOnTwoShards returns two group ids that land on different shards of count.
func groupsOnTwoShards(count int32) (a, b string, shardA, shardB int32) {
	a, shardA = "victim", shard.For("victim", count)
	for i := 0; ; i++ {
		b = fmt.Sprint("bystander-", i)
		if shardB = shard.For(b, count); shardB != shardA {
			return
		}
	}
}

// Issue 10, defect 2: a panic in a shard operation of the real binary fails that shard only.
// Before the recover in the shard loop the POST below killed the process (every later request
// in this test failed to connect).
func TestShardPanicFailsOnlyThatShard(t *testing.T) {
	t.Parallel()
	const shards = 4
	count := fmt.Sprint("offsets.topic.num.partitions=", shards)
	d := startHooksDaemon(t, count)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	victim, bystander, vShard, _ := groupsOnTwoShards(shards)
	commit := func(group string, at int64) error {
		t.Helper()
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: -1})
		res, err := adm.CommitOffsets(ctxT(t), group, offs)
		if err != nil {
			return err
		}
		return res.Error()
	}
	for _, g := range []string{victim, bystander} {
		if err := commit(g, 10); err != nil {
			t.Fatalf("commit %s before the panic: %v", g, err)
		}
	}

	if code, body := httpPost(t, "http://"+d.Admin+"/test/panic?group="+victim); code != 200 || !strings.Contains(body, "FAILED") {
		t.Fatalf("panic hook: HTTP %d %q", code, body)
	}
	select {
	case <-d.exited:
		t.Fatalf("the process died of a shard panic: %s", exitReport(d.cmd.ProcessState))
	default:
	}

	// The victim's shard answers NOT_COORDINATOR, as Kafka does for a FAILED coordinator.
	c := dialRaw(t, d.Addr)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation, oc.MemberID = victim, -1, ""
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 11, LeaderEpoch: -1}}}}
	c.write(frame(oc, 8, 1, strp("c"), nil))
	ocr := kmsg.NewPtrOffsetCommitResponse()
	c.read(ocr, 8, 1)
	if got := ocr.Topics[0].Partitions[0].ErrorCode; got != kerr.NotCoordinator.Code {
		t.Errorf("OffsetCommit v8 to the failed shard: %v, want NOT_COORDINATOR", kerr.ErrorForCode(got))
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: victim}}
	c.write(frame(of, 8, 2, strp("c"), nil))
	ofr := kmsg.NewPtrOffsetFetchResponse()
	c.read(ofr, 8, 2)
	if got := ofr.Groups[0].ErrorCode; got != kerr.NotCoordinator.Code {
		t.Errorf("OffsetFetch v8 from the failed shard: %v, want NOT_COORDINATOR", kerr.ErrorForCode(got))
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = victim, "m", 1
	c.write(frame(hb, 4, 3, strp("c"), nil))
	hbr := kmsg.NewPtrHeartbeatResponse()
	c.read(hbr, 4, 3)
	if hbr.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("Heartbeat v4 to the failed shard: %v, want NOT_COORDINATOR", kerr.ErrorForCode(hbr.ErrorCode))
	}

	// Every other shard keeps serving.
	if err := commit(bystander, 20); err != nil {
		t.Fatalf("commit on another shard after the panic: %v", err)
	}
	got, err := adm.FetchOffsets(ctxT(t), bystander)
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch on another shard after the panic: %v %v", err, got.Error())
	}
	if o, _ := got.Lookup("t", 0); o.At != 20 {
		t.Fatalf("bystander offset %d, want 20", o.At)
	}

	// An operator sees it: /readyz names the shard, metrics count it, the log has the stack.
	code, body := httpGet(t, "http://"+d.Admin+"/readyz")
	if want := fmt.Sprintf("group shard %d: failed", vShard); code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
		t.Errorf("/readyz: HTTP %d %q, want 503 naming %q", code, body, want)
	}
	// coordinatord healthcheck says the same in one line, and fails.
	hc, _, stderr := runCLI(t, "healthcheck", "--admin", d.Admin)
	if want := fmt.Sprintf("503 Service Unavailable: group shard %d: failed\n", vShard); hc != 1 || !strings.HasSuffix(stderr, want) || strings.Count(stderr, "not ready") != 1 {
		t.Errorf("healthcheck of a node with a FAILED shard: exit %d, %q; want 1 and one line ending %q", hc, stderr, want)
	}
	_, metrics := httpGet(t, "http://"+d.Admin+"/metrics")
	for _, want := range []string{
		fmt.Sprintf(`coordinatord_shard_panics_total{kind="group",shard="%d"} 1`, vShard),
		fmt.Sprintf(`coordinatord_shard_state{kind="group",shard="%d"} 3`, vShard),
		`coordinatord_shard_failures_total{kind="group"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	line := d.waitLogged("shard FAILED: its groups get NOT_COORDINATOR until the process is restarted", nil)
	if line["level"] != "error" || line["shard"] != float64(vShard) || line["offset"] == nil {
		t.Errorf("failure log line lacks level, shard or offset: %v", line)
	}
	if st, _ := line["stack"].(string); !strings.Contains(st, "testhooks_on.go") {
		t.Errorf("failure log line has no stack through the panicking operation: %v", line["stack"])
	}

	// A restart reloads the shard from its log: nothing acknowledged before the panic is lost.
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM with a FAILED shard", code)
	}
	d.start(count)
	adm = kadm.NewClient(d.client())
	for g, want := range map[string]int64{victim: 10, bystander: 20} {
		got, err := adm.FetchOffsets(ctxT(t), g)
		if err != nil || got.Error() != nil {
			t.Fatalf("fetch %s after restart: %v %v", g, err, got.Error())
		}
		if o, _ := got.Lookup("t", 0); o.At != want {
			t.Fatalf("%s offset after restart %d, want %d", g, o.At, want)
		}
	}
}

// The panic hook is compiled only into test builds: the release binary answers 404.
func TestReleaseBinaryHasNoTestHooks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if code, _ := httpPost(t, "http://"+d.Admin+"/test/panic?group=g"); code != http.StatusNotFound {
		t.Fatalf("POST /test/panic on the release binary: HTTP %d, want 404", code)
	}
	if code, _ := httpGet(t, "http://"+d.Admin+"/readyz"); code != 200 {
		t.Fatalf("/readyz after the refused hook: HTTP %d", code)
	}
}

// A record that passes the log's checks but does not replay (written here with the log's own
// code while the daemon is stopped, as a bug in an older version could have) fails its shard at
// load; the ERROR line names the offset, /readyz the shard, and the other shards serve.
func TestUnreplayableRecordFailsOnlyItsShard(t *testing.T) {
	t.Parallel()
	const shards = 4
	count := fmt.Sprint("offsets.topic.num.partitions=", shards)
	d := startDaemon(t, count)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	victim, bystander, vShard, _ := groupsOnTwoShards(shards)
	for _, g := range []string{victim, bystander} {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 10, LeaderEpoch: -1})
		if res, err := adm.CommitOffsets(ctxT(t), g, offs); err != nil || res.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, res.Error())
		}
	}
	if d.stop() != 0 {
		t.Fatal("stop")
	}

	st, err := segment.Open(segment.Options{Dir: filepath.Join(d.DataDir, "groups"), Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	durable := make(chan int64, 4)
	l, err := st.Open(vShard, log.Callbacks{Durable: func(o int64) { durable <- o }, Failed: func(error) {}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Load(func(int64, log.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// An offset commit key without its fields.
	bad := log.Record{Key: records.NewKey(records.KindOffsetCommit).Build(), Value: []byte{0, 0}}
	badOffset, err := l.Append([]log.Record{bad})
	if err != nil {
		t.Fatal(err)
	}
	for o := range durable {
		if o >= badOffset {
			break
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	d.noWaitReady = true
	d.start(count)
	line := d.waitLogged("shard FAILED: its groups get NOT_COORDINATOR until the process is restarted", nil)
	if e, _ := line["error"].(string); line["shard"] != float64(vShard) || !strings.Contains(e, fmt.Sprintf("replay offset %d", badOffset)) {
		t.Fatalf("failure line must name shard %d and offset %d: %v", vShard, badOffset, line)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 20, LeaderEpoch: -1})
	if res, err := kadm.NewClient(d.client()).CommitOffsets(ctxT(t), bystander, offs); err != nil || res.Error() != nil {
		t.Fatalf("commit on another shard: %v %v", err, res.Error())
	}
	// The ERROR line is written just before the state changes: poll.
	want := fmt.Sprintf("group shard %d: failed", vShard)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, body := httpGet(t, "http://"+d.Admin+"/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: HTTP %d %q, want 503 naming %q", code, body, want)
		}
	}
	c := dialRaw(t, d.Addr)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = victim, "m", 1
	c.write(frame(hb, 0, 1, strp("c"), nil))
	hbr := kmsg.NewPtrHeartbeatResponse()
	c.read(hbr, 0, 1)
	if hbr.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("Heartbeat v0 to the failed shard: %v, want NOT_COORDINATOR", kerr.ErrorForCode(hbr.ErrorCode))
	}
}
