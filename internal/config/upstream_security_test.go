package config

import (
	"strings"
	"testing"
)

func TestUpstreamSecurityKeys(t *testing.T) {
	gw := []string{"upstream.bootstrap.servers=kafka-1:9093"}
	c, err := Load("", append(gw,
		"upstream.security.protocol=sasl_ssl",
		"upstream.ssl.truststore.location=/etc/ca.pem",
		`upstream.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="coord" password="p\"w d";`,
		"upstream.sasl.mechanism=SCRAM-SHA-256"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Gateway.Security
	if !s.TLS() || !s.SASL() || s.Username != "coord" || s.Password != `p"w d` || s.Mechanism != "SCRAM-SHA-256" ||
		s.TruststoreLocation != "/etc/ca.pem" || !s.VerifyHostname {
		t.Fatalf("upstream security %+v", s)
	}
	c, err = Load("", append(gw, "upstream.security.protocol=SASL_PLAINTEXT", "upstream.sasl.username=u", "upstream.sasl.password=p",
		"upstream.ssl.endpoint.identification.algorithm="))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Gateway.Security; s.TLS() || s.Username != "u" || s.Password != "p" || s.Mechanism != "SCRAM-SHA-512" || s.VerifyHostname {
		t.Fatalf("upstream security %+v", s)
	}
	c, err = Load("", gw)
	if err != nil || c.Gateway.Security.Protocol != ProtocolPlaintext {
		t.Fatalf("default: %+v, %v", c.Gateway.Security, err)
	}
}

func TestUpstreamSecurityKeysAreValidated(t *testing.T) {
	gw := "upstream.bootstrap.servers=kafka-1:9093"
	for _, tc := range []struct {
		set  []string
		key  string
		want string
	}{
		{[]string{gw, "upstream.security.protocol=TLS"}, "upstream.security.protocol", "SASL_SSL"},
		{[]string{gw, "upstream.sasl.mechanism=GSSAPI"}, "upstream.sasl.mechanism", "SCRAM-SHA-512"},
		{[]string{gw, "upstream.security.protocol=SASL_SSL"}, "upstream.sasl.jaas.config", "needs coordinatord's own login"},
		{[]string{gw, "upstream.sasl.jaas.config=ScramLoginModule username=\"a\" password=\"b\";"}, "upstream.sasl.jaas.config", "required"},
		{[]string{gw, "upstream.sasl.jaas.config=M required username=\"a\";"}, "upstream.sasl.jaas.config", "username and password"},
		{[]string{gw, "upstream.sasl.jaas.config=M required username=\"a\" password=\"b\""}, "upstream.sasl.jaas.config", "';'"},
		{[]string{gw, "upstream.sasl.username=a"}, "upstream.sasl.username", "go together"},
		{[]string{gw, "upstream.sasl.username=a", "upstream.sasl.password=b", "upstream.sasl.jaas.config=M required username=\"a\" password=\"b\";"},
			"upstream.sasl.username", "not both"},
		{[]string{gw, "upstream.ssl.truststore.location=/a", "upstream.ssl.truststore.certificates=x"}, "upstream.ssl.truststore.location", "not both"},
		{[]string{gw, "upstream.ssl.keystore.key=x"}, "upstream.ssl.keystore.key", "go together"},
		{[]string{gw, "upstream.ssl.keystore.location=/k", "upstream.ssl.keystore.key=x"}, "upstream.ssl.keystore.location", "not both"},
		{[]string{gw, "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.location=/k.pem"}, "listeners", "one security protocol"},
		{[]string{gw, "upstream.ssl.endpoint.identification.algorithm=none"}, "upstream.ssl.endpoint.identification.algorithm", "https or empty"},
	} {
		_, err := Load("", tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s (%s)", tc.set, err, tc.key, tc.want)
		}
	}
}

// SSL listeners are served in gateway mode (the per-broker ports inherit the protocol).
func TestGatewayAcceptsSSLListeners(t *testing.T) {
	c, err := Load("", []string{"upstream.bootstrap.servers=kafka-1:9093", "listeners=SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map=SSL:SSL,INTERNAL:SSL", "ssl.keystore.location=/k.pem"})
	if err != nil || c.Listeners[0].Security.Protocol != ProtocolSSL {
		t.Fatalf("%+v, %v", c.Listeners, err)
	}
}
