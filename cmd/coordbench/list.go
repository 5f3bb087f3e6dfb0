package main

import (
	"fmt"
	"strings"

	"github.com/coordinatord/coordinatord/cmd/coordbench/scenario"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the scenarios, the API keys each needs and its default client counts",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			w := cmd.OutOrStdout()
			for _, s := range scenario.All() {
				var needs []string
				for _, k := range s.Needs() {
					needs = append(needs, fmt.Sprintf("%s(%d)", kmsg.NameForKey(k), k))
				}
				fmt.Fprintf(w, "%-18s clients %v  needs %s\n    %s\n", s.Name(), s.DefaultClients(),
					strings.Join(needs, " "), s.Description())
			}
		},
	}
}
