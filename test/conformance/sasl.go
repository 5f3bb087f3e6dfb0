package conformance

// SCRAM logins for the SASL pair ("servers sasl"): a scenario's `login` step opens its
// connection on the servers' SASL_PLAINTEXT listener and authenticates there as a user the
// harness created at start, so what follows is decided for that user's principal.

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslUsers are the SCRAM-SHA-256 users the SASL pair has; each one's password is
// "<name>-secret".
var saslUsers = []string{"alice", "bob"}

func saslPassword(user string) string { return user + "-secret" }

// roundTrip sends req at version and decodes the answer.
func (c *clientConn) roundTrip(req kmsg.Request, version int16) (kmsg.Response, error) {
	client := defaultClientID
	if err := c.sendRequest(&Step{}, req, version, &client); err != nil {
		return nil, err
	}
	p := c.pending[len(c.pending)-1]
	c.pending = c.pending[:len(c.pending)-1]
	b, err := c.next(defaultRecvWait)
	if err != nil {
		return nil, fmt.Errorf("%s v%d on %s: %w", apiName(req.Key()), version, c.name, err)
	}
	resp, _, err := readResponse(b, p.key, p.version, &p.corr)
	return resp, err
}

// loginSCRAM runs SaslHandshake v1 and SaslAuthenticate v2 with SCRAM-SHA-256 on a fresh
// connection, as a Java client does.
func loginSCRAM(c *clientConn, user, password string) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "SCRAM-SHA-256"
	r, err := c.roundTrip(hs, 1)
	if err != nil {
		return err
	}
	if code := r.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return fmt.Errorf("SaslHandshake: %s", errorName(int64(code)))
	}
	session, msg, err := scram.Auth{User: user, Pass: password}.AsSha256Mechanism().Authenticate(context.Background(), "")
	if err != nil {
		return err
	}
	for done := false; !done; {
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = msg
		r, err := c.roundTrip(auth, 2)
		if err != nil {
			return err
		}
		ar := r.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			m := ""
			if ar.ErrorMessage != nil {
				m = *ar.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate as %s: %s %s", user, errorName(int64(ar.ErrorCode)), m)
		}
		if done, msg, err = session.Challenge(ar.SASLAuthBytes); err != nil {
			return err
		}
	}
	return nil
}

// createSASLUsers gives every saslUsers entry its SCRAM-SHA-256 credential on a server, over
// its plaintext listener (User:ANONYMOUS, a super user in the SASL pair), then waits until each
// can log in on its SASL listener: Kafka applies a credential asynchronously.
func createSASLUsers(addr, saslAddr string) error {
	c, err := dial("users", addr)
	if err != nil {
		return err
	}
	defer c.close()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range saslUsers {
		salt := make([]byte, 16)
		rand.Read(salt)
		salted, err := pbkdf2.Key(sha256.New, saslPassword(u), salt, 4096, sha256.Size)
		if err != nil {
			return err
		}
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u, 1, 4096, salt, salted
		req.Upsertions = append(req.Upsertions, up)
	}
	r, err := c.roundTrip(req, 0)
	if err != nil {
		return err
	}
	for _, res := range r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if res.ErrorCode != 0 {
			return fmt.Errorf("AlterUserScramCredentials for %s on %s: %s", res.User, addr, errorName(int64(res.ErrorCode)))
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range saslUsers {
		for {
			c, err := dial("login", saslAddr)
			if err != nil {
				return err
			}
			err = loginSCRAM(c, u, saslPassword(u))
			c.close()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the SCRAM user %s created on %s cannot log in on %s: %w", u, addr, saslAddr, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}
