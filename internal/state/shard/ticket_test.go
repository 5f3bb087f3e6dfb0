package shard

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

// sessionSet starts a one-shard Set with a timer armed under "session" for tickets to lease.
func sessionSet(t *testing.T) *Set {
	t.Helper()
	set := NewSet(SetOptions{Count: 1, Backend: memlog.New()})
	set.Start()
	t.Cleanup(func() { set.Close(context.Background()) })
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set.WaitReady(wctx)
	if _, err := set.For("g").Write(context.Background(), func(c *runtime.Ctx[*Machine], _ *Machine) runtime.Result {
		c.Schedule("session", time.Hour, func(*runtime.Ctx[*Machine], *Machine) runtime.Result { return runtime.Result{} })
		return runtime.Result{}
	}); err != nil {
		t.Fatal(err)
	}
	return set
}

// A steady heartbeat's ticket is good only on the shard its group is routed to now: once the
// serving gate closes (or the shard is disowned) lookups give the NotOwned placeholder, and the
// ticket of the old runtime, still ACTIVE and unchanged, must not answer for it.
func TestTicketNotValidOnceTheShardIsNoLongerServed(t *testing.T) {
	set := sessionSet(t)
	ctx := context.Background()
	sh := set.For("g")
	v, err := sh.Write(ctx, func(c *runtime.Ctx[*Machine], _ *Machine) runtime.Result {
		return runtime.Result{Response: c.Ticket("session", "g")}
	})
	if err != nil {
		t.Fatal(err)
	}
	tk := v.(*runtime.Ticket)
	if !set.For("g").Valid(tk, time.Minute) {
		t.Fatal("a fresh ticket is not valid on its own shard")
	}
	serving := true
	set.SetServing(func() bool { return serving })
	serving = false
	if set.For("g").Valid(tk, time.Minute) {
		t.Fatal("a ticket answered for a shard this node no longer serves")
	}
	serving = true
	if !set.For("g").Valid(tk, time.Minute) {
		t.Fatal("the ticket is not valid once the shard is served again, unchanged")
	}
}

// CommitOffsets declares its scope only when its group already has committed offsets: then a
// heartbeat ticket of another group on the shard stays valid and one of its own group ends; a
// group's first commit (it creates the group's offsets entry) ends every ticket.
func TestCommitOffsetsScopedToItsGroupOnceItHasOffsets(t *testing.T) {
	ctx, sh := context.Background(), sessionSet(t).For("a") // the one shard of every group
	ticket := func() *runtime.Ticket {
		t.Helper()
		v, err := sh.Write(ctx, func(c *runtime.Ctx[*Machine], _ *Machine) runtime.Result {
			return runtime.Result{Response: c.Ticket("session", "a")}
		})
		if err != nil {
			t.Fatal(err)
		}
		return v.(*runtime.Ticket)
	}
	commit := func(group string) {
		t.Helper()
		v, err := sh.Write(ctx, CommitOffsets(CommitRequest{Group: group, Generation: -1, Version: 9, Partitions: parts(tp0), MaxMetadata: 10}))
		if err != nil || v.([]int16)[0] != 0 {
			t.Fatalf("commit of %s: %v %v", group, v, err)
		}
	}
	tk := ticket()
	commit("b")
	if sh.Valid(tk, time.Minute) {
		t.Fatal("group b's first commit left group a's ticket valid")
	}
	tk = ticket()
	commit("b")
	if !sh.Valid(tk, time.Minute) {
		t.Fatal("a commit of group b, which has offsets, ended group a's ticket")
	}
	commit("a")
	tk = ticket()
	commit("a")
	if sh.Valid(tk, time.Minute) {
		t.Fatal("a commit of group a left a's own ticket valid")
	}
}
