package integration

import (
	"context"
	"errors"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The web console (docs/console.md) in a real headless Chromium (the Debian package; CI installs
// it with test/install-tools.sh). Every page is rendered twice: --dump-dom for the DOM the
// browser built, which the test checks, and --screenshot, kept as a test artefact in
// $CONSOLE_SCREENSHOT_DIR (`make unit`, so `make test` and CI, and `make console-test` set
// bin/test-output/console), else in the test's artifact directory (kept with `go test
// -artifacts -outputdir DIR`, removed otherwise).

// chromium finds the browser. It is a test dependency like Java for the conformance tests:
// missing, the test fails and says how to install it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: run test/install-tools.sh (apt-get install -y chromium)")
	return ""
}

// browse loads a page in headless Chromium: the serialized DOM after load, and a screenshot
// saved as name.png in dir.
func browse(t *testing.T, browser, dir, name, pageURL string, height int) string {
	t.Helper()
	run := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
			"--hide-scrollbars", "--user-data-dir=" + t.TempDir(), fmt.Sprintf("--window-size=1400,%d", height)}
		cmd := exec.CommandContext(ctx, browser, append(append(base, args...), pageURL)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v on %s: %v\n%s", args, pageURL, err, stderr.String())
		}
		return out
	}
	dom := string(run("--dump-dom"))
	shot := filepath.Join(dir, name+".png")
	// A page that no longer renders must not leave the previous run's picture behind.
	if err := os.Remove(shot); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	run("--screenshot=" + shot)
	checkScreenshot(t, shot)
	return dom
}

// checkScreenshot makes sure the browser painted a page rather than a blank or error screen:
// a real page has a dark header bar and a good share of non-white pixels.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	b := img.Bounds()
	r, g, bl, _ := img.At(b.Min.X+5, b.Min.Y+5).RGBA()
	if r>>8 > 0x40 || g>>8 > 0x40 || bl>>8 > 0x60 {
		t.Errorf("%s: the header bar is not painted (pixel %x %x %x)", path, r>>8, g>>8, bl>>8)
	}
	colored := 0
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 < 0xf0 || g>>8 < 0xf0 || bl>>8 < 0xf0 {
				colored++
			}
		}
	}
	if colored < 200 {
		t.Errorf("%s: only %d sampled pixels are not white; the page did not render", path, colored)
	}
}

var (
	tagRE  = regexp.MustCompile(`<(g|path) [^>]*>`)
	attrRE = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
)

// graphInDOM reads the topology graph's nodes (name -> kind) and edges ("from -> to") from the
// DOM, attributes in any order.
func graphInDOM(dom string) (map[string]string, map[string]bool) {
	nodes, edges := map[string]string{}, map[string]bool{}
	for _, tag := range tagRE.FindAllString(dom, -1) {
		a := map[string]string{}
		for _, m := range attrRE.FindAllStringSubmatch(tag, -1) {
			a[m[1]] = unescapeHTML(m[2])
		}
		switch {
		case strings.HasPrefix(a["class"], "node ") && a["data-node"] != "":
			nodes[a["data-node"]] = a["data-kind"]
		case strings.HasPrefix(a["class"], "edge") && a["data-from"] != "":
			edges[a["data-from"]+" -> "+a["data-to"]] = true
		}
	}
	return nodes, edges
}

func unescapeHTML(s string) string {
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#34;", `"`, "&#39;", "'").Replace(s)
}

// wcTopology is a word count as Kafka Streams declares it (KIP-1071): sub-topology 0 reads
// words-in and repartitions by word, sub-topology 1 counts into a store with a changelog.
func wcTopology() *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s0 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s0.SubtopologyID, s0.SourceTopics, s0.RepartitionSinkTopics = "0", []string{"words-in"}, []string{"wc-counts-repartition"}
	s1 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	rep := kmsg.NewTopicInfo()
	rep.Topic, rep.NumPartitions = "wc-counts-repartition", 2
	cl := kmsg.NewTopicInfo()
	cl.Topic = "wc-counts-changelog"
	s1.SubtopologyID, s1.RepartitionSourceTopics, s1.StateChangelogTopics = "1", []kmsg.TopicInfo{rep}, []kmsg.TopicInfo{cl}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s0, s1}
	return &t
}

