package conformance

// A simulated client is one TCP connection the harness writes frames to by hand, so it
// controls every byte and version and can reach APIs no client library routes (franz-go sends
// no StreamsGroup requests). A goroutine reads response frames as they arrive, which lets a
// scenario park a request on one connection while another connection carries on.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxResponseBytes bounds what the reader accepts from a server; no response here is large.
const maxResponseBytes = 64 << 20

type pending struct {
	key     int16
	version int16
	corr    int32
}

type frameOrErr struct {
	b   []byte
	err error
}

type clientConn struct {
	name     string
	nc       net.Conn
	frames   chan frameOrErr
	done     chan struct{} // closed by close: the reader stops even if nobody reads frames
	nextCorr int32
	pending  []pending
}

func dial(name, addr string) (*clientConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connection %s: %w", name, err)
	}
	c := &clientConn{name: name, nc: nc, frames: make(chan frameOrErr, 64), done: make(chan struct{}), nextCorr: 1}
	go c.readLoop()
	return c, nil
}

func (c *clientConn) readLoop() {
	defer close(c.frames)
	push := func(f frameOrErr) bool {
		select {
		case c.frames <- f:
			return f.err == nil
		case <-c.done:
			return false
		}
	}
	for {
		var size [4]byte
		if n, err := io.ReadFull(c.nc, size[:]); err != nil {
			if n > 0 {
				// Part of a size prefix is bytes written: not a silent close.
				err = fmt.Errorf("the server wrote %d bytes of a size prefix, then: %v", n, err)
			}
			push(frameOrErr{err: err})
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 0 || n > maxResponseBytes {
			push(frameOrErr{err: fmt.Errorf("response size prefix %d", n)})
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(c.nc, b); err != nil {
			push(frameOrErr{err: fmt.Errorf("response cut short: %v", err)})
			return
		}
		if !push(frameOrErr{b: b}) {
			return
		}
	}
}

func (c *clientConn) close() {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	c.nc.Close()
}

func (c *clientConn) write(b []byte) error {
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("writing to %s: %w", c.name, err)
	}
	return nil
}

// header builds a request header (v1, or v2 with an empty tag section when flexible).
func header(key, version int16, corr int32, clientID *string, flexible bool) []byte {
	b := kbin.AppendInt16(nil, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, clientID)
	if flexible {
		b = append(b, 0)
	}
	return b
}

func sized(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func (c *clientConn) corrFor(st *Step) int32 {
	if st.Corr != nil {
		return *st.Corr
	}
	corr := c.nextCorr
	c.nextCorr++
	return corr
}

// sendRequest writes req at version and remembers that a response is owed.
func (c *clientConn) sendRequest(st *Step, req kmsg.Request, version int16, clientID *string) error {
	corr := c.corrFor(st)
	req.SetVersion(version)
	b := header(req.Key(), version, corr, clientID, req.IsFlexible())
	b = req.AppendTo(b)
	if err := c.write(sized(b)); err != nil {
		return err
	}
	c.pending = append(c.pending, pending{key: req.Key(), version: version, corr: corr})
	return nil
}

// sendFrame writes a hand-made body under a real header.
func (c *clientConn) sendFrame(st *Step, clientID *string) error {
	key, version := st.Key, st.Versions[0]
	flexible := false
	if st.Flexible != nil {
		flexible = *st.Flexible
	} else if req := kmsg.RequestForKey(key); req != nil {
		req.SetVersion(version)
		flexible = req.IsFlexible()
	}
	corr := c.corrFor(st)
	b := append(header(key, version, corr, clientID, flexible), st.Hex...)
	if err := c.write(sized(b)); err != nil {
		return err
	}
	c.pending = append(c.pending, pending{key: key, version: version, corr: corr})
	return nil
}

var (
	// errClosed is what next returns when the server closed the connection.
	errClosed = errors.New("connection closed by the server")
	// errNoResponse is what next returns when nothing arrived in time.
	errNoResponse = errors.New("no response")
)

// next waits for the next response frame.
func (c *clientConn) next(timeout time.Duration) ([]byte, error) {
	select {
	case f, ok := <-c.frames:
		if !ok {
			return nil, errClosed
		}
		if f.err != nil {
			if isClosed(f.err) {
				return nil, errClosed
			}
			return nil, f.err
		}
		return f.b, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("%w on %s within %s", errNoResponse, c.name, timeout)
	}
}

// isClosed says whether a read error means the server closed the connection (cleanly or with
// a reset) before writing anything of a response.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// readResponse decodes a response frame for key at version, checking the correlation id.
// Response header v1 (a tag section) follows the correlation id for flexible versions, except
// for ApiVersions whose header is always v0.
// It also returns the body bytes the response was decoded from.
func readResponse(b []byte, key, version int16, wantCorr *int32) (kmsg.Response, []byte, error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("response of %d bytes has no correlation id", len(b))
	}
	corr := int32(binary.BigEndian.Uint32(b))
	if wantCorr != nil && corr != *wantCorr {
		return nil, nil, fmt.Errorf("correlation id %d, want %d", corr, *wantCorr)
	}
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return nil, nil, fmt.Errorf("no response type for API key %d", key)
	}
	resp.SetVersion(version)
	body := b[4:]
	if resp.IsFlexible() && key != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if err := r.Complete(); err != nil {
			return nil, nil, fmt.Errorf("response header tags: %w", err)
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, nil, fmt.Errorf("decoding %s v%d response: %w", apiName(key), version, err)
	}
	return resp, body, nil
}
