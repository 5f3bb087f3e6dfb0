package streams

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var fooBar = topo(0, sub{id: "sub1", sources: []string{"foo"}}, sub{id: "sub2", sources: []string{"bar"}})

func TestSpec12_1_RequestValidation(t *testing.T) {
	inv, topoErr := kerr.InvalidRequest.Code, kerr.StreamsInvalidTopology.Code
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		req  func() *kmsg.StreamsGroupHeartbeatRequest
		code int16
		msg  string
	}{
		{"blank member", func() *kmsg.StreamsGroupHeartbeatRequest { return join("g", "", fooBar) }, inv, "MemberId can't be empty."},
		{"spaces member", func() *kmsg.StreamsGroupHeartbeatRequest { return join("g", "   ", fooBar) }, inv, "MemberId can't be empty."},
		{"blank group", func() *kmsg.StreamsGroupHeartbeatRequest { return join(" ", "m", fooBar) }, inv, "GroupId can't be empty."},
		{"blank instance", func() *kmsg.StreamsGroupHeartbeatRequest {
			r := join("g", "m", fooBar)
			r.InstanceID = str("")
			return r
		}, inv, "InstanceId can't be empty."},
		{"blank rack", func() *kmsg.StreamsGroupHeartbeatRequest { r := beat("g", "m", 1); r.RackID = str(""); return r }, inv, "RackId can't be empty."},
		{"no rebalance timeout", func() *kmsg.StreamsGroupHeartbeatRequest {
			r := join("g", "m", fooBar)
			r.RebalanceTimeoutMillis = -1
			return r
		}, inv, "RebalanceTimeoutMs must be provided in first request."},
		{"null active", func() *kmsg.StreamsGroupHeartbeatRequest { r := join("g", "m", fooBar); r.ActiveTasks = nil; return r }, inv, "ActiveTasks must be empty when (re-)joining."},
		{"null standby", func() *kmsg.StreamsGroupHeartbeatRequest { r := join("g", "m", fooBar); r.StandbyTasks = nil; return r }, inv, "StandbyTasks must be empty when (re-)joining."},
		{"null warmup", func() *kmsg.StreamsGroupHeartbeatRequest { r := join("g", "m", fooBar); r.WarmupTasks = nil; return r }, inv, "WarmupTasks must be empty when (re-)joining."},
		// A (re-)join owns nothing: tasks listed in it are refused, not silently dropped.
		{"join owning active", func() *kmsg.StreamsGroupHeartbeatRequest {
			return owning(join("g", "m", fooBar), map[string][]int32{"0": {0}}, nil, nil)
		}, inv, "ActiveTasks must be empty when (re-)joining."},
		{"join owning standby", func() *kmsg.StreamsGroupHeartbeatRequest {
			return owning(join("g", "m", fooBar), nil, map[string][]int32{"0": {0}}, nil)
		}, inv, "StandbyTasks must be empty when (re-)joining."},
		{"join owning warmup", func() *kmsg.StreamsGroupHeartbeatRequest {
			return owning(join("g", "m", fooBar), nil, nil, map[string][]int32{"0": {0}})
		}, inv, "WarmupTasks must be empty when (re-)joining."},
		{"null topology", func() *kmsg.StreamsGroupHeartbeatRequest { return join("g", "m", nil) }, inv, "Topology must be non-null when (re-)joining."},
		{"changelog count", func() *kmsg.StreamsGroupHeartbeatRequest {
			tp := topo(0, sub{id: "s", sources: []string{"foo"}, changelogs: []string{"cl"}})
			tp.Subtopologies[0].StateChangelogTopics[0].NumPartitions = 2
			return join("g", "m", tp)
		}, topoErr, "Changelog topic cl must have an undefined partition count, but it is set to 2."},
		{"regex", func() *kmsg.StreamsGroupHeartbeatRequest {
			tp := topo(0, sub{id: "s", sources: []string{"foo"}})
			tp.Subtopologies[0].SourceTopicRegex = []string{"foo.*"}
			return join("g", "", tp) // checked before the member id
		}, inv, "Regular expressions for source topics are not supported yet."},
		{"internal topic", func() *kmsg.StreamsGroupHeartbeatRequest {
			return join("g", "m", topo(0, sub{id: "s", sources: []string{"__consumer_offsets"}}))
		}, topoErr, "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited."},
		{"invalid topic", func() *kmsg.StreamsGroupHeartbeatRequest {
			return join("g", "m", topo(0, sub{id: "s", sources: []string{"bad topic!"}}))
		}, topoErr, "Topic names bad topic! are not valid topic names."},
		{"static leave without instance", func() *kmsg.StreamsGroupHeartbeatRequest { return beat("g", "m", -2) }, inv, "InstanceId can't be null."},
		{"epoch -3", func() *kmsg.StreamsGroupHeartbeatRequest { return beat("g", "m", -3) }, inv, "MemberEpoch is -3, but must be greater than or equal to -2."},
		{"partial task lists", func() *kmsg.StreamsGroupHeartbeatRequest {
			r := beat("g", "m", 5)
			r.ActiveTasks = []kmsg.TaskIDs{}
			return r
		}, inv, "If one task-type is non-null, all must be non-null."},
		{"topology outside join", func() *kmsg.StreamsGroupHeartbeatRequest { r := beat("g", "m", 5); r.Topology = fooBar; return r }, inv, "Topology can only be provided when (re-)joining."},
		{"leave with topology", func() *kmsg.StreamsGroupHeartbeatRequest { r := beat("g", "m", -1); r.Topology = fooBar; return r }, inv, "Topology can only be provided when (re-)joining."},
		{"valid join", func() *kmsg.StreamsGroupHeartbeatRequest { return join("g", "m", fooBar) }, 0, ""},
		{"valid leave", func() *kmsg.StreamsGroupHeartbeatRequest { return beat("g", "m", -1) }, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, msg := ValidateRequest(c.req())
			if code != c.code || msg != c.msg {
				t.Fatalf("got %d %q, want %d %q", code, msg, c.code, c.msg)
			}
		})
	}
}

// §3 worked example / §12 16-19: first join of an empty cluster.
func TestSpec3_FirstJoinWorkedExample(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	r := e.hb(join("fooup", "m", fooBar))
	mustOK(t, r)
	if r.MemberID != "m" || r.MemberEpoch != 2 || r.HeartbeatIntervalMillis != 5000 || r.TaskOffsetIntervalMillis != 60000 || r.AcceptableRecoveryLag != 10000 {
		t.Fatalf("response %+v", r)
	}
	if got := wireTasks(r.ActiveTasks); !reflect.DeepEqual(got, map[string][]int32{"sub1": ps(0, 1, 2, 3, 4, 5), "sub2": ps(0, 1, 2)}) {
		t.Fatalf("active %v", got)
	}
	if r.StandbyTasks == nil || len(r.StandbyTasks) != 0 || r.WarmupTasks == nil || len(r.WarmupTasks) != 0 {
		t.Fatalf("standby/warm-up must be empty lists: %v %v", r.StandbyTasks, r.WarmupTasks)
	}
	if r.Status == nil || len(r.Status) != 0 || r.EndpointInformationEpoch != 0 || r.PartitionsByUserEndpoint != nil {
		t.Fatalf("status %v endpoint %d %v", r.Status, r.EndpointInformationEpoch, r.PartitionsByUserEndpoint)
	}
	want := []string{"streams_member_metadata", "streams_topology", "streams_group_metadata", "streams_target_assignment_member", "streams_target_assignment_metadata", "streams_current_member_assignment"}
	if got := kinds(e.recs); !reflect.DeepEqual(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	g := e.s.Groups["fooup"]
	if g.Epoch != 2 || g.AssignmentEpoch != 2 || g.ValidatedTopologyEpoch != 0 || g.AssignmentTimestamp != e.now.UnixMilli() ||
		!reflect.DeepEqual(g.AssignmentConfigs, map[string]string{"num.standby.replicas": "0"}) || g.State() != StableGroup {
		t.Fatalf("group %+v state %s", g, g.State())
	}
	m := e.member("fooup", "m")
	if m.Epoch != 2 || m.PreviousEpoch != 0 || m.State != Stable || m.Assigned[Active][tk("sub1", 3)] != 2 {
		t.Fatalf("member %+v", m)
	}
	if _, ok := e.scheduled[TimerKey(SessionTimer, "fooup", "m")]; !ok {
		t.Fatal("session timer not armed")
	}

	// §12 17-18: nothing changed → no records, task lists null, Status [].
	r = e.hb(beat("fooup", "m", 2))
	mustOK(t, r)
	if len(e.recs) != 0 || r.MemberEpoch != 2 || r.ActiveTasks != nil || r.StandbyTasks != nil || r.WarmupTasks != nil || r.Status == nil || len(r.Status) != 0 {
		t.Fatalf("partial response %+v records %v", r, kinds(e.recs))
	}
}

func TestSpec12_9_10_UnknownGroupAndMember(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustErr(t, e.hb(beat("fooup", "m", 100)), kerr.GroupIDNotFound.Code, "Streams group fooup not found.")
	mustErr(t, e.hb(beat("fooup", "m", -1)), kerr.GroupIDNotFound.Code, "Group fooup not found.")
	mustOK(t, e.hb(join("fooup", "m1", fooBar)))
	mustErr(t, e.hb(beat("fooup", "m2", 1)), kerr.UnknownMemberID.Code, "Member m2 is not a member of group fooup.")
	mustErr(t, e.hb(beat("fooup", "m2", -1)), kerr.UnknownMemberID.Code, "Member m2 is not a member of group fooup.")
}

func TestSpec12_13_WrongGroupType(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	foreign := func(owned, convertible bool) func(string) (bool, bool, []logRecord) {
		return func(string) (bool, bool, []logRecord) { return owned, convertible, nil }
	}
	in := HeartbeatInput{Req: join("g", "m", fooBar), Catalog: e.cat, Config: e.cfg, Now: e.now, Foreign: foreign(true, false)}
	mustErr(t, e.s.Heartbeat(in).Response, kerr.GroupIDNotFound.Code, "Group g is not a streams group.")
	in.Req = beat("g", "m", 3)
	mustErr(t, e.s.Heartbeat(in).Response, kerr.GroupIDNotFound.Code, "Group g is not a streams group.")
	in.Req = beat("g", "m", -1)
	mustErr(t, e.s.Heartbeat(in).Response, kerr.GroupIDNotFound.Code, "Group g is not a streams group.")
	// §12 14: an empty classic group is converted: its tombstones come first.
	tomb := logRecord{Key: []byte{0, 10, 1, 'g'}}
	in.Req = join("g", "m", fooBar)
	in.Foreign = func(string) (bool, bool, []logRecord) { return true, true, []logRecord{tomb} }
	out := e.s.Heartbeat(in)
	mustOK(t, out.Response)
	if len(out.Records) == 0 || string(out.Records[0].Key) != string(tomb.Key) || out.Records[0].Value != nil {
		t.Fatalf("classic tombstone must be the first record: %v", kinds(out.Records))
	}
}

func TestSpec12_11_EpochValidation(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("fooup", "m", fooBar))) // epoch 2, previous 0
	mustOK(t, e.hb(join("fooup", "m2", fooBar)))
	// m: target changed at epoch 3: m must revoke, stays at 2; ack → epoch 3, previous 2.
	e.now = e.now.Add(2 * time.Second)
	r := e.hb(beat("fooup", "m", 2))
	mustOK(t, r)
	held := wireTasks(r.ActiveTasks)
	r = e.hb(owning(beat("fooup", "m", 2), held, nil, nil))
	mustOK(t, r)
	m := e.member("fooup", "m")
	if m.Epoch != 3 || m.PreviousEpoch != 2 {
		t.Fatalf("member %d/%d", m.Epoch, m.PreviousEpoch)
	}
	mustErr(t, e.hb(beat("fooup", "m", 200)), kerr.FencedMemberEpoch.Code,
		"The streams group member has a greater member epoch (200) than the one known by the group coordinator (3). The member must abandon all its partitions and rejoin.")
	mustErr(t, e.hb(beat("fooup", "m", 1)), kerr.FencedMemberEpoch.Code,
		"The streams group member has a smaller member epoch (1) than the one known by the group coordinator (3). The member must abandon all its partitions and rejoin.")
	// previous epoch with null owned lists → fenced
	mustErr(t, e.hb(beat("fooup", "m", 2)), kerr.FencedMemberEpoch.Code, "")
	// previous epoch with owned lists within the assignment → accepted, epoch 3
	r = e.hb(owning(beat("fooup", "m", 2), held, nil, nil))
	mustOK(t, r)
	if r.MemberEpoch != 3 {
		t.Fatalf("epoch %d", r.MemberEpoch)
	}
	// previous epoch owning a task it was never assigned → fenced
	mustErr(t, e.hb(owning(beat("fooup", "m", 2), map[string][]int32{"sub1": ps(0, 1, 2, 3, 4, 5)}, nil, nil)), kerr.FencedMemberEpoch.Code, "")
}

