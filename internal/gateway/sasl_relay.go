package gateway

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// A client of a SASL listener authenticates with the upstream, not with coordinatord: its
// SaslHandshake and SaslAuthenticate go on its own upstream connection (the one its forwarded
// requests use, dialed without coordinatord's login), so the upstream checks the password and
// applies its ACLs to everything the client forwards, exactly as for a direct client.
// coordinatord learns the principal from the exchange: the user name the client's first
// message claims, once the upstream has accepted the proof for it. Only mechanisms whose first
// message names the user in clear can be relayed that way: PLAIN and SCRAM.

// relayable are the mechanisms a relay can name the principal of, with the number of
// SaslAuthenticate rounds after which the upstream's success completes the exchange.
var relayable = map[string]int{"PLAIN": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2}

// relayExchange is parked on the connection between SaslHandshake and the last
// SaslAuthenticate.
type relayExchange struct {
	mechanism string
	user      string
	rounds    int
}

// relaySASL answers SaslHandshake (17) and SaslAuthenticate (36) of a client of a SASL
// listener with the upstream's answers. A nil answer closes the connection.
func (p *portHandler) relaySASL(ctx context.Context, r *wire.Request) kmsg.Response {
	c := r.Conn
	if r.Key == 17 {
		req := r.Body.(*kmsg.SASLHandshakeRequest)
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SetVersion(r.Version)
		enabled := p.g.mechanisms(c.Listener)
		resp.SupportedMechanisms = enabled
		supported := false
		for _, m := range enabled {
			supported = supported || m == req.Mechanism
		}
		switch {
		case r.Version < 1:
			// v0 is followed by bare tokens, which are not Kafka frames the relay could pair
			// with answers; clients since Kafka 1.0 send v1.
			return p.refuseSASL(c, resp, kerr.UnsupportedSaslMechanism.Code, "SaslHandshake v0 cannot be relayed to the upstream")
		case !supported:
			return p.refuseSASL(c, resp, kerr.UnsupportedSaslMechanism.Code, "unsupported SASL mechanism "+req.Mechanism)
		case c.Authenticated() && req.Mechanism != c.SASLMechanism():
			return p.refuseSASL(c, resp, kerr.IllegalSaslState.Code, "re-authentication changed the SASL mechanism")
		}
		up, err := p.forwardRequest(ctx, r, req)
		if err != nil {
			p.g.lg.Info("closing connection", zap.Stringer("peer", c.Remote), zap.String("reason", "relaying SaslHandshake: "+err.Error()))
			return nil
		}
		hs := up.(*kmsg.SASLHandshakeResponse)
		if hs.ErrorCode != 0 {
			return p.refuseSASL(c, hs, hs.ErrorCode, "the upstream refused SASL mechanism "+req.Mechanism)
		}
		c.SetSASLExchange(&relayExchange{mechanism: req.Mechanism})
		return hs
	}

	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	x, ok := c.SASLExchange().(*relayExchange)
	if !ok {
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.SetVersion(r.Version)
		return p.refuseSASL(c, resp, kerr.IllegalSaslState.Code, "SaslAuthenticate without SaslHandshake")
	}
	if x.rounds == 0 {
		user, ok := claimedUser(x.mechanism, req.SASLAuthBytes)
		if !ok {
			resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			resp.SetVersion(r.Version)
			return p.refuseSASL(c, resp, kerr.SaslAuthenticationFailed.Code, "malformed first "+x.mechanism+" message")
		}
		x.user = user
	}
	start := time.Now()
	up, err := p.forwardRequest(ctx, r, req)
	if err != nil {
		p.g.lg.Info("closing connection", zap.Stringer("peer", c.Remote), zap.String("reason", "relaying SaslAuthenticate: "+err.Error()))
		return nil
	}
	resp := up.(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 0 {
		// The upstream closes its side after a failed login; the client's goes with it, after
		// the answer, as a broker's does.
		return p.refuseSASL(c, resp, resp.ErrorCode, "the upstream refused the login of "+x.user)
	}
	x.rounds++
	if x.rounds < relayable[x.mechanism] {
		return resp
	}
	if c.Authenticated() && c.Principal().Name != x.user {
		// KIP-368: a re-authentication must not change the principal.
		return p.refuseSASL(c, resp, kerr.SaslAuthenticationFailed.Code, "re-authentication changed the principal")
	}
	var expires time.Time
	if resp.SessionLifetimeMillis > 0 {
		expires = start.Add(time.Duration(resp.SessionLifetimeMillis) * time.Millisecond)
	}
	c.SetAuthenticated(wire.Principal{Type: "User", Name: x.user}, x.mechanism, expires)
	return resp
}

// refuseSASL answers resp with code and closes the connection after it.
func (p *portHandler) refuseSASL(c *wire.Conn, resp kmsg.Response, code int16, why string) kmsg.Response {
	switch r := resp.(type) {
	case *kmsg.SASLHandshakeResponse:
		r.ErrorCode = code
	case *kmsg.SASLAuthenticateResponse:
		r.ErrorCode = code
		if code == kerr.SaslAuthenticationFailed.Code && r.ErrorMessage == nil {
			r.ErrorMessage = kmsg.StringPtr("Authentication failed")
		}
	}
	c.SetSASLExchange(nil)
	c.CloseAfterResponse()
	p.g.lg.Info("authentication failed", zap.Stringer("peer", c.Remote), zap.String("reason", why))
	return resp
}

// claimedUser is the user a mechanism's first client message names: PLAIN's authcid
// (authzid NUL authcid NUL password), SCRAM's n= attribute (RFC 5802, with =2C and =3D
// unescaped).
func claimedUser(mechanism string, msg []byte) (string, bool) {
	if mechanism == "PLAIN" {
		parts := bytes.Split(msg, []byte{0})
		if len(parts) != 3 || len(parts[1]) == 0 {
			return "", false
		}
		return string(parts[1]), true
	}
	// gs2-header: "n," or "y," or "p=...," then the optional "a=authzid," then "n=user,r=...".
	s := string(msg)
	_, rest, ok := strings.Cut(s, ",")
	if !ok {
		return "", false
	}
	if _, rest, ok = strings.Cut(rest, ","); !ok {
		return "", false
	}
	attr, _, _ := strings.Cut(rest, ",")
	user, ok := strings.CutPrefix(attr, "n=")
	if !ok || user == "" {
		return "", false
	}
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(user), true
}
