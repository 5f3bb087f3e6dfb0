package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	"github.com/spf13/cobra"
)

// logDirs are the two logs under log.dirs: the group shards and the metadata shard.
var logDirs = []string{"groups", "meta"}

func newLogCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "log", Short: "Inspect the shard logs offline"}
	var path string
	var sets []string

	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check every shard log as a start would, without changing anything (the daemon must be stopped)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, sets)
			if err != nil {
				return configError(err)
			}
			w := cmd.OutOrStdout()
			bad := false
			for _, sub := range logDirs {
				if sub == "groups" && cfg.LogBackend.Kafka() {
					// Their log is the upstream topic, which the broker checks; the metadata
					// shard is still here.
					fmt.Fprintf(w, "groups: in the upstream topic %s (log.backend=kafka), not under log.dirs: not checked\n", cfg.LogBackend.Topic)
					continue
				}
				dir := filepath.Join(cfg.LogDirs, sub)
				rep, err := segment.Verify(dir)
				if err != nil && len(rep.ShardReports) == 0 {
					if _, statErr := os.Stat(dir); errors.Is(statErr, fs.ErrNotExist) {
						return fmt.Errorf("verify %s: no such log directory (is log.dirs right?)", dir)
					}
					return err // it names the directory
				}
				for _, s := range rep.ShardReports {
					status := "ok"
					if s.Err != nil {
						status, bad = "CORRUPT: "+s.Err.Error(), true
					}
					fmt.Fprintf(w, "%s shard %d: %d segments, %d records (%d tombstones), offsets %d..%d: %s\n",
						sub, s.Shard, len(s.Segments), s.Records, s.Tombstones, s.FirstOffset, s.LastOffset, status)
					if s.TornTail != nil {
						fmt.Fprintf(w, "  torn tail in %s at byte %d (%d bytes) would be truncated on start: %s\n", s.TornTail.File, s.TornTail.Offset, s.TornTail.Bytes, s.TornTail.Reason)
					}
					for _, r := range s.Recovery {
						fmt.Fprintf(w, "  on start: %s\n", r)
					}
				}
			}
			if bad {
				return errors.New("some shard logs would not load; see the lines marked CORRUPT")
			}
			return nil
		},
	}
	addConfigFlags(verify, &path, &sets)

	var shardID int32
	var metaLog bool
	dump := &cobra.Command{
		Use:   "dump",
		Short: "List every batch and record of one shard's log (keys and values in hex)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, sets)
			if err != nil {
				return configError(err)
			}
			sub := "groups"
			if metaLog {
				sub, shardID = "meta", 0
			} else if cfg.LogBackend.Kafka() {
				return fmt.Errorf("log.backend=kafka: the group shards are partitions of the upstream topic %s, not under log.dirs (kafka-console-consumer.sh reads them); --meta dumps the metadata shard", cfg.LogBackend.Topic)
			}
			return segment.Dump(filepath.Join(cfg.LogDirs, sub), shardID, cmd.OutOrStdout())
		},
	}
	addConfigFlags(dump, &path, &sets)
	dump.Flags().Int32Var(&shardID, "shard", 0, "group shard to dump")
	dump.Flags().BoolVar(&metaLog, "meta", false, "dump the metadata shard's log instead")

	cmd.AddCommand(verify, dump)
	return cmd
}