// wcDescription is the word count's processing graph (KIP-1331).
func wcDescription() kmsg.TopologyDescription {
	node := func(name string, typ int8, succ ...string) kmsg.TopologyDescriptionNode {
		n := kmsg.NewTopologyDescriptionNode()
		n.Name, n.NodeType, n.Successors = name, typ, succ
		return n
	}
	src := node("KSTREAM-SOURCE-0000000000", 1, "KSTREAM-FLATMAPVALUES-0000000001")
	src.SourceTopics = []string{"words-in"}
	flat := node("KSTREAM-FLATMAPVALUES-0000000001", 2, "KSTREAM-KEY-SELECT-0000000002")
	sel := node("KSTREAM-KEY-SELECT-0000000002", 2, "counts-repartition-sink")
	repSink := node("counts-repartition-sink", 3)
	rep := "wc-counts-repartition"
	repSink.SinkTopic = &rep
	repSrc := node("counts-repartition-source", 1, "KSTREAM-AGGREGATE-0000000003")
	repSrc.SourceTopics = []string{rep}
	agg := node("KSTREAM-AGGREGATE-0000000003", 2, "KTABLE-TOSTREAM-0000000004")
	agg.Stores = []string{"counts"}
	toStream := node("KTABLE-TOSTREAM-0000000004", 2, "KSTREAM-SINK-0000000005")
	sink := node("KSTREAM-SINK-0000000005", 3)
	out := "words-out"
	sink.SinkTopic = &out
	s0 := kmsg.NewTopologyDescriptionSubtopology()
	s0.SubtopologyID, s0.Nodes = "0", []kmsg.TopologyDescriptionNode{src, flat, sel, repSink}
	s1 := kmsg.NewTopologyDescriptionSubtopology()
	s1.SubtopologyID, s1.Nodes = "1", []kmsg.TopologyDescriptionNode{repSrc, agg, toStream, sink}
	d := kmsg.NewTopologyDescription()
	d.Subtopologies = []kmsg.TopologyDescriptionSubtopology{s0, s1}
	return d
}

// expectedGraph is what the console must draw for a description, derived here from the
// description itself: every node, every topic read or written, every store; an edge per
// source topic, successor, sink topic and store, and store -> changelog for the changelog
// topics the topology declares (<app>-<store>-changelog).
func expectedGraph(d kmsg.TopologyDescription, changelogs, repartition []string) (map[string]string, map[string]bool) {
	nodes, edges := map[string]string{}, map[string]bool{}
	topic := func(name string) string {
		kind := "topic"
		if slices.Contains(repartition, name) {
			kind = "repartition-topic"
		}
		if slices.Contains(changelogs, name) {
			kind = "changelog-topic"
		}
		nodes["topic:"+name] = kind
		return "topic:" + name
	}
	for _, s := range d.Subtopologies {
		for _, n := range s.Nodes {
			nodes[n.Name] = map[int8]string{1: "source", 2: "processor", 3: "sink"}[n.NodeType]
			for _, tp := range n.SourceTopics {
				edges[topic(tp)+" -> "+n.Name] = true
			}
			for _, succ := range n.Successors {
				edges[n.Name+" -> "+succ] = true
			}
			if n.SinkTopic != nil {
				edges[n.Name+" -> "+topic(*n.SinkTopic)] = true
			}
			for _, st := range n.Stores {
				nodes["store:"+st] = "store"
				edges[n.Name+" -> store:"+st] = true
				for _, c := range changelogs {
					if strings.HasSuffix(c, "-"+st+"-changelog") {
						edges["store:"+st+" -> "+topic(c)] = true
					}
				}
			}
		}
	}
	return nodes, edges
}

