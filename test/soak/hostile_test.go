package soak

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classes of request a hostile connection sends. A valid request must be answered (with a
// decodable response carrying its correlation id); every other class must be answered or make
// the server close the connection. Nothing may go unanswered past the read deadline.
const (
	classValid = iota
	classTruncated
	classBitFlip
	classInflated
	classOversized
	classBadVersion
	classBadHeader
	classBulky
	numClasses
)

var classNames = [numClasses]string{"valid", "truncated", "bit-flipped", "inflated-length", "oversized", "bad-version", "bad-header", "bulky (valid)"}

// classWeights: how often each class is picked, in percent.
var classWeights = [numClasses]int{28, 15, 20, 10, 5, 10, 10, 2}

// outcome of one hostile request.
const (
	outResponse = iota
	outClosed
	outParked // a mutated JoinGroup/SyncGroup still waiting: legitimate (see parkable)
	outFailed
	numOutcomes
)

type classStats struct {
	tried    atomic.Int64
	outcomes [numOutcomes]atomic.Int64
}

type hostileStats struct {
	classes   [numClasses]classStats
	dials     atomic.Int64
	bytesSent atomic.Int64

	mu       sync.Mutex
	failures []string
	perAPI   map[int16]int64
}

func (s *hostileStats) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) < 20 {
		s.failures = append(s.failures, fmt.Sprintf(format, args...))
	} else {
		s.failures[19] = "... and more"
	}
}

func (s *hostileStats) failed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failures...)
}

// mustAnswer: requests sent as built must be answered, never closed.
func mustAnswer(class int) bool { return class == classValid || class == classBulky }

// parkable keys answer only when a rebalance completes: a damaged request may carry a long
// rebalance timeout, and waiting for it out is what Kafka does too.
func parkable(key int16) bool { return key == 11 || key == 14 }

// hostileConn is one connection's worth of hostile traffic, redialled after every close.
type hostileConn struct {
	addr        string
	rng         *rand.Rand
	apis        []api
	stats       *hostileStats
	maxReq      int32
	readTimeout time.Duration
	budget      *atomic.Int64 // requests left for the whole soak
	pace        time.Duration // least time between two requests of this connection (0: none)

	nc   net.Conn
	corr int32
}

