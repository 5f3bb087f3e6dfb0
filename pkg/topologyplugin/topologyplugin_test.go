package topologyplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Spec §8: a returned error wrapping PermanentError is permanent; any other error, including
// context errors, is transient; the outermost marker decides.
func TestSpec8ErrorKinds(t *testing.T) {
	cause := io.ErrUnexpectedEOF
	cases := []struct {
		name string
		err  error
		want Kind
		msg  string
	}{
		{"permanent", Permanent("too large"), KindPermanent, "too large"},
		{"permanentf wraps", Permanentf("reject: %w", cause), KindPermanent, "reject: unexpected EOF"},
		{"wrapped permanent", fmt.Errorf("store: %w", Permanent("too large")), KindPermanent, "store: too large"},
		{"mark permanent", MarkPermanent(cause), KindPermanent, "unexpected EOF"},
		{"transient", Transient("backend offline"), KindTransient, "backend offline"},
		{"unmarked", errors.New("boom"), KindTransient, "boom"},
		{"deadline", context.DeadlineExceeded, KindTransient, "context deadline exceeded"},
		{"transient outside permanent", MarkTransient(Permanent("x")), KindTransient, "x"},
		{"permanent outside transient", &PermanentError{Reason: "y", Err: Transient("z")}, KindPermanent, "y"},
		{"empty permanent", &PermanentError{}, KindPermanent, "permanent failure"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KindOf(tc.err); got != tc.want {
				t.Fatalf("KindOf = %v, want %v", got, tc.want)
			}
			if IsPermanent(tc.err) != (tc.want == KindPermanent) || IsTransient(tc.err) != (tc.want == KindTransient) {
				t.Fatal("IsPermanent/IsTransient disagree with KindOf")
			}
			if tc.err.Error() != tc.msg {
				t.Fatalf("message %q, want %q", tc.err.Error(), tc.msg)
			}
		})
	}
	if IsPermanent(nil) || IsTransient(nil) {
		t.Fatal("nil is neither permanent nor transient")
	}
	if MarkPermanent(nil) != nil || MarkTransient(nil) != nil {
		t.Fatal("marking nil must stay nil")
	}
	var pe *PermanentError
	if !errors.As(fmt.Errorf("x: %w", Permanentf("r: %w", cause)), &pe) || !errors.Is(pe, cause) {
		t.Fatal("errors.As/Is must reach the permanent error and its cause")
	}
}

func sample() *Description {
	sink := "out"
	return &Description{
		Subtopologies: []Subtopology{{
			ID: "0",
			Nodes: []Node{
				{Name: "src", Type: NodeSource, SourceTopics: []string{"in", "in2"}, Successors: []string{"proc"}},
				{Name: "proc", Type: NodeProcessor, Stores: []string{"store-" + strings.Repeat("x", 200)}, Successors: []string{"sink"}},
				{Name: "sink", Type: NodeSink, SinkTopic: &sink},
				{Name: "dyn", Type: NodeSink},
			},
		}, {ID: "1"}},
		GlobalStores: []GlobalStore{{
			Source:    Node{Name: "gsrc", Type: NodeSource, SourceTopics: []string{"global"}, Successors: []string{"gproc"}},
			Processor: Node{Name: "gproc", Type: NodeProcessor, Stores: []string{"gstore"}},
		}},
	}
}

func toKmsg(d *Description) kmsg.TopologyDescription {
	node := func(n Node) kmsg.TopologyDescriptionNode {
		return kmsg.TopologyDescriptionNode{Name: n.Name, NodeType: int8(n.Type), SourceTopics: n.SourceTopics,
			SinkTopic: n.SinkTopic, Stores: n.Stores, Successors: n.Successors}
	}
	var out kmsg.TopologyDescription
	for _, s := range d.Subtopologies {
		ks := kmsg.TopologyDescriptionSubtopology{SubtopologyID: s.ID}
		for _, n := range s.Nodes {
			ks.Nodes = append(ks.Nodes, node(n))
		}
		out.Subtopologies = append(out.Subtopologies, ks)
	}
	for _, g := range d.GlobalStores {
		out.GlobalStores = append(out.GlobalStores, kmsg.TopologyDescriptionGlobalStore{Source: node(g.Source), Processor: node(g.Processor)})
	}
	return out
}

