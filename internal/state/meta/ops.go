package meta

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// maxTopicNameLength is Kafka's limit (Topic.MAX_NAME_LENGTH): 249, so that partition
// directory names stay under 255 bytes on the brokers that do store data.
const maxTopicNameLength = 249

// maxPartitionsPerRequest is Kafka's controller limit (MAX_PARTITIONS_PER_BATCH): a topic is a
// count here, but every Metadata answer lists its partitions one by one, so a count of 2^31-1
// would make the next Metadata of all topics allocate gigabytes.
const maxPartitionsPerRequest = 10_000

// Defaults fill in what a CreateTopics request leaves to the server.
type Defaults struct {
	Partitions        int32 // num.partitions
	ReplicationFactor int16 // default.replication.factor
	NodeID            int32 // the only valid broker in a manual replica assignment
}

// NewTopic is one topic of a CreateTopics request.
type NewTopic struct {
	Name              string
	Partitions        int32 // -1: default
	ReplicationFactor int16 // -1: default
	Assignment        map[int32][]int32
	Configs           map[string]*string
}

// TopicResult is the outcome for one topic of a create, delete or repartition.
type TopicResult struct {
	Name    string
	Topic   *Topic // the topic as created or changed (nil on error)
	Code    int16
	Message string
}

func fail(name string, err *kerr.Error, format string, args ...any) TopicResult {
	return TopicResult{Name: name, Code: err.Code, Message: fmt.Sprintf(format, args...)}
}

// ValidateTopicName applies Kafka's rules for topic names.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is illegal, it can't be empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name cannot be \".\" or \"..\"")
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("topic name is illegal, it can't be longer than %d characters, topic name: %s", maxTopicNameLength, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %s is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// collisionName maps '.' to '_': Kafka refuses topics that differ only there, because metric
// names cannot tell them apart.
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// CreateTopics creates the topics that pass validation; each topic gets its own result. With
// validateOnly nothing is written.
func CreateTopics(topics []NewTopic, validateOnly bool, d Defaults) runtime.WriteOp[*Catalog] {
	return func(_ *runtime.Ctx[*Catalog], c *Catalog) runtime.Result {
		results := make([]TopicResult, 0, len(topics))
		var recs []log.Record
		count := map[string]int{}
		var total int64
		for _, t := range topics {
			count[t.Name]++
			switch {
			case len(t.Assignment) > 0:
				total += int64(len(t.Assignment))
			case t.Partitions == -1:
				total += int64(d.Partitions)
			case t.Partitions > 0:
				total += int64(t.Partitions)
			}
		}
		if total > maxPartitionsPerRequest {
			// Kafka fails the whole request, every topic with the same error.
			for _, t := range topics {
				if count[t.Name] > 0 {
					count[t.Name] = 0
					results = append(results, fail(t.Name, kerr.PolicyViolation, "Excessively large number of partitions per request."))
				}
			}
			return runtime.Result{Response: results}
		}
		claimed := map[string]string{} // collision name -> topic created earlier in this request
		reported := map[string]bool{}
		for _, t := range topics {
			if count[t.Name] > 1 {
				// Kafka answers a duplicated name once.
				if !reported[t.Name] {
					reported[t.Name] = true
					results = append(results, fail(t.Name, kerr.InvalidRequest, "create topics request from client contains multiple entries for the following topics: %s", t.Name))
				}
				continue
			}
			r := createOne(c, t, d, claimed)
			if r.Code == 0 {
				claimed[collisionName(t.Name)] = t.Name
				if !validateOnly {
					recs = append(recs, TopicRecord(r.Topic))
				}
			}
			results = append(results, r)
		}
		return runtime.Result{Records: recs, Response: results}
	}
}

func createOne(c *Catalog, t NewTopic, d Defaults, claimed map[string]string) TopicResult {
	if err := ValidateTopicName(t.Name); err != nil {
		return fail(t.Name, kerr.InvalidTopicException, "%v", err)
	}
	if _, ok := c.byName[t.Name]; ok {
		return fail(t.Name, kerr.TopicAlreadyExists, "topic '%s' already exists", t.Name)
	}
	cn := collisionName(t.Name)
	if name, ok := c.collide[cn]; ok {
		return fail(t.Name, kerr.InvalidTopicException, "topic '%s' collides with existing topic: %s", t.Name, name)
	}
	if other, ok := claimed[cn]; ok {
		return fail(t.Name, kerr.InvalidTopicException, "topic '%s' collides with existing topic: %s", t.Name, other)
	}
	partitions, rf := t.Partitions, t.ReplicationFactor
	if len(t.Assignment) > 0 {
		if partitions != -1 || rf != -1 {
			return fail(t.Name, kerr.InvalidRequest, "both numPartitions or replicationFactor and replicasAssignments were set, both cannot be used at the same time")
		}
		partitions = int32(len(t.Assignment))
		for p := int32(0); p < partitions; p++ {
			replicas, ok := t.Assignment[p]
			if !ok {
				return fail(t.Name, kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
			}
			if rf == -1 {
				rf = int16(len(replicas))
			}
			for _, b := range replicas {
				if b != d.NodeID {
					return fail(t.Name, kerr.InvalidReplicaAssignment, "replica assignment names broker %d; this coordinator is broker %d", b, d.NodeID)
				}
			}
		}
	}
	if partitions == -1 {
		partitions = d.Partitions
	}
	if rf == -1 {
		rf = d.ReplicationFactor
	}
	if partitions <= 0 {
		return fail(t.Name, kerr.InvalidPartitions, "number of partitions was set to an invalid non-positive value")
	}
	if rf <= 0 {
		return fail(t.Name, kerr.InvalidReplicationFactor, "replication factor must be larger than 0, or -1 to use the default value")
	}
	configs := make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		if v == nil {
			return fail(t.Name, kerr.InvalidConfig, "null value not supported for topic config %s", k)
		}
		if err := ValidateTopicConfig(k, *v); err != nil {
			return fail(t.Name, kerr.InvalidConfig, "%v", err)
		}
		configs[k] = *v
	}
	return TopicResult{Name: t.Name, Topic: &Topic{Name: t.Name, ID: newTopicID(c), Partitions: partitions, ReplicationFactor: rf, Configs: configs}}
}

// newTopicID draws a random id that is neither the zero id nor one in use, and whose base64
// form does not start with '-' (Kafka's rule, so ids never look like command-line flags).
func newTopicID(c *Catalog) [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		if id == [16]byte{} || id == [16]byte{15: 1} {
			continue
		}
		if _, used := c.byID[id]; used {
			continue
		}
		if base64.RawURLEncoding.EncodeToString(id[:])[0] == '-' {
			continue
		}
		return id
	}
}

