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
	if x == nil {
		// Outside an exchange (a listener without SASL, or after it completed): Kafka's
		// request handler answers these, with this text whatever the listener.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
		return resp
	}
	var (
		user string
		done bool
		out  []byte
		err  error
	)
	if x.scram != nil {
		out, done, err = x.scram.Step(req.SASLAuthBytes)
		if done {
			user = x.scram.User()
		}
	} else if t.deps.SASL.Plain == nil {
		err = errors.New("PLAIN has no users file")
	} else {
		var reloadErr error
		user, reloadErr, err = t.deps.SASL.Plain.Verify(req.SASLAuthBytes)
		if reloadErr != nil {
			t.log.Warn("sasl.plain.users.file changed but cannot be read; using its previous contents", zap.Error(reloadErr))
		}
		done = err == nil
	}
	if err == nil && done && r.Conn.Authenticated() {
		if prev := r.Conn.Principal(); prev.Name != user {
			err = fmt.Errorf("%w from %s to User:%s", errReauthPrincipal, prev, user)
		}
	}
	if err != nil {
		if !errors.Is(err, security.ErrAuthFailed) && ctx.Err() == nil && !errors.Is(err, errReauthPrincipal) {
			// The metadata shard could not answer: not the client's fault, but no login either.
			t.log.Warn("SASL authentication could not complete", zap.Error(err))
		}
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + x.mechanism
		resp.ErrorMessage = &msg
		t.failAuthentication(ctx, r, err.Error())
		return resp
	}
	resp.SASLAuthBytes = out
	if resp.SASLAuthBytes == nil {
		resp.SASLAuthBytes = []byte{}
	}
	if !done {
		return resp
	}
	var expires time.Time
	if d := t.deps.SASL.MaxReauth; d > 0 {
		expires = time.Now().Add(d)
		resp.SessionLifetimeMillis = d.Milliseconds()
	}
	r.Conn.SetAuthenticated(wire.Principal{Type: "User", Name: user}, x.mechanism, expires)
	t.log.Debug("authenticated", zap.Stringer("peer", r.Conn.Remote), zap.Uint64("conn", r.Conn.ID), zap.String("principal", "User:"+user), zap.String("mechanism", x.mechanism))
	return resp
}

// errReauthPrincipal: KIP-368 keeps a connection's principal across re-authentications.
var errReauthPrincipal = errors.New("re-authentication changed the principal")
