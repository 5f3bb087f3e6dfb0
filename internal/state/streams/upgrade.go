package streams

import (
	"fmt"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/streams/classicproto"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Online upgrade: classic group -> streams group (spec online-migration §3).

// ClassicGroupView is what the upgrade needs of a non-empty classic group. The shard builds it
// from its classic state (this package does not know classic groups).
type ClassicGroupView struct {
	Generation   int32
	ProtocolType string
	// Protocol is the selected protocol, nil while none is selected.
	Protocol *string
	Members  []ClassicMemberView
	// Tombstone deletes the classic group; it opens the conversion batch.
	Tombstone log.Record
}

// ClassicMemberView is one member of a classic group.
type ClassicMemberView struct {
	ID                 string
	InstanceID         *string
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	SessionTimeoutMs   int32
	Protocols          []ClassicProtocol
	// Assignment is the member's stored SyncGroup assignment; empty when it never synced.
	Assignment []byte
}

// Upgrade reports an online upgrade decided by a heartbeat: Converted when the batch converts
// the group, Refused (with the reason) when the policy allowed it but a precondition failed.
type Upgrade struct {
	Converted      bool
	Refused        string
	Generation     int32
	ClassicMembers int
}

// upgradeFromClassic builds the streams group of §3.3 from a classic group and the joining
// member's request. It returns the group as replay of the batch would build it, and the batch
// (§7.1 steps 1-7); refusal is set instead when a precondition of §3.2 fails.
func upgradeFromClassic(v *ClassicGroupView, req *kmsg.StreamsGroupHeartbeatRequest, cat Catalog, cfg Config) (g *Group, recs []log.Record, refusal string) {
	if reason := notStreamsApplication(v); reason != "" {
		return nil, nil, reason
	}
	group := req.Group
	// U3: size.
	if int64(len(v.Members)) > int64(cfg.MaxSize) {
		return nil, nil, fmt.Sprintf("its %d members exceed group.streams.max.size %d", len(v.Members), cfg.MaxSize)
	}
	// U4: the joining member's topology is ready with canonical subtopology ids.
	topology := TopologyFromRequest(req.Topology)
	for _, st := range topology.Subtopologies {
		if _, ok := subtopologyInt(st.ID); !ok {
			return nil, nil, fmt.Sprintf("subtopology id %q is not a decimal int32, which the classic protocol needs", st.ID)
		}
		if len(st.SourceTopicRegex) > 0 {
			return nil, nil, "topologies with source topic patterns cannot migrate online"
		}
	}
	configured, err := Configure(topology, cat)
	if err != nil {
		return nil, nil, fmt.Sprintf("the topology is invalid: %v", err)
	}
	if !configured.Ready() {
		return nil, nil, fmt.Sprintf("the topology is not ready (%s); an empty assignment would strip the classic members of their tasks", configured.Problem.Detail)
	}
	hash := metadataHash(topology, cat)
	gen := v.Generation

	// U5-U7: every member's metadata and stored assignment, and exclusive actives.
	type seeded struct {
		view    ClassicMemberView
		decoded classicproto.Member
		active  map[Task]int32
		standby map[Task]int32
	}
	members := make([]seeded, 0, len(v.Members))
	holder := map[Task]string{}
	for _, cm := range v.Members {
		d, err := checkClassicMetadata(v.ProtocolType, cm.Protocols, configured)
		if err != nil {
			return nil, nil, fmt.Sprintf("member %s: %v", cm.ID, err)
		}
		if d.Subscription.Future {
			return nil, nil, fmt.Sprintf("member %s uses SubscriptionInfo version %d, newer than %d", cm.ID, d.Subscription.Version, classicproto.LatestVersion)
		}
		s := seeded{view: cm, decoded: d, active: map[Task]int32{}, standby: map[Task]int32{}}
		_, info, empty, err := classicproto.DecodeMemberAssignment(cm.Assignment)
		switch {
		case err != nil:
			return nil, nil, fmt.Sprintf("member %s: stored assignment: %v", cm.ID, err)
		case empty:
			// Never synced, or reset by a fallback to PreparingRebalance: it still runs what it
			// owns (§3.3, the fallback KIP-848 lacks).
			for t := range ownedActives(d, configured) {
				s.active[t] = gen
			}
		default:
			if info.ErrCode != 0 {
				return nil, nil, fmt.Sprintf("member %s: stored assignment carries assignor error %d", cm.ID, info.ErrCode)
			}
			for _, ct := range info.Active {
				t := streamsTask(ct)
				if ct.NamedTopology != "" || !validTask(t, configured) {
					return nil, nil, fmt.Sprintf("member %s: stored active task %s is not in the topology", cm.ID, ct)
				}
				s.active[t] = gen
			}
			for _, st := range info.Standby {
				t := streamsTask(st.Task)
				if st.Task.NamedTopology != "" || !validTask(t, configured) {
					return nil, nil, fmt.Sprintf("member %s: stored standby task %s is not in the topology", cm.ID, st.Task)
				}
				s.standby[t] = 0
			}
		}
		for t := range s.active {
			if other, ok := holder[t]; ok {
				return nil, nil, fmt.Sprintf("members %s and %s both hold active task %s_%d", other, cm.ID, t.Subtopology, t.Partition)
			}
			holder[t] = cm.ID
		}
		for t := range s.standby {
			if _, ok := s.active[t]; ok {
				delete(s.standby, t)
			}
		}
		members = append(members, s)
	}

	// The batch (§7.1 steps 1-7).
	g = newGroup(group)
	g.Epoch, g.MetadataHash, g.ValidatedTopologyEpoch, g.AssignmentConfigs = gen, hash, topology.Epoch, cfg.assignmentConfigs()
	recs = append(recs, v.Tombstone)
	built := make([]*Member, 0, len(members))
	for _, s := range members {
		sub := s.decoded.Subscription
		m := newMember(s.view.ID)
		m.InstanceID, m.ClientID, m.ClientHost, m.RebalanceTimeoutMs = s.view.InstanceID, s.view.ClientID, s.view.ClientHost, s.view.RebalanceTimeoutMs
		m.TopologyEpoch, m.ProcessID, m.RackID = topology.Epoch, sub.ProcessIDString(), s.decoded.Outer.Rack
		if host, port, ok, _ := sub.Endpoint(); ok {
			m.UserEndpoint = &Endpoint{Host: host, Port: uint16(port)}
		}
		m.ClientTags = map[string]string{}
		for _, t := range sub.ClientTags {
			m.ClientTags[t.Key] = t.Value
		}
		m.Classic = &ClassicMember{SessionTimeoutMs: s.view.SessionTimeoutMs, Protocols: s.view.Protocols}
		m.Epoch, m.PreviousEpoch, m.State = gen, gen, Stable
		m.Assigned = Roles{s.active, s.standby, nil}
		built = append(built, m)
		recs = append(recs, MemberMetadataRecord(group, m), ClassicMemberRecord(group, m))
	}
	recs = append(recs, TopologyRecord(group, topology), GroupMetadataRecord(g, gen, hash, topology.Epoch, g.AssignmentConfigs))
	for _, m := range built {
		recs = append(recs, TargetMemberRecord(group, m.ID, m.Assigned))
	}
	recs = append(recs, TargetMetadataRecord(group, gen, 0))
	for _, m := range built {
		recs = append(recs, CurrentMemberRecord(group, m))
	}
	// The group exactly as replay of the batch builds it, so that the joining heartbeat runs on
	// the same state a restart would load.
	scratch := New()
	for _, r := range recs[1:] {
		if err := scratch.Replay(r); err != nil {
			return nil, nil, fmt.Sprintf("internal error building the streams group: %v", err)
		}
	}
	return scratch.Groups[group], recs, ""
}

// notStreamsApplication is U2: the classic group is not one of Kafka Streams threads (protocol
// type consumer, protocol "stream"); the reason, or "".
func notStreamsApplication(v *ClassicGroupView) string {
	if v.ProtocolType != "consumer" {
		return fmt.Sprintf("its protocol type is %q, not consumer", v.ProtocolType)
	}
	if v.Protocol != nil && *v.Protocol != ClassicProtocolName {
		return fmt.Sprintf("its protocol is %q, not %q (not a Kafka Streams application)", *v.Protocol, ClassicProtocolName)
	}
	for _, m := range v.Members {
		if streamMetadata(m.Protocols) == nil {
			return fmt.Sprintf("member %s does not offer the %q protocol", m.ID, ClassicProtocolName)
		}
	}
	return ""
}

// classicSessionTimers are the session timers of converted classic members (§3.6).
func classicSessionTimers(g *Group) []TimerAction {
	var out []TimerAction
	for _, m := range g.Members {
		if m.Classic != nil {
			out = append(out, TimerAction{Kind: ClassicSessionTimer, Group: g.ID, Member: m.ID, After: time.Duration(m.Classic.SessionTimeoutMs) * time.Millisecond})
		}
	}
	return out
}

// refusedUpgrade answers a refused upgrade (§3.2). A group that is no Kafka Streams application
// at all gets Kafka's own answer word for word; the other refusals name their reason.
func refusedUpgrade(v *ClassicGroupView, group, reason string) HeartbeatOutput {
	out := fail(kerr.GroupIDNotFound, "Group %s is not a streams group: online upgrade refused: %s.", group, reason)
	if notStreamsApplication(v) != "" {
		out = fail(kerr.GroupIDNotFound, "Group %s is not a streams group.", group)
	}
	out.Upgrade = &Upgrade{Refused: reason}
	return out
}
