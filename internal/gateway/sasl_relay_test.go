package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// saslUpstream accepts every SASL exchange except tokens containing "bad", and counts the
// requests it was sent.
func saslUpstream(t *testing.T, requests *atomic.Int32) upstream.Broker {
	return fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			requests.Add(1)
			key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
			corr := int32(binary.BigEndian.Uint32(frame[4:8]))
			var resp kmsg.Response
			switch key {
			case 17:
				r := kmsg.NewPtrSASLHandshakeResponse()
				r.SupportedMechanisms = []string{"PLAIN", "SCRAM-SHA-256"}
				resp = r
			case 36:
				r := kmsg.NewPtrSASLAuthenticateResponse()
				if bytes.Contains(frame, []byte("bad")) {
					r.ErrorCode = kerr.SaslAuthenticationFailed.Code
				}
				r.SASLAuthBytes = []byte("server-message")
				resp = r
			default:
				return
			}
			resp.SetVersion(version)
			c.Write(wire.AppendResponse(nil, corr, resp))
		}
	})
}

func relayGateway(t *testing.T, b upstream.Broker) *portHandler {
	g := testGateway(t)
	g.opts.SASLMechanisms = map[string][]string{"SASL": {"PLAIN", "SCRAM-SHA-256"}}
	g.opts.BrokerPortsListener = "SASL"
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	return &portHandler{g: g, node: 1}
}

func relay(p *portHandler, c *wire.Conn, req kmsg.Request) kmsg.Response {
	req.SetVersion(1)
	return p.relaySASL(context.Background(), &wire.Request{Header: wire.Header{Key: req.Key(), Version: 1, CorrelationID: 7}, Body: req, Conn: c})
}

func handshake(mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Mechanism = mech
	return r
}

func authenticate(token string) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.SASLAuthBytes = []byte(token)
	return r
}

func code(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.SASLHandshakeResponse:
		return r.ErrorCode
	case *kmsg.SASLAuthenticateResponse:
		return r.ErrorCode
	}
	return -1
}

// The principal is the user the SCRAM client-first message names, and only once the upstream
// has accepted the whole exchange (both rounds); a re-authentication as another user is refused.
func TestRelayedSCRAMLoginNamesThePrincipal(t *testing.T) {
	var n atomic.Int32
	p := relayGateway(t, saslUpstream(t, &n))
	c := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	defer p.g.closeConn(c)
	if got := code(relay(p, c, handshake("SCRAM-SHA-256"))); got != 0 {
		t.Fatalf("handshake: %d", got)
	}
	if got := code(relay(p, c, authenticate("n,,n=al=2Cice,r=nonce"))); got != 0 || c.Authenticated() {
		t.Fatalf("first round: code %d, authenticated %v (want 0, not yet)", got, c.Authenticated())
	}
	if got := code(relay(p, c, authenticate("c=biws,r=nonce,p=proof"))); got != 0 || !c.Authenticated() {
		t.Fatalf("final round: code %d, authenticated %v", got, c.Authenticated())
	}
	if pr := c.Principal(); pr.Type != "User" || pr.Name != "al,ice" {
		t.Fatalf("principal %+v, want User:al,ice", pr)
	}
	// Re-authentication (KIP-368) as someone else.
	relay(p, c, handshake("SCRAM-SHA-256"))
	relay(p, c, authenticate("n,,n=mallory,r=nonce"))
	if got := code(relay(p, c, authenticate("c=biws,r=nonce,p=proof"))); got != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as another user: code %d", got)
	}
	if pr := c.Principal(); pr.Name != "al,ice" {
		t.Fatalf("principal changed to %+v", pr)
	}
}

