//go:build !linux

package wire

import "net"

// rawSocket is Linux's (rawsocket_linux.go); elsewhere connections use net.Conn.
type rawSocket struct{}

func newRawSocket(net.Conn) *rawSocket { return nil }

func (*rawSocket) Read([]byte) (int, error)  { panic("wire: no raw sockets here") }
func (*rawSocket) Write([]byte) (int, error) { panic("wire: no raw sockets here") }