func TestSpec12_12_MaxSize(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	e.cfg.MaxSize = 2
	mustOK(t, e.hb(join("fooup", "m1", fooBar)))
	mustOK(t, e.hb(join("fooup", "m2", fooBar)))
	mustErr(t, e.hb(join("fooup", "m3", fooBar)), kerr.GroupMaxSizeReached.Code, "The streams group has reached its maximum capacity of 2 members.")
	mustOK(t, e.hb(join("fooup", "m2", fooBar))) // a member rejoining is not a new member
}

func TestSpec12_15_RejoinWithEpochZeroKeepsState(t *testing.T) {
	e := newEnv(t, topics("foo", 3), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s1", sources: []string{"foo"}})
	mustOK(t, e.hb(join("fooup", "m", tp)))
	n := len(e.log)
	r := e.hb(join("fooup", "m", tp))
	mustOK(t, r)
	if r.MemberEpoch != 2 || !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s1": ps(0, 1, 2)}) || len(r.StandbyTasks) != 0 || len(r.Status) != 0 {
		t.Fatalf("rejoin %+v", r)
	}
	if len(e.log) != n {
		t.Fatalf("rejoin with unchanged metadata wrote %v", kinds(e.recs))
	}
}

func TestSpec12_20_MissingSourceTopic(t *testing.T) {
	e := newEnv(t, topics("foo", 6), roundRobin{"sticky"})
	r := e.hb(join("fooup", "m", fooBar))
	mustOK(t, r)
	if r.MemberEpoch != 2 || len(r.ActiveTasks) != 0 || r.ActiveTasks == nil || len(r.Status) != 1 ||
		r.Status[0].StatusCode != StatusMissingSourceTopics || r.Status[0].StatusDetail != "Source topics bar are missing." {
		t.Fatalf("response %+v", r)
	}
	g := e.s.Groups["fooup"]
	if g.ValidatedTopologyEpoch != -1 || g.State() != NotReady || g.MetadataHash == 0 || len(e.toCreate) != 0 {
		t.Fatalf("group %+v create %v", g, e.toCreate)
	}
	// §5.4: the topic appears → the next heartbeat bumps and assigns.
	e.cat["bar"] = topics("bar", 3)["bar"]
	e.now = e.now.Add(2 * time.Second)
	r = e.hb(beat("fooup", "m", 2))
	mustOK(t, r)
	if r.MemberEpoch != 3 || len(r.Status) != 0 || !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"sub1": ps(0, 1, 2, 3, 4, 5), "sub2": ps(0, 1, 2)}) {
		t.Fatalf("after topic creation %+v", r)
	}
	if e.s.Groups["fooup"].State() != StableGroup {
		t.Fatal("group not stable")
	}
}

func TestSpec12_21_MissingInternalTopic(t *testing.T) {
	e := newEnv(t, topics("foo", 6), roundRobin{"sticky"})
	r := e.hb(join("fooup", "m", topo(0, sub{id: "s1", sources: []string{"foo"}, changelogs: []string{"bar"}})))
	mustOK(t, r)
	if r.MemberEpoch != 2 || len(r.ActiveTasks) != 0 || len(r.Status) != 1 || r.Status[0].StatusCode != StatusMissingInternalTopics || r.Status[0].StatusDetail != "Internal topics are missing: bar" {
		t.Fatalf("response %+v", r)
	}
	if len(e.toCreate) != 1 || e.toCreate[0].Name != "bar" || e.toCreate[0].Partitions != 6 || e.toCreate[0].ReplicationFactor != -1 {
		t.Fatalf("to create %+v", e.toCreate)
	}
	if e.s.Groups["fooup"].State() != NotReady {
		t.Fatal("group should be NotReady")
	}
	e.cat["bar"] = topics("bar", 6)["bar"]
	e.now = e.now.Add(2 * time.Second)
	r = e.hb(beat("fooup", "m", 2))
	mustOK(t, r)
	if r.MemberEpoch != 3 || len(r.Status) != 0 || len(wireTasks(r.ActiveTasks)["s1"]) != 6 {
		t.Fatalf("after creation %+v", r)
	}
}

func TestSpec12_22_IncorrectlyPartitioned(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	r := e.hb(join("fooup", "m", topo(0, sub{id: "s1", sources: []string{"foo", "bar"}, copart: [][]int16{{0, 1}}})))
	mustOK(t, r)
	if r.MemberEpoch != 2 || len(r.ActiveTasks) != 0 || len(r.Status) != 1 || r.Status[0].StatusCode != StatusIncorrectlyPartitionedTopics ||
		r.Status[0].StatusDetail != "Following topics do not have the same number of partitions: [{bar=3, foo=6}]" {
		t.Fatalf("response %+v", r)
	}
	if e.s.Groups["fooup"].State() != NotReady {
		t.Fatal("group should be NotReady")
	}
}

func TestSpec5_2_ConfigureTopicsExample(t *testing.T) {
	tp := TopologyFromRequest(topo(0,
		sub{id: "sub1", sources: []string{"src1"}, repSinks: []string{"rep"}, changelogs: []string{"cl1"}},
		sub{id: "sub2", sources: []string{"src2"}, repSources: []string{"rep"}, changelogs: []string{"cl2"}}))
	tp.Subtopologies[1].RepartitionSources[0].ReplicationFactor = 3
	tp.Subtopologies[0].Changelogs[0].Configs = []KV{{"k", "v"}}
	c, err := Configure(tp, topics("src1", 2, "src2", 2, "cl2", 2))
	if err != nil {
		t.Fatal(err)
	}
	if c.Problem == nil || c.Problem.Code != StatusMissingInternalTopics || c.Subtopologies[0].Tasks != 2 || c.Subtopologies[1].Tasks != 2 {
		t.Fatalf("configured %+v", c)
	}
	if len(c.ToCreate) != 2 || c.ToCreate[0].Name != "cl1" || c.ToCreate[0].Partitions != 2 || c.ToCreate[0].ReplicationFactor != -1 || c.ToCreate[0].Configs["k"] != "v" ||
		c.ToCreate[1].Name != "rep" || c.ToCreate[1].Partitions != 2 || c.ToCreate[1].ReplicationFactor != 3 {
		t.Fatalf("to create %+v", c.ToCreate)
	}
	// A repartition source never written by a sink is a STREAMS_INVALID_TOPOLOGY error.
	bad := TopologyFromRequest(topo(0, sub{id: "a", sources: []string{"src1"}, repSources: []string{"orphan"}}))
	if _, err := Configure(bad, topics("src1", 2)); err == nil || !strings.Contains(err.Error(), "never used as a sink") {
		t.Fatalf("err %v", err)
	}
	// An existing internal topic with the wrong count.
	wrong := TopologyFromRequest(topo(0, sub{id: "a", sources: []string{"src1"}, changelogs: []string{"cl"}}))
	if c, _ := Configure(wrong, topics("src1", 2, "cl", 5)); c.Problem == nil || c.Problem.Detail != "Existing topic cl has different number of partitions: expected 2, found 5" {
		t.Fatalf("problem %+v", c.Problem)
	}
	// A repartition topic created before partitions were added to its sink's input: its count
	// is the decided one (the input's), so the existing topic is incorrectly partitioned, as in
	// Kafka 4.4 (conformance streams_validation.txt), not taken as it is.
	grown := TopologyFromRequest(topo(0, sub{id: "a", sources: []string{"src1"}, repSinks: []string{"rep"}}, sub{id: "b", repSources: []string{"rep"}}))
	if c, _ := Configure(grown, topics("src1", 6, "rep", 4)); c.Problem == nil || c.Problem.Code != StatusIncorrectlyPartitionedTopics ||
		c.Problem.Detail != "Existing topic rep has different number of partitions: expected 6, found 4" {
		t.Fatalf("problem %+v", c.Problem)
	}
	// Missing source topics are abbreviated after three.
	many := TopologyFromRequest(topo(0, sub{id: "a", sources: []string{"e", "d", "c", "b", "a"}}))
	if c, _ := Configure(many, topics()); c.Problem.Detail != "Source topics a, b, c and 2 additional topics are missing." {
		t.Fatalf("detail %q", c.Problem.Detail)
	}
}

