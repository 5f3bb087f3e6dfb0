package integration

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func listGroupsOver(t *testing.T, addr string, cfg *tls.Config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = kadm.NewClient(cl).ListGroups(ctxT(t))
	return err
}

// ssl.client.auth=required: a client certificate from the truststore's CA is needed, and its
// subject, mapped by ssl.principal.mapping.rules, is the connection's principal; a subject no
// rule maps closes the connection.
func TestMTLSPrincipalFromClientCertificate(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	d := startDaemon(t,
		"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"ssl.keystore.location="+p.serverKeystore("server"),
		"ssl.truststore.location="+p.caFile,
		"ssl.client.auth=required",
		"ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=clients.*$/$1/L",
		"log.level=debug",
	)
	addr := d.Listeners["SSL"]
	alice, _ := p.issue(pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"clients"}}, false)
	if err := listGroupsOver(t, addr, p.clientTLS(alice)); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	d.waitLogged("TLS client authenticated", func(l map[string]any) bool { return l["principal"] == "User:alice" })

	if err := listGroupsOver(t, addr, p.clientTLS()); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	unmapped, _ := p.issue(pkix.Name{CommonName: "eve", OrganizationalUnit: []string{"others"}}, false)
	if err := listGroupsOver(t, addr, p.clientTLS(unmapped)); err == nil {
		t.Fatal("a certificate no rule maps was served")
	}
	d.waitLogged("closing connection", func(l map[string]any) bool {
		r, _ := l["reason"].(string)
		return strings.Contains(r, "no rules apply to CN=eve,OU=others")
	})
	foreign := newPKI(t)
	stranger, _ := foreign.issue(pkix.Name{CommonName: "stranger", OrganizationalUnit: []string{"clients"}}, false)
	if err := listGroupsOver(t, addr, p.clientTLS(stranger)); err == nil {
		t.Fatal("a certificate of another CA was served")
	}
}

func peerSerial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// A renewed keystore file is served to new connections without a restart; a broken one is
// ignored (the previous certificate stays) and logged.
func TestTLSCertificateReloadedOnChange(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	keystore := p.serverKeystore("server")
	d := startDaemon(t, "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.location="+keystore)
	addr := d.Listeners["SSL"]
	first := peerSerial(t, addr, p.clientTLS())

	if err := os.WriteFile(keystore, []byte("-----BEGIN PRIVATE KEY-----\nhalf written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := peerSerial(t, addr, p.clientTLS()); got != first {
		t.Fatalf("after a broken write the serial is %s, want the previous %s", got, first)
	}
	d.waitLogged("TLS files changed but cannot be used; the listener keeps its previous certificates", nil)

	_, renewed := p.issue(pkix.Name{CommonName: "server"}, true)
	tmp := filepath.Join(filepath.Dir(keystore), "renewed.pem")
	if err := os.WriteFile(tmp, renewed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, keystore); err != nil {
		t.Fatal(err)
	}
	if got := peerSerial(t, addr, p.clientTLS()); got == first {
		t.Fatalf("the renewed certificate is not served: serial still %s", got)
	}
}

// ssl.keystore.certificate.chain and ssl.keystore.key carry the PEM inline, and per-listener
// keys (listener.name.<name>.*) give two TLS listeners their own settings.
func TestTLSInlinePEMAndListenerOverrides(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	_, pemBytes := p.issue(pkix.Name{CommonName: "inline"}, true)
	keyPEM, certPEM, _ := strings.Cut(string(pemBytes), "-----END PRIVATE KEY-----\n")
	keyPEM += "-----END PRIVATE KEY-----\n"
	d := startDaemon(t,
		"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
		"ssl.keystore.certificate.chain="+certPEM,
		"ssl.keystore.key="+keyPEM,
		"listener.name.mtls.ssl.client.auth=required",
		"listener.name.mtls.ssl.truststore.certificates="+string(mustRead(t, p.caFile)),
	)
	if err := listGroupsOver(t, d.Listeners["SSL"], p.clientTLS()); err != nil {
		t.Fatalf("SSL listener with inline PEM: %v", err)
	}
	if err := listGroupsOver(t, d.Listeners["MTLS"], p.clientTLS()); err == nil {
		t.Fatal("the MTLS listener served a client without a certificate")
	}
	client, _ := p.issue(pkix.Name{CommonName: "c"}, false)
	if err := listGroupsOver(t, d.Listeners["MTLS"], p.clientTLS(client)); err != nil {
		t.Fatalf("MTLS listener with a client certificate: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// config check loads what serve loads at start (TLS material, principal rules, PLAIN users),
// so a config it passes also starts, and it never prints an inline private key.
func TestConfigCheckLoadsSecurityFiles(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	keystore := p.serverKeystore("server")
	_, pemBytes := p.issue(pkix.Name{CommonName: "inline"}, true)
	keyPEM, certPEM, _ := strings.Cut(string(pemBytes), "-----END PRIVATE KEY-----\n")
	code, out, stderr := runCLI(t, "config", "check", "--set", "listeners=SSL://127.0.0.1:0",
		"--set", "ssl.keystore.certificate.chain="+certPEM, "--set", "ssl.keystore.key="+keyPEM+"-----END PRIVATE KEY-----\n")
	if code != 0 || !strings.Contains(out, "ssl.keystore.key=[hidden]\t# flag") || strings.Contains(out, "PRIVATE KEY") {
		t.Fatalf("config check with an inline key: exit %d, stderr %q, output:\n%s", code, stderr, out)
	}
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"missing keystore file", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=" + filepath.Join(p.dir, "absent.pem")}, "ssl.keystore.location"},
		{"keystore without a key", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=" + p.caFile}, "ssl.keystore.location"},
		{"bad mapping rule", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=" + keystore, "ssl.principal.mapping.rules=RULE:^CN=(.*$/$1/"}, "ssl.principal.mapping.rules"},
		{"missing PLAIN users file", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN", "sasl.plain.users.file=" + filepath.Join(p.dir, "absent")}, "sasl.plain.users.file"},
	} {
		args := []string{"config", "check"}
		for _, s := range tc.sets {
			args = append(args, "--set", s)
		}
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 naming %s", tc.name, code, stderr, tc.want)
		}
		code, _, stderr = runCLI(t, append([]string{"serve", "--set", "log.dirs=" + t.TempDir(), "--set", "admin.listener=127.0.0.1:0"}, args[2:]...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve, %s: exit %d, stderr %q; want 2 naming %s", tc.name, code, stderr, tc.want)
		}
	}
}
