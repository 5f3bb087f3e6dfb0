package streams

import (
	"fmt"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Topology description bookkeeping (KIP-1331, spec topology-description §0.4). A streams group
// persists, on its GroupMetadata record, which topology epoch the plugin holds a description of
// (StoredDescriptionEpoch) and which epoch the plugin rejected for good
// (FailedDescriptionEpoch). Both fields have been in value version 0 of the record since the
// first streams build, so no new record version is needed; ordinary rewrites of the record
// (epoch bumps, fences) carry them forward because GroupMetadataRecord reads them off the group.

const (
	// DescriptionNone: the plugin holds nothing for the group.
	DescriptionNone int32 = -1
	// DescriptionUncertain: a plugin set or delete may have been half done. Every change of
	// plugin contents first commits this value (ARCHITECTURE §4.10 step 2), so a crash between
	// the plugin call and the outcome record leaves a group that is both re-solicited (it
	// never equals a real epoch) and reclaimable by delete and cleanup (it is not NONE).
	DescriptionUncertain int32 = -2
)

// DescriptionEpochs is what the topology description paths need to know about a group.
type DescriptionEpochs struct {
	Topology int32 // current topology epoch, -1 without a topology
	Stored   int32
	Failed   int32
	Empty    bool // no members
}

// DescriptionEpochs returns a group's description epochs; ok is false when no streams group
// has the id.
func (s *State) DescriptionEpochs(group string) (DescriptionEpochs, bool) {
	g := s.Groups[group]
	if g == nil {
		return DescriptionEpochs{}, false
	}
	return g.descriptionEpochs(), true
}

func (g *Group) descriptionEpochs() DescriptionEpochs {
	d := DescriptionEpochs{Topology: -1, Stored: g.StoredDescriptionEpoch, Failed: g.FailedDescriptionEpoch, Empty: len(g.Members) == 0}
	if g.Topology != nil {
		d.Topology = g.Topology.Epoch
	}
	return d
}

// CheckDescriptionPush applies steps 10-12 of spec §3.1 to a StreamsGroupTopologyDescriptionUpdate:
// the group exists and is a streams group, the member is current, the pushed epoch is the
// group's topology epoch. The checks never touch the back-off (spec §2.3).
func (s *State) CheckDescriptionPush(group, member string, epoch int32) (code int16, msg string) {
	g := s.Groups[group]
	if g == nil {
		return kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s not found.", group)
	}
	if g.Members[member] == nil {
		return kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", member, group)
	}
	if cur := g.descriptionEpochs().Topology; epoch != cur {
		return kerr.StreamsInvalidTopologyEpoch.Code, fmt.Sprintf("Topology epoch %d does not match the group's current topology epoch %d.", epoch, cur)
	}
	return 0, ""
}

// descriptionRecord rewrites a group's metadata record with new description epochs and
// everything else unchanged.
func descriptionRecord(g *Group, stored, failed int32) log.Record {
	c := *g
	c.StoredDescriptionEpoch, c.FailedDescriptionEpoch = stored, failed
	return GroupMetadataRecord(&c, g.Epoch, g.MetadataHash, g.ValidatedTopologyEpoch, g.AssignmentConfigs)
}

// MarkDescriptionUncertain is the durable barrier written before a plugin call (spec §3.1 step
// 14, §4 step 4, §6.3 step 2): stored := UNCERTAIN for every group that is still a streams
// group (and, with requireEmpty, still has no members). kept lists those groups in order.
func (s *State) MarkDescriptionUncertain(groups []string, requireEmpty bool) (recs []log.Record, kept []string) {
	for _, id := range groups {
		g := s.Groups[id]
		if g == nil || (requireEmpty && len(g.Members) > 0) {
			continue
		}
		kept = append(kept, id)
		if g.StoredDescriptionEpoch != DescriptionUncertain {
			recs = append(recs, descriptionRecord(g, DescriptionUncertain, g.FailedDescriptionEpoch))
		}
	}
	return recs, kept
}

// DescriptionStored records a successful plugin set at epoch (spec §3.3 success-record
// guard): UNCERTAIN or a lower epoch becomes epoch; an equal or higher one is kept (never
// regress); NONE becomes UNCERTAIN (a delete ran in between, so what the plugin holds is
// unknown). found is false when the group is gone.
func (s *State) DescriptionStored(group string, epoch int32) (recs []log.Record, found bool) {
	g := s.Groups[group]
	if g == nil {
		return nil, false
	}
	switch st := g.StoredDescriptionEpoch; {
	case st >= epoch:
		return nil, true
	case st == DescriptionNone:
		return []log.Record{descriptionRecord(g, DescriptionUncertain, g.FailedDescriptionEpoch)}, true
	default:
		return []log.Record{descriptionRecord(g, epoch, g.FailedDescriptionEpoch)}, true
	}
}

// DescriptionRejected records a permanent plugin rejection at epoch: failed only moves
// forward; stored stays as the barrier left it. found is false when the group is gone.
func (s *State) DescriptionRejected(group string, epoch int32) (recs []log.Record, found bool) {
	g := s.Groups[group]
	if g == nil {
		return nil, false
	}
	if g.FailedDescriptionEpoch >= epoch {
		return nil, true
	}
	return []log.Record{descriptionRecord(g, g.StoredDescriptionEpoch, epoch)}, true
}

// FinalizeDescriptionDelete follows a successful plugin delete (spec §4 step 5, §6.3 step 4):
// UNCERTAIN becomes NONE; a real epoch (a push raced the delete) is forced back to UNCERTAIN
// so the group is re-solicited or reclaimed again; NONE and missing groups are left alone.
func (s *State) FinalizeDescriptionDelete(groups []string) []log.Record {
	var recs []log.Record
	for _, id := range groups {
		g := s.Groups[id]
		if g == nil {
			continue
		}
		switch st := g.StoredDescriptionEpoch; {
		case st == DescriptionUncertain:
			recs = append(recs, descriptionRecord(g, DescriptionNone, g.FailedDescriptionEpoch))
		case st >= 0:
			recs = append(recs, descriptionRecord(g, DescriptionUncertain, g.FailedDescriptionEpoch))
		}
	}
	return recs
}

// DescriptionLost records that the plugin no longer holds the description its stored epoch
// claims (issue 10 defect 14): a describe's Get found nothing at that epoch, or the plugin is
// volatile and the process restarted. Kafka keeps the claim, so the group is not asked again
// until its topology changes; here each group whose stored epoch is still the one found
// missing (epochs[group]) becomes UNCERTAIN: the next heartbeat solicits (spec §2.2 rule 6 no
// longer holds) and delete and cleanup still release it (the plugin may hold some other epoch
// or a late write). A group whose stored epoch moved since (a push's barrier or outcome) is
// left alone: that push settles it.
func (s *State) DescriptionLost(epochs map[string]int32) []log.Record {
	var recs []log.Record
	for _, id := range sortedGroupIDs(epochs) {
		g := s.Groups[id]
		if g == nil || g.StoredDescriptionEpoch < 0 || g.StoredDescriptionEpoch != epochs[id] {
			continue
		}
		recs = append(recs, descriptionRecord(g, DescriptionUncertain, g.FailedDescriptionEpoch))
	}
	return recs
}

// StoredDescriptionEpochs maps every group whose stored epoch is real to that epoch: what a
// volatile plugin lost at a restart (DescriptionLost).
func (s *State) StoredDescriptionEpochs() map[string]int32 {
	out := map[string]int32{}
	for id, g := range s.Groups {
		if g.StoredDescriptionEpoch >= 0 {
			out[id] = g.StoredDescriptionEpoch
		}
	}
	return out
}

func sortedGroupIDs(m map[string]int32) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// DescriptionHeld reports whether a plugin delete is needed before the group may go: it is a
// streams group whose stored epoch is not NONE.
func (s *State) DescriptionHeld(group string) bool {
	g := s.Groups[group]
	return g != nil && g.StoredDescriptionEpoch != DescriptionNone
}

// StoredDescriptionCount is the number of streams groups whose stored epoch is a real epoch:
// the plugin holds their description (the stored-groups gauge, spec §7.4).
func (s *State) StoredDescriptionCount() int {
	n := 0
	for _, g := range s.Groups {
		if g.StoredDescriptionEpoch >= 0 {
			n++
		}
	}
	return n
}
