package streams

import (
	"fmt"
	"strings"
)

// MigrationPolicy is group.streams.migration.policy (spec online-migration §8): which online
// conversions between a classic group of Kafka Streams members and a streams group are allowed.
// Offline conversions of empty groups (streams-groups §2.6, §11.2) happen under every policy.
type MigrationPolicy string

const (
	// MigrationBidirectional allows online upgrades and downgrades (the default).
	MigrationBidirectional MigrationPolicy = "bidirectional"
	// MigrationUpgrade allows classic -> streams only.
	MigrationUpgrade MigrationPolicy = "upgrade"
	// MigrationDowngrade allows streams -> classic only.
	MigrationDowngrade MigrationPolicy = "downgrade"
	// MigrationDisabled is Apache Kafka 4.4: a streams heartbeat to a non-empty classic group gets
	// GROUP_ID_NOT_FOUND and a JoinGroup to a non-empty streams group INCONSISTENT_GROUP_PROTOCOL.
	MigrationDisabled MigrationPolicy = "disabled"
)

// MigrationPolicyNames lists the values in documentation order.
var MigrationPolicyNames = []string{string(MigrationBidirectional), string(MigrationUpgrade), string(MigrationDowngrade), string(MigrationDisabled)}

// ParseMigrationPolicy reads a policy case-insensitively, as Kafka reads
// group.consumer.migration.policy; anything else is an error.
func ParseMigrationPolicy(s string) (MigrationPolicy, error) {
	p := MigrationPolicy(strings.ToLower(strings.TrimSpace(s)))
	switch p {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
		return p, nil
	}
	return "", fmt.Errorf("must be one of %s", strings.Join(MigrationPolicyNames, ", "))
}

// effective maps the zero value (a Config built without the key) to the default.
func (p MigrationPolicy) effective() MigrationPolicy {
	if p == "" {
		return MigrationBidirectional
	}
	return p
}

// AllowsUpgrade reports whether a non-empty classic group may become a streams group.
func (p MigrationPolicy) AllowsUpgrade() bool {
	p = p.effective()
	return p == MigrationBidirectional || p == MigrationUpgrade
}

// AllowsDowngrade reports whether a streams group left with only classic members may become a
// classic group.
func (p MigrationPolicy) AllowsDowngrade() bool {
	p = p.effective()
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// AllowsClassicMembers reports whether a classic JoinGroup may enter a non-empty streams group;
// only disabled refuses it (spec §4.2 J1).
func (p MigrationPolicy) AllowsClassicMembers() bool { return p.effective() != MigrationDisabled }
