package conformance

// Tests of the harness itself, with no server: parsing, the tree view of kmsg messages,
// expectations, normalization and diffs.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseScenario(t *testing.T) {
	f, err := Parse("x.txt", `# comment
scenario join and capture
requires Metadata FindCoordinator
set topic t-${run}
send c1 Metadata v12 corr=-3 client=null
  {"Topics": [
    {"Topic": "${topic}"}]}
recv c1 timeout=2s
capture id Topics.0.TopicID
expect
  {"Topics": [{"ErrorCode": 3}]}
expect@kafka [some-id] why
  {"ThrottleMillis": 0}
diff
  sort Topics by Topic
  Topics.*.ErrorMessage  [msg]  text differs
  Topics[Topic!~^t-]     [other]
call c2 FindCoordinator v0-3 until=5s
raw c3
  0000 0001  # comment
  ff
eof c3
closed c3 timeout=1s
quiet c1 100ms
sleep 10ms
frame c4 key=200 version=0 flexible=true
`)
	if err != nil {
		t.Fatal(err)
	}
	sc := f.Scenarios[0]
	if sc.Name != "join and capture" || len(sc.Requires) != 2 || len(sc.Steps) != 10 {
		t.Fatalf("parsed %+v with %d steps", sc, len(sc.Steps))
	}
	send := sc.Steps[1]
	if send.Op != "send" || *send.Corr != -3 || !send.ClientSet || send.Client != nil || !strings.Contains(send.JSON, "${topic}") {
		t.Fatalf("send step: %+v", send)
	}
	recv := sc.Steps[2]
	if len(recv.Checks) != 4 || recv.Checks[2].Only != Kafka || recv.Checks[2].Tag != "some-id" {
		t.Fatalf("recv checks: %+v", recv.Checks)
	}
	d := recv.Checks[3]
	if len(d.Sorts) != 1 || len(d.Excepts) != 2 || d.Excepts[1].Select == nil || d.Excepts[1].Select.Op != "!~" {
		t.Fatalf("diff: %+v", d)
	}
	if call := sc.Steps[3]; len(call.Versions) != 4 || call.Until.Seconds() != 5 {
		t.Fatalf("call: %+v", call)
	}
	if raw := sc.Steps[4]; string(raw.Hex) != "\x00\x00\x00\x01\xff" {
		t.Fatalf("raw: %x", raw.Hex)
	}
	tags := f.Tags()
	for _, want := range []string{"some-id", "msg", "other"} {
		if len(tags[want]) == 0 {
			t.Errorf("tag %s not listed: %v", want, tags)
		}
	}
}

// A file headed "servers authorizer" runs against the authorizer's pair; others the shared one.
func TestParseServers(t *testing.T) {
	f, err := Parse("x.txt", "# c\nservers authorizer\nscenario a\ncall c1 Metadata v1")
	if err != nil || f.Servers != ServersAuthorizer || pairFor(f) != &srvAuthz {
		t.Fatalf("servers header: %v %+v", err, f)
	}
	if f, err := Parse("x.txt", "servers sasl\nscenario a\nlogin a alice\ncall a Metadata v1"); err != nil || pairFor(f) != &srvSASL || f.Scenarios[0].Steps[0].Var != "alice" {
		t.Fatalf("servers sasl: %v %+v", err, f)
	}
	if f, err := Parse("x.txt", "servers consumer-max-size\nscenario a\ncall c1 Metadata v1"); err != nil || pairFor(f) != &srvConsumerMaxSize {
		t.Fatalf("servers consumer-max-size: %v %+v", err, f)
	}
	if _, err := Parse("x.txt", "servers nope\nscenario a\ncall c1 Metadata v1"); err == nil || !strings.Contains(err.Error(), "consumer-max-size") {
		t.Fatalf("an unknown pair: %v", err)
	}
	if f, _ := Parse("x.txt", "scenario a\ncall c1 Metadata v1"); f.Servers != "" || pairFor(f) != &srv {
		t.Fatalf("no header: %+v", f)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"call c1 Metadata v1":                                                     "before the first scenario",
		"scenario a\ncall c1 Nope v1":                                             "unknown API",
		"scenario a\ncall c1 Metadata 1":                                          "want v<N>",
		"scenario a\nsend c1 Metadata v1-3":                                       "send takes one version",
		"scenario a\nsend c1 Metadata v1\nexpect\n  {}":                           "must follow a call or recv",
		"scenario a\ncall@kafka c1 Metadata v1":                                   "needs a [tag]",
		"scenario a\ncall@zk c1 Metadata v1 [x]":                                  "unknown target",
		"scenario a\ncall@kafka c1 Metadata v1 [x]\ndiff":                         "runs on kafka only",
		"scenario a\ncall c1 Metadata v1\ndiff\n  Topics":                         "needs: <path> [tag]",
		"scenario a\ncall c1 Metadata v1\ndiff\n  Topics why":                     "needs a [tag]",
		"scenario a\nraw c1\n  0g":                                                "bad hex",
		"scenario a\ncall c1 Metadata v1 nope=1":                                  "unknown argument",
		"scenario a":                                                              "has no steps",
		"scenario a\ncall c1 Metadata v1\nscenario a\ncall c1 Metadata v1":        "already defined",
		"scenario a\nmode zk\ncall c1 Metadata v1":                                "mode needs",
		"scenario a\nmode gateway\nmode gateway\ncall c1 Metadata v1":             "mode given twice",
		"servers kerberos\nscenario a\ncall c1 Metadata v1":                       "servers needs one of authorizer, consumer-max-size",
		"servers authorizer\nservers authorizer\nscenario a\ncall c1 Metadata v1": "servers needs one of authorizer, consumer-max-size",
		"scenario a\nservers authorizer\ncall c1 Metadata v1":                     "unknown",
	}
	for text, want := range cases {
		_, err := Parse("x.txt", text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to mention %q", text, err, want)
		}
	}
}

