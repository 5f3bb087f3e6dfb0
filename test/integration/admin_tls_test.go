package integration

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// adminGetWith fetches an admin path over HTTPS with the given client TLS settings.
func adminGetWith(addr, path string, cfg *tls.Config) (int, string, error) {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	resp, err := client.Get("https://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// startAdminTLSDaemon starts a daemon whose admin listener serves HTTPS; reach is how the
// harness itself reaches it (its readiness wait goes through it).
func startAdminTLSDaemon(t *testing.T, reach *tls.Config, sets ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, DataDir: t.TempDir(), exited: make(chan struct{}), adminTLS: reach}
	return d.start(append([]string{"admin.listener.security.protocol=SSL"}, sets...)...)
}

// admin.listener.security.protocol=SSL: every admin path is served over HTTPS to a client that
// trusts the CA, a plain-HTTP request gets no data, and `coordinatord healthcheck` follows
// /readyz over HTTPS, with the address and protocol given as flags or read from the config.
func TestAdminListenerHTTPS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	keystore := p.serverKeystore("admin")
	d := startAdminTLSDaemon(t, p.clientTLS(), "admin.ssl.keystore.location="+keystore)

	code, body, err := adminGetWith(d.Admin, "/metrics", p.clientTLS())
	if err != nil || code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("GET /metrics over HTTPS: %d %v\n%.300s", code, err, body)
	}
	code, body, err = adminGetWith(d.Admin, "/console/", p.clientTLS())
	if err != nil || code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("GET /console/ over HTTPS: %d %v\n%.300s", code, err, body)
	}

	for _, path := range []string{"/metrics", "/console/"} {
		resp, err := http.Get("http://" + d.Admin + path)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "go_goroutines") {
				t.Fatalf("a plain-HTTP request for %s was answered %s\n%.300s", path, resp.Status, b)
			}
		}
	}
	if _, _, err := adminGetWith(d.Admin, "/metrics", &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		t.Fatal("a client that does not trust the admin listener's CA completed the handshake")
	}

	if code, out, stderr := runCLI(t, "healthcheck", "--admin", "https://"+d.Admin, "--ca-file", p.caFile); code != 0 || !strings.HasPrefix(out, "ready") {
		t.Fatalf("healthcheck over HTTPS: exit %d %q %q", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, "healthcheck", "--admin", d.Admin); code == 0 {
		t.Fatalf("healthcheck over plain HTTP against the HTTPS listener passed: %q", stderr)
	}
	if code, _, stderr := runCLI(t, "healthcheck", "--admin", "https://"+d.Admin); code == 0 {
		t.Fatalf("healthcheck passed without trusting the admin listener's CA: %q", stderr)
	}
	// The daemon's own settings: admin.listener and its protocol come from them.
	if code, out, stderr := runCLI(t, "healthcheck", "--set", "admin.listener="+d.Admin, "--set", "admin.listener.security.protocol=SSL",
		"--set", "admin.ssl.keystore.location="+keystore, "--ca-file", p.caFile); code != 0 || !strings.HasPrefix(out, "ready") {
		t.Fatalf("healthcheck with the daemon's config: exit %d %q %q", code, out, stderr)
	}
}

// admin.ssl.client.auth=required: the TLS handshake refuses a client without a certificate from
// the admin truststore's CA, before any path is served; healthcheck passes with --cert-file.
func TestAdminListenerClientCertificateRequired(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	operator, operatorPEM := p.issue(pkix.Name{CommonName: "operator"}, false)
	d := startAdminTLSDaemon(t, p.clientTLS(operator),
		"admin.ssl.keystore.location="+p.serverKeystore("admin"),
		"admin.ssl.truststore.location="+p.caFile,
		"admin.ssl.client.auth=required",
	)
	for _, path := range []string{"/metrics", "/console/", "/healthz"} {
		if code, body, err := adminGetWith(d.Admin, path, p.clientTLS()); err == nil {
			t.Fatalf("GET %s without a client certificate was answered %d\n%.300s", path, code, body)
		}
		code, body, err := adminGetWith(d.Admin, path, p.clientTLS(operator))
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s with a certificate from the CA: %d %v\n%.300s", path, code, err, body)
		}
	}
	foreign := newPKI(t)
	stranger, _ := foreign.issue(pkix.Name{CommonName: "stranger"}, false)
	if code, _, err := adminGetWith(d.Admin, "/metrics", p.clientTLS(stranger)); err == nil {
		t.Fatalf("a certificate of another CA was answered %d", code)
	}

	if code, _, stderr := runCLI(t, "healthcheck", "--admin", "https://"+d.Admin, "--ca-file", p.caFile); code == 0 {
		t.Fatalf("healthcheck without a client certificate passed: %q", stderr)
	}
	certFile := filepath.Join(p.dir, "operator.pem")
	if err := os.WriteFile(certFile, operatorPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runCLI(t, "healthcheck", "--admin", "https://"+d.Admin, "--ca-file", p.caFile, "--cert-file", certFile); code != 0 || !strings.HasPrefix(out, "ready") {
		t.Fatalf("healthcheck with a client certificate: exit %d %q %q", code, out, stderr)
	}
}

