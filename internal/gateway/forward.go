package gateway

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// clientConn is what one client connection holds upstream: at most one connection per upstream
// broker, opened on first use. One per client connection, never shared, so the upstream sees
// the client's own order, pipelining and fetch sessions.
type clientConn struct {
	mu     sync.Mutex
	closed bool
	ups    map[int32]*upConn
	// pinned is the upstream broker of a connection on coordinatord's own port, chosen on its
	// first forward and kept: the choice must not follow later changes of the broker list.
	pinned    int32
	hasPinned bool
	// sent and answered are when the connection's last forwarded request began its write
	// upstream and when its answer had been read: the span between them is the upstream's.
	// Only the client connection's own goroutine touches them (requests are served in turn).
	sent, answered time.Time
}

type upConn struct {
	nc net.Conn
	br *bufio.Reader
	// expires is when the upstream ends the session of coordinatord's own SASL login on this
	// connection (KIP-368); zero: never, or the client's relayed login, which the client renews.
	expires time.Time
	// owner is the client connection this one serves; roundTrip times the upstream's part there.
	owner *clientConn
	// ctx is the client connection's context this one was dialed under: its end closes nc, so
	// that an upstream that never answers does not hold the client's goroutine (or a shutdown)
	// forever. Registered once per upstream connection rather than per request, where it was
	// 3% of a forwarded 1 KiB Produce's CPU; stop unregisters it when nc closes first.
	ctx  context.Context
	stop func() bool
	// size, iov and bufs are the request write's size prefix and vector, kept here so that
	// they are not allocated per request (one request at a time uses them). bufs is
	// consumed by its write; iov is the array it is set from again each time.
	size [4]byte
	iov  [2][]byte
	bufs net.Buffers
}

// close closes the upstream connection and forgets the watch on its client's context.
func (u *upConn) close() {
	u.nc.Close()
	if u.stop != nil {
		u.stop()
	}
}

func (c *clientConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, u := range c.ups {
		u.close()
		delete(c.ups, id)
	}
}

// upstreamFor returns the connection to node id for this client connection, dialing it first.
func (g *Gateway) upstreamFor(ctx context.Context, c *wire.Conn, id int32) (*upConn, error) {
	v, ok := g.conns.Load(c)
	if !ok {
		// LoadOrStore only on a miss: its argument would otherwise be allocated per request.
		v, _ = g.conns.LoadOrStore(c, &clientConn{ups: map[int32]*upConn{}})
	}
	cc := v.(*clientConn)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return nil, errors.New("client connection closed")
	}
	if u, ok := cc.ups[id]; ok {
		if u.expires.IsZero() || time.Now().Before(u.expires) {
			return u, nil
		}
		// The upstream would close the connection at its next request: nothing is in flight
		// between two requests, so a fresh login costs the client nothing.
		u.close()
		delete(cc.ups, id)
	}
	view := g.View()
	if view == nil {
		return nil, errors.New("no upstream metadata yet")
	}
	b, ok := view.Broker(id)
	if !ok {
		g.refresh()
		return nil, fmt.Errorf("upstream broker %d is not in the upstream's metadata", id)
	}
	d := net.Dialer{Timeout: g.opts.ConnectTimeout}
	// A client of a SASL listener logs in itself, relayed on this connection (sasl_relay.go);
	// any other client's requests go upstream under coordinatord's own login.
	nc, expires, err := g.opts.Security.Dial(ctx, &d, b.Addr(), g.opts.UpstreamClientID, !c.SASLRequired())
	if err != nil {
		g.opts.Metrics.dialFailed(id)
		return nil, fmt.Errorf("connecting to upstream broker %d: %w", id, err)
	}
	if !expires.IsZero() {
		expires = expires.Add(-time.Until(expires) / 10) // renew a little before the upstream's end
	}
	u := &upConn{nc: nc, br: bufio.NewReaderSize(nc, 32<<10), expires: expires, owner: cc, ctx: ctx}
	u.stop = context.AfterFunc(ctx, func() { nc.Close() })
	cc.ups[id] = u
	return u, nil
}

// pinFor returns the upstream broker that forwarded requests of a connection on coordinatord's
// own port go to, the same for the connection's whole life.
func (g *Gateway) pinFor(c *wire.Conn) (int32, error) {
	v, _ := g.conns.LoadOrStore(c, &clientConn{ups: map[int32]*upConn{}})
	cc := v.(*clientConn)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.hasPinned {
		b, ok := g.pinnedNode(c.ID)
		if !ok {
			return 0, errors.New("no upstream broker known")
		}
		cc.pinned, cc.hasPinned = b.NodeID, true
	}
	return cc.pinned, nil
}

