package security

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLSFiles is one listener's ssl.* configuration, PEM only (Kafka's ssl.keystore.type=PEM):
// either KeystoreLocation, a file holding the private key and the certificate chain, or the
// inline KeystoreCertificateChain and KeystoreKey; the CA certificates that verify clients come
// from TruststoreLocation or the inline TruststoreCertificates (neither: the system's roots).
type TLSFiles struct {
	KeystoreLocation         string
	KeystoreCertificateChain string
	KeystoreKey              string
	TruststoreLocation       string
	TruststoreCertificates   string
	// ClientAuth is ssl.client.auth: none, requested or required.
	ClientAuth string
}

// TLSReloader serves a tls.Config built from files, re-read when one of them changes (its
// modification time or size), so certificates are renewed without a restart. The check runs at
// each handshake: a stat per file, against the milliseconds a handshake costs. When a changed
// file cannot be used (half written, mismatched key), handshakes go on with the previous
// material and OnError hears about it once per change.
type TLSReloader struct {
	files   TLSFiles
	onError func(error)

	mu       sync.Mutex
	current  *tls.Config
	stamp    string // the files' stat stamps the current config was built from
	failedAt string // the stamp whose reload failed, so each failure is reported once
}

// NewTLSReloader loads the files; an error here is a configuration error.
func NewTLSReloader(files TLSFiles, onError func(error)) (*TLSReloader, error) {
	if onError == nil {
		onError = func(error) {}
	}
	r := &TLSReloader{files: files, onError: onError}
	stamp, err := r.statStamp()
	if err != nil {
		return nil, err
	}
	cfg, err := r.build()
	if err != nil {
		return nil, err
	}
	r.current, r.stamp = cfg, stamp
	return r, nil
}

// Config is the listener's tls.Config; each handshake picks up the files' latest contents.
func (r *TLSReloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.latest(), nil
		},
	}
}

func (r *TLSReloader) latest() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp, err := r.statStamp()
	if err != nil || stamp == r.stamp {
		if err != nil && stamp != r.failedAt {
			r.failedAt = stamp
			r.onError(err)
		}
		return r.current
	}
	cfg, err := r.build()
	if err != nil {
		if stamp != r.failedAt {
			r.failedAt = stamp
			r.onError(err)
		}
		return r.current
	}
	r.current, r.stamp, r.failedAt = cfg, stamp, ""
	return cfg
}

func (r *TLSReloader) statStamp() (string, error) {
	var b bytes.Buffer
	for _, p := range []string{r.files.KeystoreLocation, r.files.TruststoreLocation} {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s:missing;", p)
			return b.String(), err
		}
		fmt.Fprintf(&b, "%s:%d:%d;", p, st.ModTime().UnixNano(), st.Size())
	}
	return b.String(), nil
}

func (r *TLSReloader) build() (*tls.Config, error) {
	f := r.files
	var certPEM, keyPEM []byte
	switch {
	case f.KeystoreLocation != "":
		b, err := os.ReadFile(f.KeystoreLocation)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		certPEM, keyPEM = b, b
	case f.KeystoreCertificateChain != "" && f.KeystoreKey != "":
		certPEM, keyPEM = []byte(f.KeystoreCertificateChain), []byte(f.KeystoreKey)
	default:
		return nil, errors.New("an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	var caPEM []byte
	switch {
	case f.TruststoreLocation != "":
		if caPEM, err = os.ReadFile(f.TruststoreLocation); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
	case f.TruststoreCertificates != "":
		caPEM = []byte(f.TruststoreCertificates)
	}
	if caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("truststore: no PEM certificate found")
		}
		cfg.ClientCAs = pool
	}
	switch f.ClientAuth {
	case "", "none":
		cfg.ClientAuth = tls.NoClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("ssl.client.auth %q: must be none, requested or required", f.ClientAuth)
	}
	return cfg, nil
}

// HandshakeTimeout bounds a TLS handshake on an accepted connection.
const HandshakeTimeout = 10 * time.Second
