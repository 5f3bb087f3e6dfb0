package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Conn describes the connection a request arrived on.
type Conn struct {
	ID       uint64
	Remote   net.Addr
	Listener string
	// principal is who the connection has authenticated as (SASL, or a TLS client certificate);
	// nil until then, which reads as User:ANONYMOUS as in Kafka. It changes at most at
	// (re-)authentication, while handlers of the same connection may read it, so it is atomic.
	principal atomic.Pointer[Principal]
	// sasl is the connection's SASL state; only the connection's own goroutine (the wire loop
	// and the handlers it calls, one request at a time) touches it.
	sasl saslState
	// host caches Host: the peer's address never changes, and working it out allocated
	// several times per heartbeat (issue 12).
	host atomic.Pointer[string]
	// Memo is the handler's per-connection memory (a steady heartbeat's ticket, say). Only the
	// connection's own goroutine touches it: the wire loop calls the handler one request at a
	// time.
	Memo any
}

// Host is the peer as Kafka names a client's host: "/" and the IP without the port (the whole
// address when it has no port); "" without a remote address.
func (c *Conn) Host() string {
	if h := c.host.Load(); h != nil {
		return *h
	}
	if c.Remote == nil {
		return ""
	}
	h := "/" + c.Remote.String()
	if host, _, err := net.SplitHostPort(c.Remote.String()); err == nil {
		h = "/" + host
	}
	c.host.Store(&h)
	return h
}

type saslState struct {
	required      bool
	authenticated bool
	expires       time.Time // zero: the session does not expire
	exchange      any       // the handler's exchange in progress, nil between exchanges
	mechanism     string    // of the last completed exchange
	raw           bool      // the exchange reads bare tokens (SaslHandshake v0)
	closeAfter    bool
}

// SASLRequired says whether the connection arrived on a SASL listener.
func (c *Conn) SASLRequired() bool { return c.sasl.required }

// Authenticated says whether a SASL exchange has completed on the connection.
func (c *Conn) Authenticated() bool { return c.sasl.authenticated }

// SASLExchange is the exchange a handler parked between SaslHandshake and the last
// SaslAuthenticate; while it is set, nothing but SaslAuthenticate is served.
func (c *Conn) SASLExchange() any { return c.sasl.exchange }

// SetSASLExchange parks (or, with nil, drops) the exchange in progress.
func (c *Conn) SetSASLExchange(x any) { c.sasl.exchange, c.sasl.raw = x, false }

// ExpectRawSASLTokens makes the frames of the parked exchange bare SASL tokens, answered by
// the handler's SASLTokenHandler with bare tokens, as after a SaslHandshake v0.
func (c *Conn) ExpectRawSASLTokens() { c.sasl.raw = c.sasl.exchange != nil }

// SASLTokenHandler is implemented by a Handler that serves SaslHandshake v0: it gets each raw
// token frame and returns the token to send back; ok=false closes the connection unanswered.
type SASLTokenHandler interface {
	SASLToken(ctx context.Context, c *Conn, token []byte) (resp []byte, ok bool)
}

// SetAuthenticated completes an exchange of mechanism: the connection serves every API as p
// until expires (zero: for ever); after it, only a re-authentication (SaslHandshake) is served
// (KIP-368).
func (c *Conn) SetAuthenticated(p Principal, mechanism string, expires time.Time) {
	c.SetPrincipal(p)
	c.sasl.authenticated, c.sasl.mechanism, c.sasl.expires, c.sasl.exchange, c.sasl.raw = true, mechanism, expires, nil, false
}

// SASLMechanism is the mechanism of the last completed exchange.
func (c *Conn) SASLMechanism() string { return c.sasl.mechanism }

// CloseAfterResponse closes the connection once the response being prepared is written (a
// failed authentication, as Kafka does).
func (c *Conn) CloseAfterResponse() { c.sasl.closeAfter = true }

// admits is the SASL gate of a request key: what Kafka's authenticator lets through before,
// during and after an exchange. why is the reason to close the connection.
func (c *Conn) admits(key int16, now time.Time) (ok bool, why string) {
	const apiVersions, saslHandshake, saslAuthenticate = 18, 17, 36
	s := &c.sasl
	switch {
	case !s.required:
		return true, ""
	case s.exchange != nil:
		return key == saslAuthenticate, fmt.Sprintf("%s during SASL authentication", kmsg.NameForKey(key))
	case !s.authenticated:
		return key == apiVersions || key == saslHandshake, fmt.Sprintf("%s before SASL authentication", kmsg.NameForKey(key))
	case !s.expires.IsZero() && now.After(s.expires):
		return key == saslHandshake, fmt.Sprintf("%s after the SASL session expired (connections.max.reauth.ms) without re-authentication", kmsg.NameForKey(key))
	}
	return true, ""
}

