package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/spf13/cobra"
)

// newHealthcheckCommand is the container health check. The image is distroless (no shell, curl
// or wget), so the binary itself asks the admin listener's /readyz and exits non-zero unless it
// answers 200: a node that is up but not serving (shards loading or failed) is unhealthy.
func newHealthcheckCommand() *cobra.Command {
	var admin, caFile, certFile, keyFile, serverName, path string
	var sets []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if a running coordinatord's /readyz answers 200, 1 otherwise",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scheme, hostPort := "http", admin
			if s, rest, ok := strings.Cut(admin, "://"); ok {
				scheme, hostPort = strings.ToLower(s), rest
			} else if path != "" || len(sets) > 0 {
				// The daemon's own config names the address and protocol, so the probe cannot
				// drift from what serve listens on.
				cfg, err := config.Load(path, sets)
				if err != nil {
					return configError(err)
				}
				if !cmd.Flags().Changed("admin") {
					hostPort = cfg.AdminListener
				}
				if cfg.AdminSecurity.TLS() {
					scheme = "https"
				}
			}
			if scheme != "http" && scheme != "https" {
				return configError(fmt.Errorf("--admin %q: the scheme must be http or https", admin))
			}
			hostPort = loopbackFor(hostPort)
			client := &http.Client{}
			if scheme == "https" {
				tc, err := healthcheckTLS(hostPort, caFile, certFile, keyFile, serverName)
				if err != nil {
					return configError(err)
				}
				client.Transport = &http.Transport{TLSClientConfig: tc}
			} else if caFile != "" || certFile != "" || keyFile != "" {
				return configError(errors.New("--ca-file, --cert-file and --key-file need an https admin listener: --admin https://host:port, or --config with admin.listener.security.protocol=SSL"))
			}
			url := scheme + "://" + hostPort + "/readyz"
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return configError(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				// "not ready:" and a line per shard that is not: one line here.
				lines := strings.Split(strings.TrimSpace(string(body)), "\n")
				if len(lines) > 1 && lines[0] == "not ready:" {
					lines = lines[1:]
				}
				return fmt.Errorf("not ready: %s answered %s: %s", url, resp.Status, strings.Join(lines, "; "))
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ready")
			return nil
		},
	}
	cmd.Flags().StringVar(&admin, "admin", "127.0.0.1:9644", "admin.listener of the coordinatord to check, host:port or https://host:port (a wildcard host means this host)")
	addConfigFlags(cmd, &path, &sets)
	cmd.Flags().StringVar(&caFile, "ca-file", "", "HTTPS: PEM file of the CA certificates the admin listener's certificate must chain to (default: the system's roots)")
	cmd.Flags().StringVar(&certFile, "cert-file", "", "HTTPS: PEM file of the client certificate, for admin.ssl.client.auth=required (the key may be in the same file)")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "HTTPS: PEM file of the client certificate's private key (default: --cert-file)")
	cmd.Flags().StringVar(&serverName, "server-name", "", "HTTPS: the name the admin listener's certificate must hold (default: the host dialed)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

func healthcheckTLS(hostPort, caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(hostPort)
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate found", caFile)
		}
	}
	if keyFile != "" && certFile == "" {
		return nil, errors.New("--key-file needs --cert-file")
	}
	if certFile != "" {
		if keyFile == "" {
			keyFile = certFile
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// loopbackFor turns a listen address with a wildcard host (0.0.0.0:9644, :9644, [::]:9644),
// which is what a container's admin.listener usually is, into one a client can dial.
func loopbackFor(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
