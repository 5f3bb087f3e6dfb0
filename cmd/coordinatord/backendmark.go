package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
)

// backendMarkFile names, under log.dirs, where the group shards of this directory are kept:
// "local", or "kafka <log.kafka.topic>".
const backendMarkFile = "log.backend"

// groupLogBackend is where the group shard logs of a log.dirs live, as a start compares it.
type groupLogBackend struct {
	kind  string // "local" or "kafka"
	topic string // log.kafka.topic; empty for local
}

func (b groupLogBackend) String() string {
	if b.kind == "kafka" {
		return "log.backend=kafka with log.kafka.topic=" + b.topic
	}
	return "log.backend=local"
}

func wantedBackend(cfg *config.Config) groupLogBackend {
	if cfg.LogBackend.Kafka() {
		return groupLogBackend{kind: "kafka", topic: cfg.LogBackend.Topic}
	}
	return groupLogBackend{kind: "local"}
}

// checkLogBackend refuses a start whose log.backend (or log.kafka.topic) is not the one the
// group shards of log.dirs were kept with. The metadata shard (topics, ACLs, SCRAM
// credentials) and cluster.id stay under log.dirs whatever the backend, so a changed backend
// would start with them and with no group at all (or, back on the local log, with the groups
// as they were before the switch): every consumer would find no committed offset, or an old
// one, and re-read or skip its topics. As with a changed cluster.id, the start is refused in
// one line saying what the data is kept with and how to go on.
//
// The marker says which backend the last start used; a directory of a version before the
// marker is local if it has the local group logs (log.dirs/groups/meta.properties), and
// otherwise taken as fresh.
func checkLogBackend(fs segment.FS, cfg *config.Config) error {
	want := wantedBackend(cfg)
	localDir := filepath.Join(cfg.LogDirs, "groups")
	localData := false
	if f, err := fs.OpenFile(filepath.Join(localDir, "meta.properties"), os.O_RDONLY, 0); err == nil {
		f.Close()
		localData = true
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", localDir, err)
	}
	path := filepath.Join(cfg.LogDirs, backendMarkFile)
	kept := groupLogBackend{kind: "local"}
	b, err := segment.ReadSmallFile(fs, path, 4096)
	switch {
	case err == nil:
		if kept, err = parseBackendMark(string(b)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", path, err)
	}
	switch {
	case kept == want:
		return nil
	case kept.kind == "local" && !localData:
		// No local group logs: none were ever written, or they were moved away as the
		// refusal below says.
		return nil
	case kept.kind == "local":
		return fmt.Errorf("%s is configured, but log.dirs %s holds the group shards of log.backend=local (%s), "+
			"which the Kafka backend does not read: it would start without any group or committed offset. "+
			"Set log.backend=local to keep them, or move %s away to start on the Kafka backend without them",
			want, cfg.LogDirs, localDir, localDir)
	}
	return fmt.Errorf("%s is configured, but the group shards of log.dirs %s are kept with %s (%s): "+
		"this start would not read them and would begin without them (or with the local ones as they were before). "+
		"Set %s to keep them, or delete %s to start without them",
		want, cfg.LogDirs, kept, path, kept, path)
}

// recordLogBackend keeps the backend the group shards were opened with beside the data, for
// the next start's checkLogBackend. Called once the shard logs opened, so that a start that
// never reached its backend leaves no claim.
func recordLogBackend(fs segment.FS, cfg *config.Config) error {
	want := wantedBackend(cfg)
	body := "local\n"
	if want.kind == "kafka" {
		body = "kafka " + want.topic + "\n"
	}
	path := filepath.Join(cfg.LogDirs, backendMarkFile)
	if b, err := segment.ReadSmallFile(fs, path, 4096); err == nil && string(b) == body {
		return nil
	}
	if err := segment.WriteFileDurable(fs, path, []byte(body)); err != nil {
		return fmt.Errorf("persist log.backend: %w", err)
	}
	return nil
}

func parseBackendMark(s string) (groupLogBackend, error) {
	kind, topic, _ := strings.Cut(strings.TrimSpace(s), " ")
	switch {
	case kind == "local" && topic == "":
		return groupLogBackend{kind: "local"}, nil
	case kind == "kafka" && topic != "":
		return groupLogBackend{kind: "kafka", topic: topic}, nil
	}
	return groupLogBackend{}, fmt.Errorf("not a log backend: %q (local, or kafka and the topic)", strings.TrimSpace(s))
}
