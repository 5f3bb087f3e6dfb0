package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordinatord/coordinatord/internal/security"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

func (t *Table) saslAuthenticate(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	x, _ := r.Conn.SASLExchange().(*saslExchange)
	if x == nil || x.raw {
		// Outside an exchange (a listener without SASL, or after it completed): Kafka's
		// request handler answers these, with this text whatever the listener.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
		return resp
	}
	out, lifetime, err := t.saslStep(ctx, r.Conn, x, req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + x.mechanism
		resp.ErrorMessage = &msg
		t.failAuthentication(ctx, r.Conn, err.Error())
		return resp
	}
	resp.SASLAuthBytes = out
	if resp.SASLAuthBytes == nil {
		resp.SASLAuthBytes = []byte{}
	}
	resp.SessionLifetimeMillis = lifetime.Milliseconds()
	return resp
}

// SASLToken implements wire.SASLTokenHandler: a raw token after a SaslHandshake v0, which
// carries no Kafka header. A failed token gets no answer; the connection closes after the
// failed-authentication delay, as in Kafka.
func (t *Table) SASLToken(ctx context.Context, c *wire.Conn, token []byte) ([]byte, bool) {
	x, _ := c.SASLExchange().(*saslExchange)
	if x == nil || !x.raw {
		return nil, false
	}
	out, _, err := t.saslStep(ctx, c, x, token)
	if err != nil {
		t.failAuthentication(ctx, c, err.Error())
		return nil, false
	}
	if out == nil {
		out = []byte{}
	}
	return out, true
}

// saslStep feeds one client message to the exchange. When it completes the connection is
// authenticated, and lifetime is the session's (0: no expiry).
func (t *Table) saslStep(ctx context.Context, c *wire.Conn, x *saslExchange, msg []byte) (out []byte, lifetime time.Duration, err error) {
	var (
		user string
		done bool
	)
	if x.scram != nil {
		out, done, err = x.scram.Step(msg)
		if done {
			user = x.scram.User()
		}
	} else if t.deps.SASL.Plain == nil {
		err = errors.New("PLAIN has no users file")
	} else {
		var reloadErr error
		user, reloadErr, err = t.deps.SASL.Plain.Verify(msg)
		if reloadErr != nil {
			t.log.Warn("sasl.plain.users.file changed but cannot be read; using its previous contents", zap.Error(reloadErr))
		}
		done = err == nil
	}
	if err == nil && done && c.Authenticated() {
		if prev := c.Principal(); prev.Name != user {
			err = fmt.Errorf("%w from %s to User:%s", errReauthPrincipal, prev, user)
		}
	}
	if err != nil {
		if !errors.Is(err, security.ErrAuthFailed) && ctx.Err() == nil && !errors.Is(err, errReauthPrincipal) {
			// The metadata shard could not answer: not the client's fault, but no login either.
			t.log.Warn("SASL authentication could not complete", zap.Error(err))
		}
		return nil, 0, err
	}
	if !done {
		return out, 0, nil
	}
	var expires time.Time
	if d := t.deps.SASL.MaxReauth; d > 0 {
		expires, lifetime = time.Now().Add(d), d
	}
	c.SetAuthenticated(wire.Principal{Type: "User", Name: user}, x.mechanism, expires)
	t.log.Debug("authenticated", zap.Stringer("peer", c.Remote), zap.Uint64("conn", c.ID), zap.String("principal", "User:"+user), zap.String("mechanism", x.mechanism))
	return out, lifetime, nil
}

// errReauthPrincipal: KIP-368 keeps a connection's principal across re-authentications.
var errReauthPrincipal = errors.New("re-authentication changed the principal")