// drop forgets a failed upstream connection; the client's connection closes with it.
func (g *Gateway) drop(c *wire.Conn, id int32) {
	if v, ok := g.conns.Load(c); ok {
		cc := v.(*clientConn)
		cc.mu.Lock()
		if u, ok := cc.ups[id]; ok {
			u.close()
			delete(cc.ups, id)
		}
		cc.mu.Unlock()
	}
}

// forward sends frame to the upstream broker of this port (or, on coordinatord's own port, the
// broker pinned for the connection) and returns the answer, rewritten where it names brokers.
func (g *Gateway) forward(ctx context.Context, node int32, c *wire.Conn, h wire.Header, frame []byte, reserve func(int) error) ([]byte, error) {
	return g.forwardFrame(ctx, node, c, h, frame, nil, reserve)
}

// forwardFrame is forward for a frame that is frame followed by what body yields (nil: frame
// is the whole of it), copied from the client's socket to the upstream's as it arrives.
func (g *Gateway) forwardFrame(ctx context.Context, node int32, c *wire.Conn, h wire.Header, frame []byte, body *io.LimitedReader, reserve func(int) error) ([]byte, error) {
	if node < 0 {
		var err error
		if node, err = g.pinFor(c); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	u, err := g.upstreamFor(ctx, c, node)
	if err != nil {
		return nil, err
	}
	// The wire server cancels ctx when the client's connection ends or a shutdown gives up
	// waiting; an upstream that never answers must not hold the connection's goroutine, and so
	// the shutdown, forever. The upstream connection watches the context it was dialed under
	// (the client connection's, which every forward of the wire server passes); any other
	// context is watched for this request alone.
	stop := func() bool { return false }
	if ctx != u.ctx {
		stop = context.AfterFunc(ctx, func() { u.nc.Close() })
	}
	var bound time.Duration
	answered := true
	if h.Key == 0 {
		// Acks and the timeout are read once, in place: this is every Produce's path.
		acks, timeout := produceAcksTimeout(h.Version, frame)
		answered, bound = acks != 0, g.boundWith(timeout)
	} else {
		bound = g.answerBound(h, frame)
	}
	size := len(frame)
	if body != nil {
		size += int(body.N)
	}
	out, err := g.relay.around(ctx, h, frame, func() ([]byte, error) { return g.roundTrip(u, h, frame, body, reserve, bound, answered) })
	stop()
	if err != nil {
		g.drop(c, node)
		g.opts.Metrics.failed(node, h.Key)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// As a client's request.timeout.ms does: the connection is given up, and the
			// client, seeing it close, retries elsewhere or reconnects.
			g.opts.Metrics.timedOut(node, h.Key)
			g.lg.Warn("upstream broker did not answer a forwarded request in time; closing the client's connection",
				zap.Int32("upstream_node", node), zap.String("api", apiName(h.Key)), zap.Int16("version", h.Version),
				zap.Duration("waited", bound), zap.String("client_id", h.ClientID))
		}
		return nil, fmt.Errorf("upstream broker %d: %w", node, err)
	}
	if h.Key == 19 || h.Key == 20 || h.Key == 37 {
		g.afterTopicChange(ctx, h, frame, out)
	}
	if (h.Key == 30 || h.Key == 31) && out != nil {
		g.afterACLChange(ctx, h, out)
	}
	if out != nil {
		raw := out
		var md *kmsg.MetadataResponse
		if out, err = g.rewriteSeeing(h, raw, func(r *kmsg.MetadataResponse) { md = r }); err != nil {
			putBuffer(raw)
			return nil, fmt.Errorf("rewriting %s v%d answer of upstream broker %d: %w", kmsg.NameForKey(h.Key), h.Version, node, err)
		}
		if len(out) > 0 && len(raw) > 0 && &out[0] != &raw[0] {
			putBuffer(raw) // rewritten into a new frame, which shares no memory with it
		}
		if md != nil {
			g.afterMetadata(ctx, md)
		}
	}
	g.opts.Metrics.forwarded(node, h.Key, size+4, len(out), time.Since(start))
	return out, nil
}

