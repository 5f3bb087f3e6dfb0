//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package segment

import (
	"errors"
	"os"
)

func datasync(f *os.File) error { return f.Sync() }

func lockFile(*os.File) error {
	return errors.New("exclusive log directory lock is not supported on this platform")
}
