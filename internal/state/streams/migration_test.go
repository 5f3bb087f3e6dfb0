package streams

import (
	"errors"
	"testing"
)

func TestMigrationPolicyValues(t *testing.T) {
	for _, c := range []struct {
		in                        string
		upgrade, downgrade, joins bool
	}{
		{"bidirectional", true, true, true},
		{"", true, true, true}, // a Config built without the key runs the default
		{"UPGRADE", true, false, true},
		{" downgrade ", false, true, true},
		{"Disabled", false, false, false},
	} {
		p := MigrationPolicy("")
		if c.in != "" {
			var err error
			if p, err = ParseMigrationPolicy(c.in); err != nil {
				t.Fatalf("%q: %v", c.in, err)
			}
		}
		if p.AllowsUpgrade() != c.upgrade || p.AllowsDowngrade() != c.downgrade || p.AllowsClassicMembers() != c.joins {
			t.Errorf("%q: upgrade %v downgrade %v classic joins %v", c.in, p.AllowsUpgrade(), p.AllowsDowngrade(), p.AllowsClassicMembers())
		}
	}
	if _, err := ParseMigrationPolicy("sideways"); err == nil {
		t.Fatal("an unknown policy must be an error")
	}
}

// streams.migration.policy is a group-level override: normalized to lower case, refused with
// INVALID_CONFIG when unknown, applied over the broker value, hidden from DescribeConfigs.
func TestMigrationPolicyGroupConfig(t *testing.T) {
	k, ok := LookupGroupConfigKey("streams.migration.policy")
	if !ok || !k.Internal || k.Broker != "group.streams.migration.policy" {
		t.Fatalf("key %+v %v", k, ok)
	}
	v, err := NormalizeGroupConfig(k, " Disabled")
	if err != nil || v != "disabled" {
		t.Fatalf("normalize: %q %v", v, err)
	}
	var ge *GroupConfigError
	if _, err := NormalizeGroupConfig(k, "sideways"); !errors.As(err, &ge) {
		t.Fatalf("unknown value: %v", err)
	}
	base := DefaultConfig()
	if base.MigrationPolicy != MigrationBidirectional {
		t.Fatalf("default %q", base.MigrationPolicy)
	}
	if got := base.WithGroupConfigs(map[string]string{"streams.migration.policy": "disabled"}).MigrationPolicy; got != MigrationDisabled {
		t.Fatalf("override gives %q", got)
	}
	base.MigrationPolicy = MigrationUpgrade
	if got := base.WithGroupConfigs(map[string]string{"streams.num.standby.replicas": "1"}).MigrationPolicy; got != MigrationUpgrade {
		t.Fatalf("without an override the broker value stays: %q", got)
	}
}
