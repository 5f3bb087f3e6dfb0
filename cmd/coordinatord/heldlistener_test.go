package main

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// Closed, a held listener stops accepting at once (a waiting Accept returns net.ErrClosed, which
// the wire server takes for the end of Serve) and its port still takes connections, as peer
// probes dial it; only closing the raw listener unbinds the port.
func TestHeldListenerStopsAcceptingAndKeepsThePort(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := holdPort(raw)
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a waiting Accept returned %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting Accept did not return on Close")
	}
	c, err := net.DialTimeout("tcp", raw.Addr().String(), time.Second)
	if err != nil {
		t.Fatalf("the held port refused a connection: %v", err)
	}
	c.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close returned %v, want net.ErrClosed", err)
	}
	raw.Close()
	if _, err := net.DialTimeout("tcp", raw.Addr().String(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("after the raw close a dial got %v, want a refusal", err)
	}
}
