package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// GatewayConfig is gateway mode: clients bootstrap to coordinatord, which answers the group
// APIs itself and forwards everything else to an upstream Kafka cluster through one listener per
// upstream broker. An empty Bootstrap is standalone mode.
type GatewayConfig struct {
	// Bootstrap lists the upstream cluster's bootstrap host:port addresses.
	Bootstrap []string
	ClientID  string
	// RequestTimeout bounds one request of coordinatord's own upstream client (metadata).
	RequestTimeout time.Duration
	// ConnectTimeout bounds opening one upstream connection, for forwarding or metadata.
	ConnectTimeout time.Duration
	// MetadataMaxAge is how often upstream metadata (brokers, topics) is refreshed.
	MetadataMaxAge time.Duration
	// StartupTimeout bounds the retries to reach the upstream at start.
	StartupTimeout time.Duration
	// ListenHost is where the per-broker listeners bind; AdvertisedHost is what clients are told.
	ListenHost, AdvertisedHost string
	// PortMin..PortMax is the range broker listeners take their ports from; 0..0 lets the
	// kernel pick (ports then stay stable only while the process runs).
	PortMin, PortMax int
	// OwnPorts are the ports of the range this node's own listeners and admin.listener use: a
	// broker listener never takes one, even while it is free (before the admin listener is up).
	OwnPorts []int
	// Security is the upstream.security.protocol, upstream.ssl.* and upstream.sasl.* keys.
	Security UpstreamSecurity
}

// Enabled says whether gateway mode is on.
func (g GatewayConfig) Enabled() bool { return len(g.Bootstrap) > 0 }

var gatewayKeys = []key{
	{"upstream.bootstrap.servers", "", "Gateway mode: comma-separated host:port addresses of the upstream Kafka cluster. Empty (the default) is standalone mode; set, coordinatord answers the group APIs and forwards every other API to the upstream through one listener per upstream broker.",
		func(c *Config, v string) error {
			c.Gateway.Bootstrap = nil
			if strings.TrimSpace(v) == "" {
				return nil
			}
			for _, a := range strings.Split(v, ",") {
				a = strings.TrimSpace(a)
				host, port, err := net.SplitHostPort(a)
				if err != nil || host == "" {
					return fmt.Errorf("%q is not host:port", a)
				}
				if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
					return fmt.Errorf("%q has no valid port", a)
				}
				c.Gateway.Bootstrap = append(c.Gateway.Bootstrap, a)
			}
			return nil
		}},
	{"upstream.client.id", "coordinatord-gateway", "client.id of coordinatord's own requests to the upstream (metadata); forwarded requests keep their client's id.",
		func(c *Config, v string) error { c.Gateway.ClientID = v; return nil }},
	{"upstream.request.timeout.ms", "30000", "How long an upstream broker may take to answer: coordinatord's own requests (metadata), and each forwarded request, counted from its sending and extended by the wait the request itself asks of the broker (a Fetch's max wait, a Produce's or admin request's timeout). A forwarded request unanswered by then closes the client's connection, as a failed broker would (WARN log, coordinatord_gateway_forward_timeouts_total).",
		func(c *Config, v string) (err error) { c.Gateway.RequestTimeout, err = parseMillis(v, 1); return }},
	{"upstream.socket.connection.setup.timeout.ms", "10000", "How long opening one connection to an upstream broker may take; a forwarded request whose connection cannot be opened closes the client's connection.",
		func(c *Config, v string) (err error) { c.Gateway.ConnectTimeout, err = parseMillis(v, 1); return }},
	{"upstream.metadata.max.age.ms", "10000", "How often upstream metadata (brokers, topics and their ids) is refreshed; a request naming an unknown topic or broker refreshes it at once.",
		func(c *Config, v string) (err error) { c.Gateway.MetadataMaxAge, err = parseMillis(v, 100); return }},
	{"upstream.startup.timeout.ms", "60000", "How long coordinatord retries reaching the upstream at start before it refuses to start.",
		func(c *Config, v string) (err error) { c.Gateway.StartupTimeout, err = parseMillis(v, 1); return }},
	{"gateway.listener.host", "", "Host the per-upstream-broker listeners bind; empty means the host of the first entry of listeners.",
		func(c *Config, v string) error { c.Gateway.ListenHost = v; return nil }},
	{"gateway.advertised.host", "", "Host clients are given for the per-upstream-broker listeners; empty means the host of the first entry of advertised.listeners.",
		func(c *Config, v string) error { c.Gateway.AdvertisedHost = v; return nil }},
	{"gateway.broker.port.range", "", "min-max: ports the per-upstream-broker listeners take, one per upstream node id, kept across restarts in log.dirs (gateway-ports.json). Empty means the 100 ports after the first listener's port (the kernel picks when that port is 0). A port of the range that another of this node's listeners or admin.listener uses is passed over; a range set here must not hold a listener on gateway.listener.host. Several nodes on one host need a range each (docs/scale-out.md).",
		func(c *Config, v string) error {
			c.Gateway.PortMin, c.Gateway.PortMax = 0, 0
			if v == "" {
				return nil
			}
			lo, hi, ok := strings.Cut(v, "-")
			min, err1 := strconv.Atoi(strings.TrimSpace(lo))
			max, err2 := strconv.Atoi(strings.TrimSpace(hi))
			if !ok || err1 != nil || err2 != nil || min < 1 || max > 65535 || min > max {
				return errors.New("must be min-max with 1 <= min <= max <= 65535")
			}
			c.Gateway.PortMin, c.Gateway.PortMax = min, max
			return nil
		}},
}