func TestSpec12_23_24_StaleTopologyAndTopologyChanges(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	t1 := topo(1, sub{id: "s1", sources: []string{"foo"}})
	mustOK(t, e.hb(join("fooup", "m1", t1)))
	// same epoch, different content
	mustErr(t, e.hb(join("fooup", "m2", topo(1, sub{id: "s1", sources: []string{"foo", "bar"}}))), kerr.InvalidRequest.Code, "Topology updates are not supported yet.")
	// higher epoch, same subtopologies
	mustErr(t, e.hb(join("fooup", "m2", topo(2, sub{id: "s1", sources: []string{"foo"}}))), kerr.InvalidRequest.Code, "Topology updates are not supported yet.")
	// older epoch: admitted as stale
	e.now = e.now.Add(2 * time.Second)
	epoch := e.s.Groups["fooup"].Epoch
	r := e.hb(join("fooup", "m2", topo(0, sub{id: "s1", sources: []string{"bar"}})))
	mustOK(t, r)
	if len(r.Status) != 1 || r.Status[0].StatusCode != StatusStaleTopology || r.Status[0].StatusDetail != "The member's topology epoch 0 is behind the group's topology epoch 1." {
		t.Fatalf("status %+v", r.Status)
	}
	if r.MemberEpoch != epoch+1 {
		t.Fatalf("member epoch %d, want %d", r.MemberEpoch, epoch+1)
	}
	for _, k := range kinds(e.recs) {
		if k == "streams_topology" {
			t.Fatal("a stale join must not write the topology")
		}
	}
	if e.s.Groups["fooup"].ValidatedTopologyEpoch != 1 {
		t.Fatal("validated epoch changed")
	}
}

func TestSpec12_25_OwnedTaskValidation(t *testing.T) {
	e := newEnv(t, topics("foo", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("fooup", "m", topo(0, sub{id: "subtopology1", sources: []string{"foo"}}))))
	mustErr(t, e.hb(owning(beat("fooup", "m", 2), map[string][]int32{"subtopologyMissing": ps(0)}, nil, nil)), kerr.InvalidRequest.Code,
		"Subtopology subtopologyMissing does not exist in the topology.")
	mustErr(t, e.hb(owning(beat("fooup", "m", 2), nil, map[string][]int32{"subtopology1": ps(3)}, nil)), kerr.InvalidRequest.Code,
		"Task 3 for subtopology subtopology1 is invalid. Number of tasks for this subtopology: 3")
}

func TestSpec12_26_TaskOffsets(t *testing.T) {
	e := newEnv(t, topics("foo", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("fooup", "m", topo(0, sub{id: "subtopology1", sources: []string{"foo"}}))))
	off := func(p int32, o int64) kmsg.TaskOffset {
		t := kmsg.NewTaskOffset()
		t.SubtopologyID, t.Partition, t.Offset = "subtopology1", p, o
		return t
	}
	r := beat("fooup", "m", 2)
	r.TaskOffsets, r.TaskEndOffsets = []kmsg.TaskOffset{off(0, 10)}, []kmsg.TaskOffset{off(0, 20)}
	mustOK(t, e.hb(r))
	if len(e.recs) != 0 {
		t.Fatalf("task offsets wrote %v", kinds(e.recs))
	}
	r = beat("fooup", "m", 2)
	r.TaskOffsets = []kmsg.TaskOffset{off(0, 12)}
	mustOK(t, e.hb(r))
	d := e.s.Describe("fooup", false, e.cat, e.cfg, false)
	if len(d.Members) != 1 || len(d.Members[0].TaskOffsets) != 1 || d.Members[0].TaskOffsets[0].Offset != 12 || len(d.Members[0].TaskEndOffsets) != 1 || d.Members[0].TaskEndOffsets[0].Offset != 20 {
		t.Fatalf("described offsets %+v %+v", d.Members[0].TaskOffsets, d.Members[0].TaskEndOffsets)
	}
	r = beat("fooup", "m", 2)
	r.TaskOffsets = []kmsg.TaskOffset{off(0, 13), off(0, 14)}
	mustErr(t, e.hb(r), kerr.InvalidRequest.Code, "Task offsets contain a duplicate entry for subtopology subtopology1 and partition 0.")
	r = owning(beat("fooup", "m", 2), map[string][]int32{"subtopology1": ps(7)}, nil, nil)
	r.TaskOffsets = []kmsg.TaskOffset{off(0, 99)}
	mustErr(t, e.hb(r), kerr.InvalidRequest.Code, "")
	d = e.s.Describe("fooup", false, e.cat, e.cfg, false)
	if d.Members[0].TaskOffsets[0].Offset != 12 {
		t.Fatalf("a rejected heartbeat stored offsets: %+v", d.Members[0].TaskOffsets)
	}
}

func TestSpec12_27_ShutdownApplication(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("fooup", "m1", fooBar)))
	mustOK(t, e.hb(join("fooup", "m2", fooBar)))
	want := "Streams group member m1 encountered a fatal error and requested a shutdown for the entire application."
	r := beat("fooup", "m1", e.member("fooup", "m1").Epoch)
	r.ShutdownApplication = true
	resp := e.hb(r)
	mustOK(t, resp)
	if len(e.recs) != 0 {
		t.Fatalf("shutdown wrote %v", kinds(e.recs))
	}
	has := func(resp *kmsg.StreamsGroupHeartbeatResponse) bool {
		for _, s := range resp.Status {
			if s.StatusCode == StatusShutdownApplication && s.StatusDetail == want {
				return true
			}
		}
		return false
	}
	if !has(resp) {
		t.Fatalf("requester's status %+v", resp.Status)
	}
	if resp := e.hb(beat("fooup", "m2", e.member("fooup", "m2").Epoch)); !has(resp) {
		t.Fatalf("other member's status %+v", resp.Status)
	}

	// Leaving with the flag: the leave response has no status, the next member's does.
	e2 := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustOK(t, e2.hb(join("fooup", "m1", fooBar)))
	mustOK(t, e2.hb(join("fooup", "m2", fooBar)))
	l := beat("fooup", "m1", -1)
	l.ShutdownApplication = true
	lr := e2.hb(l)
	mustOK(t, lr)
	if lr.MemberEpoch != -1 || lr.Status == nil || len(lr.Status) != 0 {
		t.Fatalf("leave response %+v", lr)
	}
	if resp := e2.hb(beat("fooup", "m2", e2.member("fooup", "m2").Epoch)); !has(resp) {
		t.Fatalf("status after leave %+v", resp.Status)
	}
}

func TestSpec12_28_MissingClientTags(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	e.cfg.RackAwareTags = []string{"zone", "cluster"}
	tag := func(k, v string) kmsg.StreamsGroupHeartbeatRequestClientTag {
		t := kmsg.NewStreamsGroupHeartbeatRequestClientTag()
		t.Key, t.Value = k, v
		return t
	}
	status := func(r *kmsg.StreamsGroupHeartbeatResponse) string {
		for _, s := range r.Status {
			if s.StatusCode == StatusMissingClientTags {
				return s.StatusDetail
			}
		}
		return ""
	}
	if got := status(e.hb(join("fooup", "a", fooBar))); got != "Missing required client tags for rack-aware standby assignment: [zone, cluster]. Configure them via 'client.tag.<tagKey>' in your Streams config." {
		t.Fatalf("no tags: %q", got)
	}
	r := join("fooup", "b", fooBar)
	r.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{tag("zone", "z1")}
	if got := status(e.hb(r)); !strings.Contains(got, "[cluster]") {
		t.Fatalf("zone only: %q", got)
	}
	r = join("fooup", "c", fooBar)
	r.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{tag("zone", "z1"), tag("cluster", "c1")}
	if got := status(e.hb(r)); got != "" {
		t.Fatalf("all tags: %q", got)
	}
	e.version = 0
	if got := status(e.hb(join("fooup", "d", fooBar))); got != "" {
		t.Fatalf("v0: %q", got)
	}
	if e.s.Groups["fooup"].AssignmentConfigs["rack.aware.assignment.tags"] != "zone,cluster" {
		t.Fatalf("configs %v", e.s.Groups["fooup"].AssignmentConfigs)
	}
}

func TestSpec12_29_MemberMetadataChangeBumps(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("fooup", "m", fooBar)))
	e.now = e.now.Add(2 * time.Second)
	r := beat("fooup", "m", 2)
	pid := "other-process"
	r.ProcessID = &pid
	resp := e.hb(r)
	mustOK(t, resp)
	if resp.MemberEpoch != 3 || e.s.Groups["fooup"].Epoch != 3 || e.s.Groups["fooup"].AssignmentEpoch != 3 {
		t.Fatalf("epoch %d group %d", resp.MemberEpoch, e.s.Groups["fooup"].Epoch)
	}
}

func TestSpec12_32_LeavingMember(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("fooup", "m1", fooBar)))
	mustOK(t, e.hb(join("fooup", "m2", fooBar)))
	epoch := e.s.Groups["fooup"].Epoch
	r := e.hb(beat("fooup", "m2", -1))
	mustOK(t, r)
	if r.MemberID != "m2" || r.MemberEpoch != -1 || r.Status == nil || len(r.Status) != 0 || r.HeartbeatIntervalMillis != 0 || r.AcceptableRecoveryLag != -1 || r.ActiveTasks != nil {
		t.Fatalf("leave response %+v", r)
	}
	want := []string{"streams_current_member_assignment-", "streams_target_assignment_member-", "streams_member_metadata-", "streams_group_metadata"}
	if got := kinds(e.recs); !reflect.DeepEqual(got, want) {
		t.Fatalf("records %v", got)
	}
	if e.s.Groups["fooup"].Epoch != epoch+1 {
		t.Fatal("no bump")
	}
	// The last member leaving also writes the target assignment metadata.
	mustOK(t, e.hb(beat("fooup", "m1", -1)))
	if got := kinds(e.recs); got[len(got)-1] != "streams_target_assignment_metadata" {
		t.Fatalf("records %v", got)
	}
	g := e.s.Groups["fooup"]
	if g.State() != Empty || g.AssignmentEpoch != g.Epoch || g.AssignmentTimestamp != 0 {
		t.Fatalf("group %+v", g)
	}
}

