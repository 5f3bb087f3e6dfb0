package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/handlers"
	"github.com/coordinatord/coordinatord/internal/security"
	"github.com/coordinatord/coordinatord/internal/wire"
	"go.uber.org/zap"
)

// setupSecurity loads each listener's TLS material and principal rules and the SASL settings.
// Errors are configuration errors: a file that cannot be read or a rule that does not parse
// stops the start.
func setupSecurity(cfg *config.Config, log *zap.Logger) (map[string]func(*wire.Options), handlers.SASL, error) {
	byName := map[string]func(*wire.Options){}
	sasl := handlers.SASL{Mechanisms: map[string][]string{}, MaxReauth: cfg.SASL.MaxReauth, FailedDelay: cfg.SASL.FailedAuthDelay}
	plain := false
	for _, l := range cfg.Listeners {
		sec := l.Security
		var apply []func(*wire.Options)
		if sec.TLS() {
			name := l.Name
			files := security.TLSFiles{
				KeystoreLocation:         sec.SSL.KeystoreLocation,
				KeystoreCertificateChain: sec.SSL.KeystoreCertificateChain,
				KeystoreKey:              sec.SSL.KeystoreKey,
				TruststoreLocation:       sec.SSL.TruststoreLocation,
				TruststoreCertificates:   sec.SSL.TruststoreCertificates,
				ClientAuth:               sec.SSL.ClientAuth,
			}
			reloader, err := security.NewTLSReloader(files, func(err error) {
				log.Warn("TLS files changed but cannot be used; the listener keeps its previous certificates", zap.String("listener", name), zap.Error(err))
			})
			if err != nil {
				return nil, sasl, &config.KeyError{Key: tlsErrorKey("", files, err), Reason: fmt.Sprintf("listener %s: %v", name, err)}
			}
			mapper, err := security.ParsePrincipalRules(sec.SSL.PrincipalMappingRules)
			if err != nil {
				return nil, sasl, &config.KeyError{Key: "ssl.principal.mapping.rules", Value: sec.SSL.PrincipalMappingRules, Reason: err.Error()}
			}
			tlsConfig := reloader.Config()
			apply = append(apply, func(o *wire.Options) {
				o.TLS = tlsConfig
				o.TLSPrincipal = func(cert *x509.Certificate) (wire.Principal, error) {
					name, err := mapper.MapCertificate(cert)
					if err != nil {
						return wire.Principal{}, err
					}
					return wire.Principal{Type: "User", Name: name}, nil
				}
			})
		}
		if sec.SASL() {
			sasl.Mechanisms[l.Name] = sec.SASLMechanisms
			for _, m := range sec.SASLMechanisms {
				plain = plain || m == "PLAIN"
			}
			apply = append(apply, func(o *wire.Options) { o.SASL, o.SASLMaxReceive = true, cfg.SASL.MaxReceive })
		}
		byName[l.Name] = func(o *wire.Options) {
			for _, f := range apply {
				f(o)
			}
		}
	}
	if plain && !cfg.Gateway.Enabled() { // in gateway mode the upstream checks PLAIN logins (relayed)
		users, err := security.LoadPlainUsers(cfg.SASL.PlainUsersFile)
		if err != nil {
			return nil, sasl, &config.KeyError{Key: "sasl.plain.users.file", Value: cfg.SASL.PlainUsersFile, Reason: err.Error()}
		}
		sasl.Plain = users
	}
	return byName, sasl, nil
}

// secretKey says whether a key's value is a secret that `config check` must not print: inline
// private keys, passwords and JAAS lines (which hold one).
func secretKey(key string) bool {
	k := strings.ToLower(key)
	return strings.HasSuffix(k, "ssl.keystore.key") || strings.Contains(k, "password") || strings.HasSuffix(k, "sasl.jaas.config")
}

// adminTLS loads the admin listener's TLS material (nil: plain HTTP). The reloader is the one
// the Kafka SSL listeners use, so a renewed certificate reaches the admin listener the same way.
func adminTLS(cfg *config.Config, log *zap.Logger) (*tls.Config, error) {
	a := cfg.AdminSecurity
	if !a.TLS() {
		return nil, nil
	}
	files := security.TLSFiles{
		KeystoreLocation:         a.SSL.KeystoreLocation,
		KeystoreCertificateChain: a.SSL.KeystoreCertificateChain,
		KeystoreKey:              a.SSL.KeystoreKey,
		TruststoreLocation:       a.SSL.TruststoreLocation,
		TruststoreCertificates:   a.SSL.TruststoreCertificates,
		ClientAuth:               a.SSL.ClientAuth,
	}
	reloader, err := security.NewTLSReloader(files, func(err error) {
		log.Warn("TLS files changed but cannot be used; the listener keeps its previous certificates", zap.String("listener", "admin"), zap.Error(err))
	})
	if err != nil {
		return nil, &config.KeyError{Key: tlsErrorKey("admin.", files, err), Reason: err.Error()}
	}
	return reloader.Config(), nil
}

// tlsErrorKey names the key (under prefix: "" for the Kafka listeners, "admin." for the admin
// listener) whose file or PEM the TLS files could not be loaded from, so that the one-line
// error points the operator at the truststore when it is the truststore that is wrong.
func tlsErrorKey(prefix string, files security.TLSFiles, err error) string {
	switch {
	case strings.HasPrefix(err.Error(), "ssl.truststore") || strings.HasPrefix(err.Error(), "truststore") ||
		(files.TruststoreLocation != "" && strings.Contains(err.Error(), files.TruststoreLocation)):
		if files.TruststoreLocation == "" {
			return prefix + "ssl.truststore.certificates"
		}
		return prefix + "ssl.truststore.location"
	case files.KeystoreLocation == "":
		return prefix + "ssl.keystore.key"
	}
	return prefix + "ssl.keystore.location"
}
