package streams

import (
	"testing"
	"time"
)

// The validation table: each row is a whole override set after a change, and the message
// Kafka 4.4 answers with INVALID_CONFIG (observed against a 4.4 broker with default bounds).
func TestValidateGroupConfigs(t *testing.T) {
	base := DefaultConfig()
	b := DefaultGroupConfigBounds()
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"streams.num.standby.replicas": "2"}, ""},
		{map[string]string{"streams.num.standby.replicas": "3"}, "streams.num.standby.replicas must be less than or equal to 2"},
		{map[string]string{"streams.session.timeout.ms": "1000"}, "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive."},
		{map[string]string{"streams.session.timeout.ms": "60000"}, ""},
		{map[string]string{"streams.heartbeat.interval.ms": "50000"}, "streams.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."},
		{map[string]string{"streams.assignment.interval.ms": "20000"}, "streams.assignment.interval.ms must be in the range 0 to 15000 inclusive."},
		{map[string]string{"streams.num.warmup.replicas": "21"}, "streams.num.warmup.replicas must be less than or equal to 20"},
		{map[string]string{"streams.task.offset.interval.ms": "100"}, "streams.task.offset.interval.ms must be greater than or equal to 15000"},
		{map[string]string{"streams.rack.aware.assignment.tags": "a,a"}, "streams.rack.aware.assignment.tags must not contain duplicate tag keys."},
		{map[string]string{"streams.rack.aware.assignment.tags": "a,b"}, ""},
		{map[string]string{"streams.assignor.name": "foo"}, "streams.assignor.name 'foo' is not a registered task assignor. Registered assignors are: [sticky]."},
		{map[string]string{"streams.initial.rebalance.delay.ms": "99999999"}, ""},
	} {
		err := ValidateGroupConfigs(tc.set, b, base.Assignors, base)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.set, got, tc.want)
		}
	}
}

func TestNormalizeGroupConfig(t *testing.T) {
	for _, tc := range []struct{ key, in, want, err string }{
		{"streams.num.standby.replicas", " 1 ", "1", ""},
		{"streams.num.standby.replicas", "abc", "", "Invalid value abc for configuration streams.num.standby.replicas: Not a number of type INT"},
		{"streams.num.standby.replicas", "", "", "Invalid value  for configuration streams.num.standby.replicas: Not a number of type INT"},
		{"streams.num.standby.replicas", "-1", "", "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at least 0"},
		{"streams.acceptable.recovery.lag", "99999999999", "99999999999", ""},
		{"streams.assignor.offload.enable", "maybe", "", "Invalid value maybe for configuration streams.assignor.offload.enable: Expected value to be either true or false"},
		{"streams.rack.aware.assignment.tags", "a, b", "a,b", ""},
	} {
		k, _ := LookupGroupConfigKey(tc.key)
		got, err := NormalizeGroupConfig(k, tc.in)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) || got != tc.want {
			t.Errorf("%s=%q: got %q, %v; want %q, %q", tc.key, tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestWithGroupConfigs(t *testing.T) {
	base := DefaultConfig()
	base.Assignors = []string{"sticky", "highavailability"}
	c := base.WithGroupConfigs(map[string]string{"streams.num.standby.replicas": "1", "streams.session.timeout.ms": "50000",
		"streams.heartbeat.interval.ms": "6000", "streams.assignor.name": "highavailability", "streams.rack.aware.assignment.tags": "zone"})
	if c.NumStandbyReplicas != 1 || c.SessionTimeout != 50*time.Second || c.HeartbeatInterval != 6*time.Second ||
		c.Assignors[0] != "highavailability" || len(c.RackAwareTags) != 1 || base.Assignors[0] != "sticky" {
		t.Fatalf("%+v", c)
	}
}