func TestSpec12_33_34_AssignmentConfigChanges(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("fooup", "m", fooBar)))
	e.cfg.AcceptableRecoveryLag = 5
	mustOK(t, e.hb(beat("fooup", "m", 2)))
	if len(e.recs) != 0 {
		t.Fatalf("acceptable recovery lag change wrote %v", kinds(e.recs))
	}
	e.cfg.NumStandbyReplicas = 2
	e.now = e.now.Add(2 * time.Second)
	r := e.hb(beat("fooup", "m", 2))
	mustOK(t, r)
	g := e.s.Groups["fooup"]
	if g.Epoch != 3 || g.AssignmentConfigs["num.standby.replicas"] != "2" || r.MemberEpoch != 3 {
		t.Fatalf("group %+v member epoch %d", g, r.MemberEpoch)
	}
}

func TestSpec12_35_AssignorFailure(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), failing{})
	mustErr(t, e.hb(join("fooup", "m", fooBar)), kerr.UnknownServerError.Code, "")
	if e.s.Owns("fooup") {
		t.Fatal("a failed join created the group")
	}
}

func TestSpec12_36_37_InitialRebalanceDelay(t *testing.T) {
	e := newEnv(t, topics("foo", 2), roundRobin{"sticky"})
	e.cfg.InitialRebalanceDelay = time.Second
	tp := topo(0, sub{id: "s1", sources: []string{"foo"}})
	r := e.hb(join("fooup", "m", tp))
	mustOK(t, r)
	if r.MemberEpoch != 1 || len(r.ActiveTasks) != 0 || r.ActiveTasks == nil || len(r.Status) != 1 || r.Status[0].StatusCode != StatusAssignmentDelayed ||
		r.Status[0].StatusDetail != "Assignment delayed due to the configured initial rebalance delay." || r.EndpointInformationEpoch != 0 {
		t.Fatalf("join %+v", r)
	}
	e.now = e.now.Add(10 * time.Second)
	e.fire(InitialDelayTimer, "fooup", "")
	r = e.hb(beat("fooup", "m", 1))
	mustOK(t, r)
	if r.MemberEpoch != 2 || len(r.Status) != 0 || !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s1": ps(0, 1)}) {
		t.Fatalf("after delay %+v", r)
	}
	// §12 37: the group empties and is joined again: delayed again.
	mustOK(t, e.hb(beat("fooup", "m", -1)))
	r = e.hb(join("fooup", "m2", tp))
	mustOK(t, r)
	if len(r.ActiveTasks) != 0 || r.Status[0].StatusCode != StatusAssignmentDelayed {
		t.Fatalf("rejoin of empty group %+v", r)
	}
	e.now = e.now.Add(2 * time.Second)
	e.fire(InitialDelayTimer, "fooup", "")
	r = e.hb(beat("fooup", "m2", r.MemberEpoch))
	if len(wireTasks(r.ActiveTasks)["s1"]) != 2 {
		t.Fatalf("after second delay %+v", r)
	}
}

func TestSpec12_38_AssignmentInterval(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	e.cfg.AssignmentInterval = 5 * time.Second
	t0 := e.now
	mustOK(t, e.hb(join("fooup", "m1", fooBar)))
	e.now = t0.Add(4995 * time.Millisecond)
	r := e.hb(join("fooup", "m2", fooBar))
	mustOK(t, r)
	if r.MemberEpoch != 2 || len(r.ActiveTasks) != 0 || len(r.Status) != 1 || r.Status[0].StatusDetail != "Assignment delayed due to the configured assignment interval." {
		t.Fatalf("m2 %+v", r)
	}
	if e.s.Groups["fooup"].Epoch != 3 {
		t.Fatal("no bump")
	}
	e.now = t0.Add(5005 * time.Millisecond)
	r = e.hb(beat("fooup", "m1", 2))
	mustOK(t, r)
	if e.s.Groups["fooup"].AssignmentEpoch != 3 {
		t.Fatal("target not computed after the interval")
	}
}

// With group.streams.assignment.quiet.ms (beyond Kafka), a heartbeat that changes nothing
// computes the held-back target once the group has been quiet that long; a join never
// computes early, a burst of joins gets one assignment after the last, and a loaded group
// counts as quiet since its last assignment.
func TestAssignmentQuiet(t *testing.T) {
	const quiet = 100 * time.Millisecond
	start := func() (*env, time.Time) {
		e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
		e.cfg.AssignmentInterval, e.cfg.AssignmentQuiet = 5*time.Second, quiet
		t0 := e.now
		mustOK(t, e.hb(join("fooup", "m1", fooBar))) // the first assignment is immediate
		return e, t0
	}
	target := func(e *env) int32 { return e.s.Groups["fooup"].AssignmentEpoch }

	t.Run("burst", func(t *testing.T) {
		e, t0 := start()
		for i, id := range []string{"m2", "m3", "m4"} {
			e.now = t0.Add(time.Duration(i+1) * 60 * time.Millisecond)
			if r := e.hb(join("fooup", id, fooBar)); len(r.Status) != 1 || r.Status[0].StatusDetail != "Assignment delayed due to the configured assignment interval." {
				t.Fatalf("join of %s: %+v", id, r.Status)
			}
		}
		last := e.now
		e.now = last.Add(quiet - time.Millisecond)
		mustOK(t, e.hb(beat("fooup", "m1", 2)))
		if target(e) != 2 {
			t.Fatalf("target epoch %d %v after the last join", target(e), quiet-time.Millisecond)
		}
		e.now = last.Add(quiet)
		mustOK(t, e.hb(beat("fooup", "m1", 2)))
		if g := e.s.Groups["fooup"]; target(e) != g.Epoch || g.Epoch != 5 {
			t.Fatalf("quiet for %v: target epoch %d, group epoch %d (want one assignment covering every join)", quiet, target(e), g.Epoch)
		}
	})
	t.Run("a join waits", func(t *testing.T) {
		e, t0 := start()
		e.now = t0.Add(time.Second) // quiet since the first assignment
		mustOK(t, e.hb(join("fooup", "m2", fooBar)))
		if target(e) != 2 {
			t.Fatalf("the join computed the target itself (target epoch %d)", target(e))
		}
		e.now = e.now.Add(quiet)
		mustOK(t, e.hb(beat("fooup", "m2", 2)))
		if target(e) != 3 {
			t.Fatalf("m2's steady heartbeat %v after its join: target epoch %d", quiet, target(e))
		}
	})
	t.Run("after a load", func(t *testing.T) {
		e, t0 := start()
		mustOK(t, e.hb(join("fooup", "m2", fooBar)))
		loaded := New()
		for _, r := range e.log {
			if err := loaded.Replay(r); err != nil {
				t.Fatal(err)
			}
		}
		e.s = loaded
		e.shadow = New()
		for _, r := range e.log {
			if err := e.shadow.Replay(r); err != nil {
				t.Fatal(err)
			}
		}
		e.now = t0.Add(quiet - time.Millisecond)
		mustOK(t, e.hb(beat("fooup", "m1", 2)))
		if target(e) != 2 {
			t.Fatalf("assigned %v after the last assignment", quiet-time.Millisecond)
		}
		e.now = t0.Add(quiet)
		mustOK(t, e.hb(beat("fooup", "m1", 2)))
		if target(e) != 3 {
			t.Fatalf("a loaded group quiet since its last assignment: target epoch %d", target(e))
		}
	})
}

func TestSpec6_2_AssignorSelection(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	e.cfg.Assignors = []string{"custom", "sticky"} // custom is not registered: the next one is used
	mustOK(t, e.hb(join("fooup", "m", fooBar)))
	if n := e.s.Describe("fooup", false, e.cat, e.cfg, false).AssignorName; n == nil || *n != "sticky" {
		t.Fatalf("assignor %v", n)
	}
	e.cfg.Assignors = []string{"custom"}
	e.now = e.now.Add(2 * time.Second)
	mustErr(t, e.hb(join("fooup", "m2", fooBar)), kerr.UnknownServerError.Code, "") // no assignor at all
}