// A login the upstream refuses leaves the connection anonymous and passes the upstream's error
// on; a mechanism the listener does not enable is refused without asking the upstream.
func TestRelayedLoginRefusals(t *testing.T) {
	var n atomic.Int32
	p := relayGateway(t, saslUpstream(t, &n))
	c := &wire.Conn{ID: 1, Listener: "SASL"}
	defer p.g.closeConn(c)
	relay(p, c, handshake("PLAIN"))
	if got := code(relay(p, c, authenticate("\x00alice\x00bad-password"))); got != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("wrong password: code %d", got)
	}
	if c.Authenticated() || c.Principal().Name != wire.Anonymous.Name {
		t.Fatalf("refused login left principal %+v", c.Principal())
	}

	c2 := &wire.Conn{ID: 2, Listener: "SASL"}
	defer p.g.closeConn(c2)
	before := n.Load()
	if got := code(relay(p, c2, handshake("SCRAM-SHA-512"))); got != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("mechanism not enabled: code %d", got)
	}
	if n.Load() != before {
		t.Fatal("a mechanism the listener does not enable reached the upstream")
	}
	c3 := &wire.Conn{ID: 3, Listener: "SASL"}
	defer p.g.closeConn(c3)
	relay(p, c3, handshake("PLAIN"))
	if got := code(relay(p, c3, authenticate("no-separators"))); got != kerr.SaslAuthenticationFailed.Code || c3.Authenticated() {
		t.Fatalf("malformed PLAIN message: code %d", got)
	}
}

func TestClaimedUser(t *testing.T) {
	for _, tc := range []struct {
		mech, msg, user string
		ok              bool
	}{
		{"PLAIN", "\x00alice\x00pw", "alice", true},
		{"PLAIN", "admin\x00alice\x00pw", "alice", true},
		{"PLAIN", "\x00\x00pw", "", false},
		{"SCRAM-SHA-512", "n,,n=bob,r=x", "bob", true},
		{"SCRAM-SHA-512", "n,a=bob,n=bob,r=x", "bob", true},
		{"SCRAM-SHA-512", "n,,n=a=3Db,r=x", "a=b", true},
		{"SCRAM-SHA-512", "n,,r=x", "", false},
		{"SCRAM-SHA-512", "garbage", "", false},
	} {
		user, ok := claimedUser(tc.mech, []byte(tc.msg))
		if user != tc.user || ok != tc.ok {
			t.Errorf("%s %q: %q %v, want %q %v", tc.mech, tc.msg, user, ok, tc.user, tc.ok)
		}
	}
}

// A forwarded connection logged in as the gateway whose upstream session is about to end
// (KIP-368) is replaced between two requests: the next request goes on a fresh connection
// instead of one the upstream would close, with the client's connection, at its next use.
func TestExpiredGatewayLoginIsReplacedBetweenRequests(t *testing.T) {
	var accepted atomic.Int32
	b := fakeUpstream(t, 1, func(c net.Conn) {
		accepted.Add(1)
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.SetVersion(12)
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
		}
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	conn := &wire.Conn{ID: 1, Listener: "PLAINTEXT"}
	defer g.closeConn(conn)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	send := func(corr int32) {
		t.Helper()
		if _, err := g.forward(context.Background(), 1, conn, wire.Header{Key: 3, Version: 12, CorrelationID: corr}, requestFrame(req, corr), func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	send(2)
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d upstream connections for two requests, want 1", n)
	}
	v, _ := g.conns.Load(conn)
	cc := v.(*clientConn)
	cc.mu.Lock()
	cc.ups[1].expires = time.Now().Add(-time.Millisecond)
	cc.mu.Unlock()
	send(3)
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d upstream connections after the login's session ended, want a second one", n)
	}
}

// On a SASL listener a client's login goes to the upstream, which knows its users: the broker
// port relays SaslHandshake and SaslAuthenticate there, so the client's credentials are the
// upstream's and a wrong password is refused by it, not checked against coordinatord's own.
func TestSASLListenerRelaysTheLoginUpstream(t *testing.T) {
	var n atomic.Int32
	p := relayGateway(t, saslUpstream(t, &n))
	p.g.opts.Local = fakeLocal{}
	addr, _ := servePort(t, p.g, 1, wire.Options{ListenerName: "SASL", SASL: true, MaxRequestBytes: 1 << 20, SASLMaxReceive: 1 << 20})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := handshake("PLAIN")
	req.SetVersion(1)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	roundTripRaw(t, c, req, 1, resp)
	if resp.ErrorCode != 0 || n.Load() == 0 {
		t.Fatalf("SaslHandshake on a SASL listener: code %d, upstream asked %d times; want it relayed and accepted", resp.ErrorCode, n.Load())
	}
	auth := authenticate("\x00user\x00bad-password")
	auth.SetVersion(1)
	authResp := kmsg.NewPtrSASLAuthenticateResponse()
	roundTripRaw(t, c, auth, 2, authResp)
	if authResp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("a login the upstream refuses: code %d, want SASL_AUTHENTICATION_FAILED", authResp.ErrorCode)
	}
}