// observeAdded records the latency the gateway added to the forwarded request a client
// connection's answer was just written for: from the request's read to its write upstream, and
// from its answer's read to its write to the client.
func (g *Gateway) observeAdded(c *wire.Conn, read, written time.Time) {
	v, ok := g.conns.Load(c)
	if !ok {
		return
	}
	cc := v.(*clientConn)
	if cc.sent.Before(read) || cc.answered.Before(cc.sent) {
		return // not timed by this request's round trip (a relay answered it some other way)
	}
	g.opts.Metrics.added.Observe((cc.sent.Sub(read) + written.Sub(cc.answered)).Seconds())
}

// roundTrip writes the request and reads its answer (size prefix included); nil when the
// request expects none. The answer's memory is reserved before it is allocated.
func (g *Gateway) roundTrip(u *upConn, h wire.Header, frame []byte, body *io.LimitedReader, reserve func(int) error, bound time.Duration, answered bool) ([]byte, error) {
	// Counted from before the write: a broker that stops reading also stops answering.
	now := time.Now()
	if bound > 0 {
		u.nc.SetDeadline(now.Add(bound))
	}
	if u.owner != nil {
		u.owner.sent = now
	}
	var rest int64
	if body != nil {
		rest = body.N
	}
	size := u.size[:]
	binary.BigEndian.PutUint32(size, uint32(int64(len(frame))+rest))
	u.iov[0], u.iov[1] = size, frame
	u.bufs = u.iov[:]
	_, err := u.bufs.WriteTo(u.nc)
	u.iov[1] = nil // the frame goes back to its pool: nothing here may keep it
	if err != nil {
		return nil, err
	}
	if body != nil {
		var upDeadline time.Time
		if bound > 0 {
			upDeadline = now.Add(bound)
		}
		if err := copyBody(u.nc, body, upDeadline); err != nil {
			return nil, err
		}
	}
	if !answered {
		return nil, nil // acks=0: the broker answers nothing (it closes the connection on error)
	}
	if _, err := io.ReadFull(u.br, size); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size))
	if n < 4 || n > g.opts.MaxResponseBytes {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	if err := reserve(4 + int(n)); err != nil {
		return nil, err
	}
	out := getBuffer(4 + int(n))
	copy(out, size)
	if _, err := io.ReadFull(u.br, out[4:]); err != nil {
		putBuffer(out)
		return nil, err
	}
	if u.owner != nil {
		u.owner.answered = time.Now()
	}
	if corr := int32(binary.BigEndian.Uint32(out[4:8])); corr != h.CorrelationID {
		putBuffer(out)
		return nil, fmt.Errorf("correlation id %d answered for request %d", corr, h.CorrelationID)
	}
	return out, nil
}

