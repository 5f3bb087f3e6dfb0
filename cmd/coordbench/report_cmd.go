package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/coordinatord/coordinatord/cmd/coordbench/report"
	"github.com/coordinatord/coordinatord/cmd/coordbench/result"
	"github.com/coordinatord/coordinatord/cmd/coordbench/scenario"
	"github.com/spf13/cobra"
)

type reportFlags struct {
	results  []string
	out      string
	charts   string
	subject  string
	baseline string
	commands []string
}

func newReportCommand() *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report --results FILE... --out docs/benchmarks.md --charts docs/img",
		Short: "Write the markdown report (a table per scenario) and its PNG charts from results files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeReport(&f)
		},
	}
	cmd.Flags().StringArrayVar(&f.results, "results", nil, "results file from coordbench run (repeatable)")
	cmd.Flags().StringVar(&f.out, "out", "docs/benchmarks.md", "markdown file to write")
	cmd.Flags().StringVar(&f.charts, "charts", "docs/img", "folder for the PNG charts")
	cmd.Flags().StringVar(&f.subject, "ratio-subject", "coordinatord", "ratio column numerator (target name)")
	cmd.Flags().StringVar(&f.baseline, "ratio-baseline", "kafka", "ratio column denominator (target name)")
	cmd.Flags().StringArrayVar(&f.commands, "command", nil, "a command line to show under Reproducing (repeatable)")
	cmd.MarkFlagRequired("results")
	return cmd
}

func writeReport(f *reportFlags) error {
	var files []*result.File
	for _, p := range f.results {
		rf, err := result.Read(p)
		if err != nil {
			return err
		}
		files = append(files, rf)
	}
	set, err := report.Aggregate(files)
	if err != nil {
		return err
	}
	charts, err := report.WriteCharts(set, f.charts)
	if err != nil {
		return err
	}
	link, err := filepath.Rel(filepath.Dir(absPath(f.out)), absPath(f.charts))
	if err != nil {
		link = f.charts
	}
	desc := map[string]string{}
	for _, s := range scenario.All() {
		desc[s.Name()] = s.Description()
	}
	md := report.Markdown(set, report.Options{
		Title: "coordinatord benchmarks", Subject: f.subject, Baseline: f.baseline,
		ChartsLink: filepath.ToSlash(link), Commands: f.commands, Descriptions: desc, Charts: charts,
		Intro: "Load measured with `coordbench` (cmd/coordbench): simulated Kafka clients over loopback against " +
			"coordinatord, the Apache Kafka reference broker (test/kafka) and franz-go's kfake, side by side. " +
			"`make bench` regenerates this page and its charts; the figures below are from the run described here.",
	})
	if err := os.MkdirAll(filepath.Dir(f.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(f.out, []byte(md), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	fmt.Fprintf(os.Stderr, "report written to %s, charts in %s\n", f.out, f.charts)
	return nil
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