// sessionUpstream is an upstream broker that requires coordinatord's own SASL PLAIN login and,
// as Kafka does (KIP-368), gives each login a session of lifetime and closes a connection whose
// session has ended when any other request reaches it. Every other request is handled latency
// after it arrived (the network and the broker's queue), and answered with an empty Metadata;
// logins counts the logins and lastLogin holds when the last one was accepted (UnixNano).
func sessionUpstream(t *testing.T, lifetime, latency time.Duration, logins *atomic.Int32, lastLogin *atomic.Int64) upstream.Broker {
	return fakeUpstream(t, 1, func(c net.Conn) {
		var ends time.Time
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
			corr := int32(binary.BigEndian.Uint32(frame[4:8]))
			var resp kmsg.Response
			switch key {
			case 17:
				r := kmsg.NewPtrSASLHandshakeResponse()
				r.SupportedMechanisms = []string{"PLAIN"}
				resp = r
			case 36:
				logins.Add(1)
				now := time.Now()
				lastLogin.Store(now.UnixNano())
				ends = now.Add(lifetime)
				r := kmsg.NewPtrSASLAuthenticateResponse()
				r.SessionLifetimeMillis = lifetime.Milliseconds()
				resp = r
			default:
				time.Sleep(latency)
				if ends.IsZero() || time.Now().After(ends) {
					return // not logged in, or the session ended: the broker closes the connection
				}
				r := kmsg.NewPtrMetadataResponse()
				resp = r
			}
			resp.SetVersion(version)
			c.Write(wire.AppendResponse(nil, corr, resp))
		}
	})
}

// The gateway's own upstream login is renewed before the upstream ends its session (KIP-368):
// a request sent late in the session, which would reach the upstream only after the session
// ended, goes on a fresh connection with a fresh login instead, so the client's connection is
// not closed under it. The upstream answers the login with a session of 2 s and takes 300 ms
// (15 %) to get to each request; the second request leaves 93 % into the session, after the
// gateway's renewal point (90 %) and before the session's end. (Without the 10 % margin, or
// without reading the session lifetime from the login's answer, the second request went on the
// old connection, which the upstream closed.)
func TestGatewayLoginIsRenewedBeforeTheUpstreamSessionEnds(t *testing.T) {
	const lifetime = 2 * time.Second
	var logins atomic.Int32
	var lastLogin atomic.Int64
	b := sessionUpstream(t, lifetime, lifetime*15/100, &logins, &lastLogin)
	g := testGateway(t)
	g.opts.Security = upstream.Security{SASL: plain.Auth{User: "gw", Pass: "pw"}.AsMechanism()}
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	conn := &wire.Conn{ID: 1, Listener: "PLAINTEXT"}
	defer g.closeConn(conn)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	send := func(corr int32) error {
		_, err := g.forward(context.Background(), 1, conn, wire.Header{Key: 3, Version: 12, CorrelationID: corr}, requestFrame(req, corr), func(int) error { return nil })
		return err
	}
	if err := send(1); err != nil {
		t.Fatal(err)
	}
	// Counted from when the upstream accepted the login, which the gateway's count starts
	// before: the second request leaves at least 93 % into the session by the gateway's
	// clock and reaches the upstream at least 108 % into it by the upstream's.
	time.Sleep(time.Until(time.Unix(0, lastLogin.Load()).Add(lifetime * 93 / 100)))
	if err := send(2); err != nil {
		t.Fatalf("request late in the login's session: %v (%d logins); want it sent under a renewed login", err, logins.Load())
	}
	if n := logins.Load(); n != 2 {
		t.Fatalf("%d logins, want the second request under a second one", n)
	}
}
