package console

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	rt "github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newSet starts n group shards on an in-memory log and waits until they serve.
func newSet(tb testing.TB, n int32) *shard.Set {
	tb.Helper()
	set := shard.NewSet(shard.SetOptions{Count: n, Backend: memlog.New()})
	set.Start()
	tb.Cleanup(func() { set.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	set.WaitReady(ctx)
	return set
}

// write appends records to the shard that owns group, as if an operation had produced them.
func write(tb testing.TB, set *shard.Set, group string, recs ...log.Record) {
	tb.Helper()
	_, err := set.For(group).Write(context.Background(), func(*rt.Ctx[*shard.Machine], *shard.Machine) rt.Result {
		return rt.Result{Records: recs}
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func consumerAssignment(topic string, parts ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	t := kmsg.NewConsumerMemberAssignmentTopic()
	t.Topic, t.Partitions = topic, parts
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{t}
	return a.AppendTo(nil)
}

// classicGroup is a Stable consumer group whose members hold partitions of topic.
func classicGroup(id, topic string, members int) *classic.Group {
	proto := "range"
	g := &classic.Group{ID: id, State: classic.Stable, Generation: 3, ProtocolType: "consumer", Protocol: &proto}
	for i := 0; i < members; i++ {
		g.Members = append(g.Members, &classic.Member{ID: fmt.Sprintf("%s-m%d", id, i), ClientID: "client-" + id, ClientHost: "/10.0.0.1",
			SessionTimeoutMs: 45000, RebalanceTimeout: 300000, Protocols: []classic.Protocol{{Name: "range", Metadata: []byte{0, 1}}},
			Assignment: consumerAssignment(topic, int32(i))})
	}
	g.Leader = g.Members[0].ID
	return g
}

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func groupsOn(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr data-group="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestGroupListPaginatesFiltersAndSearches(t *testing.T) {
	set := newSet(t, 3)
	for i := 0; i < 120; i++ {
		id := fmt.Sprintf("orders-%03d", i)
		if i%4 == 0 {
			id = fmt.Sprintf("billing-%03d", i)
		}
		write(t, set, id, classicGroup(id, "t", 1).Record())
	}
	// A group that only committed offsets: a simple group, Empty, with no members.
	write(t, set, "simple-1", offsets.CommitRecord("simple-1", offsets.TopicPartition{Topic: "t", Partition: 0}, offsets.Committed{Offset: 5, LeaderEpoch: -1, ExpireTimestamp: -1}))
	c := New(Options{Groups: set})

	code, body := get(t, c, "/console/")
	if code != 200 {
		t.Fatalf("list: %d", code)
	}
	first := groupsOn(body)
	if len(first) != DefaultPageSize || first[0] != "billing-000" {
		t.Fatalf("page 1 lists %d groups starting %v, want %d starting billing-000", len(first), first[:1], DefaultPageSize)
	}
	if !strings.Contains(body, "1–50 of 121 matching") || !strings.Contains(body, `rel="next" href="/console/?page=2"`) {
		t.Fatalf("page 1 does not say where it is or link to page 2:\n%s", body)
	}
	// The summary counts groups by type and state.
	if !regexp.MustCompile(`<td>classic</td><td>Stable</td><td class="num"><a href="[^"]+">120</a>`).MatchString(body) ||
		!regexp.MustCompile(`<td>classic</td><td>Empty</td><td class="num"><a href="[^"]+">1</a>`).MatchString(body) {
		t.Fatalf("summary does not count 120 Stable and 1 Empty classic groups:\n%s", body)
	}
	_, body = get(t, c, "/console/?page=3")
	if last := groupsOn(body); len(last) != 21 || last[len(last)-1] != "simple-1" {
		t.Fatalf("page 3 lists %d groups ending %v, want 21 ending simple-1", len(last), last[len(last)-1:])
	}
	_, body = get(t, c, "/console/?q=BILLING")
	if got := groupsOn(body); len(got) != 30 || !strings.HasPrefix(got[0], "billing-") {
		t.Fatalf("search billing (case-insensitive) found %d groups, want 30", len(got))
	}
	_, body = get(t, c, "/console/?state=empty")
	if got := groupsOn(body); len(got) != 1 || got[0] != "simple-1" {
		t.Fatalf("state filter Empty: %v", got)
	}
	_, body = get(t, c, "/console/?type=streams")
	if got := groupsOn(body); len(got) != 0 || !strings.Contains(body, "no group matches") {
		t.Fatalf("type filter streams: %v", got)
	}
	// A page past the end shows the last page rather than nothing.
	_, body = get(t, c, "/console/?page=99")
	if got := groupsOn(body); len(got) != 21 {
		t.Fatalf("page 99 lists %d groups, want the last page's 21", len(got))
	}
}

// A group id is data, never markup: one made of HTML is shown escaped everywhere.
func TestGroupIDsAreEscaped(t *testing.T) {
	set := newSet(t, 1)
	id := `<script>alert("x")</script>`
	write(t, set, id, classicGroup(id, "t", 1).Record())
	c := New(Options{Groups: set})
	for _, target := range []string{"/console/", "/console/group?id=" + urlEscape(id)} {
		code, body := get(t, c, target)
		if code != 200 || strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;") {
			t.Fatalf("%s: %d, group id not escaped:\n%s", target, code, body)
		}
	}
}

// Every group's link on the list opens that group's page, whatever characters its id holds:
// a query separator, a fragment mark, a plus, a space, a percent sign, non-ASCII letters, or
// none at all.
func TestGroupLinksOpenTheirGroup(t *testing.T) {
	set := newSet(t, 1)
	ids := []string{"a&b=c", "#frag", "a b+c", "%41", "グループ", "x/y?z"}
	for _, id := range ids {
		write(t, set, id, classicGroup(id, "t", 1).Record())
	}
	// The group "": offsets committed with the empty group id, which Kafka accepts.
	write(t, set, "", offsets.CommitRecord("", offsets.TopicPartition{Topic: "t"}, offsets.Committed{Offset: 1, LeaderEpoch: -1, ExpireTimestamp: -1}))
	ids = append(ids, "")
	c := New(Options{Groups: set})
	_, list := get(t, c, "/console/")
	links := regexp.MustCompile(`<tr data-group="([^"]*)"><td><a href="([^"]+)">`).FindAllStringSubmatch(list, -1)
	if len(links) != len(ids) {
		t.Fatalf("the list links %d groups, want %d:\n%s", len(links), len(ids), list)
	}
	title := regexp.MustCompile(`<title>Group (.*) · coordinatord</title>`)
	for _, l := range links {
		id, target := html.UnescapeString(l[1]), html.UnescapeString(l[2])
		code, body := get(t, c, target)
		m := title.FindStringSubmatch(body)
		if code != 200 || m == nil || html.UnescapeString(m[1]) != id {
			t.Errorf("the link of group %q, %s: %d, title %q", id, target, code, m)
		}
	}
}

func urlEscape(s string) string {
	return strings.NewReplacer("<", "%3C", ">", "%3E", `"`, "%22", "/", "%2F", " ", "%20").Replace(s)
}

func TestClassicGroupPageShowsMembersPartitionsAndOffsets(t *testing.T) {
	set := newSet(t, 2)
	write(t, set, "payments", classicGroup("payments", "payments-in", 2).Record(),
		offsets.CommitRecord("payments", offsets.TopicPartition{Topic: "payments-in", Partition: 1}, offsets.Committed{Offset: 42, LeaderEpoch: -1, Metadata: "m", CommitTimestamp: 1_764_000_000_000, ExpireTimestamp: -1}))
	c := New(Options{Groups: set})
	code, body := get(t, c, "/console/group?id=payments")
	if code != 200 {
		t.Fatalf("group page: %d\n%s", code, body)
	}
	for _, want := range []string{
		`<dd id="group-type">classic</dd>`, `state-Stable">Stable`, `<dd>range</dd>`, `<dd>3</dd>`,
		`<tr data-member="payments-m0">`, `<td class="tasks">payments-in-0</td>`,
		`<tr data-member="payments-m1">`, `<td class="tasks">payments-in-1</td>`,
		`<tr data-topic="payments-in" data-partition="1"><td>payments-in</td><td class="num">1</td><td class="num">42</td><td>m</td><td>2025-11-24T16:00:00Z</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("group page lacks %q:\n%s", want, body)
		}
	}
	if code, body := get(t, c, "/console/group?id=nope"); code != 404 || !strings.Contains(body, `no group &#34;nope&#34;`) {
		t.Fatalf("unknown group: %d\n%s", code, body)
	}
	if code, _ := get(t, c, "/console/group"); code != 400 {
		t.Fatalf("no id: %d, want 400", code)
	}
}

// The group page lists the transactions whose staged offsets wait for a marker, oldest
// first, with their age: where an operator finds the producer a RequireStable fetch waits on.
func TestGroupPageListsOpenTransactionsOldestFirst(t *testing.T) {
	set := newSet(t, 2)
	now := time.Now().UnixMilli()
	stage := func(pid int64, part int32, at int64) log.Record {
		return offsets.StageRecord(pid, "eos", offsets.TopicPartition{Topic: "in", Partition: part},
			offsets.Pending{ProducerEpoch: 4, Committed: offsets.Committed{Offset: 9, LeaderEpoch: -1, CommitTimestamp: at, ExpireTimestamp: -1}})
	}
	write(t, set, "eos", classicGroup("eos", "in", 1).Record(),
		stage(11, 0, now-5_000), stage(22, 1, now-3_600_000), stage(22, 2, now-60_000))
	c := New(Options{Groups: set})
	_, body := get(t, c, "/console/group?id=eos")
	rows := regexp.MustCompile(`<tr data-producer-id="(\d+)"><td class="num">\d+</td><td class="num">(\d+)</td><td>[^<]+</td><td class="num age">([^<]+)</td><td class="num">(\d+)</td>`).FindAllStringSubmatch(body, -1)
	if len(rows) != 2 || rows[0][1] != "22" || rows[1][1] != "11" {
		t.Fatalf("open transactions, want producer 22 (oldest) then 11:\n%s", body)
	}
	if rows[0][2] != "4" || rows[0][4] != "2" || rows[1][4] != "1" {
		t.Errorf("epoch/partitions of the rows: %q", rows)
	}
	if age, err := time.ParseDuration(rows[0][3]); err != nil || age < time.Hour || age > time.Hour+time.Minute {
		t.Errorf("age of producer 22's transaction = %q, want about 1h", rows[0][3])
	}

	write(t, set, "quiet", classicGroup("quiet", "in", 1).Record())
	if _, body := get(t, c, "/console/group?id=quiet"); strings.Contains(body, "open-txns") {
		t.Errorf("a group without open transactions shows the table:\n%s", body)
	}
}

// wordCount is the KIP-1071 topology of a word count: sub-topology 0 reads the input and
// repartitions by word, sub-topology 1 counts into a store with a changelog and writes out.
func wordCount() *streams.Topology {
	return &streams.Topology{Epoch: 1, Subtopologies: []streams.Subtopology{
		{ID: "0", SourceTopics: []string{"words-in"}, SourceTopicRegex: []string{}, Changelogs: []streams.TopicInfo{},
			RepartitionSinks: []string{"wc-counts-repartition"}, RepartitionSources: []streams.TopicInfo{}, Copartition: []streams.CopartitionGroup{}},
		{ID: "1", SourceTopics: []string{}, SourceTopicRegex: []string{}, Changelogs: []streams.TopicInfo{{Name: "wc-counts-changelog", Partitions: 2, Configs: []streams.KV{}}},
			RepartitionSinks: []string{}, RepartitionSources: []streams.TopicInfo{{Name: "wc-counts-repartition", Partitions: 2, Configs: []streams.KV{}}}, Copartition: []streams.CopartitionGroup{}},
	}}
}

func wordCountDescription() *topologyplugin.Description {
	out, rep := "words-out", "wc-counts-repartition"
	return &topologyplugin.Description{Subtopologies: []topologyplugin.Subtopology{
		{ID: "0", Nodes: []topologyplugin.Node{
			{Name: "KSTREAM-SOURCE-0000000000", Type: topologyplugin.NodeSource, SourceTopics: []string{"words-in"}, Successors: []string{"KSTREAM-FLATMAPVALUES-0000000001"}},
			{Name: "KSTREAM-FLATMAPVALUES-0000000001", Type: topologyplugin.NodeProcessor, Successors: []string{"KSTREAM-KEY-SELECT-0000000002"}},
			{Name: "KSTREAM-KEY-SELECT-0000000002", Type: topologyplugin.NodeProcessor, Successors: []string{"counts-repartition-sink"}},
			{Name: "counts-repartition-sink", Type: topologyplugin.NodeSink, SinkTopic: &rep},
		}},
		{ID: "1", Nodes: []topologyplugin.Node{
			{Name: "counts-repartition-source", Type: topologyplugin.NodeSource, SourceTopics: []string{rep}, Successors: []string{"KSTREAM-AGGREGATE-0000000003"}},
			{Name: "KSTREAM-AGGREGATE-0000000003", Type: topologyplugin.NodeProcessor, Stores: []string{"counts"}, Successors: []string{"KTABLE-TOSTREAM-0000000004"}},
			{Name: "KTABLE-TOSTREAM-0000000004", Type: topologyplugin.NodeProcessor, Successors: []string{"KSTREAM-SINK-0000000005"}},
			{Name: "KSTREAM-SINK-0000000005", Type: topologyplugin.NodeSink, SinkTopic: &out},
		}},
	}}
}

// streamsGroup writes a Stable word-count group of two members on two processes: m1 runs
// 0_0 and 1_0 with standby 1_1, m2 runs 0_1 and 1_1 with warm-up 1_0.
func streamsGroup(t testing.TB, set *shard.Set, id string, storedEpoch int32) {
	g := &streams.Group{ID: id, StoredDescriptionEpoch: storedEpoch, FailedDescriptionEpoch: -1}
	topo := wordCount()
	recs := []log.Record{streams.GroupMetadataRecord(g, 2, 0, 1, nil), streams.TopologyRecord(id, topo), streams.TargetMetadataRecord(id, 2, 0)}
	tasks := func(ts ...streams.Task) map[streams.Task]int32 {
		m := map[streams.Task]int32{}
		for _, x := range ts {
			m[x] = 2
		}
		return m
	}
	members := []*streams.Member{
		{ID: "m1", ClientID: "wc-client-1", ClientHost: "/10.0.0.1", ProcessID: "proc-a", RebalanceTimeoutMs: 1000, TopologyEpoch: 1, Epoch: 2, PreviousEpoch: 1, State: streams.Stable,
			Assigned: streams.Roles{tasks(streams.Task{Subtopology: "0", Partition: 0}, streams.Task{Subtopology: "1", Partition: 0}), tasks(streams.Task{Subtopology: "1", Partition: 1}), nil}},
		{ID: "m2", ClientID: "wc-client-2", ClientHost: "/10.0.0.2", ProcessID: "proc-b", RebalanceTimeoutMs: 1000, TopologyEpoch: 1, Epoch: 2, PreviousEpoch: 1, State: streams.Stable,
			Assigned: streams.Roles{tasks(streams.Task{Subtopology: "0", Partition: 1}, streams.Task{Subtopology: "1", Partition: 1}), nil, tasks(streams.Task{Subtopology: "1", Partition: 0})}},
	}
	for _, m := range members {
		recs = append(recs, streams.MemberMetadataRecord(id, m), streams.TargetMemberRecord(id, m.ID, m.Assigned), streams.CurrentMemberRecord(id, m))
	}
	write(t, set, id, recs...)
}

func memoryCaller(t testing.TB, reg prometheus.Registerer) *plugin.Caller {
	p, err := plugin.NewMemory(topologyplugin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := plugin.NewCaller(plugin.Options{Plugin: p, Name: "memory"}, reg)
	t.Cleanup(func() { c.Close() })
	return c
}

var (
	nodeRE = regexp.MustCompile(`<g class="node node-[a-z-]+" data-node="([^"]+)" data-kind="([a-z-]+)"`)
	edgeRE = regexp.MustCompile(`<path class="edge[^"]*" data-from="([^"]+)" data-to="([^"]+)"`)
)

func graphOf(body string) (nodes map[string]string, edges map[string]bool) {
	nodes, edges = map[string]string{}, map[string]bool{}
	for _, m := range nodeRE.FindAllStringSubmatch(body, -1) {
		nodes[m[1]] = m[2]
	}
	for _, m := range edgeRE.FindAllStringSubmatch(body, -1) {
		edges[m[1]+" -> "+m[2]] = true
	}
	return nodes, edges
}

func TestStreamsGroupPageDrawsTheStoredDescription(t *testing.T) {
	set := newSet(t, 2)
	streamsGroup(t, set, "wc", 1)
	reg := prometheus.NewRegistry()
	caller := memoryCaller(t, reg)
	if err := caller.Set(context.Background(), "wc", 1, wordCountDescription()); err != nil {
		t.Fatal(err)
	}
	c := New(Options{Groups: set, Topology: caller, Gatherer: reg})
	code, body := get(t, c, "/console/group?id=wc")
	if code != 200 {
		t.Fatalf("group page: %d\n%s", code, body)
	}
	nodes, edges := graphOf(body)
	wantNodes := map[string]string{
		"topic:words-in": kindTopic, "topic:words-out": kindTopic, "topic:wc-counts-repartition": kindRepartition, "topic:wc-counts-changelog": kindChangelog,
		"store:counts": kindStore,
	}
	for _, s := range wordCountDescription().Subtopologies {
		for _, n := range s.Nodes {
			wantNodes[n.Name] = map[topologyplugin.NodeType]string{1: kindSource, 2: kindProcessor, 3: kindSink}[n.Type]
		}
	}
	if fmt.Sprint(nodes) != fmt.Sprint(wantNodes) {
		t.Fatalf("graph nodes\n got %v\nwant %v", nodes, wantNodes)
	}
	wantEdges := map[string]bool{
		"topic:words-in -> KSTREAM-SOURCE-0000000000": true, "KSTREAM-SOURCE-0000000000 -> KSTREAM-FLATMAPVALUES-0000000001": true,
		"KSTREAM-FLATMAPVALUES-0000000001 -> KSTREAM-KEY-SELECT-0000000002": true, "KSTREAM-KEY-SELECT-0000000002 -> counts-repartition-sink": true,
		"counts-repartition-sink -> topic:wc-counts-repartition": true, "topic:wc-counts-repartition -> counts-repartition-source": true,
		"counts-repartition-source -> KSTREAM-AGGREGATE-0000000003": true, "KSTREAM-AGGREGATE-0000000003 -> store:counts": true,
		"store:counts -> topic:wc-counts-changelog": true, "KSTREAM-AGGREGATE-0000000003 -> KTABLE-TOSTREAM-0000000004": true,
		"KTABLE-TOSTREAM-0000000004 -> KSTREAM-SINK-0000000005": true, "KSTREAM-SINK-0000000005 -> topic:words-out": true,
	}
	if fmt.Sprint(edges) != fmt.Sprint(wantEdges) {
		t.Fatalf("graph edges\n got %v\nwant %v", edges, wantEdges)
	}
	for _, want := range []string{
		`<dd id="group-type">streams</dd>`, `description of topology epoch 1 from plugin memory`,
		`data-subtopology="0"`, `data-subtopology="1"`,
		// Tasks per member, with standbys and warm-ups.
		`<tr data-member="m1"><td>m1</td><td>proc-a</td><td>wc-client-1</td><td>/10.0.0.1</td><td class="num">2</td><td>STABLE</td><td class="tasks">0_0 1_0</td><td class="tasks">1_1</td><td class="tasks"></td>`,
		`<tr data-member="m2"><td>m2</td><td>proc-b</td><td>wc-client-2</td><td>/10.0.0.2</td><td class="num">2</td><td>STABLE</td><td class="tasks">0_1 1_1</td><td class="tasks"></td><td class="tasks">1_0</td>`,
		// Who runs each task of a sub-topology.
		`<tr data-task="1_0"><td>1_0</td><td>m1 (proc-a)</td><td></td><td>m2 (proc-b)</td></tr>`,
		`<tr data-task="1_1"><td>1_1</td><td>m2 (proc-b)</td><td>m1 (proc-a)</td><td></td></tr>`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("streams group page lacks %q:\n%s", want, body)
		}
	}
}

// Without a stored description the graph still shows the sub-topologies and their topics from
// the topology the members declared, and says why it is coarse.
func TestStreamsGroupPageWithoutDescriptionDrawsSubtopologies(t *testing.T) {
	set := newSet(t, 1)
	streamsGroup(t, set, "wc", -1)
	c := New(Options{Groups: set, Topology: memoryCaller(t, nil)})
	_, body := get(t, c, "/console/group?id=wc")
	nodes, edges := graphOf(body)
	want := map[string]string{"sub:0": kindSubtopology, "sub:1": kindSubtopology, "topic:words-in": kindTopic,
		"topic:wc-counts-repartition": kindRepartition, "topic:wc-counts-changelog": kindChangelog}
	if fmt.Sprint(nodes) != fmt.Sprint(want) {
		t.Fatalf("nodes %v, want %v", nodes, want)
	}
	for _, e := range []string{"topic:words-in -> sub:0", "sub:0 -> topic:wc-counts-repartition", "topic:wc-counts-repartition -> sub:1", "sub:1 -> topic:wc-counts-changelog"} {
		if !edges[e] {
			t.Fatalf("no edge %s in %v", e, edges)
		}
	}
	if !strings.Contains(body, "no description of topology epoch 1 is stored yet") {
		t.Fatalf("page does not say why the graph is coarse:\n%s", body)
	}
}

func TestConsoleIsReadOnly(t *testing.T) {
	c := New(Options{Groups: newSet(t, 1)})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest(m, "/console/group?id=x", strings.NewReader("x")))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Fatalf("%s: %d, want 405", m, rec.Code)
		}
	}
	if code, body := get(t, c, "/console/static/style.css"); code != 200 || !strings.Contains(body, "svg.topology") {
		t.Fatalf("embedded stylesheet: %d", code)
	}
}

func TestShardsPageShowsHealthAndPlugin(t *testing.T) {
	set := newSet(t, 2)
	write(t, set, "a", classicGroup("a", "t", 1).Record())
	reg := prometheus.NewRegistry()
	caller := memoryCaller(t, reg)
	caller.Set(context.Background(), "g", 1, wordCountDescription())
	c := New(Options{Groups: set, Topology: caller, Gatherer: reg,
		Meta: func() rt.State { return rt.StateFailed }, MetaLastCompaction: func() time.Time { return time.Time{} },
		LogBytes: func(kind string, id int32) (int64, error) { return 2048 + int64(id), nil }})
	code, body := get(t, c, "/console/shards")
	if code != 200 {
		t.Fatalf("shards page: %d", code)
	}
	aShard := shard.For("a", 2)
	for _, want := range []string{
		`<span class="error">1 shard(s) not serving</span>`,
		`<tr data-shard="meta-0" class="failed"><td>meta</td><td class="num">0</td><td><span class="state state-failed">failed</span></td><td class="num">-</td><td class="num">2.0 KiB</td><td>none since start</td>`,
		fmt.Sprintf(`<tr data-shard="group-%d"><td>group</td><td class="num">%d</td><td><span class="state state-active">active</span></td><td class="num">1</td>`, aShard, aShard),
		`<dd id="plugin-name">memory</dd>`, `<td>set_total</td><td>result=success</td><td class="num">1</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("shards page lacks %q:\n%s", want, body)
		}
	}
	c = New(Options{Groups: set})
	if _, body := get(t, c, "/console/shards"); !strings.Contains(body, "no topology description plugin is configured") {
		t.Fatalf("without a plugin the page must say so:\n%s", body)
	}
}

// A shard that cannot answer is named on the list instead of hanging or hiding it.
func TestGroupListNamesAShardThatCannotAnswer(t *testing.T) {
	set := newSet(t, 2)
	write(t, set, "a", classicGroup("a", "t", 1).Record())
	other := 1 - shard.For("a", 2)
	set.Shard(other).Close(context.Background())
	_, body := get(t, New(Options{Groups: set}), "/console/")
	if !strings.Contains(body, fmt.Sprintf("shard %d did not answer", other)) || len(groupsOn(body)) != 1 {
		t.Fatalf("closed shard not reported, or the other shard's group missing:\n%s", body)
	}
}

// KIP-848 consumer groups are listed beside classic and streams groups, with their members
// counted, as kafka-groups.sh --list shows them.
func TestGroupListShowsConsumerGroups(t *testing.T) {
	set := newSet(t, 2)
	write(t, set, "kip848", consumer.GroupMetadataRecord("kip848", 2, 0),
		consumer.MemberMetadataRecord("kip848", &consumer.Member{ID: "m1", ClientID: "c1"}),
		consumer.MemberMetadataRecord("kip848", &consumer.Member{ID: "m2", ClientID: "c2"}))
	c := New(Options{Groups: set})
	_, body := get(t, c, "/console/?type=consumer")
	if got := groupsOn(body); len(got) != 1 || got[0] != "kip848" {
		t.Fatalf("type filter consumer lists %v, want kip848:\n%s", got, body)
	}
	if !regexp.MustCompile(`(?s)<tr data-group="kip848".*?<td class="num">2</td>`).MatchString(body) {
		t.Fatalf("the consumer group's row does not count its 2 members:\n%s", body)
	}
}

// The group page lists the group's recent rebalances, newest first, with their cause.
func TestGroupPageListsRecentRebalances(t *testing.T) {
	set := newSet(t, 1)
	g := classicGroup("orders", "orders-in", 1)
	for gen, members := range []int{1, 1, 3, 2} {
		g = classicGroup("orders", "orders-in", members)
		g.Generation = int32(gen)
		write(t, set, "orders", g.Record())
	}
	c := New(Options{Groups: set})
	code, body := get(t, c, "/console/group?id=orders")
	if code != 200 {
		t.Fatalf("group page: %d\n%s", code, body)
	}
	rows := regexp.MustCompile(`<tr data-epoch="(\d+)"><td class="num">\d+</td><td>[^<]+</td><td>([^<]*)</td>`).FindAllStringSubmatch(body, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[1]+": "+r[2])
	}
	want := []string{"3: 1 member(s) left", "2: 2 member(s) joined", "1: 1 member(s) joined"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("recent rebalances %q, want %q:\n%s", got, want, body)
	}
	if _, body := get(t, c, "/console/group?id=payments"); strings.Contains(body, `data-epoch=`) {
		t.Fatalf("an unknown group shows rebalances:\n%s", body)
	}
}

func committedGroup(t *testing.T, set *shard.Set) {
	write(t, set, "payments", classicGroup("payments", "payments-in", 1).Record(),
		offsets.CommitRecord("payments", offsets.TopicPartition{Topic: "payments-in", Partition: 0}, offsets.Committed{Offset: 42, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1}),
		offsets.CommitRecord("payments", offsets.TopicPartition{Topic: "payments-in", Partition: 1}, offsets.Committed{Offset: 7, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1}))
}

var lagCells = regexp.MustCompile(`data-partition="(\d)">.*?<td class="num log-end">([^<]*)</td><td class="num lag">([^<]*)</td>`)

func lagsOn(body string) string {
	var out []string
	for _, m := range lagCells.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1]+":"+m[2]+"/"+m[3])
	}
	return strings.Join(out, " ")
}

// Standalone mode has no log end offsets: the lag column says "—" and the page says why.
func TestLagInStandaloneModeIsExplained(t *testing.T) {
	set := newSet(t, 1)
	committedGroup(t, set)
	_, body := get(t, New(Options{Groups: set}), "/console/group?id=payments")
	if got := lagsOn(body); got != "0:—/— 1:—/—" {
		t.Fatalf("lag cells %q:\n%s", got, body)
	}
	if !strings.Contains(body, `id="lag-note">Lag is not shown in standalone mode`) {
		t.Fatalf("no note on why lag is missing:\n%s", body)
	}
}

// In gateway mode the lag is the upstream's log end offset minus the committed offset; a
// partition the upstream did not answer for shows no lag.
func TestLagFromLogEnd(t *testing.T) {
	set := newSet(t, 1)
	committedGroup(t, set)
	var asked map[string][]int32
	c := New(Options{Groups: set, LogEnd: func(_ context.Context, parts map[string][]int32) (map[string]map[int32]int64, error) {
		asked = parts
		return map[string]map[int32]int64{"payments-in": {0: 50}}, nil
	}})
	code, body := get(t, c, "/console/group?id=payments")
	if code != 200 {
		t.Fatalf("group page: %d\n%s", code, body)
	}
	if got := lagsOn(body); got != "0:50/8 1:—/—" {
		t.Fatalf("lag cells %q, want partition 0 at 50 with lag 8 and partition 1 unknown:\n%s", got, body)
	}
	if len(asked["payments-in"]) != 2 {
		t.Fatalf("LogEnd asked for %v, want both committed partitions", asked)
	}
}

// An upstream that does not answer in time, or fails, leaves the lag unknown with the reason;
// the page is still served.
func TestLagWithASlowOrFailingUpstream(t *testing.T) {
	set := newSet(t, 1)
	committedGroup(t, set)
	stuck := make(chan struct{})
	defer close(stuck)
	slow := New(Options{Groups: set, LogEndTimeout: 20 * time.Millisecond, LogEnd: func(context.Context, map[string][]int32) (map[string]map[int32]int64, error) {
		<-stuck // ignores its context: the page must not wait for it
		return nil, nil
	}})
	code, body := get(t, slow, "/console/group?id=payments")
	if code != 200 || lagsOn(body) != "0:—/— 1:—/—" || !strings.Contains(body, "log end offsets are unknown (context deadline exceeded)") {
		t.Fatalf("slow upstream: %d %q\n%s", code, lagsOn(body), body)
	}
	failing := New(Options{Groups: set, LogEnd: func(context.Context, map[string][]int32) (map[string]map[int32]int64, error) {
		return nil, fmt.Errorf("upstream unreachable")
	}})
	if _, body := get(t, failing, "/console/group?id=payments"); !strings.Contains(body, "log end offsets are unknown (upstream unreachable)") {
		t.Fatalf("failing upstream:\n%s", body)
	}
}

// A KIP-848 consumer group has a page of its own: epochs and members with their epochs.
func TestConsumerGroupPage(t *testing.T) {
	set := newSet(t, 1)
	write(t, set, "kip848", consumer.GroupMetadataRecord("kip848", 2, 0),
		consumer.MemberMetadataRecord("kip848", &consumer.Member{ID: "m1", ClientID: "c1", ClientHost: "/10.0.0.2"}))
	code, body := get(t, New(Options{Groups: set}), "/console/group?id=kip848")
	if code != 200 {
		t.Fatalf("consumer group page: %d\n%s", code, body)
	}
	for _, want := range []string{`<dd id="group-type">consumer</dd>`, `<dd id="group-epoch">2</dd>`, `<tr data-member="m1"><td>m1</td><td></td><td>c1</td><td>/10.0.0.2</td>`} {
		if !strings.Contains(body, want) {
			t.Fatalf("consumer group page lacks %q:\n%s", want, body)
		}
	}
}

// With several nodes sharing the shards (log.backend=kafka), a shard another node serves is not
// a failure: the list names the nodes serving the others' shards instead of an error line per
// shard ("shard FAILED: shard is owned by another node", 33 of them on a node of three), and
// a group on such a shard names its node, with 421 Misdirected Request.
func TestShardsOtherNodesServeAreNamedNotFailed(t *testing.T) {
	set := newSet(t, 4)
	write(t, set, "a", classicGroup("a", "t", 1).Record())
	var elsewhere []int32
	var onElsewhere string
	for i := int32(0); i < 4; i++ {
		if i != shard.For("a", 4) {
			set.Disown(context.Background(), i)
			elsewhere = append(elsewhere, i)
		}
	}
	for i := 0; onElsewhere == ""; i++ {
		if g := fmt.Sprintf("g%d", i); shard.For(g, 4) == elsewhere[0] {
			onElsewhere = g
		}
	}
	owner := func(s int32) (string, bool) {
		if s == elsewhere[2] {
			return "", false // handed over
		}
		return fmt.Sprintf("node %d (coord-%d:9092)", 1000+s, s), true
	}
	c := New(Options{Groups: set, ShardOwner: owner})
	_, body := get(t, c, "/console/")
	if strings.Contains(body, "did not answer") || len(groupsOn(body)) != 1 || !strings.Contains(body, `<p class="note" id="elsewhere">The groups of 3 shard(s) are served by other coordinatord nodes`) {
		t.Fatalf("the list does not name the other nodes' shards as such:\n%s", body)
	}
	for _, s := range elsewhere[:2] {
		if n, _ := owner(s); !strings.Contains(body, n+": 1") {
			t.Fatalf("the list does not name %s:\n%s", n, body)
		}
	}
	if !strings.Contains(body, "no node yet (handed over): 1") {
		t.Fatalf("the handed-over shard is not named:\n%s", body)
	}
	_, body = get(t, c, "/console/shards")
	if n, _ := owner(elsewhere[0]); !strings.Contains(body, "every shard is loaded and serving; 3 shard(s) served by other coordinatord nodes") ||
		!strings.Contains(body, fmt.Sprintf(`<tr data-shard="group-%d"><td>group</td><td class="num">%d</td><td><span class="state state-not owned">not owned</span> <span class="note">(%s)</span>`, elsewhere[0], elsewhere[0], n)) {
		t.Fatalf("the shards page counts the other nodes' shards as not serving, or does not name their node:\n%s", body)
	}
	code, body := get(t, c, "/console/group?id="+onElsewhere)
	if n, _ := owner(elsewhere[0]); code != http.StatusMisdirectedRequest || !strings.Contains(body, n+" serves: see that node&#39;s console") {
		t.Fatalf("group on another node's shard: %d\n%s", code, body)
	}
}
