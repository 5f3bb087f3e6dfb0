package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.properties")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsWithoutFile(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ShardCount != 50 || c.MaxRequestBytes != 104857600 || c.AdminListener != "127.0.0.1:9644" {
		t.Fatalf("unexpected defaults: %+v", c)
	}
	if c.QueuedMaxRequestBytes != 104857600 || c.MaxConnections != 10000 {
		t.Fatalf("queued.max.request.bytes %d, max.connections %d: both must be bounded by default", c.QueuedMaxRequestBytes, c.MaxConnections)
	}
	if u, err := Load("", []string{"queued.max.request.bytes=-1", "socket.request.max.bytes=2147483647"}); err != nil || u.QueuedMaxRequestBytes != -1 {
		t.Fatalf("an unbounded budget admits any frame size: %v", err)
	}
	if c.StreamsGroup.MigrationPolicy != "bidirectional" {
		t.Fatalf("group.streams.migration.policy defaults to %q, want bidirectional (online-migration §8)", c.StreamsGroup.MigrationPolicy)
	}
	if u, err := Load("", []string{"group.streams.migration.policy= Upgrade "}); err != nil || u.StreamsGroup.MigrationPolicy != "upgrade" {
		t.Fatalf("the policy is case-insensitive: %v %q", err, u.StreamsGroup.MigrationPolicy)
	}
	if len(c.AdvertisedListeners) != 1 || c.AdvertisedListeners[0].Addr() != "127.0.0.1:9092" {
		t.Fatalf("advertised listeners should default to listeners, got %v", c.AdvertisedListeners)
	}
	for _, e := range c.Entries() {
		if e.Source != SourceDefault {
			t.Fatalf("%s: source %s without file or flags", e.Key, e.Source)
		}
	}
}

func TestFileAndFlagPrecedence(t *testing.T) {
	p := writeFile(t, "# comment\nnode.id = 7\noffsets.topic.num.partitions: 3\nlog.dirs /tmp/x\n")
	c, err := Load(p, []string{"node.id=9"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 9 || c.ShardCount != 3 || c.LogDirs != "/tmp/x" {
		t.Fatalf("got node %d shards %d dirs %q", c.NodeID, c.ShardCount, c.LogDirs)
	}
	src := map[string]Source{}
	for _, e := range c.Entries() {
		src[e.Key] = e.Source
	}
	if src["node.id"] != SourceFlag || src["offsets.topic.num.partitions"] != SourceFile || src["listeners"] != SourceDefault {
		t.Fatalf("wrong sources: %v", src)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, file string
		set        []string
		wantKey    string
		wantIn     string
	}{
		{"unknown key in file", "no.such.key=1\n", nil, "no.such.key", ":1"},
		{"unknown key in flag", "", []string{"bogus=1"}, "bogus", "--set"},
		{"bad int", "node.id=abc\n", nil, "node.id", "between"},
		{"out of range", "offsets.topic.num.partitions=0\n", nil, "offsets.topic.num.partitions", "between"},
		{"bad listener", "listeners=127.0.0.1:9092\n", nil, "listeners", "NAME://host:port"},
		{"unspecified host needs advertised", "listeners=PLAINTEXT://0.0.0.0:9092\n", nil, "advertised.listeners", "must be set"},
		{"two listeners on one port", "listeners=PLAINTEXT://127.0.0.1:9092,EXTERNAL://10.0.0.1:9092\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT\n", nil, "listeners", "both use port 9092"},
		{"admin listener on a listener's port", "", []string{"admin.listener=127.0.0.1:9092"}, "admin.listener", "PLAINTEXT://127.0.0.1:9092 and 127.0.0.1:9092 both use port 9092"},
		{"admin listener port not a number", "", []string{"admin.listener=127.0.0.1:abc"}, "admin.listener", "port from 0 to 65535"},
		{"admin listener port out of range", "", []string{"admin.listener=127.0.0.1:99999"}, "admin.listener", "port from 0 to 65535"},
		{"advertising 0.0.0.0", "advertised.listeners=PLAINTEXT://0.0.0.0:9092\n", nil, "advertised.listeners", "clients cannot connect"},
		{"advertising ::", "listeners=PLAINTEXT://[::]:9092\nadvertised.listeners=PLAINTEXT://[::]:9092\n", nil, "advertised.listeners", "clients cannot connect"},
		{"flag without equals", "", []string{"node.id"}, "node.id", "key=value"},
		{"bad level", "", []string{"log.level=loud"}, "log.level", "one of"},
		{"frame larger than the queued budget", "", []string{"queued.max.request.bytes=1048576", "socket.request.max.bytes=1048577"}, "socket.request.max.bytes", "must not exceed queued.max.request.bytes"},
		{"queued budget zero", "", []string{"queued.max.request.bytes=0"}, "queued.max.request.bytes", "-1 (unbounded)"},
		{"unknown migration policy", "", []string{"group.streams.migration.policy=sideways"}, "group.streams.migration.policy", "bidirectional, upgrade, downgrade or disabled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = writeFile(t, tc.file)
			}
			_, err := Load(path, tc.set)
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("want *KeyError, got %v", err)
			}
			if ke.Key != tc.wantKey || !strings.Contains(err.Error(), tc.wantIn) {
				t.Fatalf("error %q: want key %s and %q", err, tc.wantKey, tc.wantIn)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error must be one line: %q", err)
			}
		})
	}
}

func TestUnreadableFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Fatal("missing file must fail")
	}
}

func TestPropertiesSyntax(t *testing.T) {
	in := "a=1\n  ! bang comment\nb : two words \\\n   continued\nc\\=d=e\nf=\\u0041\\\\\ng\n"
	props, err := ParseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range props {
		got[p.Key] = p.Value
	}
	want := map[string]string{"a": "1", "b": "two words continued", "c=d": "e", "f": `A\`, "g": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: got %q want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v", got)
	}
}

// A file saved with a UTF-8 byte order mark loads like one without.
func TestByteOrderMarkIgnored(t *testing.T) {
	c, err := Load(writeFile(t, "\ufeffnode.id=5\n"), nil)
	if err != nil || c.NodeID != 5 {
		t.Fatalf("a file starting with a byte order mark: %v", err)
	}
}

func TestMalformedUnicodeEscape(t *testing.T) {
	if _, err := ParseProperties(strings.NewReader("a=\\u12")); err == nil {
		t.Fatal("short \\u escape must fail")
	}
}

func TestDurations(t *testing.T) {
	c, err := Load("", []string{"connections.max.idle.ms=1500"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ConnectionsMaxIdle != 1500*time.Millisecond {
		t.Fatal(c.ConnectionsMaxIdle)
	}
}

func TestListenersSecurityProtocols(t *testing.T) {
	c, err := Load("", []string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SSL",
		"ssl.keystore.location=/etc/kafka/server.pem",
		"listener.name.internal.ssl.keystore.location=/etc/kafka/internal.pem",
		"listener.name.internal.ssl.client.auth=required",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
		"ssl.client.auth=requested",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ListenerSecurity{}
	for _, l := range c.Listeners {
		got[l.Name] = l.Security
	}
	// KIP-684: the global ssl.client.auth does not reach SASL_SSL listeners.
	if s := got["PLAINTEXT"]; s.TLS() || s.SASL() {
		t.Errorf("PLAINTEXT: %+v", s)
	}
	if s := got["SASL_SSL"]; !s.TLS() || !s.SASL() || s.SSL.KeystoreLocation != "/etc/kafka/server.pem" || s.SSL.ClientAuth != "none" || len(s.SASLMechanisms) != 1 || s.SASLMechanisms[0] != "SCRAM-SHA-512" {
		t.Errorf("SASL_SSL: %+v", s)
	}
	if s := got["INTERNAL"]; s.Protocol != ProtocolSSL || s.SSL.KeystoreLocation != "/etc/kafka/internal.pem" || s.SSL.ClientAuth != "required" {
		t.Errorf("INTERNAL (SSL, listener overrides): %+v", s)
	}
	if v, _ := c.Get("listener.name.internal.ssl.client.auth"); v != "required" {
		t.Errorf("the listener override is not among the effective keys: %q", v)
	}
}

func TestListenersSecurityErrors(t *testing.T) {
	cases := []struct {
		name string
		sets []string
		key  string
	}{
		{"name without protocol", []string{"listeners=INTERNAL://127.0.0.1:0"}, "listener.security.protocol.map"},
		{"bad protocol", []string{"listener.security.protocol.map=PLAINTEXT:TLS"}, "listener.security.protocol.map"},
		{"SSL without keystore", []string{"listeners=SSL://127.0.0.1:0"}, "ssl.keystore.location"},
		{"keystore twice", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=/k.pem", "ssl.keystore.key=x", "ssl.keystore.certificate.chain=y"}, "ssl.keystore.location"},
		{"half inline keystore", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.key=x"}, "ssl.keystore.key"},
		{"JKS", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=/k.jks", "ssl.keystore.type=JKS"}, "ssl.keystore.type"},
		{"encrypted key", []string{"ssl.key.password=pw"}, "ssl.key.password"},
		{"bad client auth", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=/k.pem", "listener.name.ssl.ssl.client.auth=always"}, "listener.name.ssl.ssl.client.auth"},
		{"GSSAPI", []string{"sasl.enabled.mechanisms=GSSAPI"}, "sasl.enabled.mechanisms"},
		{"PLAIN without users file", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN"}, "sasl.plain.users.file"},
		{"override of an unknown listener", []string{"listener.name.external.ssl.client.auth=required"}, "listener.name.external.ssl.client.auth"},
		{"unknown listener key", []string{"listener.name.plaintext.ssl.keystore.password=x"}, "listener.name.plaintext.ssl.keystore.password"},
		{"gateway with SASL", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0", "upstream.bootstrap.servers=127.0.0.1:9092"}, "listeners"},
	}
	for _, c := range cases {
		_, err := Load("", c.sets)
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != c.key {
			t.Errorf("%s: err = %v, want a KeyError on %s", c.name, err, c.key)
		}
	}
}

// A listener without a host binds every interface, as in Kafka; clients are given the local host
// name for it (Kafka's advertised wildcard host), never "" (which each client would dial as its
// own machine).
func TestEmptyListenerHostIsAdvertisedAsTheHostName(t *testing.T) {
	localHostname = func() (string, error) { return "node-a.example", nil }
	t.Cleanup(func() { localHostname = os.Hostname })
	c, err := Load(writeFile(t, "listeners=PLAINTEXT://:9092,SSL://127.0.0.1:9093\nssl.keystore.certificate.chain=x\nssl.keystore.key=y\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listeners[0].Addr() != ":9092" {
		t.Fatalf("the listener binds %s, want every interface (:9092)", c.Listeners[0].Addr())
	}
	if got := []string{c.AdvertisedListeners[0].Addr(), c.AdvertisedListeners[1].Addr()}; got[0] != "node-a.example:9092" || got[1] != "127.0.0.1:9093" {
		t.Fatalf("advertised %v, want node-a.example:9092 and 127.0.0.1:9093", got)
	}
	c, err = Load("", []string{"listeners=PLAINTEXT://127.0.0.1:9092", "advertised.listeners=PLAINTEXT://:9092"})
	if err != nil || c.AdvertisedListeners[0].Addr() != "node-a.example:9092" {
		t.Fatalf("an explicit advertised listener without a host: %v %v", c, err)
	}
	localHostname = func() (string, error) { return "", errors.New("no name") }
	if _, err := Load("", []string{"listeners=PLAINTEXT://:9092"}); err == nil || !strings.Contains(err.Error(), "advertised.listeners") {
		t.Fatalf("no host name to advertise: %v, want an advertised.listeners error", err)
	}
}

// Blanks after a value in a file are invisible; Kafka trims every value it parses, so a key set
// to its default with trailing blanks loads exactly as the default does.
func TestFileValuesAreTrimmed(t *testing.T) {
	for _, k := range keys {
		if k.def == "" {
			continue
		}
		_, plainErr := Load(writeFile(t, k.name+"="+k.def+"\n"), nil)
		c, err := Load(writeFile(t, k.name+"="+k.def+" \t\n"), nil)
		if (err == nil) != (plainErr == nil) {
			t.Errorf("%s=%q followed by blanks: %v, without them: %v", k.name, k.def, err, plainErr)
			continue
		}
		if err == nil {
			if v, _ := c.Get(k.name); v != k.def {
				t.Errorf("%s=%q followed by blanks holds %q", k.name, k.def, v)
			}
		}
	}
}

// Ports Kafka lets listeners share, and port 0, still load.
func TestListenersSharingAPortAsKafkaAllows(t *testing.T) {
	for _, set := range [][]string{
		{"listeners=PLAINTEXT://127.0.0.1:9092,EXTERNAL://[::1]:9092", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"},
		{"listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT", "admin.listener=127.0.0.1:0"},
	} {
		if _, err := Load("", set); err != nil {
			t.Errorf("%v: %v", set, err)
		}
	}
}
