package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 10 defect 14: a description the plugin no longer holds, although the group's stored
// epoch says it does, is asked for again. Kafka 4.4 keeps answering NOT_STORED and never asks
// (spec topology-description §5); coordinatord resets the stored epoch durably and the next
// committed heartbeat solicits, under the usual back-off.

// The memory plugin declares itself volatile: after a restart every stored epoch is reset.
func TestTopologyDescription14_MemoryPluginRestartAsksAgain(t *testing.T) {
	t.Parallel()
	sets := []string{topoPluginKey + "class=memory"}
	d := startStreamsDaemon(t, sets...)
	createStreamsTopics(t, d.Addr, 2, "vol-in-0")
	m, _ := joinTopo(t, d.Addr, "vol", "m1")
	desc := sampleDescription("vol")
	if r := pushTopo(t, d.Addr, "vol", "m1", 0, desc); r.ErrorCode != 0 {
		t.Fatalf("push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	if g := describeTopo(t, d.Addr, "vol")[0]; g.TopologyDescriptionStatus != 3 {
		t.Fatalf("describe before restart: status %d", g.TopologyDescriptionStatus)
	}
	if m.beat().TopologyDescriptionRequired {
		t.Fatal("asked while the description is stored")
	}
	d.stop()
	d.start(sets...)
	m.c, m.corr = dialRaw(t, d.Addr), 0
	if g := describeTopo(t, d.Addr, "vol")[0]; g.ErrorCode != 0 || g.TopologyDescriptionStatus != 1 {
		t.Fatalf("describe after restart: code %d status %d, want NOT_STORED", g.ErrorCode, g.TopologyDescriptionStatus)
	}
	waitFor(t, "the member asked again after the restart", func() bool { return m.beat().TopologyDescriptionRequired })
	if m.beat().TopologyDescriptionRequired {
		t.Fatal("asked twice within one back-off window")
	}
	repushAndDescribe(t, d, m, desc)
	// A second restart, without a describe this time: the plugin's declaration alone resets
	// the stored epoch.
	d.stop()
	d.start(sets...)
	m.c, m.corr = dialRaw(t, d.Addr), 0
	waitFor(t, "the member asked after the second restart", func() bool { return m.beat().TopologyDescriptionRequired })
}

// The file plugin survives restarts, but its directory can be lost behind its back: describe
// notices (the plugin's get finds nothing at the stored epoch) and the member is asked again.
func TestTopologyDescription14_FilePluginLostDirectoryAsksAgain(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	dir := filepath.Join(data, "topology-descriptions")
	d := startStreamsDaemon(t, "log.dirs="+data, topoPluginKey+"class=file", topoPluginKey+"file.dir="+dir)
	createStreamsTopics(t, d.Addr, 2, "lostf-in-0")
	m, _ := joinTopo(t, d.Addr, "lostf", "m1")
	desc := sampleDescription("lostf")
	if r := pushTopo(t, d.Addr, "lostf", "m1", 0, desc); r.ErrorCode != 0 {
		t.Fatalf("push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	if g := describeTopo(t, d.Addr, "lostf")[0]; g.TopologyDescriptionStatus != 3 {
		t.Fatalf("describe: status %d", g.TopologyDescriptionStatus)
	}
	if m.beat().TopologyDescriptionRequired {
		t.Fatal("asked while the description is stored")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	wantStoredGroups(t, d, 1, "after the push")
	if g := describeTopo(t, d.Addr, "lostf")[0]; g.ErrorCode != 0 || g.TopologyDescriptionStatus != 1 {
		t.Fatalf("describe after the loss: code %d status %d, want NOT_STORED", g.ErrorCode, g.TopologyDescriptionStatus)
	}
	wantStoredGroups(t, d, 0, "after the describe found the loss")
	waitFor(t, "the member asked again after the loss", func() bool { return m.beat().TopologyDescriptionRequired })
	if m.beat().TopologyDescriptionRequired {
		t.Fatal("asked twice within one back-off window")
	}
	repushAndDescribe(t, d, m, desc)
	wantStoredGroups(t, d, 1, "after the re-push")
	// Later describes find it again: nothing more is reset.
	if m.beat().TopologyDescriptionRequired {
		t.Fatal("asked again after the re-push")
	}
}

func repushAndDescribe(t *testing.T, d *daemon, m *topoMember, desc kmsg.TopologyDescription) {
	t.Helper()
	if r := pushTopo(t, d.Addr, m.group, m.id, 0, desc); r.ErrorCode != 0 {
		t.Fatalf("re-push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	g := describeTopo(t, d.Addr, m.group)[0]
	if g.TopologyDescriptionStatus != 3 || !sameDescription(g.TopologyDescription, desc) {
		t.Fatalf("describe after the re-push: status %d", g.TopologyDescriptionStatus)
	}
	if m.beat().TopologyDescriptionRequired {
		t.Fatal("asked after the re-push")
	}
}
