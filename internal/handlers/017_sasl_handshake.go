package handlers

import (
	"context"
	"time"

	"github.com/coordinatord/coordinatord/internal/security"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// SASL is what the SaslHandshake and SaslAuthenticate handlers need.
type SASL struct {
	// Mechanisms are the enabled mechanisms by listener name (sasl.enabled.mechanisms).
	Mechanisms map[string][]string
	// Plain checks PLAIN logins; nil when no listener enables PLAIN.
	Plain *security.PlainUsers
	// MaxReauth is connections.max.reauth.ms; 0: sessions do not expire.
	MaxReauth time.Duration
	// FailedDelay is connection.failed.authentication.delay.ms.
	FailedDelay time.Duration
}

// saslExchange is the exchange parked on the connection between SaslHandshake and the last
// SaslAuthenticate.
type saslExchange struct {
	mechanism string
	scram     *security.ScramServer // nil for PLAIN
	// raw: the handshake was v0, so the client sends bare tokens, not SaslAuthenticate.
	raw bool
}

func (t *Table) saslHandshake(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if !r.Conn.SASLRequired() {
		// Kafka answers a handshake on a listener without SASL with ILLEGAL_SASL_STATE.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	}
	enabled := t.deps.SASL.Mechanisms[r.Conn.Listener]
	resp.SupportedMechanisms = enabled
	ok := false
	for _, m := range enabled {
		ok = ok || m == req.Mechanism
	}
	if !ok {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		t.failAuthentication(ctx, r.Conn, "unsupported SASL mechanism "+req.Mechanism)
		return resp
	}
	if r.Conn.Authenticated() && req.Mechanism != r.Conn.SASLMechanism() {
		// KIP-368: a re-authentication keeps the mechanism (and the principal).
		resp.ErrorCode = kerr.IllegalSaslState.Code
		t.failAuthentication(ctx, r.Conn, "re-authentication changed the SASL mechanism from "+r.Conn.SASLMechanism()+" to "+req.Mechanism)
		return resp
	}
	if r.Conn.Authenticated() && r.Version == 0 {
		// Re-authentication (KIP-368) exists only with SaslAuthenticate, that is handshake v1.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		t.failAuthentication(ctx, r.Conn, "re-authentication with SaslHandshake v0")
		return resp
	}
	x := &saslExchange{mechanism: req.Mechanism, raw: r.Version == 0}
	if m, isScram := security.MechanismByName(req.Mechanism); isScram {
		x.scram = security.NewScramServer(m, t.scramLookup(ctx, m))
	}
	r.Conn.SetSASLExchange(x)
	if x.raw {
		r.Conn.ExpectRawSASLTokens()
	}
	return resp
}

// scramLookup reads a user's credential from the metadata shard.
func (t *Table) scramLookup(ctx context.Context, m security.Mechanism) security.CredentialLookup {
	return func(user string) (security.Credential, bool, error) {
		v, err := t.deps.Meta.Read(ctx, meta.LookupScram(user, m.Type))
		if err != nil {
			return security.Credential{}, false, err
		}
		l := v.(meta.ScramLookup)
		c := l.Credential
		return security.Credential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, l.Found, nil
	}
}

// failAuthentication holds the failed answer back for connection.failed.authentication.delay.ms
// and then closes the connection after it, as Kafka does, so that guessing passwords is slow.
func (t *Table) failAuthentication(ctx context.Context, c *wire.Conn, why string) {
	t.log.Info("authentication failed", zap.Stringer("peer", c.Remote), zap.Uint64("conn", c.ID), zap.String("listener", c.Listener), zap.String("reason", why))
	c.SetSASLExchange(nil)
	c.CloseAfterResponse()
	if d := t.deps.SASL.FailedDelay; d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
}
