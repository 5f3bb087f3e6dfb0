package shard

import (
	"fmt"
	"maps"
	"sort"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
)

// Group-level configs (GROUP config resources): per group, the overrides set with
// IncrementalAlterConfigs. They belong to the group id, not to a group of some type: Kafka
// keeps them for ids with no group yet and across DeleteGroups, and so does coordinatord.

// GroupConfigRecord is the whole override set of a group; an empty set is a tombstone.
func GroupConfigRecord(group string, vals map[string]string) log.Record {
	key := records.NewKey(records.KindGroupConfig).String(group).Build()
	if len(vals) == 0 {
		return log.Record{Key: key}
	}
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	sort.Strings(names)
	b := records.NewValue(0).Int32(int32(len(names)))
	for _, n := range names {
		b.String(n).String(vals[n])
	}
	return log.Record{Key: key, Value: b.Build()}
}

func (m *Machine) replayGroupConfig(rec log.Record) error {
	r, err := records.ReadKey(rec.Key, records.KindGroupConfig)
	if err != nil {
		return err
	}
	group := r.String()
	if err := r.Err(); err != nil {
		return err
	}
	if rec.Value == nil {
		delete(m.GroupConfigs, group)
		return nil
	}
	version, v, err := records.ReadValue(rec.Value)
	if err != nil {
		return err
	}
	if err := records.CheckVersion(records.KindGroupConfig, version, 0); err != nil {
		return fmt.Errorf("group %s: %w", group, err)
	}
	n := v.Int32()
	if n < 0 || int(n) > len(rec.Value) {
		return fmt.Errorf("group config record of %q: %d entries", group, n)
	}
	vals := make(map[string]string, n)
	for range n {
		k := v.String()
		vals[k] = v.String()
	}
	if err := v.Err(); err != nil {
		return err
	}
	if m.GroupConfigs == nil {
		m.GroupConfigs = map[string]map[string]string{}
	}
	m.GroupConfigs[group] = vals
	return nil
}

// GroupConfigsOf returns a copy of a group's overrides (nil when it has none).
func (m *Machine) GroupConfigsOf(group string) map[string]string {
	if v := m.GroupConfigs[group]; len(v) > 0 {
		return maps.Clone(v)
	}
	return nil
}

// streamsConfigFor is the streams configuration a group runs under: the broker's, with the
// group's overrides.
func (m *Machine) streamsConfigFor(group string, base streams.Config) streams.Config {
	return base.WithGroupConfigs(m.GroupConfigs[group])
}

// ReadGroupConfigs answers a group's overrides from durable state (map[string]string).
func ReadGroupConfigs(group string) runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) { return m.GroupConfigsOf(group), nil }
}

// AlterGroupConfigs applies change to a copy of the group's overrides on the latest state and,
// unless validateOnly, persists the result. change returns the new set or an error, which is
// the op's response (a *streams.GroupConfigError for a rejected change). The response is nil
// on success. maxGroups (0: unbounded) is how many group ids may have overrides on the shard.
func AlterGroupConfigs(group string, validateOnly bool, maxGroups int, change func(cur map[string]string) (map[string]string, error)) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		cur := m.GroupConfigs[group]
		next, err := change(maps.Clone(cur))
		if err != nil {
			return runtime.Result{Response: err}
		}
		// Kafka accepts configs for any id, so without a bound a client could fill the log with
		// configs of ids no group will ever use; an id that already has some may always change.
		if len(cur) == 0 && len(next) > 0 && maxGroups > 0 && len(m.GroupConfigs) >= maxGroups {
			return runtime.Result{Response: &streams.GroupConfigError{Msg: fmt.Sprintf(
				"%d group ids already have group configs on this group's coordinator shard (group.config.max.groups.per.shard); delete the configs of groups no longer used", len(m.GroupConfigs))}}
		}
		if validateOnly || maps.Equal(cur, next) {
			return runtime.Result{}
		}
		return runtime.Result{Records: []log.Record{GroupConfigRecord(group, next)}}
	}
}

// GroupsWithConfigs lists, from durable state, the group ids that have overrides ([]string).
func GroupsWithConfigs() runtime.ReadOp[*Machine] {
	return func(m *Machine) (any, error) {
		out := make([]string, 0, len(m.GroupConfigs))
		for g, v := range m.GroupConfigs {
			if len(v) > 0 {
				out = append(out, g)
			}
		}
		return out, nil
	}
}
