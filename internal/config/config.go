// Package config turns a Java-properties file plus --set overrides into one typed, validated
// Config. Key names are Apache Kafka's wherever Kafka has the same setting, so an operator's
// knowledge (and often their files) carry over. Every key is declared once in the table below
// with its default, its meaning and its validation; nothing else reads raw strings.
package config

import (
	"errors"
	"fmt"
	"net"
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
	// Security is how the listener authenticates (listener.security.protocol.map and the
	// listener's ssl.* and sasl.* keys); set on Listeners only.
	Security ListenerSecurity
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
	AdminPprofEnable    bool
	AdminConsoleEnable  bool
	// AdminSecurity is admin.listener.security.protocol and the admin.ssl.* keys.
	AdminSecurity   AdminSecurity
	LogLevel        string
	ShutdownTimeout time.Duration

	// QueuedMaxRequestBytes is queued.max.request.bytes; <= 0: unbounded.
	QueuedMaxRequestBytes int64

	OffsetMetadataMaxBytes int
	// GroupConfigMaxGroupsPerShard is group.config.max.groups.per.shard; 0: unbounded.
	GroupConfigMaxGroupsPerShard int
	// ProducerIDMaxPerShard is producer.id.max.per.shard; 0: unbounded.
	ProducerIDMaxPerShard int
	// Offsets retention (spec coordinator-apis §3.5) and transactional producer expiry.
	OffsetsRetention              time.Duration
	OffsetsRetentionCheckInterval time.Duration
	ProducerIDExpiration          time.Duration
	DefaultPartitions             int32
	DefaultReplicationFactor      int16

	// Classic group limits (spec coordinator-apis Appendix A).
	GroupMinSessionTimeoutMs     int32
	GroupMaxSessionTimeoutMs     int32
	GroupInitialRebalanceDelayMs int32
	GroupMaxSize                 int32

	LogFlushInterval          time.Duration // 0: fsync every batch
	LogSegmentBytes           int64
	LogCleanerDeleteRetention time.Duration
	LogCleanerBackoff         time.Duration
	// LogCleanerMinCleanableRatio: a shard log is compacted only when more than this share of
	// its sealed bytes is new since the last compaction (or a kept tombstone expired).
	LogCleanerMinCleanableRatio float64
	// MessageMaxBytes is the largest batch of records one operation may append to a shard log.
	MessageMaxBytes int

	// StreamsGroup is the streams groups' configuration (group.streams.*).
	StreamsGroup StreamsGroupConfig
	// ConsumerGroup are the group.consumer.* keys (KIP-848 consumer groups).
	ConsumerGroup ConsumerGroupConfig

	// TopologyPlugin is the topology description plugin (KIP-1331) configuration.
	TopologyPlugin TopologyPluginConfig

	// Gateway is gateway mode (upstream.*, gateway.*); off when no upstream is configured.
	Gateway GatewayConfig
	// LogBackend is log.backend and the log.kafka.* keys.
	LogBackend LogBackendConfig

	// SASL is the process-wide SASL settings; per-listener security is on each Listener.
	SASL SASLConfig
	// Authorizer is the ACL authorizer (authorizer.class.name, super.users, ...).
	Authorizer AuthorizerConfig

	// values and sources of every key, for `config check`.
	values map[string]string
	// upstreamUser and upstreamPassword are upstream.sasl.username/password until validation
	// moves them into Gateway.Security.
	upstreamUser, upstreamPassword string
	sources                        map[string]Source
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
	out = append(out, c.pluginEntries()...)
	out = append(out, c.listenerOverrideEntries()...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Default returns a key's default value.
func Default(key string) (string, bool) {
	k, ok := lookup(key)
	return k.def, ok
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
	{"advertised.listeners", "", "Addresses given to clients in Metadata and FindCoordinator; empty means the same as listeners. A 0.0.0.0 or :: host is refused (clients cannot connect to it); an empty host (NAME://:port) is given to clients as the local host name, as Kafka does.",
		func(c *Config, v string) (err error) {
			if v == "" {
				return nil
			}
			c.AdvertisedListeners, err = parseListeners(v)
			return
		}},
	{"node.id", "1", "This node's broker id in Metadata and FindCoordinator; must not collide with a data-cluster broker id.",
		func(c *Config, v string) (err error) { c.NodeID, err = parseInt32(v, 0, 1<<31-1); return }},
	{"cluster.id", "", "Cluster id reported in Metadata; empty means generate one on first start. Kept in log.dirs: a start with another id than the data was written under is refused.",
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
	{"queued.max.request.bytes", "104857600", "Bytes of requests read and not yet answered, across all connections; a connection whose next request does not fit stops reading until it does (it is not closed). At least socket.request.max.bytes; -1 is unbounded (Kafka's default).",
		func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n != -1 && n < 1024 {
				return errors.New("must be -1 (unbounded) or an integer >= 1024")
			}
			c.QueuedMaxRequestBytes = n
			return nil
		}},
	{"max.connections", "10000", "Connections open at once; further connections are closed at accept. See docs/operations.md for how the default was chosen (Kafka's is unlimited).",
		func(c *Config, v string) (err error) {
			n, err := parseInt32(v, 1, 1<<31-1)
			c.MaxConnections = int(n)
			return err
		}},
	{"connections.max.idle.ms", "600000", "A connection with no request for this long is closed (within an eighth more: the deadline is moved only now and then, not per request).",
		func(c *Config, v string) (err error) { c.ConnectionsMaxIdle, err = parseMillis(v, 1); return }},
	{"admin.listener", "127.0.0.1:9644", "host:port of the admin listener serving /metrics, /healthz, /readyz and the console: HTTP, or HTTPS with admin.listener.security.protocol=SSL.",
		func(c *Config, v string) error {
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				return errors.New("must be host:port")
			}
			if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				return errors.New("must be host:port with a port from 0 to 65535")
			}
			c.AdminListener = v
			return nil
		}},
	{"admin.console.enable", "true", "Serve the read-only web console under /console/ on admin.listener: groups, members, assignments, committed offsets, Streams topologies drawn as graphs, shard and plugin health. It shows group ids, member ids and client hosts: keep the admin listener private.",
		func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("must be true or false")
			}
			c.AdminConsoleEnable = b
			return nil
		}},
	{"admin.pprof.enable", "false", "Serve net/http/pprof under /debug/pprof/ on admin.listener, to profile a live server. Off by default: profiles expose internals and cost CPU; keep the admin listener private when on.",
		func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("must be true or false")
			}
			c.AdminPprofEnable = b
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
	{"shutdown.timeout.ms", "10000", "On SIGTERM, SIGINT or SIGHUP, how long in-flight requests may take to finish before connections are closed.",
		func(c *Config, v string) (err error) { c.ShutdownTimeout, err = parseMillis(v, 0); return }},
	{"offset.metadata.max.bytes", "4096", "Longest metadata string an offset commit may carry (in UTF-16 units, as Kafka counts); longer gets OFFSET_METADATA_TOO_LARGE for that partition.",
		func(c *Config, v string) (err error) {
			n, err := parseInt32(v, 0, 1<<31-1)
			c.OffsetMetadataMaxBytes = int(n)
			return err
		}},
	{"group.config.max.groups.per.shard", "10000", "coordinatord only. Group ids that may have group configs (IncrementalAlterConfigs/AlterConfigs on GROUP resources) on each coordinator shard (offsets.topic.num.partitions of them): setting configs on one more id is refused with INVALID_CONFIG, changing or deleting those of an id that has some always works. Kafka keeps configs of any id, group or not, without a count limit; the bound keeps a client from filling the log with configs of ids no group uses. 0: unbounded.",
		func(c *Config, v string) (err error) {
			n, err := parseInt32(v, 0, 1<<31-1)
			c.GroupConfigMaxGroupsPerShard = int(n)
			return err
		}},
	{"offsets.retention.minutes", "10080", "How long a committed offset is kept after it was committed (simple groups, unsubscribed topics) or after its classic group became Empty; then the retention check deletes it, and an Empty group left with no offsets.",
		func(c *Config, v string) error {
			n, err := parseInt32(v, 1, 1<<31-1)
			c.OffsetsRetention = time.Duration(n) * time.Minute
			return err
		}},
	{"offsets.retention.check.interval.ms", "600000", "How often each shard looks for expired offsets, empty groups to delete and offsets of deleted topics.",
		func(c *Config, v string) (err error) {
			c.OffsetsRetentionCheckInterval, err = parseMillis(v, 1)
			return
		}},
	{"producer.id.max.per.shard", "100000", "coordinatord only. Bounds what WriteTxnMarkers can make a shard remember: a marker for a producer id the shard does not know and that staged nothing there records the producer's epochs (fencing a delayed TxnOffsetCommit of the ended transaction, as Kafka's log does) only while the shard remembers fewer producer ids than this; beyond, it is answered NONE and writes nothing. Producers that stage offsets and markers for known producers are not limited. 0: unbounded (Kafka's behaviour; producer.id.expiration.ms still forgets idle producers).",
		func(c *Config, v string) (err error) {
			n, err := parseInt32(v, 0, 1<<31-1)
			c.ProducerIDMaxPerShard = int(n)
			return err
		}},
	{"producer.id.expiration.ms", "86400000", "How long a transactional producer id with no staged offsets is remembered (its epoch fences zombies) after its last transactional commit or marker.",
		func(c *Config, v string) (err error) { c.ProducerIDExpiration, err = parseMillis(v, 1); return }},
	{"group.min.session.timeout.ms", "6000", "Shortest session timeout a classic group member may ask for in JoinGroup; shorter gets INVALID_SESSION_TIMEOUT.",
		func(c *Config, v string) (err error) {
			c.GroupMinSessionTimeoutMs, err = parseInt32(v, 0, 1<<31-1)
			return
		}},
	{"group.max.session.timeout.ms", "1800000", "Longest session timeout a classic group member may ask for in JoinGroup; longer gets INVALID_SESSION_TIMEOUT.",
		func(c *Config, v string) (err error) {
			c.GroupMaxSessionTimeoutMs, err = parseInt32(v, 0, 1<<31-1)
			return
		}},
	{"group.initial.rebalance.delay.ms", "3000", "How long the first rebalance of an Empty classic group waits for more members (extended while members keep joining, up to the rebalance timeout).",
		func(c *Config, v string) (err error) {
			c.GroupInitialRebalanceDelayMs, err = parseInt32(v, 0, 1<<31-1)
			return
		}},
	{"group.max.size", "2147483647", "Most members a classic group may have; a join beyond it gets GROUP_MAX_SIZE_REACHED.",
		func(c *Config, v string) (err error) {
			c.GroupMaxSize, err = parseInt32(v, 1, 1<<31-1)
			return
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
	{"log.cleaner.min.cleanable.ratio", "0.5", "A shard log is compacted only when more than this share of its sealed bytes was written since the last compaction, or a tombstone it kept has outlived log.cleaner.delete.retention.ms; a log with nothing to drop is never rewritten. Between 0 and 1.",
		func(c *Config, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return errors.New("must be a number between 0 and 1")
			}
			c.LogCleanerMinCleanableRatio = f
			return nil
		}},
	{"message.max.bytes", "1048588", "Largest record batch one request may append to a shard log (encoded size), as Kafka's limit on __consumer_offsets appends. A larger one (a JoinGroup with huge protocol metadata, a huge streams topology, an offset commit of very many partitions) is refused with the API's non-retriable error; at most 67108864.",
		func(c *Config, v string) (err error) {
			n, err := parseInt32(v, 64, 64<<20)
			c.MessageMaxBytes = int(n)
			return err
		}},
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
			if _, ok := lookup(p.Key); !ok && !isPluginPassThrough(p.Key) && !isListenerOverride(p.Key) {
				return nil, &KeyError{Key: p.Key, Reason: "unknown key", Where: loc}
			}
			// Java properties keep a value's trailing blanks, which nobody sees in a file;
			// Kafka's ConfigDef trims every value it parses, and so do we (as --set does).
			// A plugin's own keys reach it as written, as Kafka hands plugins their originals.
			v := p.Value
			if !isPluginPassThrough(p.Key) {
				v = strings.TrimSpace(v)
			}
			values[p.Key] = v
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
		if _, known := lookup(k); !known && !isPluginPassThrough(k) && !isListenerOverride(k) {
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
	if err := c.validateConsumer(); err != nil {
		return err
	}
	if err := c.validateStreams(); err != nil {
		return err
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if c.QueuedMaxRequestBytes > 0 && int64(c.MaxRequestBytes) > c.QueuedMaxRequestBytes {
		// A frame larger than the whole budget could never be read: its connection would wait
		// forever.
		return &KeyError{Key: "socket.request.max.bytes", Value: c.values["socket.request.max.bytes"],
			Reason: fmt.Sprintf("must not exceed queued.max.request.bytes (%d)", c.QueuedMaxRequestBytes)}
	}
	if err := c.validatePorts(); err != nil {
		return err
	}
	if len(c.AdvertisedListeners) == 0 {
		for _, l := range c.Listeners {
			if ip := net.ParseIP(l.Host); ip != nil && ip.IsUnspecified() {
				return &KeyError{Key: "advertised.listeners", Reason: "must be set when listeners binds " + l.Host + ", which clients cannot connect to"}
			}
		}
		c.AdvertisedListeners = append([]Listener(nil), c.Listeners...)
	}
	for i, a := range c.AdvertisedListeners {
		if ip := net.ParseIP(a.Host); ip != nil && ip.IsUnspecified() {
			return &KeyError{Key: "advertised.listeners", Value: c.values["advertised.listeners"],
				Reason: "listener " + a.Name + " advertises " + a.Host + ", which clients cannot connect to: give a routable host"}
		}
		if a.Host == "" {
			// An empty host binds every interface; clients told "" would dial their own
			// machine. Kafka advertises the local host name instead, and so do we.
			host, err := localHostname()
			if err != nil || host == "" {
				return &KeyError{Key: "advertised.listeners", Value: c.values["advertised.listeners"],
					Reason: fmt.Sprintf("listener %s has no host and the local host name is unknown (%v): give a host", a.Name, err)}
			}
			c.AdvertisedListeners[i].Host = host
		}
		found := false
		for _, l := range c.Listeners {
			found = found || l.Name == a.Name
		}
		if !found {
			return &KeyError{Key: "advertised.listeners", Value: c.values["advertised.listeners"], Reason: "listener name " + a.Name + " is not in listeners"}
		}
	}
	if err := c.validateUpstreamSecurity(); err != nil {
		return err
	}
	if err := c.validateAdminSecurity(); err != nil {
		return err
	}
	if err := c.validateGateway(); err != nil {
		return err
	}
	return c.validateLogBackend()
}

// validatePorts refuses two listeners (admin.listener counted as one) on one port, as Kafka does
// for its listeners: the second bind would fail at start, blamed on "address already in use".
// Port 0 picks a free port each time, and, as in Kafka, exactly two listeners may share a port
// when one binds an IPv4 address and the other an IPv6 one.
func (c *Config) validatePorts() error {
	type endpoint struct{ key, name, host string }
	byPort := map[int][]endpoint{}
	for _, l := range c.Listeners {
		if l.Port != 0 {
			byPort[l.Port] = append(byPort[l.Port], endpoint{"listeners", l.String(), l.Host})
		}
	}
	if host, port, err := net.SplitHostPort(c.AdminListener); err == nil {
		if n, _ := strconv.Atoi(port); n != 0 {
			byPort[n] = append(byPort[n], endpoint{"admin.listener", c.AdminListener, host})
		}
	}
	ports := make([]int, 0, len(byPort))
	for p := range byPort {
		ports = append(ports, p)
	}
	sort.Ints(ports)
	for _, p := range ports {
		eps := byPort[p]
		if len(eps) < 2 || (len(eps) == 2 && oneIPv4OneIPv6(eps[0].host, eps[1].host)) {
			continue
		}
		key := eps[len(eps)-1].key
		return &KeyError{Key: key, Value: c.values[key],
			Reason: fmt.Sprintf("%s and %s both use port %d: give each listener its own port (two may share one only when one binds an IPv4 address and the other an IPv6 one)", eps[0].name, eps[1].name, p)}
	}
	return nil
}

func oneIPv4OneIPv6(a, b string) bool {
	ipA, ipB := net.ParseIP(a), net.ParseIP(b)
	if ipA == nil || ipB == nil {
		return false
	}
	return (ipA.To4() != nil) != (ipB.To4() != nil)
}

// localHostname is the host advertised for a listener given without one; a variable so that
// tests can name it.
var localHostname = os.Hostname

func parseListeners(v string) ([]Listener, error) {
	var out []Listener
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		// Not url.Parse: listener names such as SASL_SSL are not valid URL schemes.
		scheme, hostPort, ok := strings.Cut(part, "://")
		if !ok || scheme == "" || hostPort == "" || strings.Contains(hostPort, "/") {
			return nil, fmt.Errorf("%q is not NAME://host:port", part)
		}
		host, portStr, err := net.SplitHostPort(hostPort)
		if err != nil {
			return nil, fmt.Errorf("%q is not NAME://host:port", part)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 0 || port > 65535 {
			return nil, fmt.Errorf("%q has a bad port", part)
		}
		name := strings.ToUpper(scheme)
		if !listenerName.MatchString(name) {
			return nil, fmt.Errorf("listener name %q: only letters, digits and '_' are allowed", name)
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

// StreamsGroupConfig is the broker-level configuration of Kafka Streams groups (KIP-1071,
// spec streams-groups §7.1), with Kafka's key names, defaults and bounds.
type StreamsGroupConfig struct {
	SessionTimeoutMs, MinSessionTimeoutMs, MaxSessionTimeoutMs             int32
	HeartbeatIntervalMs, MinHeartbeatIntervalMs, MaxHeartbeatIntervalMs    int32
	MaxSize                                                                int32
	NumStandbyReplicas, MaxStandbyReplicas                                 int32
	InitialRebalanceDelayMs                                                int32
	AssignmentIntervalMs, MinAssignmentIntervalMs, MaxAssignmentIntervalMs int32
	AssignmentQuietMs                                                      int32
	Assignors                                                              []string
	RackAwareAssignmentTags                                                []string
	AssignorOffloadEnable                                                  bool
	TaskOffsetIntervalMs, MinTaskOffsetIntervalMs                          int32
	NumWarmupReplicas, MaxWarmupReplicas                                   int32
	AcceptableRecoveryLag                                                  int64
	// JoinCreatesInternalTopics: see group.streams.join.creates.internal.topics.
	JoinCreatesInternalTopics bool
	// ReconciliationHeartbeatIntervalMs: see group.streams.reconciliation.heartbeat.interval.ms.
	ReconciliationHeartbeatIntervalMs int32
	// MigrationPolicy: see group.streams.migration.policy (lower case once parsed).
	MigrationPolicy string
}

func streamsInt(name, def, doc string, min int64, field func(*StreamsGroupConfig) *int32) key {
	return key{name, def, doc, func(c *Config, v string) (err error) {
		*field(&c.StreamsGroup), err = parseInt32(v, min, 1<<31-1)
		return
	}}
}

func parseList(v string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if seen[p] {
			return nil, fmt.Errorf("%s appears twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

var streamsKeys = []key{
	streamsInt("group.streams.session.timeout.ms", "45000", "Streams group session timeout: a member that sends no heartbeat for this long is removed and its tasks reassigned. Between the min and max session timeouts and above the heartbeat interval.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.SessionTimeoutMs }),
	streamsInt("group.streams.min.session.timeout.ms", "45000", "Lowest allowed streams group session timeout.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.MinSessionTimeoutMs }),
	streamsInt("group.streams.max.session.timeout.ms", "60000", "Highest allowed streams group session timeout.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.MaxSessionTimeoutMs }),
	streamsInt("group.streams.heartbeat.interval.ms", "5000", "Heartbeat interval told to streams group members (HeartbeatIntervalMillis). Between the min and max heartbeat intervals and below the session timeout.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.HeartbeatIntervalMs }),
	streamsInt("group.streams.min.heartbeat.interval.ms", "5000", "Lowest allowed streams group heartbeat interval.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.MinHeartbeatIntervalMs }),
	streamsInt("group.streams.max.heartbeat.interval.ms", "15000", "Highest allowed streams group heartbeat interval.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.MaxHeartbeatIntervalMs }),
	streamsInt("group.streams.max.size", "2147483647", "Most members a streams group may have; a new member beyond it gets GROUP_MAX_SIZE_REACHED.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.MaxSize }),
	streamsInt("group.streams.num.standby.replicas", "0", "Standby replicas of each stateful task the assignor places (at most group.streams.max.standby.replicas). A change re-assigns every streams group at its next heartbeat.", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.NumStandbyReplicas }),
	streamsInt("group.streams.max.standby.replicas", "2", "Highest allowed number of standby replicas.", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.MaxStandbyReplicas }),
	streamsInt("group.streams.initial.rebalance.delay.ms", "3000", "How long the first assignment of an empty streams group waits for more members to join (0: assign at once).", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.InitialRebalanceDelayMs }),
	streamsInt("group.streams.assignment.interval.ms", "1000", "Shortest time between two target assignment computations of a streams group (status ASSIGNMENT_DELAYED meanwhile).", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.AssignmentIntervalMs }),
	streamsInt("group.streams.assignment.quiet.ms", "100", "Beyond Kafka: a streams group that has seen no membership change and no assignment for this long is assigned at the next heartbeat that changes nothing, without waiting for the rest of group.streams.assignment.interval.ms; a member joining a settled group gets tasks in about this time instead of the interval. 0 keeps Kafka's behaviour. See conformance.md (Streams groups).", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.AssignmentQuietMs }),
	streamsInt("group.streams.min.assignment.interval.ms", "0", "Lowest allowed streams assignment interval.", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.MinAssignmentIntervalMs }),
	streamsInt("group.streams.max.assignment.interval.ms", "15000", "Highest allowed streams assignment interval.", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.MaxAssignmentIntervalMs }),
	{"group.streams.assignors", "sticky", "Comma-separated task assignors streams groups may use (sticky, highavailability); the first is the default.",
		func(c *Config, v string) (err error) {
			c.StreamsGroup.Assignors, err = parseList(v)
			if err == nil && len(c.StreamsGroup.Assignors) == 0 {
				err = errors.New("must name at least one assignor")
			}
			return
		}},
	{"group.streams.rack.aware.assignment.tags", "", "Comma-separated client tag keys for rack-aware standby placement; members missing one get status MISSING_CLIENT_TAGS (heartbeat v1).",
		func(c *Config, v string) (err error) {
			c.StreamsGroup.RackAwareAssignmentTags, err = parseList(v)
			return
		}},
	{"group.streams.assignor.offload.enable", "true", "Accepted for compatibility with Kafka; has no effect on streams groups.",
		func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("must be true or false")
			}
			c.StreamsGroup.AssignorOffloadEnable = b
			return nil
		}},
	{"group.streams.join.creates.internal.topics", "true", "coordinatord only. true: a joining member's heartbeat first creates the internal topics (repartition, changelog) its topology is missing and is then answered with its tasks. false: the join is answered with status MISSING_INTERNAL_TOPICS while the topics are created, as Kafka 4.4 does, and the member gets tasks one heartbeat interval later.",
		func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("must be true or false")
			}
			c.StreamsGroup.JoinCreatesInternalTopics = b
			return nil
		}},
	streamsInt("group.streams.reconciliation.heartbeat.interval.ms", "500", "coordinatord only. Heartbeat interval told to a streams group member instead of the configured one while tasks change hands in its group (the member has tasks to revoke or to receive, its assignment is delayed, or another member has not reconciled to the group's target assignment yet) and, to every member, for one configured heartbeat interval after the group's target assignment was computed (members tend to join in bursts). Members then learn of their part in a hand-over sooner; once the group is stable and its assignment that old, each member is told the configured interval again. An answer reporting missing source topics always carries the configured interval: a Kafka Streams 4.4 client fails the application once a source topic has been missing for twice the interval it was last told. 0, or a value not below the heartbeat interval: always the configured interval, as Kafka 4.4 answers.", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.ReconciliationHeartbeatIntervalMs }),
	{"group.streams.migration.policy", "bidirectional", "coordinatord only. Online migration of a running Kafka Streams application between the classic protocol and the streams protocol: bidirectional, upgrade (classic to streams only), downgrade (streams to classic only) or disabled (Kafka 4.4: a streams heartbeat to a non-empty classic group gets GROUP_ID_NOT_FOUND, a JoinGroup to a non-empty streams group INCONSISTENT_GROUP_PROTOCOL). Case-insensitive. Empty groups convert under every policy. See migration.md.",
		func(c *Config, v string) error {
			switch p := strings.ToLower(strings.TrimSpace(v)); p {
			case "bidirectional", "upgrade", "downgrade", "disabled":
				c.StreamsGroup.MigrationPolicy = p
				return nil
			}
			return errors.New("must be bidirectional, upgrade, downgrade or disabled")
		}},
	streamsInt("group.streams.task.offset.interval.ms", "60000", "How often streams members report task offsets (TaskOffsetIntervalMillis); at least the minimum.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.TaskOffsetIntervalMs }),
	streamsInt("group.streams.min.task.offset.interval.ms", "15000", "Lowest allowed task offset interval.", 1,
		func(s *StreamsGroupConfig) *int32 { return &s.MinTaskOffsetIntervalMs }),
	streamsInt("group.streams.num.warmup.replicas", "2", "Warm-up tasks the highavailability assignor may place at once (no effect with sticky).", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.NumWarmupReplicas }),
	streamsInt("group.streams.max.warmup.replicas", "20", "Highest allowed number of warm-up replicas.", 0,
		func(s *StreamsGroupConfig) *int32 { return &s.MaxWarmupReplicas }),
	{"group.streams.acceptable.recovery.lag", "10000", "Changelog lag under which a task counts as caught up; returned to members as AcceptableRecoveryLag (heartbeat v1).",
		func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				return errors.New("must be an integer >= 0")
			}
			c.StreamsGroup.AcceptableRecoveryLag = n
			return nil
		}},
}

func init() { keys = append(keys, streamsKeys...) }

// validateStreams checks the bounds between streams group keys (spec streams-groups §7.1).
func (c *Config) validateStreams() error {
	s := c.StreamsGroup
	between := func(name string, v, min, max int32, minKey, maxKey string) error {
		if v < min || v > max {
			return &KeyError{Key: name, Value: c.values[name], Reason: fmt.Sprintf("must be between %s (%d) and %s (%d)", minKey, min, maxKey, max)}
		}
		return nil
	}
	checks := []error{
		between("group.streams.session.timeout.ms", s.SessionTimeoutMs, s.MinSessionTimeoutMs, s.MaxSessionTimeoutMs, "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
		between("group.streams.heartbeat.interval.ms", s.HeartbeatIntervalMs, s.MinHeartbeatIntervalMs, s.MaxHeartbeatIntervalMs, "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
		between("group.streams.assignment.interval.ms", s.AssignmentIntervalMs, s.MinAssignmentIntervalMs, s.MaxAssignmentIntervalMs, "group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms"),
		between("group.streams.num.standby.replicas", s.NumStandbyReplicas, 0, s.MaxStandbyReplicas, "0", "group.streams.max.standby.replicas"),
		between("group.streams.num.warmup.replicas", s.NumWarmupReplicas, 0, s.MaxWarmupReplicas, "0", "group.streams.max.warmup.replicas"),
		between("group.streams.task.offset.interval.ms", s.TaskOffsetIntervalMs, s.MinTaskOffsetIntervalMs, 1<<31-1, "group.streams.min.task.offset.interval.ms", "2147483647"),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if s.HeartbeatIntervalMs >= s.SessionTimeoutMs {
		return &KeyError{Key: "group.streams.heartbeat.interval.ms", Value: c.values["group.streams.heartbeat.interval.ms"], Reason: "must be lower than group.streams.session.timeout.ms"}
	}
	return nil
}

// TopologyPluginConfig configures the topology description plugin (KIP-1331, spec
// topology-description §1.1). An empty Class means no plugin: the feature is off.
type TopologyPluginConfig struct {
	Class          string
	CallTimeout    time.Duration
	MaxConcurrency int
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	BackoffJitter  float64
	// Props holds every other key under TopologyPluginPrefix, relative to it
	// ("memory.max.groups"); the plugin named by Class receives its own keys.
	Props map[string]string
}

// TopologyPluginPrefix starts the plugin keys. Keys below it that are not in the table are
// passed through to the plugin when they have the form <prefix><plugin name>.<key>; the first
// words of the table's own keys (class, call, max) cannot name a plugin, so a typo in one of
// them is still an unknown key.
const TopologyPluginPrefix = "group.streams.topology.description.plugin."

func isPluginPassThrough(key string) bool {
	rest, ok := strings.CutPrefix(key, TopologyPluginPrefix)
	if !ok {
		return false
	}
	name, sub, ok := strings.Cut(rest, ".")
	if !ok || name == "" || sub == "" || strings.HasSuffix(sub, ".") {
		return false
	}
	switch name {
	case "class", "call", "max":
		return false
	}
	return true
}

func (c *Config) pluginEntries() []Entry {
	var out []Entry
	for k, v := range c.values {
		if isPluginPassThrough(k) {
			if _, known := lookup(k); !known {
				out = append(out, Entry{Key: k, Value: v, Source: c.sources[k], Doc: "Passed to the topology description plugin."})
			}
		}
	}
	return out
}

var topologyPluginKeys = []key{
	{TopologyPluginPrefix + "class", "", "Topology description plugin (KIP-1331) by registered name: memory, file, http, or one compiled in; Kafka's org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin means memory. Empty: no plugin, the feature is off. Keys " + TopologyPluginPrefix + "<name>.* configure the plugin (docs/topology-plugins.md).",
		func(c *Config, v string) error {
			c.TopologyPlugin.Class = strings.TrimSpace(v)
			c.TopologyPlugin.Props = map[string]string{}
			for k, val := range c.values {
				if isPluginPassThrough(k) {
					c.TopologyPlugin.Props[strings.TrimPrefix(k, TopologyPluginPrefix)] = val
				}
			}
			return nil
		}},
	{TopologyPluginPrefix + "call.timeout.ms", "10000", "Deadline of each topology description plugin call; a call that has not answered by then (waiting for a worker included) is a transient failure. Kafka has no such deadline.",
		func(c *Config, v string) (err error) { c.TopologyPlugin.CallTimeout, err = parseMillis(v, 1); return }},
	{TopologyPluginPrefix + "max.concurrency", "64", "Topology description plugin calls running at once (the worker pool; calls never run on a shard goroutine). A plugin that hangs occupies at most this many workers.",
		func(c *Config, v string) error {
			n, err := parseInt32(v, 1, 10000)
			c.TopologyPlugin.MaxConcurrency = int(n)
			return err
		}},
	{"group.streams.topology.description.backoff.initial.ms", "30000", "First window in which a streams group is not asked again for its topology description after a member was asked or a push failed transiently; doubles per attempt (Kafka's fixed value).",
		func(c *Config, v string) (err error) {
			c.TopologyPlugin.BackoffInitial, err = parseMillis(v, 1)
			return
		}},
	{"group.streams.topology.description.backoff.max.ms", "3600000", "Longest topology description solicitation window (Kafka's fixed value); at least the initial window.",
		func(c *Config, v string) (err error) {
			c.TopologyPlugin.BackoffMax, err = parseMillis(v, 1)
			if err == nil && c.TopologyPlugin.BackoffMax < c.TopologyPlugin.BackoffInitial {
				err = errors.New("must be at least group.streams.topology.description.backoff.initial.ms")
			}
			return
		}},
	{"group.streams.topology.description.backoff.jitter", "0.2", "Random ± fraction applied to each solicitation window (Kafka's fixed value); 0 makes windows exact.",
		func(c *Config, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f < 0 || f >= 1 {
				return errors.New("must be a number >= 0 and < 1")
			}
			c.TopologyPlugin.BackoffJitter = f
			return nil
		}},
}

func init() { keys = append(keys, topologyPluginKeys...) }
