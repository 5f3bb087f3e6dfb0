package streams

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"sort"
	"strings"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topology is a group's topology as the first joiner sent it (spec §5.1), lists in received
// order. Slices are never nil so that two topologies compare with reflect.DeepEqual.
type Topology struct {
	Epoch         int32
	Subtopologies []Subtopology
}

// Subtopology is one subtopology of a Topology.
type Subtopology struct {
	ID                 string
	SourceTopics       []string
	SourceTopicRegex   []string
	Changelogs         []TopicInfo
	RepartitionSinks   []string
	RepartitionSources []TopicInfo
	Copartition        []CopartitionGroup
}

// TopicInfo is an internal topic of a topology.
type TopicInfo struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           []KV
}

// KV is a key and value in received order.
type KV struct{ Key, Value string }

// CopartitionGroup indexes topics of its subtopology that must be co-partitioned.
type CopartitionGroup struct {
	SourceTopics            []int16
	SourceTopicRegex        []int16
	RepartitionSourceTopics []int16
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// TopologyFromRequest converts the wire topology verbatim.
func TopologyFromRequest(t *kmsg.StreamsGroupHeartbeatRequestTopology) *Topology {
	out := &Topology{Epoch: t.Epoch, Subtopologies: make([]Subtopology, 0, len(t.Subtopologies))}
	conv := func(in []kmsg.TopicInfo) []TopicInfo {
		res := make([]TopicInfo, 0, len(in))
		for _, ti := range in {
			c := TopicInfo{Name: ti.Topic, Partitions: ti.NumPartitions, ReplicationFactor: ti.ReplicationFactor, Configs: make([]KV, 0, len(ti.Configs))}
			for _, kv := range ti.Configs {
				c.Configs = append(c.Configs, KV{Key: kv.Key, Value: kv.Value})
			}
			res = append(res, c)
		}
		return res
	}
	for _, s := range t.Subtopologies {
		st := Subtopology{
			ID:                 s.SubtopologyID,
			SourceTopics:       append([]string{}, s.SourceTopics...),
			SourceTopicRegex:   append([]string{}, s.SourceTopicRegex...),
			Changelogs:         conv(s.StateChangelogTopics),
			RepartitionSinks:   append([]string{}, s.RepartitionSinkTopics...),
			RepartitionSources: conv(s.RepartitionSourceTopics),
			Copartition:        make([]CopartitionGroup, 0, len(s.CopartitionGroups)),
		}
		for _, c := range s.CopartitionGroups {
			st.Copartition = append(st.Copartition, CopartitionGroup{
				SourceTopics:            append([]int16{}, c.SourceTopics...),
				SourceTopicRegex:        append([]int16{}, c.SourceTopicRegex...),
				RepartitionSourceTopics: append([]int16{}, c.RepartitionSourceTopics...),
			})
		}
		out.Subtopologies = append(out.Subtopologies, st)
	}
	return out
}

// Equal reports whether two topologies are identical (spec §5.1).
func (t *Topology) Equal(o *Topology) bool { return reflect.DeepEqual(t, o) }

// TopicNames lists every topic a topology names (sources, repartition sinks and sources,
// changelogs), for the request-level topic checks.
func TopicNames(t *kmsg.StreamsGroupHeartbeatRequestTopology) []string {
	var out []string
	for _, s := range t.Subtopologies {
		out = append(out, s.SourceTopics...)
		out = append(out, s.RepartitionSinkTopics...)
		for _, ti := range s.RepartitionSourceTopics {
			out = append(out, ti.Topic)
		}
		for _, ti := range s.StateChangelogTopics {
			out = append(out, ti.Topic)
		}
	}
	return out
}

// requiredTopics: sources, repartition sources and changelogs (spec §5.1).
func (t *Topology) requiredTopics() []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, s := range t.Subtopologies {
		for _, n := range s.SourceTopics {
			add(n)
		}
		for _, ti := range s.RepartitionSources {
			add(ti.Name)
		}
		for _, ti := range s.Changelogs {
			add(ti.Name)
		}
	}
	sort.Strings(out)
	return out
}