// Principal is an authenticated identity as Kafka names it ("User:alice" is {User, alice}).
type Principal struct {
	Type string
	Name string
}

// Anonymous is the principal of a connection that has not authenticated.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

func (p Principal) String() string { return p.Type + ":" + p.Name }

// Principal is who the connection has authenticated as; Anonymous before any authentication.
func (c *Conn) Principal() Principal {
	if p := c.principal.Load(); p != nil {
		return *p
	}
	return Anonymous
}

// SetPrincipal records the identity an authentication established.
func (c *Conn) SetPrincipal(p Principal) { c.principal.Store(&p) }

// Request is one decoded request handed to the Handler.
type Request struct {
	Header
	// Body is the decoded request, its version set. When the handler asked for the body not to
	// be decoded (ApiVersions above its maximum) it is an empty request of that key.
	Body kmsg.Request
	Conn *Conn
}

// Handler is what the wire layer serves. It is called from one goroutine per connection.
type Handler interface {
	// NewRequest returns an empty request to decode a body of key at version into. ok=false
	// means the key or version is not served: the connection is closed, as Kafka does.
	// decode=false means the body must not be parsed (its format is unknown), but the handler
	// still answers.
	NewRequest(key, version int16) (req kmsg.Request, decode, ok bool)
	// Handle answers one request. A nil response closes the connection without an answer. ctx
	// is cancelled when the connection closes or a shutdown runs out of time.
	Handle(ctx context.Context, r *Request) kmsg.Response
}

// RequestRecycler is implemented by a Handler that lets a connection decode a request into the
// request it decoded its previous one of the same key into: the request and its top-level array
// are then not allocated again (kmsg decodes into the arrays a request already has). Only keys
// whose handler keeps nothing of the request once Handle has returned, and whose answer refers
// to none of its memory, may be recycled.
type RequestRecycler interface {
	// NewRequestInto is NewRequest for a connection that holds spare, a request Recycle returned
	// (nil: none): when spare is of key and the version is served, it answers spare.
	NewRequestInto(spare kmsg.Request, key, version int16) (req kmsg.Request, decode, ok bool)
	// Recycle is called once Handle has returned for req: it answers req reset for another
	// decode of its key, or nil when its key is not one to recycle.
	Recycle(req kmsg.Request) kmsg.Request
}

// Forwarder is implemented by a Handler that passes some requests on without decoding them
// (gateway mode: everything but the group APIs goes to an upstream Kafka broker).
type Forwarder interface {
	// Forwards says whether the request with this header and body is passed on.
	Forwards(c *Conn, h Header, body []byte) bool
	// Forward passes frame (header and body, without the size prefix) on and returns the
	// response frame to write back, size prefix included; nil when the request has none (a
	// Produce with acks=0). An error closes the client's connection, as a broker failure
	// looks to a client. Forward calls reserve with the answer's size (prefix included) once
	// it knows it and before allocating anything for it: reserve exchanges the request's
	// share of queued.max.request.bytes for the answer's, waiting while it does not fit, and
	// fails when it never could (or the connection closes meanwhile).
	Forward(ctx context.Context, c *Conn, h Header, frame []byte, reserve func(n int) error) ([]byte, error)
	// Release takes back a response frame Forward returned, once it has been written (or the
	// write failed); the Forwarder may reuse its memory. read is when the request's frame had
	// been read and written when the answer's write returned (zero when it failed): what of
	// that span the Forwarder did not spend waiting for its upstream is the latency it added.
	Release(c *Conn, frame []byte, read, written time.Time)
	// Closed releases what the connection held (its upstream connections).
	Closed(c *Conn)
}

// BodyForwarder is a Forwarder that can pass a large request on while its body is still
// arriving (a Produce of big batches): the wire server hands over the frame's first bytes,
// already read, and the rest unread on the client's socket, which the forwarder copies to its
// upstream socket directly (splice(2) on Linux: the bytes never enter user memory). The
// request's share of queued.max.request.bytes is reserved exactly as for a frame read whole.
type BodyForwarder interface {
	Forwarder
	// ForwardsBody says whether the request whose frame starts with head (its header at least)
	// is passed on with ForwardBody.
	ForwardsBody(c *Conn, h Header, head []byte) bool
	// ForwardBody is Forward for a frame of which only head has been read: body yields the
	// rest, exactly. A body the client does not finish (it closed mid-request, or stalled until
	// the connection's read deadline) must fail with an error wrapping ErrRequestCutShort, and
	// its partial frame must not reach the upstream as a request.
	ForwardBody(ctx context.Context, c *Conn, h Header, head []byte, body *io.LimitedReader, reserve func(n int) error) ([]byte, error)
}

