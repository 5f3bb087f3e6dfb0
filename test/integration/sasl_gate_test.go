package integration

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func saslPlaintextDaemon(t *testing.T, extra ...string) *daemon {
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("pat=pat-secret\nquinn=quinn-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, append([]string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
		"sasl.plain.users.file=" + users,
	}, extra...)...)
}

func handshake(c *rawConn, mechanism string, corr int32) *kmsg.SASLHandshakeResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = mechanism
	c.write(frame(req, 1, corr, strp("raw"), nil))
	resp := kmsg.NewPtrSASLHandshakeResponse()
	c.read(resp, 1, corr)
	return resp
}

func authenticatePlain(c *rawConn, user, pass string, version int16, corr int32) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	c.write(frame(req, version, corr, strp("raw"), nil))
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	c.read(resp, version, corr)
	return resp
}

func metadata(c *rawConn, corr int32) {
	c.write(frame(kmsg.NewPtrMetadataRequest(), 12, corr, strp("raw"), nil))
}

// Before SASL completes, a SASL listener serves ApiVersions and SaslHandshake only, then
// SaslAuthenticate only, and closes the connection without an answer on anything else, as
// Kafka's authenticator does.
func TestSASLListenerClosesOnRequestsBeforeAuthentication(t *testing.T) {
	t.Parallel()
	d := saslPlaintextDaemon(t)
	addr := d.Listeners["SASL_PLAINTEXT"]

	c := dialRaw(t, addr)
	metadata(c, 1)
	c.expectClosed()

	c = dialRaw(t, addr)
	avReq := kmsg.NewPtrApiVersionsRequest()
	avReq.ClientSoftwareName, avReq.ClientSoftwareVersion = "raw", "1"
	c.write(frame(avReq, 3, 1, strp("raw"), nil))
	av := kmsg.NewPtrApiVersionsResponse()
	c.read(av, 3, 1)
	if av.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: %v", kerr.ErrorForCode(av.ErrorCode))
	}
	hs := handshake(c, "PLAIN", 2)
	if hs.ErrorCode != 0 || len(hs.SupportedMechanisms) != 2 {
		t.Fatalf("handshake: %v %v", kerr.ErrorForCode(hs.ErrorCode), hs.SupportedMechanisms)
	}
	metadata(c, 3) // between handshake and authenticate
	c.expectClosed()

	// Authenticated, everything is served.
	c = dialRaw(t, addr)
	handshake(c, "PLAIN", 1)
	if resp := authenticatePlain(c, "pat", "pat-secret", 2, 2); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	metadata(c, 3)
	c.read(kmsg.NewPtrMetadataResponse(), 12, 3)

	// The PLAINTEXT listener needs no SASL and refuses a handshake as Kafka does.
	c = dialRaw(t, d.Addr)
	if hs := handshake(c, "PLAIN", 1); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake on PLAINTEXT: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(hs.ErrorCode))
	}
}

