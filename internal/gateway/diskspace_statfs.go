//go:build linux || darwin

package gateway

import "syscall"

// diskSpace is the size of the file system holding dir and the bytes free to unprivileged
// writers there; -1, -1 when it cannot be read (Kafka's "unknown").
func diskSpace(dir string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}
