// Package wiretest serves Kafka frames from a test's own answers: a fake broker or peer for
// the packages that dial one, so each test states only what it answers, not the frame loop.
package wiretest

import (
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/coordinatord/coordinatord/internal/wire"
)

// Answer returns the response to one request frame (its parsed header and the body after it),
// or nil to close the connection, as a broker does with a request it cannot serve. body still
// holds the header's tag section on flexible requests: Request strips it.
type Answer func(h wire.Header, body []byte) kmsg.Response

// Server is a loopback listener that lives as long as the test; conns counts the connections
// it accepted.
type Server struct {
	Addr  *net.TCPAddr
	Conns atomic.Int32
	ln    net.Listener
}

// Listen opens a Server; Start serves it. The two steps let an answer name the server's own
// address (a fake broker's Metadata) without a data race on it.
func Listen(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &Server{Addr: ln.Addr().(*net.TCPAddr), ln: ln}
}

// Serve listens and serves at once, for answers that need not know the address.
func Serve(t testing.TB, answer Answer) *Server {
	t.Helper()
	s := Listen(t)
	s.Start(answer)
	return s
}

// Start answers every frame of every connection with answer.
func (s *Server) Start(answer Answer) {
	go func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.Conns.Add(1)
			go serveConn(c, answer)
		}
	}()
}

func serveConn(c net.Conn, answer Answer) {
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		h, body, err := wire.ParseHeader(frame)
		if err != nil {
			return
		}
		resp := answer(h, body)
		if resp == nil {
			return
		}
		resp.SetVersion(h.Version)
		if _, err := c.Write(wire.AppendResponse(nil, h.CorrelationID, resp)); err != nil {
			return
		}
	}
}

// Request decodes body into req at the frame's version, skipping the header's tags when the
// request is flexible; false when the body does not decode.
func Request(h wire.Header, body []byte, req kmsg.Request) bool {
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		var err error
		if body, err = wire.SkipHeaderTags(body); err != nil {
			return false
		}
	}
	return req.ReadFrom(body) == nil
}
