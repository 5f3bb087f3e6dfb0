package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/coordinatord/coordinatord/internal/wire"
)

// Fetch answers are spliced upstream → client (docs/benchmarks-gateway.md, "Splicing Fetch
// answers"): the records go from the upstream's socket into a pipe of the upstream connection
// and from there to the client's socket, never entering user memory; the structure around
// them is read as it passes, since the leader hints (KIP-951 NodeEndpoints), which name
// brokers and must be rewritten, are the answer's last, top-level tagged field. With no hints
// the answer's start (in memory) is written, then the pipe spliced to the client (the wire
// server does both, wire.AnswerPiper). With hints, or when the pipe fills, the pipe is drained
// into memory and the answer is finished there, as before.
//
// Variables, not constants, only so that tests can make a pipe fill up.
var (
	// minSplicedAnswer is the smallest Fetch answer worth the pipe: below it the two splices
	// and the extra write cost more than the copies they save.
	minSplicedAnswer = 16 << 10
	// minSplicedRun is the smallest run of bytes spliced rather than copied: smaller record
	// sets and tags are copied through the read buffer.
	minSplicedRun = 4 << 10
	// fetchPipeSize is the capacity asked for each upstream connection's pipe (the default
	// pipe-max-size); answers larger than what the kernel grants are read as before.
	fetchPipeSize = 1 << 20
)

// spliceReadChunk bounds each read of an answer's structure: what it takes beyond the
// structure (the start of a record set) is copied instead of spliced.
const spliceReadChunk = 512

// readFetchAnswer reads a Fetch answer from u, leaving its bulk in u's pipe when that pays:
// the returned frame is then the answer's start and u.piped the count of bytes that follow
// it in the pipe; otherwise it is the whole answer, as roundTrip returns it.
func (g *Gateway) readFetchAnswer(u *upConn, h wire.Header, reserve func(int) error) ([]byte, error) {
	tc := u.nc.(*net.TCPConn)
	var chunk [spliceReadChunk]byte
	// Nothing else is in flight on u (one request at a time), so a read cannot take bytes of
	// another answer; the first read still stops at the chunk.
	got, err := io.ReadAtLeast(tc, chunk[:], 8)
	if err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(chunk[:4]))
	if n < 4 || n > g.opts.MaxResponseBytes {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	total := 4 + int(n)
	if got > total {
		return nil, fmt.Errorf("upstream sent %d bytes beyond a %d-byte answer", got-total, total)
	}
	if corr := int32(binary.BigEndian.Uint32(chunk[4:8])); corr != h.CorrelationID {
		return nil, fmt.Errorf("correlation id %d answered for request %d", corr, h.CorrelationID)
	}
	if err := reserve(total); err != nil {
		return nil, err
	}
	u.piped, u.pipedIn = 0, nil
	out := getBuffer(total)
	pipe := u.fetchPipe(total)
	if pipe == nil {
		// Read as before: whole, into memory.
		copy(out, chunk[:got])
		if _, err := io.ReadFull(tc, out[got:]); err != nil {
			putBuffer(out)
			return nil, err
		}
		return out, nil
	}
	s := &answerStream{nc: tc, pipe: pipe, out: out[:0], unread: total - got}
	s.buf = chunk[:]
	s.w = got
	if err := s.walk(h.Version); err != nil {
		s.abandon()
		putBuffer(out)
		return nil, err
	}
	if err := s.finish(total); err != nil {
		s.abandon()
		putBuffer(out)
		return nil, err
	}
	u.piped, u.pipedIn = s.piped, pipe
	return s.out, nil
}

// fetchPipe is u's pipe for an answer of total bytes, opened on first use; nil when the
// answer would not fit it or no pipe can be had (the answer is then read into memory).
func (u *upConn) fetchPipe(total int) *wire.Pipe {
	if total < minSplicedAnswer || total > fetchPipeSize {
		return nil
	}
	p := u.pipe.Load()
	if p == nil {
		var err error
		if p, err = wire.NewPipe(fetchPipeSize); err != nil {
			u.pipeBroken = true
			return nil
		}
		u.pipe.Store(p)
		if u.closed.Load() { // closed meanwhile: close would not have seen it
			if p := u.pipe.Swap(nil); p != nil {
				p.Close()
			}
			return nil
		}
	}
	if total > p.Cap() {
		return nil
	}
	// A pipe that still holds anything (an answer whose write to the client failed) would put
	// those bytes in front of this answer's: it is never used again.
	if held, err := p.Buffered(); err != nil || held != 0 {
		if p := u.pipe.Swap(nil); p != nil {
			p.Close()
		}
		u.pipeBroken = true
		return nil
	}
	return p
}

