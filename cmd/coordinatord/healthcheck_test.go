package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func runHealthcheck(t *testing.T, admin string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"healthcheck", "--admin", admin, "--timeout", "5s"})
	err := root.Execute()
	return out.String(), err
}

// The docker-compose health check used `coordinatord version`, which cannot fail (issue 10,
// defect 10). healthcheck follows /readyz: 200 is healthy; 503 (shards loading or failed) and
// nothing listening are not.
func TestHealthcheckFollowsReadyz(t *testing.T) {
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte("shards"))
	}))
	defer srv.Close()
	admin := strings.TrimPrefix(srv.URL, "http://")

	if _, err := runHealthcheck(t, admin); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503 must be unhealthy: %v", err)
	}
	status = http.StatusOK
	if out, err := runHealthcheck(t, admin); err != nil || !strings.HasPrefix(out, "ready") {
		t.Fatalf("200 must be healthy: %q %v", out, err)
	}
	// A wildcard listen address is checked on the loopback interface.
	_, port, _ := net.SplitHostPort(admin)
	if _, err := runHealthcheck(t, "0.0.0.0:"+port); err != nil {
		t.Fatalf("wildcard host: %v", err)
	}
	srv.Close()
	if _, err := runHealthcheck(t, admin); err == nil {
		t.Fatal("nothing listening must be unhealthy")
	}
}

// The compose file's health check must be one that can fail: the healthcheck subcommand.
func TestComposeHealthcheckUsesReadyz(t *testing.T) {
	b, err := os.ReadFile("../../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "test:") {
			if !strings.Contains(line, `"/usr/local/bin/coordinatord", "healthcheck"`) {
				t.Fatalf("compose health check does not run `coordinatord healthcheck`: %s", line)
			}
			return
		}
	}
	t.Fatal("compose file has no health check")
}