func TestFillAndTree(t *testing.T) {
	j, err := parseJSON(`{"Topics": [{"Topic": null, "TopicID": "AAAAAAAAAAAAAAAAAAAAAQ"}, {"Topic": "a"}], "AllowAutoTopicCreation": true}`)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	if err := fill(req, j); err != nil {
		t.Fatal(err)
	}
	if req.Topics[0].Topic != nil || req.Topics[0].TopicID[15] != 1 || *req.Topics[1].Topic != "a" || !req.AllowAutoTopicCreation {
		t.Fatalf("filled %+v", req)
	}
	tree := render(toTree(req))
	want := `{"Topics":[{"TopicID":"AAAAAAAAAAAAAAAAAAAAAQ","Topic":null},{"TopicID":"AAAAAAAAAAAAAAAAAAAAAA","Topic":"a"}],"AllowAutoTopicCreation":true,"IncludeClusterAuthorizedOperations":false,"IncludeTopicAuthorizedOperations":false}`
	if tree != want {
		t.Fatalf("tree\n%s\nwant\n%s", tree, want)
	}
	j, _ = parseJSON(`{"Topics": [{"Name": "a"}]}`)
	err = fill(kmsg.NewPtrMetadataRequest(), j)
	if err == nil || !strings.Contains(err.Error(), `Topics.0: no field "Name"; fields are TopicID, Topic`) {
		t.Fatalf("unknown field error: %v", err)
	}
	j, _ = parseJSON(`{"ErrorCode": "COORDINATOR_NOT_AVAILABLE"}`)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	if err := fill(resp, j); err != nil || resp.ErrorCode != 15 {
		t.Fatalf("error name: %v %d", err, resp.ErrorCode)
	}
}

func response(t *testing.T, msg any, text string) any {
	t.Helper()
	j, err := parseJSON(text)
	if err != nil {
		t.Fatal(err)
	}
	if err := fill(msg, j); err != nil {
		t.Fatal(err)
	}
	return toTree(msg)
}