// answerStream passes one answer's bytes from the upstream's socket, in order, to out (the
// answer's start, in memory) and then, once a record set is long enough, to the pipe, while
// the structure around the records is parsed from a small read buffer.
type answerStream struct {
	nc   *net.TCPConn
	pipe *wire.Pipe
	// out holds the answer's bytes in memory so far; its capacity is the whole answer's.
	out []byte
	// piped counts the bytes after out that are in the pipe; staged are bytes that follow
	// those, copied into the pipe before anything spliced after them (one write, not one per
	// field); inPipe: everything from now on goes to the pipe; drained: the pipe was given
	// up for this answer, everything is in out.
	piped   int
	staged  []byte
	inPipe  bool
	drained bool
	// buf[r:w] is read from the socket and not yet passed on; unread is what of the answer
	// the socket still holds.
	buf    []byte
	r, w   int
	unread int
	// stage is staged's storage.
	stage [spliceReadChunk]byte
}

// emit passes b on, after everything passed before it.
func (s *answerStream) emit(b []byte) error {
	if !s.inPipe {
		s.out = append(s.out, b...)
		return nil
	}
	if len(s.staged)+len(b) > len(s.stage) {
		if err := s.flush(); err != nil {
			return err
		}
		if !s.inPipe {
			s.out = append(s.out, b...)
			return nil
		}
		if len(b) > len(s.stage) {
			return s.write(b)
		}
	}
	if s.staged == nil {
		s.staged = s.stage[:0]
	}
	s.staged = append(s.staged, b...)
	return nil
}

// flush copies the staged bytes into the pipe (or, once drained, into out).
func (s *answerStream) flush() error {
	if len(s.staged) == 0 {
		return nil
	}
	b := s.staged
	s.staged = s.staged[:0]
	return s.write(b)
}

// write puts b in the pipe, draining the pipe into out instead when b does not fit.
func (s *answerStream) write(b []byte) error {
	if !s.inPipe {
		s.out = append(s.out, b...)
		return nil
	}
	m, err := s.pipe.Write(b)
	s.piped += m
	if errors.Is(err, wire.ErrPipeFull) {
		if err := s.drain(); err != nil {
			return err
		}
		s.out = append(s.out, b[m:]...)
		return nil
	}
	return err
}

// drain moves what the pipe holds of this answer into out; the rest of the answer goes to
// out too.
func (s *answerStream) drain() error {
	if s.piped > 0 {
		at := len(s.out)
		s.out = s.out[:at+s.piped]
		if err := s.pipe.ReadFull(s.out[at:]); err != nil {
			return err
		}
	}
	s.piped, s.inPipe, s.drained = 0, false, true
	rest := s.staged
	s.staged = nil
	s.out = append(s.out, rest...)
	return nil
}

// fill makes buf[r:w] hold at least k bytes, reading no further than the answer's end.
func (s *answerStream) fill(k int) error {
	if s.w-s.r >= k {
		return nil
	}
	if s.r > 0 {
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	}
	for s.w < k {
		if s.unread == 0 {
			return errors.New("truncated fetch response")
		}
		m, err := s.nc.Read(s.buf[s.w:min(len(s.buf), s.w+s.unread)])
		s.w += m
		s.unread -= m
		if err != nil && s.w < k {
			return err
		}
	}
	return nil
}

// take parses k bytes and passes them on; the result is valid until the next fill.
func (s *answerStream) take(k int) ([]byte, error) {
	if err := s.fill(k); err != nil {
		return nil, err
	}
	b := s.buf[s.r : s.r+k]
	s.r += k
	return b, s.emit(b)
}