// §4.5 worked reconciliation example with the assignor's target given explicitly.
func TestSpec4_5_ReconciliationProcess(t *testing.T) {
	out := assign.Output{
		"m1": {Active: assign.TaskSet{"s1": ps(0, 1, 2), "s2": ps(0, 1)}},
		"m2": {Active: assign.TaskSet{"s1": ps(3, 4, 5), "s2": ps(2)}},
	}
	f := &fixed{out: out}
	e := newEnv(t, topics("foo", 6, "bar", 3), f)
	e.cfg.Lookup = func(string) (assign.Assignor, bool) { return f, true }
	tp := topo(0, sub{id: "s1", sources: []string{"foo"}}, sub{id: "s2", sources: []string{"bar"}})
	mustOK(t, e.hb(join("g", "m1", tp)))
	e.now = e.now.Add(2 * time.Second)
	mustOK(t, e.hb(join("g", "m2", tp)))
	e1 := e.member("g", "m1").Epoch
	mustOK(t, e.hb(owning(beat("g", "m1", e1), map[string][]int32{"s1": ps(0, 1, 2), "s2": ps(0, 1)}, nil, nil)))
	e2 := e.member("g", "m2").Epoch
	mustOK(t, e.hb(owning(beat("g", "m2", e2), map[string][]int32{"s1": ps(3, 4, 5), "s2": ps(2)}, nil, nil)))
	g := e.s.Groups["g"]
	if g.State() != StableGroup {
		t.Fatalf("setup: group %s", g.State())
	}
	base := g.Epoch
	f.out = assign.Output{
		"m1": {Active: assign.TaskSet{"s1": ps(0, 1), "s2": ps(0)}},
		"m2": {Active: assign.TaskSet{"s1": ps(2, 3), "s2": ps(2)}},
		"m3": {Active: assign.TaskSet{"s1": ps(4, 5), "s2": ps(1)}},
	}
	e.now = e.now.Add(2 * time.Second)
	T := base + 1
	// 1. M3 joins.
	r := e.hb(join("g", "m3", tp))
	if r.MemberEpoch != T || len(r.ActiveTasks) != 0 || r.ActiveTasks == nil || e.member("g", "m3").State != UnreleasedTasks || e.s.Groups["g"].State() != Reconciling {
		t.Fatalf("1: %+v state %s", r, e.member("g", "m3").State)
	}
	// 2. M1 with null owned lists.
	r = e.hb(beat("g", "m1", base))
	if r.MemberEpoch != base || !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s1": ps(0, 1), "s2": ps(0)}) {
		t.Fatalf("2: %+v", r)
	}
	if m := e.member("g", "m1"); m.State != UnrevokedTasks || m.PreviousEpoch != base || !reflect.DeepEqual(tasksOf(m.Pending[Active]), map[string][]int32{"s1": ps(2), "s2": ps(1)}) {
		t.Fatalf("2: member %+v", m)
	}
	if _, ok := e.scheduled[TimerKey(RebalanceTimer, "g", "m1")]; !ok {
		t.Fatal("2: rebalance timer not armed")
	}
	// 3. M2.
	r = e.hb(beat("g", "m2", base))
	if r.MemberEpoch != base || !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s1": ps(3), "s2": ps(2)}) || e.member("g", "m2").State != UnrevokedTasks {
		t.Fatalf("3: %+v", r)
	}
	// 4. M3 again: record rewritten with previous epoch T.
	r = e.hb(beat("g", "m3", T))
	if r.MemberEpoch != T || r.ActiveTasks != nil || e.member("g", "m3").PreviousEpoch != T {
		t.Fatalf("4: %+v", r)
	}
	// 5. M1 acks: epoch T, no task lists.
	r = e.hb(owning(beat("g", "m1", base), map[string][]int32{"s1": ps(0, 1), "s2": ps(0)}, nil, nil))
	if r.MemberEpoch != T || r.ActiveTasks != nil {
		t.Fatalf("5: %+v", r)
	}
	if m := e.member("g", "m1"); m.State != Stable || m.PreviousEpoch != base || m.Assigned[Active][tk("s1", 0)] != m.Assigned[Active][tk("s1", 0)] {
		t.Fatalf("5: member %+v", m)
	}
	if _, ok := e.scheduled[TimerKey(RebalanceTimer, "g", "m1")]; ok {
		t.Fatal("5: rebalance timer still armed")
	}
	// 6. M2 without ack: nothing.
	r = e.hb(beat("g", "m2", base))
	if r.MemberEpoch != base || r.ActiveTasks != nil || len(e.recs) != 0 {
		t.Fatalf("6: %+v %v", r, kinds(e.recs))
	}
	// 7. M3 receives s2[1].
	r = e.hb(beat("g", "m3", T))
	if !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s2": ps(1)}) || e.member("g", "m3").State != UnreleasedTasks || e.member("g", "m3").Assigned[Active][tk("s2", 1)] != T {
		t.Fatalf("7: %+v", r)
	}
	// 8. M2 acks.
	r = e.hb(owning(beat("g", "m2", base), map[string][]int32{"s1": ps(3), "s2": ps(2)}, nil, nil))
	if r.MemberEpoch != T || !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s1": ps(2, 3), "s2": ps(2)}) {
		t.Fatalf("8: %+v", r)
	}
	if m := e.member("g", "m2"); m.State != Stable || m.Assigned[Active][tk("s1", 2)] != T || m.Assigned[Active][tk("s1", 3)] == T {
		t.Fatalf("8: task epochs %v", m.Assigned[Active])
	}
	// 9. M3 gets the rest; the group is stable.
	r = e.hb(owning(beat("g", "m3", T), map[string][]int32{"s2": ps(1)}, nil, nil))
	if !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s1": ps(4, 5), "s2": ps(1)}) || e.member("g", "m3").State != Stable || e.s.Groups["g"].State() != StableGroup {
		t.Fatalf("9: %+v", r)
	}
}

func TestSpec12_49_50_SessionAndRebalanceTimeouts(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("fooup", "m", fooBar)))
	if a := e.scheduled[TimerKey(SessionTimer, "fooup", "m")]; a.After != 45*time.Second {
		t.Fatalf("session timer %v", a.After)
	}
	e.fire(SessionTimer, "fooup", "m")
	want := []string{"streams_current_member_assignment-", "streams_target_assignment_member-", "streams_member_metadata-", "streams_group_metadata", "streams_target_assignment_metadata"}
	if got := kinds(e.recs); !reflect.DeepEqual(got, want) {
		t.Fatalf("records %v", got)
	}
	g := e.s.Groups["fooup"]
	if g.Epoch != 3 || g.AssignmentEpoch != 3 || g.AssignmentTimestamp != 0 || len(g.Members) != 0 {
		t.Fatalf("group %+v", g)
	}
	mustErr(t, e.hb(beat("fooup", "m", 2)), kerr.UnknownMemberID.Code, "")
	mustOK(t, e.hb(join("fooup", "m", fooBar))) // rejoin with the same id

	// Rebalance timeout: m must revoke after m2 joins; not acking fences it at the epoch the
	// timer captured; acking cancels the timer.
	e.now = e.now.Add(2 * time.Second)
	mustOK(t, e.hb(join("fooup", "m2", fooBar)))
	mEpoch := e.member("fooup", "m").Epoch
	mustOK(t, e.hb(beat("fooup", "m", mEpoch)))
	if e.member("fooup", "m").State != UnrevokedTasks {
		t.Fatal("m should be revoking")
	}
	a := e.scheduled[TimerKey(RebalanceTimer, "fooup", "m")]
	if a.After != 1500*time.Millisecond || a.Epoch != mEpoch {
		t.Fatalf("rebalance timer %+v", a)
	}
	before := e.s.Groups["fooup"].Epoch
	e.fire(RebalanceTimer, "fooup", "m")
	if e.s.Groups["fooup"].Members["m"] != nil || e.s.Groups["fooup"].Epoch != before+1 {
		t.Fatal("m not fenced by its rebalance timeout")
	}
	// A stale rebalance timer (member moved on) does nothing.
	recs, _ := e.s.Fence("fooup", "m2", e.member("fooup", "m2").Epoch+5, true)
	if len(recs) != 0 {
		t.Fatal("stale rebalance timer fenced")
	}
}

func TestSpec12_51_56_StaticMembership(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	inst := "instance-1"
	sj := func(member string) *kmsg.StreamsGroupHeartbeatRequest {
		r := join("g", member, tp)
		r.InstanceID = &inst
		pid := "p1"
		r.ProcessID = &pid
		return r
	}
	mustOK(t, e.hb(sj("a")))
	epoch := e.member("g", "a").Epoch
	groupEpoch := e.s.Groups["g"].Epoch
	// §12 53: conflicts while a holds the instance.
	mustErr(t, e.hb(sj("b")), kerr.UnreleasedInstanceID.Code, "Static member b with instance id instance-1 cannot join the group because the instance id is owned by a member.")
	r := beat("g", "b", 1000)
	r.InstanceID = &inst
	mustErr(t, e.hb(r), kerr.FencedInstanceID.Code, "Static member b with instance id instance-1 was fenced by member a.")
	r = beat("g", "b", -2)
	r.InstanceID = &inst
	mustErr(t, e.hb(r), kerr.FencedInstanceID.Code, "")
	other := "unknown"
	r = beat("g", "x", 1)
	r.InstanceID = &other
	mustErr(t, e.hb(r), kerr.UnknownMemberID.Code, "Instance id unknown is unknown.")

	// §12 51: temporary leave.
	r = beat("g", "a", -2)
	r.InstanceID = &inst
	lr := e.hb(r)
	mustOK(t, lr)
	if lr.MemberEpoch != -2 || len(lr.Status) != 0 || !reflect.DeepEqual(kinds(e.recs), []string{"streams_current_member_assignment"}) {
		t.Fatalf("temporary leave %+v %v", lr, kinds(e.recs))
	}
	m := e.member("g", "a")
	if m.Epoch != -2 || m.PreviousEpoch != 0 || len(m.Assigned[Active]) != 4 || m.Assigned[Active][tk("s", 0)] != 0 || e.s.Groups["g"].Epoch != groupEpoch {
		t.Fatalf("after -2: %+v", m)
	}
	n := len(e.log)
	e.hb(r) // idempotent
	if len(e.log) != n+1 || kinds(e.recs)[0] != "streams_current_member_assignment" {
		t.Fatal("repeated -2 should rewrite the same record")
	}
	// §11.5: commits of a temporarily left member are stale.
	if code, _ := e.s.ValidateCommit("g", "a", nil, epoch, 9, false, []CommitPartition{{"foo", 0}}); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit while left: %d", code)
	}

	// §12 52: rejoin with a new member id inherits the assignment; no bump.
	jr := e.hb(sj("b"))
	mustOK(t, jr)
	want := []string{"streams_current_member_assignment-", "streams_target_assignment_member-", "streams_member_metadata-",
		"streams_member_metadata", "streams_target_assignment_member", "streams_current_member_assignment", "streams_current_member_assignment"}
	if got := kinds(e.recs); !reflect.DeepEqual(got, want) {
		t.Fatalf("replacement records %v", got)
	}
	if jr.MemberEpoch != epoch || len(wireTasks(jr.ActiveTasks)["s"]) != 4 || e.s.Groups["g"].Epoch != groupEpoch || e.s.Groups["g"].Members["a"] != nil {
		t.Fatalf("replacement response %+v group epoch %d", jr, e.s.Groups["g"].Epoch)
	}
	if code, _ := e.s.ValidateCommit("g", "b", nil, 0, 9, false, []CommitPartition{{"foo", 1}}); code != 0 {
		t.Fatalf("inherited task epoch 0 should accept older epochs: %d", code)
	}
	if code, _ := e.s.ValidateCommit("g", "a", nil, epoch, 9, false, []CommitPartition{{"foo", 1}}); code != kerr.UnknownMemberID.Code {
		t.Fatalf("old member id: %d", code)
	}
	// The old id is fenced.
	r = beat("g", "a", epoch)
	r.InstanceID = &inst
	mustErr(t, e.hb(r), kerr.FencedInstanceID.Code, "")

	// §12 54: a temporary leave that is not followed by a rejoin expires with the session.
	r = beat("g", "b", -2)
	r.InstanceID = &inst
	mustOK(t, e.hb(r))
	e.fire(SessionTimer, "g", "b")
	if e.s.Groups["g"].Members["b"] != nil || e.s.Groups["g"].Epoch != groupEpoch+1 {
		t.Fatal("temporarily left member not fenced by its session timeout")
	}
}

