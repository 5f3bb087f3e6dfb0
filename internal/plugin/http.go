package plugin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

// HTTP is the built-in `http` plugin: it forwards every call to a service, so descriptions live
// outside coordinatord (shared by all coordinator nodes, in whatever store the service uses).
//
//	PUT    {url}/groups/{group}/topology/{epoch}  body: the description as JSON   → 2xx stored
//	GET    {url}/groups/{group}/topology/{epoch}                                   → 200 + JSON, 404 none
//	DELETE {url}/groups/{group}/topology                                           → 2xx or 404 deleted
//
// {group} is path-escaped (a '/' in a group id becomes %2F). Status mapping: 2xx success;
// 408, 425, 429 and 5xx, connection errors and timeouts are transient; every other 4xx is
// permanent (for a PUT the coordinator then stops asking for this epoch). The error message
// is the response body (trimmed, at most 1 KiB) or, when the body is empty, the status line;
// for a PUT it reaches the pushing client. All three requests are idempotent, so transient
// failures are retried inside one call (retries, doubling from retry.backoff.ms) while the
// call's deadline allows.
type HTTP struct {
	base       string
	client     *http.Client
	transport  *http.Transport
	reqTimeout time.Duration
	retries    int
	backoff    time.Duration
	maxBody    int64
	token      string
}

// Keys of the http plugin (under group.streams.topology.description.plugin.http.).
const (
	HTTPURL              = "url"
	HTTPRequestTimeoutMs = "request.timeout.ms"
	HTTPRetries          = "retries"
	HTTPRetryBackoffMs   = "retry.backoff.ms"
	HTTPMaxResponseBytes = "max.response.bytes"
	HTTPBearerTokenFile  = "bearer.token.file"
	HTTPTLSCAFile        = "tls.ca.file"
	HTTPTLSCertFile      = "tls.cert.file"
	HTTPTLSKeyFile       = "tls.key.file"
)

// NewHTTP is the http plugin's factory.
func NewHTTP(cfg topologyplugin.Config) (topologyplugin.Plugin, error) {
	if err := cfg.Check(HTTPURL, HTTPRequestTimeoutMs, HTTPRetries, HTTPRetryBackoffMs, HTTPMaxResponseBytes,
		HTTPBearerTokenFile, HTTPTLSCAFile, HTTPTLSCertFile, HTTPTLSKeyFile); err != nil {
		return nil, err
	}
	raw := cfg.String(HTTPURL, "")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, &topologyplugin.ConfigError{Key: HTTPURL, Value: raw, Reason: "must be an http:// or https:// base URL without query"}
	}
	h := &HTTP{base: strings.TrimRight(raw, "/")}
	if h.reqTimeout, err = cfg.Millis(HTTPRequestTimeoutMs, 5*time.Second, time.Millisecond); err != nil {
		return nil, err
	}
	n, err := cfg.Int(HTTPRetries, 2, 0, 100)
	if err != nil {
		return nil, err
	}
	h.retries = int(n)
	if h.backoff, err = cfg.Millis(HTTPRetryBackoffMs, 100*time.Millisecond, 0); err != nil {
		return nil, err
	}
	if h.maxBody, err = cfg.Int(HTTPMaxResponseBytes, 16<<20, 1, 1<<40); err != nil {
		return nil, err
	}
	if p := cfg.String(HTTPBearerTokenFile, ""); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, &topologyplugin.ConfigError{Key: HTTPBearerTokenFile, Value: p, Reason: err.Error()}
		}
		h.token = strings.TrimSpace(string(b))
	}
	tlsCfg, err := httpTLS(cfg)
	if err != nil {
		return nil, err
	}
	h.transport = http.DefaultTransport.(*http.Transport).Clone()
	h.transport.TLSClientConfig = tlsCfg
	h.transport.MaxIdleConnsPerHost = 64
	h.client = &http.Client{Transport: h.transport}
	return h, nil
}

