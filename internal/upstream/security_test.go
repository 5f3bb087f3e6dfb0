package upstream

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// tlsUpstream serves TLS on 127.0.0.1 with a certificate for dnsName issued by a new CA, and
// returns its address and the CA's PEM.
func tlsUpstream(t *testing.T, dnsName string) (addr, caPEM string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); c.(*tls.Conn).Handshake() }()
		}
	}()
	return ln.Addr().String(), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
}

// The upstream's certificate must chain to the truststore; with the default
// ssl.endpoint.identification.algorithm=https it must also name the host dialed, and with it
// empty only that second check is off.
func TestUpstreamTLSVerification(t *testing.T) {
	addr, caPEM := tlsUpstream(t, "kafka-1.example")
	_, otherCA := tlsUpstream(t, "kafka-1.example")
	dial := func(c SecurityConfig) error {
		c.TLS = true
		s, err := NewSecurity(c)
		if err != nil {
			t.Fatal(err)
		}
		nc, _, err := s.Dial(context.Background(), &net.Dialer{Timeout: 5 * time.Second}, addr, "test", true)
		if err == nil {
			nc.Close()
		}
		return err
	}
	if err := dial(SecurityConfig{TruststoreCertificates: caPEM, VerifyHostname: true}); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("certificate for kafka-1.example accepted for 127.0.0.1 with hostname verification: %v", err)
	}
	if err := dial(SecurityConfig{TruststoreCertificates: caPEM}); err != nil {
		t.Fatalf("without hostname verification, the trusted chain is refused: %v", err)
	}
	if err := dial(SecurityConfig{TruststoreCertificates: otherCA}); err == nil {
		t.Fatal("a certificate from another CA accepted without hostname verification")
	}
}

func TestNewSecurityRefusesBadMaterial(t *testing.T) {
	for name, c := range map[string]SecurityConfig{
		"truststore without certificates": {TLS: true, TruststoreCertificates: "not pem"},
		"missing truststore file":         {TLS: true, TruststoreLocation: "/nonexistent/ca.pem"},
		"mismatched keystore":             {TLS: true, KeystoreCertificateChain: "x", KeystoreKey: "y"},
		"GSSAPI":                          {SASL: true, Mechanism: "GSSAPI"},
	} {
		if _, err := NewSecurity(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