// copyBody copies the rest of a request frame from the client's socket to the upstream's:
// spliced by the kernel when both are TCP sockets (net.TCPConn.ReadFrom of an io.LimitedReader
// over a net.TCPConn), through a recycled buffer otherwise (TLS). A body that ends early fails
// with wire.ErrRequestCutShort; the upstream then holds a partial frame, which it never runs
// as a request because the caller closes that connection. So does a body the client stalls on
// until its connection's idle deadline (or a shutdown's): a deadline error before the
// upstream's own deadline (zero: none) is the client's, not an upstream timeout.
func copyBody(dst net.Conn, body *io.LimitedReader, upDeadline time.Time) error {
	want := body.N
	var err error
	if tc, ok := dst.(*net.TCPConn); ok {
		_, err = tc.ReadFrom(body)
	} else {
		buf := getBuffer(32 << 10)
		_, err = io.CopyBuffer(dst, body, buf)
		putBuffer(buf)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && (upDeadline.IsZero() || time.Now().Before(upDeadline)) {
		// %v, not %w: the forwarding path must not count it as the upstream's timeout.
		return fmt.Errorf("%w: %d of %d body bytes arrived: %v", wire.ErrRequestCutShort, want-body.N, want, err)
	}
	if err != nil {
		return err
	}
	if body.N != 0 {
		return fmt.Errorf("%w: %d of %d body bytes arrived", wire.ErrRequestCutShort, want-body.N, want)
	}
	return nil
}

// Answer buffers are recycled by size class (powers of two from 4 KiB to 4 MiB): allocating a
// fresh one per answer cost its zeroing and its garbage collection, a third of the gateway's
// CPU when relaying 64 KiB fetch answers (profile in docs/benchmarks-gateway.md). sync.Pool
// drops idle buffers at garbage collection, so what is kept follows the load. Larger answers
// are allocated as before.
const (
	minBufferShift = 12
	maxBufferShift = 22
)

var bufferPools [maxBufferShift - minBufferShift + 1]sync.Pool

// bufferClass is the pool index of the smallest class holding n bytes, -1 above the largest.
func bufferClass(n int) int {
	for i := range bufferPools {
		if n <= 1<<(minBufferShift+i) {
			return i
		}
	}
	return -1
}

func getBuffer(n int) []byte {
	i := bufferClass(n)
	if i < 0 {
		return make([]byte, n)
	}
	if v, ok := bufferPools[i].Get().(*[]byte); ok {
		return (*v)[:n]
	}
	return make([]byte, n, 1<<(minBufferShift+i))
}

// putBuffer recycles b when its capacity is exactly a class (so it came from getBuffer); the
// caller must not use b afterwards.
func putBuffer(b []byte) {
	c := cap(b)
	i := bufferClass(c)
	if i < 0 || c != 1<<(minBufferShift+i) {
		return
	}
	b = b[:0]
	bufferPools[i].Put(&b)
}

// answerBound is how long the upstream may take to answer a forwarded request: the request
// timeout plus the wait the request itself asks of the broker (a Fetch's MaxWaitMillis, the
// TimeoutMillis of a Produce or an admin request), so a long poll or a slow replication the
// client asked for is not cut short. 0 when RequestTimeout is 0.
func (g *Gateway) answerBound(h wire.Header, frame []byte) time.Duration {
	if g.opts.RequestTimeout <= 0 {
		return 0
	}
	return g.boundWith(requestWaitMs(h, frame))
}

// boundWith is answerBound for a request that asks the broker to wait waitMs.
func (g *Gateway) boundWith(waitMs int32) time.Duration {
	if g.opts.RequestTimeout <= 0 {
		return 0
	}
	return g.opts.RequestTimeout + time.Duration(max(waitMs, 0))*time.Millisecond
}

// requestWaitMs reads the wait a request asks of the broker; 0 when it asks none or the frame
// cannot be read (a malformed request is the broker's to refuse). Produce and Fetch are read
// in place, not decoded, since their bodies are the forwarding path's bulk.
func requestWaitMs(h wire.Header, frame []byte) int32 {
	switch h.Key {
	case 0:
		_, timeout := produceAcksTimeout(h.Version, frame)
		return timeout
	case 1:
		_, rest, err := wire.ParseHeader(frame)
		if err != nil {
			return 0
		}
		if h.Version >= 12 { // flexible
			if rest, err = wire.SkipHeaderTags(rest); err != nil {
				return 0
			}
		}
		b := kbin.Reader{Src: rest}
		if h.Version < 15 {
			b.Int32() // ReplicaID
		}
		if w := b.Int32(); b.Ok() {
			return w
		}
		return 0
	}
	req := kmsg.RequestForKey(h.Key)
	tr, ok := req.(kmsg.TimeoutRequest)
	if !ok {
		return 0
	}
	_, rest, err := wire.ParseHeader(frame)
	if err != nil {
		return 0
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		if rest, err = wire.SkipHeaderTags(rest); err != nil {
			return 0
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return 0
	}
	return tr.Timeout()
}

// produceAcks reads Acks from a Produce request frame; -2 when it cannot be read (then an
// answer is expected, and a missing one fails the connection rather than hanging it).
func produceAcks(version int16, frame []byte) int16 {
	acks, _ := produceAcksTimeout(version, frame)
	return acks
}

// produceAcksTimeout reads Acks and TimeoutMillis from a Produce request frame: -2 and 0 when
// they cannot be read.
func produceAcksTimeout(version int16, frame []byte) (int16, int32) {
	_, rest, err := wire.ParseHeader(frame)
	if err != nil {
		return -2, 0
	}
	// Read per Produce on the forwarding path: the version decides the layout, without building
	// a ProduceRequest to ask it.
	flexible := version >= 9
	if flexible {
		if rest, err = wire.SkipHeaderTags(rest); err != nil {
			return -2, 0
		}
	}
	b := kbin.Reader{Src: rest}
	if version >= 3 {
		if flexible {
			b.CompactNullableString()
		} else {
			b.NullableString()
		}
	}
	acks := b.Int16()
	timeout := b.Int32()
	if !b.Ok() {
		return -2, 0
	}
	return acks, timeout
}