func (h *hostileConn) run(stop <-chan struct{}) {
	defer func() {
		if h.nc != nil {
			h.nc.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if h.budget.Add(-1) < 0 {
			return
		}
		if h.nc == nil {
			nc, err := net.DialTimeout("tcp", h.addr, 10*time.Second)
			if err != nil {
				h.stats.fail("dial %s: %v", h.addr, err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			h.stats.dials.Add(1)
			h.nc = nc
		}
		began := time.Now()
		h.one()
		if wait := h.pace - time.Since(began); wait > 0 {
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
		}
	}
}

func pickClass(rng *rand.Rand) int {
	r := rng.Intn(100)
	for c, w := range classWeights {
		if r < w {
			return c
		}
		r -= w
	}
	return classValid
}

// one sends a request of a random class and checks what came back.
func (h *hostileConn) one() {
	class := pickClass(h.rng)
	a := h.apis[h.rng.Intn(len(h.apis))]
	h.corr++
	pool := mutatedNames
	if mustAnswer(class) {
		pool = validNames
	}
	e, ok := buildValid(h.rng, a, h.corr, pool, class == classBulky)
	if !ok {
		return
	}
	var (
		out       []byte
		halfClose bool // send, then close our write side: the server sees end of stream
		corrKnown = true
		note      string
	)
	switch class {
	case classValid, classBulky:
		out = e.frame
	case classTruncated:
		body := e.frame[4:]
		cut := h.rng.Intn(len(body))
		if h.rng.Intn(4) == 0 {
			// The size prefix promises the whole body; only part of it comes before EOF.
			out, halfClose, note = append([]byte(nil), e.frame[:4+cut]...), true, "eof"
		} else {
			out = append(binary.BigEndian.AppendUint32(nil, uint32(cut)), body[:cut]...)
			corrKnown = cut >= 8
		}
	case classBitFlip:
		out = append([]byte(nil), e.frame...)
		from := 4 + e.headerLen
		if h.rng.Intn(5) == 0 || from >= len(out) {
			from, corrKnown = 4, false
		}
		for n := 1 + h.rng.Intn(8); n > 0 && from < len(out); n-- {
			i := from + h.rng.Intn(len(out)-from)
			out[i] ^= 1 << h.rng.Intn(8)
		}
	case classInflated:
		out, note = h.inflate(e)
	case classOversized:
		out, note = h.oversize(e)
		corrKnown = false
	case classBadVersion:
		out = append([]byte(nil), e.frame...)
		v := badVersion(h.rng, a)
		binary.BigEndian.PutUint16(out[6:], uint16(v))
		note = fmt.Sprintf("v%d", v)
	case classBadHeader:
		out, note = h.badHeader(e)
		corrKnown = false
	}
	h.stats.mu.Lock()
	h.stats.perAPI[a.key]++
	h.stats.mu.Unlock()
	h.judge(class, e, out, halfClose, corrKnown, note)
}

// judge sends out (a request of class built from e), waits for the verdict and records it.
func (h *hostileConn) judge(class int, e encoded, out []byte, halfClose, corrKnown bool, note string) int {
	h.stats.classes[class].tried.Add(1)
	res, detail := h.exchange(out, halfClose, e.corr, corrKnown, mustAnswer(class), e)
	if res == outParked && !(!mustAnswer(class) && parkable(e.key)) {
		res = outFailed
		detail = fmt.Sprintf("no answer within %v (hang)", h.readTimeout)
	}
	h.stats.classes[class].outcomes[res].Add(1)
	if res == outFailed {
		h.stats.fail("%s %s v%d %s: %s; bytes %s", classNames[class], kmsg.NameForKey(e.key), e.version, note, detail, hexHead(out))
	}
	return res
}

// exchange writes out and waits for one response frame or a close.
func (h *hostileConn) exchange(out []byte, halfClose bool, corr int32, corrKnown, mustAnswer bool, e encoded) (int, string) {
	h.nc.SetWriteDeadline(time.Now().Add(h.readTimeout))
	n, err := h.nc.Write(out)
	h.stats.bytesSent.Add(int64(n))
	if err != nil {
		h.reset()
		if isTimeout(err) {
			// The server stopped reading us: only acceptable while it waits out a frame it will
			// refuse anyway; a write that never completes is a hang like a read that never does.
			return outFailed, "write blocked: " + err.Error()
		}
		if mustAnswer {
			return outFailed, "write failed: " + err.Error()
		}
		return outClosed, ""
	}
	if halfClose {
		h.nc.(*net.TCPConn).CloseWrite()
	}
	h.nc.SetReadDeadline(time.Now().Add(h.readTimeout))
	var size [4]byte
	if _, err := io.ReadFull(h.nc, size[:]); err != nil {
		h.reset()
		if isTimeout(err) {
			return outParked, ""
		}
		if mustAnswer {
			return outFailed, "connection closed instead of an answer: " + err.Error()
		}
		return outClosed, ""
	}
	sz := binary.BigEndian.Uint32(size[:])
	if sz < 4 || sz > 64<<20 {
		h.reset()
		return outFailed, fmt.Sprintf("response frame of %d bytes", sz)
	}
	buf := make([]byte, sz)
	if _, err := io.ReadFull(h.nc, buf); err != nil {
		h.reset()
		return outFailed, "response cut short: " + err.Error()
	}
	if halfClose {
		h.reset() // nothing more can be sent on it
	}
	if got := int32(binary.BigEndian.Uint32(buf)); corrKnown && got != corr {
		h.reset()
		return outFailed, fmt.Sprintf("response correlation id %d, want %d", got, corr)
	}
	if mustAnswer {
		resp := kmsg.ResponseForKey(e.key)
		resp.SetVersion(e.version)
		b := buf[4:]
		if resp.IsFlexible() && e.key != 18 {
			if len(b) == 0 || b[0] != 0 {
				return outFailed, "response header tags not empty"
			}
			b = b[1:]
		}
		if err := resp.ReadFrom(b); err != nil {
			return outFailed, "undecodable response: " + err.Error()
		}
	}
	return outResponse, ""
}

func (h *hostileConn) reset() {
	if h.nc != nil {
		h.nc.Close()
		h.nc = nil
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// inflate makes a length or count in the body claim far more than the frame holds: a 4-byte
// array count or bytes length, a 2-byte string length, or a compact (varint) length.
func (h *hostileConn) inflate(e encoded) ([]byte, string) {
	out := append([]byte(nil), e.frame...)
	from := 4 + e.headerLen
	if from >= len(out) {
		from = 4 + 8 // the client id's length
	}
	at := from + h.rng.Intn(len(out)-from)
	var patch []byte
	switch h.rng.Intn(4) {
	case 0:
		patch = []byte{0x7f, 0xff, 0xff, 0xff}
	case 1:
		patch = binary.BigEndian.AppendUint32(nil, uint32(h.rng.Intn(1<<24)))
	case 2:
		patch = []byte{0x7f, 0xff}
	default:
		patch = []byte{0xff, 0xff, 0xff, 0xff, 0x07} // uvarint 2^31-1
	}
	if h.rng.Intn(2) == 0 { // overwrite in place
		copy(out[at:], patch)
	} else { // insert, and fix the frame size
		out = append(out[:at], append(patch, out[at:]...)...)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	}
	return out, fmt.Sprintf("%x at %d", patch, at-4)
}

// oversize sends a frame the server must refuse on its size alone.
func (h *hostileConn) oversize(e encoded) ([]byte, string) {
	switch h.rng.Intn(4) {
	case 0: // a size beyond the limit, with only a little of the frame behind it
		sz := h.maxReq + 1 + int32(h.rng.Intn(1<<20))
		return append(binary.BigEndian.AppendUint32(nil, uint32(sz)), e.frame[4:]...), fmt.Sprintf("size %d", sz)
	case 1: // the largest positive size
		return append(binary.BigEndian.AppendUint32(nil, 0x7fffffff), e.frame[4:]...), "size 2^31-1"
	case 2: // a negative size
		return append([]byte{0x80 | byte(h.rng.Intn(128)), 0, 0, 1}, e.frame[4:]...), "negative size"
	default: // a real request, padded past the limit and sent whole
		pad := int(h.maxReq) + 1 - (len(e.frame) - 4) + h.rng.Intn(4096)
		out := append(append([]byte(nil), e.frame...), make([]byte, max(pad, 1))...)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		return out, fmt.Sprintf("%d bytes sent", len(out))
	}
}

// badVersion picks a version outside the served range (or a nonsense one).
func badVersion(rng *rand.Rand, a api) int16 {
	switch rng.Intn(4) {
	case 0:
		return a.max + 1 + int16(rng.Intn(5))
	case 1:
		if a.min > 0 {
			return a.min - 1
		}
		return -1 - int16(rng.Intn(100))
	case 2:
		return 0x7fff
	default:
		return -0x8000
	}
}

// badHeader damages the request header itself.
func (h *hostileConn) badHeader(e encoded) ([]byte, string) {
	out := append([]byte(nil), e.frame...)
	switch h.rng.Intn(5) {
	case 0: // client id longer than the frame
		binary.BigEndian.PutUint16(out[12:], uint16(0x7000+h.rng.Intn(0x0fff)))
		return out, "client id length beyond the frame"
	case 1: // negative client id length other than null
		binary.BigEndian.PutUint16(out[12:], uint16(0x8000+h.rng.Intn(0x7ffe)))
		return out, "negative client id length"
	case 2: // an api key nobody serves
		keys := []int16{-1, -32768, 200, 32767, 0, 1, 2, 4, 22, 50, 68, 69, 76, 87, 90, 91, 92, 94}
		k := keys[h.rng.Intn(len(keys))]
		binary.BigEndian.PutUint16(out[4:], uint16(k))
		return out, fmt.Sprintf("api key %d", k)
	case 3: // a frame shorter than any header
		n := h.rng.Intn(8)
		return append(binary.BigEndian.AppendUint32(nil, uint32(n)), e.frame[4:4+min(n, len(e.frame)-4)]...), fmt.Sprintf("%d-byte frame", n)
	default: // a flexible header's tag section claiming tags that are not there
		at := 4 + e.headerLen - 1 // the tag count byte for flexible requests, else the body start
		if at >= len(out) {
			return out[:len(out)-1], "frame one byte short"
		}
		tail := append([]byte{0xff, 0xff, 0xff, 0x7f}, out[at+1:]...)
		out = append(out[:at], tail...)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		return out, "huge header tag count"
	}
}

func hexHead(b []byte) string {
	if len(b) > 256 {
		return hex.EncodeToString(b[:256]) + fmt.Sprintf("...(%d bytes)", len(b))
	}
	return hex.EncodeToString(b)
}

// table renders the per-class figures, as docs/reliability.md shows them.
func (s *hostileStats) table() string {
	var b strings.Builder
	b.WriteString("| class | tried | answered | closed by the server | parked (rebalance wait) | failed |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	var tot [numOutcomes + 1]int64
	for c := range s.classes {
		cs := &s.classes[c]
		row := []int64{cs.tried.Load(), cs.outcomes[outResponse].Load(), cs.outcomes[outClosed].Load(), cs.outcomes[outParked].Load(), cs.outcomes[outFailed].Load()}
		for i, v := range row {
			tot[i] += v
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d |\n", classNames[c], row[0], row[1], row[2], row[3], row[4])
	}
	fmt.Fprintf(&b, "| all | %d | %d | %d | %d | %d |\n", tot[0], tot[1], tot[2], tot[3], tot[4])
	return b.String()
}

func (s *hostileStats) apiLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]int, 0, len(s.perAPI))
	for k := range s.perAPI {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s(%d) %d", kmsg.NameForKey(int16(k)), k, s.perAPI[int16(k)]))
	}
	return strings.Join(parts, ", ")
}
