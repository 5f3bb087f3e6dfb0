package topologyplugin

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Plugin stores, forwards or exposes the topology descriptions that Kafka Streams clients push
// (KIP-1331). It mirrors Apache Kafka's StreamsGroupTopologyDescriptionPlugin: Kafka's futures
// become plain blocking calls that honour ctx, and coordinatord supplies the asynchrony.
//
// Every method may be called concurrently, also for the same group: several members may push the
// same epoch at once, and a cleanup may delete while a member pushes. The coordinator calls the
// methods on its own worker pool, never on a goroutine that owns group state, with a deadline
// (group.streams.topology.description.plugin.call.timeout.ms); a method should return promptly
// once ctx is done. A panic is recovered and treated as a transient failure, but it is still a
// bug. Report failures through the returned error.
type Plugin interface {
	// Set stores (or forwards) the description of (groupID, epoch). Calls with the same
	// (groupID, epoch) carry identical data and must be idempotent: the coordinator re-issues
	// a call whenever it cannot be sure an earlier one took effect. A failure marked with
	// Permanent means the description will never be accepted at this epoch; any other error
	// is transient. The error's message is sent to the pushing client. d must not be modified;
	// it may be kept (the coordinator does not change it after the call).
	Set(ctx context.Context, groupID string, epoch int32, d *Description) error

	// Get returns the description stored for exactly (groupID, epoch), or (nil, nil) when the
	// plugin holds none for that epoch (never stored, another epoch, evicted, lost). An error
	// is reserved for a backend failure; the coordinator then reports an error status for
	// that group only. The coordinator may modify the returned value, so return a copy of any
	// state the plugin keeps.
	Get(ctx context.Context, groupID string, epoch int32) (*Description, error)

	// Delete removes whatever is stored for the group, every epoch. It must be idempotent and
	// return nil when nothing is stored. It is called before a group is deleted or expires;
	// while it fails, the group is kept.
	Delete(ctx context.Context, groupID string) error

	// Close releases resources. It is called once, after the coordinator stopped calling the
	// other methods (calls that ignored their deadline may still be running).
	Close() error
}

// Stats is what a plugin can report about the state it holds; see StatsReporter.
type Stats struct {
	Descriptions int64 // descriptions held now
	Bytes        int64 // bytes they take, in the plugin's own accounting
	Evictions    int64 // descriptions dropped to stay within bounds, since the plugin started
}

// StatsReporter is optionally implemented by a Plugin; coordinatord then exports the numbers as
// Prometheus gauges. Stats must be cheap and safe for concurrent use.
type StatsReporter interface {
	Stats() Stats
}

// Volatile is optionally implemented by a Plugin whose descriptions do not survive a restart
// of coordinatord (the built-in memory plugin). The coordinator's record of which epoch the
// plugin holds is durable, so after a restart it would claim descriptions the plugin no longer
// has; when Volatile reports true, the coordinator instead marks every such group's description
// as unknown as its groups load, and asks a member of each live group to push again (under the
// usual back-off). A plugin that loses data at other times needs nothing: a Get that returns
// (nil, nil) for the epoch the coordinator recorded has the same effect for that group.
type Volatile interface {
	Volatile() bool
}

// IsVolatile reports whether p implements Volatile and reports true.
func IsVolatile(p Plugin) bool {
	v, ok := p.(Volatile)
	return ok && v.Volatile()
}

// Factory builds a plugin from its configuration: the keys
// group.streams.topology.description.plugin.<name>.* of the server configuration, with that
// prefix removed (group.streams.topology.description.plugin.acme.url arrives as "url"). It is
// called once at start; an error fails the start-up. A factory should reject keys it does not
// know (see Config.Check), so that a typo is not silently ignored.
type Factory func(cfg Config) (Plugin, error)

var (
	registryMu sync.Mutex
	registry   = map[string]Factory{}
	validName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
)

// ReservedNames cannot name a plugin: they are the first word of the server's own keys under
// group.streams.topology.description.plugin.
var ReservedNames = []string{"class", "call", "max"}

// ValidName reports whether name can name a plugin: letters, digits, '_' and '-', not reserved.
func ValidName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("plugin name %q: use letters, digits, '_' and '-' only", name)
	}
	for _, r := range ReservedNames {
		if name == r {
			return fmt.Errorf("plugin name %q is reserved", name)
		}
	}
	return nil
}

// Register makes a plugin available under name, so that a server built with the registering
// package selects it by setting group.streams.topology.description.plugin.class=<name>. Call
// it from an init function; a custom build's main package imports the plugin package for that
// side effect. It panics on an invalid or duplicate name, as database/sql.Register does.
func Register(name string, f Factory) {
	if err := ValidName(name); err != nil {
		panic("topologyplugin.Register: " + err.Error())
	}
	if f == nil {
		panic("topologyplugin.Register: nil factory for " + name)
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("topologyplugin.Register: " + name + " registered twice")
	}
	registry[name] = f
}

// Registered returns a copy of the factories registered with Register.
func Registered() map[string]Factory {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make(map[string]Factory, len(registry))
	for k, v := range registry {
		out[k] = v
	}
	return out
}

// Config is a plugin's own configuration keys with their prefix removed. The typed getters
// return a *ConfigError naming the key when a value does not parse or is out of range.
type Config map[string]string

// ConfigError is a bad or unknown plugin key. Key is the key as the plugin sees it; the server
// reports it with the full prefix.
type ConfigError struct {
	Key    string
	Value  string
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("%s=%q: %s", e.Key, e.Value, e.Reason)
	}
	return e.Key + ": " + e.Reason
}

// String returns the value of key, or def when it is not set.
func (c Config) String(key, def string) string {
	if v, ok := c[key]; ok {
		return strings.TrimSpace(v)
	}
	return def
}

// Int returns the integer value of key (def when not set), which must lie in [min, max].
func (c Config) Int(key string, def, min, max int64) (int64, error) {
	v, ok := c[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < min || n > max {
		return 0, &ConfigError{Key: key, Value: v, Reason: fmt.Sprintf("must be an integer between %d and %d", min, max)}
	}
	return n, nil
}

// Millis returns the duration of key given in milliseconds (def when not set), at least min.
func (c Config) Millis(key string, def, min time.Duration) (time.Duration, error) {
	n, err := c.Int(key, int64(def/time.Millisecond), int64(min/time.Millisecond), 1<<40)
	return time.Duration(n) * time.Millisecond, err
}

// Bool returns the boolean value of key ("true" or "false"; def when not set).
func (c Config) Bool(key string, def bool) (bool, error) {
	v, ok := c[key]
	if !ok {
		return def, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, &ConfigError{Key: key, Value: v, Reason: "must be true or false"}
}

// Check returns a *ConfigError for the first (in sorted order) key that is not in known.
func (c Config) Check(known ...string) error {
	var unknown []string
	for k := range c {
		found := false
		for _, n := range known {
			found = found || k == n
		}
		if !found {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return &ConfigError{Key: unknown[0], Reason: "unknown key (known: " + strings.Join(known, ", ") + ")"}
}
