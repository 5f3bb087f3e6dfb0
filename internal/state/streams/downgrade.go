package streams

import (
	"fmt"
	"sort"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// Online downgrade: streams group -> classic group (spec online-migration §5).

// Downgrade is a decided (or declined) conversion of a streams group whose remaining members
// all talk the classic protocol. Converted: Records of the removal are the streams tombstones
// of §7.2 steps 1-6 and the shard appends the classic group built from this view (step 7).
type Downgrade struct {
	Converted bool
	// Reason names why a group left with only classic members stays a streams group.
	Reason     string
	Generation int32
	Leader     string
	Members    []ClassicMemberView
}

// DowngradeSettings are what a downgrade check needs beyond the group.
type DowngradeSettings struct {
	Policy MigrationPolicy
	// ClassicMaxSize is group.max.size (§5.2 D4); 0: no bound.
	ClassicMaxSize int32
	// Catalog configures the topology for the classic assignments; nil: the last heartbeat's.
	Catalog Catalog
	Now     time.Time
}

// DowngradeSettings are the downgrade settings of a configuration (cat may be nil).
func (c Config) DowngradeSettings(cat Catalog, now time.Time) DowngradeSettings {
	return DowngradeSettings{Policy: c.MigrationPolicy, ClassicMaxSize: c.ClassicMaxSize, Catalog: cat, Now: now}
}

// removeMembers removes members from the group (§5.1): the normal removal — their tombstones,
// one epoch bump, a fresh target epoch when the group empties — or, when §5.2 holds for those
// who remain, the downgrade batch instead.
func (s *State) removeMembers(g *Group, removed []string, ds DowngradeSettings) ([]log.Record, []TimerAction, *Downgrade) {
	var timers []TimerAction
	gone := map[string]bool{}
	for _, id := range removed {
		gone[id] = true
	}
	for id := range g.Members {
		if gone[id] {
			timers = append(timers, cancelAllTimers(g.ID, id)...)
		}
	}
	dg := downgradeOf(g, gone, ds)
	if dg != nil && dg.Converted {
		for id := range g.Members {
			if !gone[id] {
				timers = append(timers, cancelAllTimers(g.ID, id)...)
			}
		}
		return s.Tombstones(g.ID), timers, dg
	}
	var recs []log.Record
	for _, id := range sortedMemberIDs(g.Members) {
		if gone[id] {
			recs = append(recs, memberTombstones(g.ID, g.Members[id])...)
		}
	}
	recs = append(recs, GroupMetadataRecord(g, g.Epoch+1, g.MetadataHash, g.ValidatedTopologyEpoch, g.AssignmentConfigs))
	if len(gone) >= len(g.Members) {
		recs = append(recs, TargetMetadataRecord(g.ID, g.Epoch+1, 0))
	}
	return recs, timers, dg
}

// downgradeOf checks §5.2 for the members that remain after a removal. It returns nil when the
// question does not arise (a streams member remains, or nobody does), a declined Downgrade with
// the reason when D3-D6 fail, and the conversion otherwise.
func downgradeOf(g *Group, gone map[string]bool, ds DowngradeSettings) *Downgrade {
	var rest []*Member
	for _, id := range sortedMemberIDs(g.Members) {
		m := g.Members[id]
		if gone[id] {
			continue
		}
		if m.Classic == nil || m.Epoch == -2 {
			return nil // D1: a streams member (also one that left temporarily) remains
		}
		rest = append(rest, m)
	}
	if len(rest) == 0 {
		return nil // D2: the group stays, empty; a classic join converts it offline
	}
	switch {
	case !ds.Policy.AllowsDowngrade():
		return &Downgrade{Reason: "group.streams.migration.policy is " + string(ds.Policy.effective())}
	case ds.ClassicMaxSize > 0 && int64(len(rest)) > int64(ds.ClassicMaxSize):
		return &Downgrade{Reason: fmt.Sprintf("its %d members exceed group.max.size %d", len(rest), ds.ClassicMaxSize)}
	case g.StoredDescriptionEpoch != -1:
		return &Downgrade{Reason: "topology description held by the plugin"}
	}
	cat := ds.Catalog
	if cat == nil {
		cat = g.soft.catalog
	}
	var configured *Configured
	if cat != nil && g.Topology != nil {
		configured, _, _ = g.configure(g.Topology, cat)
	}
	members := map[string]*Member{}
	for _, m := range rest {
		members[m.ID] = m
	}
	dg := &Downgrade{Converted: true, Generation: g.Epoch, Leader: rest[0].ID}
	for _, m := range rest {
		decoded, err := m.Classic.decode()
		if err != nil { // D6: never expected, join validated it
			return &Downgrade{Reason: fmt.Sprintf("member %s has undecodable classic metadata: %v", m.ID, err)}
		}
		// The current assignment, not the target: it never holds a task another member may
		// still run (§5.3).
		a, err := classicAssignment(ClassicAssignmentInput{Member: m, Decoded: decoded, Members: members, Configured: configured, Now: ds.Now})
		if err != nil {
			return &Downgrade{Reason: fmt.Sprintf("member %s: %v", m.ID, err)}
		}
		dg.Members = append(dg.Members, ClassicMemberView{ID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RebalanceTimeoutMs: m.RebalanceTimeoutMs, SessionTimeoutMs: m.Classic.SessionTimeoutMs, Protocols: m.Classic.Protocols, Assignment: a})
	}
	sort.Slice(dg.Members, func(i, j int) bool { return dg.Members[i].ID < dg.Members[j].ID })
	return dg
}

// DowngradeCheck re-checks §5.2 for a streams group whose members are all classic members, as a
// freshly loaded shard does (§7.7): a downgrade declined earlier (policy since changed, or a
// topology description since released) happens now. Nothing when it still does not apply.
func (s *State) DowngradeCheck(group string, ds DowngradeSettings) ([]log.Record, []TimerAction, *Downgrade) {
	g := s.Groups[group]
	if g == nil || len(g.Members) == 0 {
		return nil, nil, nil
	}
	dg := downgradeOf(g, nil, ds)
	if dg == nil || !dg.Converted {
		return nil, nil, nil
	}
	var timers []TimerAction
	for id := range g.Members {
		timers = append(timers, cancelAllTimers(g.ID, id)...)
	}
	return s.Tombstones(g.ID), timers, dg
}

// AllClassic lists the streams groups whose members all talk the classic protocol.
func (s *State) AllClassic() []string {
	var out []string
	for id, g := range s.Groups {
		if len(g.Members) > 0 && g.ClassicMembers() == len(g.Members) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
