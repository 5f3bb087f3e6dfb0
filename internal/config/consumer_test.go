package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestConsumerGroupKeys(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := c.ConsumerGroup; g.SessionTimeoutMs != 45000 || g.HeartbeatIntervalMs != 5000 || !reflect.DeepEqual(g.Assignors, []string{"uniform", "range"}) {
		t.Fatalf("defaults: %+v", g)
	}
	c, err = Load("", []string{"group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform"})
	if err != nil || !reflect.DeepEqual(c.ConsumerGroup.Assignors, []string{"range", "uniform"}) {
		t.Fatalf("Kafka class names: %v %v", err, c)
	}
	if c.ConsumerGroup.MigrationPolicy != "bidirectional" {
		t.Fatalf("group.consumer.migration.policy defaults to %q, want bidirectional as Kafka", c.ConsumerGroup.MigrationPolicy)
	}
	if u, err := Load("", []string{"group.consumer.migration.policy= DownGrade "}); err != nil || u.ConsumerGroup.MigrationPolicy != "downgrade" {
		t.Fatalf("the policy is case-insensitive as Kafka's ConsumerGroupMigrationPolicy.parse: %v %q", err, u.ConsumerGroup.MigrationPolicy)
	}
	for _, bad := range []struct{ kv, want string }{
		{"group.consumer.migration.policy=sideways", "bidirectional, upgrade, downgrade or disabled"},
		{"group.consumer.assignors=sticky", "unknown assignor sticky"},
		{"group.consumer.session.timeout.ms=30000", "must be between group.consumer.min.session.timeout.ms"},
		{"group.consumer.heartbeat.interval.ms=20000", "must be between group.consumer.min.heartbeat.interval.ms"},
	} {
		if _, err := Load("", []string{bad.kv}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v", bad.kv, err)
		}
	}
	if _, err := Load("", []string{"group.consumer.min.session.timeout.ms=1000", "group.consumer.session.timeout.ms=5000", "group.consumer.heartbeat.interval.ms=5000"}); err == nil || !strings.Contains(err.Error(), "must be lower than group.consumer.session.timeout.ms") {
		t.Errorf("heartbeat >= session: %v", err)
	}
}
