// Package console is the read-only web console on the admin listener (admin.console.enable):
// groups by type and state, a page per group (members, epochs, assignment, committed offsets,
// a streams group's topology drawn as a graph), shard health and the topology description
// plugin's status. Pages are html/template with embedded assets and no script. State is read
// through shard ReadOps, which run on each shard's own goroutine.
package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is mounted on the admin listener.
const Prefix = "/console/"

// DefaultPageSize is how many groups one list page shows.
const DefaultPageSize = 50

// readTimeout bounds a page's shard reads: a shard that does not answer (inbox full, stuck
// load) makes the page report it instead of hanging the browser.
const readTimeout = 5 * time.Second

// Options are what the console reads from.
type Options struct {
	Groups *shard.Set
	// Meta is the metadata shard's state, for the shard page (nil: not shown).
	Meta func() runtime.State
	// MetaLastCompaction is the metadata shard's last compaction (nil: not shown).
	MetaLastCompaction func() time.Time
	// LogBytes is the size of a shard's log on disk ("group" or "meta"); nil or an error: unknown.
	LogBytes func(kind string, shard int32) (int64, error)
	// Topology is the description plugin; nil when none is configured.
	Topology *plugin.Caller
	// Gatherer serves the plugin's counters for the plugin status table (nil: not shown).
	Gatherer prometheus.Gatherer
	// PageSize is the group list's page size (0: DefaultPageSize).
	PageSize int
	// LogEnd returns the log end offsets of partitions, for lag (gateway mode: the upstream's
	// ListOffsets). nil in standalone mode, where coordinatord holds no partition logs. A
	// partition missing from its answer shows no lag.
	LogEnd func(ctx context.Context, partitions map[string][]int32) (map[string]map[int32]int64, error)
	// LogEndTimeout bounds the LogEnd call of a page (0: DefaultLogEndTimeout): a slow upstream
	// makes the page show lag as unknown, never hold it.
	LogEndTimeout time.Duration
	// ShardOwner names the other coordinatord node serving a shard this node does not
	// (log.backend=kafka with several nodes), e.g. "node 1002 (coord-2:9092)"; false while
	// the shard is handed over. nil: such shards are named without their node.
	ShardOwner func(shard int32) (string, bool)
}

// DefaultLogEndTimeout is how long a group page waits for the upstream's log end offsets.
const DefaultLogEndTimeout = 2 * time.Second

// noLag is shown where the lag is unknown.
const noLag = "—"

// Console serves the pages.
type Console struct {
	o    Options
	tmpl map[string]*template.Template
	mux  *http.ServeMux
}

// New returns the console; mount it at Prefix.
func New(o Options) *Console {
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.LogEndTimeout <= 0 {
		o.LogEndTimeout = DefaultLogEndTimeout
	}
	c := &Console{o: o, tmpl: map[string]*template.Template{}, mux: http.NewServeMux()}
	funcs := template.FuncMap{
		"join":   strings.Join,
		"bytes":  humanBytes,
		"millis": func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) },
		"age":    func(ms int64) string { return max(0, time.Since(time.UnixMilli(ms))).Round(time.Second).String() },
	}
	for _, page := range []string{"groups", "group", "shards"} {
		c.tmpl[page] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html"))
	}
	static, _ := fs.Sub(staticFS, "static")
	// Only GET (and HEAD, which GET patterns accept): the console changes nothing.
	c.mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET "+Prefix+"{$}", c.groups)
	c.mux.HandleFunc("GET "+Prefix+"group", c.group)
	c.mux.HandleFunc("GET "+Prefix+"shards", c.shards)
	return c
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the console is read-only", http.StatusMethodNotAllowed)
		return
	}
	c.mux.ServeHTTP(w, r)
}

func (c *Console) render(w http.ResponseWriter, status int, page string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := c.tmpl[page].Execute(w, data); err != nil {
		// Headers are gone; the truncated page shows the failure.
		w.Write([]byte("\n<!-- template error: " + template.HTMLEscapeString(err.Error()) + " -->"))
	}
}

// shardError is a shard that could not answer a page's read.
type shardError struct {
	Shard int32
	Err   string
}