// TopicRef names a topic by name or by id (DeleteTopics v6).
type TopicRef struct {
	Name *string
	ID   [16]byte
}

// DeleteTopics removes topics by name or id.
func DeleteTopics(refs []TopicRef) runtime.WriteOp[*Catalog] {
	return func(_ *runtime.Ctx[*Catalog], c *Catalog) runtime.Result {
		results := make([]TopicResult, 0, len(refs))
		var recs []log.Record
		deleted := map[string]bool{}
		for _, ref := range refs {
			var (
				t  *Topic
				ok bool
			)
			switch {
			case ref.Name != nil && *ref.Name != "":
				if t, ok = c.byName[*ref.Name]; !ok {
					results = append(results, fail(*ref.Name, kerr.UnknownTopicOrPartition, "this server does not host this topic-partition"))
					continue
				}
			case ref.ID != [16]byte{}:
				if t, ok = c.byID[ref.ID]; !ok {
					results = append(results, TopicResult{Code: kerr.UnknownTopicID.Code, Message: "this server does not host this topic ID"})
					continue
				}
			default:
				results = append(results, TopicResult{Code: kerr.InvalidRequest.Code, Message: "neither topic name nor id were specified"})
				continue
			}
			if !deleted[t.Name] {
				deleted[t.Name] = true
				recs = append(recs, DeleteTopicRecord(t.Name))
			}
			results = append(results, TopicResult{Name: t.Name, Topic: t})
		}
		return runtime.Result{Records: recs, Response: results}
	}
}

// PartitionIncrease is one topic of a CreatePartitions request.
type PartitionIncrease struct {
	Name  string
	Count int32
	// Assignment, when given, must name only this node.
	Assignment [][]int32
}

// CreatePartitions raises partition counts.
func CreatePartitions(incs []PartitionIncrease, validateOnly bool, d Defaults) runtime.WriteOp[*Catalog] {
	return func(_ *runtime.Ctx[*Catalog], c *Catalog) runtime.Result {
		results := make([]TopicResult, 0, len(incs))
		var recs []log.Record
		count := map[string]int{}
		for _, inc := range incs {
			count[inc.Name]++
		}
		added := int64(0) // partitions this request adds so far
		for _, inc := range incs {
			if count[inc.Name] > 1 {
				results = append(results, fail(inc.Name, kerr.InvalidRequest, "duplicate topic in request"))
				continue
			}
			t, ok := c.byName[inc.Name]
			if !ok {
				results = append(results, fail(inc.Name, kerr.UnknownTopicOrPartition, "the topic '%s' does not exist", inc.Name))
				continue
			}
			if inc.Count < t.Partitions {
				results = append(results, fail(inc.Name, kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than the requested %d", t.Partitions, inc.Count))
				continue
			}
			if inc.Count == t.Partitions {
				results = append(results, fail(inc.Name, kerr.InvalidPartitions, "topic already has %d partitions", t.Partitions))
				continue
			}
			if inc.Assignment != nil && len(inc.Assignment) != int(inc.Count-t.Partitions) {
				results = append(results, fail(inc.Name, kerr.InvalidReplicaAssignment, "attempted to add %d additional partitions, but only %d assignments were given", inc.Count-t.Partitions, len(inc.Assignment)))
				continue
			}
			bad := false
			for _, replicas := range inc.Assignment {
				for _, b := range replicas {
					bad = bad || b != d.NodeID
				}
			}
			if bad {
				results = append(results, fail(inc.Name, kerr.InvalidReplicaAssignment, "replica assignment names a broker other than %d", d.NodeID))
				continue
			}
			if added += int64(inc.Count - t.Partitions); added > maxPartitionsPerRequest {
				// Kafka's controller bounds the records one request may write, and refuses the
				// topic whose partitions overflow the bound.
				added -= int64(inc.Count - t.Partitions)
				results = append(results, fail(inc.Name, kerr.PolicyViolation, "Unable to perform excessively large batch operation."))
				continue
			}
			changed := *t
			changed.Partitions = inc.Count
			if !validateOnly {
				recs = append(recs, TopicRecord(&changed))
			}
			results = append(results, TopicResult{Name: inc.Name, Topic: &changed})
		}
		return runtime.Result{Records: recs, Response: results}
	}
}

// Read returns the durable snapshot.
func Read(c *Catalog) (any, error) { return c.Snapshot(), nil }
