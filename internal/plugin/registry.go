// Package plugin runs the topology description plugin for the coordinator (KIP-1331): the
// registry of plugins by name, the built-in plugins (memory, file, http), and the Caller that
// guards every call (worker pool, timeout, panic recovery, metrics) and keeps the per-group
// solicitation back-off. The contract a plugin implements is pkg/topologyplugin.
//
// Typical wiring:
//
//	caller, err := plugin.Open(settings, plugin.NewRegistry(), logger, registerer)
//	// caller == nil when group.streams.topology.description.plugin.class is empty
//	defer caller.Close()
//	if caller.Enabled() && caller.Backoff().Solicit(group, epoch) { /* set TopologyDescriptionRequired */ }
//	err = caller.Set(ctx, group, epoch, description) // from a request goroutine, never a shard
package plugin

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// KeyPrefix starts every plugin key of the server configuration.
const KeyPrefix = "group.streams.topology.description.plugin."

// KafkaInMemoryClass is Kafka's reference plugin class; it selects memory so that Kafka
// configurations work unchanged.
const KafkaInMemoryClass = "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin"

// Registry maps plugin names to factories. NewRegistry starts with the built-ins and every
// plugin registered through topologyplugin.Register; an embedding program adds its own with
// Register before Open.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]topologyplugin.Factory
}

// NewRegistry returns a registry holding memory, file, http and the globally registered plugins.
func NewRegistry() *Registry {
	r := &Registry{factories: map[string]topologyplugin.Factory{
		"memory": NewMemory,
		"file":   NewFile,
		"http":   NewHTTP,
	}}
	for name, f := range topologyplugin.Registered() {
		if _, builtin := r.factories[name]; !builtin {
			r.factories[name] = f
		}
	}
	return r
}

// Register adds a plugin under name; names are unique.
func (r *Registry) Register(name string, f topologyplugin.Factory) error {
	if err := topologyplugin.ValidName(name); err != nil {
		return err
	}
	if f == nil {
		return fmt.Errorf("plugin %s: nil factory", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.factories[name]; dup {
		return fmt.Errorf("plugin %s is already registered", name)
	}
	r.factories[name] = f
	return nil
}

// Names lists the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.factories))
	for n := range r.factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Resolve maps a class value to a registered name (Kafka's in-memory class name is an alias
// of memory).
func (r *Registry) Resolve(class string) (string, error) {
	name := strings.TrimSpace(class)
	if name == KafkaInMemoryClass {
		name = "memory"
	}
	r.mu.RLock()
	_, ok := r.factories[name]
	r.mu.RUnlock()
	if !ok {
		return "", fmt.Errorf("%sclass=%q: no such plugin (registered: %s)", KeyPrefix, class, strings.Join(r.Names(), ", "))
	}
	return name, nil
}

// PluginConfig selects the keys of plugin name from props (keys relative to KeyPrefix, as
// internal/config collects them) and strips "<name>." from them.
func PluginConfig(name string, props map[string]string) topologyplugin.Config {
	cfg := topologyplugin.Config{}
	for k, v := range props {
		if rest, ok := strings.CutPrefix(k, name+"."); ok && rest != "" {
			cfg[rest] = v
		}
	}
	return cfg
}

// Build resolves class and runs the plugin's factory with its keys. Errors name the full key.
func (r *Registry) Build(class string, props map[string]string) (topologyplugin.Plugin, string, error) {
	name, err := r.Resolve(class)
	if err != nil {
		return nil, "", err
	}
	r.mu.RLock()
	f := r.factories[name]
	r.mu.RUnlock()
	p, err := f(PluginConfig(name, props))
	if err != nil {
		var ce *topologyplugin.ConfigError
		if errors.As(err, &ce) {
			return nil, "", fmt.Errorf("%s%s.%s", KeyPrefix, name, ce.Error())
		}
		return nil, "", fmt.Errorf("topology description plugin %s: %w", name, err)
	}
	if p == nil {
		return nil, "", fmt.Errorf("topology description plugin %s: factory returned no plugin", name)
	}
	return p, name, nil
}

// Settings are the server keys of the feature (internal/config fills them).
type Settings struct {
	Class          string            // group.streams.topology.description.plugin.class; empty: off
	Props          map[string]string // every other key under KeyPrefix, relative to it ("memory.max.groups")
	CallTimeout    time.Duration     // ...plugin.call.timeout.ms
	MaxConcurrency int               // ...plugin.max.concurrency
	Backoff        BackoffConfig     // ...backoff.initial.ms, .max.ms, .jitter
}

// Open builds the configured plugin and its Caller, registering metrics on reg. With an empty
// Class it returns (nil, nil): the feature is off and the coordinator must behave as Kafka
// does without a plugin. Keys under KeyPrefix that belong to other plugins are logged at WARN
// (a typo in the plugin name would otherwise be silent).
func Open(s Settings, r *Registry, log *zap.Logger, reg prometheus.Registerer) (*Caller, error) {
	if strings.TrimSpace(s.Class) == "" {
		return nil, nil
	}
	if log == nil {
		log = zap.NewNop()
	}
	p, name, err := r.Build(s.Class, s.Props)
	if err != nil {
		return nil, err
	}
	for k := range s.Props {
		if !strings.HasPrefix(k, name+".") {
			log.Warn("configuration key ignored: it belongs to a topology description plugin that is not selected",
				zap.String("key", KeyPrefix+k), zap.String("plugin", name))
		}
	}
	c := NewCaller(Options{
		Plugin: p, Name: name, CallTimeout: s.CallTimeout, MaxConcurrency: s.MaxConcurrency,
		Backoff: s.Backoff, Logger: log,
	}, reg)
	log.Info("topology description plugin configured", zap.String("plugin", name),
		zap.Duration("call_timeout", c.timeout), zap.Int("max_concurrency", cap(c.sem)))
	return c, nil
}
