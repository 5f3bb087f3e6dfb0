package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheckCommand is the container health check. The image is distroless (no shell, curl
// or wget), so the binary itself asks the admin listener's /readyz and exits non-zero unless it
// answers 200: a node that is up but not serving (shards loading or failed) is unhealthy.
func newHealthcheckCommand() *cobra.Command {
	var admin string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if a running coordinatord's /readyz answers 200, 1 otherwise",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url := "http://" + loopbackFor(admin) + "/readyz"
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return configError(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("not ready: %s answered %s: %s", url, resp.Status, body)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ready: %s\n", body)
			return nil
		},
	}
	cmd.Flags().StringVar(&admin, "admin", "127.0.0.1:9644", "admin.listener of the coordinatord to check (a wildcard host means this host)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
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
