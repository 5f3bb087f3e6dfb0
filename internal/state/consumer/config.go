package consumer

import (
	"fmt"
	"strconv"
	"time"
)

// Config is the broker-level consumer group configuration (group.consumer.* keys).
type Config struct {
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// AssignmentInterval is the least time between two target assignments of a group
	// (group.consumer.assignment.interval.ms, Kafka 4.3+); a group epoch bumped meanwhile
	// waits for it (state Assigning).
	AssignmentInterval time.Duration
	// AssignmentQuiet lets a quiet group be assigned before the interval is over
	// (group.consumer.assignment.quiet.ms, beyond Kafka; 0 keeps Kafka's behaviour): see
	// assignmentDue.
	AssignmentQuiet time.Duration
	MaxSize         int32
	// Assignors are the server-side assignor names; the first is the default.
	Assignors []string
	// Bounds of the group-level overrides (consumer.* GROUP configs).
	MinSessionTimeoutMs, MaxSessionTimeoutMs         int32
	MinHeartbeatIntervalMs, MaxHeartbeatIntervalMs   int32
	MinAssignmentIntervalMs, MaxAssignmentIntervalMs int32
	// MigrationPolicy is group.consumer.migration.policy: bidirectional, upgrade, downgrade or
	// disabled ("" counts as bidirectional, Kafka's default).
	MigrationPolicy string
}

// Policy is the migration policy with Kafka's default filled in.
func (c Config) Policy() string {
	if c.MigrationPolicy == "" {
		return "bidirectional"
	}
	return c.MigrationPolicy
}

// DefaultAssignmentQuiet is group.consumer.assignment.quiet.ms's default: long enough for the
// members of a rolling start to arrive together, short beside Kafka's 1 s interval.
const DefaultAssignmentQuiet = 100 * time.Millisecond

// DefaultConfig is Kafka 4.4's defaults, with the quiet assignment of coordinatord.
func DefaultConfig() Config {
	return Config{
		SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, AssignmentInterval: time.Second, AssignmentQuiet: DefaultAssignmentQuiet, MaxSize: 1<<31 - 1,
		Assignors:           []string{"uniform", "range"},
		MinSessionTimeoutMs: 45000, MaxSessionTimeoutMs: 60000,
		MinHeartbeatIntervalMs: 5000, MaxHeartbeatIntervalMs: 15000,
		MinAssignmentIntervalMs: 0, MaxAssignmentIntervalMs: 15000,
	}
}

// Group config keys a GROUP resource accepts for consumer groups (Kafka's GroupConfig).
const (
	GroupSessionTimeoutKey     = "consumer.session.timeout.ms"
	GroupHeartbeatIntervalKey  = "consumer.heartbeat.interval.ms"
	GroupAssignmentIntervalKey = "consumer.assignment.interval.ms"
)

// WithGroupConfigs applies a group's overrides. Values were validated when they were set.
func (c Config) WithGroupConfigs(vals map[string]string) Config {
	if v, ok := vals[GroupSessionTimeoutKey]; ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			c.SessionTimeout = time.Duration(n) * time.Millisecond
		}
	}
	if v, ok := vals[GroupHeartbeatIntervalKey]; ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			c.HeartbeatInterval = time.Duration(n) * time.Millisecond
		}
	}
	if v, ok := vals[GroupAssignmentIntervalKey]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			c.AssignmentInterval = time.Duration(n) * time.Millisecond
		}
	}
	return c
}

// DefaultAssignor is the assignor used when no member names one.
func (c Config) DefaultAssignor() string {
	if len(c.Assignors) > 0 {
		return c.Assignors[0]
	}
	return "uniform"
}

// HasAssignor reports whether a server assignor is configured.
func (c Config) HasAssignor(name string) bool {
	for _, a := range c.Assignors {
		if a == name {
			return true
		}
	}
	return false
}

// GroupConfigError is a rejected group config change: INVALID_CONFIG with this message.
type GroupConfigError struct{ Msg string }

func (e *GroupConfigError) Error() string { return e.Msg }

// ValidateGroupConfigs checks the consumer.* overrides of a group's whole (normalized) set
// against the broker bounds, with Kafka's messages; other keys are not looked at.
func ValidateGroupConfigs(vals map[string]string, c Config) error {
	inRange := func(name string, lo, hi int32) error {
		if v, ok := vals[name]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && (n < int64(lo) || n > int64(hi)) {
				return &GroupConfigError{Msg: fmt.Sprintf("%s must be in the range %d to %d inclusive.", name, lo, hi)}
			}
		}
		return nil
	}
	if err := inRange(GroupSessionTimeoutKey, c.MinSessionTimeoutMs, c.MaxSessionTimeoutMs); err != nil {
		return err
	}
	if err := inRange(GroupHeartbeatIntervalKey, c.MinHeartbeatIntervalMs, c.MaxHeartbeatIntervalMs); err != nil {
		return err
	}
	if err := inRange(GroupAssignmentIntervalKey, c.MinAssignmentIntervalMs, c.MaxAssignmentIntervalMs); err != nil {
		return err
	}
	if eff := c.WithGroupConfigs(vals); eff.SessionTimeout <= eff.HeartbeatInterval {
		return &GroupConfigError{Msg: GroupSessionTimeoutKey + " must be greater than " + GroupHeartbeatIntervalKey}
	}
	return nil
}
