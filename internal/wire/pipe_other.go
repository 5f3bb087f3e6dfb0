//go:build !linux

package wire

import (
	"errors"
	"net"
)

// Pipe is splice(2)'s pipe; without splice every answer is read into memory.
type Pipe struct{}

var ErrPipeFull = errors.New("pipe full")

const PipeSupported = false

var errNoSplice = errors.New("splice(2) needs Linux")

func NewPipe(int) (*Pipe, error)                        { return nil, errNoSplice }
func (p *Pipe) Cap() int                                { return 0 }
func (p *Pipe) Close()                                  {}
func (p *Pipe) Buffered() (int, error)                  { return 0, errNoSplice }
func (p *Pipe) FillFrom(*net.TCPConn, int) (int, error) { return 0, errNoSplice }
func (p *Pipe) Write([]byte) (int, error)               { return 0, errNoSplice }
func (p *Pipe) ReadFull([]byte) error                   { return errNoSplice }
func (p *Pipe) SpliceTo(*net.TCPConn, int) (int, error) { return 0, errNoSplice }

func WriteMore(*net.TCPConn, []byte) (int, error) { return 0, errNoSplice }
