package config

import (
	"slices"
	"strings"
	"testing"
)

func TestGatewayOffByDefault(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Gateway.Enabled() {
		t.Fatal("gateway mode is on without upstream.bootstrap.servers")
	}
}

func TestGatewayDefaultsFollowTheListener(t *testing.T) {
	c, err := Load("", []string{"listeners=PLAINTEXT://127.0.0.1:19092", "upstream.bootstrap.servers=kafka-1:9092, kafka-2:9092"})
	if err != nil {
		t.Fatal(err)
	}
	g := c.Gateway
	if !g.Enabled() || len(g.Bootstrap) != 2 || g.Bootstrap[1] != "kafka-2:9092" {
		t.Fatalf("bootstrap %v", g.Bootstrap)
	}
	if g.ListenHost != "127.0.0.1" || g.AdvertisedHost != "127.0.0.1" || g.PortMin != 19093 || g.PortMax != 19192 {
		t.Fatalf("defaults %+v, want the 100 ports after 19092 on the listener's host", g)
	}
}

func TestGatewayKeysAreValidated(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		key  string
		want string
	}{
		{[]string{"upstream.bootstrap.servers=kafka-1"}, "upstream.bootstrap.servers", "not host:port"},
		{[]string{"upstream.bootstrap.servers=kafka-1:0"}, "upstream.bootstrap.servers", "no valid port"},
		{[]string{"gateway.broker.port.range=200-100"}, "gateway.broker.port.range", "min-max"},
		{[]string{"gateway.broker.port.range=abc"}, "gateway.broker.port.range", "min-max"},
		{[]string{"upstream.metadata.max.age.ms=5"}, "upstream.metadata.max.age.ms", ">= 100"},
		{[]string{"listeners=PLAINTEXT://127.0.0.1:19100", "upstream.bootstrap.servers=k:9092", "gateway.broker.port.range=19090-19110"},
			"gateway.broker.port.range", "includes the port of listener"},
	} {
		_, err := Load("", tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s (%s)", tc.set, err, tc.key, tc.want)
		}
	}
}

// Three nodes on one host with listeners 9092, 9093 and 9094 and default broker port ranges: the
// first to start may bind the second's listener port for an upstream broker. The operator hears
// of it from `config check` and the start's log, before a node fails to bind.
func TestScaleOutWithDefaultBrokerPortRangeWarns(t *testing.T) {
	base := []string{"listeners=PLAINTEXT://127.0.0.1:9092", "upstream.bootstrap.servers=kafka-1:9092", "log.backend=kafka", "cluster.id=c"}
	c, err := Load("", base)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 1 || !strings.Contains(w[0], "gateway.broker.port.range") || !strings.Contains(w[0], "9093-9192") {
		t.Fatalf("warnings %q, want one on the default range 9093-9192", w)
	}
	for _, set := range [][]string{
		append(base[:len(base):len(base)], "gateway.broker.port.range=9100-9199"),
		base[:2:2], // one gateway node with the local log: no cluster of nodes to collide with
	} {
		c, err := Load("", set)
		if err != nil {
			t.Fatal(err)
		}
		if w := c.Warnings(); len(w) != 0 {
			t.Errorf("%v: warnings %q, want none", set, w)
		}
	}
}

// A second listener or the admin listener on a port after the first listener's (9092, 9093) is
// passed over by the default broker port range, not a reason to refuse a configuration that
// never named a range; a range the operator chose that holds a listener is still refused (above).
func TestDefaultBrokerPortRangePassesOverOwnPorts(t *testing.T) {
	c, err := Load("", []string{"listeners=PLAINTEXT://127.0.0.1:19092,INTERNAL://127.0.0.1:19093",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT", "upstream.bootstrap.servers=k:9092",
		"admin.listener=127.0.0.1:19100"})
	if err != nil {
		t.Fatalf("a default range holding the node's second listener was refused: %v", err)
	}
	if g := c.Gateway; g.PortMin != 19093 || g.PortMax != 19192 || !slices.Equal(g.OwnPorts, []int{19093, 19100}) {
		t.Fatalf("range %d-%d, own ports %v; want 19093-19192 passing over 19093 and 19100", g.PortMin, g.PortMax, g.OwnPorts)
	}
}
