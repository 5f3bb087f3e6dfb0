package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/plugin"
	rt "github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
	"github.com/prometheus/client_golang/prometheus"
)

// The layout reads top to bottom: every edge of an acyclic topology points down, and no two
// nodes of a row overlap.
func TestLayoutPointsEdgesDownAndKeepsNodesApart(t *testing.T) {
	g := descriptionGraph(wordCountDescription(), copyTopology(wordCount()))
	g.layout()
	for _, e := range g.edges {
		from, to := g.byID[e.From], g.byID[e.To]
		if to.y <= from.y {
			t.Errorf("edge %s -> %s does not point down (%v -> %v)", e.From, e.To, from.y, to.y)
		}
	}
	for _, a := range g.nodes {
		for _, b := range g.nodes {
			if a != b && a.y == b.y && a.x < b.x+b.w && b.x < a.x+a.w {
				t.Errorf("nodes %s and %s overlap", a.ID, b.ID)
			}
		}
	}
}

// A client may push a description with a cycle; the layout still ends and draws every node.
func TestLayoutOfACycleEnds(t *testing.T) {
	d := &topologyplugin.Description{Subtopologies: []topologyplugin.Subtopology{{ID: "0", Nodes: []topologyplugin.Node{
		{Name: "a", Type: topologyplugin.NodeProcessor, Successors: []string{"b"}},
		{Name: "b", Type: topologyplugin.NodeProcessor, Successors: []string{"c"}},
		{Name: "c", Type: topologyplugin.NodeProcessor, Successors: []string{"a", "missing"}},
	}}}}
	svg := string(descriptionGraph(d, nil).svg())
	nodes, edges := graphOf(svg)
	if len(nodes) != 3 || len(edges) != 3 {
		t.Fatalf("cycle drawn with %d nodes and %d edges, want 3 and 3 (a successor that is not a node is left out)", len(nodes), len(edges))
	}
}

// BenchmarkGroupList renders the first page of the group list with 10 000 groups on 8 shards:
// every shard lists its groups, the console merges, counts, filters and renders 50 rows.
// docs/console.md records the figures.
func BenchmarkGroupList(b *testing.B) {
	for _, q := range []string{"", "q=group-0099"} {
		name := "page=1"
		if q != "" {
			name = "search"
		}
		b.Run("groups=10000/"+name, func(b *testing.B) {
			set := newSet(b, 8)
			for i := 0; i < 10000; i++ {
				id := fmt.Sprintf("group-%05d", i)
				write(b, set, id, classicGroup(id, "t", 3).Record())
			}
			c := New(Options{Groups: set})
			req := httptest.NewRequest(http.MethodGet, "/console/?"+q, nil).WithContext(context.Background())
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				c.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}

// tenThousandGroups is the console's sizing point (issue 16): 10 000 Stable classic groups of 3
// members on 8 shards, and the word-count streams group "wc" with its stored description.
func tenThousandGroups(b *testing.B) (*shard.Set, *plugin.Caller, *prometheus.Registry) {
	set := newSet(b, 8)
	for i := 0; i < 10000; i++ {
		id := fmt.Sprintf("group-%05d", i)
		write(b, set, id, classicGroup(id, "t", 3).Record())
	}
	streamsGroup(b, set, "wc", 1)
	reg := prometheus.NewRegistry()
	caller := memoryCaller(b, reg)
	if err := caller.Set(context.Background(), "wc", 1, wordCountDescription()); err != nil {
		b.Fatal(err)
	}
	return set, caller, reg
}

func benchmarkPage(b *testing.B, c *Console, target string) {
	req := httptest.NewRequest(http.MethodGet, target, nil).WithContext(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}

// BenchmarkGroupPage renders one group's page among 10 000: a classic group (one shard read)
// and the streams group (shard read, one plugin Get, the topology laid out as SVG).
// docs/console.md records the figures.
func BenchmarkGroupPage(b *testing.B) {
	set, caller, reg := tenThousandGroups(b)
	c := New(Options{Groups: set, Topology: caller, Gatherer: reg})
	b.Run("groups=10000/classic", func(b *testing.B) { benchmarkPage(b, c, "/console/group?id=group-04242") })
	b.Run("groups=10000/streams", func(b *testing.B) { benchmarkPage(b, c, "/console/group?id=wc") })
}

// BenchmarkShardsPage renders the shards and plugin page with 10 000 groups on 8 shards: every
// shard counts its groups, the plugin's series are read from the registry.
// docs/console.md records the figures.
func BenchmarkShardsPage(b *testing.B) {
	set, caller, reg := tenThousandGroups(b)
	c := New(Options{Groups: set, Topology: caller, Gatherer: reg,
		Meta: func() rt.State { return rt.StateActive }, MetaLastCompaction: func() time.Time { return time.Time{} },
		LogBytes: func(kind string, id int32) (int64, error) { return 1 << 20, nil }})
	b.Run("groups=10000", func(b *testing.B) { benchmarkPage(b, c, "/console/shards") })
}

// Node, topic and store names come from clients: in the SVG they are text, never markup.
func TestGraphEscapesNames(t *testing.T) {
	evil := `"><script>alert(1)</script>`
	d := &topologyplugin.Description{Subtopologies: []topologyplugin.Subtopology{{ID: evil, Nodes: []topologyplugin.Node{
		{Name: evil, Type: topologyplugin.NodeSource, SourceTopics: []string{evil + "-in"}, Stores: []string{evil}},
	}}}}
	svg := string(descriptionGraph(d, nil).svg())
	if strings.Contains(svg, "<script") || !strings.Contains(svg, "&lt;script&gt;") {
		t.Fatalf("names not escaped in the SVG:\n%s", svg)
	}
}
