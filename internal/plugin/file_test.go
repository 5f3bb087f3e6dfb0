package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

func itoa(n int) string { return strconv.Itoa(n) }

func newFile(t *testing.T, cfg topologyplugin.Config) *File {
	t.Helper()
	p, err := NewFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*File)
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Spec §9.53: descriptions written by the file plugin survive a restart (a new plugin on the
// same directory); deletes survive too.
func TestSpec9_53FilePluginSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	f := newFile(t, topologyplugin.Config{"dir": dir})
	mustSet(t, f, "orders", 3, desc("orders"))
	mustSet(t, f, "payments", 1, desc("payments"))
	mustSet(t, f, "gone", 1, desc("gone"))
	if err := f.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	f.Close()

	f = newFile(t, topologyplugin.Config{"dir": dir})
	defer f.Close()
	if !topologyplugin.Equal(mustGet(t, f, "orders", 3), desc("orders")) || !topologyplugin.Equal(mustGet(t, f, "payments", 1), desc("payments")) {
		t.Fatal("descriptions lost across restart")
	}
	if mustGet(t, f, "gone", 1) != nil {
		t.Fatal("a deleted description came back")
	}
	if s := f.Stats(); s.Descriptions != 2 || s.Bytes <= 0 {
		t.Fatalf("index after restart %+v", s)
	}
}

// One file per group and epoch, with names that are safe whatever the group id; a newer epoch
// removes the older file.
func TestFilePluginFileNames(t *testing.T) {
	dir := t.TempDir()
	f := newFile(t, topologyplugin.Config{"dir": dir})
	defer f.Close()
	mustSet(t, f, "../../etc/passwd", 1, desc("x"))
	mustSet(t, f, "Orders/EU", 1, desc("x"))
	mustSet(t, f, "Orders/EU", 2, desc("y"))
	mustSet(t, f, strings.Repeat("é", 300), 5, desc("z"))
	safe := regexp.MustCompile(`^[gh]-[0-9a-v]+\.-?[0-9]+\.json$`)
	names := listDir(t, dir)
	if len(names) != 3 {
		t.Fatalf("want 3 files (one per group, old epoch removed), got %v", names)
	}
	for _, n := range names {
		if !safe.MatchString(n) || len(n) > 200 {
			t.Errorf("unsafe file name %q", n)
		}
	}
}