func (s *answerStream) uvarint() (uint64, error) {
	var v uint64
	for i := 0; i < 5; i++ {
		b, err := s.take(1)
		if err != nil {
			return 0, err
		}
		v |= uint64(b[0]&0x7f) << (7 * i)
		if b[0] < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("fetch response: varint too long")
}

// pass passes k bytes on without parsing them: what the read buffer holds is copied, a long
// enough remainder is spliced into the pipe, a short one read into memory.
func (s *answerStream) pass(k int) error {
	if k < 0 {
		return errors.New("fetch response: negative length")
	}
	if m := min(k, s.w-s.r); m > 0 {
		if err := s.emit(s.buf[s.r : s.r+m]); err != nil {
			return err
		}
		s.r += m
		k -= m
	}
	if k == 0 {
		return nil
	}
	if k > s.unread {
		return errors.New("truncated fetch response")
	}
	if !s.drained && (s.inPipe || k >= minSplicedRun) {
		s.inPipe = true
		if err := s.flush(); err != nil {
			return err
		}
		if s.inPipe {
			m, err := s.pipe.FillFrom(s.nc, k)
			s.piped += m
			s.unread -= m
			k -= m
			if err == nil {
				return nil
			}
			if !errors.Is(err, wire.ErrPipeFull) {
				return err
			}
			if err := s.drain(); err != nil {
				return err
			}
		}
	}
	// Not piping (a short run before the first long one, or the pipe given up): nothing is
	// staged or piped after out, so the run is read straight into it.
	at := len(s.out)
	s.out = s.out[:at+k]
	if _, err := io.ReadFull(s.nc, s.out[at:]); err != nil {
		return err
	}
	s.unread -= k
	return nil
}

// walk passes a Fetch answer (its size and correlation id already in buf) on, field by field.
// Answers before v16 carry no leader hints: their body passes whole. From v16 the top-level
// tags are looked at: any there and the answer is finished in memory for the rewrite.
func (s *answerStream) walk(version int16) error {
	if _, err := s.take(8); err != nil {
		return err
	}
	if version < 16 {
		return s.pass(s.w - s.r + s.unread)
	}
	if err := s.skipTags(); err != nil { // the response header's
		return err
	}
	if _, err := s.take(4 + 2 + 4); err != nil { // throttle, error code, session id
		return err
	}
	topics, err := s.arrayLen()
	if err != nil {
		return err
	}
	for i := 0; i < topics; i++ {
		if _, err := s.take(16); err != nil { // topic id
			return err
		}
		parts, err := s.arrayLen()
		if err != nil {
			return err
		}
		for j := 0; j < parts; j++ {
			if _, err := s.take(4 + 2 + 8 + 8 + 8); err != nil { // partition, error, watermarks, log start
				return err
			}
			aborted, err := s.arrayLen()
			if err != nil {
				return err
			}
			for k := 0; k < aborted; k++ {
				if _, err := s.take(16); err != nil {
					return err
				}
				if err := s.skipTags(); err != nil {
					return err
				}
			}
			if _, err := s.take(4); err != nil { // preferred read replica
				return err
			}
			records, err := s.uvarint() // compact nullable bytes: length+1, 0 for null
			if err != nil {
				return err
			}
			if records > 1 {
				if err := s.pass(int(records - 1)); err != nil {
					return err
				}
			}
			if err := s.skipTags(); err != nil {
				return err
			}
		}
		if err := s.skipTags(); err != nil {
			return err
		}
	}
	// The top-level tags: a lone 0 says there are none, so nothing names a broker.
	if err := s.fill(1); err != nil {
		return err
	}
	if s.buf[s.r] != 0 && !s.drained {
		if err := s.flush(); err != nil {
			return err
		}
		if err := s.drain(); err != nil {
			return err
		}
	}
	return s.skipTags()
}

// arrayLen reads a compact array's length (null reads as empty).
func (s *answerStream) arrayLen() (int, error) {
	n, err := s.uvarint()
	if err != nil || n == 0 {
		return 0, err
	}
	if n-1 > uint64(s.unread+s.w-s.r) {
		return 0, errors.New("fetch response: array longer than the answer")
	}
	return int(n - 1), nil
}

func (s *answerStream) skipTags() error {
	n, err := s.uvarint()
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		if _, err := s.uvarint(); err != nil { // tag
			return err
		}
		size, err := s.uvarint()
		if err != nil {
			return err
		}
		if size > uint64(s.unread+s.w-s.r) {
			return errors.New("truncated fetch response")
		}
		if err := s.pass(int(size)); err != nil {
			return err
		}
	}
	return nil
}

// finish checks the walk ended exactly at the answer's end and puts what is staged in the pipe.
func (s *answerStream) finish(total int) error {
	if s.unread != 0 || s.r != s.w {
		return fmt.Errorf("fetch response: %d bytes after its last field", s.unread+s.w-s.r)
	}
	if err := s.flush(); err != nil {
		return err
	}
	if len(s.out)+s.piped != total {
		return fmt.Errorf("fetch response: %d bytes passed on of %d", len(s.out)+s.piped, total)
	}
	return nil
}

// abandon empties the pipe of a failed answer's bytes: the connection is dropped with it, but
// the pipe must never hand them to anyone.
func (s *answerStream) abandon() {
	if s.piped > 0 {
		scrap := getBuffer(s.piped)
		s.pipe.ReadFull(scrap)
		putBuffer(scrap)
		s.piped = 0
	}
}