// screenshotDir is $CONSOLE_SCREENSHOT_DIR (created if missing) or the test's artifact directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOT_DIR")
	if dir == "" {
		return t.ArtifactDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestConsolePagesInHeadlessChromium(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	shots := screenshotDir(t)
	d := startStreamsDaemon(t, topoPluginKey+"class=memory", "group.streams.num.standby.replicas=1")
	createStreamsTopics(t, d.Addr, 2, "words-in", "words-out")

	// A Streams word count of two members on two processes, with one standby per task.
	app := newStreamsApp(t, d.Addr, "wc", wcTopology)
	live := []*simMember{app.newMember("m1", "proc-a", nil), app.newMember("m2", "proc-b", nil)}
	for _, m := range live {
		m.start()
	}
	defer app.stopAll()
	app.waitConverged(live, 2, 2, 0, 30*time.Second)
	// Only sub-topology 1 has a store, so only its two tasks get a standby.
	waitFor(t, "a standby of each stateful task", func() bool {
		n := 0
		for _, m := range live {
			_, standby, _, _ := m.snapshot()
			n += len(standby)
		}
		return n == 2
	})
	desc := wcDescription()
	if r := pushTopo(t, d.Addr, "wc", "m1", 0, desc); r.ErrorCode != 0 {
		t.Fatalf("push description: %d %v", r.ErrorCode, r.ErrorMessage)
	}

	// A classic consumer group whose member holds words-in-0 and words-in-1, and a simple
	// group that only committed an offset.
	// Its session outlives the test: nothing heartbeats while the browser loads pages.
	jreq := joinReq("console-classic", "", nil)
	jreq.SessionTimeoutMillis = 600000
	jr := join(t, d, 3, jreq)
	wantCode(t, "join", jr.ErrorCode, 0)
	asg := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "words-in", []int32{0, 1}
	asg.Topics = []kmsg.ConsumerMemberAssignmentTopic{at}
	sr := syncG(t, d, 3, "console-classic", jr.MemberID, nil, jr.Generation, map[string]string{jr.MemberID: string(asg.AppendTo(nil))})
	wantCode(t, "sync", sr.ErrorCode, 0)
	adm := kadm.NewClient(d.client())
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "words-in", Partition: 1, At: 7, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctxT(t), "console-simple", os); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	base := "http://" + d.Admin
	dom := browse(t, browser, shots, "groups", base+"/", 1000)
	for _, g := range []string{"wc", "console-classic", "console-simple"} {
		if !strings.Contains(dom, fmt.Sprintf(`<tr data-group="%s">`, g)) {
			t.Errorf("group list lacks %s:\n%s", g, dom)
		}
	}
	if !regexp.MustCompile(`<td>streams</td><td>Stable</td><td class="num"><a [^>]+>1</a>`).MatchString(dom) {
		t.Errorf("summary does not count one Stable streams group:\n%s", dom)
	}
	// The same groups and their rebalances on /metrics, for the Grafana dashboard.
	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^coordinatord_groups\{state="Stable",type="streams"\} 1$`),
		regexp.MustCompile(`(?m)^coordinatord_groups\{state="Stable",type="classic"\} 1$`),
		regexp.MustCompile(`(?m)^coordinatord_groups\{state="Empty",type="classic"\} 1$`),
		regexp.MustCompile(`(?m)^coordinatord_rebalances_total\{type="classic"\} 1$`),
		regexp.MustCompile(`(?m)^coordinatord_rebalances_total\{type="streams"\} [1-9]`),
	} {
		if !want.MatchString(metrics) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	dom = browse(t, browser, shots, "groups-search", base+"/console/?q=CONSOLE&type=classic", 800)
	if rows := regexp.MustCompile(`<tr data-group="`).FindAllString(dom, -1); len(rows) != 2 || strings.Contains(dom, `data-group="wc"`) {
		t.Errorf("search for classic groups matching CONSOLE shows %d rows:\n%s", len(rows), dom)
	}

	dom = browse(t, browser, shots, "group-classic", base+"/console/group?id=console-classic", 900)
	if !strings.Contains(dom, fmt.Sprintf(`<tr data-member="%s">`, jr.MemberID)) || !strings.Contains(dom, `<td class="tasks">words-in-0 words-in-1</td>`) {
		t.Errorf("classic group page lacks its member and its partitions:\n%s", dom)
	}
	if !regexp.MustCompile(`<tr data-epoch="1"><td class="num">1</td><td>[^<]+</td><td>1 member\(s\) joined</td></tr>`).MatchString(dom) {
		t.Errorf("classic group page does not list generation 1 as a rebalance its member joined:\n%s", dom)
	}
	dom = browse(t, browser, shots, "group-simple", base+"/console/group?id=console-simple", 700)
	if !strings.Contains(dom, `<tr data-topic="words-in" data-partition="1"><td>words-in</td><td class="num">1</td><td class="num">7</td>`) {
		t.Errorf("simple group page lacks its committed offset:\n%s", dom)
	}
	if !strings.Contains(dom, `<td class="num lag">—</td>`) || !strings.Contains(dom, "Lag is not shown in standalone mode") {
		t.Errorf("standalone group page does not explain the missing lag:\n%s", dom)
	}

	dom = browse(t, browser, shots, "group-streams", base+"/console/group?id=wc", 2200)
	gotNodes, gotEdges := graphInDOM(dom)
	wantNodes, wantEdges := expectedGraph(desc, []string{"wc-counts-changelog"}, []string{"wc-counts-repartition"})
	if fmt.Sprint(gotNodes) != fmt.Sprint(wantNodes) {
		t.Errorf("topology graph nodes\n got %v\nwant %v", gotNodes, wantNodes)
	}
	if fmt.Sprint(gotEdges) != fmt.Sprint(wantEdges) {
		t.Errorf("topology graph edges\n got %v\nwant %v", gotEdges, wantEdges)
	}
	for _, m := range live {
		active, standby, _, _ := m.snapshot()
		row := regexp.MustCompile(fmt.Sprintf(`<tr data-member="%s"><td>%s</td><td>%s</td>.*?</tr>`, m.id, m.id, m.process)).FindString(dom)
		if row == "" {
			t.Fatalf("streams group page has no row for %s:\n%s", m.id, dom)
		}
		cells := regexp.MustCompile(`<td class="tasks">([^<]*)</td>`).FindAllStringSubmatch(row, -1)
		if len(cells) != 4 || cells[0][1] != taskList(active) || cells[1][1] != taskList(standby) {
			t.Errorf("member %s: row %s, want active %q standby %q", m.id, row, taskList(active), taskList(standby))
		}
	}
	if !strings.Contains(dom, "description of topology epoch 0 from plugin memory") {
		t.Errorf("streams group page does not say the graph comes from the stored description:\n%s", dom)
	}

	dom = browse(t, browser, shots, "shards", base+"/console/shards", 1400)
	if n := len(regexp.MustCompile(`<tr data-shard="group-`).FindAllString(dom, -1)); n != 50 {
		t.Errorf("shards page shows %d group shards, want 50", n)
	}
	if !strings.Contains(dom, `data-shard="meta-0"`) || !strings.Contains(dom, "every shard is loaded and serving") || !strings.Contains(dom, `<dd id="plugin-name">memory</dd>`) {
		t.Errorf("shards page lacks the metadata shard, the health line or the plugin:\n%s", dom)
	}
	t.Logf("screenshots in %s", shots)
}

