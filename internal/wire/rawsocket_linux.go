package wire

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawSocket reads and writes a plaintext TCP connection's socket with read(2) and write(2)
// made as raw system calls: the scheduler is not told about them, as it is for every
// syscall.Read and syscall.Write. The socket is non-blocking (the runtime's poller owns it),
// so such a call never waits; when it would (EAGAIN), the goroutine parks in the poller as
// net.Conn would (syscall.RawConn), and deadlines and Close work as for net.Conn. Entering and
// leaving a system call the scheduler's way cost a steady heartbeat, which makes three
// (reading the request, the read that finds nothing and parks, writing the answer), about 4%
// of its server CPU (issue 12).
type rawSocket struct {
	rc syscall.RawConn
	// buf, n and err are the call in progress; only the connection's goroutine uses them, and
	// readFn and writeFn are bound once so that a call allocates nothing.
	buf             []byte
	n               int
	err             error
	readFn, writeFn func(fd uintptr) bool
}

// newRawSocket returns the raw socket of nc, or nil when nc is not a plaintext TCP connection.
func newRawSocket(nc net.Conn) *rawSocket {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &rawSocket{rc: rc}
	s.readFn, s.writeFn = s.read, s.write
	return s
}

// Read reads what the socket holds, up to len(p), waiting in the poller while it holds
// nothing. A closed peer reads as io.EOF.
func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.buf, s.n, s.err = p, 0, nil
	err := s.rc.Read(s.readFn)
	s.buf = nil
	if err != nil {
		return 0, err
	}
	return s.n, s.err
}

func (s *rawSocket) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)))
		switch e {
		case 0:
			s.n = int(n)
			if n == 0 {
				s.err = io.EOF
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // park until the socket is readable
		default:
			s.err = e
			return true
		}
	}
}

// Write writes all of p, waiting in the poller while the socket's buffer is full.
func (s *rawSocket) Write(p []byte) (int, error) {
	s.buf, s.n, s.err = p, 0, nil
	err := s.rc.Write(s.writeFn)
	s.buf = nil
	if err == nil {
		err = s.err
	}
	return s.n, err
}

func (s *rawSocket) write(fd uintptr) bool {
	for len(s.buf) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)))
		switch e {
		case 0:
			s.n += int(n)
			s.buf = s.buf[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // park until the socket is writable
		default:
			s.err = e
			return true
		}
	}
	return true
}
