package meta

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func createTopics(t *testing.T, c *Catalog, topics ...NewTopic) []TopicResult {
	t.Helper()
	r := CreateTopics(topics, false, Defaults{Partitions: 1, ReplicationFactor: 1, NodeID: 1})(nil, c)
	for _, rec := range r.Records {
		if err := c.Replay(0, rec); err != nil {
			t.Fatal(err)
		}
	}
	return r.Response.([]TopicResult)
}

func createPartitions(t *testing.T, c *Catalog, incs ...PartitionIncrease) []TopicResult {
	t.Helper()
	r := CreatePartitions(incs, false, Defaults{Partitions: 1, ReplicationFactor: 1, NodeID: 1})(nil, c)
	for _, rec := range r.Records {
		if err := c.Replay(0, rec); err != nil {
			t.Fatal(err)
		}
	}
	return r.Response.([]TopicResult)
}

// A topic is a count in the catalog, but every Metadata answer lists its partitions one by one:
// a CreateTopics of 2^31-1 partitions made the next Metadata of all topics allocate gigabytes
// and never answer (found by test/soak). Kafka refuses more than 10 000 partitions per request.
func TestCreateTopicsRefusesExcessivePartitions(t *testing.T) {
	c := NewCatalog()
	for _, tc := range []struct {
		name   string
		topics []NewTopic
	}{
		{"one topic of 2^31-1", []NewTopic{{Name: "huge", Partitions: 1<<31 - 1, ReplicationFactor: -1}}},
		{"two topics of 6000", []NewTopic{{Name: "a", Partitions: 6000, ReplicationFactor: -1}, {Name: "b", Partitions: 6000, ReplicationFactor: -1}}},
		{"many topics whose sum overflows int32", []NewTopic{{Name: "x", Partitions: 1<<31 - 1, ReplicationFactor: -1}, {Name: "y", Partitions: 1<<31 - 1, ReplicationFactor: -1}, {Name: "z", Partitions: 2, ReplicationFactor: -1}}},
	} {
		res := createTopics(t, c, tc.topics...)
		if len(res) != len(tc.topics) {
			t.Fatalf("%s: %d results for %d topics", tc.name, len(res), len(tc.topics))
		}
		for _, r := range res {
			if r.Code != kerr.PolicyViolation.Code {
				t.Errorf("%s: %s answered %d %q, want POLICY_VIOLATION", tc.name, r.Name, r.Code, r.Message)
			}
		}
	}
	if n := c.Snapshot().Len(); n != 0 {
		t.Fatalf("%d topics created by refused requests", n)
	}
	// The limit itself is allowed, across topics.
	res := createTopics(t, c, NewTopic{Name: "big", Partitions: 9999, ReplicationFactor: -1}, NewTopic{Name: "small", Partitions: -1, ReplicationFactor: -1})
	for _, r := range res {
		if r.Code != 0 {
			t.Fatalf("10 000 partitions in one request: %s answered %d %q", r.Name, r.Code, r.Message)
		}
	}
}

func TestCreatePartitionsRefusesExcessivePartitions(t *testing.T) {
	c := NewCatalog()
	createTopics(t, c, NewTopic{Name: "a", Partitions: 1, ReplicationFactor: -1}, NewTopic{Name: "b", Partitions: 1, ReplicationFactor: -1})
	res := createPartitions(t, c, PartitionIncrease{Name: "a", Count: 1<<31 - 1})
	if res[0].Code != kerr.PolicyViolation.Code {
		t.Fatalf("raising to 2^31-1 partitions answered %d %q, want POLICY_VIOLATION", res[0].Code, res[0].Message)
	}
	res = createPartitions(t, c, PartitionIncrease{Name: "a", Count: 6001}, PartitionIncrease{Name: "b", Count: 6001})
	if res[0].Code != 0 || res[1].Code != kerr.PolicyViolation.Code {
		t.Fatalf("two increases of 6000: answered %d and %d, want NONE then POLICY_VIOLATION", res[0].Code, res[1].Code)
	}
	if a, _ := c.Snapshot().Topic("a"); a.Partitions != 6001 {
		t.Fatalf("a has %d partitions, want 6001", a.Partitions)
	}
	if b, _ := c.Snapshot().Topic("b"); b.Partitions != 1 {
		t.Fatalf("b has %d partitions after a refused increase, want 1", b.Partitions)
	}
}
