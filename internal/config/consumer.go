package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ConsumerGroupConfig is the broker-level configuration of KIP-848 consumer groups, with
// Kafka's key names, defaults and bounds.
type ConsumerGroupConfig struct {
	SessionTimeoutMs, MinSessionTimeoutMs, MaxSessionTimeoutMs             int32
	HeartbeatIntervalMs, MinHeartbeatIntervalMs, MaxHeartbeatIntervalMs    int32
	AssignmentIntervalMs, MinAssignmentIntervalMs, MaxAssignmentIntervalMs int32
	AssignmentQuietMs                                                      int32
	MaxSize                                                                int32
	AssignorOffloadEnable                                                  bool
	// Assignors are short names (uniform, range); the first is the default.
	Assignors []string
	// MigrationPolicy: see group.consumer.migration.policy (lower case once parsed).
	MigrationPolicy string
}

func consumerInt(name, def, doc string, min int64, field func(*ConsumerGroupConfig) *int32) key {
	return key{name, def, doc, func(c *Config, v string) (err error) {
		*field(&c.ConsumerGroup), err = parseInt32(v, min, 1<<31-1)
		return
	}}
}

// consumerAssignorNames maps Kafka's assignor class names to the built-in assignors, so that a
// Kafka broker's group.consumer.assignors value works unchanged.
var consumerAssignorNames = map[string]string{
	"uniform": "uniform", "range": "range",
	"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
	"org.apache.kafka.coordinator.group.assignor.RangeAssignor":   "range",
}

