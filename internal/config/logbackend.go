package config

import (
	"errors"
	"strconv"
	"time"
)

// LogBackendConfig chooses where the shard logs live: the embedded segmented log under
// log.dirs, or one partition per shard of a compacted topic on the upstream cluster.
type LogBackendConfig struct {
	// Kind is "local" or "kafka".
	Kind string
	// Topic is the upstream state topic (log.backend=kafka).
	Topic string
	// ReplicationFactor and MinInsyncReplicas apply when coordinatord creates Topic.
	ReplicationFactor  int16
	MinInsyncReplicas  int
	TransactionTimeout time.Duration
}

// Kafka says whether the shard logs live on the upstream cluster.
func (l LogBackendConfig) Kafka() bool { return l.Kind == "kafka" }

var logBackendKeys = []key{
	{"log.backend", "local", "Where the group shard logs live: local (segmented logs under log.dirs) or kafka (one partition per shard of the compacted upstream topic log.kafka.topic, written in a transaction per round under the transactional id coordinatord-<cluster.id>-shard-<n>; needs gateway mode, upstream.bootstrap.servers). The metadata shard stays under log.dirs.",
		func(c *Config, v string) error {
			if v != "local" && v != "kafka" {
				return errors.New("must be local or kafka")
			}
			c.LogBackend.Kind = v
			return nil
		}},
	{"log.kafka.topic", "__coordinatord_state", "log.backend=kafka: the upstream topic holding the shard logs, one partition per shard (offsets.topic.num.partitions). Created with cleanup.policy=compact if missing; an existing one must have that many partitions and be compacted.",
		func(c *Config, v string) error {
			if v == "" {
				return errors.New("must not be empty")
			}
			c.LogBackend.Topic = v
			return nil
		}},
	{"offsets.topic.replication.factor", "3", "log.backend=kafka: replication factor of log.kafka.topic when coordinatord creates it (as Kafka's own key for __consumer_offsets).",
		func(c *Config, v string) error {
			n, err := parseInt32(v, 1, 32767)
			c.LogBackend.ReplicationFactor = int16(n)
			return err
		}},
	{"log.kafka.min.insync.replicas", "2", "log.backend=kafka: min.insync.replicas of log.kafka.topic when coordinatord creates it; with acks=all a write is acknowledged only once this many replicas have it. At most offsets.topic.replication.factor.",
		func(c *Config, v string) error {
			n, err := parseInt32(v, 1, 32767)
			c.LogBackend.MinInsyncReplicas = int(n)
			return err
		}},
	{"log.kafka.transaction.timeout.ms", "30000", "log.backend=kafka: transaction.timeout.ms of the per-shard producers; bounds how long a crashed owner's open transaction delays the next owner's load.",
		func(c *Config, v string) (err error) {
			c.LogBackend.TransactionTimeout, err = parseMillis(v, 1)
			return
		}},
}

func init() { keys = append(keys, logBackendKeys...) }

// validateLogBackend checks the combination: the kafka backend writes with coordinatord's
// upstream client, so it needs gateway mode.
func (c *Config) validateLogBackend() error {
	l := c.LogBackend
	if !l.Kafka() {
		return nil
	}
	if !c.Gateway.Enabled() {
		return &KeyError{Key: "log.backend", Value: l.Kind, Reason: "kafka needs upstream.bootstrap.servers (gateway mode): the shard logs live on the upstream cluster"}
	}
	// The transactional ids carry the cluster id: one generated per log.dirs would give every
	// node ids of its own, and two owners of a shard would not fence each other.
	if c.ClusterID == "" {
		return &KeyError{Key: "cluster.id", Reason: "log.backend=kafka needs an explicit cluster.id: the per-shard transactional ids that fence a stale owner are built from it"}
	}
	if int(l.ReplicationFactor) < l.MinInsyncReplicas {
		return &KeyError{Key: "log.kafka.min.insync.replicas", Value: strconv.Itoa(l.MinInsyncReplicas),
			Reason: "must be at most offsets.topic.replication.factor (" + strconv.Itoa(int(l.ReplicationFactor)) + ")"}
	}
	return nil
}
