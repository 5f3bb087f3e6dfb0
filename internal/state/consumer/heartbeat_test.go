package consumer

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateRequest(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		mod  func(r *kmsg.ConsumerGroupHeartbeatRequest)
		want string
	}{
		{"v1 without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, "42 MemberId can't be empty."},
		{"blank group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "  " }, "42 GroupId can't be empty."},
		{"empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = str("") }, "42 InstanceId can't be empty."},
		{"empty rack", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = str("") }, "42 RackId can't be empty."},
		{"join without rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, "42 RebalanceTimeoutMs must be provided in first request."},
		{"join owning partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil }, "42 TopicPartitions must be empty when (re-)joining."},
		{"join without subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil },
			"42 Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."},
		{"static leave without instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, "42 InstanceId can't be null."},
		{"epoch below -2", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, "42 MemberEpoch is invalid."},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = str("sticky") },
			"112 ServerAssignor sticky is not supported. Supported assignors: uniform, range."},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = str("[") },
			"128 SubscribedTopicRegex `[` is not a valid regular expression: missing closing ]."},
		{"v0 join without member id is fine", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version, r.MemberID = 0, "" }, "0 "},
		{"v0 heartbeat without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version, r.MemberID, r.MemberEpoch = 0, "", 3 },
			"42 MemberId can't be empty."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := join("g", "m", "t")
			c.mod(r)
			code, msg := ValidateRequest(r, DefaultConfig())
			if got := fmt.Sprintf("%d %s", code, msg); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestRevokeBeforeAssign: a second member's partitions reach it only after the first member
// has given them up, and the first keeps its epoch until it has.
func TestRevokeBeforeAssign(t *testing.T) {
	w := newWorld(t, topics("t", 4))
	a := w.hb(join("g", "a", "t"))
	if a.Response.ErrorCode != 0 || a.Response.MemberEpoch != 2 || !fromWire(a.Response.Assignment).Equal(parts("t", 0, 1, 2, 3)) {
		t.Fatalf("first join: %+v %v", a.Response, fromWire(a.Response.Assignment))
	}
	b := w.hb(join("g", "b", "t"))
	if b.Response.MemberEpoch != 3 || len(fromWire(b.Response.Assignment)) != 0 {
		t.Fatalf("second join must get nothing yet at epoch 3: epoch %d %v", b.Response.MemberEpoch, fromWire(b.Response.Assignment))
	}
	if st := w.s.Groups["g"].Members["b"].State; st != UnreleasedPartitions {
		t.Fatalf("b state %v", st)
	}
	a = w.hb(beat("g", "a", 2, parts("t", 0, 1, 2, 3)))
	kept := fromWire(a.Response.Assignment)
	if a.Response.MemberEpoch != 2 || len(kept) != 2 || w.s.Groups["g"].Members["a"].State != UnrevokedPartitions {
		t.Fatalf("a must be asked to revoke at epoch 2: epoch %d kept %v", a.Response.MemberEpoch, kept)
	}
	// b still waits while a holds them.
	b = w.hb(beat("g", "b", 3, Parts{}))
	if b.Response.Assignment != nil {
		t.Fatalf("b got partitions a still holds: %v", fromWire(b.Response.Assignment))
	}
	a = w.hb(beat("g", "a", 2, kept))
	if a.Response.MemberEpoch != 3 {
		t.Fatalf("a after revoking: epoch %d", a.Response.MemberEpoch)
	}
	b = w.hb(beat("g", "b", 3, Parts{}))
	got := fromWire(b.Response.Assignment)
	if len(got) != 2 || w.s.Groups["g"].State() != StableGroup {
		t.Fatalf("b after a revoked: %v state %v", got, w.s.Groups["g"].State())
	}
}

func TestHeartbeatErrors(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	w.hb(join("g", "a", "t"))
	cases := []struct {
		name string
		req  *kmsg.ConsumerGroupHeartbeatRequest
		want string
	}{
		{"unknown group", beat("nope", "a", 2, nil), "69 Consumer group nope not found."},
		{"leave unknown group", beat("nope", "a", -1, nil), "69 Group nope not found."},
		{"unknown member", beat("g", "x", 2, nil), "25 Member x is not a member of group g."},
		{"leave unknown member", beat("g", "x", -1, nil), "25 Member x is not a member of group g."},
		{"epoch ahead", beat("g", "a", 5, nil), "110 The consumer group member has a greater member epoch (5) than the one known by the group coordinator (2). The member must abandon all its partitions and rejoin."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errOf(w.hb(c.req)); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	// A member a newer epoch has passed may come back with the previous one only with a subset
	// of its partitions.
	w.hb(join("g", "b", "t")) // group epoch 3
	w.hb(beat("g", "a", 2, parts("t", 0, 1)))
	w.hb(beat("g", "a", 2, w.s.Groups["g"].Members["a"].Assigned)) // a now at 3
	if e := w.s.Groups["g"].Members["a"].Epoch; e != 3 {
		t.Fatalf("a epoch %d", e)
	}
	if got := errOf(w.hb(beat("g", "a", 2, parts("t", 0, 1)))); !strings.HasPrefix(got, "110 The consumer group member has a smaller member epoch (2)") {
		t.Fatalf("previous epoch with partitions no longer assigned: %q", got)
	}
	if got := errOf(w.hb(beat("g", "a", 2, w.s.Groups["g"].Members["a"].Assigned))); got != "0 " {
		t.Fatalf("previous epoch with a subset: %q", got)
	}
}

func TestStaticMembership(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	inst := "i1"
	r := join("g", "a", "t")
	r.InstanceID = &inst
	w.hb(r)
	r2 := join("g", "b", "t")
	r2.InstanceID = &inst
	if got := errOf(w.hb(r2)); got != "111 Static member b with instance id i1 cannot join the group because the instance id is owned by a member." {
		t.Fatalf("got %q", got)
	}
	leave := beat("g", "a", -2, nil)
	leave.InstanceID = &inst
	if out := w.hb(leave); out.Response.ErrorCode != 0 || out.Response.MemberEpoch != -2 {
		t.Fatalf("static leave: %s", errOf(out))
	}
	if got := w.s.Groups["g"].Members["a"].Assigned; len(got) != 2 {
		t.Fatalf("a static member that left keeps its partitions: %v", got)
	}
	out := w.hb(r2)
	if out.Response.ErrorCode != 0 || !fromWire(out.Response.Assignment).Equal(parts("t", 0, 1)) {
		t.Fatalf("replacement must inherit the partitions: %s %v", errOf(out), fromWire(out.Response.Assignment))
	}
	if w.s.Groups["g"].Members["a"] != nil {
		t.Fatal("replaced member still there")
	}
	old := beat("g", "a", 1, nil)
	old.InstanceID = &inst
	if got := errOf(w.hb(old)); got != "82 Static member a with instance id i1 was fenced by member b." {
		t.Fatalf("got %q", got)
	}
	other := "i9"
	old.InstanceID = &other
	if got := errOf(w.hb(old)); got != "25 Instance id i9 is unknown." {
		t.Fatalf("got %q", got)
	}
}

// TestStaticMemberRejoiningUnderItsOwnMemberIDBumpsNothing: a Java 4.4 static member whose
// poll interval ran out leaves with epoch -2 and rejoins at epoch 0 under the same member id
// (KIP-1082: the client keeps its id). As on Kafka 4.4 (seen with a Java consumer against both
// servers), it takes its own place back without a group epoch bump, whether or not another
// member shares its topic: it was counted out of the group's subscriptions twice, so a topic
// only it subscribed to looked gone and the group epoch went up twice (a spurious assignment
// round, the group Assigning at 4 with its target at 3, where Kafka stays Stable at 2).
func TestStaticMemberRejoiningUnderItsOwnMemberIDBumpsNothing(t *testing.T) {
	for _, others := range []int{0, 1} {
		t.Run(fmt.Sprintf("%d others", others), func(t *testing.T) {
			w := newWorld(t, topics("t", 2, "u", 2))
			inst := "i1"
			r := join("g", "a", "t")
			r.InstanceID = &inst
			w.hb(r)
			if others > 0 {
				w.hb(join("g", "b", "u"))
			}
			// Let every member reach the target, so only the rejoin could change anything.
			for range 4 {
				for id, m := range w.s.Groups["g"].Members {
					b := beat("g", id, m.Epoch, m.Assigned)
					b.InstanceID = m.InstanceID
					w.hb(b)
				}
			}
			g := w.s.Groups["g"]
			epoch, held := g.Epoch, g.Members["a"].Assigned
			if g.State() != StableGroup || g.AssignmentEpoch != epoch {
				t.Fatalf("the group did not settle: %v at %d/%d", g.State(), epoch, g.AssignmentEpoch)
			}
			leave := beat("g", "a", -2, nil)
			leave.InstanceID = &inst
			w.hb(leave)
			out := w.hb(r) // the same member id, epoch 0
			if out.Response.ErrorCode != 0 || out.Response.MemberEpoch != epoch || !fromWire(out.Response.Assignment).Equal(held) {
				t.Fatalf("the rejoin: %s at epoch %d with %v, want epoch %d with %v", errOf(out), out.Response.MemberEpoch, fromWire(out.Response.Assignment), epoch, held)
			}
			a := w.s.Groups["g"].Members["a"]
			w.hb(beat("g", "a", a.Epoch, a.Assigned))
			g = w.s.Groups["g"]
			if g.Epoch != epoch || g.AssignmentEpoch != epoch || g.State() != StableGroup {
				t.Fatalf("after the rejoin and a heartbeat the group is %v at %d/%d, want Stable at %d/%d as before", g.State(), g.Epoch, g.AssignmentEpoch, epoch, epoch)
			}
		})
	}
}

func TestForeignGroupTypes(t *testing.T) {
	w := newWorld(t, topics("t", 1))
	tomb := log.Record{Key: []byte{0, 10, 1, 'x'}}
	foreign := func(owned, conv bool) func(string) (bool, bool, []log.Record) {
		return func(string) (bool, bool, []log.Record) { return owned, conv, []log.Record{tomb} }
	}
	run := func(req *kmsg.ConsumerGroupHeartbeatRequest, f func(string) (bool, bool, []log.Record)) HeartbeatOutput {
		return w.s.Heartbeat(HeartbeatInput{Req: req, Catalog: w.cat, Config: w.cfg, Now: w.now, Foreign: f})
	}
	if got := errOf(run(join("g", "a", "t"), foreign(true, false))); got != "69 Group g is not a consumer group." {
		t.Fatalf("non-empty foreign group: %q", got)
	}
	if got := errOf(run(beat("g", "a", -1, nil), foreign(true, false))); got != "69 Group g is not a consumer group." {
		t.Fatalf("leave of a foreign group: %q", got)
	}
	out := run(join("g", "a", "t"), foreign(true, true))
	if out.Response.ErrorCode != 0 || string(out.Records[0].Key) != string(tomb.Key) {
		t.Fatalf("an empty classic group is converted: %s %v", errOf(out), out.Records)
	}
}

func TestMaxSize(t *testing.T) {
	w := newWorld(t, topics("t", 1))
	w.cfg.MaxSize = 1
	w.hb(join("g", "a", "t"))
	if got := errOf(w.hb(join("g", "b", "t"))); got != "81 The consumer group has reached its maximum capacity of 1 members." {
		t.Fatalf("got %q", got)
	}
	if got := errOf(w.hb(beat("g", "a", 2, nil))); got != "0 " {
		t.Fatalf("a member of a full group heartbeats: %q", got)
	}
}

// TestMaxSizeLetsAStaticMemberBeReplaced: as in Kafka 4.4, a join naming an instance id the
// group knows is not counted as a new member: it replaces the one at epoch -2 in a full group
// (and one whose holder is still active gets UNRELEASED_INSTANCE_ID, not GROUP_MAX_SIZE_REACHED),
// while a dynamic newcomer is still refused.
func TestMaxSizeLetsAStaticMemberBeReplaced(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	w.cfg.MaxSize = 2
	inst := "i1"
	w.hb(join("g", "a", "t"))
	s1 := join("g", "s1", "t")
	s1.InstanceID = &inst
	w.hb(s1)
	taken := join("g", "s2", "t")
	taken.InstanceID = &inst
	if got := errOf(w.hb(taken)); !strings.HasPrefix(got, "111 ") {
		t.Fatalf("an instance id still held, in a full group: %q, want UNRELEASED_INSTANCE_ID", got)
	}
	leave := beat("g", "s1", -2, nil)
	leave.InstanceID = &inst
	w.hb(leave)
	if got := errOf(w.hb(join("g", "d", "t"))); !strings.HasPrefix(got, "81 ") {
		t.Fatalf("a dynamic member while the static one is away: %q, want GROUP_MAX_SIZE_REACHED", got)
	}
	if got := errOf(w.hb(taken)); got != "0 " {
		t.Fatalf("the static member's replacement in a full group: %q", got)
	}
	if g := w.s.Groups["g"]; len(g.Members) != 2 || g.Members["s2"] == nil || g.Members["s1"] != nil {
		t.Fatalf("members after the replacement: %v", sortedIDs(g.Members))
	}
}

// TestMetadataChangeBumps: a topic growing, and a topic appearing that a regex matches, bump
// the group epoch and reach the member.
func TestMetadataChangeBumps(t *testing.T) {
	w := newWorld(t, topics("t", 1))
	w.hb(join("g", "a", "t"))
	w.cat["t"] = &meta.Topic{Name: "t", ID: tid("t"), Partitions: 3}
	out := w.hb(beat("g", "a", 2, parts("t", 0)))
	if out.Response.MemberEpoch != 3 || !fromWire(out.Response.Assignment).Equal(parts("t", 0, 1, 2)) {
		t.Fatalf("after growth: epoch %d %v", out.Response.MemberEpoch, fromWire(out.Response.Assignment))
	}
	re := "lo.*"
	r := join("g2", "b")
	r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, &re
	out = w.hb(r)
	// A regex matching nothing joins a new group at its epoch 1 without a bump, as on Kafka 4.4.
	if out.Response.ErrorCode != 0 || out.Response.MemberEpoch != 1 || len(fromWire(out.Response.Assignment)) != 0 {
		t.Fatalf("regex join: %s at epoch %d", errOf(out), out.Response.MemberEpoch)
	}
	w.cat["logs"] = &meta.Topic{Name: "logs", ID: tid("logs"), Partitions: 2}
	w.cat["slogs"] = &meta.Topic{Name: "slogs", ID: tid("slogs"), Partitions: 2} // no full match
	out = w.hb(beat("g2", "b", 1, Parts{}))
	if out.Response.MemberEpoch != 2 || !fromWire(out.Response.Assignment).Equal(parts("logs", 0, 1)) {
		t.Fatalf("regex after topic creation: epoch %d %v", out.Response.MemberEpoch, fromWire(out.Response.Assignment))
	}
	if !w.s.Subscribed("g2", "logs") || w.s.Subscribed("g2", "slogs") {
		t.Fatal("Subscribed must follow the regex")
	}
}

// TestSteadyHeartbeatFollowsOtherMembersSubscriptions: a steady member's heartbeat, with the
// catalog an immutable snapshot as the server passes it, hashes the group's subscriptions as
// they are now. A hash kept from before another member subscribed to a topic more (or left)
// differs from the group's and bumps the group epoch on every such heartbeat.
func TestSteadyHeartbeatFollowsOtherMembersSubscriptions(t *testing.T) {
	w := newWorld(t, topics("t1", 2, "t2", 2))
	w.snap = snapshotOf(t, w.cat)
	epochOf := func(member string) int32 { return w.s.Groups["g"].Members[member].Epoch }
	steady := func(member string, why string) {
		t.Helper()
		before := w.s.Groups["g"].Epoch
		if out := w.hb(beat("g", member, epochOf(member), nil)); out.Response.ErrorCode != 0 {
			t.Fatalf("%s: %s", why, errOf(out))
		}
		if after := w.s.Groups["g"].Epoch; after != before {
			t.Fatalf("%s: %s's steady heartbeat bumped the group epoch %d -> %d", why, member, before, after)
		}
	}
	w.hb(join("g", "a", "t1"))
	steady("a", "alone")
	steady("a", "alone, again")
	w.hb(join("g", "b", "t2"))
	steady("a", "after b subscribed to t2")
	steady("b", "b steady")
	leave := beat("g", "b", -1, nil)
	if out := w.hb(leave); out.Response.ErrorCode != 0 {
		t.Fatalf("b leaving: %s", errOf(out))
	}
	steady("a", "after b left")
}

// TestFenceReleases: a session expiry removes the member and the survivors get its partitions.
func TestFenceReleases(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	w.hb(join("g", "a", "t"))
	w.hb(join("g", "b", "t"))
	w.hb(beat("g", "a", 2, parts("t", 0, 1)))
	recs, timers := w.s.Fence("g", "a", 0, false)
	if len(recs) == 0 || len(timers) != 4 {
		t.Fatalf("fence: %v %v", recs, timers)
	}
	w.apply(recs)
	out := w.hb(beat("g", "b", 3, Parts{}))
	if !fromWire(out.Response.Assignment).Equal(parts("t", 0, 1)) {
		t.Fatalf("b after a was fenced: epoch %d %v", out.Response.MemberEpoch, fromWire(out.Response.Assignment))
	}
	// A rebalance timer armed at an older epoch does nothing.
	if recs, _ := w.s.Fence("g", "b", 2, true); recs != nil {
		t.Fatal("stale rebalance timer fenced")
	}
	leave := w.hb(beat("g", "b", -1, nil))
	if leave.Response.MemberEpoch != -1 || w.s.ListedState("g") != "Empty" {
		t.Fatalf("leave: %s state %s", errOf(leave), w.s.ListedState("g"))
	}
	code, tombs := w.s.DeleteGroup("g")
	w.apply(tombs)
	if code != 0 || w.s.Owns("g") {
		t.Fatal("empty group not deleted")
	}
}

// TestReplayOrder: any order of each key's latest record rebuilds the same state and indexes.
func TestReplayOrder(t *testing.T) {
	w := newWorld(t, topics("t", 6, "u", 3))
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("m%d", i)
		inst := "i" + id
		r := join("g", id, "t", "u")
		if i%2 == 0 {
			r.InstanceID = &inst
		}
		w.hb(r)
	}
	for round := 0; round < 6; round++ {
		for id, m := range w.s.Groups["g"].Members {
			w.hb(beat("g", id, m.Epoch, m.Assigned))
		}
	}
	latest := map[string]log.Record{}
	var order []string
	for _, r := range w.log {
		k := string(r.Key)
		if _, ok := latest[k]; !ok {
			order = append(order, k)
		}
		latest[k] = r
	}
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 5; trial++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		s := New()
		for _, k := range order {
			if err := s.Replay(latest[k]); err != nil && !latest[k].Tombstone() {
				t.Fatal(err)
			}
		}
		a, b := w.s.Groups["g"], s.Groups["g"]
		if !reflect.DeepEqual(a.owners, b.owners) || !reflect.DeepEqual(a.instances, b.instances) || !reflect.DeepEqual(a.names, b.names) ||
			a.Epoch != b.Epoch || a.AssignmentEpoch != b.AssignmentEpoch || len(a.Members) != len(b.Members) {
			t.Fatalf("trial %d: replayed state differs", trial)
		}
	}
}

func TestStateNames(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	w.hb(join("g", "a", "t"))
	if got := w.s.ListedState("g"); got != "Stable" {
		t.Fatalf("state %q", got)
	}
	w.hb(join("g", "b", "t"))
	if got := w.s.ListedState("g"); got != "Reconciling" {
		t.Fatalf("state %q", got)
	}
	d := w.s.Describe("g", true, w.cat, w.cfg, false)
	if d.ErrorCode != 0 || d.AssignorName != "uniform" || len(d.Members) != 2 || d.Members[0].Assignment.TopicPartitions[0].Topic != "t" {
		t.Fatalf("describe: %+v", d)
	}
	if d := w.s.Describe("x", false, w.cat, w.cfg, true); d.ErrorCode != kerr.GroupIDNotFound.Code || *d.ErrorMessage != "Group x is not a consumer group." {
		t.Fatalf("describe foreign: %+v", d)
	}
}

func TestValidateCommitAndFetch(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	w.hb(join("g", "a", "t"))
	cases := []struct {
		member  string
		epoch   int32
		version int16
		want    int16
	}{
		{"a", 2, 9, 0},
		{"a", 3, 9, kerr.StaleMemberEpoch.Code},
		{"a", 1, 9, kerr.StaleMemberEpoch.Code},
		{"x", 2, 9, kerr.UnknownMemberID.Code},
		{"a", 2, 8, kerr.UnsupportedVersion.Code},
		{"", -1, 9, kerr.UnknownMemberID.Code},
	}
	for _, c := range cases {
		if code, owned := w.s.ValidateCommit("g", c.member, nil, c.epoch, c.version, false); !owned || code != c.want {
			t.Errorf("commit %+v: code %d", c, code)
		}
	}
	if _, owned := w.s.ValidateCommit("other", "a", nil, 1, 9, false); owned {
		t.Error("an id no consumer group has is not owned")
	}
	a := "a"
	if code, _ := w.s.ValidateFetch("g", &a, 3); code != kerr.StaleMemberEpoch.Code {
		t.Errorf("fetch stale: %d", code)
	}
	if code, _ := w.s.ValidateFetch("g", nil, -1); code != 0 {
		t.Errorf("admin fetch: %d", code)
	}
}

// TestAssignmentInterval: a change within the interval after an assignment leaves the group
// Assigning (members reconcile toward the old target) until a heartbeat after the interval
// computes the new one.
func TestAssignmentInterval(t *testing.T) {
	w := newWorld(t, topics("t", 4))
	w.cfg.AssignmentInterval, w.cfg.AssignmentQuiet = time.Second, 0
	w.hb(join("g", "a", "t")) // the first assignment is immediate
	b := w.hb(join("g", "b", "t"))
	if w.s.ListedState("g") != "Assigning" || b.Response.MemberEpoch != 2 {
		t.Fatalf("state %s, b epoch %d", w.s.ListedState("g"), b.Response.MemberEpoch)
	}
	w.now = w.now.Add(999 * time.Millisecond)
	if a := w.hb(beat("g", "a", 2, parts("t", 0, 1, 2, 3))); a.Response.Assignment != nil || w.s.ListedState("g") != "Assigning" {
		t.Fatalf("a target computed before the interval ended: %v", fromWire(a.Response.Assignment))
	}
	w.now = w.now.Add(time.Millisecond)
	a := w.hb(beat("g", "a", 2, parts("t", 0, 1, 2, 3)))
	if g := w.s.Groups["g"]; g.AssignmentEpoch != 3 || len(fromWire(a.Response.Assignment)) != 2 || w.s.ListedState("g") != "Reconciling" {
		t.Fatalf("after the interval: target epoch %d, a %v, state %s", g.AssignmentEpoch, fromWire(a.Response.Assignment), w.s.ListedState("g"))
	}
}

// TestAssignmentQuiet: with a quiet time, a group that has settled is assigned at the next
// heartbeat that changes nothing, before the interval is over; a burst of joins gets one
// assignment after it settles, a group changing without pause waits for the interval, and a
// heartbeat that itself changes the group never computes early.
func TestAssignmentQuiet(t *testing.T) {
	const quiet = 100 * time.Millisecond
	newQuiet := func() *world {
		w := newWorld(t, topics("t", 6))
		w.cfg.AssignmentInterval, w.cfg.AssignmentQuiet = time.Second, quiet
		w.hb(join("g", "a", "t")) // the first assignment is immediate
		return w
	}
	assignedAt := func(w *world) int32 { return w.s.Groups["g"].AssignmentEpoch }
	first := assignedAt(newQuiet()) // a's epoch after its join

	t.Run("burst", func(t *testing.T) {
		w := newQuiet()
		for _, id := range []string{"b", "c", "d"} {
			w.now = w.now.Add(30 * time.Millisecond)
			w.hb(join("g", id, "t"))
		}
		w.now = w.now.Add(quiet - time.Millisecond)
		w.hb(beat("g", "a", first, nil))
		if assignedAt(w) != first {
			t.Fatalf("assigned %v after the last join: target epoch %d", quiet-time.Millisecond, assignedAt(w))
		}
		w.now = w.now.Add(time.Millisecond)
		w.hb(beat("g", "a", first, nil))
		if got, want := assignedAt(w), w.s.Groups["g"].Epoch; got != want || want != first+3 {
			t.Fatalf("quiet for %v: target epoch %d, group epoch %d (want one assignment covering every join)", quiet, got, want)
		}
	})
	t.Run("trickle waits for the interval", func(t *testing.T) {
		w := newQuiet()
		// A join every 90 ms: never quiet for 100 ms, so Kafka's interval rules.
		for i := 0; i < 11; i++ {
			w.now = w.now.Add(90 * time.Millisecond)
			w.hb(join("g", fmt.Sprintf("m%02d", i), "t"))
			w.now = w.now.Add(time.Millisecond)
			w.hb(beat("g", "a", first, nil))
			if elapsed := time.Duration(i+1) * 91 * time.Millisecond; elapsed < time.Second && assignedAt(w) != first {
				t.Fatalf("assigned after %v of constant change", elapsed)
			}
		}
		if assignedAt(w) == first {
			t.Fatalf("no assignment after the interval")
		}
	})
	t.Run("the changing heartbeat waits", func(t *testing.T) {
		w := newQuiet()
		w.now = w.now.Add(5 * quiet) // quiet since the first assignment
		w.hb(join("g", "b", "t"))
		if assignedAt(w) != first {
			t.Fatalf("a join computed the target itself (target epoch %d)", assignedAt(w))
		}
		w.now = w.now.Add(quiet)
		w.hb(beat("g", "b", first, nil))
		if assignedAt(w) != first+1 {
			t.Fatalf("b's steady heartbeat %v after its join: target epoch %d", quiet, assignedAt(w))
		}
	})
	t.Run("after a load", func(t *testing.T) {
		w := newQuiet()
		w.hb(join("g", "b", "t"))
		loaded := New()
		for _, r := range w.log {
			if err := loaded.Replay(r); err != nil {
				t.Fatal(err)
			}
		}
		w.s = loaded
		// The loaded group forgets when b joined but not when it was last assigned.
		w.now = w.now.Add(quiet - time.Millisecond)
		w.hb(beat("g", "a", first, nil))
		if assignedAt(w) != first {
			t.Fatalf("assigned %v after the last assignment", quiet-time.Millisecond)
		}
		w.now = w.now.Add(time.Millisecond)
		w.hb(beat("g", "a", first, nil))
		if assignedAt(w) != first+1 {
			t.Fatalf("a loaded group quiet since its last assignment: target epoch %d", assignedAt(w))
		}
	})
}

// TestClassicLeave: a classic LeaveGroup removes consumer-protocol members by id or by
// instance id (an administrative removal may leave the member id empty) and bumps the epoch once.
func TestClassicLeave(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	inst := "i1"
	w.hb(join("g", "a", "t"))
	r := join("g", "b", "t")
	r.InstanceID = &inst
	w.hb(r)
	epoch := w.s.Groups["g"].Epoch
	other := "i9"
	codes, ids, recs, timers := w.s.Leave("g", []LeaveIdentity{{MemberID: "x"}, {MemberID: "", InstanceID: &inst}, {MemberID: "zz", InstanceID: &inst}, {InstanceID: &other}})
	want := []int16{kerr.UnknownMemberID.Code, 0, kerr.FencedInstanceID.Code, kerr.UnknownMemberID.Code}
	if !reflect.DeepEqual(codes, want) || ids[1] != "b" || len(timers) != 4 {
		t.Fatalf("codes %v ids %v timers %v", codes, ids, timers)
	}
	w.apply(recs)
	if g := w.s.Groups["g"]; g.Members["b"] != nil || g.Epoch != epoch+1 || g.State() == Empty {
		t.Fatalf("after the leave: members %d epoch %d", len(g.Members), g.Epoch)
	}
	_, _, recs, _ = w.s.Leave("g", []LeaveIdentity{{MemberID: "a"}})
	w.apply(recs)
	if g := w.s.Groups["g"]; g.State() != Empty || g.AssignmentEpoch != g.Epoch {
		t.Fatalf("the last member left: state %v target epoch %d epoch %d", g.State(), g.AssignmentEpoch, g.Epoch)
	}
}

// A classic member waiting for a partition another member still holds is not told to rejoin
// (a rejoin would get it nothing more); once the holder lets go it is, and that answer arms
// its join timer unless one is armed, as Kafka 4.4's classicGroupHeartbeatToConsumerGroup.
func TestClassicHeartbeatWaitsForUnreleasedPartitions(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	w.hb(join("g", "a", "t"))
	w.hb(beat("g", "a", 2, parts("t", 0, 1)))
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics, md.Generation = 3, []string{"t"}, -1
	out := w.s.ClassicJoin(ClassicJoinInput{Group: "g", ProtocolType: "consumer", NewMemberID: "b",
		Protocols:        []ClassicProtocol{{Name: "range", Metadata: md.AppendTo(nil)}},
		SessionTimeoutMs: 10000, RebalanceTimeoutMs: 5000, Catalog: w.cat, Config: w.cfg, Now: w.now})
	if out.Code != 0 {
		t.Fatalf("classic join: %d", out.Code)
	}
	w.apply(out.Records)
	b := w.s.Groups["g"].Members["b"]
	if b.State != UnreleasedPartitions {
		t.Fatalf("b is %v, want UNRELEASED_PARTITIONS (a still holds b's target)", b.State)
	}
	joinTimer := func(timers []TimerAction) *TimerAction {
		for i := range timers {
			if timers[i].Kind == JoinTimer {
				return &timers[i]
			}
		}
		return nil
	}
	if code, timers := w.s.ClassicHeartbeat("g", "b", nil, b.Epoch, w.cfg, w.now); code != 0 || joinTimer(timers) != nil {
		t.Fatalf("b's Heartbeat while a holds its partition: code %d, join timer %v", code, joinTimer(timers))
	}
	r := w.hb(beat("g", "a", 2, parts("t", 0, 1))) // a is asked to give one up
	w.hb(beat("g", "a", r.Response.MemberEpoch, fromWire(r.Response.Assignment)))
	code, timers := w.s.ClassicHeartbeat("g", "b", nil, b.Epoch, w.cfg, w.now)
	if jt := joinTimer(timers); code != kerr.RebalanceInProgress.Code || jt == nil || !jt.IfAbsent || jt.After != 5*time.Second {
		t.Fatalf("b's Heartbeat once its partition is free: code %d, join timer %+v", code, jt)
	}
}

func sessionKeyOf(t *testing.T, out HeartbeatOutput) string {
	t.Helper()
	for _, a := range out.Timers {
		if a.Kind == SessionTimer && !a.Cancel {
			return a.Key()
		}
	}
	t.Fatalf("no session timer armed: %+v", out.Timers)
	return ""
}

// Every heartbeat re-arms its member's session timer under the member's own key, also when the
// key comes from the member's cache: a static replacement (which renames a copy of the replaced
// member, cache included) arms the new member's timer, not the replaced one's.
func TestHeartbeatSessionTimerKeyFollowsMember(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	inst := "i1"
	r := join("g", "a", "t")
	r.InstanceID = &inst
	if got := sessionKeyOf(t, w.hb(r)); got != TimerKey(SessionTimer, "g", "a") {
		t.Fatalf("join armed %q", got)
	}
	for i := 0; i < 2; i++ { // the second steady beat reads the cache the first filled
		m := w.s.Groups["g"].Members["a"]
		out := w.hb(beat("g", "a", m.Epoch, m.Assigned))
		if len(out.Records) != 0 || *out.Response.MemberID != "a" {
			t.Fatalf("steady heartbeat: %d records, member %q", len(out.Records), *out.Response.MemberID)
		}
		if got := sessionKeyOf(t, out); got != TimerKey(SessionTimer, "g", "a") {
			t.Fatalf("steady heartbeat armed %q", got)
		}
	}
	leave := beat("g", "a", -2, nil)
	leave.InstanceID = &inst
	w.hb(leave)
	r2 := join("g", "b", "t")
	r2.InstanceID = &inst
	out := w.hb(r2)
	if got := sessionKeyOf(t, out); got != TimerKey(SessionTimer, "g", "b") {
		t.Fatalf("the replacement armed %q, want its own session timer", got)
	}
	m := w.s.Groups["g"].Members["b"]
	if got := sessionKeyOf(t, w.hb(beat("g", "b", m.Epoch, m.Assigned))); got != TimerKey(SessionTimer, "g", "b") {
		t.Fatalf("the replacement's steady heartbeat armed %q", got)
	}
	// The same member id in another group has that group's key.
	w.hb(join("g2", "b", "t"))
	m = w.s.Groups["g2"].Members["b"]
	if got := sessionKeyOf(t, w.hb(beat("g2", "b", m.Epoch, m.Assigned))); got != TimerKey(SessionTimer, "g2", "b") {
		t.Fatalf("member b of g2 armed %q", got)
	}
}

// A steady heartbeat that repeats a field with its stored value changes nothing; one that
// changes any member field writes the member's metadata (the no-copy path must see each field).
func TestHeartbeatFieldChangesAreRecorded(t *testing.T) {
	inst, rack, other := "i1", "r1", "x"
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		edit    func(r *kmsg.ConsumerGroupHeartbeatRequest, in *HeartbeatInput)
		changed bool
	}{
		{"nothing", func(*kmsg.ConsumerGroupHeartbeatRequest, *HeartbeatInput) {}, false},
		{"same values repeated", func(r *kmsg.ConsumerGroupHeartbeatRequest, _ *HeartbeatInput) {
			r.InstanceID, r.RackID, r.RebalanceTimeoutMillis = &inst, &rack, 60000
			r.SubscribedTopicNames, r.SubscribedTopicRegex, r.ServerAssignor = []string{"t", "u"}, str(""), str("uniform")
		}, false},
		{"same names unsorted", func(r *kmsg.ConsumerGroupHeartbeatRequest, _ *HeartbeatInput) {
			r.SubscribedTopicNames = []string{"u", "t", "u"}
		}, false},
		{"rack", func(r *kmsg.ConsumerGroupHeartbeatRequest, _ *HeartbeatInput) { r.RackID = &other }, true},
		{"rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest, _ *HeartbeatInput) { r.RebalanceTimeoutMillis = 5 }, true},
		{"assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest, _ *HeartbeatInput) { r.ServerAssignor = str("range") }, true},
		{"names", func(r *kmsg.ConsumerGroupHeartbeatRequest, _ *HeartbeatInput) { r.SubscribedTopicNames = []string{"t"} }, true},
		{"regex", func(r *kmsg.ConsumerGroupHeartbeatRequest, _ *HeartbeatInput) { r.SubscribedTopicRegex = str("t.*") }, true},
		{"client id", func(_ *kmsg.ConsumerGroupHeartbeatRequest, in *HeartbeatInput) { in.ClientID = "other" }, true},
		{"client host", func(_ *kmsg.ConsumerGroupHeartbeatRequest, in *HeartbeatInput) { in.ClientHost = "/10.0.0.1" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, topics("t", 2, "u", 2))
			r := join("g", "a", "t", "u")
			r.InstanceID, r.RackID, r.ServerAssignor = &inst, &rack, str("uniform")
			w.hb(r)
			m := w.s.Groups["g"].Members["a"]
			req := beat("g", "a", m.Epoch, m.Assigned)
			in := HeartbeatInput{Req: req, ClientID: "c", ClientHost: "/127.0.0.1", Catalog: w.cat, Config: w.cfg, Now: w.now}
			tc.edit(req, &in)
			out := w.s.Heartbeat(in)
			if out.Response.ErrorCode != 0 {
				t.Fatalf("heartbeat: %s", errOf(out))
			}
			key := MemberMetadataRecord("g", newMember("a")).Key
			wrote := false
			for _, rec := range out.Records {
				wrote = wrote || string(rec.Key) == string(key)
			}
			if wrote != tc.changed {
				t.Fatalf("member metadata written: %v, want %v (records %d)", wrote, tc.changed, len(out.Records))
			}
			sessionKeyOf(t, out)
		})
	}
}

// The last consumer-protocol member leaves a group of classic members that stays a consumer
// group (the migration policy refuses the downgrade): its departure bumps the group epoch and
// only a join or a heartbeat computes the next target, so the classic member is told to rejoin
// and its join takes the departed member's partitions. Kafka 4.4 answers NONE here and leaves
// them unassigned (seen with franz-go classic members beside a KIP-848 one that left).
func TestClassicMemberRejoinsForTheTargetAfterTheLastConsumerMemberLeft(t *testing.T) {
	w := newWorld(t, topics("t", 2))
	w.hb(join("g", "a", "t"))
	w.hb(beat("g", "a", 2, parts("t", 0, 1)))
	classicJoin := func(member string, owned ...int32) ClassicJoinOutput {
		t.Helper()
		md := kmsg.NewConsumerMemberMetadata()
		md.Version, md.Topics, md.Generation = 3, []string{"t"}, -1
		if len(owned) > 0 {
			md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: owned}}
		}
		out := w.s.ClassicJoin(ClassicJoinInput{Group: "g", MemberID: member, NewMemberID: "b", ProtocolType: "consumer",
			Protocols:        []ClassicProtocol{{Name: "range", Metadata: md.AppendTo(nil)}},
			SessionTimeoutMs: 10000, RebalanceTimeoutMs: 5000, Catalog: w.cat, Config: w.cfg, Now: w.now})
		if out.Code != 0 {
			t.Fatalf("classic join of %s: %d", member, out.Code)
		}
		w.apply(out.Records)
		return out
	}
	classicJoin("")
	r := w.hb(beat("g", "a", 2, parts("t", 0, 1))) // a gives up b's partition
	w.hb(beat("g", "a", r.Response.MemberEpoch, fromWire(r.Response.Assignment)))
	classicJoin("b")
	b := w.s.Groups["g"].Members["b"]
	if b.State != Stable || len(b.Assigned) != 1 {
		t.Fatalf("b after its rejoin: %v %v", b.State, b.Assigned)
	}
	_, _, recs, _ := w.s.Leave("g", []LeaveIdentity{{MemberID: "a"}})
	w.apply(recs)
	if code, _ := w.s.ClassicHeartbeat("g", "b", nil, b.Epoch, w.cfg, w.now); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("b's Heartbeat after a left: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	var owned []int32
	for tp := range b.Assigned {
		owned = append(owned, tp.Partition)
	}
	if out := classicJoin("b", owned...); len(out.Member.Assigned) != 2 {
		t.Fatalf("b's rejoin after a left: %v, want both partitions", out.Member.Assigned)
	}
}

// TestRegexNewToTheGroupBumpsOnlyWhenItMatches follows Kafka 4.4, which resolves a regex new
// to the group in the background and bumps the group epoch only when the resolution finds
// topics (seen with raw heartbeats: a member joining with a regex that matches nothing joins
// at the current epoch with nothing, and the epoch stays put). A regex another member already
// uses bumps at once, as in Kafka, and so does one that matches topics, even topics the group
// already subscribes to by name. A topic created later that the idle regex matches bumps then.
func TestRegexNewToTheGroupBumpsOnlyWhenItMatches(t *testing.T) {
	settled := func(t *testing.T, w *world) int32 {
		t.Helper()
		for range 4 {
			for _, id := range sortedIDs(w.s.Groups["g"].Members) {
				m := w.s.Groups["g"].Members[id]
				w.hb(beat("g", id, m.Epoch, m.Assigned))
			}
		}
		g := w.s.Groups["g"]
		if g.State() != StableGroup || g.AssignmentEpoch != g.Epoch {
			t.Fatalf("the group did not settle: %v at %d/%d", g.State(), g.Epoch, g.AssignmentEpoch)
		}
		return g.Epoch
	}
	regexJoin := func(member, re string) *kmsg.ConsumerGroupHeartbeatRequest {
		r := join("g", member)
		r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, &re
		return r
	}

	t.Run("matching nothing", func(t *testing.T) {
		w := newWorld(t, topics("t", 2))
		w.hb(join("g", "a", "t"))
		epoch := settled(t, w)
		out := w.hb(regexJoin("b", "x.*"))
		if out.Response.ErrorCode != 0 || out.Response.MemberEpoch != epoch || len(fromWire(out.Response.Assignment)) != 0 {
			t.Fatalf("join with an idle regex: %s at epoch %d with %v, want epoch %d with nothing", errOf(out), out.Response.MemberEpoch, fromWire(out.Response.Assignment), epoch)
		}
		if g := w.s.Groups["g"]; g.Epoch != epoch || g.State() != StableGroup || !g.Members["a"].Assigned.Equal(parts("t", 0, 1)) {
			t.Fatalf("after the join the group is %v at %d, want Stable at %d with a keeping t", g.State(), g.Epoch, epoch)
		}
		// The same regex again is one the group already resolved: Kafka bumps at once.
		if out := w.hb(regexJoin("c", "x.*")); out.Response.MemberEpoch != epoch+1 || w.s.Groups["g"].Epoch != epoch+1 {
			t.Fatalf("a second member with the regex: epoch %d, group at %d, want %d", out.Response.MemberEpoch, w.s.Groups["g"].Epoch, epoch+1)
		}
		epoch = settled(t, w)
		w.cat["xa"] = &meta.Topic{Name: "xa", ID: tid("xa"), Partitions: 2}
		out = w.hb(beat("g", "b", epoch, Parts{}))
		if w.s.Groups["g"].Epoch != epoch+1 || out.Response.MemberEpoch != epoch+1 {
			t.Fatalf("a topic the regex matches appeared: group at %d, b at %d, want %d", w.s.Groups["g"].Epoch, out.Response.MemberEpoch, epoch+1)
		}
	})
	t.Run("the group's first member", func(t *testing.T) {
		w := newWorld(t, topics("t", 2))
		out := w.hb(regexJoin("a", "x.*"))
		g := w.s.Groups["g"]
		if out.Response.ErrorCode != 0 || out.Response.MemberEpoch != 1 || g.Epoch != 1 || g.AssignmentEpoch != 1 || g.State() != StableGroup {
			t.Fatalf("first member with an idle regex: %s at epoch %d, group %v at %d/%d; want everything at 1, Stable", errOf(out), out.Response.MemberEpoch, g.State(), g.Epoch, g.AssignmentEpoch)
		}
		// No group epoch record was written: a reload of the log finds the same group.
		reloaded := New()
		for _, r := range w.log {
			if err := reloaded.Replay(r); err != nil {
				t.Fatal(err)
			}
		}
		if rg := reloaded.Groups["g"]; rg == nil || rg.Epoch != 1 || rg.AssignmentEpoch != 1 || rg.Members["a"] == nil || rg.Members["a"].Epoch != 1 {
			t.Fatalf("the reloaded group differs: %+v", rg)
		}
		w.cat["xa"] = &meta.Topic{Name: "xa", ID: tid("xa"), Partitions: 2}
		out = w.hb(beat("g", "a", 1, Parts{}))
		if out.Response.MemberEpoch != 2 || !fromWire(out.Response.Assignment).Equal(parts("xa", 0, 1)) {
			t.Fatalf("a topic the regex matches appeared: a at %d with %v, want 2 with xa", out.Response.MemberEpoch, fromWire(out.Response.Assignment))
		}
	})
	t.Run("an existing member adding an idle regex", func(t *testing.T) {
		w := newWorld(t, topics("t", 2))
		w.hb(join("g", "a", "t"))
		epoch := settled(t, w)
		r := beat("g", "a", epoch, w.s.Groups["g"].Members["a"].Assigned)
		re := "x.*"
		r.SubscribedTopicRegex = &re
		out := w.hb(r)
		if out.Response.ErrorCode != 0 || out.Response.MemberEpoch != epoch || w.s.Groups["g"].Epoch != epoch {
			t.Fatalf("adding an idle regex: %s at epoch %d, group at %d, want %d", errOf(out), out.Response.MemberEpoch, w.s.Groups["g"].Epoch, epoch)
		}
	})
	t.Run("matching topics already subscribed", func(t *testing.T) {
		w := newWorld(t, topics("t", 2))
		w.hb(join("g", "a", "t"))
		epoch := settled(t, w)
		if out := w.hb(regexJoin("b", "t")); out.Response.MemberEpoch != epoch+1 || w.s.Groups["g"].Epoch != epoch+1 {
			t.Fatalf("a regex matching t: epoch %d, group at %d, want %d", out.Response.MemberEpoch, w.s.Groups["g"].Epoch, epoch+1)
		}
	})
}
