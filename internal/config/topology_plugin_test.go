package config

import (
	"errors"
	"testing"
	"time"
)

// Spec topology-description §1.1: defaults equal Kafka's (no plugin; back-off constants).
func TestTopologyPluginDefaults(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := c.TopologyPlugin
	if p.Class != "" || p.CallTimeout != 10*time.Second || p.MaxConcurrency != 64 ||
		p.BackoffInitial != 30*time.Second || p.BackoffMax != time.Hour || p.BackoffJitter != 0.2 || len(p.Props) != 0 {
		t.Fatalf("defaults: %+v", p)
	}
}

// Spec topology-description §1.1: group.streams.topology.description.plugin.<name>.* keys pass
// through to the plugin, from the file and from --set, and show up in config check.
func TestTopologyPluginKeysPassThrough(t *testing.T) {
	path := writeFile(t, "group.streams.topology.description.plugin.class=file\n"+
		"group.streams.topology.description.plugin.file.dir=/var/lib/topologies\n"+
		"group.streams.topology.description.plugin.file.max.bytes=1000\n")
	c, err := Load(path, []string{"group.streams.topology.description.plugin.file.max.bytes=2000",
		"group.streams.topology.description.plugin.call.timeout.ms=500"})
	if err != nil {
		t.Fatal(err)
	}
	p := c.TopologyPlugin
	if p.Class != "file" || p.CallTimeout != 500*time.Millisecond || len(p.Props) != 2 ||
		p.Props["file.dir"] != "/var/lib/topologies" || p.Props["file.max.bytes"] != "2000" {
		t.Fatalf("got %+v", p)
	}
	found := map[string]Source{}
	for _, e := range c.Entries() {
		found[e.Key] = e.Source
	}
	if found["group.streams.topology.description.plugin.file.dir"] != SourceFile || found["group.streams.topology.description.plugin.file.max.bytes"] != SourceFlag {
		t.Fatalf("pass-through keys missing from Entries: %v", found)
	}
}

// The prefix rule does not swallow typos of the feature's own keys.
func TestTopologyPluginKeyErrors(t *testing.T) {
	cases := []struct {
		set     string
		wantKey string
	}{
		{"group.streams.topology.description.plugin.call.timeout.mss=1", "group.streams.topology.description.plugin.call.timeout.mss"},
		{"group.streams.topology.description.plugin.max.concurency=1", "group.streams.topology.description.plugin.max.concurency"},
		{"group.streams.topology.description.plugin.class.name=x", "group.streams.topology.description.plugin.class.name"},
		{"group.streams.topology.description.plugin.memory=1", "group.streams.topology.description.plugin.memory"},
		{"group.streams.topology.description.plugin.memory.=1", "group.streams.topology.description.plugin.memory."},
		{"group.streams.topology.description.plugin.call.timeout.ms=0", "group.streams.topology.description.plugin.call.timeout.ms"},
		{"group.streams.topology.description.plugin.max.concurrency=0", "group.streams.topology.description.plugin.max.concurrency"},
		{"group.streams.topology.description.backoff.jitter=1", "group.streams.topology.description.backoff.jitter"},
		{"group.streams.topology.description.backoff.max.ms=1000", "group.streams.topology.description.backoff.max.ms"},
	}
	for _, tc := range cases {
		_, err := Load("", []string{tc.set})
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != tc.wantKey {
			t.Errorf("%s: want a KeyError for %s, got %v", tc.set, tc.wantKey, err)
		}
	}
}

// The example plugin configurations in configs/ are valid configuration files.
func TestTopologyPluginExampleConfigsLoad(t *testing.T) {
	for _, name := range []string{"memory", "file", "http"} {
		c, err := Load("../../configs/plugin-"+name+".properties", nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.TopologyPlugin.Class != name || len(c.TopologyPlugin.Props) == 0 {
			t.Fatalf("%s: %+v", name, c.TopologyPlugin)
		}
	}
}
