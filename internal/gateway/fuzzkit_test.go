package gateway

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzGateway is testGateway for fuzz targets: nodes 1, 2 and 5 have listeners, any other node
// id has none and can get none (an empty port range), so an oracle knows which broker entries
// survive a rewrite and no input binds a port.
func fuzzGateway(tb testing.TB) *Gateway {
	g := testGateway(tb)
	g.ports.min, g.ports.max = 1, 0
	return g
}

// fuzzListened says what fuzzGateway's address gives node id: its gateway port, or nothing.
func fuzzListened(id int32) (host string, port int32, ok bool) {
	switch id {
	case 1, 2, 5:
		return "gw.example", 40000 + id, true
	}
	return "", 0, false
}

// shape turns a fuzzer's bytes into the choices of a message builder: counts, node ids,
// strings. An exhausted shape answers zeros, so every input builds some message.
type shape struct{ b []byte }

func (s *shape) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	x := s.b[0]
	s.b = s.b[1:]
	return x
}

func (s *shape) intn(n int) int { return int(s.byte()) % n }

func (s *shape) bool() bool { return s.byte()&1 == 1 }

func (s *shape) int16() int16 { return int16(uint16(s.byte())<<8 | uint16(s.byte())) }

func (s *shape) int32() int32 { return int32(uint32(s.int16())<<16 | uint32(uint16(s.int16()))) }

func (s *shape) int64() int64 {
	return int64(uint64(uint32(s.int32()))<<32 | uint64(uint32(s.int32())))
}

func (s *shape) bytes(max int) []byte {
	n := min(s.intn(max+1), len(s.b))
	out := append([]byte(nil), s.b[:n]...)
	s.b = s.b[n:]
	return out
}

func (s *shape) string(max int) string { return string(s.bytes(max)) }

func (s *shape) nullableString(max int) *string {
	if s.intn(4) == 0 {
		return nil
	}
	str := s.string(max)
	return &str
}

// nodeID is mostly a node with a listener, some without, and now and then any id at all.
func (s *shape) nodeID() int32 {
	switch s.intn(8) {
	case 0, 1:
		return 1
	case 2:
		return 2
	case 3:
		return 5
	case 4:
		return 3
	case 5:
		return -1
	case 6:
		return 0
	}
	return s.int32()
}

// tags are unknown tagged fields (keys from 10 up, above any key Kafka's messages here use),
// which a rewrite must pass on.
func (s *shape) tags() kmsg.Tags {
	var t kmsg.Tags
	for n := s.intn(4); n > 0; n-- {
		if s.intn(3) != 0 {
			continue // most structs carry none
		}
		t.Set(uint32(10+s.intn(40)), s.bytes(8))
	}
	return t
}

// headerTags encodes a response header's tagged fields: usually none, as Kafka sends today.
func (s *shape) headerTags() []byte {
	if s.intn(4) != 0 {
		return []byte{0}
	}
	t := s.tags()
	return appendTags(nil, &t)
}

func appendTags(dst []byte, t *kmsg.Tags) []byte {
	dst = kbin.AppendUvarint(dst, uint32(t.Len()))
	return t.AppendEach(dst)
}

// answerFrame is a response frame as an upstream sends it: size, correlation id, the header's
// tagged fields when the version is flexible, and the body kmsg encodes.
func answerFrame(corr int32, headerTags []byte, resp kmsg.Response) []byte {
	out := kbin.AppendInt32(make([]byte, 4, 256), corr)
	if resp.IsFlexible() {
		out = append(out, headerTags...)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// roundTripped is resp as kmsg reads it back from its own encoding: the message an upstream
// sends, with every field the version lacks at its default.
func roundTripped[T kmsg.Response](tb testing.TB, resp T, fresh T) T {
	tb.Helper()
	fresh.SetVersion(resp.GetVersion())
	if err := fresh.ReadFrom(resp.AppendTo(nil)); err != nil {
		tb.Fatalf("kmsg does not read back its own %s v%d: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return fresh
}

// fuzzRequestFrame is a request frame without its size prefix, as the wire server hands it on.
func fuzzRequestFrame(corr int32, clientID *string, headerTags []byte, req kmsg.Request) []byte {
	b := kbin.AppendInt16(nil, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, clientID)
	if req.IsFlexible() {
		b = append(b, headerTags...)
	}
	return req.AppendTo(b)
}

// allocatedBy returns the heap bytes fn allocated (of every goroutine: a fuzz worker runs one
// input at a time, so they are fn's but for the runtime's own crumbs).
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// checkAnswerFrame: a rewritten answer is a whole frame: its size prefix says its length, and
// its correlation id is the upstream's.
func checkAnswerFrame(t *testing.T, in, out []byte) {
	t.Helper()
	if len(out) < 8 {
		t.Fatalf("rewritten answer of %d bytes", len(out))
	}
	if int(binary.BigEndian.Uint32(out)) != len(out)-4 {
		t.Fatalf("size prefix %d for a %d byte frame", binary.BigEndian.Uint32(out), len(out))
	}
	if string(out[4:8]) != string(in[4:8]) {
		t.Fatalf("correlation id changed from %x to %x", in[4:8], out[4:8])
	}
}