func init() { keys = append(keys, gatewayKeys...) }

// validateGateway fills the gateway defaults that depend on other keys and checks the
// combination.
func (c *Config) validateGateway() error {
	g := &c.Gateway
	if !g.Enabled() {
		return nil
	}
	if g.ListenHost == "" {
		g.ListenHost = c.Listeners[0].Host
	}
	if g.AdvertisedHost == "" {
		g.AdvertisedHost = c.AdvertisedListeners[0].Host
	}
	defaulted := g.PortMin == 0
	if defaulted && c.Listeners[0].Port != 0 {
		g.PortMin, g.PortMax = c.Listeners[0].Port+1, min(c.Listeners[0].Port+100, 65535)
	}
	g.OwnPorts = nil
	if g.PortMin == 0 {
		return nil
	}
	inRange := func(p int) bool { return p != 0 && p >= g.PortMin && p <= g.PortMax }
	for _, l := range c.Listeners {
		if !inRange(l.Port) {
			continue
		}
		// A range the operator chose that holds a listener on the same host is a mistake to
		// say; the default range (listeners on adjacent ports: 9092, 9093) passes over it.
		if !defaulted && l.Host == g.ListenHost {
			return &KeyError{Key: "gateway.broker.port.range", Value: c.values["gateway.broker.port.range"],
				Reason: fmt.Sprintf("includes the port of listener %s", l)}
		}
		g.OwnPorts = append(g.OwnPorts, l.Port)
	}
	if _, port, err := net.SplitHostPort(c.AdminListener); err == nil {
		if p, _ := strconv.Atoi(port); inRange(p) {
			g.OwnPorts = append(g.OwnPorts, p)
		}
	}
	return nil
}

// Warnings are the combinations Load accepts that a start may still regret; serve logs them at
// WARN and `config check` prints them.
func (c *Config) Warnings() []string {
	var out []string
	g := c.Gateway
	if g.Enabled() && c.LogBackend.Kafka() && g.PortMin != 0 && c.sources["gateway.broker.port.range"] == SourceDefault {
		// Several nodes of one cluster on one host naturally take adjacent listener ports
		// (9092, 9093, 9094), each of which the default range of the node before holds: the
		// node that starts first may bind the next one's listener port for an upstream broker.
		out = append(out, fmt.Sprintf("gateway.broker.port.range is its default %d-%d, the ports after this node's listener port: "+
			"another node of the cluster on this host whose listener or broker ports fall in it may find them taken by this node (or take this node's); "+
			"give every node on a host its own range (docs/scale-out.md)", g.PortMin, g.PortMax))
	}
	return out
}