// isSourceTopic: the topic is a source or repartition-source topic (offset commit checks,
// subscription checks).
func (t *Topology) subtopologyOf(topic string) (string, bool) {
	for _, s := range t.Subtopologies {
		for _, n := range s.SourceTopics {
			if n == topic {
				return s.ID, true
			}
		}
		for _, ti := range s.RepartitionSources {
			if ti.Name == topic {
				return s.ID, true
			}
		}
	}
	return "", false
}

// Catalog is what the state machine needs of the topic catalog.
type Catalog interface {
	Topic(name string) (*meta.Topic, bool)
}

// metadataHash hashes the required topics that exist (spec §5.4): name, id and partition
// count, sorted by name; 0 when none exists.
func metadataHash(t *Topology, cat Catalog) int64 {
	h := fnv.New64a()
	any := false
	for _, name := range t.requiredTopics() {
		tp, ok := cat.Topic(name)
		if !ok {
			continue
		}
		any = true
		fmt.Fprintf(h, "%s\x00%x\x00%d\x00", name, tp.ID, tp.Partitions)
	}
	if !any {
		return 0
	}
	return int64(h.Sum64())
}

// Status codes of heartbeat responses (spec §1.3).
const (
	StatusStaleTopology                = 0
	StatusMissingSourceTopics          = 1
	StatusIncorrectlyPartitionedTopics = 2
	StatusMissingInternalTopics        = 3
	StatusShutdownApplication          = 4
	StatusAssignmentDelayed            = 5
	StatusMissingClientTags            = 6
)

// Status is one heartbeat status.
type Status struct {
	Code   int8
	Detail string
}

// InternalTopic is a topic the group needs created.
type InternalTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16 // -1: the broker default
	Configs           map[string]string
}

// ConfiguredSubtopology is a subtopology with its task count decided.
type ConfiguredSubtopology struct {
	ID                 string
	Tasks              int32
	Stateful           bool
	SourceTopics       []string
	RepartitionSinks   []string
	RepartitionSources []TopicInfo // decided partition counts
	Changelogs         []TopicInfo
	// TopicCounts are the partition counts of its source and repartition source topics.
	TopicCounts map[string]int32
}

// Configured is a topology configured against the catalog (spec §5.2).
type Configured struct {
	Subtopologies []ConfiguredSubtopology // sorted by id
	Problem       *Status                 // nil: ready
	ToCreate      []InternalTopic
}

// Ready reports whether the topology can be assigned.
func (c *Configured) Ready() bool { return c != nil && c.Problem == nil }

func (c *Configured) subtopology(id string) *ConfiguredSubtopology {
	for i := range c.Subtopologies {
		if c.Subtopologies[i].ID == id {
			return &c.Subtopologies[i]
		}
	}
	return nil
}

// InvalidTopologyError is a topology that can never be configured (STREAMS_INVALID_TOPOLOGY).
type InvalidTopologyError struct{ Msg string }

func (e *InvalidTopologyError) Error() string { return e.Msg }

// abbreviate lists names sorted, at most three, then " and N additional topics".
func abbreviate(names []string) string {
	names = append([]string{}, names...)
	sort.Strings(names)
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d additional topics", strings.Join(names[:3], ", "), len(names)-3)
}

func sortedCountMap(m map[string]int32) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, m[n])
	}
	return "[{" + strings.Join(parts, ", ") + "}]"
}

