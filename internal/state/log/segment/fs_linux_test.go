//go:build linux

package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The sync that hands its P off still reports what fdatasync(2) says: success on a file with
// unsynced bytes, the error on a descriptor it cannot sync (the log fails the round then,
// TestJournalFailedFsyncFailsOnlyItsRound).
func TestDatasyncReportsTheSyscallsResult(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("unsynced")); err != nil {
		t.Fatal(err)
	}
	if err := datasync(f); err != nil {
		t.Fatalf("datasync of a written file: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := datasync(w); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("datasync of a pipe: %v, want EINVAL", err)
	}
}