func taskList(set map[streamsTask]bool) string {
	var ts []streamsTask
	for t := range set {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b streamsTask) int {
		if a.sub != b.sub {
			return strings.Compare(a.sub, b.sub)
		}
		return int(a.part - b.part)
	})
	var out []string
	for _, t := range ts {
		out = append(out, fmt.Sprintf("%s_%d", t.sub, t.part))
	}
	return strings.Join(out, " ")
}

// admin.console.enable=false: no console, and / is not redirected to it.
func TestConsoleCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "admin.console.enable=false")
	for _, p := range []string{"/console/", "/"} {
		resp, err := http.Get("http://" + d.Admin + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s with the console off: %d, want 404", p, resp.StatusCode)
		}
	}
	on := startDaemon(t)
	resp, err := http.Get("http://" + on.Admin + "/console/group?id=" + url.QueryEscape("nope"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown group with the console on: %d, want 404", resp.StatusCode)
	}
}

// A shard that panicked is FAILED: the console names it on the shard page and the group list
// (where its groups are missing, as in ListGroups), and the page of one of its groups says why
// it cannot be shown; the other shards' groups stay visible.
func TestConsoleShowsAFailedShard(t *testing.T) {
	t.Parallel()
	const shards = 4
	d := startHooksDaemon(t, fmt.Sprint("offsets.topic.num.partitions=", shards))
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	victim, bystander, vShard, _ := groupsOnTwoShards(shards)
	for _, g := range []string{victim, bystander} {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 10, LeaderEpoch: -1})
		if r, err := adm.CommitOffsets(ctxT(t), g, offs); err != nil || r.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, r.Error())
		}
	}
	if code, body := httpPost(t, "http://"+d.Admin+"/test/panic?group="+victim); code != 200 || !strings.Contains(body, "FAILED") {
		t.Fatalf("panic hook: HTTP %d %q", code, body)
	}
	base := "http://" + d.Admin + "/console/"
	_, body := httpGet(t, base+"shards")
	if !strings.Contains(body, fmt.Sprintf(`<tr data-shard="group-%d" class="failed">`, vShard)) || !strings.Contains(body, "1 shard(s) not serving") {
		t.Errorf("shard page does not show group shard %d FAILED:\n%s", vShard, body)
	}
	_, body = httpGet(t, base)
	if !strings.Contains(body, fmt.Sprintf("shard %d did not answer", vShard)) || strings.Contains(body, `data-group="`+victim+`"`) ||
		!strings.Contains(body, `data-group="`+bystander+`"`) {
		t.Errorf("group list: the failed shard is not named, or the groups shown are wrong:\n%s", body)
	}
	code, body := httpGet(t, base+"group?id="+url.QueryEscape(victim))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, fmt.Sprintf("shard %d cannot answer", vShard)) {
		t.Errorf("page of a group on the failed shard: %d\n%s", code, body)
	}
}
