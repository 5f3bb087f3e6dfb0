package config

import (
	"fmt"
	"regexp"
	"strings"
)

// UpstreamSecurity is how coordinatord connects to the upstream cluster in gateway mode: its own
// client (metadata, topic creation) and every connection it opens for a client's forwarded
// requests. The keys are Kafka's client keys with the prefix upstream.
type UpstreamSecurity struct {
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// TLS material, PEM: the CA certificates the upstream's certificates must chain to (neither:
	// the system's roots) and, for upstreams that require client certificates, the gateway's own
	// key and certificate.
	TruststoreLocation, TruststoreCertificates              string
	KeystoreLocation, KeystoreCertificateChain, KeystoreKey string
	// VerifyHostname is ssl.endpoint.identification.algorithm=https (Kafka's default): the
	// upstream's certificate must name the host dialed.
	VerifyHostname bool
	// Mechanism, Username and Password are the gateway's own SASL login (SASL_* protocols).
	Mechanism, Username, Password string
}

// TLS says whether upstream connections start with a TLS handshake.
func (u UpstreamSecurity) TLS() bool {
	return u.Protocol == ProtocolSSL || u.Protocol == ProtocolSASLSSL
}

// SASL says whether the upstream's listener expects SASL authentication.
func (u UpstreamSecurity) SASL() bool {
	return u.Protocol == ProtocolSASLPlaintext || u.Protocol == ProtocolSASLSSL
}

var upstreamSecurityKeys = []key{
	{"upstream.security.protocol", "PLAINTEXT", "Gateway mode: security protocol of the upstream listener coordinatord connects to (its own client and every forwarded connection): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
		func(c *Config, v string) error {
			v = strings.ToUpper(strings.TrimSpace(v))
			if err := oneOf(v, ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL); err != nil {
				return err
			}
			c.Gateway.Security.Protocol = v
			return nil
		}},
	{"upstream.ssl.truststore.location", "", "Gateway mode, SSL and SASL_SSL upstreams: PEM file of the CA certificates the upstream brokers' certificates must chain to; empty (and no upstream.ssl.truststore.certificates) means the system's roots.",
		func(c *Config, v string) error { c.Gateway.Security.TruststoreLocation = v; return nil }},
	{"upstream.ssl.truststore.certificates", "", "Gateway mode: the same CA certificates inline (PEM), instead of upstream.ssl.truststore.location.",
		func(c *Config, v string) error { c.Gateway.Security.TruststoreCertificates = v; return nil }},
	{"upstream.ssl.keystore.location", "", "Gateway mode, for upstreams that require client certificates: PEM file holding the gateway's unencrypted private key and its certificate chain.",
		func(c *Config, v string) error { c.Gateway.Security.KeystoreLocation = v; return nil }},
	{"upstream.ssl.keystore.certificate.chain", "", "Gateway mode: the gateway's client certificate chain inline (PEM), with upstream.ssl.keystore.key, instead of upstream.ssl.keystore.location.",
		func(c *Config, v string) error { c.Gateway.Security.KeystoreCertificateChain = v; return nil }},
	{"upstream.ssl.keystore.key", "", "Gateway mode: the gateway's unencrypted private key inline (PEM), with upstream.ssl.keystore.certificate.chain.",
		func(c *Config, v string) error { c.Gateway.Security.KeystoreKey = v; return nil }},
	{"upstream.ssl.endpoint.identification.algorithm", "https", "Gateway mode: https checks that an upstream broker's certificate names the host coordinatord dialed (from the upstream's metadata); empty turns the check off, as in Kafka.",
		func(c *Config, v string) error {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "https":
				c.Gateway.Security.VerifyHostname = true
			case "":
				c.Gateway.Security.VerifyHostname = false
			default:
				return fmt.Errorf("must be https or empty")
			}
			return nil
		}},
	{"upstream.sasl.mechanism", "SCRAM-SHA-512", "Gateway mode, SASL_PLAINTEXT and SASL_SSL upstreams: the mechanism of coordinatord's own login to the upstream: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's client default, GSSAPI, is not supported).",
		func(c *Config, v string) error {
			v = strings.ToUpper(strings.TrimSpace(v))
			if err := oneOf(v, saslMechanisms...); err != nil {
				return err
			}
			c.Gateway.Security.Mechanism = v
			return nil
		}},
	{"upstream.sasl.jaas.config", "", "Gateway mode: coordinatord's own upstream login in Kafka's JAAS form, e.g. org.apache.kafka.common.security.scram.ScramLoginModule required username=\"coordinatord\" password=\"...\"; (only username and password are read). Never shown by config check or DescribeConfigs.",
		func(c *Config, v string) error {
			if strings.TrimSpace(v) == "" {
				return nil
			}
			u, p, err := parseJAAS(v)
			if err != nil {
				return err
			}
			c.Gateway.Security.Username, c.Gateway.Security.Password = u, p
			return nil
		}},
	{"upstream.sasl.username", "", "coordinatord only. Gateway mode: user of coordinatord's own upstream login, a simpler form of upstream.sasl.jaas.config (set one or the other).",
		func(c *Config, v string) error { c.upstreamUser = v; return nil }},
	{"upstream.sasl.password", "", "coordinatord only. Gateway mode: password of coordinatord's own upstream login, with upstream.sasl.username.",
		func(c *Config, v string) error { c.upstreamPassword = v; return nil }},
}