// ErrRequestCutShort is a BodyForwarder's error for a request body the client did not finish:
// the connection closes as for a frame cut short ("truncated frame"; "shutdown" while draining).
var ErrRequestCutShort = errors.New("request frame cut short by end of stream")

// minForwardedBody is the smallest unread remainder of a frame worth a BodyForwarder's direct
// copy: below it, reading the frame into memory costs no more than the extra write and the
// splice's pipe.
const minForwardedBody = 8 << 10

// Options are the transport limits, validated by the caller's config.
type Options struct {
	ListenerName    string
	MaxRequestBytes int32
	IdleTimeout     time.Duration
	MaxConnections  int
	Logger          *zap.Logger
	Metrics         *Metrics

	// Budget is the process-wide queued.max.request.bytes, shared by every listener; nil:
	// unbounded.
	Budget *Budget

	// TLS makes the listener SSL or SASL_SSL: each connection does a TLS handshake first.
	TLS *tls.Config
	// TLSPrincipal maps a verified client certificate to the connection's principal on an SSL
	// listener (ssl.client.auth); an error closes the connection. Without a certificate, or on a
	// SASL listener, the principal does not come from the certificate.
	TLSPrincipal func(*x509.Certificate) (Principal, error)
	// SASL makes the listener SASL_PLAINTEXT or SASL_SSL: until a connection authenticates,
	// only ApiVersions, SaslHandshake and SaslAuthenticate are served; anything else closes it.
	SASL bool
	// SASLMaxReceive bounds a frame while a SASL listener's connection is not authenticated or
	// re-authenticating (sasl.server.max.receive.size); 0: only MaxRequestBytes.
	SASLMaxReceive int32
}

// Server accepts connections on one listener and runs a loop per connection.
type Server struct {
	opts    Options
	handler Handler
	log     *zap.Logger
	metrics *Metrics

	nextID   atomic.Uint64
	draining atomic.Bool

	// baseCtx is the parent of every request context; cancelled when a shutdown gives up waiting.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	// drainCtx is cancelled when a shutdown starts: connections waiting for budget stop waiting
	// (they have nothing read yet, so nothing is lost).
	drainCtx    context.Context
	cancelDrain context.CancelFunc

	mu    sync.Mutex
	ln    net.Listener
	conns map[*serverConn]struct{}
	wg    sync.WaitGroup
	// lastRejectLog and rejectedUnlogged rate-limit the max.connections WARN line (under mu).
	lastRejectLog    time.Time
	rejectedUnlogged int
}

// rejectLogEvery is the shortest interval between two max.connections WARN lines.
const rejectLogEvery = 10 * time.Second

// NewServer returns a server that serves handler with the given limits.
func NewServer(opts Options, handler Handler) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = int(^uint(0) >> 1)
	}
	if opts.Budget == nil {
		opts.Budget = NewBudget(0, nil, opts.Logger)
	}
	ctx, cancel := context.WithCancel(context.Background())
	drainCtx, cancelDrain := context.WithCancel(context.Background())
	return &Server{
		opts:        opts,
		handler:     handler,
		log:         opts.Logger,
		metrics:     opts.Metrics,
		baseCtx:     ctx,
		cancelBase:  cancel,
		drainCtx:    drainCtx,
		cancelDrain: cancelDrain,
		conns:       map[*serverConn]struct{}{},
	}
}

// Serve accepts connections until Shutdown. It returns nil after a shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.ln = ln
	s.mu.Unlock()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.draining.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporaryAccept(err) {
				// Out of file descriptors and similar: wait rather than spin, keep serving.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		backoff = 0
		s.startConn(nc)
	}
}

func isTemporaryAccept(err error) bool {
	var se interface{ Temporary() bool }
	return errors.As(err, &se) && se.Temporary()
}

