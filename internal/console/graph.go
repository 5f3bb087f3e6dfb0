package console

import (
	"fmt"
	"html/template"
	"sort"
	"strings"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// The topology graph: nodes and edges built from a group's KIP-1331 description (processing
// nodes, stores, topics) or, without one, from the KIP-1071 topology its members declared
// (sub-topologies and their topics), laid out in layers top to bottom and drawn as inline SVG
// on the server, so the page needs no script.

// Node kinds; they are the CSS classes and data-kind values the page and its tests use.
const (
	kindSource      = "source"
	kindProcessor   = "processor"
	kindSink        = "sink"
	kindStore       = "store"
	kindTopic       = "topic"
	kindRepartition = "repartition-topic"
	kindChangelog   = "changelog-topic"
	kindSubtopology = "subtopology"
)

type gnode struct {
	ID, Label, Kind string
	Cluster         string // sub-topology id, "global" for global stores, "" for topics
	rank, order     int
	x, y, w         float64
}

type gedge struct {
	From, To string
	Store    bool // a processor's store (drawn dashed, no arrow)
}

type graph struct {
	nodes    []*gnode
	byID     map[string]*gnode
	edges    []gedge
	seen     map[[2]string]bool
	clusters []string
}

func newGraph() *graph { return &graph{byID: map[string]*gnode{}, seen: map[[2]string]bool{}} }

func (g *graph) node(id, label, kind, cluster string) *gnode {
	if n := g.byID[id]; n != nil {
		return n
	}
	n := &gnode{ID: id, Label: label, Kind: kind, Cluster: cluster}
	g.nodes = append(g.nodes, n)
	g.byID[id] = n
	if cluster != "" && !contains(g.clusters, cluster) {
		g.clusters = append(g.clusters, cluster)
	}
	return n
}

func (g *graph) edge(from, to string, store bool) {
	if from == to || g.seen[[2]string{from, to}] {
		return
	}
	g.seen[[2]string{from, to}] = true
	g.edges = append(g.edges, gedge{From: from, To: to, Store: store})
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// topicKinds classifies the topics the KIP-1071 topology names as internal.
func topicKinds(subs []subtopologyView) map[string]string {
	k := map[string]string{}
	for _, s := range subs {
		for _, t := range s.RepartitionSinks {
			k[t] = kindRepartition
		}
		for _, t := range s.RepartitionSources {
			k[t.Name] = kindRepartition
		}
		for _, t := range s.Changelogs {
			k[t.Name] = kindChangelog
		}
	}
	return k
}

func topicID(name string) string { return "topic:" + name }

func (g *graph) topic(name string, kinds map[string]string) string {
	kind := kinds[name]
	if kind == "" {
		kind = kindTopic
	}
	g.node(topicID(name), name, kind, "")
	return topicID(name)
}

// descriptionGraph builds the graph of a description; subs (may be empty) name the internal
// topics and the changelog topic of each store.
func descriptionGraph(d *topologyplugin.Description, subs []subtopologyView) *graph {
	g := newGraph()
	kinds := topicKinds(subs)
	changelogs := map[string][]topicView{} // sub-topology -> its changelog topics
	for _, s := range subs {
		changelogs[s.ID] = s.Changelogs
	}
	// Kafka Streams names a store's changelog <application.id>-<store>-changelog.
	changelogOf := func(cluster, store string) string {
		for _, c := range changelogs[cluster] {
			if strings.HasSuffix(c.Name, "-"+store+"-changelog") {
				return c.Name
			}
		}
		return ""
	}
	addNodes := func(cluster string, nodes []topologyplugin.Node) {
		for _, n := range nodes {
			kind := kindProcessor
			switch n.Type {
			case topologyplugin.NodeSource:
				kind = kindSource
			case topologyplugin.NodeSink:
				kind = kindSink
			}
			g.node("node:"+n.Name, n.Name, kind, cluster)
		}
		for _, n := range nodes {
			id := "node:" + n.Name
			for _, t := range n.SourceTopics {
				g.edge(g.topic(t, kinds), id, false)
			}
			for _, s := range n.Successors {
				if g.byID["node:"+s] != nil {
					g.edge(id, "node:"+s, false)
				}
			}
			if n.SinkTopic != nil {
				g.edge(id, g.topic(*n.SinkTopic, kinds), false)
			}
			for _, st := range n.Stores {
				sid := "store:" + st
				g.node(sid, st, kindStore, cluster)
				g.edge(id, sid, true)
				if c := changelogOf(cluster, st); c != "" {
					g.edge(sid, g.topic(c, kinds), false)
				}
			}
		}
	}
	for _, s := range d.Subtopologies {
		addNodes(s.ID, s.Nodes)
	}
	for _, gs := range d.GlobalStores {
		addNodes("global", []topologyplugin.Node{gs.Source, gs.Processor})
	}
	return g
}

// subtopologyGraph builds the coarse graph of a KIP-1071 topology: one node per sub-topology
// with the topics it reads and writes.
func subtopologyGraph(subs []subtopologyView) *graph {
	g := newGraph()
	kinds := topicKinds(subs)
	for _, s := range subs {
		id := "sub:" + s.ID
		g.node(id, "sub-topology "+s.ID, kindSubtopology, s.ID)
		for _, t := range s.SourceTopics {
			g.edge(g.topic(t, kinds), id, false)
		}
		for _, r := range s.SourceTopicRegex {
			g.edge(g.topic(r, kinds), id, false)
		}
		for _, t := range s.RepartitionSources {
			g.edge(g.topic(t.Name, kinds), id, false)
		}
		for _, t := range s.RepartitionSinks {
			g.edge(id, g.topic(t, kinds), false)
		}
		for _, t := range s.Changelogs {
			g.edge(id, g.topic(t.Name, kinds), false)
		}
	}
	return g
}

// Layout constants, in SVG user units (px).
const (
	nodeH      = 28.0
	rowGap     = 44.0
	colGap     = 24.0
	margin     = 24.0
	charW      = 6.6 // monospace 11px
	minNodeW   = 90.0
	maxLabel   = 44
	clusterPad = 10.0
)

// layout assigns layers by longest path from the roots (edges point down), orders each layer
// by the barycenter of its predecessors within clusters, and places nodes in rows.
func (g *graph) layout() (width, height float64) {
	preds := map[string][]string{}
	succs := map[string][]string{}
	indeg := map[string]int{}
	for _, e := range g.edges {
		preds[e.To] = append(preds[e.To], e.From)
		succs[e.From] = append(succs[e.From], e.To)
		indeg[e.To]++
	}
	// Kahn's order; nodes on a cycle (not expected from Kafka Streams, but a plugin stores what
	// a client sent) are released in insertion order so the layout always ends.
	done := map[string]bool{}
	var queue []*gnode
	for _, n := range g.nodes {
		if indeg[n.ID] == 0 {
			queue = append(queue, n)
		}
	}
	for processed := 0; processed < len(g.nodes); {
		if len(queue) == 0 {
			for _, n := range g.nodes {
				if !done[n.ID] {
					queue = append(queue, n)
					break
				}
			}
		}
		n := queue[0]
		queue = queue[1:]
		if done[n.ID] {
			continue
		}
		done[n.ID] = true
		processed++
		for _, p := range preds[n.ID] {
			if done[p] && g.byID[p].rank+1 > n.rank {
				n.rank = g.byID[p].rank + 1
			}
		}
		for _, s := range succs[n.ID] {
			indeg[s]--
			if indeg[s] == 0 {
				queue = append(queue, g.byID[s])
			}
		}
	}
	maxRank := 0
	for i, n := range g.nodes {
		n.order = i
		maxRank = max(maxRank, n.rank)
	}
	rows := make([][]*gnode, maxRank+1)
	for _, n := range g.nodes {
		rows[n.rank] = append(rows[n.rank], n)
	}
	clusterIdx := func(n *gnode) int {
		c := n.Cluster
		if c == "" { // a topic sits with the first node it touches
			if ps := preds[n.ID]; len(ps) > 0 {
				c = g.byID[ps[0]].Cluster
			} else if ss := succs[n.ID]; len(ss) > 0 {
				c = g.byID[ss[0]].Cluster
			}
		}
		for i, x := range g.clusters {
			if x == c {
				return i
			}
		}
		return len(g.clusters)
	}
	for r, row := range rows {
		bary := map[*gnode]float64{}
		for _, n := range row {
			sum, k := 0.0, 0
			for _, p := range preds[n.ID] {
				if pn := g.byID[p]; pn.rank < r {
					sum += float64(pn.order)
					k++
				}
			}
			if k > 0 {
				bary[n] = sum / float64(k)
			} else {
				bary[n] = float64(n.order)
			}
		}
		sort.SliceStable(row, func(i, j int) bool {
			ci, cj := clusterIdx(row[i]), clusterIdx(row[j])
			if ci != cj {
				return ci < cj
			}
			return bary[row[i]] < bary[row[j]]
		})
		for i, n := range row {
			n.order = i
		}
	}
	for _, row := range rows {
		x := margin
		for _, n := range row {
			n.w = max(minNodeW, float64(len([]rune(label(n.Label))))*charW+20)
			x += n.w + colGap
		}
		width = max(width, x-colGap+margin)
	}
	for r, row := range rows {
		rowW := -colGap
		for _, n := range row {
			rowW += n.w + colGap
		}
		x := (width - rowW) / 2
		for _, n := range row {
			n.x, n.y = x, margin+20+float64(r)*(nodeH+rowGap)
			x += n.w + colGap
		}
	}
	height = margin + 20 + float64(len(rows))*(nodeH+rowGap) - rowGap + margin
	return width, height
}

func label(s string) string {
	r := []rune(s)
	if len(r) > maxLabel {
		return string(r[:maxLabel-1]) + "…"
	}
	return s
}

// svg draws the laid-out graph. Every node carries data-node (its name) and data-kind, every
// edge data-from and data-to (node names, topics as "topic:<name>", stores as "store:<name>"),
// so that a reader of the DOM can check the graph against the description.
func (g *graph) svg() template.HTML {
	w, h := g.layout()
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg class="topology" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="topology graph">`, w, h, w, h)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>`)
	for _, c := range g.clusters {
		x0, y0, x1, y1 := 1e18, 1e18, -1e18, -1e18
		for _, n := range g.nodes {
			if n.Cluster == c {
				x0, y0 = min(x0, n.x), min(y0, n.y)
				x1, y1 = max(x1, n.x+n.w), max(y1, n.y+nodeH)
			}
		}
		name := "sub-topology " + c
		if c == "global" {
			name = "global stores"
		}
		fmt.Fprintf(&b, `<g class="cluster" data-subtopology="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="6"/><text x="%.1f" y="%.1f">%s</text></g>`,
			esc(c), x0-clusterPad, y0-clusterPad-14, x1-x0+2*clusterPad, y1-y0+2*clusterPad+14, x0-clusterPad+6, y0-clusterPad-2, esc(name))
	}
	b.WriteString(`<g class="edges">`)
	for _, e := range g.edges {
		from, to := g.byID[e.From], g.byID[e.To]
		x1, y1 := from.x+from.w/2, from.y+nodeH
		x2, y2 := to.x+to.w/2, to.y
		if to.rank <= from.rank { // same row or back edge: leave from the side
			x1, y1 = from.x+from.w, from.y+nodeH/2
			x2, y2 = to.x, to.y+nodeH/2
			if to.x < from.x {
				x1, x2 = from.x, to.x+to.w
			}
		}
		cls, marker := "edge", ` marker-end="url(#arrow)"`
		if e.Store {
			cls, marker = "edge edge-store", ""
		}
		my := (y1 + y2) / 2
		fmt.Fprintf(&b, `<path class="%s" data-from="%s" data-to="%s" d="M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f"%s/>`,
			cls, esc(nodeName(e.From)), esc(nodeName(e.To)), x1, y1, x1, my, x2, my, x2, y2, marker)
	}
	b.WriteString(`</g><g class="nodes">`)
	for _, n := range g.nodes {
		rx := 3.0
		switch n.Kind {
		case kindTopic, kindRepartition, kindChangelog:
			rx = nodeH / 2
		case kindStore:
			rx = 8
		}
		fmt.Fprintf(&b, `<g class="node node-%s" data-node="%s" data-kind="%s" data-subtopology="%s"><title>%s (%s)</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" rx="%.0f"/><text x="%.1f" y="%.1f">%s</text></g>`,
			n.Kind, esc(nodeName(n.ID)), n.Kind, esc(n.Cluster), esc(n.Label), n.Kind, n.x, n.y, n.w, nodeH, rx, n.x+n.w/2, n.y+nodeH/2+4, esc(label(n.Label)))
	}
	b.WriteString(`</g></svg>`)
	return template.HTML(b.String())
}

// nodeName is a node's name in the DOM: a processing node's own name; topics, stores and
// sub-topologies keep their prefix, since a store and a topic may share a name.
func nodeName(id string) string { return strings.TrimPrefix(id, "node:") }
