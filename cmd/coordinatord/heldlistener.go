package main

import (
	"net"
	"sync/atomic"
	"time"
)

// heldListener stops accepting when closed but keeps its port bound until the raw listener is
// closed. With several nodes (log.backend=kafka) the other nodes take a port that refuses
// connections for a dead process and remove it from the upstream group at once; a node that is
// stopping cleanly must not look dead while it closes its shards and leaves the group, or it is
// removed in the middle of its hand-over (its shards taken before it released them, and it
// fenced by their loads). Connections that arrive meanwhile wait in the kernel's backlog and are
// reset when the port is unbound at exit, within shutdown.timeout.ms.
type heldListener struct {
	*net.TCPListener
	stopped atomic.Bool
}

func holdPort(ln net.Listener) net.Listener {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return ln
	}
	return &heldListener{TCPListener: tl}
}

func (h *heldListener) Accept() (net.Conn, error) {
	c, err := h.TCPListener.Accept()
	if h.stopped.Load() {
		if err == nil {
			c.Close()
		}
		return nil, net.ErrClosed
	}
	return c, err
}

// Close stops Accept (a deadline in the past wakes one that waits) and leaves the port bound.
func (h *heldListener) Close() error {
	h.stopped.Store(true)
	return h.TCPListener.SetDeadline(time.Unix(1, 0))
}
