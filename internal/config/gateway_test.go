package config

import (
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
