package wire

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Pipe is a kernel pipe that carries a forwarded answer's bytes from one socket to another
// with splice(2), so that they never enter user memory. Both ends are non-blocking and used by
// one goroutine at a time; it is not registered with the netpoller: only the sockets wait.
// Close may come from any goroutine (a shutdown closing every upstream connection): the
// descriptors are closed once no operation uses them, so a number the kernel hands out again
// is never written to by an operation that was still running.
type Pipe struct {
	r, w int
	cap  int

	mu     sync.Mutex
	users  int
	closed bool
}

var errPipeClosed = errors.New("pipe closed")

// use holds the descriptors open until done is called; errPipeClosed once Close ran.
func (p *Pipe) use() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errPipeClosed
	}
	p.users++
	return nil
}

func (p *Pipe) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.users--; p.users == 0 && p.closed {
		p.closeFDs()
	}
}

func (p *Pipe) closeFDs() {
	unix.Close(p.r)
	unix.Close(p.w)
}

// ErrPipeFull is FillFrom's and Write's error when the pipe has no room left for what is
// asked (its slots hold socket buffers, not bytes, so fewer bytes than its capacity may fill
// it). Nothing is lost: the caller drains the pipe and reads the rest itself.
var ErrPipeFull = errors.New("pipe full")

// PipeSupported says whether NewPipe can work on this system.
const PipeSupported = true

// NewPipe opens a pipe and asks the kernel for size bytes of capacity; Cap is what it got
// (the kernel may give less, down to one page, once the user's pipes hold
// /proc/sys/fs/pipe-user-pages-soft).
func NewPipe(size int) (*Pipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("pipe2: %w", err)
	}
	p := &Pipe{r: fds[0], w: fds[1]}
	unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, size) // refused above pipe-max-size: keep the default
	n, err := unix.FcntlInt(uintptr(p.w), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		p.closeFDs()
		return nil, fmt.Errorf("F_GETPIPE_SZ: %w", err)
	}
	p.cap = n
	return p, nil
}

// Cap is the pipe's capacity in bytes, at most what it can hold.
func (p *Pipe) Cap() int { return p.cap }

// Close closes both ends (once nothing uses them); whatever the pipe held is dropped.
func (p *Pipe) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.users == 0 {
		p.closeFDs()
	}
}

// Buffered is how many bytes the pipe holds.
func (p *Pipe) Buffered() (int, error) {
	if err := p.use(); err != nil {
		return 0, err
	}
	defer p.done()
	return p.held()
}

func (p *Pipe) held() (int, error) {
	return unix.IoctlGetInt(p.r, unix.TIOCINQ) // FIONREAD
}

// FillFrom splices n bytes from src (a TCP socket) into the pipe, waiting for them as a read
// would (src's read deadline applies). It returns how many it moved; ErrPipeFull when the
// pipe filled first, io.ErrUnexpectedEOF when src ended first.
func (p *Pipe) FillFrom(src *net.TCPConn, n int) (int, error) {
	if err := p.use(); err != nil {
		return 0, err
	}
	defer p.done()
	rc, err := src.SyscallConn()
	if err != nil {
		return 0, err
	}
	moved := 0
	var serr error
	err = rc.Read(func(fd uintptr) bool {
		for moved < n {
			m, e := unix.Splice(int(fd), nil, p.w, nil, n-moved, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				// Either the socket has nothing yet (wait for it) or the pipe is full. A socket
				// that holds bytes says which; a race with bytes arriving just now only makes
				// this answer take the slower path.
				if queued, qerr := unix.IoctlGetInt(int(fd), unix.SIOCINQ); qerr == nil && queued > 0 {
					serr = ErrPipeFull
					return true
				}
				return false
			case e != nil:
				serr = e
				return true
			case m == 0:
				serr = io.ErrUnexpectedEOF
				return true
			}
			moved += int(m)
		}
		return true
	})
	if err != nil {
		return moved, err
	}
	return moved, serr
}

// Write copies b into the pipe; ErrPipeFull (with what was written) when it does not fit.
func (p *Pipe) Write(b []byte) (int, error) {
	if err := p.use(); err != nil {
		return 0, err
	}
	defer p.done()
	done := 0
	for done < len(b) {
		m, err := unix.Write(p.w, b[done:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return done, ErrPipeFull
		case err != nil:
			return done, err
		}
		done += m
	}
	return done, nil
}

// ReadFull reads exactly len(b) bytes the pipe holds; fewer is an error, never a wait.
func (p *Pipe) ReadFull(b []byte) error {
	if err := p.use(); err != nil {
		return err
	}
	defer p.done()
	done := 0
	for done < len(b) {
		m, err := unix.Read(p.r, b[done:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN || (err == nil && m == 0):
			return fmt.Errorf("pipe held %d bytes, %d expected", done, len(b))
		case err != nil:
			return err
		}
		done += m
	}
	return nil
}

// SpliceTo splices n bytes the pipe holds to dst (a TCP socket), waiting for room as a write
// would (dst's write deadline applies). It returns how many it moved.
func (p *Pipe) SpliceTo(dst *net.TCPConn, n int) (int, error) {
	if err := p.use(); err != nil {
		return 0, err
	}
	defer p.done()
	rc, err := dst.SyscallConn()
	if err != nil {
		return 0, err
	}
	moved := 0
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		for moved < n {
			m, e := unix.Splice(p.r, nil, int(fd), nil, n-moved, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				// The socket is full (wait for room), unless the pipe ran dry: then the bytes
				// promised are not there, and waiting would hang.
				if held, herr := p.held(); herr != nil || held == 0 {
					serr = fmt.Errorf("pipe ran dry after %d of %d bytes", moved, n)
					return true
				}
				return false
			case e != nil:
				serr = e
				return true
			case m == 0:
				serr = fmt.Errorf("pipe ran dry after %d of %d bytes", moved, n)
				return true
			}
			moved += int(m)
		}
		return true
	})
	if err != nil {
		return moved, err
	}
	return moved, serr
}

// WriteMore writes b to dst (a TCP socket) telling the kernel more follows at once (MSG_MORE),
// so that an answer's start and the bytes spliced after it leave in full segments: written
// alone, the start went as a small segment of its own, and the client woke up for it first.
func WriteMore(dst *net.TCPConn, b []byte) (int, error) {
	rc, err := dst.SyscallConn()
	if err != nil {
		return 0, err
	}
	done := 0
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		for done < len(b) {
			m, e := unix.SendmsgN(int(fd), b[done:], nil, nil, unix.MSG_MORE|unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return false
			case e != nil:
				serr = e
				return true
			}
			done += m
		}
		return true
	})
	if err != nil {
		return done, err
	}
	return done, serr
}
