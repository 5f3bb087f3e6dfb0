package meta

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// topicConfigs are the topic-level configs Apache Kafka 4.x accepts, with the type and bounds
// it validates at CreateTopics. coordinatord stores no data, so none of them changes what it
// does; they are kept to answer like the data cluster will, and a topic created here with a
// config the cluster would reject must fail here too.
var topicConfigs = map[string]func(string) error{
	"cleanup.policy":                          listOf("compact", "delete"),
	"compression.type":                        oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
	"compression.gzip.level":                  gzipLevel,
	"compression.lz4.level":                   intRange(1, 17),
	"compression.zstd.level":                  intRange(-131072, 22),
	"delete.retention.ms":                     longRange(0, math.MaxInt64),
	"file.delete.delay.ms":                    longRange(0, math.MaxInt64),
	"flush.messages":                          longRange(1, math.MaxInt64),
	"flush.ms":                                longRange(0, math.MaxInt64),
	"follower.replication.throttled.replicas": throttledReplicas,
	"index.interval.bytes":                    intRange(0, math.MaxInt32),
	"leader.replication.throttled.replicas":   throttledReplicas,
	"local.retention.bytes":                   longRange(-2, math.MaxInt64),
	"local.retention.ms":                      longRange(-2, math.MaxInt64),
	"max.compaction.lag.ms":                   longRange(1, math.MaxInt64),
	"max.message.bytes":                       intRange(0, math.MaxInt32),
	"message.timestamp.after.max.ms":          longRange(0, math.MaxInt64),
	"message.timestamp.before.max.ms":         longRange(0, math.MaxInt64),
	"message.timestamp.type":                  oneOf("CreateTime", "LogAppendTime"),
	"min.cleanable.dirty.ratio":               doubleRange(0, 1),
	"min.compaction.lag.ms":                   longRange(0, math.MaxInt64),
	"min.insync.replicas":                     intRange(1, math.MaxInt32),
	"preallocate":                             boolean,
	"remote.log.copy.disable":                 boolean,
	"remote.log.delete.on.disable":            boolean,
	"remote.storage.enable":                   boolean,
	"retention.bytes":                         longRange(math.MinInt64, math.MaxInt64),
	"retention.ms":                            longRange(-1, math.MaxInt64),
	"segment.bytes":                           intRange(1024*1024, math.MaxInt32),
	"segment.index.bytes":                     intRange(4, math.MaxInt32),
	"segment.jitter.ms":                       longRange(0, math.MaxInt64),
	"segment.ms":                              longRange(1, math.MaxInt64),
	"unclean.leader.election.enable":          boolean,
}

// ValidateTopicConfig checks one topic config as Kafka does at CreateTopics.
func ValidateTopicConfig(name, value string) error {
	check, ok := topicConfigs[name]
	if !ok {
		return fmt.Errorf("unknown topic config name: %s", name)
	}
	if err := check(strings.TrimSpace(value)); err != nil {
		return fmt.Errorf("invalid value %s for configuration %s: %v", value, name, err)
	}
	return nil
}

func intRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("not a number of type INT")
		}
		if n < lo || n > hi {
			return fmt.Errorf("value must be in [%d, %d]", lo, hi)
		}
		return nil
	}
}

func longRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not a number of type LONG")
		}
		if n < lo || n > hi {
			return fmt.Errorf("value must be at least %d", lo)
		}
		return nil
	}
}

func doubleRange(lo, hi float64) func(string) error {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("not a number of type DOUBLE")
		}
		if f < lo || f > hi {
			return fmt.Errorf("value must be in [%g, %g]", lo, hi)
		}
		return nil
	}
}

func boolean(v string) error {
	switch strings.ToLower(v) {
	case "true", "false":
		return nil
	}
	return fmt.Errorf("expected value to be either true or false")
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				return nil
			}
		}
		return fmt.Errorf("string must be one of: %s", strings.Join(allowed, ", "))
	}
}

func listOf(allowed ...string) func(string) error {
	one := oneOf(allowed...)
	return func(v string) error {
		if v == "" {
			return nil
		}
		for _, item := range strings.Split(v, ",") {
			if err := one(strings.TrimSpace(item)); err != nil {
				return err
			}
		}
		return nil
	}
}

// gzipLevel accepts -1 (the codec's default) or 1..9.
func gzipLevel(v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return fmt.Errorf("not a number of type INT")
	}
	if n != -1 && (n < 1 || n > 9) {
		return fmt.Errorf("value must be -1 or in [1, 9]")
	}
	return nil
}

// throttledReplicas accepts "*", empty, or a list of partition:broker pairs.
func throttledReplicas(v string) error {
	if v == "" || v == "*" {
		return nil
	}
	for _, item := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return fmt.Errorf("must be the literal '*' or a list of replicas in the format [PartitionId]:[BrokerId],...")
		}
		if _, err := strconv.ParseInt(p, 10, 32); err != nil {
			return fmt.Errorf("must be the literal '*' or a list of replicas in the format [PartitionId]:[BrokerId],...")
		}
		if _, err := strconv.ParseInt(b, 10, 32); err != nil {
			return fmt.Errorf("must be the literal '*' or a list of replicas in the format [PartitionId]:[BrokerId],...")
		}
	}
	return nil
}
