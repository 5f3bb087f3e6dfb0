package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

func newHTTPPlugin(t *testing.T, h http.Handler, extra topologyplugin.Config) *HTTP {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := topologyplugin.Config{"url": srv.URL + "/base", "retry.backoff.ms": "1"}
	for k, v := range extra {
		cfg[k] = v
	}
	p, err := NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.(*HTTP)
}

// Spec §8 / §9.57: 2xx success; 408/425/429/5xx transient; other 4xx permanent with the body
// as message; GET 404 nothing; DELETE 404 success.
func TestSpec9_57HTTPStatusMapping(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   string // "ok", "permanent", "transient"
	}{
		{200, "", "ok"}, {201, "", "ok"}, {204, "", "ok"},
		{400, "bad description", "permanent"},
		{403, "", "permanent"},
		{404, "", "permanent"}, // PUT to a missing resource: misconfigured URL, rejected
		{409, "conflict", "permanent"},
		{413, "too large", "permanent"},
		{422, "rejected", "permanent"},
		{408, "", "transient"}, {425, "", "transient"}, {429, "slow down", "transient"},
		{500, "", "transient"}, {502, "", "transient"}, {503, "backend offline", "transient"},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			var calls atomic.Int32
			p := newHTTPPlugin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body + "\n"))
			}), topologyplugin.Config{"retries": "0"})
			err := p.Set(context.Background(), "g", 1, desc("x"))
			switch tc.want {
			case "ok":
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				return
			case "permanent":
				if !topologyplugin.IsPermanent(err) {
					t.Fatalf("want permanent, got %v", err)
				}
			case "transient":
				if !topologyplugin.IsTransient(err) {
					t.Fatalf("want transient, got %v", err)
				}
			}
			want := tc.body
			if want == "" {
				want = fmt.Sprintf("HTTP %d %s", tc.status, http.StatusText(tc.status))
			}
			if !strings.Contains(err.Error(), want) || (tc.body != "" && err.Error() != tc.body) {
				t.Fatalf("message %q, want the body %q", err.Error(), want)
			}
		})
	}
	t.Run("GET 404 and DELETE 404", func(t *testing.T) {
		p := newHTTPPlugin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }), nil)
		if d, err := p.Get(context.Background(), "g", 1); d != nil || err != nil {
			t.Fatalf("GET 404: want (nil, nil), got %v, %v", d, err)
		}
		if err := p.Delete(context.Background(), "g"); err != nil {
			t.Fatalf("DELETE 404: want success, got %v", err)
		}
	})
	t.Run("GET null", func(t *testing.T) {
		p := newHTTPPlugin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("null\n")) }), nil)
		if d, err := p.Get(context.Background(), "g", 1); d != nil || err != nil {
			t.Fatalf("GET null: want (nil, nil), got %v, %v", d, err)
		}
	})
	t.Run("GET garbage", func(t *testing.T) {
		p := newHTTPPlugin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }), nil)
		if _, err := p.Get(context.Background(), "g", 1); err == nil {
			t.Fatal("an undecodable GET body must be an error")
		}
	})
}

// Requests follow the documented shape: method, escaped path, JSON body, bearer token.
func TestHTTPRequestShape(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	ref := &refServer{}
	var seen []string
	ref.hook = func(w http.ResponseWriter, r *http.Request) bool {
		seen = append(seen, r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("Content-Type")+" "+r.Header.Get("Authorization"))
		return false
	}
	p := newHTTPPlugin(t, ref, topologyplugin.Config{"bearer.token.file": tokenFile})
	mustSet(t, p, "eu/orders", 3, desc("x"))
	if !topologyplugin.Equal(mustGet(t, p, "eu/orders", 3), desc("x")) {
		t.Fatal("round trip failed")
	}
	if err := p.Delete(context.Background(), "eu/orders"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"PUT /base/groups/eu%2Forders/topology/3 application/json Bearer s3cret",
		"GET /base/groups/eu%2Forders/topology/3  Bearer s3cret",
		"DELETE /base/groups/eu%2Forders/topology  Bearer s3cret",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

// Transient failures are retried within one call; permanent ones are not.
func TestHTTPRetries(t *testing.T) {
	t.Run("transient then success", func(t *testing.T) {
		var calls atomic.Int32
		p := newHTTPPlugin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}), topologyplugin.Config{"retries": "2"})
		if err := p.Set(context.Background(), "g", 1, desc("x")); err != nil {
			t.Fatalf("third attempt should succeed: %v", err)
		}
		if calls.Load() != 3 {
			t.Fatalf("%d requests, want 3", calls.Load())
		}
	})
	t.Run("retries exhausted", func(t *testing.T) {
		var calls atomic.Int32
		p := newHTTPPlugin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}), topologyplugin.Config{"retries": "2"})
		err := p.Delete(context.Background(), "g")
		if !topologyplugin.IsTransient(err) || calls.Load() != 3 {
			t.Fatalf("err %v after %d requests", err, calls.Load())
		}
	})
	t.Run("permanent not retried", func(t *testing.T) {
		var calls atomic.Int32
		p := newHTTPPlugin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		}), topologyplugin.Config{"retries": "5"})
		if err := p.Set(context.Background(), "g", 1, desc("x")); !topologyplugin.IsPermanent(err) || calls.Load() != 1 {
			t.Fatalf("err %v after %d requests", err, calls.Load())
		}
	})
	t.Run("network error is transient", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		p, err := NewHTTP(topologyplugin.Config{"url": url, "retries": "1", "retry.backoff.ms": "1"})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Set(context.Background(), "g", 1, desc("x"))
		if !topologyplugin.IsTransient(err) || strings.Contains(err.Error(), "127.0.0.1:") && strings.Contains(err.Error(), "http://") {
			t.Fatalf("want a transient error without the service URL, got %v", err)
		}
	})
}

// A slow service is cut off by request.timeout.ms (transient), and retries stop at the call's
// deadline.
func TestHTTPTimeouts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int32
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	p := newHTTPPlugin(t, slow, topologyplugin.Config{"request.timeout.ms": "50", "retries": "0"})
	start := time.Now()
	err := p.Set(context.Background(), "g", 1, desc("x"))
	if !topologyplugin.IsTransient(err) {
		t.Fatalf("want transient, got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("request.timeout.ms not applied")
	}

	calls.Store(0)
	p2 := newHTTPPlugin(t, slow, topologyplugin.Config{"request.timeout.ms": "60000", "retries": "10"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p2.Get(ctx, "g", 1); err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("want an error at the call deadline, got %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("no retry may start after the call deadline; %d requests", calls.Load())
	}
}

func TestHTTPConfigErrors(t *testing.T) {
	for _, cfg := range []topologyplugin.Config{
		{},
		{"url": "ftp://x"},
		{"url": "http://x", "retries": "-1"},
		{"url": "http://x", "bearer.token.file": "/nonexistent/token"},
		{"url": "http://x", "tls.cert.file": "/a"},
		{"url": "http://x", "uri": "http://y"},
	} {
		var ce *topologyplugin.ConfigError
		if _, err := NewHTTP(cfg); !errors.As(err, &ce) {
			t.Errorf("%v: want a ConfigError, got %v", cfg, err)
		}
	}
}
