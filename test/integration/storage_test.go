package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shardOfG is where group "g" lives among the default 50 shards: abs("g".hashCode()) % 50.
const shardOfG = 3

func commitN(t *testing.T, adm *kadm.Client, group string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: "t", Partition: 0, At: int64(i), LeaderEpoch: -1})
		if r, err := adm.CommitOffsets(ctxT(t), group, o); err != nil || r.Error() != nil {
			t.Fatalf("commit %d: %v %v", i, err, r.Error())
		}
	}
}

func segmentOf(t *testing.T, dataDir string, shard int) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dataDir, "groups", fmt.Sprintf("shard-%d", shard), "*.log"))
	if len(files) == 0 {
		t.Fatalf("no segment for shard %d", shard)
	}
	return files[len(files)-1]
}

func TestLogVerifyAndCorruptionStopsOnlyThatShard(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	commitN(t, adm, "g", 20)
	commitN(t, adm, "other", 3)
	if d.stop() != 0 {
		t.Fatal("stop")
	}
	code, out, stderr := runCLI(t, "log", "verify", "--set", "log.dirs="+d.DataDir)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("groups shard %d:", shardOfG)) {
		t.Fatalf("verify of a healthy log: exit %d\n%s%s", code, out, stderr)
	}
	// A mistyped log.dirs is said as such, in one line naming the directory once.
	missing := filepath.Join(d.DataDir, "typo")
	code, _, stderr = runCLI(t, "log", "verify", "--set", "log.dirs="+missing)
	if code == 0 || !strings.Contains(stderr, "no such log directory") || strings.Count(stderr, missing) != 1 {
		t.Fatalf("verify of a missing log directory: exit %d, %q", code, stderr)
	}

	// Flip a byte in the middle of shard 3's segment: that is corruption, not a torn tail.
	seg := segmentOf(t, d.DataDir, shardOfG)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "log", "verify", "--set", "log.dirs="+d.DataDir)
	if code == 0 || !strings.Contains(out, "CORRUPT") {
		t.Fatalf("verify must report the corruption and fail: exit %d\n%s", code, out)
	}

	d.noWaitReady = true
	d.start()
	failed := d.waitLogged("shard FAILED: its groups get NOT_COORDINATOR until the process is restarted", func(l map[string]any) bool {
		return l["shard"] == float64(shardOfG)
	})
	if e, _ := failed["error"].(string); !strings.Contains(e, filepath.Base(seg)) {
		t.Fatalf("the ERROR line must name the file: %v", failed)
	}
	adm = kadm.NewClient(d.client())
	// The damaged shard answers NOT_COORDINATOR; the others keep serving.
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: "t", Partition: 0, At: 99, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctxT(t), "other", o)
	if err != nil || resp.Error() != nil {
		t.Fatalf("a healthy shard must keep serving: %v %v", err, resp.Error())
	}
	if code, _ := httpGet(t, "http://"+d.Admin+"/readyz"); code != 503 {
		t.Fatalf("readyz with a failed shard: %d", code)
	}
	// Raw, so that no client retry hides the code: OffsetFetch reports an unavailable shard as
	// NOT_COORDINATOR (spec coordinator-apis §3.3).
	c := dialRaw(t, d.Addr)
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "g"
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	c.write(frame(req, 8, 1, strp("c"), nil))
	resp8 := kmsg.NewPtrOffsetFetchResponse()
	c.read(resp8, 8, 1)
	if resp8.Groups[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("fetch from the failed shard: code %d, want NOT_COORDINATOR", resp8.Groups[0].ErrorCode)
	}
}

func TestTornTailIsTruncatedAndEarlierCommitsSurvive(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	commitN(t, adm, "g", 5)
	if d.stop() != 0 {
		t.Fatal("stop")
	}
	// A crash in the middle of a write leaves a partial batch at the end.
	seg := segmentOf(t, d.DataDir, shardOfG)
	f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 200, 1, 2, 3, 4, 5, 6, 7})
	f.Close()

	d.start()
	adm = kadm.NewClient(d.client())
	got, err := adm.FetchOffsets(ctxT(t), "g")
	if err != nil || got.Error() != nil {
		t.Fatal(err, got.Error())
	}
	if o, _ := got.Lookup("t", 0); o.At != 5 {
		t.Fatalf("after torn tail: offset %d, want 5", o.At)
	}
	found := false
	for _, l := range d.allLogs() {
		if l["level"] == "warn" && strings.Contains(fmt.Sprint(l), "torn") {
			found = true
		}
	}
	if !found {
		js, _ := json.Marshal(d.allLogs())
		t.Fatalf("no WARN about the torn tail in %s", js)
	}
	commitN(t, adm, "g", 6)
}

// On a log.backend=kafka node log.dirs holds the metadata shard only: log verify checks it and
// says where the group shards are, instead of failing on the missing groups directory as if
// log.dirs were mistyped; log dump of a group shard says where to read it.
func TestLogVerifyOnAKafkaBackendNodeChecksTheMetadataShard(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	createTopic(t, kadm.NewClient(d.client()), "t", 1)
	if d.stop() != 0 {
		t.Fatal("stop")
	}
	// What a Kafka-backend node keeps under log.dirs: no groups directory.
	if err := os.RemoveAll(filepath.Join(d.DataDir, "groups")); err != nil {
		t.Fatal(err)
	}
	kafka := []string{"--set", "log.dirs=" + d.DataDir, "--set", "log.backend=kafka", "--set", "log.kafka.topic=state",
		"--set", "upstream.bootstrap.servers=127.0.0.1:1", "--set", "cluster.id=c"}
	code, out, stderr := runCLI(t, append([]string{"log", "verify"}, kafka...)...)
	if code != 0 || !strings.Contains(out, "meta shard 0:") || !strings.Contains(out, "groups: in the upstream topic state") {
		t.Fatalf("verify on a Kafka-backend log.dirs: exit %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = runCLI(t, append([]string{"log", "dump"}, kafka...)...)
	if code == 0 || !strings.Contains(stderr, "partitions of the upstream topic state") {
		t.Fatalf("dump of a group shard on a Kafka-backend log.dirs: exit %d, %q", code, stderr)
	}
	if code, out, stderr = runCLI(t, append([]string{"log", "dump", "--meta"}, kafka...)...); code != 0 || out == "" {
		t.Fatalf("dump --meta: exit %d\n%s%s", code, out, stderr)
	}
}
