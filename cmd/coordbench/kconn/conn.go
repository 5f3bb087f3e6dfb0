// Package kconn is a minimal Kafka client connection for load generation: one TCP connection,
// one request in flight, versions negotiated once with ApiVersions. A simulated client owns one
// Conn, so what is measured is the server's answer time plus loopback, with no client-side
// batching, routing or retries in between.
package kconn

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxResponseBytes bounds a response frame; anything larger is a broken stream, not a response.
const MaxResponseBytes = 64 << 20

// DefaultTimeout bounds one request when the context has no earlier deadline.
const DefaultTimeout = 30 * time.Second

// VersionRange is what the server advertises for one API key.
type VersionRange struct{ Min, Max int16 }

// Conn is one connection. Not safe for concurrent use.
type Conn struct {
	addr     string
	c        net.Conn
	r        *bufio.Reader
	fmt      *kmsg.RequestFormatter
	buf      []byte
	corr     int32
	versions map[int16]VersionRange
	broken   error
	deadline time.Time // last set on c
	// picked caches pick without a limit, by key: 0 not yet, -1 unusable, else version+1.
	picked [128]int16
}

// Dial connects and negotiates versions with ApiVersions (v3, falling back to v0 when the
// server says it is too new for it).
func Dial(ctx context.Context, addr, clientID string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	k := &Conn{addr: addr, c: c, r: bufio.NewReaderSize(c, 64<<10),
		fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	if err := k.negotiate(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return k, nil
}

func (k *Conn) negotiate(ctx context.Context) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "coordbench", "1"
	req.SetVersion(3)
	resp, err := k.do(ctx, req)
	if err != nil {
		return fmt.Errorf("ApiVersions to %s: %w", k.addr, err)
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if av.ErrorCode == kerr.UnsupportedVersion.Code {
		req.SetVersion(0)
		if resp, err = k.do(ctx, req); err != nil {
			return fmt.Errorf("ApiVersions v0 to %s: %w", k.addr, err)
		}
		av = resp.(*kmsg.ApiVersionsResponse)
	}
	if err := kerr.ErrorForCode(av.ErrorCode); err != nil {
		return fmt.Errorf("ApiVersions to %s: %w", k.addr, err)
	}
	k.versions, k.picked = make(map[int16]VersionRange, len(av.ApiKeys)), [128]int16{}
	for _, a := range av.ApiKeys {
		k.versions[a.ApiKey] = VersionRange{a.MinVersion, a.MaxVersion}
	}
	return nil
}

// Versions is what the server advertised, by API key.
func (k *Conn) Versions() map[int16]VersionRange { return k.versions }

// Supports reports whether the server advertises key at a version this client can encode.
func (k *Conn) Supports(key int16) bool {
	_, ok := k.pick(key, -1)
	return ok
}

// pick is the highest version both sides know, capped at limit when limit >= 0.
func (k *Conn) pick(key int16, limit int16) (int16, bool) {
	if limit < 0 && key >= 0 && int(key) < len(k.picked) {
		// Worked out once per key: a map lookup and a new request value per request were a
		// measurable share of the load generator's CPU.
		if p := k.picked[key]; p != 0 {
			return p - 1, p > 0
		}
		v, ok := k.pickUncached(key, limit)
		k.picked[key] = -1
		if ok {
			k.picked[key] = v + 1
		}
		return v, ok
	}
	return k.pickUncached(key, limit)
}

func (k *Conn) pickUncached(key int16, limit int16) (int16, bool) {
	r, ok := k.versions[key]
	req := kmsg.RequestForKey(key)
	if !ok || req == nil {
		return 0, false
	}
	v := min(r.Max, req.MaxVersion())
	if limit >= 0 {
		v = min(v, limit)
	}
	return v, v >= r.Min
}

// Request sends req at the highest common version and waits for its response.
func (k *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return k.RequestCapped(ctx, req, -1)
}

// RequestCapped is Request with the version capped at maxVersion.
func (k *Conn) RequestCapped(ctx context.Context, req kmsg.Request, maxVersion int16) (kmsg.Response, error) {
	v, ok := k.pick(req.Key(), maxVersion)
	if !ok {
		return nil, fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), ErrUnsupported)
	}
	req.SetVersion(v)
	return k.do(ctx, req)
}

// ErrBroken wraps every transport failure: the connection is unusable afterwards and every
// later request on it fails at once with ErrBroken too.
var ErrBroken = errors.New("connection broken")

// ErrUnsupported means the server does not advertise the API at a usable version.
var ErrUnsupported = errors.New("API not supported by the server")

func (k *Conn) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if k.broken != nil {
		return nil, k.broken
	}
	resp, err := k.roundTrip(ctx, req)
	if err != nil && errors.Is(err, ErrBroken) {
		k.broken = err
		k.c.Close()
	}
	return resp, err
}

func (k *Conn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		// Moved only once it is nearer than DefaultTimeout, then to an eighth beyond it: a
		// request still fails after DefaultTimeout (to 9/8 of it) without a timer reset
		// per request.
		if now := time.Now(); now.Add(DefaultTimeout).After(k.deadline) {
			deadline = now.Add(DefaultTimeout + DefaultTimeout/8)
		} else {
			deadline = k.deadline
		}
	}
	if !deadline.Equal(k.deadline) {
		// Setting a socket deadline resets the poller's timers under a lock; the timed
		// window's requests share one context deadline, so it is set once per window, not per
		// request (the same for every target: only the client's CPU per request changes).
		k.c.SetDeadline(deadline)
		k.deadline = deadline
	}
	k.corr++
	k.buf = k.fmt.AppendRequest(k.buf[:0], req, k.corr)
	if _, err := k.c.Write(k.buf); err != nil {
		return nil, fmt.Errorf("write %s: %w: %w", kmsg.NameForKey(req.Key()), ErrBroken, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(k.r, size[:]); err != nil {
		return nil, fmt.Errorf("read %s response size: %w: %w", kmsg.NameForKey(req.Key()), ErrBroken, err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > MaxResponseBytes {
		return nil, fmt.Errorf("%s response size %d out of range: %w", kmsg.NameForKey(req.Key()), n, ErrBroken)
	}
	// A fresh buffer: decoded responses may alias it (kmsg keeps byte fields as sub-slices).
	body := make([]byte, n)
	if _, err := io.ReadFull(k.r, body); err != nil {
		return nil, fmt.Errorf("read %s response: %w: %w", kmsg.NameForKey(req.Key()), ErrBroken, err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != k.corr {
		return nil, fmt.Errorf("%s: correlation id %d, want %d: %w", kmsg.NameForKey(req.Key()), got, k.corr, ErrBroken)
	}
	body = body[4:]
	// Flexible responses carry a tag section in their header, except ApiVersions (KIP-511).
	if req.IsFlexible() && req.Key() != 18 {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, fmt.Errorf("%s response header: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[used:]
	for range n {
		if _, used = binary.Uvarint(b); used <= 0 {
			return nil, errors.New("bad tag key")
		}
		b = b[used:]
		size, used := binary.Uvarint(b)
		if used <= 0 || uint64(len(b)-used) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[used+int(size):]
	}
	return b, nil
}

// Close closes the connection.
func (k *Conn) Close() error { return k.c.Close() }

// Addr is the address this connection was dialled to.
func (k *Conn) Addr() string { return k.addr }
