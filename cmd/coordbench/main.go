// Command coordbench is a load tool for Kafka group coordination: simulated clients, each on
// its own loopback connection, run scenarios (metadata, find-coordinator, offset-commit,
// classic-join, streams-heartbeat, ...) against any Kafka-protocol address, so coordinatord,
// a real Kafka broker and franz-go's kfake can be measured side by side in one run.
//
//	coordbench run    --scenario NAME --target name=addr[,pid=PID] ... : measure, print, write JSON
//	coordbench report --results FILE... --out docs/benchmarks.md --charts docs/img : markdown + PNGs
//	coordbench suite  : start coordinatord, Kafka and kfake, run every scenario, write the report
//	coordbench restart: commit offsets of many groups, restart, time until served again, RSS
//	coordbench kfake  : serve a one-broker kfake cluster in this process until interrupted
//	coordbench wakeup : what a wake-up across CPUs costs here (loopback echo, pinned processes)
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	_ "github.com/coordinatord/coordinatord/cmd/coordbench/scenario" // registers the scenarios
)

func main() {
	root := &cobra.Command{
		Use:           "coordbench",
		Short:         "Load tool for Kafka group coordinators: coordinatord, Kafka and kfake side by side",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCommand(), newReportCommand(), newSuiteCommand(), newGatewayCommand(), newStartupCommand(), newRestartCommand(), newKfakeCommand(), newListCommand(), newWakeupCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "coordbench:", err)
		os.Exit(1)
	}
}

// commandLine is how this process was invoked, for the results file.
func commandLine() string {
	args := make([]string, 0, len(os.Args))
	args = append(args, "coordbench")
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