// A failed login is answered SASL_AUTHENTICATION_FAILED and the connection closed; an unknown
// mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled ones, then closed.
//
// The failed answer is held back for connection.failed.authentication.delay.ms (Kafka's
// brake on password guessing), here 1 s: it cannot arrive sooner.
func TestSASLFailedLoginClosesConnection(t *testing.T) {
	t.Parallel()
	const failDelay = time.Second
	d := saslPlaintextDaemon(t, "connection.failed.authentication.delay.ms=1000")
	addr := d.Listeners["SASL_PLAINTEXT"]
	c := dialRaw(t, addr)
	handshake(c, "PLAIN", 1)
	sent := time.Now()
	resp := authenticatePlain(c, "pat", "wrong", 1, 2)
	if held := time.Since(sent); held < failDelay {
		t.Errorf("the failed login was answered after %v, before connection.failed.authentication.delay.ms (%v)", held, failDelay)
	}
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil {
		t.Fatalf("wrong password: %v %v, want SASL_AUTHENTICATION_FAILED with a message", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	c.expectClosed()

	c = dialRaw(t, addr)
	hs := handshake(c, "GSSAPI", 1)
	if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(hs.SupportedMechanisms) != 2 || hs.SupportedMechanisms[0] != "PLAIN" {
		t.Fatalf("GSSAPI: %v %v", kerr.ErrorForCode(hs.ErrorCode), hs.SupportedMechanisms)
	}
	c.expectClosed()
}

// KIP-368: SaslAuthenticate v1+ tells the session lifetime; after it, a request other than a
// re-authentication closes the connection, and a re-authentication as the same user extends
// the session while one as another user fails.
func TestSASLReauthentication(t *testing.T) {
	t.Parallel()
	d := saslPlaintextDaemon(t, "connections.max.reauth.ms=1500")
	addr := d.Listeners["SASL_PLAINTEXT"]

	expired := dialRaw(t, addr)
	handshake(expired, "PLAIN", 1)
	if resp := authenticatePlain(expired, "pat", "pat-secret", 1, 2); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 1500 {
		t.Fatalf("authenticate: %v lifetime %d, want lifetime 1500", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis)
	}
	reauth := dialRaw(t, addr)
	handshake(reauth, "PLAIN", 1)
	authenticatePlain(reauth, "pat", "pat-secret", 2, 2)
	other := dialRaw(t, addr)
	handshake(other, "PLAIN", 1)
	authenticatePlain(other, "pat", "pat-secret", 2, 2)

	time.Sleep(1600 * time.Millisecond) // past the session lifetime

	metadata(expired, 3)
	expired.expectClosed()

	handshake(reauth, "PLAIN", 3)
	if resp := authenticatePlain(reauth, "pat", "pat-secret", 2, 4); resp.ErrorCode != 0 {
		t.Fatalf("re-authentication: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	metadata(reauth, 5)
	reauth.read(kmsg.NewPtrMetadataResponse(), 12, 5)

	handshake(other, "PLAIN", 3)
	if resp := authenticatePlain(other, "quinn", "quinn-secret", 2, 4); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as another user: %v, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
	}
	other.expectClosed()
}

// Before authentication a SASL listener reads no frame above sasl.server.max.receive.size: a
// peer that has not logged in cannot make the server reserve and read socket.request.max.bytes.
func TestSASLBoundsFramesBeforeAuthentication(t *testing.T) {
	t.Parallel()
	d := saslPlaintextDaemon(t, "sasl.server.max.receive.size=4096")
	c := dialRaw(t, d.Listeners["SASL_PLAINTEXT"])
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = string(make([]byte, 5000))
	c.write(frame(req, 1, 1, strp("raw"), nil))
	c.expectClosed()

	// Authenticated, the connection may send larger frames again.
	c = dialRaw(t, d.Listeners["SASL_PLAINTEXT"])
	handshake(c, "PLAIN", 1)
	authenticatePlain(c, "pat", "pat-secret", 2, 2)
	md := kmsg.NewPtrMetadataRequest()
	for i := 0; i < 400; i++ {
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("a-topic-name-of-some-length")
		md.Topics = append(md.Topics, topic)
	}
	c.write(frame(md, 12, 3, strp("raw"), nil))
	c.read(kmsg.NewPtrMetadataResponse(), 12, 3)
}

// franz-go re-authenticates on its own within the session lifetime SaslAuthenticate gave it, so
// its connections outlive connections.max.reauth.ms without being closed.
func TestSASLReauthenticationByFranzGo(t *testing.T) {
	t.Parallel()
	d := saslPlaintextDaemon(t, "connections.max.reauth.ms=1500", "log.level=debug")
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.Listeners["SASL_PLAINTEXT"]), kgo.SASL(plain.Auth{User: "pat", Pass: "pat-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := ctxT(t)
	for i := 0; i < 4; i++ {
		if _, err := adm.ListGroups(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
	}
	auths := map[float64]int{}
	for _, l := range d.logged("authenticated") {
		auths[l["conn"].(float64)]++
	}
	reauthenticated := false
	for _, n := range auths {
		reauthenticated = reauthenticated || n > 1
	}
	if !reauthenticated {
		t.Fatalf("no connection re-authenticated: %v", auths)
	}
	for _, l := range d.logged("closing connection") {
		if r, _ := l["reason"].(string); strings.Contains(r, "SASL") {
			t.Fatalf("a connection was closed: %v", r)
		}
	}
}

// rawToken sends a bare SASL token (as after SaslHandshake v0) and reads the bare answer.
func (c *rawConn) rawToken(token []byte) ([]byte, error) {
	c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...))
	return c.readFrame()
}

// SaslHandshake v0: the exchange that follows is bare tokens without Kafka headers (clients
// before KIP-152), PLAIN and SCRAM; a failed token closes the connection unanswered.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	t.Parallel()
	d := saslPlaintextDaemon(t)
	addr := d.Listeners["SASL_PLAINTEXT"]
	hsV0 := func(c *rawConn, mechanism string) {
		t.Helper()
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Mechanism = mechanism
		c.write(frame(req, 0, 1, strp("raw"), nil))
		resp := kmsg.NewPtrSASLHandshakeResponse()
		c.read(resp, 0, 1)
		if resp.ErrorCode != 0 {
			t.Fatalf("handshake v0 %s: %v", mechanism, kerr.ErrorForCode(resp.ErrorCode))
		}
	}

	c := dialRaw(t, addr)
	hsV0(c, "PLAIN")
	if out, err := c.rawToken([]byte("\x00pat\x00pat-secret")); err != nil || len(out) != 0 {
		t.Fatalf("PLAIN token: %q %v, want an empty token", out, err)
	}
	metadata(c, 2)
	c.read(kmsg.NewPtrMetadataResponse(), 12, 2)

	c = dialRaw(t, addr)
	hsV0(c, "PLAIN")
	c.write(append(binary.BigEndian.AppendUint32(nil, 11), []byte("\x00pat\x00wrong!")...))
	c.expectClosed()

	adm := kadm.NewClient(d.client())
	if res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: "sam", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "sam-secret"}}); err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	c = dialRaw(t, addr)
	hsV0(c, "SCRAM-SHA-256")
	sess, msg, err := scram.Auth{User: "sam", Pass: "sam-secret"}.AsSha256Mechanism().Authenticate(ctxT(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		out, err := c.rawToken(msg)
		if err != nil {
			t.Fatalf("SCRAM token: %v", err)
		}
		if done, msg, err = sess.Challenge(out); err != nil {
			t.Fatalf("server's SCRAM answer: %v", err)
		}
	}
	metadata(c, 2)
	c.read(kmsg.NewPtrMetadataResponse(), 12, 2)
}
