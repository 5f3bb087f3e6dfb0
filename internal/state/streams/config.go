package streams

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
)

// Config is the broker-level streams group configuration (spec §7.1).
type Config struct {
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// ReconcilingHeartbeatInterval, when shorter than HeartbeatInterval, is answered instead of
	// it while the member or its group has a hand-over in progress (0: always HeartbeatInterval,
	// Kafka's answer). See group.streams.reconciliation.heartbeat.interval.ms.
	ReconcilingHeartbeatInterval time.Duration
	MaxSize                      int32
	NumStandbyReplicas           int32
	InitialRebalanceDelay        time.Duration
	AssignmentInterval           time.Duration
	// AssignmentQuiet lets a quiet group be assigned before the interval is over
	// (group.streams.assignment.quiet.ms, beyond Kafka; 0, the default here, is Kafka's
	// timing): see assignmentHeld.
	AssignmentQuiet time.Duration
	// Assignors are the registered assignor names; the first is the default (KIP-1357).
	Assignors             []string
	RackAwareTags         []string
	TaskOffsetInterval    time.Duration
	NumWarmupReplicas     int32
	AcceptableRecoveryLag int64
	// Lookup finds an assignor by name (assign.Lookup in production).
	Lookup func(name string) (assign.Assignor, bool)
	// TopologyDescriptionPlugin reports whether a topology description plugin is configured
	// (KIP-1331): the offsets sweep then pins groups whose description may be held.
	TopologyDescriptionPlugin bool
	// GroupBounds bound the group-level overrides (streams.* GROUP configs).
	GroupBounds GroupConfigBounds
	// MigrationPolicy is group.streams.migration.policy (online-migration §8); empty means the
	// default, bidirectional.
	MigrationPolicy MigrationPolicy
	// ClassicMaxSize is group.max.size, the bound of a downgrade (online-migration §5.2 D4); 0:
	// none.
	ClassicMaxSize int32
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, MaxSize: 1<<31 - 1,
		InitialRebalanceDelay: 3 * time.Second, AssignmentInterval: time.Second,
		Assignors: []string{"sticky"}, TaskOffsetInterval: time.Minute,
		NumWarmupReplicas: 2, AcceptableRecoveryLag: 10000, GroupBounds: DefaultGroupConfigBounds(),
		MigrationPolicy: MigrationBidirectional,
	}
}

// assignmentConfigs is the map persisted in GroupMetadata (spec §7.3).
func (c Config) assignmentConfigs() map[string]string {
	m := map[string]string{"num.standby.replicas": strconv.Itoa(int(c.NumStandbyReplicas))}
	if len(c.RackAwareTags) > 0 {
		m["rack.aware.assignment.tags"] = strings.Join(c.RackAwareTags, ",")
	}
	return m
}

// AssignorName is the assignor a group uses now (spec §6.2): the default, i.e. the first of
// group.streams.assignors that is registered. Group-level streams.assignor.name overrides are
// not supported yet.
func (c Config) AssignorName() string {
	if c.Lookup != nil {
		for _, n := range c.Assignors {
			if _, ok := c.Lookup(n); ok {
				return n
			}
		}
	}
	if len(c.Assignors) > 0 {
		return c.Assignors[0]
	}
	return "sticky"
}

func (c Config) assignor() (assign.Assignor, error) {
	if c.Lookup == nil {
		return nil, fmt.Errorf("no task assignor is registered")
	}
	if a, ok := c.Lookup(c.AssignorName()); ok {
		return a, nil
	}
	return nil, fmt.Errorf("task assignor %q is not registered", c.AssignorName())
}

// configsFromStored parses stored assignment configs for the initial-delay timer path.
func configsFromStored(c Config, stored map[string]string) assign.Configs {
	out := assign.Configs{NumStandbyReplicas: c.NumStandbyReplicas, AcceptableRecoveryLag: c.AcceptableRecoveryLag, MaxWarmupReplicas: c.NumWarmupReplicas}
	if v, ok := stored["num.standby.replicas"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			out.NumStandbyReplicas = int32(n)
		}
	}
	if v := stored["rack.aware.assignment.tags"]; v != "" {
		out.RackAwareTags = strings.Split(v, ",")
	}
	return out
}

func equalConfigs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
