package config

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Security protocols of listener.security.protocol.map, as Kafka names them.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASL mechanisms coordinatord serves.
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

var listenerName = regexp.MustCompile(`^[A-Z0-9_]+$`)

// ListenerSecurity is one listener's security protocol and the ssl.* and sasl.* keys in force
// for it (its listener.name.<name>.* overrides, else the global keys).
type ListenerSecurity struct {
	Protocol string
	SSL      SSLConfig // meaningful for SSL and SASL_SSL
	// SASLMechanisms is sasl.enabled.mechanisms; meaningful for SASL_PLAINTEXT and SASL_SSL.
	SASLMechanisms []string
}

// TLS says whether the listener's connections start with a TLS handshake.
func (s ListenerSecurity) TLS() bool {
	return s.Protocol == ProtocolSSL || s.Protocol == ProtocolSASLSSL
}

// SASL says whether the listener's connections must authenticate with SASL.
func (s ListenerSecurity) SASL() bool {
	return s.Protocol == ProtocolSASLPlaintext || s.Protocol == ProtocolSASLSSL
}

// SSLConfig is Kafka's ssl.* keys for PEM material (the only keystore and truststore type
// coordinatord reads).
type SSLConfig struct {
	KeystoreLocation         string
	KeystoreCertificateChain string
	KeystoreKey              string
	TruststoreLocation       string
	TruststoreCertificates   string
	ClientAuth               string // none, requested, required
	PrincipalMappingRules    string
}

// hasKeystore says whether a key and certificate are given, as a file or inline.
func (s SSLConfig) hasKeystore() bool {
	return s.KeystoreLocation != "" || s.KeystoreCertificateChain != "" || s.KeystoreKey != ""
}

// pemConflict names the first of the PEM keys under prefix ("", "admin.", "upstream.") that
// contradicts another, with the reason; "" when none does. The key and certificate are a file
// or inline PEM, never both; inline, the two go together; the CAs are a file or inline PEM.
func pemConflict(prefix, keystoreLocation, chain, key, truststoreLocation, truststoreCerts string) (string, string) {
	inline := chain != "" || key != ""
	switch {
	case keystoreLocation != "" && inline:
		return prefix + "ssl.keystore.location", "set either " + prefix + "ssl.keystore.location or " + prefix + "ssl.keystore.certificate.chain with " + prefix + "ssl.keystore.key, not both"
	case inline && (chain == "" || key == ""):
		return prefix + "ssl.keystore.key", prefix + "ssl.keystore.certificate.chain and " + prefix + "ssl.keystore.key go together"
	case truststoreLocation != "" && truststoreCerts != "":
		return prefix + "ssl.truststore.location", "set either " + prefix + "ssl.truststore.location or " + prefix + "ssl.truststore.certificates, not both"
	}
	return "", ""
}

// SASLConfig is the process-wide SASL settings.
type SASLConfig struct {
	// PlainUsersFile holds the PLAIN users (sasl.plain.users.file).
	PlainUsersFile string
	// MaxReauth is connections.max.reauth.ms; 0: sessions do not expire.
	MaxReauth time.Duration
	// FailedAuthDelay is connection.failed.authentication.delay.ms.
	FailedAuthDelay time.Duration
	// MaxReceive is sasl.server.max.receive.size.
	MaxReceive int32
}

// listenerKeys are the keys a listener may override as listener.name.<name>.<key>.
var listenerKeys = map[string]bool{}

func init() {
	for _, k := range securityKeys {
		if strings.HasPrefix(k.name, "ssl.") || k.name == "sasl.enabled.mechanisms" {
			listenerKeys[k.name] = true
		}
	}
	keys = append(keys, securityKeys...)
}

const listenerPrefix = "listener.name."

// isListenerOverride: listener.name.<name>.<key> for a key a listener may override.
func isListenerOverride(key string) bool {
	rest, ok := strings.CutPrefix(key, listenerPrefix)
	if !ok {
		return false
	}
	name, sub, ok := strings.Cut(rest, ".")
	return ok && name != "" && listenerKeys[sub]
}

func (c *Config) listenerOverrideEntries() []Entry {
	var out []Entry
	for k, v := range c.values {
		if isListenerOverride(k) {
			sub := k[strings.Index(k[len(listenerPrefix):], ".")+len(listenerPrefix)+1:]
			doc := "Listener override of " + sub + "."
			if kk, ok := lookup(sub); ok {
				doc = "Listener override: " + kk.doc
			}
			out = append(out, Entry{Key: k, Value: v, Source: c.sources[k], Doc: doc})
		}
	}
	return out
}

func oneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
}

