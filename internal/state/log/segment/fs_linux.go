//go:build linux

package segment

import (
	"errors"
	"os"
	"syscall"
	_ "unsafe" // go:linkname

	"golang.org/x/sys/unix"
)

// datasync is fdatasync: the log never depends on file metadata other than the size, which
// fdatasync covers. The calling goroutine gives its P up as the sync starts (see
// fdatasyncHandingOffP).
func datasync(f *os.File) error {
	for {
		errno := fdatasyncHandingOffP(f.Fd())
		if errno == 0 {
			return nil
		}
		if errno != unix.EINTR {
			return errno
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

// fdatasyncHandingOffP is fdatasync(2) entered the way the runtime enters a call it knows will
// block: its P goes to another thread at once. An ordinary syscall keeps its P until sysmon
// has seen it in the call on two ticks, and a journal sync of a few hundred µs mostly ends
// before that, so under commits at full rate one P of the process ran no Go code most of the
// time and other groups' heartbeats waited for the remaining ones (docs/benchmarks-hotpath.md,
// "The machine's share and the server's"). When the sync returns, the goroutine waits for a
// free P like any woken one, behind goroutines already runnable.
//
// entersyscallblock and exitsyscall are the runtime's entry and exit of such a call, kept
// reachable by go:linkname for packages outside the standard library (go.dev/issue/67401);
// between them the goroutine has no P, so this function must not grow its stack (nosplit) or
// call the race detector (norace), and calls only RawSyscall, which does neither.
//
//go:nosplit
//go:norace
func fdatasyncHandingOffP(fd uintptr) syscall.Errno {
	entersyscallblock()
	_, _, errno := syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0)
	exitsyscall()
	return errno
}

//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()