func (s *Server) startConn(nc net.Conn) {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.opts.MaxConnections {
		s.metrics.connectionsRejected.Inc()
		// A flood of connections must not become a flood of log lines: one per window, with
		// how many were closed since the last one.
		if now := time.Now(); now.Sub(s.lastRejectLog) >= rejectLogEvery {
			s.log.Warn("closing connection: max.connections reached", zap.Stringer("peer", nc.RemoteAddr()),
				zap.Int("max_connections", s.opts.MaxConnections), zap.Int("rejected_since_last_line", s.rejectedUnlogged+1))
			s.lastRejectLog, s.rejectedUnlogged = now, 0
		} else {
			s.rejectedUnlogged++
		}
		s.mu.Unlock()
		nc.Close()
		return
	}
	ctx, cancel := context.WithCancel(s.baseCtx)
	c := &serverConn{
		srv:    s,
		nc:     nc,
		info:   &Conn{ID: s.nextID.Add(1), Remote: nc.RemoteAddr(), Listener: s.opts.ListenerName},
		ctx:    ctx,
		cancel: cancel,
		base:   time.Now(),
	}
	c.info.sasl.required = s.opts.SASL
	if s.opts.TLS != nil {
		// Wrapped here, handshaken on the connection's goroutine: the accept loop never waits
		// for a peer, and Shutdown's deadlines and Close reach the TLS connection.
		c.nc = tls.Server(nc, s.opts.TLS)
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.metrics.connectionsOpen.Inc()
	go c.run()
}

// Shutdown stops accepting, lets requests in flight finish and answers them, closes idle
// connections at once, and after ctx expires cancels and closes whatever is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	s.cancelDrain()
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		// Unblock connections waiting for their next request; one in the middle of a request
		// finishes it and then sees draining.
		c.nc.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.cancelBase()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	<-done
	return ctx.Err()
}

// Addr is the listener's address once Serve runs.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

type serverConn struct {
	srv    *Server
	nc     net.Conn
	info   *Conn
	ctx    context.Context
	cancel context.CancelFunc
	// base is when the connection started; readBy and writeBy are the deadlines last set on
	// nc (see extendDeadline) as times since base. Only the connection's own goroutine
	// touches them.
	base            time.Time
	readBy, writeBy time.Duration
	// raw is nc's socket read and written directly (plaintext TCP on Linux), nil otherwise.
	raw *rawSocket
	// clientID is the client id of the last request served, handed to parseHeader so that the
	// same id is not copied out of every frame; only the connection's own goroutine touches it.
	clientID string
	// spare is the last request the handler recycled (RequestRecycler), nil if none; only the
	// connection's own goroutine touches it.
	spare kmsg.Request
}

// writeTimeout bounds writing one response to a peer that stopped reading.
const writeTimeout = 30 * time.Second

// extendDeadline makes sure a deadline at least d after now (the connection's clock: the time
// since base) is set, through set. It moves the deadline only once it has come nearer than d,
// and then to d plus an eighth: setting a deadline resets the poller's timer under a lock, which
// cost a busy connection 3-4% of its CPU when done per request (issue 12); now a connection does
// it about once per d/8. A timeout therefore fires between d and d+d/8 after the last activity,
// never before d.
func extendDeadline(set func(time.Time) error, base time.Time, by *time.Duration, d, now time.Duration) {
	if now+d > *by {
		*by = now + d + d/8
		set(base.Add(*by))
	}
}

// since is the connection's clock: the time since it started. Reading the time since a time
// that carries a monotonic reading reads one clock, time.Now reads two (wall and monotonic).
// A request read the clocks seven times, 2.5% of a steady heartbeat's CPU (issue 12); it now
// reads the monotonic clock three times: before waiting for the frame (idle deadline), before
// the handler and after it (latency, and the write deadline).
func (c *serverConn) since() time.Duration { return time.Since(c.base) }