// Crash model: leftover temporary files are removed at start; when a crash left two epochs of
// a group, the higher one is kept and the lower one removed.
func TestFilePluginStartupRepairsCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	f := newFile(t, topologyplugin.Config{"dir": dir})
	mustSet(t, f, "g", 2, desc("two"))
	f.Close()
	key := fileKey("g")
	old, err := os.ReadFile(filepath.Join(dir, key+".2.json"))
	if err != nil {
		t.Fatal(err)
	}
	// A crash after the rename of epoch 3 but before removal of epoch 2 ...
	f2 := newFile(t, topologyplugin.Config{"dir": dir})
	mustSet(t, f2, "g", 3, desc("three"))
	f2.Close()
	if err := os.WriteFile(filepath.Join(dir, key+".2.json"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	// ... and a crash in the middle of writing a temporary file.
	if err := os.WriteFile(filepath.Join(dir, key+".4.json.tmp-123"), []byte(`{"gro`), 0o644); err != nil {
		t.Fatal(err)
	}
	f3 := newFile(t, topologyplugin.Config{"dir": dir})
	defer f3.Close()
	if names := listDir(t, dir); len(names) != 1 || names[0] != key+".3.json" {
		t.Fatalf("after start-up repair: %v", names)
	}
	if !topologyplugin.Equal(mustGet(t, f3, "g", 3), desc("three")) || mustGet(t, f3, "g", 2) != nil {
		t.Fatal("wrong epoch kept")
	}
}

// Bounds: oversized descriptions are permanent failures; a full directory is a transient one
// and frees up when groups are deleted.
func TestFilePluginBounds(t *testing.T) {
	dir := t.TempDir()
	one := desc("a")
	f := newFile(t, topologyplugin.Config{"dir": dir, "max.description.bytes": itoa(one.EncodedSize())})
	mustSet(t, f, "a", 1, one)
	fileSize := f.Stats().Bytes
	f.Close()

	f = newFile(t, topologyplugin.Config{"dir": dir, "max.bytes": strconv.FormatInt(fileSize*2+fileSize/2, 10), "max.description.bytes": itoa(one.EncodedSize())})
	defer f.Close()
	mustSet(t, f, "b", 1, desc("b"))
	err := f.Set(context.Background(), "c", 1, desc("c"))
	if !topologyplugin.IsTransient(err) || !strings.Contains(err.Error(), "max.bytes") {
		t.Fatalf("full directory: want transient, got %v", err)
	}
	mustSet(t, f, "a", 1, desc("a")) // replacing in place fits
	if err := f.Delete(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	mustSet(t, f, "c", 1, desc("c"))

	big := desc("big")
	big.Subtopologies[0].Nodes[0].SourceTopics = []string{strings.Repeat("t", 100)}
	if err := f.Set(context.Background(), "d", 1, big); !topologyplugin.IsPermanent(err) {
		t.Fatalf("oversized: want permanent, got %v", err)
	}
}

// A file removed behind the plugin's back is lost data (nothing), a corrupt one is an error.
func TestFilePluginLostAndCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	f := newFile(t, topologyplugin.Config{"dir": dir})
	defer f.Close()
	mustSet(t, f, "lost", 1, desc("x"))
	mustSet(t, f, "bad", 1, desc("x"))
	os.Remove(filepath.Join(dir, fileKey("lost")+".1.json"))
	os.WriteFile(filepath.Join(dir, fileKey("bad")+".1.json"), []byte("{"), 0o644)
	if d, err := f.Get(context.Background(), "lost", 1); d != nil || err != nil {
		t.Fatalf("lost file: want (nil, nil), got %v, %v", d, err)
	}
	if _, err := f.Get(context.Background(), "bad", 1); err == nil {
		t.Fatal("corrupt file must be an error")
	}
}

func TestFilePluginConfigErrors(t *testing.T) {
	var ce *topologyplugin.ConfigError
	if _, err := NewFile(topologyplugin.Config{}); !errors.As(err, &ce) || ce.Key != "dir" {
		t.Fatalf("missing dir: %v", err)
	}
	if _, err := NewFile(topologyplugin.Config{"dir": t.TempDir(), "fsync": "false"}); !errors.As(err, &ce) {
		t.Fatalf("unknown key: %v", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := NewFile(topologyplugin.Config{"dir": file}); err == nil {
		t.Fatal("a file as dir must fail")
	}
}

// Issue 10 defect 14: when the whole directory is lost, Get reports nothing (the coordinator
// then asks for the description again), the lost bytes stop counting against max.bytes, and
// the re-push is stored: the directory is created again.
func TestFilePluginLostDirectoryTakesTheRepush(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "descriptions")
	f := newFile(t, topologyplugin.Config{"dir": dir})
	defer f.Close()
	mustSet(t, f, "g", 1, desc("g"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if d, err := f.Get(context.Background(), "g", 1); d != nil || err != nil {
		t.Fatalf("lost directory: want (nil, nil), got %v, %v", d, err)
	}
	if st := f.Stats(); st.Descriptions != 0 || st.Bytes != 0 {
		t.Fatalf("lost description still counted: %+v", st)
	}
	mustSet(t, f, "g", 1, desc("g"))
	if d, err := f.Get(context.Background(), "g", 1); d == nil || err != nil {
		t.Fatalf("after the re-push: %v, %v", d, err)
	}
	if st := f.Stats(); st.Descriptions != 1 {
		t.Fatalf("after the re-push: %+v", st)
	}
}