// Configure decides partition counts and task counts (spec §5.2).
func Configure(t *Topology, cat Catalog) (*Configured, error) {
	// 1. Missing source topics.
	var missing []string
	for _, s := range t.Subtopologies {
		for _, n := range s.SourceTopics {
			if _, ok := cat.Topic(n); !ok {
				missing = append(missing, n)
			}
		}
	}
	if len(missing) > 0 {
		return &Configured{Problem: &Status{Code: StatusMissingSourceTopics, Detail: "Source topics " + abbreviate(dedup(missing)) + " are missing."}}, nil
	}
	counts := map[string]int32{} // decided counts of repartition topics
	count := func(name string) (int32, bool) {
		if tp, ok := cat.Topic(name); ok {
			return tp.Partitions, true
		}
		c, ok := counts[name]
		return c, ok
	}
	// decided is a repartition topic's count: the one this computation decides from the
	// topology's inputs, as Kafka's RepartitionTopics does, not the existing topic's. An existing
	// repartition topic with another count (partitions added to the input since it was created)
	// is INCORRECTLY_PARTITIONED at step 6, where Kafka 4.4 stops the application.
	decided := func(name string) (int32, bool) {
		if c, ok := counts[name]; ok {
			return c, true
		}
		return count(name)
	}
	// 2. Repartition topic counts.
	repSources := map[string]TopicInfo{}
	for _, s := range t.Subtopologies {
		for _, ti := range s.RepartitionSources {
			repSources[ti.Name] = ti
			if ti.Partitions != 0 {
				counts[ti.Name] = ti.Partitions
			}
		}
	}
	for {
		unknown, progress := 0, false
		for _, s := range t.Subtopologies {
			for _, sink := range s.RepartitionSinks {
				if _, ok := counts[sink]; ok {
					continue
				}
				best, found := int32(0), false
				for _, ti := range s.RepartitionSources {
					if c, ok := counts[ti.Name]; ok {
						found = true
						best = max(best, c)
					}
				}
				for _, n := range s.SourceTopics {
					if c, ok := count(n); ok {
						found = true
						best = max(best, c)
					}
				}
				if found {
					counts[sink] = best
					progress = true
				} else {
					unknown++
				}
			}
		}
		if unknown == 0 {
			break
		}
		if !progress {
			return nil, &InvalidTopologyError{Msg: "Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved."}
		}
	}
	for name := range repSources {
		if _, ok := counts[name]; !ok {
			return nil, &InvalidTopologyError{Msg: "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic."}
		}
	}
	// 3. Copartitioning.
	fixed := map[string]int32{}
	for name, ti := range repSources {
		if ti.Partitions != 0 {
			fixed[name] = ti.Partitions
		}
	}
	for _, s := range t.Subtopologies {
		for _, cg := range s.Copartition {
			var srcs, reps []string
			for _, i := range cg.SourceTopics {
				if int(i) >= 0 && int(i) < len(s.SourceTopics) {
					srcs = append(srcs, s.SourceTopics[i])
				}
			}
			for _, i := range cg.RepartitionSourceTopics {
				if int(i) >= 0 && int(i) < len(s.RepartitionSources) {
					reps = append(reps, s.RepartitionSources[i].Name)
				}
			}
			var n int32
			if len(srcs) == 0 {
				if len(fixed) > 0 {
					first := int32(-1)
					same := true
					for _, c := range fixed {
						if first == -1 {
							first = c
						} else if c != first {
							same = false
						}
					}
					if !same {
						m := map[string]int32{}
						for _, r := range reps {
							m[r], _ = decided(r)
						}
						return &Configured{Problem: &Status{Code: StatusIncorrectlyPartitionedTopics, Detail: "Following topics do not have the same number of partitions: " + sortedCountMap(m)}}, nil
					}
					n = first
				} else {
					for _, r := range reps {
						c, _ := decided(r)
						n = max(n, c)
					}
					if n == 0 {
						return nil, &InvalidTopologyError{Msg: "All topics in the copartition group had undefined partition number: [" + strings.Join(reps, ", ") + "]"}
					}
				}
			} else {
				m := map[string]int32{}
				for _, src := range srcs {
					m[src], _ = count(src)
				}
				n = -1
				for _, c := range m {
					if n == -1 {
						n = c
					} else if c != n {
						return &Configured{Problem: &Status{Code: StatusIncorrectlyPartitionedTopics, Detail: "Following topics do not have the same number of partitions: " + sortedCountMap(m)}}, nil
					}
				}
			}
			for _, r := range reps {
				if own, ok := fixed[r]; ok && own != n {
					return &Configured{Problem: &Status{Code: StatusIncorrectlyPartitionedTopics, Detail: fmt.Sprintf("Number of partitions [%d] of repartition topic [%s] doesn't match number of partitions [%d] of the source topic.", own, r, n)}}, nil
				}
				counts[r] = n
			}
		}
	}
	// 4-5. Changelog counts and configured subtopologies.
	out := &Configured{}
	for _, s := range t.Subtopologies {
		var n int32
		found := false
		for _, src := range s.SourceTopics {
			if c, ok := count(src); ok {
				n, found = max(n, c), true
			}
		}
		for _, ti := range s.RepartitionSources {
			if c, ok := decided(ti.Name); ok {
				n, found = max(n, c), true
			}
		}
		if !found {
			return nil, &InvalidTopologyError{Msg: "No source topics found for subtopology " + s.ID}
		}
		cs := ConfiguredSubtopology{ID: s.ID, Tasks: n, Stateful: len(s.Changelogs) > 0,
			SourceTopics: sortedCopy(s.SourceTopics), RepartitionSinks: sortedCopy(s.RepartitionSinks), TopicCounts: map[string]int32{}}
		for _, src := range s.SourceTopics {
			cs.TopicCounts[src], _ = count(src)
		}
		for _, ti := range s.RepartitionSources {
			d := ti
			d.Partitions, _ = decided(ti.Name)
			cs.TopicCounts[ti.Name] = d.Partitions
			cs.RepartitionSources = append(cs.RepartitionSources, d)
		}
		for _, ti := range s.Changelogs {
			d := ti
			if d.Partitions == 0 {
				d.Partitions = n
			}
			cs.Changelogs = append(cs.Changelogs, d)
		}
		sort.Slice(cs.RepartitionSources, func(i, j int) bool { return cs.RepartitionSources[i].Name < cs.RepartitionSources[j].Name })
		sort.Slice(cs.Changelogs, func(i, j int) bool { return cs.Changelogs[i].Name < cs.Changelogs[j].Name })
		out.Subtopologies = append(out.Subtopologies, cs)
	}
	sort.Slice(out.Subtopologies, func(i, j int) bool { return out.Subtopologies[i].ID < out.Subtopologies[j].ID })
	// 6. Internal topics to create; existing ones must have the decided count.
	seen := map[string]bool{}
	var names []string
	for _, cs := range out.Subtopologies {
		for _, ti := range append(append([]TopicInfo{}, cs.RepartitionSources...), cs.Changelogs...) {
			if seen[ti.Name] {
				continue
			}
			seen[ti.Name] = true
			if tp, ok := cat.Topic(ti.Name); ok {
				if tp.Partitions != ti.Partitions {
					return &Configured{Subtopologies: out.Subtopologies, Problem: &Status{Code: StatusIncorrectlyPartitionedTopics,
						Detail: fmt.Sprintf("Existing topic %s has different number of partitions: expected %d, found %d", ti.Name, ti.Partitions, tp.Partitions)}}, nil
				}
				continue
			}
			it := InternalTopic{Name: ti.Name, Partitions: ti.Partitions, ReplicationFactor: ti.ReplicationFactor, Configs: map[string]string{}}
			if it.ReplicationFactor == 0 {
				it.ReplicationFactor = -1
			}
			for _, kv := range ti.Configs {
				it.Configs[kv.Key] = kv.Value
			}
			out.ToCreate = append(out.ToCreate, it)
			names = append(names, ti.Name)
		}
	}
	if len(out.ToCreate) > 0 {
		sort.Strings(names)
		out.Problem = &Status{Code: StatusMissingInternalTopics, Detail: "Internal topics are missing: " + strings.Join(names, ", ")}
	}
	return out, nil
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func dedup(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
