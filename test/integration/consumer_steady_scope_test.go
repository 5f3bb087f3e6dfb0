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
	adm := kadm.NewClient(d.client())
	if _, err := adm.CreateTopic(ctxT(t), 1, 1, nil, "scoped-commits"); err != nil {
		t.Fatal(err)
	}
	group, committer := sameShardGroups(t, "steady-scope", shards)
	const a, b = "member-a-0000000011", "member-b-0000000012"
	var at int64
	commit := func() {
		t.Helper()
		at++
		offs := kadm.Offsets{}
		offs.AddOffset("scoped-commits", 0, at, -1)
		res, err := adm.CommitOffsets(ctxT(t), committer, offs)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("commit %d of %s: %v", at, committer, err)
		}
	}
	first, e := joinCG(t, d, group, a)
	for i := 0; i < 5; i++ {
		commit()
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
		commit()
		resp := second.heartbeat(group, a, moved, false)
		wantCGCode(t, "heartbeat on the second connection", resp, 0)
		moved = resp.MemberEpoch
		time.Sleep(50 * time.Millisecond)
	}
	commit()
	wantCGCode(t, "heartbeat at the old epoch on the first connection", first.heartbeat(group, a, e, false), kerr.FencedMemberEpoch.Code)
	for i := 0; i < 3; i++ {
		commit()
		wantCGCode(t, "heartbeat at the new epoch on the first connection", first.heartbeat(group, a, moved, false), 0)
	}
	fetched, err := adm.FetchOffsets(ctxT(t), committer)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("scoped-commits", 0); !ok || o.Err != nil || o.At != at {
		t.Fatalf("the other group's last commit: %+v (found %v), want offset %d", o, ok, at)
	}
}
