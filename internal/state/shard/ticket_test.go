package shard

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

// A steady heartbeat's ticket is good only on the shard its group is routed to now: once the
// serving gate closes (or the shard is disowned) lookups give the NotOwned placeholder, and the
// ticket of the old runtime, still ACTIVE and unchanged, must not answer for it.
func TestTicketNotValidOnceTheShardIsNoLongerServed(t *testing.T) {
	set := NewSet(SetOptions{Count: 1, Backend: memlog.New()})
	set.Start()
	defer set.Close(context.Background())
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set.WaitReady(wctx)
	ctx := context.Background()
	sh := set.For("g")
	if _, err := sh.Write(ctx, func(c *runtime.Ctx[*Machine], _ *Machine) runtime.Result {
		c.Schedule("session", time.Hour, func(*runtime.Ctx[*Machine], *Machine) runtime.Result { return runtime.Result{} })
		return runtime.Result{}
	}); err != nil {
		t.Fatal(err)
	}
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