func TestSpec12_55_MaxSizeWithStaticMembers(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	e.cfg.MaxSize = 2
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	sj := func(member, inst string) *kmsg.StreamsGroupHeartbeatRequest {
		r := join("g", member, tp)
		r.InstanceID = &inst
		return r
	}
	mustOK(t, e.hb(sj("a", "i1")))
	mustOK(t, e.hb(join("g", "d", tp)))
	mustErr(t, e.hb(sj("c", "i2")), kerr.GroupMaxSizeReached.Code, "")
	l := beat("g", "a", -2)
	i1 := "i1"
	l.InstanceID = &i1
	mustOK(t, e.hb(l))
	mustErr(t, e.hb(join("g", "d2", tp)), kerr.GroupMaxSizeReached.Code, "") // the -2 member still counts
	mustOK(t, e.hb(sj("a2", "i1")))                                          // the returning instance is accepted
}

func TestSpec12_57_EndpointInformation(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	j := join("g", "m1", tp)
	j.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "host1", Port: 9092}
	r := e.hb(j)
	mustOK(t, r)
	if r.EndpointInformationEpoch != 0 || len(r.PartitionsByUserEndpoint) != 1 || r.PartitionsByUserEndpoint[0].UserEndpoint.Host != "host1" ||
		!reflect.DeepEqual(r.PartitionsByUserEndpoint[0].ActivePartitions[0].Partitions, ps(0, 1, 2, 3)) || r.PartitionsByUserEndpoint[0].StandbyPartitions == nil {
		t.Fatalf("creating join %+v", r.PartitionsByUserEndpoint)
	}
	r = e.hb(beat("g", "m1", r.MemberEpoch))
	if r.PartitionsByUserEndpoint != nil || r.EndpointInformationEpoch != 0 {
		t.Fatalf("next heartbeat %+v %d", r.PartitionsByUserEndpoint, r.EndpointInformationEpoch)
	}
	// §12 58: a new member with an endpoint bumps the epoch; both are listed, itself last.
	e.now = e.now.Add(2 * time.Second)
	j = join("g", "m2", tp)
	j.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "host2", Port: 9093}
	r = e.hb(j)
	mustOK(t, r)
	if r.EndpointInformationEpoch != 1 || len(r.PartitionsByUserEndpoint) != 2 || r.PartitionsByUserEndpoint[1].UserEndpoint.Host != "host2" {
		t.Fatalf("second member %+v", r.PartitionsByUserEndpoint)
	}
}

func TestSpec12_59_EndpointPartitionsWithUnevenTopics(t *testing.T) {
	e := newEnv(t, topics("A", 4, "B", 2), roundRobin{"sticky"})
	j := join("g", "m", topo(0, sub{id: "s", sources: []string{"A", "B"}}))
	j.UserEndpoint = &kmsg.StreamsGroupHeartbeatRequestUserEndpoint{Host: "h", Port: 1}
	r := e.hb(j)
	mustOK(t, r)
	got := map[string][]int32{}
	for _, p := range r.PartitionsByUserEndpoint[0].ActivePartitions {
		got[p.Topic] = p.Partitions
	}
	if !reflect.DeepEqual(got, map[string][]int32{"A": ps(0, 1, 2, 3), "B": ps(0, 1)}) {
		t.Fatalf("partitions %v", got)
	}
}

func TestSpec12_60_62_Describe(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	d := e.s.Describe("nope", false, e.cat, e.cfg, false)
	if d.ErrorCode != kerr.GroupIDNotFound.Code || *d.ErrorMessage != "Group nope not found." || d.AuthorizedOperations != -2147483648 {
		t.Fatalf("absent %+v", d)
	}
	if d := e.s.Describe("nope", false, e.cat, e.cfg, true); *d.ErrorMessage != "Group nope is not a streams group." {
		t.Fatalf("foreign %+v", d)
	}
	mustOK(t, e.hb(join("g", "m1", fooBar)))
	e.now = e.now.Add(2 * time.Second)
	mustOK(t, e.hb(join("g", "m2", fooBar)))
	for i := 0; i < 3; i++ {
		for _, id := range []string{"m1", "m2"} {
			m := e.member("g", id)
			e.hb(owning(beat("g", id, m.Epoch), tasksOf(m.Assigned[Active]), tasksOf(m.Assigned[Standby]), nil))
		}
	}
	d = e.s.Describe("g", true, e.cat, e.cfg, false)
	if d.ErrorCode != 0 || d.State != "Stable" || d.Epoch != 3 || d.AssignmentEpoch != 3 || d.AuthorizedOperations != 3400 || *d.AssignorName != "sticky" || d.Topology.Epoch != 0 || len(d.Topology.Subtopologies) != 2 {
		t.Fatalf("describe %+v", d)
	}
	covered := map[Task]bool{}
	for _, m := range d.Members {
		if !reflect.DeepEqual(m.Assignment, m.TargetAssignment) || m.ClientHost != "/127.0.0.1" || m.ClientID != "client" {
			t.Fatalf("member %+v", m)
		}
		for _, ids := range m.Assignment.ActiveTasks {
			for _, p := range ids.Partitions {
				covered[tk(ids.SubtopologyID, p)] = true
			}
		}
	}
	if len(covered) != 9 {
		t.Fatalf("covered %d tasks", len(covered))
	}
}

// TestDescribeEmptyTopology: a topology without subtopologies is described with an empty,
// non-null list, ready or not (Kafka 4.4 sends [], conformance streams_validation.txt).
func TestDescribeEmptyTopology(t *testing.T) {
	e := newEnv(t, topics("foo", 1), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0))))
	for _, cat := range []Catalog{e.cat, nil} {
		d := e.s.Describe("g", false, cat, e.cfg, false)
		if d.ErrorCode != 0 || d.Topology == nil || d.Topology.Subtopologies == nil {
			t.Fatalf("describe %+v", d)
		}
	}
}

func TestSpec12_63_GroupStates(t *testing.T) {
	e := newEnv(t, topics("foo", 6), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}, changelogs: []string{"cl"}})
	mustOK(t, e.hb(join("g", "m", tp)))
	if s := e.s.Groups["g"].State(); s != NotReady {
		t.Fatalf("missing internal topic: %s", s)
	}
	e.cat["cl"] = topics("cl", 6)["cl"]
	e.now = e.now.Add(2 * time.Second)
	mustOK(t, e.hb(beat("g", "m", 2)))
	if s := e.s.Groups["g"].State(); s != StableGroup {
		t.Fatalf("after creation: %s", s)
	}
	e.now = e.now.Add(2 * time.Second)
	mustOK(t, e.hb(join("g", "m2", tp)))
	if s := e.s.Groups["g"].State(); s != Reconciling {
		t.Fatalf("second member: %s", s)
	}
	if ListedStateFilter(NotReady.String()) != "not_ready" || e.s.ListedState("g") != "Reconciling" {
		t.Fatal("listed state")
	}
	mustOK(t, e.hb(beat("g", "m", -1)))
	mustOK(t, e.hb(beat("g", "m2", -1)))
	if s := e.s.Groups["g"].State(); s != Empty {
		t.Fatalf("after leaving: %s", s)
	}
}

func TestSpec12_65_DeleteGroup(t *testing.T) {
	e := newEnv(t, topics("foo", 6, "bar", 3), roundRobin{"sticky"})
	if code, _ := e.s.DeleteGroup("g"); code != kerr.GroupIDNotFound.Code {
		t.Fatal(code)
	}
	mustOK(t, e.hb(join("g", "m", fooBar)))
	if code, _ := e.s.DeleteGroup("g"); code != kerr.NonEmptyGroup.Code {
		t.Fatal(code)
	}
	mustOK(t, e.hb(beat("g", "m", -1)))
	code, recs := e.s.DeleteGroup("g")
	want := []string{"streams_target_assignment_metadata-", "streams_group_metadata-", "streams_topology-"}
	if code != 0 || !reflect.DeepEqual(kinds(recs), want) {
		t.Fatalf("delete %d %v", code, kinds(recs))
	}
	e.apply(recs, nil)
	if e.s.Owns("g") {
		t.Fatal("group still exists")
	}
}

func TestSpec12_66_67_OffsetValidation(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	if _, owned := e.s.ValidateCommit("g", "m", nil, 1, 9, false, nil); owned {
		t.Fatal("absent group owned")
	}
	mustOK(t, e.hb(join("g", "m1", tp))) // m1 epoch 2 with s 0-3 at task epoch 2
	e.now = e.now.Add(2 * time.Second)
	mustOK(t, e.hb(join("g", "m2", tp)))
	m1 := e.member("g", "m1")
	r := e.hb(beat("g", "m1", m1.Epoch))
	e.hb(owning(beat("g", "m1", 2), wireTasks(r.ActiveTasks), nil, nil)) // m1 acks: epoch 3, keeps two tasks at task epoch 2
	m1 = e.member("g", "m1")
	if m1.Epoch != 3 {
		t.Fatalf("m1 epoch %d", m1.Epoch)
	}
	var kept, revoked int32 = -1, -1
	for p := int32(0); p < 4; p++ {
		if _, ok := m1.Assigned[Active][tk("s", p)]; ok {
			kept = p
		} else {
			revoked = p
		}
	}
	cases := []struct {
		name    string
		member  string
		epoch   int32
		version int16
		topic   string
		part    int32
		want    int16
	}{
		{"same epoch", "m1", 3, 9, "foo", revoked, 0},
		{"newer epoch", "m1", 4, 9, "foo", kept, kerr.StaleMemberEpoch.Code},
		{"older epoch, task held since then", "m1", 2, 9, "foo", kept, 0},
		{"older epoch, task revoked", "m1", 2, 9, "foo", revoked, kerr.StaleMemberEpoch.Code},
		{"older epoch, not a source topic", "m1", 2, 9, "other", kept, kerr.StaleMemberEpoch.Code},
		{"unknown member", "zz", 3, 9, "foo", 0, kerr.UnknownMemberID.Code},
		{"old version", "m1", 3, 8, "foo", 0, kerr.UnsupportedVersion.Code},
		{"admin commit while members exist", "", -1, 9, "foo", 0, kerr.UnknownMemberID.Code},
	}
	for _, c := range cases {
		code, owned := e.s.ValidateCommit("g", c.member, nil, c.epoch, c.version, false, []CommitPartition{{c.topic, c.part}})
		if !owned || code != c.want {
			t.Errorf("%s: code %d owned %v, want %d", c.name, code, owned, c.want)
		}
	}
	if code, _ := e.s.ValidateCommit("g", "", nil, -1, 3, true, nil); code != 0 {
		t.Errorf("txn admin commit: %d", code)
	}
	// Fetch (§12 67).
	if code, _ := e.s.ValidateFetch("g", nil, -1); code != 0 {
		t.Errorf("fetch without member: %d", code)
	}
	zz := "zz"
	if code, _ := e.s.ValidateFetch("g", &zz, 3); code != kerr.UnknownMemberID.Code {
		t.Errorf("fetch unknown member: %d", code)
	}
	id := "m1"
	if code, _ := e.s.ValidateFetch("g", &id, 2); code != kerr.StaleMemberEpoch.Code {
		t.Errorf("fetch stale: %d", code)
	}
	if code, _ := e.s.ValidateFetch("g", &id, 3); code != 0 {
		t.Errorf("fetch ok: %d", code)
	}
	// Admin commits are accepted once the group is empty.
	mustOK(t, e.hb(beat("g", "m1", -1)))
	mustOK(t, e.hb(beat("g", "m2", -1)))
	if code, _ := e.s.ValidateCommit("g", "", nil, -1, 9, false, nil); code != 0 {
		t.Errorf("admin commit on empty group: %d", code)
	}
}