func httpTLS(cfg topologyplugin.Config) (*tls.Config, error) {
	ca, cert, key := cfg.String(HTTPTLSCAFile, ""), cfg.String(HTTPTLSCertFile, ""), cfg.String(HTTPTLSKeyFile, "")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, &topologyplugin.ConfigError{Key: HTTPTLSCAFile, Value: ca, Reason: err.Error()}
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, &topologyplugin.ConfigError{Key: HTTPTLSCAFile, Value: ca, Reason: "no PEM certificate found"}
		}
	}
	if (cert == "") != (key == "") {
		return nil, &topologyplugin.ConfigError{Key: HTTPTLSCertFile, Value: cert, Reason: "tls.cert.file and tls.key.file must be set together"}
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, &topologyplugin.ConfigError{Key: HTTPTLSCertFile, Value: cert, Reason: err.Error()}
		}
		t.Certificates = []tls.Certificate{pair}
	}
	return t, nil
}

func (h *HTTP) topologyURL(group string) string {
	return h.base + "/groups/" + url.PathEscape(group) + "/topology"
}

func (h *HTTP) Set(ctx context.Context, group string, epoch int32, d *topologyplugin.Description) error {
	if d == nil {
		return topologyplugin.Permanent("no topology description")
	}
	body, err := json.Marshal(d)
	if err != nil {
		return topologyplugin.Permanentf("encode topology description: %v", err)
	}
	_, err = h.do(ctx, http.MethodPut, h.topologyURL(group)+"/"+strconv.FormatInt(int64(epoch), 10), body, nil)
	return err
}

func (h *HTTP) Get(ctx context.Context, group string, epoch int32) (*topologyplugin.Description, error) {
	var d *topologyplugin.Description
	found, err := h.do(ctx, http.MethodGet, h.topologyURL(group)+"/"+strconv.FormatInt(int64(epoch), 10), nil, func(b []byte) error {
		if t := bytes.TrimSpace(b); len(t) == 0 || string(t) == "null" {
			return nil // an empty answer means nothing stored
		}
		d = &topologyplugin.Description{}
		if err := json.Unmarshal(b, d); err != nil {
			return fmt.Errorf("http plugin: GET response is not a topology description: %w", err)
		}
		return nil
	})
	if err != nil || !found {
		return nil, err
	}
	return d, nil // nil when the body was empty or null
}

func (h *HTTP) Delete(ctx context.Context, group string) error {
	_, err := h.do(ctx, http.MethodDelete, h.topologyURL(group), nil, nil)
	return err
}

func (h *HTTP) Close() error {
	h.transport.CloseIdleConnections()
	return nil
}

// do sends one request with retries. found is false when a GET or DELETE answered 404.
func (h *HTTP) do(ctx context.Context, method, target string, body []byte, decode func([]byte) error) (found bool, err error) {
	wait := h.backoff
	for attempt := 0; ; attempt++ {
		found, err = h.once(ctx, method, target, body, decode)
		if err == nil || topologyplugin.IsPermanent(err) || attempt >= h.retries || ctx.Err() != nil {
			return found, err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return found, err // no time left for another attempt
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return found, err
		case <-t.C:
		}
		wait *= 2
	}
}

func (h *HTTP) once(ctx context.Context, method, target string, body []byte, decode func([]byte) error) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, h.reqTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return false, topologyplugin.Permanentf("http plugin: build request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return false, topologyplugin.Transientf("http plugin: %s %s: %v", method, redact(target), unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, h.maxBody+1))
	if err != nil {
		return false, topologyplugin.Transientf("http plugin: %s %s: reading response: %v", method, redact(target), err)
	}
	if int64(len(data)) > h.maxBody {
		return false, topologyplugin.Transientf("http plugin: %s %s: response larger than max.response.bytes (%d)", method, redact(target), h.maxBody)
	}
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		if decode != nil {
			if code == http.StatusNoContent {
				return false, nil
			}
			if err := decode(data); err != nil {
				return false, err
			}
		}
		return true, nil
	case code == http.StatusNotFound && method != http.MethodPut:
		return false, nil
	}
	msg := truncate(strings.TrimSpace(string(data)), MaxClientMessageBytes)
	if msg == "" {
		msg = "HTTP " + resp.Status
	}
	if transientStatus(code) {
		return false, topologyplugin.Transient(msg)
	}
	return false, topologyplugin.Permanent(msg)
}

// transientStatus: 408 Request Timeout, 425 Too Early, 429 Too Many Requests, 5xx, and
// anything that is not a 4xx (1xx/3xx left over after redirects) may succeed on a retry.
func transientStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code < 400 || code >= 500
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redact keeps only the path of a URL for messages: a Set error message reaches the client,
// which has no business learning the service's address or credentials.
func redact(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return "(url)"
	}
	return u.EscapedPath()
}
