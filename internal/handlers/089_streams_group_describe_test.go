package handlers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/plugin"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Issue 10 defect 14: once a describe found the plugin without the description the stored
// epoch claims, the next committed heartbeat asks a member again, under the usual back-off:
// one member per window, and an active window (a member asked and not yet pushed) is not
// cut short by the loss.
func TestTopologyDescription14_LostDescriptionIsAskedUnderBackoff(t *testing.T) {
	groups := shard.NewSet(shard.SetOptions{Count: 2, Backend: memlog.New()})
	groups.Start()
	groups.WaitReady(context.Background())
	defer groups.Close(context.Background())
	tbl := &Table{deps: Deps{Groups: groups, Topology: memoryCaller(t)}, log: zap.NewNop()}
	ctx := context.Background()
	for _, id := range []string{"lost", "windowed"} {
		g := &streams.Group{ID: id, StoredDescriptionEpoch: 3, FailedDescriptionEpoch: -1}
		_, err := groups.For(id).Write(ctx, func(*runtime.Ctx[*shard.Machine], *shard.Machine) runtime.Result {
			return runtime.Result{Records: []log.Record{
				streams.GroupMetadataRecord(g, 1, 0, 3, nil), streams.TopologyRecord(id, &streams.Topology{Epoch: 3}),
			}}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	epochs := func(id string) streams.DescriptionEpochs {
		v, err := groups.For(id).Read(ctx, shard.StreamsDescriptionEpochsOf(id))
		if err != nil || v == nil {
			t.Fatalf("%s: %v %v", id, v, err)
		}
		return v.(streams.DescriptionEpochs)
	}
	asked := func(id string) bool {
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = id, "m", 1
		resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
		tbl.maybeSolicitTopologyDescription(ctx, 1, req, streams.HeartbeatOutput{Response: resp, Description: epochs(id)})
		return resp.TopologyDescriptionRequired
	}
	if asked("lost") || asked("windowed") {
		t.Fatal("asked while the stored epoch is the topology epoch")
	}
	// "windowed" has a solicitation window at epoch 3 running already.
	tbl.deps.Topology.Backoff().Solicit("windowed", 3)

	tbl.descriptionsLost(ctx, []plugin.GetRequest{{Group: "lost", Epoch: 3}, {Group: "windowed", Epoch: 3}, {Group: "gone", Epoch: 3}})
	for _, id := range []string{"lost", "windowed"} {
		if d := epochs(id); d.Stored != streams.DescriptionUncertain || d.Topology != 3 {
			t.Fatalf("%s after the loss: %+v", id, d)
		}
	}
	if !asked("lost") {
		t.Fatal("not asked after the loss")
	}
	if asked("lost") {
		t.Fatal("asked twice in one back-off window")
	}
	if asked("windowed") {
		t.Fatal("the loss cut a running back-off window short")
	}
	// A loss reported for an epoch the group no longer claims changes nothing.
	tbl.descriptionsLost(ctx, []plugin.GetRequest{{Group: "lost", Epoch: 2}})
	if d := epochs("lost"); d.Stored != streams.DescriptionUncertain {
		t.Fatalf("after a stale loss report: %+v", d)
	}
}

// lateSetPlugin is the memory plugin whose Set for a group in hold waits for release, ignoring
// its context, as a plugin stuck in I/O would.
type lateSetPlugin struct {
	*plugin.Memory
	hold    map[string]bool
	release chan struct{}
	landed  atomic.Int32
}

func (p *lateSetPlugin) Set(ctx context.Context, group string, epoch int32, d *topologyplugin.Description) error {
	if p.hold[group] {
		<-p.release
		defer p.landed.Add(1)
		return p.Memory.Set(context.Background(), group, epoch, d)
	}
	return p.Memory.Set(ctx, group, epoch, d)
}

// A push whose plugin set timed out answered 135 and recorded nothing; its group was then
// released and removed (DeleteGroups or the cleanup deleted the description before the set
// landed). When the set finally succeeds, the description it stored is deleted, since no group
// is left to release it. A group still UNCERTAIN keeps it: delete and cleanup release it later.
func TestTopologyDescription3_4_LateSetOfRemovedGroupIsDeleted(t *testing.T) {
	groups := shard.NewSet(shard.SetOptions{Count: 2, Backend: memlog.New()})
	groups.Start()
	groups.WaitReady(context.Background())
	defer groups.Close(context.Background())
	mem, err := plugin.NewMemory(topologyplugin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &lateSetPlugin{Memory: mem.(*plugin.Memory), hold: map[string]bool{"gone": true}, release: make(chan struct{})}
	caller := plugin.NewCaller(plugin.Options{Plugin: p, Name: "late", CallTimeout: 50 * time.Millisecond}, nil)
	defer caller.Close()
	tbl := New(Deps{Groups: groups, Topology: caller})
	ctx := context.Background()
	for _, id := range []string{"gone", "kept"} {
		g := &streams.Group{ID: id, StoredDescriptionEpoch: streams.DescriptionUncertain, FailedDescriptionEpoch: -1}
		if _, err := groups.For(id).Write(ctx, func(*runtime.Ctx[*shard.Machine], *shard.Machine) runtime.Result {
			return runtime.Result{Records: []log.Record{streams.GroupMetadataRecord(g, 1, 0, 3, nil), streams.TopologyRecord(id, &streams.Topology{Epoch: 3})}}
		}); err != nil {
			t.Fatal(err)
		}
	}
	d := &topologyplugin.Description{Subtopologies: []topologyplugin.Subtopology{{ID: "0"}}}
	if err := caller.Set(ctx, "gone", 3, d); err == nil {
		t.Fatal("the held set must time out")
	}
	if _, err := groups.For("gone").Write(ctx, func(_ *runtime.Ctx[*shard.Machine], m *shard.Machine) runtime.Result {
		return runtime.Result{Records: m.Streams.Tombstones("gone")}
	}); err != nil {
		t.Fatal(err)
	}
	close(p.release)
	for p.landed.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := mem.Get(ctx, "gone", 3)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the description stored after its group was removed stays in the plugin")
		}
		time.Sleep(5 * time.Millisecond)
	}

	if err := mem.Set(ctx, "kept", 3, d); err != nil {
		t.Fatal(err)
	}
	tbl.lateDescriptionSet("kept", 3)
	if got, _ := mem.Get(ctx, "kept", 3); got == nil {
		t.Fatal("the description of a group still UNCERTAIN was deleted")
	}
}

// The cleanup cycle drops the back-off entries of groups that no longer exist (removed by
// member expiry and the offsets sweep, which never touch the plugin), instead of leaving them
// to the back-off's lazy prune; entries of live groups keep their window.
func TestTopologyDescription2_3_CleanupPrunesBackoffOfRemovedGroups(t *testing.T) {
	groups := shard.NewSet(shard.SetOptions{Count: 2, Backend: memlog.New()})
	groups.Start()
	groups.WaitReady(context.Background())
	defer groups.Close(context.Background())
	tbl := &Table{deps: Deps{Groups: groups, Topology: memoryCaller(t)}, log: zap.NewNop()}
	ctx := context.Background()
	g := &streams.Group{ID: "live", StoredDescriptionEpoch: streams.DescriptionNone, FailedDescriptionEpoch: -1}
	if _, err := groups.For("live").Write(ctx, func(*runtime.Ctx[*shard.Machine], *shard.Machine) runtime.Result {
		return runtime.Result{Records: []log.Record{streams.GroupMetadataRecord(g, 1, 0, 3, nil)}}
	}); err != nil {
		t.Fatal(err)
	}
	b := tbl.deps.Topology.Backoff()
	for _, id := range []string{"live", "gone-1", "gone-2"} {
		b.Solicit(id, 3)
	}
	tbl.TopologyCleanup(ctx)
	if got := b.Groups(); len(got) != 1 || got[0] != "live" || b.Len() != 1 {
		t.Fatalf("back-off entries after the cleanup: %v (len %d), want only live", got, b.Len())
	}
	if b.Solicit("live", 3) {
		t.Fatal("the live group's window was cut short")
	}
}