func checkMechanisms(v string) ([]string, error) {
	ms, err := parseList(v)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if oneOf(m, saslMechanisms...) != nil {
			return nil, fmt.Errorf("mechanism %s is not supported (supported: %s)", m, strings.Join(saslMechanisms, ", "))
		}
	}
	if len(ms) == 0 {
		return nil, errors.New("must name at least one mechanism")
	}
	return ms, nil
}

func parseProtocolMap(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		name, proto, ok := strings.Cut(e, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || !listenerName.MatchString(name) {
			return nil, fmt.Errorf("%q is not LISTENER_NAME:PROTOCOL", e)
		}
		if err := oneOf(proto, ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL); err != nil {
			return nil, fmt.Errorf("%s: protocol %s: %v", name, proto, err)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener name %s appears twice", name)
		}
		m[name] = proto
	}
	return m, nil
}

var securityKeys = []key{
	{"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Comma-separated LISTENER_NAME:PROTOCOL pairs giving each listener of listeners its security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
		func(c *Config, v string) error { _, err := parseProtocolMap(v); return err }},
	{"ssl.keystore.type", "PEM", "Format of the keystore; only PEM is read (docs/security.md).",
		func(c *Config, v string) error { return oneOf(v, "PEM") }},
	{"ssl.keystore.location", "", "PEM file holding the listener's private key (unencrypted PKCS#8, PKCS#1 or EC) and its certificate chain; re-read when it changes. Alternative to ssl.keystore.certificate.chain with ssl.keystore.key.",
		func(c *Config, v string) error { return nil }},
	{"ssl.keystore.certificate.chain", "", "The listener's certificate chain as inline PEM (instead of ssl.keystore.location).",
		func(c *Config, v string) error { return nil }},
	{"ssl.keystore.key", "", "The listener's private key as inline unencrypted PEM (instead of ssl.keystore.location). Never shown by DescribeConfigs.",
		func(c *Config, v string) error { return nil }},
	{"ssl.key.password", "", "Password of an encrypted private key: not supported, must stay empty (use an unencrypted key file readable only by coordinatord).",
		func(c *Config, v string) error {
			if v != "" {
				return errors.New("encrypted private keys are not supported; leave empty")
			}
			return nil
		}},
	{"ssl.truststore.type", "PEM", "Format of the truststore; only PEM is read.",
		func(c *Config, v string) error { return oneOf(v, "PEM") }},
	{"ssl.truststore.location", "", "PEM file of the CA certificates that client certificates must chain to (ssl.client.auth); re-read when it changes. Empty (and no ssl.truststore.certificates): the system's roots.",
		func(c *Config, v string) error { return nil }},
	{"ssl.truststore.certificates", "", "The CA certificates as inline PEM (instead of ssl.truststore.location).",
		func(c *Config, v string) error { return nil }},
	{"ssl.client.auth", "none", "Client certificates on SSL and SASL_SSL listeners: none, requested (verified when given) or required. On an SSL listener the principal is then the certificate's subject mapped by ssl.principal.mapping.rules. SASL_SSL listeners ignore the global value and take only listener.name.<name>.ssl.client.auth (KIP-684).",
		func(c *Config, v string) error { return oneOf(v, "none", "requested", "required") }},
	{"ssl.principal.mapping.rules", "DEFAULT", "Rules that turn a client certificate's subject (RFC 2253, e.g. CN=alice,OU=eng) into a principal name: comma-separated DEFAULT (the subject as is) or RULE:pattern/replacement/[LU] (pattern matches the whole subject, $n its groups, L or U the case). The first that matches wins; none matching closes the connection.",
		func(c *Config, v string) error { return nil }},
	{"sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms served on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not supported).",
		func(c *Config, v string) error { _, err := checkMechanisms(v); return err }},
	{"sasl.plain.users.file", "", "coordinatord only. File of PLAIN users, one user=password a line ('#' starts a comment), re-read when it changes; required when a SASL listener enables PLAIN. Keep it readable only by coordinatord.",
		func(c *Config, v string) error { c.SASL.PlainUsersFile = strings.TrimSpace(v); return nil }},
	{"connections.max.reauth.ms", "0", "Longest SASL session (KIP-368): clients are told it in SaslAuthenticate v1+ and must re-authenticate before it ends; a connection that sends any other request after it is closed. 0: sessions do not expire.",
		func(c *Config, v string) (err error) { c.SASL.MaxReauth, err = parseMillis(v, 0); return }},
	{"sasl.server.max.receive.size", "524288", "Largest request frame a SASL listener reads from a connection that has not authenticated yet (or is re-authenticating); a larger size prefix closes the connection.",
		func(c *Config, v string) (err error) { c.SASL.MaxReceive, err = parseInt32(v, 1, 1<<31-1); return }},
	{"connection.failed.authentication.delay.ms", "100", "How long the answer to a failed SASL authentication is held back before the connection is closed, which slows down password guessing.",
		func(c *Config, v string) (err error) { c.SASL.FailedAuthDelay, err = parseMillis(v, 0); return }},
}