func (c *serverConn) run() {
	s := c.srv
	reason := closePeerClosed
	defer func() {
		c.cancel()
		c.nc.Close()
		if fwd, ok := s.handler.(Forwarder); ok {
			fwd.Closed(c.info)
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.metrics.connectionsOpen.Dec()
		s.metrics.connectionsClosed.WithLabelValues(string(reason)).Inc()
		s.wg.Done()
	}()
	if tc, ok := c.nc.(*tls.Conn); ok {
		if reason = c.handshake(tc); reason != "" {
			return
		}
	}
	var socket io.Reader = c.nc
	if c.raw = newRawSocket(c.nc); c.raw != nil {
		socket = c.raw
	}
	br := bufio.NewReaderSize(&countingReader{r: socket, n: s.metrics.bytesIn}, 16<<10)
	budget := s.opts.Budget
	var held int64 // budget reserved for the frame being read or answered
	defer func() { budget.Release(held) }()
	// reserve trades the request's reservation for one of the upstream answer's size before
	// the answer is read into memory: a huge answer waits for room, or closes the connection
	// when it could never fit, instead of being allocated beyond the budget.
	reserve := func(n int) error {
		budget.Release(held)
		held = 0
		if limit := budget.Limit(); limit > 0 && int64(n) > limit {
			return fmt.Errorf("an answer of %d bytes exceeds queued.max.request.bytes %d", n, limit)
		}
		if err := budget.AcquireAnswer(c.ctx, int64(n)); err != nil {
			return err
		}
		held = int64(n)
		return nil
	}
	var out []byte
	// in is the previous request's frame, read into again when nothing decoded from it can
	// still refer to it (aliasFree); sizeBuf holds the size prefix.
	var in []byte
	var sizeBuf [4]byte
	for !s.draining.Load() {
		if s.opts.IdleTimeout > 0 {
			extendDeadline(c.nc.SetReadDeadline, c.base, &c.readBy, s.opts.IdleTimeout, c.since())
		}
		size, err := readFrameSize(br, s.opts.MaxRequestBytes, &sizeBuf)
		if err == nil && c.info.sasl.required && (!c.info.sasl.authenticated || c.info.sasl.exchange != nil) &&
			s.opts.SASLMaxReceive > 0 && size > s.opts.SASLMaxReceive {
			// An unauthenticated peer must not make us reserve and read 100 MiB frames.
			err = &FrameError{Reason: fmt.Sprintf("frame size %d during SASL authentication exceeds sasl.server.max.receive.size %d", size, s.opts.SASLMaxReceive)}
		}
		if err == nil && budget.Limit() > 0 && int64(size) > budget.Limit() {
			// Only reachable if the configuration check was bypassed: it could never fit.
			err = &FrameError{Reason: fmt.Sprintf("frame size %d exceeds queued.max.request.bytes %d", size, budget.Limit())}
		}
		if err != nil {
			reason = c.readFailure(err)
			return
		}
		if !budget.TryAcquire(int64(size)) {
			if err := budget.Acquire(s.drainCtx, int64(size)); err != nil {
				break // shutdown: this frame was not read, so it is not lost
			}
			if s.opts.IdleTimeout > 0 {
				// Waiting for the budget is not the peer's idleness.
				extendDeadline(c.nc.SetReadDeadline, c.base, &c.readBy, s.opts.IdleTimeout, c.since())
			}
		}
		held = int64(size)
		if raw, read, handled, err := c.forwardBody(br, size, reserve); handled {
			if reason = c.answerForwarded(raw, read, err); reason != "" {
				return
			}
			budget.Release(held)
			held = 0
			continue
		}
		var frame []byte
		var pooled bool
		if in != nil {
			frame, err = readFrameBody(br, size, in)
		} else {
			// A frame of its own, from the pool of forwarded frames' buffers: given back once
			// forwarded (nothing refers to it then); a frame answered here is never given back.
			frame, pooled, err = readPooledFrameBody(br, size)
		}
		in = nil // until serve says otherwise, something may keep the frame
		if err != nil {
			reason = c.readFailure(err)
			return
		}
		if c.info.sasl.raw {
			if reason = c.rawToken(frame); reason != "" {
				return
			}
			budget.Release(held)
			held = 0
			continue
		}
		if c.info.sasl.required && len(frame) >= 2 {
			if ok, why := c.info.admits(int16(uint16(frame[0])<<8|uint16(frame[1])), time.Now()); !ok {
				// Kafka's authenticator closes the connection without an answer.
				reason = closeUnauthenticatedRequest
				c.srv.log.Info("closing connection", zap.Stringer("peer", c.info.Remote), zap.Uint64("conn", c.info.ID), zap.String("reason", why))
				return
			}
		}
		if raw, read, forwarded, err := c.forward(frame, reserve); forwarded {
			if pooled {
				putFrame(frame) // written upstream; nothing refers to it any more
			}
			if reason = c.answerForwarded(raw, read, err); reason != "" {
				return
			}
			budget.Release(held)
			held = 0
			continue
		} else {
			resp, hdr, reusable, served, why := c.serve(frame)
			if reusable && cap(frame) <= initialFrameChunk {
				in = frame
			}
			if resp == nil {
				reason = closeBadRequest
				c.warn("closing connection", why)
				return
			}
			// The request is done with; its answer is what needs memory now. Nothing is held
			// while waiting for the answer's bytes, so this wait cannot deadlock with anyone's.
			budget.Release(held)
			held = 0
			limit := budget.Limit()
			if limit <= 0 {
				limit = math.MaxInt64
			}
			respBytes, fits := encodedSizeAtMost(resp, limit)
			if !fits {
				reason = closeResponseTooLarge
				c.warn("closing connection", fmt.Sprintf("the %s answer would exceed queued.max.request.bytes %d", kmsg.NameForKey(hdr.Key), limit))
				return
			}
			if !budget.TryAcquireAnswer(respBytes) {
				if err := budget.AcquireAnswer(c.ctx, respBytes); err != nil {
					reason = closeShutdown
					return
				}
				served = c.since() // the write's deadline counts from now, not from the handler's end
			}
			held = respBytes
			out = AppendResponse(out[:0], hdr.CorrelationID, resp)
			if reason = c.writeAt(out, served); reason != "" {
				return
			}
		}
		if c.info.sasl.closeAfter {
			reason = closeAuthenticationFailed
			return
		}
		budget.Release(held)
		held = 0
		if cap(out) > initialFrameChunk {
			out = nil // do not pin one huge response's buffer for the connection's lifetime
		}
	}
	reason = closeShutdown
}

// rawToken answers a bare SASL token (after SaslHandshake v0) with a bare, size-prefixed token;
// a non-empty result is why the connection closes.
func (c *serverConn) rawToken(token []byte) closeReason {
	th, ok := c.srv.handler.(SASLTokenHandler)
	var out []byte
	if ok {
		out, ok = th.SASLToken(c.ctx, c.info, token)
	}
	if !ok {
		return closeAuthenticationFailed
	}
	return c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...))
}

