package main

import (
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
)

// Defect 8: a generated cluster.id must survive a crash right after it was written. The file
// is renamed into place; unless the directory is fsynced too, the rename can be lost and the
// next start generates a different id, which clients take for a different cluster.
func TestClusterIDSurvivesCrashAfterFirstStart(t *testing.T) {
	fs := segment.NewMemFS()
	if err := fs.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{LogDirs: "/data"}
	first, err := loadClusterID(fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fs.Crash(nil) // power loss: only what was fsynced (file data, directory entries) remains
	second, err := loadClusterID(fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatalf("cluster id changed across a crash: %q -> %q\nfiles:\n%s", first, second, fs)
	}
}

// A failed fsync of the directory is reported, never a cluster id that may not persist.
func TestClusterIDWriteFailureIsAnError(t *testing.T) {
	for _, op := range []segment.Op{segment.OpSync, segment.OpSyncDir, segment.OpRename} {
		fs := segment.NewMemFS()
		fs.MkdirAll("/data", 0o755)
		fs.SetInject(func(o segment.Op, _ string) error {
			if o == op {
				return errFault
			}
			return nil
		})
		if id, err := loadClusterID(fs, &config.Config{LogDirs: "/data"}); err == nil {
			t.Fatalf("%v failing: got id %q and no error", op, id)
		}
	}
}

var errFault = faultErr("injected fault")

type faultErr string

func (e faultErr) Error() string { return string(e) }

// A configured cluster.id is kept beside the data on first start, so that the next start can
// tell whether it is still the data's cluster.
func TestClusterIDConfiguredIsPersisted(t *testing.T) {
	fs := segment.NewMemFS()
	fs.MkdirAll("/data", 0o755)
	id, err := loadClusterID(fs, &config.Config{LogDirs: "/data", ClusterID: "c1"})
	if err != nil || id != "c1" {
		t.Fatalf("%q %v", id, err)
	}
	if b, err := fs.ReadFile("/data/cluster.id"); err != nil || string(b) != "c1\n" {
		t.Fatalf("configured id not kept beside the data: %q %v", b, err)
	}
	if id, err := loadClusterID(fs, &config.Config{LogDirs: "/data"}); err != nil || id != "c1" {
		t.Fatalf("an empty cluster.id after a configured one: %q %v, want the data's c1", id, err)
	}
}

// A configured cluster.id other than the one the data was written under is refused, naming
// both, as Kafka refuses to start on a meta.properties of another cluster.
func TestClusterIDOtherThanTheDataIsRefused(t *testing.T) {
	fs := segment.NewMemFS()
	fs.MkdirAll("/data", 0o755)
	if _, err := loadClusterID(fs, &config.Config{LogDirs: "/data", ClusterID: "c1"}); err != nil {
		t.Fatal(err)
	}
	_, err := loadClusterID(fs, &config.Config{LogDirs: "/data", ClusterID: "c2"})
	if err == nil || !strings.Contains(err.Error(), "c1") || !strings.Contains(err.Error(), "c2") {
		t.Fatalf("got %v, want a refusal naming c1 and c2", err)
	}
	// An empty file (a crash before the first write's data reached the disk) takes the
	// configured id, as a first start does.
	fs.WriteFile("/data/cluster.id", nil)
	if id, err := loadClusterID(fs, &config.Config{LogDirs: "/data", ClusterID: "c2"}); err != nil || id != "c2" {
		t.Fatalf("%q %v", id, err)
	}
}
