package main

import "testing"

// `config check` prints every key but the secrets: inline private keys, passwords and JAAS
// lines, which hold one.
func TestConfigCheckHidesSecrets(t *testing.T) {
	for key, secret := range map[string]bool{
		"ssl.keystore.key":                        true,
		"listener.name.ssl.ssl.keystore.key":      true,
		"upstream.ssl.keystore.key":               true,
		"upstream.sasl.password":                  true,
		"upstream.sasl.jaas.config":               true,
		"upstream.sasl.username":                  false,
		"upstream.ssl.truststore.location":        false,
		"upstream.ssl.keystore.certificate.chain": false,
	} {
		if got := secretKey(key); got != secret {
			t.Errorf("secretKey(%s) = %v, want %v", key, got, secret)
		}
	}
}
