package config

import (
	"strings"
)

// AdminSecurity is how the admin HTTP listener (admin.listener) is protected: plain HTTP, or
// HTTPS with the PEM material of the admin.ssl.* keys and, with admin.ssl.client.auth, client
// certificates checked against the admin truststore.
type AdminSecurity struct {
	Protocol string // PLAINTEXT (HTTP) or SSL (HTTPS)
	// SSL is the admin.ssl.* keys, the same fields as a Kafka listener's ssl.* keys (no
	// principal mapping: the admin paths have no ACLs, a verified certificate is the whole check).
	SSL SSLConfig
}

// TLS says whether the admin listener serves HTTPS.
func (a AdminSecurity) TLS() bool { return a.Protocol == ProtocolSSL }

// The admin listener has its own key set, apart from the Kafka listeners' ssl.*: it is usually
// reached by other people (Prometheus, the kubelet, an operator's browser) with other
// certificates than Kafka clients, and keeping it plain must not depend on how they are set.
// The names follow upstream.ssl.*: a prefix in front of Kafka's own ssl.* names.
var adminSecurityKeys = []key{
	{"admin.listener.security.protocol", "PLAINTEXT", "Protocol of admin.listener: PLAINTEXT (HTTP) or SSL (HTTPS with the admin.ssl.* keys; every path, /metrics, /healthz, /readyz, /console/ and /debug/pprof/, is then served over TLS only).",
		func(c *Config, v string) error {
			v = strings.ToUpper(strings.TrimSpace(v))
			if err := oneOf(v, ProtocolPlaintext, ProtocolSSL); err != nil {
				return err
			}
			c.AdminSecurity.Protocol = v
			return nil
		}},
	{"admin.ssl.keystore.location", "", "admin.listener with SSL: PEM file holding the admin listener's unencrypted private key and its certificate chain; re-read when it changes. Alternative to admin.ssl.keystore.certificate.chain with admin.ssl.keystore.key.",
		func(c *Config, v string) error { c.AdminSecurity.SSL.KeystoreLocation = v; return nil }},
	{"admin.ssl.keystore.certificate.chain", "", "admin.listener with SSL: the certificate chain as inline PEM (instead of admin.ssl.keystore.location).",
		func(c *Config, v string) error { c.AdminSecurity.SSL.KeystoreCertificateChain = v; return nil }},
	{"admin.ssl.keystore.key", "", "admin.listener with SSL: the private key as inline unencrypted PEM (instead of admin.ssl.keystore.location). Never shown by config check or DescribeConfigs.",
		func(c *Config, v string) error { c.AdminSecurity.SSL.KeystoreKey = v; return nil }},
	{"admin.ssl.truststore.location", "", "admin.listener with SSL: PEM file of the CA certificates that client certificates must chain to (admin.ssl.client.auth); re-read when it changes. Empty (and no admin.ssl.truststore.certificates): the system's roots.",
		func(c *Config, v string) error { c.AdminSecurity.SSL.TruststoreLocation = v; return nil }},
	{"admin.ssl.truststore.certificates", "", "admin.listener with SSL: the CA certificates as inline PEM (instead of admin.ssl.truststore.location).",
		func(c *Config, v string) error { c.AdminSecurity.SSL.TruststoreCertificates = v; return nil }},
	{"admin.ssl.client.auth", "none", "admin.listener with SSL: client certificates: none, requested (verified when given, clients without one are served too) or required (a request without a certificate from the admin truststore's CAs is refused in the TLS handshake).",
		func(c *Config, v string) error {
			v = strings.ToLower(strings.TrimSpace(v))
			if err := oneOf(v, "none", "requested", "required"); err != nil {
				return err
			}
			c.AdminSecurity.SSL.ClientAuth = v
			return nil
		}},
}

func init() { keys = append(keys, adminSecurityKeys...) }

// validateAdminSecurity checks the admin.ssl.* keys against the protocol and each other.
func (c *Config) validateAdminSecurity() error {
	a := c.AdminSecurity
	s := a.SSL
	if !a.TLS() {
		// Certificates configured on a plain listener are almost surely a forgotten protocol:
		// serving HTTP while the operator believes the console is behind TLS is the worst outcome.
		for _, k := range adminSecurityKeys[1:] {
			if v := c.values[k.name]; v != "" && !strings.EqualFold(v, k.def) {
				return &KeyError{Key: k.name, Reason: "set, but admin.listener.security.protocol is PLAINTEXT: set it to SSL to serve HTTPS, or remove the key"}
			}
		}
		return nil
	}
	if !s.hasKeystore() {
		return &KeyError{Key: "admin.ssl.keystore.location", Reason: "admin.listener.security.protocol SSL needs admin.ssl.keystore.location, or admin.ssl.keystore.certificate.chain with admin.ssl.keystore.key"}
	}
	if key, reason := pemConflict("admin.", s.KeystoreLocation, s.KeystoreCertificateChain, s.KeystoreKey, s.TruststoreLocation, s.TruststoreCertificates); key != "" {
		return &KeyError{Key: key, Reason: reason}
	}
	return nil
}