// listPage is the group list's data.
type listPage struct {
	Title                 string
	Query, Type, State    string
	Rows                  []groupRow
	Total, Matched        int
	Page, Pages, PageSize int
	Counts                []countRow
	Types, States         []string
	Errors                []shardError
	// Elsewhere are the nodes serving the shards another node owns, with how many each.
	Elsewhere        []elsewhereRow
	ElsewhereShards  int
	PrevURL, NextURL string
	First, Last      int
}

// elsewhereRow is another node serving shards of this cluster, for the group list.
type elsewhereRow struct {
	Node   string
	Shards int
}

// owner names the node serving a shard another node owns; false while it is handed over.
func (c *Console) owner(shard int32) (string, bool) {
	if c.o.ShardOwner == nil {
		return "another node", true
	}
	if n, ok := c.o.ShardOwner(shard); ok {
		return n, true
	}
	return "no node yet (handed over)", false
}

// countRow is one (type, state) cell of the summary.
type countRow struct {
	Type, State string
	N           int
	URL         string
}

// allGroups reads every shard's groups, sorted by id; shards that cannot answer are reported,
// and shards another node serves (log.backend=kafka) are returned apart: they are not failing,
// their groups are on that node's console.
func (c *Console) allGroups(ctx context.Context) ([]groupRow, []shardError, []int32) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	n := c.o.Groups.Count()
	type res struct {
		rows []groupRow
		err  error
	}
	out := make([]res, n)
	done := make(chan int32, n)
	for i := int32(0); i < n; i++ {
		go func() {
			v, err := c.o.Groups.Shard(i).Read(ctx, listGroups(i))
			if err == nil {
				out[i].rows = v.([]groupRow)
			}
			out[i].err = err
			done <- i
		}()
	}
	var rows []groupRow
	var errs []shardError
	var elsewhere []int32
	for range n {
		<-done
	}
	for i, r := range out {
		if errors.Is(r.err, runtime.ErrNotOwned) {
			elsewhere = append(elsewhere, int32(i))
			continue
		}
		if r.err != nil {
			errs = append(errs, shardError{Shard: int32(i), Err: r.err.Error()})
			continue
		}
		rows = append(rows, r.rows...)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	return rows, errs, elsewhere
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := listPage{Title: "Groups", Query: strings.TrimSpace(q.Get("q")), Type: q.Get("type"), State: q.Get("state"), PageSize: c.o.PageSize}
	rows, errs, elsewhere := c.allGroups(r.Context())
	p.Errors, p.Total = errs, len(rows)
	p.ElsewhereShards = len(elsewhere)
	byNode := map[string]int{}
	for _, s := range elsewhere {
		n, _ := c.owner(s)
		if byNode[n] == 0 {
			p.Elsewhere = append(p.Elsewhere, elsewhereRow{Node: n})
		}
		byNode[n]++
	}
	for i := range p.Elsewhere {
		p.Elsewhere[i].Shards = byNode[p.Elsewhere[i].Node]
	}
	sort.Slice(p.Elsewhere, func(i, j int) bool { return p.Elsewhere[i].Node < p.Elsewhere[j].Node })
	counts := map[[2]string]int{}
	types, states := map[string]bool{}, map[string]bool{}
	needle := strings.ToLower(p.Query)
	matched := rows[:0:0]
	for _, g := range rows {
		counts[[2]string{g.Type, g.State}]++
		types[g.Type], states[g.State] = true, true
		if p.Type != "" && !strings.EqualFold(p.Type, g.Type) || p.State != "" && !strings.EqualFold(p.State, g.State) {
			continue
		}
		if needle != "" && !strings.Contains(strings.ToLower(g.ID), needle) {
			continue
		}
		matched = append(matched, g)
	}
	for k, n := range counts {
		p.Counts = append(p.Counts, countRow{Type: k[0], State: k[1], N: n, URL: listURL("", k[0], k[1], 1)})
	}
	sort.Slice(p.Counts, func(i, j int) bool {
		if p.Counts[i].Type != p.Counts[j].Type {
			return p.Counts[i].Type < p.Counts[j].Type
		}
		return p.Counts[i].State < p.Counts[j].State
	})
	for t := range types {
		p.Types = append(p.Types, t)
	}
	for s := range states {
		p.States = append(p.States, s)
	}
	slices.Sort(p.Types)
	slices.Sort(p.States)
	p.Matched = len(matched)
	p.Pages = max(1, (len(matched)+p.PageSize-1)/p.PageSize)
	p.Page, _ = strconv.Atoi(q.Get("page"))
	p.Page = min(max(p.Page, 1), p.Pages)
	from := (p.Page - 1) * p.PageSize
	p.Rows = matched[from:min(from+p.PageSize, len(matched))]
	p.First, p.Last = from+1, from+len(p.Rows)
	if p.Page > 1 {
		p.PrevURL = listURL(p.Query, p.Type, p.State, p.Page-1)
	}
	if p.Page < p.Pages {
		p.NextURL = listURL(p.Query, p.Type, p.State, p.Page+1)
	}
	c.render(w, http.StatusOK, "groups", p)
}

