// Package wire serves the Kafka protocol's transport: listeners, size-prefixed frames, request
// headers, one loop per connection that answers requests strictly in arrival order, and the
// limits that keep a hostile or broken peer from hurting anyone but itself.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FrameError is a framing or header problem; the connection it happened on is closed and
// nothing is answered, as Kafka does.
type FrameError struct {
	Reason string
}

func (e *FrameError) Error() string { return e.Reason }

// initialFrameChunk bounds what is allocated before the bytes of a frame have actually arrived:
// a peer that claims a 100 MB frame and sends nothing costs us this much, not 100 MB.
const initialFrameChunk = 64 << 10

// ReadFrame reads one size-prefixed frame. A negative size or one above max is rejected before
// any allocation of that size; the buffer then grows only as bytes arrive. A frame cut short by
// EOF returns io.ErrUnexpectedEOF; a clean EOF before the size prefix returns io.EOF.
func ReadFrame(r io.Reader, max int32) ([]byte, error) {
	size, err := ReadFrameSize(r, max)
	if err != nil {
		return nil, err
	}
	return ReadFrameBody(r, size)
}

// ReadFrameSize reads a frame's size prefix and checks it against max; nothing is allocated.
func ReadFrameSize(r io.Reader, max int32) (int32, error) {
	var sizeBuf [4]byte
	return readFrameSize(r, max, &sizeBuf)
}

// readFrameSize is ReadFrameSize with the caller's scratch for the prefix: a local array would
// escape through io.Reader and cost an allocation per request.
func readFrameSize(r io.Reader, max int32, sizeBuf *[4]byte) (int32, error) {
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return 0, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 0 {
		return 0, &FrameError{Reason: fmt.Sprintf("negative frame size %d", size)}
	}
	if size > max {
		return 0, &FrameError{Reason: fmt.Sprintf("frame size %d exceeds socket.request.max.bytes %d", size, max)}
	}
	return size, nil
}

// ReadFrameBody reads the size bytes of a frame whose prefix was read. Its buffer grows only as
// bytes arrive, so a peer that claims a large frame and goes silent costs one chunk.
func ReadFrameBody(r io.Reader, size int32) ([]byte, error) { return readFrameBody(r, size, nil) }

// readFrameBody is ReadFrameBody into reuse when it can hold the whole frame: a connection
// reads each request into the buffer of the previous one when nothing can still refer to it.
// A buffer too small is not grown up front, so a claimed size still costs only what arrives.
func readFrameBody(r io.Reader, size int32, reuse []byte) ([]byte, error) {
	if cap(reuse) >= int(size) {
		buf := reuse[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return buf, nil
	}
	buf := make([]byte, 0, min(int(size), initialFrameChunk))
	for len(buf) < int(size) {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), int(size)))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) && len(buf) < int(size) {
				return nil, io.ErrUnexpectedEOF
			}
			if len(buf) < int(size) {
				return nil, err
			}
		}
	}
	return buf, nil
}

// Header is a parsed request header (v1, or v2 for flexible versions).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string // a null client id is "", as Kafka's RequestHeader.parse treats it
}

// ParseHeader reads the fixed part of a request header. The caller decides from the key and
// version whether a tagged-field section follows (SkipHeaderTags); body is what comes after.
func ParseHeader(frame []byte) (h Header, rest []byte, err error) {
	return parseHeader(frame, "")
}

// parseHeader is ParseHeader that hands back known as the client id when the frame's client
// id has the same bytes: a connection sends one client id on every request, and copying it
// out of each frame (with kbin's *string besides) was two allocations per request (issue 12).
func parseHeader(frame []byte, known string) (h Header, rest []byte, err error) {
	r := kbin.Reader{Src: frame}
	h.Key = r.Int16()
	h.Version = r.Int16()
	h.CorrelationID = r.Int32()
	if n := r.Int16(); n >= 0 {
		if id := r.Span(int(n)); string(id) == known { // compares without allocating
			h.ClientID = known
		} else {
			h.ClientID = string(id)
		}
	}
	if err := r.Complete(); err != nil {
		return Header{}, nil, &FrameError{Reason: "truncated request header"}
	}
	return h, r.Src, nil
}

// SkipHeaderTags skips the request header's tagged fields (header v2). Unknown tags are
// ignored, as the protocol requires.
func SkipHeaderTags(rest []byte) ([]byte, error) {
	if len(rest) > 0 && rest[0] == 0 {
		return rest[1:], nil // no tags, as nearly every client sends: no reader to allocate
	}
	r := kbin.Reader{Src: rest}
	kmsg.SkipTags(&r)
	if err := r.Complete(); err != nil {
		return nil, &FrameError{Reason: "truncated header tagged fields"}
	}
	return r.Src, nil
}

// AppendResponse appends a complete response frame: size, correlation id, the tag byte of a
// flexible (v1) response header — never for ApiVersions, whose header is always v0 so a client
// can read it before it knows what is flexible — and the body.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, correlationID)
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// Request frames up to maxPooledFrame are read into buffers recycled by size class (powers of
// two from 4 KiB) when they are forwarded (Forwarder): the frame is written upstream before
// Forward returns and nothing keeps it. Allocating each one cost its zeroing and its garbage
// collection on every Produce through the gateway (docs/benchmarks-gateway.md). A frame that is
// served is decoded into structs that may alias it, so it is never recycled. Up to this size
// the whole buffer is taken before the bytes arrive (twice initialFrameChunk at most); larger
// frames grow as they arrive, as ReadFrameBody does.
const (
	minPooledShift = 12
	maxPooledShift = 17
	maxPooledFrame = 1 << maxPooledShift
)

var framePools [maxPooledShift - minPooledShift + 1]sync.Pool

func frameClass(n int) int {
	for i := range framePools {
		if n <= 1<<(minPooledShift+i) {
			return i
		}
	}
	return -1
}

// readPooledFrameBody is ReadFrameBody into a recycled buffer when size allows; pooled says
// whether the frame may be given back with putFrame once nothing refers to it.
func readPooledFrameBody(r io.Reader, size int32) (frame []byte, pooled bool, err error) {
	i := frameClass(int(size))
	if i < 0 {
		frame, err = ReadFrameBody(r, size)
		return frame, false, err
	}
	if v, ok := framePools[i].Get().(*[]byte); ok {
		frame = (*v)[:size]
	} else {
		frame = make([]byte, size, 1<<(minPooledShift+i))
	}
	if _, err := io.ReadFull(r, frame); err != nil {
		putFrame(frame)
		if errors.Is(err, io.EOF) && size > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, false, err
	}
	return frame, true, nil
}

// putFrame recycles a frame of readPooledFrameBody; the caller must not use it afterwards.
func putFrame(b []byte) {
	c := cap(b)
	i := frameClass(c)
	if i < 0 || c != 1<<(minPooledShift+i) {
		return
	}
	b = b[:0]
	framePools[i].Put(&b)
}