// handshake runs the TLS handshake and takes the principal from the client certificate; a
// non-empty result is why the connection closes.
func (c *serverConn) handshake(tc *tls.Conn) closeReason {
	s := c.srv
	ctx, cancel := context.WithTimeout(c.ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		// A port scanner or a plaintext client is not worth a WARN per connection.
		s.log.Info("closing connection: TLS handshake failed", zap.Stringer("peer", c.info.Remote), zap.Uint64("conn", c.info.ID), zap.Error(err))
		return closeTLSHandshakeFailed
	}
	certs := tc.ConnectionState().PeerCertificates
	if s.opts.SASL || s.opts.TLSPrincipal == nil || len(certs) == 0 {
		return ""
	}
	p, err := s.opts.TLSPrincipal(certs[0])
	if err != nil {
		c.warn("closing connection", "client certificate: "+err.Error())
		return closePrincipalMappingFailed
	}
	c.info.SetPrincipal(p)
	s.log.Debug("TLS client authenticated", zap.Stringer("peer", c.info.Remote), zap.Uint64("conn", c.info.ID), zap.Stringer("principal", p))
	return ""
}

// handshakeTimeout bounds a TLS handshake, so a peer that connects and says nothing does not
// hold a connection slot for connections.max.idle.ms.
const handshakeTimeout = 10 * time.Second

// write sends one response frame; a non-empty result is why the connection closes.
func (c *serverConn) write(frame []byte) closeReason { return c.writeAt(frame, c.since()) }

// writeAt is write with the time (since) as read just before.
func (c *serverConn) writeAt(frame []byte, now time.Duration) closeReason {
	extendDeadline(c.nc.SetWriteDeadline, c.base, &c.writeBy, writeTimeout, now)
	var n int
	var err error
	if c.raw != nil && len(frame) <= initialFrameChunk {
		// A larger answer goes through net.Conn: copying megabytes into the socket is kernel
		// work long enough that the scheduler should be told, so another thread takes the P.
		n, err = c.raw.Write(frame)
	} else {
		n, err = c.nc.Write(frame)
	}
	c.srv.metrics.bytesOut.Add(float64(n))
	if err != nil {
		c.warn("closing connection", "writing response: "+err.Error())
		return closeWriteFailed
	}
	return ""
}

// readFailure classifies why reading the next frame stopped and logs what an operator needs.
func (c *serverConn) readFailure(err error) closeReason {
	var fe *FrameError
	switch {
	case errors.As(err, &fe):
		c.warn("closing connection", fe.Reason)
		return closeBadFrame
	case errors.Is(err, io.EOF):
		return closePeerClosed
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.warn("closing connection", "frame cut short by end of stream")
		return closeTruncatedFrame
	case errors.Is(err, os.ErrDeadlineExceeded):
		if c.srv.draining.Load() {
			return closeShutdown
		}
		c.srv.log.Debug("closing idle connection", zap.Stringer("peer", c.info.Remote), zap.Duration("idle", c.srv.opts.IdleTimeout))
		return closeIdle
	default:
		return closeReadError
	}
}