func TestSpec12_69_ReplayInvariants(t *testing.T) {
	s := New()
	g := newGroup("g")
	m := newMember("m")
	for _, r := range []logRecord{MemberMetadataRecord("g", m), CurrentMemberRecord("g", m), GroupMetadataRecord(g, 2, 0, -1, nil)} {
		if err := s.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replay(memberMetadataTombstone("g", "m")); err == nil {
		t.Fatal("member metadata tombstone before the current assignment tombstone accepted")
	}
	if err := s.Replay(groupMetadataTombstone("g")); err == nil {
		t.Fatal("group tombstone with members accepted")
	}
	for _, r := range []logRecord{memberMetadataTombstone("x", "y"), groupMetadataTombstone("x"), memberMetadataTombstone("g", "unknown")} {
		if err := s.Replay(r); err != nil {
			t.Fatalf("tombstone of unknown entity: %v", err)
		}
	}
}

// Records round-trip: every field a replay reads back equals what was written.
func TestSpec10_RecordsRoundTrip(t *testing.T) {
	inst, rack := "i", "r"
	m := &Member{ID: "m", InstanceID: &inst, RackID: &rack, ClientID: "c", ClientHost: "/h", RebalanceTimeoutMs: 7, TopologyEpoch: 3, ProcessID: "p",
		UserEndpoint: &Endpoint{"host", 9000}, ClientTags: map[string]string{"a": "1", "b": "2"}, Epoch: 9, PreviousEpoch: 8, State: UnrevokedTasks}
	m.Assigned.add(Active, tk("s", 1), 5)
	m.Assigned.add(Standby, tk("s", 2), 0)
	m.Pending.add(Active, tk("t", 0), 4)
	tp := TopologyFromRequest(topo(4, sub{id: "s", sources: []string{"foo", "bar"}, changelogs: []string{"cl"}, copart: [][]int16{{0, 1}}, repSinks: []string{"r"}}))
	g := newGroup("g")
	g.StoredDescriptionEpoch = 2
	var target Roles
	target.add(Active, tk("s", 3), 0)
	s := New()
	for _, r := range []logRecord{MemberMetadataRecord("g", m), CurrentMemberRecord("g", m), GroupMetadataRecord(g, 6, 77, 4, map[string]string{"num.standby.replicas": "1"}),
		TopologyRecord("g", tp), TargetMemberRecord("g", "m", target), TargetMetadataRecord("g", 5, 1234)} {
		if err := s.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Groups["g"]
	gm := got.Members["m"]
	gm.hasMetadata, gm.hasCurrent = false, false
	if !reflect.DeepEqual(gm, m) {
		t.Fatalf("member\n%+v\n%+v", gm, m)
	}
	if !got.Topology.Equal(tp) || got.Epoch != 6 || got.MetadataHash != 77 || got.ValidatedTopologyEpoch != 4 || got.StoredDescriptionEpoch != 2 ||
		got.AssignmentEpoch != 5 || got.AssignmentTimestamp != 1234 || !got.Targets["m"].Equal(target) || got.AssignmentConfigs["num.standby.replicas"] != "1" {
		t.Fatalf("group %+v", got)
	}
}

// §4.6 with §5.5: the initial-delay timer configures the topology with what the group's last
// heartbeat saw, so internal topics created during the delay are not missed (otherwise the
// timer assigns nothing at the current epoch and nothing bumps again).
func TestSpec4_6_InitialDelaySeesTopicsCreatedMeanwhile(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	e.cfg.InitialRebalanceDelay = time.Second
	r := e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}, changelogs: []string{"cl"}})))
	mustOK(t, r)
	e.cat["cl"] = topics("cl", 4)["cl"]
	r = e.hb(beat("g", "m", r.MemberEpoch))
	mustOK(t, r)
	e.now = e.now.Add(2 * time.Second)
	e.fire(InitialDelayTimer, "g", "")
	r = e.hb(beat("g", "m", r.MemberEpoch))
	mustOK(t, r)
	if len(wireTasks(r.ActiveTasks)["s"]) != 4 {
		t.Fatalf("no tasks after the delay: %+v", r)
	}
}

// §12 30 / §5.4: the partition count of a source topic grows; the next heartbeat bumps the
// group, the member gets the new tasks at the new epoch and keeps the old ones' task epochs.
func TestSpec12_30_PartitionCountChange(t *testing.T) {
	e := newEnv(t, topics("foo", 3), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "s", sources: []string{"foo"}}))))
	e.cat["foo"] = &metaTopic{Name: "foo", ID: e.cat["foo"].ID, Partitions: 6}
	e.now = e.now.Add(2 * time.Second)
	r := e.hb(owning(beat("g", "m", 2), map[string][]int32{"s": ps(0, 1, 2)}, nil, nil))
	mustOK(t, r)
	if r.MemberEpoch != 3 || !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s": ps(0, 1, 2, 3, 4, 5)}) {
		t.Fatalf("%+v", r)
	}
	m := e.member("g", "m")
	if m.Assigned[Active][tk("s", 0)] != 2 || m.Assigned[Active][tk("s", 5)] != 3 {
		t.Fatalf("task epochs %v", m.Assigned[Active])
	}
	// Deleting and recreating a topic (new id, same count) is a metadata change too.
	e.cat["foo"] = &metaTopic{Name: "foo", ID: [16]byte{9}, Partitions: 6}
	e.now = e.now.Add(2 * time.Second)
	if r := e.hb(beat("g", "m", 3)); r.MemberEpoch != 4 {
		t.Fatalf("recreated topic: epoch %d", r.MemberEpoch)
	}
}

// Spec §3 step 8 (defect 9 of issue 10): what a member reports as task offsets is kept only for
// tasks of the group's configured topology, so a client cannot make the shard hold more than one
// entry per task; duplicates stay INVALID_REQUEST as in Kafka.
func TestSpec3_8_TaskOffsetsBoundedByTopology(t *testing.T) {
	e := newEnv(t, topics("foo", 3, "bar", 2), roundRobin{"sticky"})
	mustOK(t, e.hb(join("g", "m", topo(0, sub{id: "s1", sources: []string{"foo"}}, sub{id: "s2", sources: []string{"bar"}}))))
	off := func(sub string, p int32, o int64) kmsg.TaskOffset {
		t := kmsg.NewTaskOffset()
		t.SubtopologyID, t.Partition, t.Offset = sub, p, o
		return t
	}
	stored := func() (map[Task]int64, map[Task]int64) {
		g := e.s.Groups["g"]
		return g.soft.taskOffsets["m"], g.soft.taskEndOffsets["m"]
	}
	for _, c := range []struct {
		name string
		bad  kmsg.TaskOffset
	}{
		{"unknown subtopology", off("s9", 0, 5)},
		{"negative partition", off("s1", -1, 5)},
		{"partition past the task count", off("s2", 2, 5)},
		{"partition far past the task count", off("s1", 1<<30, 5)},
	} {
		r := beat("g", "m", 2)
		r.TaskOffsets = []kmsg.TaskOffset{off("s1", 0, 10), c.bad}
		r.TaskEndOffsets = []kmsg.TaskOffset{c.bad, off("s2", 1, 20)}
		mustOK(t, e.hb(r))
		o, eo := stored()
		if !reflect.DeepEqual(o, map[Task]int64{tk("s1", 0): 10}) || !reflect.DeepEqual(eo, map[Task]int64{tk("s2", 1): 20}) {
			t.Fatalf("%s: stored offsets %v, end offsets %v", c.name, o, eo)
		}
		d := e.s.Describe("g", false, e.cat, e.cfg, false)
		if len(d.Members[0].TaskOffsets) != 1 || len(d.Members[0].TaskEndOffsets) != 1 {
			t.Fatalf("%s: described %+v %+v", c.name, d.Members[0].TaskOffsets, d.Members[0].TaskEndOffsets)
		}
	}

	// Many entries: at most one per task is kept (5 tasks here).
	r := beat("g", "m", 2)
	for p := int32(0); p < 10000; p++ {
		r.TaskOffsets = append(r.TaskOffsets, off("s1", p, 1), off("s2", p, 1), off(fmt.Sprint("x", p), 0, 1))
	}
	mustOK(t, e.hb(r))
	if o, _ := stored(); len(o) != 5 {
		t.Fatalf("kept %d task offsets for a topology of 5 tasks", len(o))
	}

	// A duplicate is refused even when the entry names no task (Kafka checks every entry), and
	// the refused heartbeat stores nothing.
	for _, dup := range []kmsg.TaskOffset{off("s1", 1, 3), off("s9", 0, 3), off("s1", -1, 3)} {
		r = beat("g", "m", 2)
		r.TaskEndOffsets = []kmsg.TaskOffset{dup, off("s1", 2, 4), dup}
		mustErr(t, e.hb(r), kerr.InvalidRequest.Code, fmt.Sprintf("Task offsets contain a duplicate entry for subtopology %s and partition %d.", dup.SubtopologyID, dup.Partition))
		if _, eo := stored(); !reflect.DeepEqual(eo, map[Task]int64{tk("s2", 1): 20}) {
			t.Fatalf("a refused heartbeat changed the end offsets: %v", eo)
		}
	}

	// Without a ready topology (a source topic deleted) nothing can be checked, so nothing is kept.
	delete(e.cat, "bar")
	r = beat("g", "m", 2)
	r.TaskOffsets = []kmsg.TaskOffset{off("s1", 0, 10)}
	mustOK(t, e.hb(r))
	if o, _ := stored(); len(o) != 0 {
		t.Fatalf("kept %v without a ready topology", o)
	}
}

