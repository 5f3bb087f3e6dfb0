package console

import (
	"fmt"
	"sort"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What the console reads from a shard. Every read is a ReadOp: it runs on the shard's own
// goroutine against durable state and copies out what the page shows, so nothing here holds a
// pointer into shard state once the op returns.

// groupRow is one line of the group list.
type groupRow struct {
	ID, Type, State, ProtocolType string
	Members                       int
	Shard                         int32
}

// listGroups lists every group of a shard. Types and states come from the ListGroups ops, so
// the console shows what kafka-groups.sh --list shows.
func listGroups(shardID int32) runtime.ReadOp[*shard.Machine] {
	ops := []runtime.ReadOp[*shard.Machine]{shard.ListClassicGroups(nil, nil), shard.ListStreamsGroups(nil, nil), shard.ListConsumerGroups(nil, nil)}
	return func(m *shard.Machine) (any, error) {
		var listed []shard.GroupListing
		for _, op := range ops {
			v, err := op(m)
			if err != nil {
				return nil, err
			}
			listed = append(listed, v.([]shard.GroupListing)...)
		}
		rows := make([]groupRow, len(listed))
		for i, l := range listed {
			rows[i] = groupRow{ID: l.ID, Type: l.Type, State: l.State, ProtocolType: l.ProtocolType, Shard: shardID}
			switch l.Type {
			case "classic":
				if g := m.Classic.Group(l.ID); g != nil {
					rows[i].Members = len(g.Members)
				}
			case "streams":
				if g := m.Streams.Group(l.ID); g != nil {
					rows[i].Members = len(g.Members)
				}
			case "consumer":
				if g := m.Consumer.Groups[l.ID]; g != nil {
					rows[i].Members = len(g.Members)
				}
			}
		}
		return rows, nil
	}
}

// memberView is a member as the group page shows it.
type memberView struct {
	ID, InstanceID, ClientID, ClientHost string
	// Classic: the consumer protocol's assigned partitions ("topic-0"), when decodable.
	Partitions []string
	// Streams.
	ProcessID             string
	Epoch, PreviousEpoch  int32
	State                 string
	TopologyEpoch         int32
	Active, Standby, Warm []string // tasks "subtopology_partition"
	PendingRevocation     []string
	Endpoint              string
	// Consumer (KIP-848): assigned and pending-revocation partition counts.
	AssignedCount, PendingCount int
	assignment                  []byte
	assignmentProtocolType      string
}

// topicView is an internal topic of a streams topology.
type topicView struct {
	Name       string
	Partitions int32
}

// subtopologyView is one KIP-1071 subtopology as the group's first member declared it.
type subtopologyView struct {
	ID                 string
	SourceTopics       []string
	SourceTopicRegex   []string
	Changelogs         []topicView
	RepartitionSinks   []string
	RepartitionSources []topicView
}

// offsetRow is one committed offset.
type offsetRow struct {
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
	Committed int64 // ms
	// LogEnd and Lag are the upstream's log end offset and LogEnd - Offset, "—" when unknown
	// (filled off the shard, in gateway mode only).
	LogEnd, Lag string
}

// openTxnRow is one open transaction holding staged offsets of the group.
type openTxnRow struct {
	ProducerID    int64
	ProducerEpoch int16
	Since         int64 // ms of its earliest staged offset
	Partitions    int
}

// rebalanceView is one of a group's recent rebalances.
type rebalanceView struct {
	Epoch int32
	At    string
	Cause string
}

// groupDetail is everything the group page shows from the shard.
type groupDetail struct {
	ID, Type, State, ProtocolType, Protocol string
	Found                                   bool
	Shard                                   int32
	// Classic.
	Generation int32
	Leader     string
	// Streams.
	GroupEpoch, AssignmentEpoch, TopologyEpoch int32
	StoredDescriptionEpoch                     int32
	Subtopologies                              []subtopologyView
	Members                                    []memberView
	Offsets                                    []offsetRow
	// OpenTxns are the transactions whose staged offsets wait for a marker, oldest first:
	// the one a RequireStable fetch waits on when it answers UNSTABLE_OFFSET_COMMIT.
	OpenTxns []openTxnRow
	// Rebalances are the shard's in-memory record of the group's last epoch or generation
	// bumps, newest first.
	Rebalances []rebalanceView
}

// describeGroup reads one group for the group page.
func describeGroup(id string, shardID int32) runtime.ReadOp[*shard.Machine] {
	return func(m *shard.Machine) (any, error) {
		d := groupDetail{ID: id, Shard: shardID, TopologyEpoch: -1, StoredDescriptionEpoch: -1}
		if g := m.Streams.Group(id); g != nil {
			d.Found, d.Type, d.ProtocolType, d.State = true, "streams", "streams", m.Streams.ListedState(id)
			d.GroupEpoch, d.AssignmentEpoch, d.StoredDescriptionEpoch = g.Epoch, g.AssignmentEpoch, g.StoredDescriptionEpoch
			if g.Topology != nil {
				d.TopologyEpoch = g.Topology.Epoch
				d.Subtopologies = copyTopology(g.Topology)
			}
			for _, mem := range g.Members {
				d.Members = append(d.Members, streamsMember(mem))
			}
		} else if g := m.Consumer.Groups[id]; g != nil {
			d.Found, d.Type, d.ProtocolType, d.State = true, "consumer", "consumer", m.Consumer.ListedState(id)
			d.GroupEpoch, d.AssignmentEpoch = g.Epoch, g.AssignmentEpoch
			for _, mem := range g.Members {
				mv := memberView{ID: mem.ID, ClientID: mem.ClientID, ClientHost: mem.ClientHost, Epoch: mem.Epoch,
					PreviousEpoch: mem.PreviousEpoch, State: mem.State.String(), AssignedCount: len(mem.Assigned), PendingCount: len(mem.Pending)}
				if mem.InstanceID != nil {
					mv.InstanceID = *mem.InstanceID
				}
				d.Members = append(d.Members, mv)
			}
		} else {
			cd := shard.DescribeClassicGroups([]string{id})
			v, err := cd(m)
			if err != nil {
				return nil, err
			}
			desc := v.([]shard.GroupDescription)[0]
			d.Found, d.Type, d.State, d.ProtocolType, d.Protocol = desc.Found, "classic", desc.State, desc.ProtocolType, desc.Protocol
			if g := m.Classic.Group(id); g != nil {
				d.Generation, d.Leader = g.Generation, g.Leader
				if g.Protocol != nil {
					d.Protocol = *g.Protocol
				}
			}
			for _, mem := range desc.Members {
				mv := memberView{ID: mem.ID, ClientID: mem.ClientID, ClientHost: mem.ClientHost,
					assignment: append([]byte(nil), mem.Assignment...), assignmentProtocolType: desc.ProtocolType}
				if mem.InstanceID != nil {
					mv.InstanceID = *mem.InstanceID
				}
				d.Members = append(d.Members, mv)
			}
		}
		v, err := shard.RecentRebalancesOf(id)(m)
		if err != nil {
			return nil, err
		}
		hist := v.([]shard.Rebalance)
		for i := len(hist) - 1; i >= 0; i-- {
			d.Rebalances = append(d.Rebalances, rebalanceView{Epoch: hist[i].Epoch, At: hist[i].At.UTC().Format(time.RFC3339Nano), Cause: hist[i].Cause})
		}
		for _, o := range m.Offsets.All(id) {
			d.Offsets = append(d.Offsets, offsetRow{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata, Committed: o.CommitTimestamp})
		}
		for _, o := range m.Offsets.OpenTxns(id) {
			d.OpenTxns = append(d.OpenTxns, openTxnRow{ProducerID: o.ProducerID, ProducerEpoch: o.ProducerEpoch, Since: o.SinceMs, Partitions: o.Partitions})
		}
		sort.Slice(d.Members, func(i, j int) bool { return d.Members[i].ID < d.Members[j].ID })
		return d, nil
	}
}

// decodeAssignments turns classic consumer assignments into partition lists, off the shard.
func (d *groupDetail) decodeAssignments() {
	for i := range d.Members {
		mv := &d.Members[i]
		if mv.assignmentProtocolType != "consumer" || len(mv.assignment) == 0 {
			continue
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(mv.assignment); err != nil {
			continue // a client-defined assignment the page cannot read; the group still shows
		}
		for _, t := range a.Topics {
			for _, p := range t.Partitions {
				mv.Partitions = append(mv.Partitions, fmt.Sprintf("%s-%d", t.Topic, p))
			}
		}
		sort.Strings(mv.Partitions)
	}
}

func streamsMember(m *streams.Member) memberView {
	mv := memberView{ID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost, ProcessID: m.ProcessID,
		Epoch: m.Epoch, PreviousEpoch: m.PreviousEpoch, State: m.State.String(), TopologyEpoch: m.TopologyEpoch,
		Active: taskNames(m.Assigned[streams.Active]), Standby: taskNames(m.Assigned[streams.Standby]),
		Warm: taskNames(m.Assigned[streams.Warmup])}
	if m.InstanceID != nil {
		mv.InstanceID = *m.InstanceID
	}
	if m.UserEndpoint != nil {
		mv.Endpoint = fmt.Sprintf("%s:%d", m.UserEndpoint.Host, m.UserEndpoint.Port)
	}
	for role := range m.Pending {
		mv.PendingRevocation = append(mv.PendingRevocation, taskNames(m.Pending[role])...)
	}
	return mv
}

// taskNames formats tasks as Kafka Streams names them (subtopology_partition), in order.
func taskNames(tasks map[streams.Task]int32) []string {
	ts := make([]streams.Task, 0, len(tasks))
	for t := range tasks {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Subtopology != ts[j].Subtopology {
			return ts[i].Subtopology < ts[j].Subtopology
		}
		return ts[i].Partition < ts[j].Partition
	})
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = fmt.Sprintf("%s_%d", t.Subtopology, t.Partition)
	}
	return out
}

func copyTopology(t *streams.Topology) []subtopologyView {
	topics := func(in []streams.TopicInfo) []topicView {
		out := make([]topicView, len(in))
		for i, ti := range in {
			out[i] = topicView{Name: ti.Name, Partitions: ti.Partitions}
		}
		return out
	}
	out := make([]subtopologyView, len(t.Subtopologies))
	for i, s := range t.Subtopologies {
		out[i] = subtopologyView{ID: s.ID, SourceTopics: append([]string(nil), s.SourceTopics...),
			SourceTopicRegex: append([]string(nil), s.SourceTopicRegex...), Changelogs: topics(s.Changelogs),
			RepartitionSinks: append([]string(nil), s.RepartitionSinks...), RepartitionSources: topics(s.RepartitionSources)}
	}
	return out
}

// shardGroupCount counts the groups of a shard for the shard page.
func shardGroupCount(m *shard.Machine) (any, error) {
	n := len(m.Streams.Groups) + len(m.Classic.Groups())
	for _, id := range m.Offsets.Groups() {
		if !m.Classic.Has(id) && !m.Streams.Owns(id) {
			n++
		}
	}
	return n, nil
}