func init() { keys = append(keys, upstreamSecurityKeys...) }

var jaasOption = regexp.MustCompile(`(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))`)

// parseJAAS reads username and password from a JAAS login module line:
// `<LoginModule class> required username="..." password="...";`.
func parseJAAS(v string) (user, password string, err error) {
	v = strings.TrimSpace(v)
	fields := strings.Fields(v)
	if len(fields) < 2 || strings.ToLower(fields[1]) != "required" {
		return "", "", fmt.Errorf("must be '<LoginModule> required username=\"...\" password=\"...\";'")
	}
	if !strings.HasSuffix(v, ";") {
		return "", "", fmt.Errorf("must end with ';'")
	}
	for _, m := range jaasOption.FindAllStringSubmatch(v, -1) {
		val := m[3]
		if m[3] == "" {
			val = regexp.MustCompile(`\\(.)`).ReplaceAllString(m[2], "$1")
		}
		switch m[1] {
		case "username":
			user = val
		case "password":
			password = val
		}
	}
	if user == "" || password == "" {
		return "", "", fmt.Errorf("needs username and password options")
	}
	return user, password, nil
}

// validateUpstreamSecurity checks the upstream.* security keys against each other and against
// the listeners (gateway mode only).
func (c *Config) validateUpstreamSecurity() error {
	s := &c.Gateway.Security
	if c.upstreamUser != "" || c.upstreamPassword != "" {
		if c.values["upstream.sasl.jaas.config"] != "" {
			return &KeyError{Key: "upstream.sasl.username", Reason: "set either upstream.sasl.username and upstream.sasl.password or upstream.sasl.jaas.config, not both"}
		}
		if c.upstreamUser == "" || c.upstreamPassword == "" {
			return &KeyError{Key: "upstream.sasl.username", Reason: "upstream.sasl.username and upstream.sasl.password go together"}
		}
		s.Username, s.Password = c.upstreamUser, c.upstreamPassword
	}
	if !c.Gateway.Enabled() {
		return nil
	}
	if s.SASL() && s.Username == "" {
		return &KeyError{Key: "upstream.sasl.jaas.config", Reason: "upstream.security.protocol " + s.Protocol + " needs coordinatord's own login: upstream.sasl.jaas.config, or upstream.sasl.username and upstream.sasl.password"}
	}
	if key, reason := pemConflict("upstream.", s.KeystoreLocation, s.KeystoreCertificateChain, s.KeystoreKey, s.TruststoreLocation, s.TruststoreCertificates); key != "" {
		return &KeyError{Key: key, Reason: reason}
	}
	for _, l := range c.Listeners {
		if first := c.Listeners[0]; l.Security.Protocol != first.Security.Protocol {
			// The per-upstream-broker ports are given to every client, whichever listener it
			// bootstrapped on, and serve one protocol: a client must be able to use them.
			return &KeyError{Key: "listeners", Value: c.values["listeners"],
				Reason: fmt.Sprintf("in gateway mode every listener uses one security protocol, which the per-upstream-broker ports serve too: %s is %s, %s is %s",
					first.Name, first.Security.Protocol, l.Name, l.Security.Protocol)}
		}
		if l.Security.SASL() && !s.SASL() {
			// Relaying is the only way SASL clients are authenticated in gateway mode: the
			// upstream verifies their credentials, and a PLAINTEXT or SSL upstream has none.
			return &KeyError{Key: "listeners", Value: c.values["listeners"],
				Reason: "listener " + l.Name + " is " + l.Security.Protocol + ": in gateway mode SASL is relayed to the upstream, which needs upstream.security.protocol SASL_PLAINTEXT or SASL_SSL"}
		}
	}
	return nil
}
