// Package config turns a Java-properties file plus --set overrides into one typed, validated
// Config. Key names are Apache Kafka's wherever Kafka has the same setting, so an operator's
// knowledge (and often their files) carry over. Every key is declared once in the table below
// with its default, its meaning and its validation; nothing else reads raw strings.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Source says where a key's effective value came from.
type Source string

const (
	SourceDefault Source = "default"
	SourceFile    Source = "file"
	SourceFlag    Source = "flag"
)

// Listener is one entry of `listeners` / `advertised.listeners`.
type Listener struct {
	Name string // the listener name, e.g. PLAINTEXT
	Host string
	Port int
}

func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// Config is the validated configuration of one coordinatord process.
type Config struct {
	Listeners           []Listener
	AdvertisedListeners []Listener
	NodeID              int32
	ClusterID           string
	LogDirs             string
	ShardCount          int32
	MaxRequestBytes     int32
	MaxConnections      int
	ConnectionsMaxIdle  time.Duration
	AdminListener       string
	LogLevel            string
	ShutdownTimeout     time.Duration

	OffsetMetadataMaxBytes   int
	DefaultPartitions        int32
	DefaultReplicationFactor int16

	LogFlushInterval          time.Duration // 0: fsync every batch
	LogSegmentBytes           int64
	LogCleanerDeleteRetention time.Duration
	LogCleanerBackoff         time.Duration

	// values and sources of every key, for `config check`.
	values  map[string]string
	sources map[string]Source
}

// Entry is one effective key for display.
type Entry struct {
	Key    string
	Value  string
	Source Source
	Doc    string
}

