package config

import (
	"strings"
	"testing"
	"time"
)

func TestLogBackendDefaultsToLocal(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.LogBackend.Kafka() || c.LogBackend.Topic != "__coordinatord_state" {
		t.Fatalf("defaults %+v", c.LogBackend)
	}
}

func TestLogBackendKafkaNeedsGatewayMode(t *testing.T) {
	_, err := Load("", []string{"log.backend=kafka"})
	if err == nil || !strings.Contains(err.Error(), "log.backend") || !strings.Contains(err.Error(), "upstream.bootstrap.servers") {
		t.Fatalf("log.backend=kafka without an upstream: %v", err)
	}
	c, err := Load("", []string{"log.backend=kafka", "upstream.bootstrap.servers=k:9092", "cluster.id=c1",
		"offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1"})
	if err != nil || !c.LogBackend.Kafka() {
		t.Fatalf("gateway mode with log.backend=kafka: %v", err)
	}
}

func TestLogBackendRefusesBadCombinations(t *testing.T) {
	for _, set := range [][]string{
		{"log.backend=s3"},
		{"log.backend=kafka", "upstream.bootstrap.servers=k:9092", "cluster.id=c1", "offsets.topic.replication.factor=1"}, // min.insync 2 > 1
		// Without a shared cluster.id two nodes would get different transactional ids and not fence each other.
		{"log.backend=kafka", "upstream.bootstrap.servers=k:9092", "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1"},
		{"log.kafka.topic="},
		{"log.kafka.peer.probe.interval.ms=-1"},
		{"log.kafka.peer.probe.interval.ms=quarter"},
		// A node heartbeating no more often than its session lasts would lose its lease between beats.
		{"log.backend=kafka", "upstream.bootstrap.servers=k:9092", "cluster.id=c1", "offsets.topic.replication.factor=1",
			"log.kafka.min.insync.replicas=1", "log.kafka.session.timeout.ms=6000", "log.kafka.heartbeat.interval.ms=6000"},
		// Dropped for not rejoining before its lease ended, a node could still serve reads of shards given away.
		{"log.backend=kafka", "upstream.bootstrap.servers=k:9092", "cluster.id=c1", "offsets.topic.replication.factor=1",
			"log.kafka.min.insync.replicas=1", "log.kafka.session.timeout.ms=30000", "log.kafka.rebalance.timeout.ms=20000"},
	} {
		if _, err := Load("", set); err == nil {
			t.Errorf("%v accepted", set)
		}
	}
}

func TestMembershipGroupDefaultsToTheClusterID(t *testing.T) {
	c, err := Load("", []string{"log.backend=kafka", "upstream.bootstrap.servers=k:9092", "cluster.id=c1",
		"offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1"})
	if err != nil {
		t.Fatal(err)
	}
	if g := c.LogBackend.MembershipGroup("c1"); g != "coordinatord-c1" {
		t.Fatalf("default group %q", g)
	}
	c, err = Load("", []string{"log.backend=kafka", "upstream.bootstrap.servers=k:9092", "cluster.id=c1",
		"offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1", "log.kafka.group.id=coord-nodes"})
	if err != nil {
		t.Fatal(err)
	}
	if g := c.LogBackend.MembershipGroup("c1"); g != "coord-nodes" {
		t.Fatalf("configured group %q", g)
	}
}

// The peer probes are on by default and 0 turns them off (the SIGTERM e2e test relies on it).
func TestPeerProbeIntervalDefaultsAndOff(t *testing.T) {
	c, err := Load("", nil)
	if err != nil || c.LogBackend.PeerProbeInterval != 250*time.Millisecond {
		t.Fatalf("default %v, %v", c.LogBackend.PeerProbeInterval, err)
	}
	c, err = Load("", []string{"log.kafka.peer.probe.interval.ms=0"})
	if err != nil || c.LogBackend.PeerProbeInterval != 0 {
		t.Fatalf("0: %v, %v", c.LogBackend.PeerProbeInterval, err)
	}
}
