package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// testPKI is a CA made for one test, and the files it issues.
type testPKI struct {
	t      *testing.T
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
	serial int64
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &testPKI{t: t, dir: t.TempDir(), caCert: cert, caKey: key, serial: 1}
	p.caFile = filepath.Join(p.dir, "ca.pem")
	if err := os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *testPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	return pool
}

// issue makes a certificate signed by the CA (a server one valid for 127.0.0.1, or a client
// one) and returns it with its key, and the PEM of both in one file as Kafka's PEM keystore.
func (p *testPKI) issue(subject pkix.Name, server bool) (tls.Certificate, []byte) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		p.t.Fatal(err)
	}
	return pair, append(keyPEM, certPEM...)
}

// serverKeystore writes a server keystore file (key and certificate in one PEM file).
func (p *testPKI) serverKeystore(name string) string {
	_, pemBytes := p.issue(pkix.Name{CommonName: name}, true)
	path := filepath.Join(p.dir, name+".pem")
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

func (p *testPKI) clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.pool(), Certificates: certs, ServerName: "127.0.0.1"}
}

func scramSHA256(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
}

// saslDaemon serves PLAINTEXT (for administration) and SASL_SSL with PLAIN and both SCRAMs.
// The PLAIN users are pat and admin (the super user of a test that sets super.users).
func saslDaemon(t *testing.T, p *testPKI, extra ...string) (*daemon, []string) {
	users := filepath.Join(p.dir, "plain-users")
	if err := os.WriteFile(users, []byte("pat=pat-secret\nadmin=admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sets := append([]string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"ssl.keystore.location=" + p.serverKeystore("server"),
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"sasl.plain.users.file=" + users,
	}, extra...)
	return startDaemon(t, sets...), sets
}

// A SCRAM user created with AlterUserScramCredentials logs in over TLS, wrong passwords and
// unknown users are refused with SASL_AUTHENTICATION_FAILED, PLAIN users come from the file,
// and the credentials survive a restart.
func TestSASLSCRAMAndPLAINOverTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	d, sets := saslDaemon(t, p)
	ctx := ctxT(t)
	adm := kadm.NewClient(d.client())
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, altered.Error())
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || described.Error() != nil {
		t.Fatalf("DescribeUserSCRAMs: %v %v", err, described.Error())
	}
	if a := described["alice"]; len(a.CredInfos) != 1 || a.CredInfos[0].Mechanism != kadm.ScramSha256 || a.CredInfos[0].Iterations != 8192 {
		t.Fatalf("alice described as %+v", a)
	}

	login := func(addr string, mech sasl.Mechanism) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(p.clientTLS()), kgo.SASL(mech),
			kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// A group API behind the authentication: list groups, then a commit and a fetch.
		adm := kadm.NewClient(cl)
		if _, err := adm.ListGroups(ctx); err != nil {
			return err
		}
		off := kadm.Offsets{}
		off.AddOffset("t", 0, 7, -1)
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return err
		}
		if _, err := adm.CommitOffsets(ctx, "g-"+mech.Name(), off); err != nil {
			return err
		}
		return nil
	}
	addr := d.Listeners["SASL_SSL"]
	for _, ok := range []sasl.Mechanism{
		scramSHA256("alice", "alice-secret"),
		scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(),
		plain.Auth{User: "pat", Pass: "pat-secret"}.AsMechanism(),
	} {
		if err := login(addr, ok); err != nil {
			t.Fatalf("%s: %v", ok.Name(), err)
		}
	}
	for name, bad := range map[string]sasl.Mechanism{
		"wrong password":         scramSHA256("alice", "nope"),
		"unknown user":           scramSHA256("mallory", "alice-secret"),
		"other mechanism's user": scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
		"wrong PLAIN password":   plain.Auth{User: "pat", Pass: "nope"}.AsMechanism(),
		"SCRAM user over PLAIN":  plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
	} {
		if err := login(addr, bad); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: err = %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}

	d.stop()
	d.start(sets...)
	if err := login(d.Listeners["SASL_SSL"], scramSHA256("alice", "alice-secret")); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	// Deleted, the user can no longer log in.
	adm = kadm.NewClient(d.client())
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}
	if err := login(d.Listeners["SASL_SSL"], scramSHA256("alice", "alice-secret")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted user: err = %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