func listURL(q, typ, state string, page int) string {
	v := url.Values{}
	if q != "" {
		v.Set("q", q)
	}
	if typ != "" {
		v.Set("type", typ)
	}
	if state != "" {
		v.Set("state", state)
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return Prefix
	}
	return Prefix + "?" + v.Encode()
}

// groupPage is the group page's data.
type groupPage struct {
	Title string
	groupDetail
	Error string
	// Streams.
	DescriptionStatus string
	Graph             template.HTML
	GraphNodes        int
	GraphEdges        int
	Tasks             []subtopologyTasks
	Processes         []processView
	// LagNote says where the lag column comes from, or why it is empty.
	LagNote string
}

// subtopologyTasks lists who runs each task of a sub-topology.
type subtopologyTasks struct {
	ID    string
	Tasks []taskRow
}

type taskRow struct {
	Name            string
	Active          string // member id (process)
	Standby, Warmup []string
}

// processView groups members by Streams process (one KafkaStreams instance).
type processView struct {
	ID                      string
	Members                 []string
	Active, Standby, Warmup int
}

func (c *Console) group(w http.ResponseWriter, r *http.Request) {
	// "?id=" names the group "", which OffsetCommit accepts and the list links to.
	ids, given := r.URL.Query()["id"]
	id := ""
	if given {
		id = ids[0]
	}
	p := groupPage{Title: "Group " + id}
	if !given {
		p.Error = "no group id given"
		c.render(w, http.StatusBadRequest, "group", p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	shardID := shard.For(id, c.o.Groups.Count())
	v, err := c.o.Groups.Shard(shardID).Read(ctx, describeGroup(id, shardID))
	if errors.Is(err, runtime.ErrNotOwned) {
		// Not a failure: another node is the group's coordinator. 421 Misdirected Request: the
		// same request to that node's console answers it.
		p.ID, p.Shard = id, shardID
		on := "group " + strconv.Quote(id) + " is on shard " + strconv.Itoa(int(shardID))
		if n, ok := c.owner(shardID); ok {
			p.Error = on + ", which " + n + " serves: see that node's console"
		} else {
			p.Error = on + ", which is being handed over to another node"
		}
		c.render(w, http.StatusMisdirectedRequest, "group", p)
		return
	}
	if err != nil {
		p.ID, p.Shard = id, shardID
		p.Error = "shard " + strconv.Itoa(int(shardID)) + " cannot answer: " + err.Error()
		c.render(w, http.StatusServiceUnavailable, "group", p)
		return
	}
	p.groupDetail = v.(groupDetail)
	if !p.Found {
		p.Error = "no group " + strconv.Quote(id)
		c.render(w, http.StatusNotFound, "group", p)
		return
	}
	p.decodeAssignments()
	c.lag(r.Context(), &p)
	if p.Type == "streams" {
		c.streamsParts(ctx, &p)
	}
	c.render(w, http.StatusOK, "group", p)
}

// lag fills the offsets' log end and lag from LogEnd, bounded by LogEndTimeout.
func (c *Console) lag(ctx context.Context, p *groupPage) {
	for i := range p.Offsets {
		p.Offsets[i].LogEnd, p.Offsets[i].Lag = noLag, noLag
	}
	if c.o.LogEnd == nil {
		p.LagNote = "Lag is not shown in standalone mode: coordinatord stores committed offsets but holds no partition logs, so it has no log end offsets to compare them with. In gateway mode the upstream cluster's log end offsets are read for this page."
		return
	}
	if len(p.Offsets) == 0 {
		return
	}
	parts := map[string][]int32{}
	for _, o := range p.Offsets {
		parts[o.Topic] = append(parts[o.Topic], o.Partition)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.LogEndTimeout)
	defer cancel()
	type answer struct {
		ends map[string]map[int32]int64
		err  error
	}
	// The call runs beside the page so that a client that ignores its context still cannot
	// hold the page past the timeout.
	done := make(chan answer, 1)
	go func() {
		ends, err := c.o.LogEnd(ctx, parts)
		done <- answer{ends, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		a.err = ctx.Err()
	}
	if a.err != nil {
		p.LagNote = "The upstream's log end offsets are unknown (" + a.err.Error() + "); lag is not shown."
		return
	}
	p.LagNote = "Lag is the upstream's log end offset minus the committed offset, read when this page was built."
	for i := range p.Offsets {
		o := &p.Offsets[i]
		if end, ok := a.ends[o.Topic][o.Partition]; ok {
			o.LogEnd, o.Lag = strconv.FormatInt(end, 10), strconv.FormatInt(max(end-o.Offset, 0), 10)
		}
	}
}

// streamsParts adds a streams group's topology graph, task table and processes.
func (c *Console) streamsParts(ctx context.Context, p *groupPage) {
	var desc *topologyplugin.Description
	switch {
	case !c.o.Topology.Enabled():
		p.DescriptionStatus = "no topology description plugin is configured; the graph shows sub-topologies and their topics"
	case p.TopologyEpoch < 0:
		p.DescriptionStatus = "the group has no topology yet"
	case p.StoredDescriptionEpoch != p.TopologyEpoch:
		p.DescriptionStatus = "no description of topology epoch " + strconv.Itoa(int(p.TopologyEpoch)) + " is stored yet; the graph shows sub-topologies and their topics"
	default:
		d, err := c.o.Topology.Get(ctx, p.ID, p.TopologyEpoch)
		switch {
		case err != nil:
			p.DescriptionStatus = "the plugin failed to return the description: " + err.Error()
		case d == nil:
			p.DescriptionStatus = "the plugin no longer holds the description; a member will be asked to push it again"
		default:
			desc = d
			p.DescriptionStatus = "description of topology epoch " + strconv.Itoa(int(p.TopologyEpoch)) + " from plugin " + c.o.Topology.Name()
		}
	}
	var g *graph
	if desc != nil {
		g = descriptionGraph(desc, p.Subtopologies)
	} else if len(p.Subtopologies) > 0 {
		g = subtopologyGraph(p.Subtopologies)
	}
	if g != nil {
		p.Graph, p.GraphNodes, p.GraphEdges = g.svg(), len(g.nodes), len(g.edges)
	}

	type owners struct {
		active          string
		standby, warmup []string
	}
	byTask := map[string]*owners{}
	procs := map[string]*processView{}
	get := func(t string) *owners {
		if byTask[t] == nil {
			byTask[t] = &owners{}
		}
		return byTask[t]
	}
	for _, m := range p.Members {
		who := m.ID
		if m.ProcessID != "" {
			who += " (" + m.ProcessID + ")"
		}
		pv := procs[m.ProcessID]
		if pv == nil {
			pv = &processView{ID: m.ProcessID}
			procs[m.ProcessID] = pv
		}
		pv.Members = append(pv.Members, m.ID)
		pv.Active, pv.Standby, pv.Warmup = pv.Active+len(m.Active), pv.Standby+len(m.Standby), pv.Warmup+len(m.Warm)
		for _, t := range m.Active {
			get(t).active = who
		}
		for _, t := range m.Standby {
			get(t).standby = append(get(t).standby, who)
		}
		for _, t := range m.Warm {
			get(t).warmup = append(get(t).warmup, who)
		}
	}
	for _, s := range p.Subtopologies {
		st := subtopologyTasks{ID: s.ID}
		// Tasks listed are those the assignment names; unassigned ones are not known here.
		var names []string
		for t := range byTask {
			if sub, _, ok := strings.Cut(t, "_"); ok && sub == s.ID {
				names = append(names, t)
			}
		}
		sort.Slice(names, func(i, j int) bool { return taskLess(names[i], names[j]) })
		for _, t := range names {
			o := byTask[t]
			st.Tasks = append(st.Tasks, taskRow{Name: t, Active: o.active, Standby: o.standby, Warmup: o.warmup})
		}
		p.Tasks = append(p.Tasks, st)
	}
	for _, pv := range procs {
		p.Processes = append(p.Processes, *pv)
	}
	sort.Slice(p.Processes, func(i, j int) bool { return p.Processes[i].ID < p.Processes[j].ID })
}

func taskLess(a, b string) bool {
	sa, pa, _ := strings.Cut(a, "_")
	sb, pb, _ := strings.Cut(b, "_")
	if sa != sb {
		return sa < sb
	}
	na, _ := strconv.Atoi(pa)
	nb, _ := strconv.Atoi(pb)
	return na < nb
}

// shardRow is one shard's health.
type shardRow struct {
	Kind           string
	ID             int32
	State          string
	Groups         string
	LogBytes       string
	LastCompaction string
	Failed         bool
	// ServedBy names the node serving a shard another node owns (log.backend=kafka).
	ServedBy string
}

// pluginCounter is one plugin series value.
type pluginCounter struct {
	Name, Labels string
	Value        float64
}

type shardsPage struct {
	Title         string
	Shards        []shardRow
	Unhealthy     int
	Elsewhere     int // shards other nodes serve (log.backend=kafka): not unhealthy
	Plugin        bool
	PluginName    string
	Volatile      bool
	BackoffGroups int
	Counters      []pluginCounter
}

func (c *Console) shards(w http.ResponseWriter, r *http.Request) {
	p := shardsPage{Title: "Shards and plugin"}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	row := func(kind string, id int32, st runtime.State, last time.Time) shardRow {
		sr := shardRow{Kind: kind, ID: id, State: st.String(), Groups: "-", LogBytes: "unknown", LastCompaction: "none since start", Failed: st == runtime.StateFailed}
		switch st {
		case runtime.StateActive:
		case runtime.StateNotOwned:
			p.Elsewhere++
			sr.ServedBy, _ = c.owner(id)
		default:
			p.Unhealthy++
		}
		if !last.IsZero() {
			sr.LastCompaction = last.UTC().Format(time.RFC3339)
		}
		if c.o.LogBytes != nil {
			if n, err := c.o.LogBytes(kind, id); err == nil {
				sr.LogBytes = humanBytes(n)
			}
		}
		return sr
	}
	if c.o.Meta != nil {
		var last time.Time
		if c.o.MetaLastCompaction != nil {
			last = c.o.MetaLastCompaction()
		}
		p.Shards = append(p.Shards, row("meta", 0, c.o.Meta(), last))
	}
	for i := int32(0); i < c.o.Groups.Count(); i++ {
		sh := c.o.Groups.Shard(i)
		sr := row("group", i, sh.State(), sh.LastCompaction())
		if sh.State() == runtime.StateActive {
			if v, err := sh.Read(ctx, shardGroupCount); err == nil {
				sr.Groups = strconv.Itoa(v.(int))
			}
		}
		p.Shards = append(p.Shards, sr)
	}
	if c.o.Topology.Enabled() {
		p.Plugin, p.PluginName, p.Volatile = true, c.o.Topology.Name(), c.o.Topology.Volatile()
		p.BackoffGroups = c.o.Topology.Backoff().Len()
		p.Counters = pluginCounters(c.o.Gatherer)
	}
	c.render(w, http.StatusOK, "shards", p)
}

const pluginMetricPrefix = "coordinatord_streams_group_topology_description_"

// pluginCounters reads the plugin's counters and gauges from the registry the metrics come
// from, so the page and /metrics never disagree.
func pluginCounters(g prometheus.Gatherer) []pluginCounter {
	if g == nil {
		return nil
	}
	mfs, err := g.Gather()
	if err != nil {
		return nil
	}
	var out []pluginCounter
	for _, mf := range mfs {
		name, ok := strings.CutPrefix(mf.GetName(), pluginMetricPrefix)
		if !ok || mf.GetType() == dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetValue() != "" {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
			}
			v := m.GetCounter().GetValue()
			if mf.GetType() == dto.MetricType_GAUGE {
				v = m.GetGauge().GetValue()
			}
			out = append(out, pluginCounter{Name: name, Labels: strings.Join(labels, ", "), Value: v})
		}
	}
	return out
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTPE"[exp]) + "iB"
}
