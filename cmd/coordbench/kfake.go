package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// startKfake runs a one-broker kfake cluster on a free loopback port. One broker, so every
// group's coordinator is the address clients bootstrap from, as with the other targets.
func startKfake() (string, func(), error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.ClusterID("coordbench-kfake"))
	if err != nil {
		return "", func() {}, fmt.Errorf("start kfake: %w", err)
	}
	return c.ListenAddrs()[0], c.Close, nil
}

// kfakeVersion is the kfake module version built into this binary.
func kfakeVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go/pkg/kfake" {
				return d.Version
			}
		}
	}
	return ""
}

func newKfakeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kfake",
		Short: "Serve a one-broker kfake cluster on loopback until SIGTERM/SIGINT (prints KFAKE_ADDR and KFAKE_PID)",
		Long: "Runs franz-go's kfake in a process of its own, so a benchmark can read its CPU and memory from\n" +
			"/proc like any other server's: coordbench run --target kfake=$KFAKE_ADDR,pid=$KFAKE_PID",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, stop, err := startKfake()
			if err != nil {
				return err
			}
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "KFAKE_ADDR=%s\nKFAKE_PID=%d\n", addr, os.Getpid())
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
			<-sig
			return nil
		},
	}
}