// A static member that rejoins under a new member id after a temporary leave (§12 52) is
// reconciled against what it holds under its old id as its own: when the new target demotes
// its active task to a standby on the same process, the demotion is immediate and the member
// is STABLE, not waiting for itself to release the active copy. Guards the task-ownership
// index's treatment of the replaced id (issue 12).
func TestStaticReplacementOwnsItsOldTasks(t *testing.T) {
	f := &fixed{out: assign.Output{"a": {Active: assign.TaskSet{"s": ps(0)}}, "b": {Active: assign.TaskSet{"s": ps(1)}}}}
	e := newEnv(t, topics("foo", 2), f)
	e.cfg.Lookup = func(string) (assign.Assignor, bool) { return f, true }
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	inst, rack := "instance-1", "rack-2"
	ja := join("g", "a", tp)
	ja.InstanceID = &inst
	mustOK(t, e.hb(ja))
	e.now = e.now.Add(2 * time.Second)
	mustOK(t, e.hb(join("g", "b", tp)))
	for i := 0; i < 3; i++ {
		for _, id := range []string{"a", "b"} {
			m := e.member("g", id)
			r := owning(beat("g", id, m.Epoch), tasksOf(m.Assigned[Active]), nil, nil)
			r.InstanceID = m.InstanceID
			mustOK(t, e.hb(r))
		}
	}
	if g := e.s.Groups["g"]; g.State() != StableGroup || len(e.member("g", "a").Assigned[Active]) != 1 {
		t.Fatalf("setup: group %s", g.State())
	}
	leave := beat("g", "a", -2)
	leave.InstanceID = &inst
	mustOK(t, e.hb(leave))

	// The rejoin changes the rack, so the group epoch bumps and the new target demotes task
	// s:0 to a standby of the replacement.
	f.out = assign.Output{"a2": {Standby: assign.TaskSet{"s": ps(0)}}, "b": {Active: assign.TaskSet{"s": ps(0, 1)}}}
	e.now = e.now.Add(2 * time.Second)
	j := join("g", "a2", tp)
	j.InstanceID, j.RackID = &inst, &rack
	pid := "process-a"
	j.ProcessID = &pid
	r := e.hb(j)
	mustOK(t, r)
	m := e.member("g", "a2")
	if m.State != Stable || !reflect.DeepEqual(tasksOf(m.Assigned[Standby]), map[string][]int32{"s": ps(0)}) || len(m.Assigned[Active]) != 0 {
		t.Fatalf("replacement: state %s assigned %+v", m.State, m.Assigned)
	}
	if !reflect.DeepEqual(wireTasks(r.StandbyTasks), map[string][]int32{"s": ps(0)}) {
		t.Fatalf("response standby %v", wireTasks(r.StandbyTasks))
	}
}

// With the server's catalog (immutable snapshots) a heartbeat reuses the configured topology
// of the previous one while the snapshot is the same, and sees a topic change as soon as a new
// snapshot carries it: added partitions bump the group epoch and the member gets the new tasks.
func TestHeartbeatSeesEachCatalogSnapshot(t *testing.T) {
	c := meta.NewCatalog()
	put := func(parts int32) *meta.Snapshot {
		if err := c.Replay(0, meta.TopicRecord(&meta.Topic{Name: "foo", ID: [16]byte{7}, Partitions: parts})); err != nil {
			t.Fatal(err)
		}
		return c.Snapshot()
	}
	e := newEnv(t, nil, roundRobin{"sticky"})
	hb := func(req *kmsg.StreamsGroupHeartbeatRequest, cat *meta.Snapshot) *kmsg.StreamsGroupHeartbeatResponse {
		t.Helper()
		out := e.s.Heartbeat(HeartbeatInput{Req: req, Version: 1, ClientID: "client", ClientHost: "/127.0.0.1", Catalog: cat, Config: e.cfg, Now: e.now})
		e.apply(out.Records, out.Timers)
		mustOK(t, out.Response)
		return out.Response
	}
	snap := put(2)
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	r := hb(join("g", "a", tp), snap)
	for i := 0; i < 3; i++ {
		r = hb(owning(beat("g", "a", r.MemberEpoch), map[string][]int32{"s": ps(0, 1)}, nil, nil), snap)
		if r.MemberEpoch != 2 || len(e.recs) != 0 {
			t.Fatalf("steady heartbeat %d: epoch %d, %d records", i, r.MemberEpoch, len(e.recs))
		}
	}
	e.now = e.now.Add(2 * time.Second) // past the assignment interval
	r = hb(owning(beat("g", "a", r.MemberEpoch), map[string][]int32{"s": ps(0, 1)}, nil, nil), put(4))
	if r.MemberEpoch != 3 || !reflect.DeepEqual(wireTasks(r.ActiveTasks), map[string][]int32{"s": ps(0, 1, 2, 3)}) {
		t.Fatalf("after the partition increase: epoch %d tasks %v", r.MemberEpoch, wireTasks(r.ActiveTasks))
	}
}

// TestStaticMemberRejoinBumpsNothing: a static Streams member that leaves with epoch -2 and
// rejoins at epoch 0 with unchanged metadata, under the member id it kept or under a new one
// with the same instance id, takes its place back as on Kafka: same member epoch, same tasks,
// no group epoch bump, no new target, the group Stable throughout. The consumer group's
// replacement path counted a member rejoining under its own id out twice (fixed 2026-12); this
// pins the streams path, where the member's tasks are also in the task-owner index under
// the replaced id, alone and beside another member.
func TestStaticMemberRejoinBumpsNothing(t *testing.T) {
	for _, c := range []struct {
		name, rejoinAs string
		others         int
	}{{"own id alone", "a", 0}, {"own id beside another", "a", 1}, {"new id alone", "a2", 0}, {"new id beside another", "a2", 1}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
			tp := topo(0, sub{id: "s", sources: []string{"foo"}})
			inst, pid := "instance-1", "process-a"
			sj := func(member string) *kmsg.StreamsGroupHeartbeatRequest {
				r := join("g", member, tp)
				r.InstanceID, r.ProcessID = &inst, &pid
				return r
			}
			mustOK(t, e.hb(sj("a")))
			if c.others > 0 {
				e.now = e.now.Add(2 * time.Second)
				mustOK(t, e.hb(join("g", "b", tp)))
			}
			settle := func() {
				for range 4 {
					for _, id := range sortedMemberIDs(e.s.Groups["g"].Members) {
						m := e.member("g", id)
						r := owning(beat("g", id, m.Epoch), tasksOf(m.Assigned[Active]), tasksOf(m.Assigned[Standby]), tasksOf(m.Assigned[Warmup]))
						r.InstanceID = m.InstanceID
						mustOK(t, e.hb(r))
					}
				}
			}
			settle()
			g := e.s.Groups["g"]
			groupEpoch, a := g.Epoch, e.member("g", "a")
			epoch, held := a.Epoch, a.Assigned.Clone()
			if g.State() != StableGroup || g.AssignmentEpoch != groupEpoch || len(held[Active]) == 0 {
				t.Fatalf("setup: group %s at %d/%d, a holds %v", g.State(), groupEpoch, g.AssignmentEpoch, held)
			}
			targets := map[string]Roles{}
			for id, r := range g.Targets {
				targets[id] = r
			}

			leave := beat("g", "a", -2)
			leave.InstanceID = &inst
			mustOK(t, e.hb(leave))
			e.now = e.now.Add(time.Second)
			r := e.hb(sj(c.rejoinAs))
			mustOK(t, r)
			m := e.member("g", c.rejoinAs)
			if r.MemberEpoch != epoch || !reflect.DeepEqual(wireTasks(r.ActiveTasks), tasksOf(held[Active])) || !m.Assigned.SameTasks(held) || m.State != Stable {
				t.Fatalf("rejoin answered epoch %d with %v (member %s), want epoch %d with %v", r.MemberEpoch, wireTasks(r.ActiveTasks), m.State, epoch, tasksOf(held[Active]))
			}
			settle()
			g = e.s.Groups["g"]
			if g.Epoch != groupEpoch || g.AssignmentEpoch != groupEpoch || g.State() != StableGroup {
				t.Fatalf("after the rejoin the group is %s at %d/%d, want Stable at %d/%d", g.State(), g.Epoch, g.AssignmentEpoch, groupEpoch, groupEpoch)
			}
			if c.rejoinAs != "a" {
				targets[c.rejoinAs] = targets["a"]
				delete(targets, "a")
			}
			if len(g.Targets) != len(targets) {
				t.Fatalf("targets %v, want %v", g.Targets, targets)
			}
			for id, want := range targets {
				if !g.Targets[id].SameTasks(want) {
					t.Fatalf("target of %s is %v, want %v", id, g.Targets[id], want)
				}
			}
			if !reflect.DeepEqual(g.owners, rebuildOwners(g.Members)) {
				t.Fatalf("task-owner index %v differs from the members' holdings %v", g.owners, rebuildOwners(g.Members))
			}
		})
	}
}

// TestStaticMemberRejoiningUnderItsOwnIDWithNewMetadata: a static member rejoining under the
// member id it kept with a changed process id bumps the group epoch once (as a process change
// does on Kafka), and the new assignment counts it as a member: alone it gets every task.
func TestStaticMemberRejoiningUnderItsOwnIDWithNewMetadata(t *testing.T) {
	e := newEnv(t, topics("foo", 4), roundRobin{"sticky"})
	tp := topo(0, sub{id: "s", sources: []string{"foo"}})
	inst := "instance-1"
	sj := func(process string) *kmsg.StreamsGroupHeartbeatRequest {
		r := join("g", "a", tp)
		r.InstanceID, r.ProcessID = &inst, &process
		return r
	}
	mustOK(t, e.hb(sj("p1")))
	groupEpoch := e.s.Groups["g"].Epoch
	leave := beat("g", "a", -2)
	leave.InstanceID = &inst
	mustOK(t, e.hb(leave))
	e.now = e.now.Add(time.Second)
	r := e.hb(sj("p2"))
	mustOK(t, r)
	g := e.s.Groups["g"]
	if g.Epoch != groupEpoch+1 || g.AssignmentEpoch != groupEpoch+1 || r.MemberEpoch != groupEpoch+1 || len(wireTasks(r.ActiveTasks)["s"]) != 4 || g.State() != StableGroup {
		t.Fatalf("rejoin with a new process: group %s at %d/%d, member at %d with %v; want Stable at %d with all 4 tasks",
			g.State(), g.Epoch, g.AssignmentEpoch, r.MemberEpoch, wireTasks(r.ActiveTasks), groupEpoch+1)
	}
}
