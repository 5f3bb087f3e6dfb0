package streams

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Group-level configs (KIP-1071 §"Group configs", Kafka 4.4's GroupConfig): per-group overrides
// of the broker's group.streams.* keys, set with IncrementalAlterConfigs on a GROUP resource and
// applied by the group's next heartbeat. The consumer.* keys of KIP-848 consumer groups are
// listed here too (one table, Kafka's order) and validated by the consumer package. Kafka 4.4
// also accepts share.* and errors.deadletterqueue.* keys; coordinatord has no share groups
// (docs/conformance.md).

// GroupConfigBounds are the broker keys that bound group-level values (Kafka validates a group
// config against them when it is set).
type GroupConfigBounds struct {
	MinSessionTimeoutMs, MaxSessionTimeoutMs         int32
	MinHeartbeatIntervalMs, MaxHeartbeatIntervalMs   int32
	MinAssignmentIntervalMs, MaxAssignmentIntervalMs int32
	MaxStandbyReplicas, MaxWarmupReplicas            int32
	MinTaskOffsetIntervalMs                          int32
}

// DefaultGroupConfigBounds are Kafka's defaults of the bounding broker keys.
func DefaultGroupConfigBounds() GroupConfigBounds {
	return GroupConfigBounds{
		MinSessionTimeoutMs: 45000, MaxSessionTimeoutMs: 60000,
		MinHeartbeatIntervalMs: 5000, MaxHeartbeatIntervalMs: 15000,
		MinAssignmentIntervalMs: 0, MaxAssignmentIntervalMs: 15000,
		MaxStandbyReplicas: 2, MaxWarmupReplicas: 20, MinTaskOffsetIntervalMs: 15000,
	}
}

// ConfigType is the DescribeConfigs ConfigType of a key (Kafka's ConfigDef.Type ids).
type ConfigType int8

const (
	TypeBoolean ConfigType = 1
	TypeString  ConfigType = 2
	TypeInt     ConfigType = 3
	TypeLong    ConfigType = 5
	TypeList    ConfigType = 7
)

// GroupConfigKey is one key a GROUP resource accepts.
type GroupConfigKey struct {
	Name string
	Type ConfigType
	// Internal keys can be set but DescribeConfigs does not list them (Kafka's isInternal).
	Internal bool
	// Broker is the broker key whose value applies when the group sets none (the synonym
	// DescribeConfigs reports).
	Broker string
	Doc    string
	min    int64
}

// GroupConfigKeys are the keys in Kafka 4.4's order of GroupConfig definitions.
var GroupConfigKeys = []GroupConfigKey{
	// KIP-848 consumer groups' keys (validated by internal/state/consumer.ValidateGroupConfigs).
	{Name: "consumer.assignment.interval.ms", Type: TypeInt, Broker: "group.consumer.assignment.interval.ms", min: 0,
		Doc: "Shortest time between two target assignments of this consumer group (overrides group.consumer.assignment.interval.ms)."},
	{Name: "consumer.session.timeout.ms", Type: TypeInt, Broker: "group.consumer.session.timeout.ms", min: 1,
		Doc: "How long a member of this consumer group may stay silent before it is removed and its partitions move (overrides group.consumer.session.timeout.ms)."},
	{Name: "consumer.heartbeat.interval.ms", Type: TypeInt, Broker: "group.consumer.heartbeat.interval.ms", min: 1,
		Doc: "Heartbeat interval this consumer group's members are told to use (overrides group.consumer.heartbeat.interval.ms)."},
	{Name: "streams.session.timeout.ms", Type: TypeInt, Broker: "group.streams.session.timeout.ms", min: 1,
		Doc: "How long a member of this streams group may stay silent before it is removed and its tasks move (overrides group.streams.session.timeout.ms)."},
	{Name: "streams.heartbeat.interval.ms", Type: TypeInt, Broker: "group.streams.heartbeat.interval.ms", min: 1,
		Doc: "Heartbeat interval this streams group's members are told to use (overrides group.streams.heartbeat.interval.ms)."},
	{Name: "streams.num.standby.replicas", Type: TypeInt, Broker: "group.streams.num.standby.replicas", min: 0,
		Doc: "Standby copies of each stateful task placed on other processes of this streams group (overrides group.streams.num.standby.replicas)."},
	{Name: "streams.initial.rebalance.delay.ms", Type: TypeInt, Broker: "group.streams.initial.rebalance.delay.ms", min: 0,
		Doc: "How long the first assignment of this streams group, when empty, waits for more members (overrides group.streams.initial.rebalance.delay.ms)."},
	{Name: "streams.assignment.interval.ms", Type: TypeInt, Broker: "group.streams.assignment.interval.ms", min: 0,
		Doc: "Shortest time between two target assignment computations of this streams group (overrides group.streams.assignment.interval.ms)."},
	{Name: "streams.rack.aware.assignment.tags", Type: TypeList, Broker: "group.streams.rack.aware.assignment.tags",
		Doc: "Client tag keys along which this streams group's standbys are spread (overrides group.streams.rack.aware.assignment.tags)."},
	{Name: "streams.assignor.name", Type: TypeString, Broker: "group.streams.assignors",
		Doc: "The task assignor to use for this streams group, selected by short name from the assignors of group.streams.assignors; unset means the first of them. A change takes effect at the group's next assignment."},
	{Name: "streams.assignor.offload.enable", Type: TypeBoolean, Internal: true, Broker: "group.streams.assignor.offload.enable"},
	{Name: "streams.task.offset.interval.ms", Type: TypeInt, Internal: true, Broker: "group.streams.task.offset.interval.ms", min: 1},
	{Name: "streams.num.warmup.replicas", Type: TypeInt, Internal: true, Broker: "group.streams.num.warmup.replicas", min: 0},
	{Name: "streams.acceptable.recovery.lag", Type: TypeLong, Internal: true, Broker: "group.streams.acceptable.recovery.lag", min: 0},
	// coordinatord's own key (Kafka has no streams migration policy). Internal, so that
	// DescribeConfigs of a group lists exactly Kafka 4.4's keys.
	{Name: "streams.migration.policy", Type: TypeString, Internal: true, Broker: "group.streams.migration.policy",
		Doc: "Online migration between the classic protocol and the streams protocol for this group (overrides group.streams.migration.policy)."},
}

// LookupGroupConfigKey finds a key by name.
func LookupGroupConfigKey(name string) (GroupConfigKey, bool) {
	for _, k := range GroupConfigKeys {
		if k.Name == name {
			return k, true
		}
	}
	return GroupConfigKey{}, false
}

// GroupConfigError is a rejected change: Kafka answers INVALID_CONFIG with this message.
type GroupConfigError struct{ Msg string }

func (e *GroupConfigError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &GroupConfigError{Msg: fmt.Sprintf(format, args...)}
}

// NormalizeGroupConfig parses a value of key as Kafka's ConfigDef would and returns its
// canonical text (trimmed; lists without blanks around elements).
func NormalizeGroupConfig(k GroupConfigKey, v string) (string, error) {
	t := strings.TrimSpace(v)
	switch k.Type {
	case TypeInt, TypeLong:
		bits := 32
		name := "INT"
		if k.Type == TypeLong {
			bits, name = 64, "LONG"
		}
		n, err := strconv.ParseInt(t, 10, bits)
		if err != nil {
			return "", invalid("Invalid value %s for configuration %s: Not a number of type %s", v, k.Name, name)
		}
		if n < k.min {
			return "", invalid("Invalid value %s for configuration %s: Value must be at least %d", v, k.Name, k.min)
		}
		return strconv.FormatInt(n, 10), nil
	case TypeBoolean:
		switch strings.ToLower(t) {
		case "true", "false":
			return strings.ToLower(t), nil
		}
		return "", invalid("Invalid value %s for configuration %s: Expected value to be either true or false", v, k.Name)
	case TypeString:
		if k.Name == "streams.migration.policy" {
			p, err := ParseMigrationPolicy(t)
			if err != nil {
				return "", invalid("Invalid value %s for configuration %s: String %s", v, k.Name, err)
			}
			return string(p), nil
		}
	case TypeList:
		if t == "" {
			return "", nil
		}
		parts := strings.Split(t, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return strings.Join(parts, ","), nil
	}
	return t, nil
}

// ValidateGroupConfigs checks a group's whole set of overrides (after a change) against the
// broker bounds, in Kafka 4.4's order of checks. Values must be normalized.
func ValidateGroupConfigs(vals map[string]string, b GroupConfigBounds, assignors []string, base Config) error {
	num := func(name string) (int64, bool) {
		v, ok := vals[name]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	inRange := func(name string, lo, hi int32) error {
		if n, ok := num(name); ok && (n < int64(lo) || n > int64(hi)) {
			return invalid("%s must be in the range %d to %d inclusive.", name, lo, hi)
		}
		return nil
	}
	atMost := func(name string, hi int32) error {
		if n, ok := num(name); ok && n > int64(hi) {
			return invalid("%s must be less than or equal to %d", name, hi)
		}
		return nil
	}
	checks := []error{
		inRange("streams.session.timeout.ms", b.MinSessionTimeoutMs, b.MaxSessionTimeoutMs),
		inRange("streams.heartbeat.interval.ms", b.MinHeartbeatIntervalMs, b.MaxHeartbeatIntervalMs),
		atMost("streams.num.standby.replicas", b.MaxStandbyReplicas),
		inRange("streams.assignment.interval.ms", b.MinAssignmentIntervalMs, b.MaxAssignmentIntervalMs),
		atMost("streams.num.warmup.replicas", b.MaxWarmupReplicas),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if n, ok := num("streams.task.offset.interval.ms"); ok && n < int64(b.MinTaskOffsetIntervalMs) {
		return invalid("streams.task.offset.interval.ms must be greater than or equal to %d", b.MinTaskOffsetIntervalMs)
	}
	if tags, ok := vals["streams.rack.aware.assignment.tags"]; ok && tags != "" {
		l := strings.Split(tags, ",")
		slices.Sort(l)
		if len(slices.Compact(l)) != len(strings.Split(tags, ",")) {
			return invalid("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
		}
	}
	if name, ok := vals["streams.assignor.name"]; ok && !slices.Contains(assignors, name) {
		return invalid("streams.assignor.name '%s' is not a registered task assignor. Registered assignors are: [%s].", name, strings.Join(assignors, ", "))
	}
	// The session must outlast the heartbeat interval, the effective values compared.
	eff := base.WithGroupConfigs(vals)
	if eff.SessionTimeout <= eff.HeartbeatInterval {
		return invalid("streams.session.timeout.ms must be greater than streams.heartbeat.interval.ms")
	}
	return nil
}

// WithGroupConfigs is the configuration a group with these overrides runs under. Values that
// do not parse (never written by a validated change) are ignored.
func (c Config) WithGroupConfigs(vals map[string]string) Config {
	if len(vals) == 0 {
		return c
	}
	ms := func(name string, into *time.Duration) {
		if n, err := strconv.ParseInt(vals[name], 10, 32); err == nil {
			*into = time.Duration(n) * time.Millisecond
		}
	}
	i32 := func(name string, into *int32) {
		if n, err := strconv.ParseInt(vals[name], 10, 32); err == nil {
			*into = int32(n)
		}
	}
	ms("streams.session.timeout.ms", &c.SessionTimeout)
	ms("streams.heartbeat.interval.ms", &c.HeartbeatInterval)
	i32("streams.num.standby.replicas", &c.NumStandbyReplicas)
	ms("streams.initial.rebalance.delay.ms", &c.InitialRebalanceDelay)
	ms("streams.assignment.interval.ms", &c.AssignmentInterval)
	ms("streams.task.offset.interval.ms", &c.TaskOffsetInterval)
	i32("streams.num.warmup.replicas", &c.NumWarmupReplicas)
	if n, err := strconv.ParseInt(vals["streams.acceptable.recovery.lag"], 10, 64); err == nil {
		c.AcceptableRecoveryLag = n
	}
	if v, ok := vals["streams.rack.aware.assignment.tags"]; ok {
		c.RackAwareTags = nil
		if v != "" {
			c.RackAwareTags = strings.Split(v, ",")
		}
	}
	if p, err := ParseMigrationPolicy(vals["streams.migration.policy"]); err == nil {
		c.MigrationPolicy = p
	}
	if v, ok := vals["streams.assignor.name"]; ok && v != "" {
		// The chosen assignor first: AssignorName takes the first registered one.
		c.Assignors = append([]string{v}, slices.DeleteFunc(slices.Clone(c.Assignors), func(s string) bool { return s == v })...)
	}
	return c
}