// Spec §7.3: a description's size is the encoded length of the kmsg struct.
func TestSpec7_3EncodedSizeMatchesWire(t *testing.T) {
	empty := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateRequest()
	base := len(empty.AppendTo(nil)) - (&Description{}).EncodedSize()
	for _, d := range []*Description{{}, sample(), {Subtopologies: make([]Subtopology, 200)}} {
		req := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateRequest()
		req.TopologyDescription = toKmsg(d)
		if got, want := d.EncodedSize(), len(req.AppendTo(nil))-base; got != want {
			t.Fatalf("EncodedSize %d, wire %d", got, want)
		}
	}
	if (*Description)(nil).EncodedSize() != 0 {
		t.Fatal("nil size")
	}
}

func TestDescriptionJSONRoundTripAndClone(t *testing.T) {
	d := sample()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"subtopologyId":"0"`, `"nodeType":1`, `"sourceTopics":["in","in2"]`, `"sinkTopic":"out"`, `"sinkTopic":null`, `"stores":[]`, `"globalStores":[{"source":`, `"nodes":[]`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("JSON lacks %s: %s", field, b)
		}
	}
	var back Description
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !Equal(&back, d) {
		t.Fatalf("round trip changed the description:\n%s", b)
	}
	c := d.Clone()
	*c.Subtopologies[0].Nodes[2].SinkTopic = "changed"
	c.Subtopologies[0].Nodes[0].SourceTopics[0] = "changed"
	c.GlobalStores[0].Processor.Stores[0] = "changed"
	if !Equal(d, sample()) {
		t.Fatal("Clone shares memory with the original")
	}
	if Equal(c, d) || Equal(d, nil) || !Equal(nil, nil) {
		t.Fatal("Equal is wrong")
	}
	if (*Description)(nil).Clone() != nil {
		t.Fatal("clone of nil")
	}
}

func TestConfigGetters(t *testing.T) {
	c := Config{"n": " 5 ", "bad": "x", "ms": "250", "b": "TRUE"}
	if n, err := c.Int("n", 1, 0, 10); n != 5 || err != nil {
		t.Fatal(n, err)
	}
	if n, err := c.Int("missing", 7, 0, 10); n != 7 || err != nil {
		t.Fatal(n, err)
	}
	var ce *ConfigError
	if _, err := c.Int("bad", 1, 0, 10); !errors.As(err, &ce) || ce.Key != "bad" {
		t.Fatal(err)
	}
	if _, err := c.Int("n", 1, 6, 10); err == nil {
		t.Fatal("out of range accepted")
	}
	if d, err := c.Millis("ms", time.Second, time.Millisecond); d != 250*time.Millisecond || err != nil {
		t.Fatal(d, err)
	}
	if b, err := c.Bool("b", false); !b || err != nil {
		t.Fatal(b, err)
	}
	if _, err := c.Bool("bad", false); err == nil {
		t.Fatal("bad bool accepted")
	}
	if err := c.Check("n", "bad", "ms", "b"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check("n", "ms"); !errors.As(err, &ce) || ce.Key != "b" {
		t.Fatalf("Check must name the first unknown key: %v", err)
	}
}

func TestRegisterRejectsBadNames(t *testing.T) {
	f := func(Config) (Plugin, error) { return nil, nil }
	for _, name := range []string{"", "class", "a.b", "x y"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			Register(name, f)
		}()
	}
	if _, done := Registered()["topologyplugin-test"]; !done { // -count=N runs this again
		Register("topologyplugin-test", f)
	}
	if _, ok := Registered()["topologyplugin-test"]; !ok {
		t.Fatal("not registered")
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate Register did not panic")
		}
	}()
	Register("topologyplugin-test", f)
}

// Spec §3.1 step 13: node types must be SOURCE, PROCESSOR or SINK; a global store is a source
// plus a processor. Messages are Kafka's.
func TestSpec3_1ValidateDescription(t *testing.T) {
	if err := sample().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := sample()
	bad.Subtopologies[0].Nodes[1].Type = 9
	if err := bad.Validate(); err == nil || err.Error() != "Unknown topology node type: 9" {
		t.Fatalf("got %v", err)
	}
	bad = sample()
	bad.GlobalStores[0].Source.Type = NodeProcessor
	if err := bad.Validate(); err == nil || err.Error() != "Global store must be composed of a source and a processor node." {
		t.Fatalf("got %v", err)
	}
	if err := (*Description)(nil).Validate(); err == nil {
		t.Fatal("nil must be invalid")
	}
}
