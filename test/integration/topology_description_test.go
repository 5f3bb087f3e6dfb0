package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topology description plugin (KIP-1331) over the wire with the real binary; test names point
// at sections of spec topology-description.md.

// §2 + §3 + §5 happy path, once per plugin: a 10-member Streams application is asked exactly
// once for the topology epoch, one member pushes, later heartbeats are not asked again, and
// describe returns the pushed description byte for byte.
func TestTopologyDescription2_3_5_PushHappyPathMemory(t *testing.T) {
	t.Parallel()
	topoHappyPath(t, topoPluginKey+"class=memory")
}

func TestTopologyDescription2_3_5_PushHappyPathFile(t *testing.T) {
	t.Parallel()
	topoHappyPath(t, topoPluginKey+"class=file", topoPluginKey+"file.dir="+t.TempDir())
}

func TestTopologyDescription2_3_5_PushHappyPathHTTP(t *testing.T) {
	t.Parallel()
	topoHappyPath(t, httpPluginSettings(newTopoService(t))...)
}

func topoHappyPath(t *testing.T, plugin ...string) {
	d := startStreamsDaemon(t, plugin...)
	createStreamsTopics(t, d.Addr, 6, "happy-0", "happy-1")
	app := newStreamsApp(t, d.Addr, "happy", streamsTopology("happy", 2))
	app.interval = 50 * time.Millisecond
	var members []*simMember
	for i := range 10 {
		members = append(members, app.newMember(fmt.Sprintf("m%d", i), fmt.Sprintf("p%d", i), nil))
	}
	var mu sync.Mutex
	var asked []string
	var askedEpochs []int32
	var beats atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			for {
				before := m.beats
				m.heartbeat()
				beats.Add(1)
				// m.last is only fresh when the round trip succeeded (beats moved).
				if m.beats > before && m.last != nil && m.last.TopologyDescriptionRequired {
					mu.Lock()
					asked = append(asked, m.id)
					askedEpochs = append(askedEpochs, m.epoch)
					mu.Unlock()
				}
				select {
				case <-stop:
					return
				case <-time.After(app.interval):
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "a member asked to push", func() bool { mu.Lock(); defer mu.Unlock(); return len(asked) > 0 })
	mu.Lock()
	pusher := asked[0]
	mu.Unlock()
	desc := sampleDescription("happy")
	if r := pushTopo(t, d.Addr, "happy", pusher, 0, desc); r.ErrorCode != 0 || r.ErrorMessage != nil {
		t.Fatalf("push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	// Plenty more heartbeats of all members after the push: none is asked again.
	start := beats.Load()
	waitFor(t, "100 more heartbeats", func() bool { return beats.Load() > start+100 })
	mu.Lock()
	if len(asked) != 1 {
		t.Fatalf("asked %d times (%v at member epochs %v; the coordinator logged %d requests), want once per topology epoch",
			len(asked), asked, askedEpochs, len(d.logged("[GroupId happy] Requested topology description push at topology epoch 0.")))
	}
	mu.Unlock()
	g := describeTopo(t, d.Addr, "happy")[0]
	if g.ErrorCode != 0 || g.TopologyDescriptionStatus != 3 || !sameDescription(g.TopologyDescription, desc) {
		t.Fatalf("describe: code %d status %d description %+v", g.ErrorCode, g.TopologyDescriptionStatus, g.TopologyDescription)
	}
	d.waitLogged("[GroupId happy] Requested topology description push at topology epoch 0.", nil)
}

// §3.1: the checks before the plugin, with their codes and messages.
func TestTopologyDescription3_1_ValidationAndFencing(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	d := startStreamsDaemon(t, httpPluginSettings(svc)...)
	createStreamsTopics(t, d.Addr, 2, "fence-in-0")
	joinTopo(t, d.Addr, "fence", "m1")
	desc := sampleDescription("fence")
	bad := sampleDescription("fence")
	bad.Subtopologies[0].Nodes[1].NodeType = 9
	badGlobal := sampleDescription("fence")
	badGlobal.GlobalStores[0].Source.NodeType = 2
	for _, tc := range []struct {
		name, group, member string
		epoch               int32
		d                   kmsg.TopologyDescription
		code                int16
		msg                 string
	}{
		{"empty member", "", "", 0, desc, kerr.InvalidRequest.Code, "MemberId can't be empty."},
		{"empty group", "", "m1", 0, desc, kerr.InvalidRequest.Code, "GroupId can't be empty."},
		{"unknown group", "nope", "m1", 0, desc, kerr.GroupIDNotFound.Code, "Group nope not found."},
		{"unknown member", "fence", "m9", 0, desc, kerr.UnknownMemberID.Code, "Member m9 is not a member of group fence."},
		{"higher epoch", "fence", "m1", 1, desc, kerr.StreamsInvalidTopologyEpoch.Code, "Topology epoch 1 does not match the group's current topology epoch 0."},
		{"lower epoch", "fence", "m1", -1, desc, kerr.StreamsInvalidTopologyEpoch.Code, "Topology epoch -1 does not match the group's current topology epoch 0."},
		{"node type", "fence", "m1", 0, bad, kerr.InvalidRequest.Code, "Unknown topology node type: 9"},
		{"global store", "fence", "m1", 0, badGlobal, kerr.InvalidRequest.Code, "Global store must be composed of a source and a processor node."},
	} {
		r := pushTopo(t, d.Addr, tc.group, tc.member, tc.epoch, tc.d)
		if r.ErrorCode != tc.code || r.ErrorMessage == nil || *r.ErrorMessage != tc.msg {
			t.Errorf("%s: %d %v, want %d %q", tc.name, r.ErrorCode, r.ErrorMessage, tc.code, tc.msg)
		}
	}
	if puts, _, _ := svc.count(); puts != 0 {
		t.Fatalf("the plugin was called %d times for rejected pushes", puts)
	}
	// A push is accepted from any current member, asked or not.
	if r := pushTopo(t, d.Addr, "fence", "m1", 0, desc); r.ErrorCode != 0 {
		t.Fatalf("valid push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
}

// §3.3 permanent: the plugin rejects for good; the client sees 135 with the plugin's reason,
// the epoch is never solicited again, also after a restart, and describe says NOT_STORED.
func TestTopologyDescription3_3_PermanentFailureStopsSolicitation(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	svc.set(func(s *topoService) { s.putStatus, s.putBody = 413, "description too large" })
	sets := append(httpPluginSettings(svc), "group.streams.topology.description.backoff.initial.ms=200",
		"group.streams.topology.description.backoff.jitter=0")
	d := startStreamsDaemon(t, sets...)
	createStreamsTopics(t, d.Addr, 2, "perm-in-0")
	m, join := joinTopo(t, d.Addr, "perm", "m1")
	if !join.TopologyDescriptionRequired {
		t.Fatal("first v1 join of a new group not asked for the description")
	}
	r := pushTopo(t, d.Addr, "perm", "m1", 0, sampleDescription("perm"))
	if r.ErrorCode != kerr.StreamsTopologyDescriptionUpdateFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != "description too large" {
		t.Fatalf("push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	time.Sleep(600 * time.Millisecond) // three back-off windows: a transient failure would be re-solicited now
	for range 3 {
		if m.beat().TopologyDescriptionRequired {
			t.Fatal("solicited again at a permanently rejected epoch")
		}
	}
	if g := describeTopo(t, d.Addr, "perm")[0]; g.ErrorCode != 0 || g.TopologyDescriptionStatus != 1 || g.TopologyDescription != nil {
		t.Fatalf("describe: %d status %d", g.ErrorCode, g.TopologyDescriptionStatus)
	}
	d.stop()
	d.start(sets...)
	m.c, m.corr = dialRaw(t, d.Addr), 0
	for range 3 {
		if m.beat().TopologyDescriptionRequired {
			t.Fatal("solicited after a restart at a permanently rejected epoch")
		}
	}
}

// §3.3 transient: 135 with the plugin's message, the back-off is extended (the next heartbeat
// is not asked), and a later heartbeat is asked again; the re-push then succeeds.
func TestTopologyDescription3_3_TransientFailureArmsBackoff(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	svc.set(func(s *topoService) { s.putStatus, s.putBody = 503, "backend offline" })
	d := startStreamsDaemon(t, append(httpPluginSettings(svc), "group.streams.topology.description.backoff.initial.ms=500",
		"group.streams.topology.description.backoff.jitter=0")...)
	createStreamsTopics(t, d.Addr, 2, "trans-in-0")
	m, join := joinTopo(t, d.Addr, "trans", "m1")
	if !join.TopologyDescriptionRequired {
		t.Fatal("join not asked")
	}
	r := pushTopo(t, d.Addr, "trans", "m1", 0, sampleDescription("trans"))
	if r.ErrorCode != kerr.StreamsTopologyDescriptionUpdateFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != "backend offline" {
		t.Fatalf("push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	if m.beat().TopologyDescriptionRequired {
		t.Fatal("asked again right after a transient failure: back-off not armed")
	}
	waitFor(t, "re-solicitation after the back-off window", func() bool { return m.beat().TopologyDescriptionRequired })
	svc.set(func(s *topoService) { s.putStatus = 0 })
	if r := pushTopo(t, d.Addr, "trans", "m1", 0, sampleDescription("trans")); r.ErrorCode != 0 {
		t.Fatalf("re-push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	if g := describeTopo(t, d.Addr, "trans")[0]; g.TopologyDescriptionStatus != 3 || !sameDescription(g.TopologyDescription, sampleDescription("trans")) {
		t.Fatalf("describe status %d", g.TopologyDescriptionStatus)
	}
}

// §4: DeleteGroups calls the plugin delete before the tombstone; a failure answers 134 with
// the fixed message in v3 (-1 in v2), keeps the group, leaves other groups alone, and a retry
// after the plugin recovers converges.
func TestTopologyDescription4_DeleteGroupsFailureThenRetry(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	d := startStreamsDaemon(t, httpPluginSettings(svc)...)
	createStreamsTopics(t, d.Addr, 2, "del-in-0", "plain-in-0")
	m, _ := joinTopo(t, d.Addr, "del", "m1")
	if r := pushTopo(t, d.Addr, "del", "m1", 0, sampleDescription("del")); r.ErrorCode != 0 {
		t.Fatalf("push: %d", r.ErrorCode)
	}
	m.leave()
	p, _ := joinTopo(t, d.Addr, "plain", "m1") // no description stored
	p.leave()
	svc.set(func(s *topoService) { s.deleteStatus = 500 })
	res := deleteGroupsRaw(t, d.Addr, 3, "del", "plain")
	if g := res["del"]; g.ErrorCode != kerr.GroupDeletionFailed.Code || g.ErrorMessage == nil || *g.ErrorMessage != "Topology description plugin failed to delete the topology." {
		t.Fatalf("v3 failure: %d %v", g.ErrorCode, g.ErrorMessage)
	}
	if g := res["plain"]; g.ErrorCode != 0 {
		t.Fatalf("other group affected: %d", g.ErrorCode)
	}
	if g := describeTopo(t, d.Addr, "del")[0]; g.ErrorCode != 0 || g.TopologyDescriptionStatus != 1 {
		t.Fatalf("group after failed delete: code %d status %d (want it kept, UNCERTAIN → NOT_STORED)", g.ErrorCode, g.TopologyDescriptionStatus)
	}
	if g := deleteGroupsRaw(t, d.Addr, 2, "del")["del"]; g.ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("v2 failure: %d", g.ErrorCode)
	}
	svc.set(func(s *topoService) { s.deleteStatus = 0 })
	if g := deleteGroupsRaw(t, d.Addr, 3, "del")["del"]; g.ErrorCode != 0 || g.ErrorMessage != nil {
		t.Fatalf("retry: %d %v", g.ErrorCode, g.ErrorMessage)
	}
	if _, deletes, stored := svc.count(); deletes < 3 || stored != 0 {
		t.Fatalf("plugin deletes %d, stored %d", deletes, stored)
	}
	if g := describeTopo(t, d.Addr, "del")[0]; g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted group describes with %d", g.ErrorCode)
	}
	// A new group with the same id starts from scratch and is asked again.
	if _, join := joinTopo(t, d.Addr, "del", "m2"); !join.TopologyDescriptionRequired {
		t.Fatal("re-created group not solicited")
	}
	// Also for a group that was asked but never pushed (no description, so no plugin delete):
	// deleting it forgets its back-off window.
	if _, join := joinTopo(t, d.Addr, "plain", "m2"); !join.TopologyDescriptionRequired {
		t.Fatal("re-created group without a description not solicited")
	}
}

// §1.2: without a plugin pushes are refused with UNSUPPORTED_VERSION, no heartbeat is ever
// asked, describe says NOT_STORED.
func TestTopologyDescription1_2_NoPlugin(t *testing.T) {
	t.Parallel()
	d := startStreamsDaemon(t)
	createStreamsTopics(t, d.Addr, 2, "none-in-0")
	m, join := joinTopo(t, d.Addr, "none", "m1")
	asked := join.TopologyDescriptionRequired
	for range 5 {
		asked = asked || m.beat().TopologyDescriptionRequired
	}
	if asked {
		t.Fatal("TopologyDescriptionRequired set without a plugin")
	}
	for _, g := range []string{"none", "unknown"} {
		r := pushTopo(t, d.Addr, g, "m1", 0, sampleDescription("none"))
		if r.ErrorCode != kerr.UnsupportedVersion.Code || r.ErrorMessage == nil || *r.ErrorMessage != "The broker has no streams group topology description plugin configured." {
			t.Fatalf("push to %s: %d %v", g, r.ErrorCode, r.ErrorMessage)
		}
	}
	if g := describeTopo(t, d.Addr, "none")[0]; g.ErrorCode != 0 || g.TopologyDescriptionStatus != 1 || g.TopologyDescription != nil {
		t.Fatalf("describe: %d status %d", g.ErrorCode, g.TopologyDescriptionStatus)
	}
}

// §9 scenario 53: with the file plugin, a restart keeps the stored epoch and the description:
// describe is AVAILABLE without a new push and heartbeats are not asked.
func TestTopologyDescription9_53_RestartKeepsStoredEpoch(t *testing.T) {
	t.Parallel()
	sets := []string{topoPluginKey + "class=file", topoPluginKey + "file.dir=" + t.TempDir()}
	d := startStreamsDaemon(t, sets...)
	createStreamsTopics(t, d.Addr, 2, "keep-in-0")
	m, _ := joinTopo(t, d.Addr, "keep", "m1")
	desc := sampleDescription("keep")
	if r := pushTopo(t, d.Addr, "keep", "m1", 0, desc); r.ErrorCode != 0 {
		t.Fatalf("push: %d", r.ErrorCode)
	}
	d.stop()
	d.start(sets...)
	m.c, m.corr = dialRaw(t, d.Addr), 0
	if m.beat().TopologyDescriptionRequired {
		t.Fatal("asked after restart although the description is stored")
	}
	if g := describeTopo(t, d.Addr, "keep")[0]; g.TopologyDescriptionStatus != 3 || !sameDescription(g.TopologyDescription, desc) {
		t.Fatalf("describe after restart: status %d", g.TopologyDescriptionStatus)
	}
}

// §3.5 / ARCHITECTURE §4.10: a plugin call that hangs holds only its own push; heartbeats of
// another group on the same shard are answered meanwhile.
func TestTopologyDescription3_5_HungPluginDoesNotBlockHeartbeats(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	release := make(chan struct{})
	svc.set(func(s *topoService) { s.putRelease = release })
	d := startStreamsDaemon(t, append(httpPluginSettings(svc), "offsets.topic.num.partitions=1",
		topoPluginKey+"call.timeout.ms=60000", topoPluginKey+"http.request.timeout.ms=60000")...)
	createStreamsTopics(t, d.Addr, 2, "hang-in-0", "live-in-0")
	joinTopo(t, d.Addr, "hang", "m1")
	other, _ := joinTopo(t, d.Addr, "live", "m1")
	pushed := make(chan *kmsg.StreamsGroupTopologyDescriptionUpdateResponse, 1)
	go func() { pushed <- pushTopo(t, d.Addr, "hang", "m1", 0, sampleDescription("hang")) }()
	select {
	case <-svc.putArrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin never received the push")
	}
	for range 5 {
		other.beat() // fails the test if not answered within the connection deadline
	}
	select {
	case r := <-pushed:
		t.Fatalf("push answered while the plugin was stuck: %+v", r)
	default:
	}
	close(release)
	select {
	case r := <-pushed:
		if r.ErrorCode != 0 {
			t.Fatalf("push after release: %d %v", r.ErrorCode, r.ErrorMessage)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("push not answered after the plugin returned")
	}
}

// §6: an idle group (no members, no offsets) with a stored description is cleaned up by the
// periodic cycle: the plugin delete runs, then the offsets sweep removes the group. While the
// plugin's delete fails, the group is kept.
func TestTopologyDescription6_CleanupReleasesIdleGroup(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	svc.set(func(s *topoService) { s.deleteStatus = 500 })
	d := startStreamsDaemon(t, append(httpPluginSettings(svc), "offsets.retention.check.interval.ms=200")...)
	createStreamsTopics(t, d.Addr, 2, "idle-in-0")
	m, _ := joinTopo(t, d.Addr, "idle", "m1")
	if r := pushTopo(t, d.Addr, "idle", "m1", 0, sampleDescription("idle")); r.ErrorCode != 0 {
		t.Fatalf("push: %d", r.ErrorCode)
	}
	m.leave()
	waitFor(t, "cleanup attempts", func() bool { _, deletes, _ := svc.count(); return deletes >= 3 })
	if g := describeTopo(t, d.Addr, "idle")[0]; g.ErrorCode != 0 {
		t.Fatalf("group removed although the plugin still holds its description: %d", g.ErrorCode)
	}
	svc.set(func(s *topoService) { s.deleteStatus = 0 })
	waitFor(t, "group removed after the plugin delete succeeded", func() bool {
		return describeTopo(t, d.Addr, "idle")[0].ErrorCode == kerr.GroupIDNotFound.Code
	})
	if _, _, stored := svc.count(); stored != 0 {
		t.Fatalf("plugin still holds %d descriptions", stored)
	}
}

// §5 scenario 33: describe of three groups whose plugin get fails for one: that one is ERROR,
// the others AVAILABLE, and no group's ErrorCode changes.
func TestTopologyDescription5_GetFailureIsPerGroup(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	d := startStreamsDaemon(t, httpPluginSettings(svc)...)
	groups := []string{"da", "db", "dc"}
	for _, g := range groups {
		createStreamsTopics(t, d.Addr, 1, g+"-in-0")
		joinTopo(t, d.Addr, g, "m1")
		if r := pushTopo(t, d.Addr, g, "m1", 0, sampleDescription(g)); r.ErrorCode != 0 {
			t.Fatalf("push %s: %d", g, r.ErrorCode)
		}
	}
	svc.set(func(s *topoService) { s.getFail = map[string]bool{"db": true} })
	got := describeTopo(t, d.Addr, append(groups, "dnone")...)
	for i, want := range []int8{3, 2, 3, 0} {
		if got[i].TopologyDescriptionStatus != want || (want == 3) != (got[i].TopologyDescription != nil) {
			t.Errorf("%s: status %d (description %v), want %d", got[i].Group, got[i].TopologyDescriptionStatus, got[i].TopologyDescription != nil, want)
		}
		if code := got[i].ErrorCode; (i < 3 && code != 0) || (i == 3 && code != kerr.GroupIDNotFound.Code) {
			t.Errorf("%s: error code %d", got[i].Group, code)
		}
	}
	if !sameDescription(got[2].TopologyDescription, sampleDescription("dc")) {
		t.Error("dc's description differs from its push")
	}
}

// §1.1: an unknown plugin name fails start-up with a message naming the key.
func TestTopologyDescription1_1_UnknownPluginFailsStartup(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binaryPath, "serve", "--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+t.TempDir(), "--set", topoPluginKey+"class=nope")
	cmd.Env = daemonEnv(binaryPath)
	out, err := cmd.CombinedOutput()
	failIfRaced(t, cmd.ProcessState)
	if err == nil {
		t.Fatal("coordinatord started with an unknown topology description plugin")
	}
	if !strings.Contains(string(out), `group.streams.topology.description.plugin.class="nope": no such plugin`) {
		t.Fatalf("no clear message: %s", out)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
