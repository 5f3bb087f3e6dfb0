// Command coordinatord serves Kafka group coordination over the Kafka wire protocol.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitCode distinguishes a bad configuration (2, as the operator must fix something) from a
// runtime failure (1).
type exitCode int

type exitError struct {
	code exitCode
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func configError(err error) error { return &exitError{code: 2, err: err} }

func main() {
	root := newRootCommand()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "coordinatord:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(int(ee.code))
		}
		var ke *config.KeyError
		if errors.As(err, &ke) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "coordinatord",
		Short:         "Kafka group coordinator: classic, consumer and Streams groups over the Kafka protocol",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Flag errors (unknown flag, missing value) are configuration errors too.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return configError(err) })
	root.AddCommand(newServeCommand(), newConfigCommand(), newLogCommand(), newVersionCommand(), newHealthcheckCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "coordinatord", version)
		},
	}
}

func newConfigCommand() *cobra.Command {
	cfgCmd := &cobra.Command{Use: "config", Short: "Inspect configuration"}
	var path string
	var sets []string
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate a config file and print every effective key with its source",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, sets)
			if err != nil {
				return configError(err)
			}
			// The files serve reads at start (TLS material, principal rules, PLAIN users) are
			// checked too, so that a config that passes here also starts.
			if _, _, err := setupSecurity(cfg, zap.NewNop()); err != nil {
				return configError(err)
			}
			if _, err := adminTLS(cfg, zap.NewNop()); err != nil {
				return configError(err)
			}
			if cfg.Gateway.Enabled() {
				if _, err := upstreamSecurity(cfg.Gateway.Security); err != nil {
					return configError(err)
				}
			}
			// Warnings go to stderr: scripts read the keys from stdout.
			for _, w := range cfg.Warnings() {
				fmt.Fprintln(cmd.ErrOrStderr(), "WARNING:", w)
			}
			w := cmd.OutOrStdout()
			for _, e := range cfg.Entries() {
				v := e.Value
				if secretKey(e.Key) && v != "" {
					v = "[hidden]" // an inline private key must not end up in a CI log
				}
				fmt.Fprintf(w, "%s=%s\t# %s\n", e.Key, v, e.Source)
			}
			return nil
		},
	}
	addConfigFlags(check, &path, &sets)
	cfgCmd.AddCommand(check)
	return cfgCmd
}

// addConfigFlags gives a command the --config file and the repeatable --set key=value overrides
// that config.Load takes.
func addConfigFlags(c *cobra.Command, path *string, sets *[]string) {
	c.Flags().StringVar(path, "config", "", "Java-properties config file")
	c.Flags().StringArrayVar(sets, "set", nil, "override a key: --set key=value (repeatable)")
}
