//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package segment

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// datasync uses File.Sync, which is F_FULLFSYNC on darwin (plain fsync does not reach the
// platter there).
func datasync(f *os.File) error { return f.Sync() }

func lockFile(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
