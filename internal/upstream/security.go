package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SecurityConfig is the upstream.security.protocol, upstream.ssl.* and upstream.sasl.* keys.
type SecurityConfig struct {
	TLS, SASL                                               bool
	TruststoreLocation, TruststoreCertificates              string
	KeystoreLocation, KeystoreCertificateChain, KeystoreKey string
	VerifyHostname                                          bool
	Mechanism, Username, Password                           string
}

// Security is how connections to the upstream are secured: TLS when TLS is set (its
// ServerName is filled per connection), and coordinatord's own SASL login when SASL is set.
type Security struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// NewSecurity loads the TLS material (read once: a change needs a restart) and builds the SASL
// mechanism. Errors are configuration errors.
func NewSecurity(c SecurityConfig) (Security, error) {
	var s Security
	if c.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		var caPEM []byte
		switch {
		case c.TruststoreLocation != "":
			b, err := os.ReadFile(c.TruststoreLocation)
			if err != nil {
				return s, fmt.Errorf("upstream.ssl.truststore.location: %w", err)
			}
			caPEM = b
		case c.TruststoreCertificates != "":
			caPEM = []byte(c.TruststoreCertificates)
		}
		if caPEM != nil {
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(caPEM) {
				return s, errors.New("upstream.ssl.truststore: no PEM certificate found")
			}
		}
		var certPEM, keyPEM []byte
		switch {
		case c.KeystoreLocation != "":
			b, err := os.ReadFile(c.KeystoreLocation)
			if err != nil {
				return s, fmt.Errorf("upstream.ssl.keystore.location: %w", err)
			}
			certPEM, keyPEM = b, b
		case c.KeystoreCertificateChain != "":
			certPEM, keyPEM = []byte(c.KeystoreCertificateChain), []byte(c.KeystoreKey)
		}
		if certPEM != nil {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return s, fmt.Errorf("upstream.ssl.keystore: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		if !c.VerifyHostname {
			// Kafka's empty ssl.endpoint.identification.algorithm: the chain is still verified
			// against the truststore, only the host name is not compared.
			roots := cfg.RootCAs
			cfg.InsecureSkipVerify = true
			cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
				return verifyChain(raw, roots)
			}
		}
		s.TLS = cfg
	}
	if c.SASL {
		switch c.Mechanism {
		case "PLAIN":
			s.SASL = plain.Auth{User: c.Username, Pass: c.Password}.AsMechanism()
		case "SCRAM-SHA-256":
			s.SASL = scram.Auth{User: c.Username, Pass: c.Password}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			s.SASL = scram.Auth{User: c.Username, Pass: c.Password}.AsSha512Mechanism()
		default:
			return s, fmt.Errorf("upstream.sasl.mechanism %q is not supported", c.Mechanism)
		}
	}
	return s, nil
}

func verifyChain(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("the upstream sent no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := certs[0].Verify(opts)
	return err
}

// Dial opens a connection to addr secured as s says: TLS, then coordinatord's own SASL login
// when login is true. expires is when the upstream ends the login's session (KIP-368; zero: never).
func (s Security) Dial(ctx context.Context, d *net.Dialer, addr, clientID string, login bool) (nc net.Conn, expires time.Time, err error) {
	nc, err = d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer func() {
		if err != nil {
			nc.Close()
			nc = nil
		}
	}()
	if d.Timeout > 0 {
		nc.SetDeadline(time.Now().Add(d.Timeout))
		defer nc.SetDeadline(time.Time{})
	}
	if s.TLS != nil {
		host, _, _ := net.SplitHostPort(addr)
		cfg := s.TLS.Clone()
		cfg.ServerName = host
		tc := tls.Client(nc, cfg)
		if err = tc.HandshakeContext(ctx); err != nil {
			return nc, time.Time{}, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	if login && s.SASL != nil {
		if expires, err = s.authenticate(ctx, nc, addr, clientID); err != nil {
			return nc, time.Time{}, err
		}
	}
	return nc, expires, nil
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate v1 rounds on nc as the gateway.
func (s Security) authenticate(ctx context.Context, nc net.Conn, addr, clientID string) (time.Time, error) {
	corr := int32(0)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, s.SASL.Name()
	resp, err := roundTrip(nc, clientID, &corr, hs)
	if err != nil {
		return time.Time{}, fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return time.Time{}, fmt.Errorf("SaslHandshake %s: %w", s.SASL.Name(), err)
	}
	host, _, _ := net.SplitHostPort(addr)
	sess, msg, err := s.SASL.Authenticate(ctx, host)
	if err != nil {
		return time.Time{}, err
	}
	for {
		start := time.Now()
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, msg
		resp, err := roundTrip(nc, clientID, &corr, req)
		if err != nil {
			return time.Time{}, fmt.Errorf("SaslAuthenticate: %w", err)
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return time.Time{}, fmt.Errorf("upstream SASL login as %s: %w%s", s.SASL.Name(), err, msg)
		}
		done, next, err := sess.Challenge(r.SASLAuthBytes)
		if err != nil {
			return time.Time{}, err
		}
		if done {
			var expires time.Time
			if r.SessionLifetimeMillis > 0 {
				expires = start.Add(time.Duration(r.SessionLifetimeMillis) * time.Millisecond)
			}
			return expires, nil
		}
		msg = next
	}
}

// roundTrip writes req (a non-flexible version) with a request header and reads its answer.
func roundTrip(nc net.Conn, clientID string, corr *int32, req kmsg.Request) (kmsg.Response, error) {
	return RoundTrip(nc, clientID, corr, req)
}

// RoundTrip writes req at its set version with the next correlation id and reads its answer
// (at most 1 MiB), on a connection nothing else uses meanwhile: coordinatord's own requests on
// a connection of its own (a SASL login, a marker to another node, gateway/txnpeer.go).
func RoundTrip(nc net.Conn, clientID string, corr *int32, req kmsg.Request) (kmsg.Response, error) {
	*corr++
	b := make([]byte, 4, 64)
	b = kbin.AppendInt16(b, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, *corr)
	b = kbin.AppendNullableString(b, &clientID)
	if req.IsFlexible() {
		b = append(b, 0) // request header v2: no tagged fields
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := nc.Write(b); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return nil, fmt.Errorf("answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != *corr {
		return nil, fmt.Errorf("correlation id %d answered for %d", got, *corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	// ApiVersions answers carry no header tags whatever their version (KIP-511).
	if resp.IsFlexible() && req.Key() != 18 {
		r := kbin.Reader{Src: body}
		// Bounded by the bytes, not the count: a count of 2^32-1 over an empty body was as
		// many turns of this loop before the reader's failure ended it.
		for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
		if !r.Ok() {
			return nil, errors.New("answer header: truncated tagged fields")
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}
