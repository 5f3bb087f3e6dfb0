package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// Spec §1.2: an empty class turns the feature off.
func TestSpec1_2EmptyClassIsFeatureOff(t *testing.T) {
	c, err := Open(Settings{Class: " "}, NewRegistry(), nil, prometheus.NewRegistry())
	if err != nil || c != nil || c.Enabled() {
		t.Fatalf("want (nil, nil), got %v, %v", c, err)
	}
}

// Spec §1.1: the class is a registered name; Kafka's in-memory class is an alias of memory; an
// unknown name fails with a message naming the key and the choices.
func TestSpec1_1ClassSelectsARegisteredPlugin(t *testing.T) {
	r := NewRegistry()
	for _, class := range []string{"memory", KafkaInMemoryClass} {
		c, err := Open(Settings{Class: class}, r, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Plugin().(*Memory); !ok || c.Name() != "memory" {
			t.Fatalf("%s opened %T", class, c.Plugin())
		}
		c.Close()
	}
	_, err := Open(Settings{Class: "nosuch"}, r, nil, nil)
	if err == nil || !strings.Contains(err.Error(), KeyPrefix+"class") || !strings.Contains(err.Error(), "file, http, memory") {
		t.Fatalf("unknown class: %v", err)
	}
}

// Keys under group.streams.topology.description.plugin.<name>. reach the plugin without that
// prefix; a bad key is reported with its full name; keys of other plugins are logged.
func TestPluginKeysArePassedWithoutPrefix(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	c, err := Open(Settings{Class: "memory", Props: map[string]string{"memory.max.groups": "1", "file.dir": "/x"},
		CallTimeout: time.Second, MaxConcurrency: 2}, NewRegistry(), zap.New(core), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	c.Set(ctx, "a", 1, desc("a"))
	c.Set(ctx, "b", 1, desc("b"))
	if d, _ := c.Get(ctx, "a", 1); d != nil {
		t.Fatal("max.groups=1 was not applied")
	}
	if logs.FilterField(zap.String("key", KeyPrefix+"file.dir")).Len() != 1 {
		t.Fatal("a key of another plugin must be logged")
	}
	_, err = Open(Settings{Class: "memory", Props: map[string]string{"memory.max.groupz": "1"}}, NewRegistry(), nil, nil)
	if err == nil || !strings.Contains(err.Error(), KeyPrefix+"memory.max.groupz") {
		t.Fatalf("bad key must be named in full: %v", err)
	}
}

type nopPlugin struct{ cfg topologyplugin.Config }

func (nopPlugin) Set(context.Context, string, int32, *topologyplugin.Description) error { return nil }
func (nopPlugin) Get(context.Context, string, int32) (*topologyplugin.Description, error) {
	return nil, nil
}
func (nopPlugin) Delete(context.Context, string) error { return nil }
func (nopPlugin) Close() error                         { return nil }

// An embedding program registers its own plugin, on a Registry or through
// topologyplugin.Register; names are validated and unique.
func TestRegisterOwnPlugin(t *testing.T) {
	r := NewRegistry()
	var got topologyplugin.Config
	err := r.Register("acme", func(cfg topologyplugin.Config) (topologyplugin.Plugin, error) {
		got = cfg
		return nopPlugin{cfg}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(Settings{Class: "acme", Props: map[string]string{"acme.url": "u", "acmex.y": "z"}}, r, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if len(got) != 1 || got["url"] != "u" {
		t.Fatalf("plugin got %v", got)
	}
	for _, name := range []string{"acme", "memory", "class", "max", "call", "a.b", ""} {
		if r.Register(name, func(topologyplugin.Config) (topologyplugin.Plugin, error) { return nil, nil }) == nil {
			t.Errorf("Register(%q) must fail", name)
		}
	}
	if r.Register("nilfactory", nil) == nil {
		t.Error("nil factory accepted")
	}
	r.Register("broken", func(topologyplugin.Config) (topologyplugin.Plugin, error) { return nil, errors.New("cannot connect") })
	if _, err := Open(Settings{Class: "broken"}, r, nil, nil); err == nil || !strings.Contains(err.Error(), "cannot connect") {
		t.Fatalf("factory error: %v", err)
	}

	if _, done := topologyplugin.Registered()["registry-test-global"]; !done { // -count=N
		topologyplugin.Register("registry-test-global", func(cfg topologyplugin.Config) (topologyplugin.Plugin, error) { return nopPlugin{cfg}, nil })
	}
	if _, err := NewRegistry().Resolve("registry-test-global"); err != nil {
		t.Fatalf("a globally registered plugin must be in new registries: %v", err)
	}
}