func TestMatch(t *testing.T) {
	got := response(t, kmsg.NewPtrMetadataResponse(), `{"Topics": [{"Topic": "a", "ErrorCode": 3}], "ControllerID": 1}`)
	ok := func(want string) []string {
		j, err := parseJSON(want)
		if err != nil {
			t.Fatal(err)
		}
		return match(j, got, "")
	}
	for _, want := range []string{
		`{}`,
		`{"ControllerID": 1}`,
		`{"Topics": [{"ErrorCode": "UNKNOWN_TOPIC_OR_PARTITION"}]}`,
		`{"Topics": [{"Topic": "a", "Partitions": []}], "Brokers": null}`,
	} {
		if m := ok(want); len(m) > 0 {
			t.Errorf("%s: %v", want, m)
		}
	}
	for want, msg := range map[string]string{
		`{"ControllerID": 2}`:                 "ControllerID is 1, want 2",
		`{"Topics": [{}, {}]}`:                "Topics has 1 elements, want 2",
		`{"Topics": [{"ErrorCode": "NONE"}]}`: `Topics.0.ErrorCode is 3 (UNKNOWN_TOPIC_OR_PARTITION), want "NONE"`,
		`{"Nope": 1}`:                         `response has no field "Nope"`,
		`{"Topics": [{"Topic": null}]}`:       `Topics.0.Topic is "a", want null`,
	} {
		m := ok(want)
		if len(m) != 1 || !strings.Contains(m[0], msg) {
			t.Errorf("%s: %v, want %q", want, m, msg)
		}
	}
}

func TestNormalizeAndDiff(t *testing.T) {
	mk := func(node int32, port int32, cluster, member string, throttle int32) any {
		resp := kmsg.NewPtrMetadataResponse()
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = node, "127.0.0.1", port
		resp.Brokers = []kmsg.MetadataResponseBroker{b}
		resp.ClusterID, resp.ControllerID, resp.ThrottleMillis = &cluster, node, throttle
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic = &member
		tp.TopicID = [16]byte{1}
		resp.Topics = []kmsg.MetadataResponseTopic{tp}
		return toTree(resp)
	}
	run := func(name string, node, port int32, cluster, member string) *Run {
		r := &Run{Target: &Target{Name: name, Host: "127.0.0.1", Port: port, NodeID: node, ClusterID: cluster},
			vars: map[string]string{"m": member}, captured: []string{"m"}}
		return r
	}
	a := run(Coordinatord, 7, 9092, "c1", "member-a")
	b := run(Kafka, 1, 19092, "c2", "member-b")
	na := a.normalize(mk(7, 9092, "c1", "member-a", 0))
	nb := b.normalize(mk(1, 19092, "c2", "member-b", 50))
	var diffs []Difference
	diffTrees(na, nb, nil, &diffs)
	if len(diffs) != 0 {
		t.Fatalf("normalized responses differ:\n%s\n%s\n%s", formatDiffs(diffs, "a", "b"), render(na), render(nb))
	}
	if r := render(na); !strings.Contains(r, `"Topic":"${m}"`) || !strings.Contains(r, `"TopicID":"<uuid>"`) || !strings.Contains(r, `"NodeID":"${node}"`) {
		t.Fatalf("normalized: %s", r)
	}

	// A real difference, explained by a wildcard except, an unexplained one, and a stale one.
	nb2 := b.normalize(mk(1, 19092, "c2", "other", 0))
	diffs = nil
	diffTrees(na, nb2, nil, &diffs)
	if len(diffs) != 1 || strings.Join(diffs[0].Path, ".") != "Topics.0.Topic" {
		t.Fatalf("diffs: %+v", diffs)
	}
	ck := &Check{Excepts: []*Except{{Path: []string{"Topics", "*", "Topic"}}, {Path: []string{"Brokers"}}}}
	if rest := explain(ck, diffs); len(rest) != 0 || !ck.Excepts[0].Hit || ck.Excepts[1].Hit {
		t.Fatalf("explain: %+v hits %v %v", rest, ck.Excepts[0].Hit, ck.Excepts[1].Hit)
	}
	sc := &Scenario{File: "x.txt", Steps: []*Step{{Checks: []*Check{ck}}}}
	if stale := Stale(sc); len(stale) != 1 || !strings.Contains(stale[0], "Brokers") {
		t.Fatalf("stale: %v", stale)
	}
}

func TestSelectAndSort(t *testing.T) {
	tree := func(names ...string) any {
		resp := kmsg.NewPtrMetadataResponse()
		for _, n := range names {
			tp := kmsg.NewMetadataResponseTopic()
			tp.Topic = kmsg.StringPtr(n)
			resp.Topics = append(resp.Topics, tp)
		}
		return toTree(resp)
	}
	r := &Run{Target: &Target{}, vars: map[string]string{"run": "42"}}
	ck := &Check{
		Excepts: []*Except{{Path: []string{"Topics"}, Select: &Selector{Field: "Topic", Op: "!~", Value: "^mine-${run}"}}},
		Sorts:   []*Sort{{Path: []string{"Topics"}, Field: "Topic"}},
	}
	a, b := filterSelected(ck, r, r, tree("mine-42-b", "__consumer_offsets", "mine-42-a"), tree("mine-42-a", "mine-42-b"))
	if render(a) != render(b) || !ck.Excepts[0].Hit {
		t.Fatalf("filtered:\n%s\n%s", render(a), render(b))
	}
}