// listenerValue is key's value for a listener: its listener.name.<name>.<key> override, else
// the global key.
func (c *Config) listenerValue(name, key string) string {
	if v, ok := c.values[listenerPrefix+strings.ToLower(name)+"."+key]; ok {
		return v
	}
	return c.values[key]
}

// validateSecurity resolves each listener's protocol and keys and checks them.
func (c *Config) validateSecurity() error {
	protocols, _ := parseProtocolMap(c.values["listener.security.protocol.map"])
	known := map[string]bool{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		known[strings.ToLower(l.Name)] = true
		proto, ok := protocols[l.Name]
		if !ok {
			return &KeyError{Key: "listener.security.protocol.map", Value: c.values["listener.security.protocol.map"],
				Reason: "listener " + l.Name + " has no security protocol; add " + l.Name + ":<PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL>"}
		}
		sec := ListenerSecurity{Protocol: proto}
		keyErr := func(key, reason string) error {
			name := key
			if _, ok := c.values[listenerPrefix+strings.ToLower(l.Name)+"."+key]; ok {
				name = listenerPrefix + strings.ToLower(l.Name) + "." + key
			}
			return &KeyError{Key: name, Value: c.values[name], Reason: "listener " + l.Name + ": " + reason}
		}
		if sec.TLS() {
			get := func(k string) string { return strings.TrimSpace(c.listenerValue(l.Name, k)) }
			for _, k := range []string{"ssl.keystore.type", "ssl.truststore.type"} {
				if get(k) != "PEM" {
					return keyErr(k, "only PEM is supported")
				}
			}
			if get("ssl.key.password") != "" {
				return keyErr("ssl.key.password", "encrypted private keys are not supported")
			}
			sec.SSL = SSLConfig{
				KeystoreLocation:         get("ssl.keystore.location"),
				KeystoreCertificateChain: c.listenerValue(l.Name, "ssl.keystore.certificate.chain"),
				KeystoreKey:              c.listenerValue(l.Name, "ssl.keystore.key"),
				TruststoreLocation:       get("ssl.truststore.location"),
				TruststoreCertificates:   c.listenerValue(l.Name, "ssl.truststore.certificates"),
				ClientAuth:               get("ssl.client.auth"),
				PrincipalMappingRules:    get("ssl.principal.mapping.rules"),
			}
			if _, own := c.values[listenerPrefix+strings.ToLower(l.Name)+".ssl.client.auth"]; proto == ProtocolSASLSSL && !own {
				// KIP-684: SASL_SSL clients authenticate with SASL; the global ssl.client.auth
				// applies there only when set for the listener itself.
				sec.SSL.ClientAuth = "none"
			}
			if !sec.SSL.hasKeystore() {
				return keyErr("ssl.keystore.location", proto+" needs ssl.keystore.location, or ssl.keystore.certificate.chain with ssl.keystore.key")
			}
			if key, reason := pemConflict("", sec.SSL.KeystoreLocation, sec.SSL.KeystoreCertificateChain, sec.SSL.KeystoreKey, sec.SSL.TruststoreLocation, sec.SSL.TruststoreCertificates); key != "" {
				return keyErr(key, reason)
			}
			if err := oneOf(sec.SSL.ClientAuth, "none", "requested", "required"); err != nil {
				return keyErr("ssl.client.auth", err.Error())
			}
		}
		if sec.SASL() {
			ms, err := checkMechanisms(c.listenerValue(l.Name, "sasl.enabled.mechanisms"))
			if err != nil {
				return keyErr("sasl.enabled.mechanisms", err.Error())
			}
			sec.SASLMechanisms = ms
			for _, m := range ms {
				if m == "PLAIN" && c.SASL.PlainUsersFile == "" && !c.Gateway.Enabled() {
					// (In gateway mode the upstream checks PLAIN passwords: the login is relayed.)
					return &KeyError{Key: "sasl.plain.users.file", Reason: "listener " + l.Name + " enables PLAIN, which needs a users file"}
				}
			}
		}
		l.Security = sec
	}
	var unknown []string
	for k := range c.values {
		if isListenerOverride(k) {
			name, _, _ := strings.Cut(k[len(listenerPrefix):], ".")
			if !known[name] {
				unknown = append(unknown, k)
			}
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &KeyError{Key: unknown[0], Reason: "no listener of that name in listeners"}
	}
	return nil
}
