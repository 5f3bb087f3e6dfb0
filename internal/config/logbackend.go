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
	// GroupID is the upstream group the nodes of one cluster.id share the shards through; empty
	// means coordinatord-<cluster.id>.
	GroupID           string
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	// PeerProbeInterval is how often a node dials every other node's client listener to find
	// a dead one before the session timeout does; 0: never.
	PeerProbeInterval time.Duration
}

// Kafka says whether the shard logs live on the upstream cluster.
func (l LogBackendConfig) Kafka() bool { return l.Kind == "kafka" }

var logBackendKeys = []key{
	{"log.backend", "local", "Where the group shard logs live: local (segmented logs under log.dirs) or kafka (one partition per shard of the compacted upstream topic log.kafka.topic, written in a transaction per round under the transactional ids coordinatord-<cluster.id>-shard-<n> and -shard-<n>-1, alternating; needs gateway mode, upstream.bootstrap.servers). The metadata shard stays under log.dirs.",
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
	{"log.kafka.group.id", "", "log.backend=kafka: the upstream group (classic protocol, protocol type coordinatord) through which the nodes of one cluster.id share the shards; empty means coordinatord-<cluster.id>.",
		func(c *Config, v string) error {
			c.LogBackend.GroupID = v
			return nil
		}},
	{"log.kafka.session.timeout.ms", "10000", "log.backend=kafka: session.timeout.ms of this node's membership in log.kafka.group.id. The upstream moves a silent node's shards after it; a node that has had no successful heartbeat for this long stops serving every shard on its own. Within the upstream's group.min.session.timeout.ms and group.max.session.timeout.ms.",
		func(c *Config, v string) (err error) {
			c.LogBackend.SessionTimeout, err = parseMillis(v, 1)
			return
		}},
	{"log.kafka.heartbeat.interval.ms", "3000", "log.backend=kafka: how often a node heartbeats to log.kafka.group.id; below log.kafka.session.timeout.ms (a third of it is usual).",
		func(c *Config, v string) (err error) {
			c.LogBackend.HeartbeatInterval, err = parseMillis(v, 1)
			return
		}},
	{"log.kafka.rebalance.timeout.ms", "60000", "log.backend=kafka: rebalance.timeout.ms of this node's membership: how long the upstream waits for every node to rejoin during a rebalance of the shards.",
		func(c *Config, v string) (err error) {
			c.LogBackend.RebalanceTimeout, err = parseMillis(v, 1)
			return
		}},
	{"log.kafka.peer.probe.interval.ms", "250", "log.backend=kafka: how often a node dials every other node's advertised listener. A node it reached before that refuses the connection (ECONNREFUSED: nothing listens, the process is gone) on two probes in a row is removed from log.kafka.group.id with a LeaveGroup at once, so its shards move without waiting for log.kafka.session.timeout.ms; a probe that gets no answer proves nothing and changes nothing. 0 turns the probes off.",
		func(c *Config, v string) (err error) {
			c.LogBackend.PeerProbeInterval, err = parseMillis(v, 0)
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
	// A node that fails to rejoin is dropped after the rebalance timeout; its lease (the session
	// timeout from its last heartbeat, sent no later than the rebalance began) must end first.
	if l.RebalanceTimeout < l.SessionTimeout {
		return &KeyError{Key: "log.kafka.rebalance.timeout.ms", Value: strconv.FormatInt(l.RebalanceTimeout.Milliseconds(), 10),
			Reason: "must be at least log.kafka.session.timeout.ms (" + strconv.FormatInt(l.SessionTimeout.Milliseconds(), 10) + "): a node dropped for not rejoining must have stopped serving by then"}
	}
	if l.HeartbeatInterval >= l.SessionTimeout {
		return &KeyError{Key: "log.kafka.heartbeat.interval.ms", Value: strconv.FormatInt(l.HeartbeatInterval.Milliseconds(), 10),
			Reason: "must be below log.kafka.session.timeout.ms (" + strconv.FormatInt(l.SessionTimeout.Milliseconds(), 10) + ")"}
	}
	return nil
}

// MembershipGroup is the upstream group id the nodes of clusterID share the shards through.
func (l LogBackendConfig) MembershipGroup(clusterID string) string {
	if l.GroupID != "" {
		return l.GroupID
	}
	return "coordinatord-" + clusterID
}