func TestAPITable(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "t.table")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := LoadAPITable(write("0 Produce 0-13 -\n")); err == nil || !strings.Contains(err.Error(), "needs a [tag]") {
		t.Fatalf("untagged difference: %v", err)
	}
	if _, err := LoadAPITable(write("3 Metadata 0-13 0-13 [x]\n")); err == nil || !strings.Contains(err.Error(), "does not differ") {
		t.Fatalf("tag without difference: %v", err)
	}
	tb, err := LoadAPITable(write("0 Produce 0-13 - [data]\n3 Metadata 0-13 0-13\n18 ApiVersions 0-5 0-4 [v5]\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, k := range [][3]int16{{3, 0, 13}, {18, 0, 4}} {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k[0], k[1], k[2]
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	if m := tb.Check(Coordinatord, toTree(resp)); len(m) != 0 {
		t.Fatalf("coordinatord column: %v", m)
	}
	m := tb.Check(Kafka, toTree(resp))
	if len(m) != 2 || !strings.Contains(m[0], "0 Produce: kafka advertises -, the table says 0-13") {
		t.Fatalf("kafka column: %v", m)
	}
}

// In gateway mode coordinatord's Metadata lists the upstream broker at its gateway port plus
// itself, and names its topics with its own run: normalized, it reads as the reference's.
func TestNormalizeGateway(t *testing.T) {
	mk := func(brokers [][2]int32, topic string) any {
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(12)
		for _, b := range brokers {
			mb := kmsg.NewMetadataResponseBroker()
			mb.NodeID, mb.Host, mb.Port = b[0], "127.0.0.1", b[1]
			resp.Brokers = append(resp.Brokers, mb)
		}
		resp.ControllerID = brokers[0][0]
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic = kmsg.StringPtr(topic)
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Leader, p.Replicas = brokers[0][0], []int32{brokers[0][0]}
		tp.Partitions = append(tp.Partitions, p)
		resp.Topics = append(resp.Topics, tp)
		return toTree(resp)
	}
	gw := &Run{Target: &Target{Name: Coordinatord, Host: "127.0.0.1", Port: 9092, NodeID: 7,
		Gateway: true, Upstream: map[int32]int32{1: 9093}, RunSuffix: "g"}, vars: map[string]string{"run": "42g"}}
	kafka := &Run{Target: &Target{Name: Kafka, Host: "127.0.0.1", Port: 19092, NodeID: 1}, vars: map[string]string{"run": "42"}}
	na := gw.normalize(mk([][2]int32{{1, 9093}, {7, 9092}}, "t-42g"))
	nb := kafka.normalize(mk([][2]int32{{1, 19092}}, "t-42"))
	var diffs []Difference
	diffTrees(na, nb, nil, &diffs)
	if len(diffs) != 0 {
		t.Fatalf("normalized responses differ:\n%s\n%s\n%s", formatDiffs(diffs, "gateway", "kafka"), render(na), render(nb))
	}
	if r := render(na); !strings.Contains(r, `"Topic":"t-<run>"`) || strings.Count(r, `"NodeID"`) != 1 {
		t.Fatalf("normalized: %s", r)
	}
	// The other target's names stay as they are: each sees both in one broker.
	if r := render(gw.normalize(mk([][2]int32{{1, 9093}, {7, 9092}}, "t-42"))); !strings.Contains(r, `"Topic":"t-42"`) {
		t.Fatalf("the reference's topic was renamed: %s", r)
	}
	// A broker list without the upstream broker (FindCoordinator has none; an error answer
	// is empty) keeps coordinatord's entry.
	if r := render(gw.normalize(mk([][2]int32{{7, 9092}}, "x"))); !strings.Contains(r, `"NodeID":"${node}"`) {
		t.Fatalf("coordinatord's lone entry was dropped: %s", r)
	}
}
