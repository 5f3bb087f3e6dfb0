package streams

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// catalog is an in-memory topic catalog.
type catalog map[string]*meta.Topic

func (c catalog) Topic(name string) (*meta.Topic, bool) { t, ok := c[name]; return t, ok }

func topics(kv ...any) catalog {
	c := catalog{}
	for i := 0; i < len(kv); i += 2 {
		name := kv[i].(string)
		c[name] = &meta.Topic{Name: name, ID: [16]byte{byte(len(c) + 1), byte(i)}, Partitions: int32(kv[i+1].(int))}
	}
	return c
}

// roundRobin is a test double for the assignor: active tasks dealt to members in id order,
// standbys of stateful tasks to the next members on other processes.
type roundRobin struct{ name string }

func (r roundRobin) Name() string { return r.name }

func (roundRobin) Assign(in assign.Input) (assign.Output, error) {
	out := assign.Output{}
	n := len(in.Members)
	for _, m := range in.Members {
		out[m.ID] = assign.MemberAssignment{Active: assign.TaskSet{}, Standby: assign.TaskSet{}, Warmup: assign.TaskSet{}}
	}
	if n == 0 {
		return out, nil
	}
	i := 0
	for _, st := range in.Subtopologies {
		for p := int32(0); p < st.Tasks; p++ {
			owner := in.Members[i%n]
			out[owner.ID].Active[st.ID] = append(out[owner.ID].Active[st.ID], p)
			if st.Stateful {
				placed := map[string]bool{owner.ProcessID: true}
				for k, r := 1, int32(0); k < n && r < in.Configs.NumStandbyReplicas; k++ {
					c := in.Members[(i+k)%n]
					if placed[c.ProcessID] {
						continue
					}
					placed[c.ProcessID] = true
					out[c.ID].Standby[st.ID] = append(out[c.ID].Standby[st.ID], p)
					r++
				}
			}
			i++
		}
	}
	return out, nil
}

// fixed is an assignor double that returns a given target.
type fixed struct{ out assign.Output }

func (fixed) Name() string                                 { return "sticky" }
func (f fixed) Assign(assign.Input) (assign.Output, error) { return f.out, nil }

type failing struct{}

func (failing) Name() string                               { return "sticky" }
func (failing) Assign(assign.Input) (assign.Output, error) { return nil, fmt.Errorf("boom") }

func testConfig(a assign.Assignor) Config {
	c := DefaultConfig()
	c.InitialRebalanceDelay = 0
	c.Lookup = func(name string) (assign.Assignor, bool) {
		if name == a.Name() {
			return a, true
		}
		return nil, false
	}
	return c
}

// env drives the state machine as a shard would: records returned by an operation are
// replayed into the state, and every operation is checked not to have changed the state it
// read (a fresh replay of the log so far must equal it, soft state aside).
type env struct {
	t         *testing.T
	s         *State
	shadow    *State // only ever replays the log: what s must equal
	cfg       Config
	cat       catalog
	now       time.Time
	version   int16
	log       []log.Record
	recs      []log.Record // last operation's records
	timers    []TimerAction
	scheduled map[string]TimerAction
	toCreate  []InternalTopic
}

func newEnv(t *testing.T, cat catalog, a assign.Assignor) *env {
	return &env{t: t, s: New(), shadow: New(), cfg: testConfig(a), cat: cat, now: time.UnixMilli(1_000_000), version: 1, scheduled: map[string]TimerAction{}}
}

func withoutSoft(s *State) map[string]Group {
	out := map[string]Group{}
	for id, g := range s.Groups {
		c := *g
		c.soft = soft{}
		out[id] = c
	}
	return out
}

func (e *env) checkUnchanged() {
	e.t.Helper()
	if !reflect.DeepEqual(withoutSoft(e.shadow), withoutSoft(e.s)) {
		e.t.Fatalf("state differs from a replay of its log (an operation mutated state?)")
	}
}

func (e *env) apply(recs []log.Record, timers []TimerAction) {
	e.t.Helper()
	e.checkUnchanged()
	for _, r := range recs {
		if err := e.s.Replay(r); err != nil {
			e.t.Fatalf("replay %s: %v", kindOf(r), err)
		}
		if err := e.shadow.Replay(r); err != nil {
			e.t.Fatalf("replay %s: %v", kindOf(r), err)
		}
	}
	e.log = append(e.log, recs...)
	e.recs, e.timers = recs, timers
	for _, a := range timers {
		if a.Cancel {
			delete(e.scheduled, a.Key())
		} else {
			e.scheduled[a.Key()] = a
		}
	}
	e.checkUnchanged()
}

func (e *env) hb(req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
	e.t.Helper()
	if code, msg := ValidateRequest(req); code != 0 {
		e.recs = nil
		return ErrorResponse(code, msg)
	}
	out := e.s.Heartbeat(HeartbeatInput{Req: req, Version: e.version, ClientID: "client", ClientHost: "/127.0.0.1", Catalog: e.cat, Config: e.cfg, Now: e.now,
		Scheduled: func(k string) bool { _, ok := e.scheduled[k]; return ok }})
	e.apply(out.Records, out.Timers)
	e.toCreate = out.ToCreate
	return out.Response
}