func (c *serverConn) warn(msg, reason string) {
	c.srv.log.Warn(msg, zap.Stringer("peer", c.info.Remote), zap.Uint64("conn", c.info.ID), zap.String("reason", reason))
}

// answerForwarded finishes a forwarded request: an error closes the connection, a nil answer
// means none is due (acks=0), and any other is written and given back to the Forwarder. A
// non-empty result is why the connection closes.
func (c *serverConn) answerForwarded(raw []byte, read time.Time, err error) closeReason {
	switch {
	case errors.Is(err, ErrRequestCutShort) && c.srv.draining.Load():
		return closeShutdown // its read deadline ended the body's wait, as for a frame read whole
	case errors.Is(err, ErrRequestCutShort):
		c.warn("closing connection", err.Error())
		return closeTruncatedFrame
	case err != nil:
		c.warn("closing connection", err.Error())
		return closeUpstreamFailed
	case raw == nil:
		return ""
	}
	// The answer's size as the upstream sent it is what is held (reserved before it was read;
	// a rewrite changes it by a few bytes of host names at most). It is written as it came:
	// copying it (a fetch's records) into out would cost a copy and, for answers over
	// initialFrameChunk, an allocation per answer.
	reason := c.write(raw)
	var written time.Time
	if reason == "" {
		written = time.Now()
	}
	c.srv.handler.(Forwarder).Release(c.info, raw, read, written)
	return reason
}

// forwardBody passes on a frame of size bytes, of which br holds the start, without reading
// the rest into memory, when the handler is a BodyForwarder that takes it; handled=false
// leaves the frame to be read whole (nothing of it has been consumed then). Only plaintext
// connections without SASL qualify: the body must be on a TCP socket, and a SASL connection's
// frames pass the authentication gate whole.
func (c *serverConn) forwardBody(br *bufio.Reader, size int32, reserve func(int) error) (raw []byte, read time.Time, handled bool, err error) {
	bf, ok := c.srv.handler.(BodyForwarder)
	if !ok || c.info.sasl.required || int(size) < minForwardedBody {
		return nil, read, false, nil
	}
	tcp, ok := c.nc.(*net.TCPConn)
	if !ok {
		return nil, read, false, nil
	}
	if br.Buffered() < 64 {
		// The header and a Produce's acks; a client that sent fewer bytes than that of a frame
		// this size is waited for as a whole read would.
		if _, err := br.Peek(64); err != nil {
			return nil, read, false, nil // the whole read reports it
		}
	}
	n := min(int(size), br.Buffered())
	rest := int(size) - n
	if rest < minForwardedBody {
		return nil, read, false, nil
	}
	head, _ := br.Peek(n) // buffered already: no read
	read = time.Now()
	hdr, _, perr := ParseHeader(head)
	if perr != nil || !bf.ForwardsBody(c.info, hdr, head) {
		return nil, read, false, nil
	}
	body := &io.LimitedReader{R: tcp, N: int64(rest)}
	raw, err = bf.ForwardBody(c.ctx, c.info, hdr, head, body, reserve)
	br.Discard(n) // head is the Forwarder's no longer: it has been written upstream (or failed)
	c.srv.metrics.bytesIn.Add(float64(int64(rest) - body.N))
	if err == nil && body.N != 0 {
		err = fmt.Errorf("forwarder left %d bytes of a %d-byte request unread", body.N, size)
	}
	c.srv.metrics.observeForwarded(hdr.Key, err, time.Since(read))
	return raw, read, true, err
}

// forward passes the frame on when the handler is a Forwarder that wants it; forwarded=false
// leaves the frame to serve. read is when the frame had been read (before its header was
// parsed and its route chosen).
func (c *serverConn) forward(frame []byte, reserve func(int) error) (raw []byte, read time.Time, forwarded bool, err error) {
	fwd, ok := c.srv.handler.(Forwarder)
	if !ok {
		return nil, read, false, nil
	}
	read = time.Now()
	hdr, rest, err := ParseHeader(frame)
	if err != nil || !fwd.Forwards(c.info, hdr, rest) {
		return nil, read, false, nil // a bad header is serve's to report
	}
	raw, err = fwd.Forward(c.ctx, c.info, hdr, frame, reserve)
	c.srv.metrics.observeForwarded(hdr.Key, err, time.Since(read))
	return raw, read, true, err
}

