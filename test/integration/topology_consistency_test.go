package integration

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topology description plugin (KIP-1331): the stored-groups gauge, concurrent pushes and the
// cleanup cycle racing a push, over the wire with the real binary (spec topology-description
// §3.5, §6.5, §7.4).

const storedGroupsMetric = "coordinatord_streams_group_topology_description_stored_groups"

// metricValue reads one unlabelled series from the admin listener's /metrics.
func metricValue(t *testing.T, d *daemon, name string) float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+d.Admin+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: HTTP %d", code)
	}
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

func wantStoredGroups(t *testing.T, d *daemon, want float64, when string) {
	t.Helper()
	if got := metricValue(t, d, storedGroupsMetric); got != want {
		t.Fatalf("%s: stored_groups = %v, want %v", when, got, want)
	}
}

// §7.4: the stored-groups gauge counts the groups whose stored epoch is real. It follows
// pushes (also a redundant push that fails and leaves the group UNCERTAIN), DeleteGroups, a
// restart (recounted from the loaded state) and the cleanup cycle plus the sweep's tombstone.
func TestTopologyDescription7_4_StoredGroupsGauge(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	// Default check interval: no cleanup cycle runs at first. Member a sends no heartbeat between
	// its join and the restart: a session as long as the test keeps it from expiring on a loaded
	// machine, which the short cleanup interval after the restart would turn into a removal.
	sets := append(httpPluginSettings(svc), "group.streams.session.timeout.ms=45000")
	d := startStreamsDaemon(t, sets...)
	createStreamsTopics(t, d.Addr, 2, "gauge-a-in-0", "gauge-b-in-0")
	wantStoredGroups(t, d, 0, "at start")
	a, _ := joinTopo(t, d.Addr, "gauge-a", "m1")
	b, _ := joinTopo(t, d.Addr, "gauge-b", "m1")
	wantStoredGroups(t, d, 0, "groups without descriptions")
	if r := pushTopo(t, d.Addr, "gauge-a", "m1", 0, sampleDescription("gauge-a")); r.ErrorCode != 0 {
		t.Fatalf("push a: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	wantStoredGroups(t, d, 1, "after the first push")
	if r := pushTopo(t, d.Addr, "gauge-b", "m1", 0, sampleDescription("gauge-b")); r.ErrorCode != 0 {
		t.Fatalf("push b: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	wantStoredGroups(t, d, 2, "after the second push")
	// A redundant push that fails transiently leaves the group UNCERTAIN (§3.5): not counted.
	svc.set(func(s *topoService) { s.putStatus, s.putBody = 503, "backend offline" })
	if r := pushTopo(t, d.Addr, "gauge-a", "m1", 0, sampleDescription("gauge-a")); r.ErrorCode != kerr.StreamsTopologyDescriptionUpdateFailed.Code {
		t.Fatalf("failing redundant push: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	wantStoredGroups(t, d, 1, "after a failed redundant push")
	svc.set(func(s *topoService) { s.putStatus, s.putBody = 0, "" })
	if r := pushTopo(t, d.Addr, "gauge-a", "m1", 0, sampleDescription("gauge-a")); r.ErrorCode != 0 {
		t.Fatalf("re-push a: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	wantStoredGroups(t, d, 2, "after the re-push")
	b.leave()
	if g := deleteGroupsRaw(t, d.Addr, 3, "gauge-b")["gauge-b"]; g.ErrorCode != 0 {
		t.Fatalf("delete b: %d %v", g.ErrorCode, g.ErrorMessage)
	}
	wantStoredGroups(t, d, 1, "after DeleteGroups")

	// Restart with a short cleanup interval: the new process counts the loaded state.
	d.stop()
	d.start(append(sets, "offsets.retention.check.interval.ms=200")...)
	a.c, a.corr = dialRaw(t, d.Addr), 0
	a.beat()
	waitFor(t, "stored_groups recounted after the restart", func() bool { return metricValue(t, d, storedGroupsMetric) == 1 })
	// The member leaves: the cleanup releases the description, the sweep removes the group.
	a.leave()
	waitFor(t, "idle group removed", func() bool { return describeTopo(t, d.Addr, "gauge-a")[0].ErrorCode == kerr.GroupIDNotFound.Code })
	wantStoredGroups(t, d, 0, "after cleanup and tombstone")
	if _, _, stored := svc.count(); stored != 0 {
		t.Fatalf("plugin still holds %d descriptions", stored)
	}
}

// §3.5: ten members push the same epoch at once (one of them was asked, the others were not).
// All ten plugin calls overlap; every push answers NONE, the plugin holds exactly one
// description, describe returns it byte for byte, and nobody is asked again at that epoch.
func TestTopologyDescription3_5_ConcurrentPushesOfOneGroup(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	release := make(chan struct{})
	svc.set(func(s *topoService) { s.putRelease = release })
	d := startStreamsDaemon(t, append(httpPluginSettings(svc), topoPluginKey+"call.timeout.ms=60000",
		topoPluginKey+"http.request.timeout.ms=60000")...)
	createStreamsTopics(t, d.Addr, 4, "conc-in-0")
	const n = 10
	var members []*topoMember
	asked := 0
	for i := range n {
		m, join := joinTopo(t, d.Addr, "conc", fmt.Sprintf("m%d", i))
		if join.TopologyDescriptionRequired {
			asked++
		}
		members = append(members, m)
	}
	if asked != 1 {
		t.Fatalf("%d of %d joining members were asked to push, want 1", asked, n)
	}
	desc := sampleDescription("conc")
	var wg sync.WaitGroup
	codes := make([]*kmsg.StreamsGroupTopologyDescriptionUpdateResponse, n)
	for i, m := range members {
		wg.Go(func() { codes[i] = pushTopo(t, d.Addr, "conc", m.id, 0, desc) })
	}
	// Every push reaches the plugin before any is answered: the calls really overlap.
	for i := range n {
		select {
		case <-svc.putArrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d pushes reached the plugin", i, n)
		}
	}
	close(release)
	wg.Wait()
	for i, r := range codes {
		if r.ErrorCode != 0 || r.ErrorMessage != nil {
			t.Errorf("push of m%d: %d %v", i, r.ErrorCode, r.ErrorMessage)
		}
	}
	svc.mu.Lock()
	puts, keys := svc.puts, make([]string, 0, len(svc.stored))
	for k := range svc.stored {
		keys = append(keys, k)
	}
	svc.mu.Unlock()
	if puts != n || len(keys) != 1 || keys[0] != "conc/0" {
		t.Fatalf("plugin saw %d sets and holds %v, want %d sets and exactly conc/0", puts, keys, n)
	}
	g := describeTopo(t, d.Addr, "conc")[0]
	if g.ErrorCode != 0 || g.TopologyDescriptionStatus != 3 || !sameDescription(g.TopologyDescription, desc) {
		t.Fatalf("describe: code %d status %d, or the description differs from the push", g.ErrorCode, g.TopologyDescriptionStatus)
	}
	for range 3 {
		for _, m := range members {
			if r := m.beat(); r.TopologyDescriptionRequired {
				t.Fatalf("%s asked again at the stored epoch", m.id)
			}
		}
	}
	wantStoredGroups(t, d, 1, "after the concurrent pushes")
}

// §6.5: the periodic cleanup races a push whose plugin set is slow. The member leaves while
// its push is inside the plugin; the cycle deletes the description and the sweep removes the
// group; then the set lands. Whatever the timing, the end state is consistent: the group and
// its description are both gone — never a description orphaned in the plugin, never a
// stored epoch the plugin does not hold.
func TestTopologyDescription6_5_CleanupRacingPush(t *testing.T) {
	t.Parallel()
	svc := newTopoService(t)
	d := startStreamsDaemon(t, append(httpPluginSettings(svc), "offsets.retention.check.interval.ms=100",
		topoPluginKey+"call.timeout.ms=60000", topoPluginKey+"http.request.timeout.ms=60000")...)
	// hold: how long the set stays in the plugin after the member left; 0 = until the group
	// is gone (the deterministic worst case).
	for i, hold := range []time.Duration{0, 0, 10 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond} {
		group := fmt.Sprintf("race%d", i)
		createStreamsTopics(t, d.Addr, 1, group+"-in-0")
		release := make(chan struct{})
		svc.set(func(s *topoService) { s.putRelease = release })
		m, _ := joinTopo(t, d.Addr, group, "m1")
		pushed := make(chan *kmsg.StreamsGroupTopologyDescriptionUpdateResponse, 1)
		go func() { pushed <- pushTopo(t, d.Addr, group, "m1", 0, sampleDescription(group)) }()
		select {
		case <-svc.putArrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the plugin never received the push", group)
		}
		m.leave()
		if hold == 0 {
			waitFor(t, group+" removed while its push is in the plugin", func() bool {
				return describeTopo(t, d.Addr, group)[0].ErrorCode == kerr.GroupIDNotFound.Code
			})
		} else {
			time.Sleep(hold)
		}
		close(release)
		var r *kmsg.StreamsGroupTopologyDescriptionUpdateResponse
		select {
		case r = <-pushed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: push not answered after the plugin returned", group)
		}
		switch r.ErrorCode {
		case 0, kerr.GroupIDNotFound.Code:
		default:
			t.Fatalf("%s: push answered %d %v", group, r.ErrorCode, r.ErrorMessage)
		}
		if hold == 0 {
			// The group was gone before the set landed: nothing may stay in the plugin.
			if r.ErrorCode != kerr.GroupIDNotFound.Code {
				t.Fatalf("%s: push to a removed group answered %d", group, r.ErrorCode)
			}
			if held := svc.holds(group); held != 0 {
				t.Fatalf("%s: the plugin holds %d orphaned descriptions of a removed group", group, held)
			}
		}
		// Either way the idle group ends up removed together with its description.
		waitFor(t, group+" removed", func() bool {
			return describeTopo(t, d.Addr, group)[0].ErrorCode == kerr.GroupIDNotFound.Code
		})
		if held := svc.holds(group); held != 0 {
			t.Fatalf("%s (hold %v): the plugin holds %d orphaned descriptions", group, hold, held)
		}
		svc.set(func(s *topoService) { s.putRelease = nil })
	}
	wantStoredGroups(t, d, 0, "after every race")
}