// fire runs an armed timer's expiry.
func (e *env) fire(kind TimerKind, group, member string) {
	e.t.Helper()
	key := TimerKey(kind, group, member)
	a, ok := e.scheduled[key]
	if !ok {
		e.t.Fatalf("timer %q not armed", key)
	}
	delete(e.scheduled, key)
	switch kind {
	case InitialDelayTimer:
		e.apply(e.s.InitialDelayExpired(group, a.Catalog, e.cfg, e.now), nil)
	default:
		recs, timers := e.s.Fence(group, member, a.Epoch, kind == RebalanceTimer)
		e.apply(recs, timers)
	}
}

func kindOf(r log.Record) string {
	k, _ := records.KindOf(r.Key)
	if r.Tombstone() {
		return k.String() + "-"
	}
	return k.String()
}

func kinds(recs []log.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = kindOf(r)
	}
	return out
}

// Requests.

type sub struct {
	id         string
	sources    []string
	changelogs []string
	copart     [][]int16
	repSinks   []string
	repSources []string
}

func topo(epoch int32, subs ...sub) *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	t.Epoch = epoch
	for _, s := range subs {
		st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		st.SubtopologyID, st.SourceTopics, st.RepartitionSinkTopics = s.id, s.sources, s.repSinks
		for _, c := range s.changelogs {
			ti := kmsg.NewTopicInfo()
			ti.Topic = c
			st.StateChangelogTopics = append(st.StateChangelogTopics, ti)
		}
		for _, r := range s.repSources {
			ti := kmsg.NewTopicInfo()
			ti.Topic = r
			st.RepartitionSourceTopics = append(st.RepartitionSourceTopics, ti)
		}
		for _, c := range s.copart {
			cg := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup()
			cg.SourceTopics = c
			st.CopartitionGroups = append(st.CopartitionGroups, cg)
		}
		t.Subtopologies = append(t.Subtopologies, st)
	}
	return &t
}

func join(group, member string, t *kmsg.StreamsGroupHeartbeatRequestTopology) *kmsg.StreamsGroupHeartbeatRequest {
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis, r.Topology = group, member, 0, 1500, t
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	pid := "process-" + member
	r.ProcessID = &pid
	return r
}

func beat(group, member string, epoch int32) *kmsg.StreamsGroupHeartbeatRequest {
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, member, epoch, -1
	return r
}

// owning sets the owned task lists: tasks "s:p,p" per role (active, standby, warm-up).
func owning(r *kmsg.StreamsGroupHeartbeatRequest, active, standby, warmup map[string][]int32) *kmsg.StreamsGroupHeartbeatRequest {
	conv := func(m map[string][]int32) []kmsg.TaskIDs {
		out := []kmsg.TaskIDs{}
		ids := make([]string, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			t := kmsg.NewTaskIDs()
			t.SubtopologyID, t.Partitions = id, m[id]
			out = append(out, t)
		}
		return out
	}
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = conv(active), conv(standby), conv(warmup)
	return r
}

// wireTasks renders task lists as map subtopology -> partitions (nil when the list is null).
func wireTasks(l []kmsg.TaskIDs) map[string][]int32 {
	if l == nil {
		return nil
	}
	out := map[string][]int32{}
	for _, t := range l {
		out[t.SubtopologyID] = t.Partitions
	}
	return out
}

func tasksOf(m map[Task]int32) map[string][]int32 {
	out := map[string][]int32{}
	for _, s := range sortedTasks(m) {
		out[s.ID] = s.Partitions
	}
	return out
}

func ps(p ...int32) []int32 { return p }

func (e *env) member(group, id string) *Member {
	e.t.Helper()
	g := e.s.Groups[group]
	if g == nil || g.Members[id] == nil {
		e.t.Fatalf("member %s of %s does not exist", id, group)
	}
	return g.Members[id]
}

func mustOK(t *testing.T, r *kmsg.StreamsGroupHeartbeatResponse) {
	t.Helper()
	if r.ErrorCode != 0 {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		t.Fatalf("error %d: %s", r.ErrorCode, msg)
	}
}

func mustErr(t *testing.T, r *kmsg.StreamsGroupHeartbeatResponse, code int16, msg string) {
	t.Helper()
	got := ""
	if r.ErrorMessage != nil {
		got = *r.ErrorMessage
	}
	if r.ErrorCode != code || (msg != "" && got != msg) {
		t.Fatalf("got error %d %q, want %d %q", r.ErrorCode, got, code, msg)
	}
	if len(r.Status) != 0 || r.MemberID != "" {
		t.Fatalf("error response carries success fields: %+v", r)
	}
}

type logRecord = log.Record

type metaTopic = meta.Topic

func tk(sub string, p int32) Task { return Task{Subtopology: sub, Partition: p} }