// serve decodes one frame and runs the handler. A nil response means close, with why.
// reusable reports that nothing decoded from the frame refers to its bytes, so the connection
// may read the next request into it. served is when the handler returned (since).
func (c *serverConn) serve(frame []byte) (resp kmsg.Response, hdr Header, reusable bool, served time.Duration, why string) {
	s := c.srv
	hdr, rest, err := parseHeader(frame, c.clientID)
	if err != nil {
		return nil, hdr, false, 0, err.Error()
	}
	c.clientID = hdr.ClientID
	var (
		req        kmsg.Request
		decode, ok bool
	)
	recycler, recycles := s.handler.(RequestRecycler)
	if recycles {
		req, decode, ok = recycler.NewRequestInto(c.spare, hdr.Key, hdr.Version)
		if req == c.spare {
			c.spare = nil // until the handler gives it back
		}
	} else {
		req, decode, ok = s.handler.NewRequest(hdr.Key, hdr.Version)
	}
	if !ok {
		return nil, hdr, false, 0, fmt.Sprintf("api key %d version %d is not served", hdr.Key, hdr.Version)
	}
	reusable = !decode || aliasFree(req)
	req.SetVersion(hdr.Version)
	if decode {
		if req.IsFlexible() {
			if rest, err = SkipHeaderTags(rest); err != nil {
				return nil, hdr, false, 0, err.Error()
			}
		}
		if err := req.ReadFrom(rest); err != nil {
			return nil, hdr, false, 0, fmt.Sprintf("undecodable %s v%d body: %v", kmsg.NameForKey(hdr.Key), hdr.Version, err)
		}
	}
	start := c.since()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panic; closing connection", zap.Any("panic", p), zap.String("api", kmsg.NameForKey(hdr.Key)), zap.Int16("version", hdr.Version), zap.ByteString("stack", debug.Stack()))
			resp, reusable, why = nil, false, "handler panic"
		}
	}()
	resp = s.handler.Handle(c.ctx, &Request{Header: hdr, Body: req, Conn: c.info})
	served = c.since()
	if recycles {
		if spare := recycler.Recycle(req); spare != nil {
			c.spare = spare
		}
	}
	s.metrics.observe(hdr.Key, resp, served-start)
	if resp == nil {
		return nil, hdr, false, served, "handler gave no response"
	}
	return resp, hdr, reusable, served, ""
}

var aliasFreeTypes sync.Map // reflect.Type -> bool

// aliasFreeByKey caches aliasFree per request key (the type kmsg decodes that key into), so
// that the answer costs a load instead of a sync.Map lookup per request.
var aliasFreeByKey [512]atomic.Pointer[aliasFreeEntry]

type aliasFreeEntry struct {
	t    reflect.Type
	free bool
}

// aliasFree reports whether a decoded request req can refer to its frame's bytes: kmsg
// decodes strings as copies but byte fields (join metadata, assignments) as slices of the
// frame, which a handler may keep in group state. Anything the check does not know is treated
// as aliasing.
func aliasFree(req kmsg.Request) bool {
	t := reflect.TypeOf(req)
	k := int(req.Key())
	if k >= 0 && k < len(aliasFreeByKey) {
		if e := aliasFreeByKey[k].Load(); e != nil && e.t == t {
			return e.free
		}
	}
	free := aliasFreeType(t)
	if k >= 0 && k < len(aliasFreeByKey) {
		aliasFreeByKey[k].Store(&aliasFreeEntry{t: t, free: free})
	}
	return free
}

// aliasFreeType is aliasFree for a request type.
func aliasFreeType(t reflect.Type) bool {
	if v, ok := aliasFreeTypes.Load(t); ok {
		return v.(bool)
	}
	free := typeAliasFree(t, map[reflect.Type]bool{})
	aliasFreeTypes.Store(t, free)
	return free
}

func typeAliasFree(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true // already being checked further up
	}
	seen[t] = true
	if t == reflect.TypeFor[kmsg.Tags]() {
		// A request's unknown tagged fields are slices of the frame too, but nothing reads a
		// request's UnknownTags: they are skipped, as the protocol asks.
		return true
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	case reflect.Pointer, reflect.Array:
		return typeAliasFree(t.Elem(), seen)
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Uint8 && typeAliasFree(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if !typeAliasFree(t.Field(i).Type, seen) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

type countingReader struct {
	r io.Reader
	n interface{ Add(float64) }
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 { // nearly every other read finds nothing (the peer's next request is not there yet)
		c.n.Add(float64(n))
	}
	return n, err
}
