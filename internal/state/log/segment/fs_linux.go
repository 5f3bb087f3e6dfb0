//go:build linux

package segment

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync: the log never depends on file metadata other than the size, which
// fdatasync covers.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

func lockFile(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
