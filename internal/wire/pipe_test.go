package wire

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// splicesHandler answers ApiVersions and notes whether the connection would take piped answers.
type splicesHandler struct{ splices chan bool }

func (h *splicesHandler) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	req := kmsg.RequestForKey(key)
	return req, true, req != nil
}

func (h *splicesHandler) Handle(_ context.Context, r *Request) kmsg.Response {
	h.splices <- r.Conn.SplicesAnswers()
	return r.Body.ResponseKind()
}

func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// Forwarded answers are spliced to the client's socket only on plaintext listeners without
// SASL: a TLS connection's bytes must go through the TLS layer, and a SASL listener's paths
// stay as they were.
func TestAnswersAreSplicedOnlyOnPlaintextWithoutSASL(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want bool
	}{
		{"PLAINTEXT", Options{}, PipeSupported},
		{"SASL_PLAINTEXT", Options{SASL: true}, false},
		{"SSL", Options{TLS: selfSignedTLS(t)}, false},
	} {
		h := &splicesHandler{splices: make(chan bool, 1)}
		tc.opts.MaxRequestBytes = 1 << 20
		srv := NewServer(tc.opts, h)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		var c net.Conn
		if tc.opts.TLS != nil {
			c, err = tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		} else {
			c, err = net.Dial("tcp", ln.Addr().String())
		}
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(0)
		c.Write(requestFrame(1, req))
		select {
		case got := <-h.splices:
			if got != tc.want {
				t.Errorf("%s: SplicesAnswers %v, want %v", tc.name, got, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: request not served", tc.name)
		}
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.Shutdown(ctx)
		cancel()
	}
}