var consumerKeys = []key{
	consumerInt("group.consumer.session.timeout.ms", "45000", "Consumer group (KIP-848) session timeout: a member that sends no ConsumerGroupHeartbeat for this long is removed and its partitions reassigned. Between the min and max session timeouts and above the heartbeat interval.", 1,
		func(s *ConsumerGroupConfig) *int32 { return &s.SessionTimeoutMs }),
	consumerInt("group.consumer.min.session.timeout.ms", "45000", "Lowest allowed consumer group session timeout.", 1,
		func(s *ConsumerGroupConfig) *int32 { return &s.MinSessionTimeoutMs }),
	consumerInt("group.consumer.max.session.timeout.ms", "60000", "Highest allowed consumer group session timeout.", 1,
		func(s *ConsumerGroupConfig) *int32 { return &s.MaxSessionTimeoutMs }),
	consumerInt("group.consumer.heartbeat.interval.ms", "5000", "Heartbeat interval told to consumer group members (HeartbeatIntervalMs). Between the min and max heartbeat intervals and below the session timeout.", 1,
		func(s *ConsumerGroupConfig) *int32 { return &s.HeartbeatIntervalMs }),
	consumerInt("group.consumer.min.heartbeat.interval.ms", "5000", "Lowest allowed consumer group heartbeat interval.", 1,
		func(s *ConsumerGroupConfig) *int32 { return &s.MinHeartbeatIntervalMs }),
	consumerInt("group.consumer.max.heartbeat.interval.ms", "15000", "Highest allowed consumer group heartbeat interval.", 1,
		func(s *ConsumerGroupConfig) *int32 { return &s.MaxHeartbeatIntervalMs }),
	consumerInt("group.consumer.assignment.interval.ms", "1000", "Shortest time between two target assignments of a consumer group (Kafka 4.3+): a membership or metadata change meanwhile leaves the group Assigning until then, and the first assignment of a group is immediate.", 0,
		func(s *ConsumerGroupConfig) *int32 { return &s.AssignmentIntervalMs }),
	consumerInt("group.consumer.assignment.quiet.ms", "100", "Beyond Kafka: a consumer group that has seen no membership change and no assignment for this long is assigned at the next heartbeat that changes nothing, without waiting for the rest of group.consumer.assignment.interval.ms; a member joining a settled group gets partitions in about this time instead of the interval. 0 keeps Kafka's behaviour. See consumer-groups.md.", 0,
		func(s *ConsumerGroupConfig) *int32 { return &s.AssignmentQuietMs }),
	consumerInt("group.consumer.min.assignment.interval.ms", "0", "Lowest allowed consumer group assignment interval.", 0,
		func(s *ConsumerGroupConfig) *int32 { return &s.MinAssignmentIntervalMs }),
	consumerInt("group.consumer.max.assignment.interval.ms", "15000", "Highest allowed consumer group assignment interval.", 0,
		func(s *ConsumerGroupConfig) *int32 { return &s.MaxAssignmentIntervalMs }),
	{"group.consumer.assignor.offload.enable", "true", "Accepted for compatibility with Kafka; coordinatord computes consumer group assignments on the group's shard either way.",
		func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("must be true or false")
			}
			c.ConsumerGroup.AssignorOffloadEnable = b
			return nil
		}},
	consumerInt("group.consumer.max.size", "2147483647", "Most members a consumer group may have; a new member beyond it gets GROUP_MAX_SIZE_REACHED.", 1,
		func(s *ConsumerGroupConfig) *int32 { return &s.MaxSize }),
	{"group.consumer.assignors", "uniform,range", "Comma-separated server-side assignors consumer groups may use (uniform, range, or Kafka's class names of them); the first is the default, a member may ask for another with ServerAssignor.",
		func(c *Config, v string) error {
			list, err := parseList(v)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				return errors.New("must name at least one assignor")
			}
			c.ConsumerGroup.Assignors = nil
			for _, a := range list {
				n, ok := consumerAssignorNames[a]
				if !ok {
					return fmt.Errorf("unknown assignor %s (uniform, range)", a)
				}
				c.ConsumerGroup.Assignors = append(c.ConsumerGroup.Assignors, n)
			}
			return nil
		}},
	{"group.consumer.migration.policy", "bidirectional", "Online migration of a non-empty group between the classic protocol (JoinGroup/SyncGroup) and the consumer protocol (ConsumerGroupHeartbeat), as Kafka's: bidirectional, upgrade (a consumer-protocol member joining a classic group of protocol type consumer converts it), downgrade (a consumer group whose last consumer-protocol member leaves, with classic members left, converts back) or disabled. Case-insensitive. Empty groups convert under every policy. See consumer-groups.md.",
		func(c *Config, v string) error {
			switch p := strings.ToLower(strings.TrimSpace(v)); p {
			case "bidirectional", "upgrade", "downgrade", "disabled":
				c.ConsumerGroup.MigrationPolicy = p
				return nil
			}
			return errors.New("must be bidirectional, upgrade, downgrade or disabled")
		}},
}

func init() { keys = append(keys, consumerKeys...) }

// validateConsumer checks the bounds between consumer group keys.
func (c *Config) validateConsumer() error {
	s := c.ConsumerGroup
	between := func(name string, v, min, max int32, minKey, maxKey string) error {
		if v < min || v > max {
			return &KeyError{Key: name, Value: c.values[name], Reason: fmt.Sprintf("must be between %s (%d) and %s (%d)", minKey, min, maxKey, max)}
		}
		return nil
	}
	if err := between("group.consumer.session.timeout.ms", s.SessionTimeoutMs, s.MinSessionTimeoutMs, s.MaxSessionTimeoutMs, "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"); err != nil {
		return err
	}
	if err := between("group.consumer.heartbeat.interval.ms", s.HeartbeatIntervalMs, s.MinHeartbeatIntervalMs, s.MaxHeartbeatIntervalMs, "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"); err != nil {
		return err
	}
	if err := between("group.consumer.assignment.interval.ms", s.AssignmentIntervalMs, s.MinAssignmentIntervalMs, s.MaxAssignmentIntervalMs, "group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms"); err != nil {
		return err
	}
	if s.HeartbeatIntervalMs >= s.SessionTimeoutMs {
		return &KeyError{Key: "group.consumer.heartbeat.interval.ms", Value: c.values["group.consumer.heartbeat.interval.ms"], Reason: "must be lower than group.consumer.session.timeout.ms"}
	}
	return nil
}
