// Package topologyplugin is the contract between coordinatord and a topology description plugin
// (KIP-1331, Apache Kafka's StreamsGroupTopologyDescriptionPlugin).
//
// Kafka Streams clients push the processing graph of their application (a Description) to the
// group coordinator when it asks for it. The coordinator hands the description to the configured
// Plugin, which stores or forwards it; admin clients read it back through StreamsGroupDescribe;
// deleting or expiring the group deletes it. coordinatord keeps per group only two numbers (the
// epoch the plugin holds, and the epoch the plugin rejected for good); the description itself
// lives in the plugin.
//
// # What a plugin must do
//
//   - Be safe for concurrent use; members of one group may push the same epoch at the same time
//     and a cleanup may delete while a member pushes.
//   - Be idempotent: Set per (group, epoch), Delete per group (also when nothing is stored).
//   - Classify Set failures: Permanent (never acceptable at this epoch, e.g. too large) or
//     anything else, which is transient. The message of a Set error reaches the client.
//   - Get returns the description only for the exact epoch asked, and (nil, nil) when it has
//     none; errors are for backend failures. Nothing where the coordinator recorded a
//     description makes it ask the group's members for it again.
//   - A plugin that starts empty after a restart implements Volatile, so that the coordinator
//     asks for every description again rather than trusting its records.
//   - Return promptly and honour ctx: the coordinator cuts every call off at
//     group.streams.topology.description.plugin.call.timeout.ms and counts that as transient.
//   - Bound its own state; an in-process plugin shares the coordinator's memory.
//
// # Selecting and configuring a plugin
//
// group.streams.topology.description.plugin.class names the plugin (built in: memory, file,
// http; empty turns the feature off). Keys group.streams.topology.description.plugin.<name>.*
// are passed to that plugin's Factory with the prefix removed.
//
// # Writing your own
//
// Implement Plugin, register a Factory from an init function, and import the package for its
// side effect from the main package of a custom coordinatord build:
//
//	package acme
//
//	import (
//		"context"
//		"sync"
//
//		"github.com/coordinatord/coordinatord/pkg/topologyplugin"
//	)
//
//	func init() {
//		topologyplugin.Register("acme", func(cfg topologyplugin.Config) (topologyplugin.Plugin, error) {
//			if err := cfg.Check("max.bytes"); err != nil {
//				return nil, err
//			}
//			max, err := cfg.Int("max.bytes", 1<<20, 1, 1<<30)
//			if err != nil {
//				return nil, err
//			}
//			return &store{max: int(max), m: map[string]entry{}}, nil
//		})
//	}
//
//	type entry struct {
//		epoch int32
//		d     *topologyplugin.Description
//	}
//
//	type store struct {
//		max int
//		mu  sync.Mutex
//		m   map[string]entry
//	}
//
//	func (s *store) Set(ctx context.Context, group string, epoch int32, d *topologyplugin.Description) error {
//		if n := d.EncodedSize(); n > s.max {
//			return topologyplugin.Permanentf("description of %d bytes is larger than %d", n, s.max)
//		}
//		s.mu.Lock()
//		defer s.mu.Unlock()
//		if cur, ok := s.m[group]; ok && cur.epoch > epoch {
//			return nil // a late push for an older epoch must not replace newer data
//		}
//		s.m[group] = entry{epoch, d.Clone()}
//		return nil
//	}
//
//	func (s *store) Get(ctx context.Context, group string, epoch int32) (*topologyplugin.Description, error) {
//		s.mu.Lock()
//		defer s.mu.Unlock()
//		if cur, ok := s.m[group]; ok && cur.epoch == epoch {
//			return cur.d.Clone(), nil
//		}
//		return nil, nil
//	}
//
//	func (s *store) Delete(ctx context.Context, group string) error {
//		s.mu.Lock()
//		defer s.mu.Unlock()
//		delete(s.m, group)
//		return nil
//	}
//
//	func (s *store) Close() error { return nil }
//
// and configure it with
//
//	group.streams.topology.description.plugin.class=acme
//	group.streams.topology.description.plugin.acme.max.bytes=65536
//
// The same example, runnable, is in example_test.go; docs/topology-plugins.md describes the
// built-in plugins.
package topologyplugin
