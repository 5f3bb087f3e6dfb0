package wire

import (
	"net"
	"testing"
	"time"
)

func TestConnPrincipalIsAnonymousUntilSet(t *testing.T) {
	c := &Conn{ID: 1}
	if got := c.Principal(); got != Anonymous || got.String() != "User:ANONYMOUS" {
		t.Fatalf("principal before authentication = %v, want User:ANONYMOUS", got)
	}
	c.SetPrincipal(Principal{Type: "User", Name: "alice"})
	if got := c.Principal().String(); got != "User:alice" {
		t.Fatalf("principal after authentication = %q, want User:alice", got)
	}
}

// The SASL gate of a SASL listener's connection, as Kafka's authenticator: ApiVersions and
// SaslHandshake before authentication, SaslAuthenticate only during an exchange, everything
// once authenticated, and only SaslHandshake once the session expired.
func TestSASLGate(t *testing.T) {
	const metadata, handshake, apiVersions, authenticate = 3, 17, 18, 36
	now := time.Now()
	c := &Conn{}
	for _, k := range []int16{metadata, handshake, authenticate} {
		if ok, _ := c.admits(k, now); !ok {
			t.Fatalf("a listener without SASL refused key %d", k)
		}
	}
	c.sasl.required = true
	check := func(stage string, want map[int16]bool) {
		t.Helper()
		for _, k := range []int16{metadata, handshake, apiVersions, authenticate} {
			if ok, why := c.admits(k, now); ok != want[k] {
				t.Errorf("%s: key %d admitted=%v (%s), want %v", stage, k, ok, why, want[k])
			}
		}
	}
	check("before authentication", map[int16]bool{handshake: true, apiVersions: true})
	c.SetSASLExchange(struct{}{})
	check("during the exchange", map[int16]bool{authenticate: true})
	c.SetAuthenticated(Principal{Type: "User", Name: "alice"}, "PLAIN", now.Add(time.Minute))
	if c.Principal().Name != "alice" || c.SASLExchange() != nil || c.SASLMechanism() != "PLAIN" {
		t.Fatalf("after SetAuthenticated: %v %v %q", c.Principal(), c.SASLExchange(), c.SASLMechanism())
	}
	check("authenticated", map[int16]bool{metadata: true, handshake: true, apiVersions: true, authenticate: true})
	now = now.Add(2 * time.Minute)
	check("after the session expired", map[int16]bool{handshake: true})
	c.SetSASLExchange(struct{}{})
	check("re-authenticating", map[int16]bool{authenticate: true})
}

// Host is the client host Kafka reports (DescribeGroups, ConsumerGroupDescribe): the IP without
// the port, v4 or v6; an address with no port whole; nothing without an address. Asked again
// (every heartbeat asks) it answers the same.
func TestConnHost(t *testing.T) {
	for _, tc := range []struct {
		remote net.Addr
		want   string
	}{
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9092}, "/10.1.2.3"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9092}, "/::1"},
		{pipeAddr{}, "/pipe"},
		{nil, ""},
	} {
		c := &Conn{Remote: tc.remote}
		for range 2 {
			if got := c.Host(); got != tc.want {
				t.Errorf("Host of %v = %q, want %q", tc.remote, got, tc.want)
			}
		}
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