// Entries lists every known key with its effective value and source, sorted by key.
func (c *Config) Entries() []Entry {
	out := make([]Entry, 0, len(keys))
	for _, k := range keys {
		out = append(out, Entry{Key: k.name, Value: c.values[k.name], Source: c.sources[k.name], Doc: k.doc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Get returns the effective raw value of a key.
func (c *Config) Get(key string) (string, bool) {
	v, ok := c.values[key]
	return v, ok
}

// KeyError is a problem with one key; its message names the key so that the CLI can print it
// as a single actionable line.
type KeyError struct {
	Key    string
	Value  string
	Reason string
	Where  string // "file path:line" or "--set"; empty for cross-key checks
}

func (e *KeyError) Error() string {
	var b strings.Builder
	if e.Where != "" {
		b.WriteString(e.Where)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%s", e.Key)
	if e.Value != "" {
		fmt.Fprintf(&b, "=%q", e.Value)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

type key struct {
	name  string
	def   string
	doc   string
	apply func(c *Config, v string) error
}

var keys = []key{
	{"listeners", "PLAINTEXT://127.0.0.1:9092", "Comma-separated NAME://host:port addresses the Kafka protocol is served on.",
		func(c *Config, v string) (err error) { c.Listeners, err = parseListeners(v); return }},
	{"advertised.listeners", "", "Addresses given to clients in Metadata and FindCoordinator; empty means the same as listeners (a 0.0.0.0 host is not allowed there).",
		func(c *Config, v string) (err error) {
			if v == "" {
				return nil
			}
			c.AdvertisedListeners, err = parseListeners(v)
			return
		}},
	{"node.id", "1", "This node's broker id in Metadata and FindCoordinator; must not collide with a data-cluster broker id.",
		func(c *Config, v string) (err error) { c.NodeID, err = parseInt32(v, 0, 1<<31-1); return }},
	{"cluster.id", "", "Cluster id reported in Metadata; empty means generate one on first start and keep it in log.dirs.",
		func(c *Config, v string) error { c.ClusterID = v; return nil }},
	{"log.dirs", "./data", "Directory holding the shard logs.",
		func(c *Config, v string) error {
			if strings.TrimSpace(v) == "" {
				return errors.New("must not be empty")
			}
			if strings.Contains(v, ",") {
				return errors.New("only one directory is supported")
			}
			c.LogDirs = v
			return nil
		}},
	{"offsets.topic.num.partitions", "50", "Number of shards; a group maps to shard abs(javaHash(groupId)) % this, as Kafka maps groups to __consumer_offsets partitions. Fixed once data exists.",
		func(c *Config, v string) (err error) { c.ShardCount, err = parseInt32(v, 1, 10000); return }},
	{"socket.request.max.bytes", "104857600", "Largest request frame accepted; a larger size prefix closes the connection before anything is allocated.",
		func(c *Config, v string) (err error) { c.MaxRequestBytes, err = parseInt32(v, 1024, 1<<31-1); return }},
	{"max.connections", "2147483647", "Connections accepted at once; further connections are closed at accept.",
		func(c *Config, v string) (err error) {
			n, err := parseInt32(v, 1, 1<<31-1)
			c.MaxConnections = int(n)
			return err
		}},
	{"connections.max.idle.ms", "600000", "A connection with no request for this long is closed.",
		func(c *Config, v string) (err error) { c.ConnectionsMaxIdle, err = parseMillis(v, 1); return }},
	{"admin.listener", "127.0.0.1:9644", "host:port of the HTTP listener serving /metrics, /healthz and /readyz.",
		func(c *Config, v string) error {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return errors.New("must be host:port")
			}
			c.AdminListener = v
			return nil
		}},
	{"log.level", "info", "Log level: debug, info, warn or error.",
		func(c *Config, v string) error {
			switch v {
			case "debug", "info", "warn", "error":
				c.LogLevel = v
				return nil
			}
			return errors.New("must be one of debug, info, warn, error")
		}},
	{"shutdown.timeout.ms", "10000", "On SIGTERM/SIGINT, how long in-flight requests may take to finish before connections are closed.",
		func(c *Config, v string) (err error) { c.ShutdownTimeout, err = parseMillis(v, 0); return }},
	{"offset.metadata.max.bytes", "4096", "Longest metadata string an offset commit may carry (in UTF-16 units, as Kafka counts); longer gets OFFSET_METADATA_TOO_LARGE for that partition.",
		func(c *Config, v string) (err error) {
			n, err := parseInt32(v, 0, 1<<31-1)
			c.OffsetMetadataMaxBytes = int(n)
			return err
		}},
	{"num.partitions", "1", "Partitions of a topic created without a partition count.",
		func(c *Config, v string) (err error) { c.DefaultPartitions, err = parseInt32(v, 1, 1<<31-1); return }},
	{"default.replication.factor", "1", "Replication factor recorded for a topic created without one (metadata only: coordinatord stores no data).",
		func(c *Config, v string) error {
			n, err := parseInt32(v, 1, 32767)
			c.DefaultReplicationFactor = int16(n)
			return err
		}},
	{"log.flush.interval.ms", "0", "0 fsyncs every batch before any client is answered (durable). A positive value fsyncs on a timer instead: UNSAFE, acknowledged writes can be lost in a power failure.",
		func(c *Config, v string) (err error) { c.LogFlushInterval, err = parseMillis(v, 0); return }},
	{"log.segment.bytes", "134217728", "Size at which a shard log rolls to a new segment.",
		func(c *Config, v string) (err error) {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1<<14 || n > 1<<31-1 {
				return errors.New("must be an integer between 16384 and 2147483647")
			}
			c.LogSegmentBytes = n
			return nil
		}},
	{"log.cleaner.delete.retention.ms", "86400000", "How long a tombstone survives compaction, so that a reader replaying the log still sees the delete.",
		func(c *Config, v string) (err error) { c.LogCleanerDeleteRetention, err = parseMillis(v, 0); return }},
	{"log.cleaner.backoff.ms", "15000", "Pause between compaction checks of a shard.",
		func(c *Config, v string) (err error) { c.LogCleanerBackoff, err = parseMillis(v, 1); return }},
}

func lookup(name string) (key, bool) {
	for _, k := range keys {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

// Load reads the file (if path is not empty), applies the overrides ("key=value"), and
// validates the result. Errors are *KeyError where a key is at fault.
func Load(path string, overrides []string) (*Config, error) {
	values := map[string]string{}
	sources := map[string]Source{}
	where := map[string]string{}
	for _, k := range keys {
		values[k.name] = k.def
		sources[k.name] = SourceDefault
	}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		props, err := ParseProperties(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, p := range props {
			loc := fmt.Sprintf("%s:%d", path, p.Line)
			if _, ok := lookup(p.Key); !ok {
				return nil, &KeyError{Key: p.Key, Reason: "unknown key", Where: loc}
			}
			values[p.Key] = p.Value
			sources[p.Key] = SourceFile
			where[p.Key] = loc
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, &KeyError{Key: o, Reason: "expected key=value", Where: "--set"}
		}
		if _, known := lookup(k); !known {
			return nil, &KeyError{Key: k, Reason: "unknown key", Where: "--set"}
		}
		values[k] = strings.TrimSpace(v)
		sources[k] = SourceFlag
		where[k] = "--set"
	}
	c := &Config{values: values, sources: sources}
	for _, k := range keys {
		if err := k.apply(c, values[k.name]); err != nil {
			return nil, &KeyError{Key: k.name, Value: values[k.name], Reason: err.Error(), Where: where[k.name]}
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// validate checks rules that involve more than one key.
func (c *Config) validate() error {
	if len(c.AdvertisedListeners) == 0 {
		for _, l := range c.Listeners {
			if ip := net.ParseIP(l.Host); ip != nil && ip.IsUnspecified() {
				return &KeyError{Key: "advertised.listeners", Reason: "must be set when listeners binds " + l.Host + ", which clients cannot connect to"}
			}
		}
		c.AdvertisedListeners = c.Listeners
	}
	for _, a := range c.AdvertisedListeners {
		found := false
		for _, l := range c.Listeners {
			found = found || l.Name == a.Name
		}
		if !found {
			return &KeyError{Key: "advertised.listeners", Value: c.values["advertised.listeners"], Reason: "listener name " + a.Name + " is not in listeners"}
		}
	}
	return nil
}

func parseListeners(v string) ([]Listener, error) {
	var out []Listener
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		u, err := url.Parse(part)
		if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" {
			return nil, fmt.Errorf("%q is not NAME://host:port", part)
		}
		host, portStr, err := net.SplitHostPort(u.Host)
		if err != nil {
			return nil, fmt.Errorf("%q is not NAME://host:port", part)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 0 || port > 65535 {
			return nil, fmt.Errorf("%q has a bad port", part)
		}
		name := strings.ToUpper(u.Scheme)
		if name != "PLAINTEXT" {
			return nil, fmt.Errorf("listener %s: only PLAINTEXT is supported", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("listener name %s appears twice", name)
		}
		seen[name] = true
		out = append(out, Listener{Name: name, Host: host, Port: port})
	}
	if len(out) == 0 {
		return nil, errors.New("at least one listener is required")
	}
	return out, nil
}

func parseInt32(v string, min, max int64) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("must be an integer between %d and %d", min, max)
	}
	return int32(n), nil
}

func parseMillis(v string, min int64) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < min || n > 1<<40 {
		return 0, fmt.Errorf("must be a whole number of milliseconds >= %d", min)
	}
	return time.Duration(n) * time.Millisecond, nil
}
