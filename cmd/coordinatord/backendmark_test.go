package main

import (
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
)

func backendCfg(kind, topic string) *config.Config {
	cfg := &config.Config{LogDirs: "/data"}
	cfg.LogBackend.Kind, cfg.LogBackend.Topic = kind, topic
	return cfg
}

// A start on another log.backend (or another state topic) than the group shards of log.dirs
// were kept with is refused, naming what they were kept with and the way on: it would start
// with the metadata shard and cluster.id of log.dirs but without a single group or offset.
func TestLogBackendOtherThanTheDataRefusesToStart(t *testing.T) {
	localData := func(fs *segment.MemFS) {
		fs.MkdirAll("/data/groups", 0o755)
		segment.WriteFileDurable(fs, "/data/groups/meta.properties", []byte("format.version=1\nshard.count=50\n"))
	}
	kafkaData := func(topic string) func(fs *segment.MemFS) {
		return func(fs *segment.MemFS) {
			if err := recordLogBackend(fs, backendCfg("kafka", topic)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name      string
		data      func(fs *segment.MemFS)
		cfg       *config.Config
		refusal   []string // substrings of the refusal; none: the start goes on
		recording bool     // run recordLogBackend as a start of the local backend did
	}{
		{name: "fresh, local", data: func(*segment.MemFS) {}, cfg: backendCfg("local", "")},
		{name: "fresh, kafka", data: func(*segment.MemFS) {}, cfg: backendCfg("kafka", "state")},
		{name: "local data, local", data: localData, cfg: backendCfg("local", "")},
		{name: "local data of a version without the marker, kafka", data: localData, cfg: backendCfg("kafka", "state"),
			refusal: []string{"log.backend=kafka with log.kafka.topic=state is configured", "holds the group shards of log.backend=local", "Set log.backend=local", "move /data/groups away"}},
		{name: "local data with the marker, kafka", data: localData, recording: true, cfg: backendCfg("kafka", "state"),
			refusal: []string{"holds the group shards of log.backend=local"}},
		{name: "kafka data, kafka", data: kafkaData("state"), cfg: backendCfg("kafka", "state")},
		{name: "kafka data, local", data: kafkaData("state"), cfg: backendCfg("local", ""),
			refusal: []string{"log.backend=local is configured", "kept with log.backend=kafka with log.kafka.topic=state", "delete /data/log.backend"}},
		{name: "kafka data beside older local data, local", data: func(fs *segment.MemFS) { localData(fs); kafkaData("state")(fs) },
			cfg: backendCfg("local", ""), refusal: []string{"kept with log.backend=kafka with log.kafka.topic=state"}},
		{name: "local marker, local data moved away, kafka", data: func(fs *segment.MemFS) {
			localData(fs)
			recordLogBackend(fs, backendCfg("local", ""))
			fs.Remove("/data/groups/meta.properties")
		}, cfg: backendCfg("kafka", "state")},
		{name: "kafka data, another topic", data: kafkaData("state"), cfg: backendCfg("kafka", "other"),
			refusal: []string{"log.kafka.topic=other is configured", "kept with log.backend=kafka with log.kafka.topic=state"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := segment.NewMemFS()
			fs.MkdirAll("/data", 0o755)
			c.data(fs)
			if c.recording {
				if err := recordLogBackend(fs, backendCfg("local", "")); err != nil {
					t.Fatal(err)
				}
			}
			err := checkLogBackend(fs, c.cfg)
			if len(c.refusal) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				// What the start records is what the next start with the same settings accepts.
				if err := recordLogBackend(fs, c.cfg); err != nil {
					t.Fatal(err)
				}
				if err := checkLogBackend(fs, c.cfg); err != nil {
					t.Fatalf("refused after its own start: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("not refused")
			}
			for _, want := range c.refusal {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
		})
	}
}

// The marker survives a crash right after the start that wrote it.
func TestLogBackendMarkSurvivesCrash(t *testing.T) {
	fs := segment.NewMemFS()
	fs.MkdirAll("/data", 0o755)
	if err := recordLogBackend(fs, backendCfg("kafka", "state")); err != nil {
		t.Fatal(err)
	}
	fs.Crash(nil)
	if err := checkLogBackend(fs, backendCfg("local", "")); err == nil {
		t.Fatalf("the kafka marker was lost in a crash:\n%s", fs)
	}
}

func TestLogBackendMarkMalformedIsAnError(t *testing.T) {
	fs := segment.NewMemFS()
	fs.MkdirAll("/data", 0o755)
	segment.WriteFileDurable(fs, "/data/log.backend", []byte("kafka\n"))
	if err := checkLogBackend(fs, backendCfg("kafka", "state")); err == nil || !strings.Contains(err.Error(), "not a log backend") {
		t.Fatalf("got %v", err)
	}
}