// admin.ssl.client.auth=requested: a certificate is verified when one is given (another CA's
// is refused), and clients without one are served.
func TestAdminListenerClientCertificateRequested(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	d := startAdminTLSDaemon(t, p.clientTLS(),
		"admin.ssl.keystore.location="+p.serverKeystore("admin"),
		"admin.ssl.truststore.location="+p.caFile,
		"admin.ssl.client.auth=requested",
	)
	if code, _, err := adminGetWith(d.Admin, "/metrics", p.clientTLS()); err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics without a client certificate: %d %v", code, err)
	}
	operator, _ := p.issue(pkix.Name{CommonName: "operator"}, false)
	if code, _, err := adminGetWith(d.Admin, "/metrics", p.clientTLS(operator)); err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics with a certificate from the CA: %d %v", code, err)
	}
	stranger, _ := newPKI(t).issue(pkix.Name{CommonName: "stranger"}, false)
	if code, _, err := adminGetWith(d.Admin, "/metrics", p.clientTLS(stranger)); err == nil {
		t.Fatalf("a certificate of another CA was answered %d", code)
	}
}

// The admin keystore is re-read when it changes, as the Kafka SSL listeners' is: a renewed
// certificate reaches new connections without a restart, a broken write is logged and ignored.
func TestAdminListenerCertificateReloadedOnChange(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	keystore := p.serverKeystore("admin")
	d := startAdminTLSDaemon(t, p.clientTLS(), "admin.ssl.keystore.location="+keystore)
	first := peerSerial(t, d.Admin, p.clientTLS())

	if err := os.WriteFile(keystore, []byte("-----BEGIN PRIVATE KEY-----\nhalf written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := peerSerial(t, d.Admin, p.clientTLS()); got != first {
		t.Fatalf("after a broken write the serial is %s, want the previous %s", got, first)
	}
	d.waitLogged("TLS files changed but cannot be used; the listener keeps its previous certificates",
		func(l map[string]any) bool { return l["listener"] == "admin" })

	_, renewed := p.issue(pkix.Name{CommonName: "admin"}, true)
	tmp := filepath.Join(filepath.Dir(keystore), "renewed.pem")
	if err := os.WriteFile(tmp, renewed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, keystore); err != nil {
		t.Fatal(err)
	}
	if got := peerSerial(t, d.Admin, p.clientTLS()); got == first {
		t.Fatalf("the renewed certificate is not served: serial still %s", got)
	}
	if code, _, err := adminGetWith(d.Admin, "/metrics", p.clientTLS()); err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics after the renewal: %d %v", code, err)
	}
}

// config check refuses a broken admin TLS setup with one line naming the key, and so does
// serve; a working one passes and hides the inline key.
func TestConfigCheckAdminTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	keystore := p.serverKeystore("admin")
	_, pemBytes := p.issue(pkix.Name{CommonName: "inline"}, true)
	keyPEM, certPEM, _ := strings.Cut(string(pemBytes), "-----END PRIVATE KEY-----\n")
	keyPEM += "-----END PRIVATE KEY-----\n"
	code, out, stderr := runCLI(t, "config", "check", "--set", "admin.listener.security.protocol=SSL",
		"--set", "admin.ssl.keystore.certificate.chain="+certPEM, "--set", "admin.ssl.keystore.key="+keyPEM)
	if code != 0 || !strings.Contains(out, "admin.ssl.keystore.key=[hidden]\t# flag") || strings.Contains(out, "PRIVATE KEY") {
		t.Fatalf("config check with an inline admin key: exit %d, stderr %q, output:\n%s", code, stderr, out)
	}
	ssl := "admin.listener.security.protocol=SSL"
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"unknown protocol", []string{"admin.listener.security.protocol=HTTPS"}, "admin.listener.security.protocol"},
		{"SSL without a keystore", []string{ssl}, "admin.ssl.keystore.location"},
		{"missing keystore file", []string{ssl, "admin.ssl.keystore.location=" + filepath.Join(p.dir, "absent.pem")}, "admin.ssl.keystore.location"},
		{"keystore without a key", []string{ssl, "admin.ssl.keystore.location=" + p.caFile}, "admin.ssl.keystore.location"},
		{"missing truststore file", []string{ssl, "admin.ssl.keystore.location=" + keystore, "admin.ssl.truststore.location=" + keystore + "-absent"}, "admin.ssl.truststore.location"},
		{"file and inline keystore", []string{ssl, "admin.ssl.keystore.location=" + keystore, "admin.ssl.keystore.key=" + keyPEM}, "admin.ssl.keystore.location"},
		{"unknown client auth", []string{ssl, "admin.ssl.keystore.location=" + keystore, "admin.ssl.client.auth=always"}, "admin.ssl.client.auth"},
		{"certificates on a plain listener", []string{"admin.ssl.keystore.location=" + keystore}, "admin.ssl.keystore.location"},
		{"client auth on a plain listener", []string{"admin.ssl.client.auth=required"}, "admin.ssl.client.auth"},
	} {
		args := []string{"config", "check"}
		for _, s := range tc.sets {
			args = append(args, "--set", s)
		}
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line naming %s", tc.name, code, stderr, tc.want)
		}
		code, _, stderr = runCLI(t, append([]string{"serve", "--set", "log.dirs=" + t.TempDir(), "--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "admin.listener=127.0.0.1:0"}, args[2:]...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve, %s: exit %d, stderr %q; want 2 naming %s", tc.name, code, stderr, tc.want)
		}
	}
	// The Kafka listeners' TLS files name their own keys the same way: a missing truststore is
	// the truststore's key, not the keystore's.
	code, _, stderr = runCLI(t, "serve", "--set", "log.dirs="+t.TempDir(), "--set", "admin.listener=127.0.0.1:0",
		"--set", "listeners=SSL://127.0.0.1:0", "--set", "ssl.keystore.location="+keystore, "--set", "ssl.truststore.location="+keystore+"-absent")
	if code != 2 || !strings.Contains(stderr, "ssl.truststore.location") {
		t.Errorf("serve with a missing ssl.truststore.location: exit %d, stderr %q; want 2 naming ssl.truststore.location", code, stderr)
	}
}
