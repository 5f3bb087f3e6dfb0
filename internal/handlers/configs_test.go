package handlers

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs of coordinatord's BROKER resource: values that may be secrets (plugin
// pass-through keys) are never shown; every key is read-only; the source says whether the
// operator set it.
func TestDescribeBrokerConfigsHidesSecretsAndReportsSources(t *testing.T) {
	tb := &Table{deps: Deps{Node: Node{ID: 7}, BrokerConfigs: []BrokerConfig{
		{Name: "group.max.size", Value: "10", Explicit: true},
		{Name: "group.min.session.timeout.ms", Value: "6000"},
		{Name: "group.streams.topology.description.plugin.api.password", Value: "hunter2", Explicit: true},
		{Name: "group.streams.topology.description.plugin.tls.key", Value: "PEM", Explicit: true},
	}}}
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "7"
	out := tb.describeBrokerConfigs(r, true, false)
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range out.Configs {
		got[c.Name] = c
		if !c.ReadOnly {
			t.Errorf("%s is not read-only", c.Name)
		}
	}
	if c := got["group.max.size"]; *c.Value != "10" || c.Source != kmsg.ConfigSourceStaticBrokerConfig || c.IsSensitive {
		t.Errorf("group.max.size: %+v", c)
	}
	if c := got["group.min.session.timeout.ms"]; *c.Value != "6000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("group.min.session.timeout.ms: %+v", c)
	}
	for _, k := range []string{"group.streams.topology.description.plugin.api.password", "group.streams.topology.description.plugin.tls.key"} {
		c := got[k]
		if !c.IsSensitive || c.Value != nil || c.ConfigSynonyms[0].Value != nil {
			t.Errorf("%s shown: %+v", k, c)
		}
	}
	r.ConfigNames = []string{"group.max.size"}
	if out := tb.describeBrokerConfigs(r, false, false); len(out.Configs) != 1 || out.Configs[0].ConfigSynonyms != nil {
		t.Errorf("by name without synonyms: %+v", out.Configs)
	}
}
