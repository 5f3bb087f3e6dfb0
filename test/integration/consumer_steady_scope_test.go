package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// sameShardGroups returns two group ids that Kafka's placement (shard.For) puts on one shard
// of n.
func sameShardGroups(t *testing.T, prefix string, n int32) (string, string) {
	t.Helper()
	first := prefix + "-0"
	for i := 1; i < 1000; i++ {
		if g := fmt.Sprintf("%s-%d", prefix, i); shard.For(g, n) == shard.For(first, n) {
			return first, g
		}
	}
	t.Fatal("no two group ids on one shard")
	return "", ""
}

// Another group on the same shard committing offsets between a steady member's heartbeats
// (each commit a scoped write that leaves the member's ticket valid) changes nothing the
// member sees: its heartbeats keep their answer, the commits are all stored, and once its own
// group's epoch moves the old epoch is still fenced on the connection that held the answer.
func TestConsumerSteadyAnswerBesideAnotherGroupsCommits(t *testing.T) {
	t.Parallel()
	const shards = 8
	d := startDaemon(t, append([]string{fmt.Sprintf("offsets.topic.num.partitions=%d", shards)}, consumerKeys...)...)
	group, other := sameShardGroups(t, "steady-scope", shards)
	busy := committer(t, d, other)
	const a, b = "member-a-0000000011", "member-b-0000000012"
	first, e := joinCG(t, d, group, a)
	for i := 0; i < 5; i++ {
		busy.commit()
		resp := first.heartbeat(group, a, e, false)
		wantCGCode(t, "steady heartbeat beside the other group's commits", resp, 0)
		if resp.MemberEpoch != e {
			t.Fatalf("steady heartbeat answered epoch %d, want %d", resp.MemberEpoch, e)
		}
	}
	joinCG(t, d, group, b)
	second := dialCG(t, d)
	moved := e
	for deadline := time.Now().Add(20 * time.Second); moved == e; {
		if time.Now().After(deadline) {
			t.Fatalf("member a stayed at epoch %d after a second member joined", e)
		}
		busy.commit()
		resp := second.heartbeat(group, a, moved, false)
		wantCGCode(t, "heartbeat on the second connection", resp, 0)
		moved = resp.MemberEpoch
		time.Sleep(50 * time.Millisecond)
	}
	busy.commit()
	wantCGCode(t, "heartbeat at the old epoch on the first connection", first.heartbeat(group, a, e, false), kerr.FencedMemberEpoch.Code)
	for i := 0; i < 3; i++ {
		busy.commit()
		wantCGCode(t, "heartbeat at the new epoch on the first connection", first.heartbeat(group, a, moved, false), 0)
	}
	busy.stored()
}

// otherGroup commits offsets of one group back to back (standalone: generation -1) on a topic
// of its own, as another application sharing the shard would.
type otherGroup struct {
	t     *testing.T
	adm   *kadm.Client
	group string
	at    int64
}

func committer(t *testing.T, d *daemon, group string) *otherGroup {
	t.Helper()
	adm := kadm.NewClient(d.client())
	if _, err := adm.CreateTopic(ctxT(t), 1, 1, nil, "scoped-commits"); err != nil {
		t.Fatal(err)
	}
	return &otherGroup{t: t, adm: adm, group: group}
}

func (o *otherGroup) commit() {
	o.t.Helper()
	o.at++
	offs := kadm.Offsets{}
	offs.AddOffset("scoped-commits", 0, o.at, -1)
	res, err := o.adm.CommitOffsets(ctxT(o.t), o.group, offs)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		o.t.Fatalf("commit %d of %s: %v", o.at, o.group, err)
	}
}

// stored checks that the last commit is what the group's offsets show.
func (o *otherGroup) stored() {
	o.t.Helper()
	fetched, err := o.adm.FetchOffsets(ctxT(o.t), o.group)
	if err != nil {
		o.t.Fatal(err)
	}
	if got, ok := fetched.Lookup("scoped-commits", 0); !ok || got.Err != nil || got.At != o.at {
		o.t.Fatalf("the other group's last commit: %+v (found %v), want offset %d", got, ok, o.at)
	}
}

// The classic side of the same: a Stable group's member whose connection holds its steady
// Heartbeat answer keeps it while another group of the shard commits, and still learns of the
// rebalance a second member starts.
func TestClassicSteadyAnswerBesideAnotherGroupsCommits(t *testing.T) {
	t.Parallel()
	const shards = 8
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0", fmt.Sprintf("offsets.topic.num.partitions=%d", shards))
	group, other := sameShardGroups(t, "steady-scope-classic", shards)
	busy := committer(t, d, other)
	member, gen := stableRaw(t, d, group, nil)
	c := &hbConn{rawConn: dialRaw(t, d.Addr)}
	for i := 0; i < 5; i++ {
		busy.commit()
		wantCode(t, "steady heartbeat beside the other group's commits", c.heartbeat(group, member, gen), 0)
	}
	c.rebalanceSeen(t, d, group, member, gen, busy.commit)
	busy.stored()
}
