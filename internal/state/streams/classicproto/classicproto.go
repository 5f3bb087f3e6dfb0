// Package classicproto is the byte format a classic-protocol Kafka Streams member speaks
// (spec online-migration §1, §2): the SubscriptionInfo its StreamsPartitionAssignor puts into
// the consumer-protocol subscription's user data, and the AssignmentInfo it expects in the
// SyncGroup assignment's user data. The outer consumer-protocol layers are kmsg's
// ConsumerMemberMetadata and ConsumerMemberAssignment; DecodeMember and EncodeMemberAssignment
// add the rules Kafka applies around them.
//
// Everything a client sends is hostile until decoded: every count and length is checked against
// the bytes that remain before anything is allocated, and a short or inconsistent buffer is an
// error wrapping ErrMalformed, never a panic.
package classicproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// LatestVersion is the highest SubscriptionInfo / AssignmentInfo version Kafka Streams defines
// (StreamsAssignmentProtocolVersions.LATEST_SUPPORTED_VERSION, unchanged since Kafka 3.0).
const LatestVersion = 11

// Versions where the layouts change (spec §1.4, §2.2).
const (
	minLatestSupported = 3  // SubscriptionInfo/AssignmentInfo carry latestSupported/commonly
	minOffsetSums      = 7  // SubscriptionInfo: taskOffsetSums replace prevTasks/standbyTasks
	minUniqueField     = 8  // SubscriptionInfo: uniqueField
	minErrorCode       = 9  // SubscriptionInfo: errorCode
	minFlatOffsetSums  = 10 // SubscriptionInfo: flat TaskOffsetSum; TaskIDs carry a named topology
	minClientTags      = 11 // SubscriptionInfo: clientTags
)

// Offset sums with a meaning of their own (spec §1.4).
const (
	OffsetSumRunning int64 = -2 // a stateful active task running on the member (Task.LATEST_OFFSET)
	OffsetSumUnknown int64 = -3 // translated from a v1-6 standby set
)

// Assignor error codes (AssignorError.java); coordinatord sends only ErrNone and ErrShutdown.
const (
	ErrNone     int32 = 0
	ErrShutdown int32 = 4
)

// NoFollowUp is the nextRebalanceMs that asks for no follow-up rebalance.
const NoFollowUp int64 = 1<<63 - 1

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed classic Streams metadata")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// TaskID is a Kafka Streams task as the classic protocol writes it: the subtopology is an int32.
// NamedTopology is empty for every task coordinatord can place (spec §1.5).
type TaskID struct {
	Subtopology   int32
	Partition     int32
	NamedTopology string
}

func (t TaskID) String() string {
	if t.NamedTopology != "" {
		return fmt.Sprintf("%s__%d_%d", t.NamedTopology, t.Subtopology, t.Partition)
	}
	return fmt.Sprintf("%d_%d", t.Subtopology, t.Partition)
}

func taskLess(a, b TaskID) bool {
	if a.NamedTopology != b.NamedTopology {
		return a.NamedTopology < b.NamedTopology
	}
	if a.Subtopology != b.Subtopology {
		return a.Subtopology < b.Subtopology
	}
	return a.Partition < b.Partition
}

// TopicPartition is one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func tpLess(a, b TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// reader reads big-endian values and remembers the first over-read; callers check err once.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = malformed(format, args...)
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("%s: need %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) int8(what string) int8 {
	p := r.take(1, what)
	if p == nil {
		return 0
	}
	return int8(p[0])
}

func (r *reader) int16(what string) int16 {
	p := r.take(2, what)
	if p == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(p))
}

func (r *reader) uint16(what string) int {
	p := r.take(2, what)
	if p == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(p))
}

func (r *reader) int32(what string) int32 {
	p := r.take(4, what)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *reader) int64(what string) int64 {
	p := r.take(8, what)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

// count reads an int32 element count and checks that count elements of at least min bytes each
// fit in what is left, so that a hostile count cannot make the decoder allocate.
func (r *reader) count(min int, what string) int {
	n := r.int32(what + " count")
	if r.err != nil {
		return 0
	}
	if n < 0 {
		r.fail("%s count %d is negative", what, n)
		return 0
	}
	if int64(n)*int64(min) > int64(len(r.b)) {
		r.fail("%s count %d exceeds the %d bytes left", what, n, len(r.b))
		return 0
	}
	return int(n)
}

// kbytes reads Kafka "bytes" (int32 length); nullable allows -1 (returned as nil, true).
func (r *reader) kbytes(nullable bool, what string) (p []byte, null bool) {
	n := r.int32(what + " length")
	if r.err != nil {
		return nil, false
	}
	if n == -1 && nullable {
		return nil, true
	}
	if n < 0 {
		r.fail("%s length %d is negative", what, n)
		return nil, false
	}
	return r.take(int(n), what), false
}

// kstring reads a Kafka nullable string (int16 length); null comes back as ("", true).
func (r *reader) kstring(what string) (string, bool) {
	n := r.int16(what + " length")
	if r.err != nil {
		return "", false
	}
	if n == -1 {
		return "", true
	}
	if n < 0 {
		r.fail("%s length %d is negative", what, n)
		return "", false
	}
	return string(r.take(int(n), what)), false
}

// utf reads Java's DataInput.readUTF: a uint16 byte length, then modified UTF-8.
func (r *reader) utf(what string) string {
	n := r.uint16(what + " length")
	p := r.take(n, what)
	if r.err != nil {
		return ""
	}
	s, ok := fromModifiedUTF8(p)
	if !ok {
		r.fail("%s is not modified UTF-8", what)
	}
	return s
}

// javaChars reads n UTF-16BE code units (DataInput.readChar n times).
func (r *reader) javaChars(what string) string {
	n := r.int32(what + " length")
	if r.err != nil {
		return ""
	}
	if n < 0 {
		// Java's loop simply reads nothing for a negative count.
		return ""
	}
	if int64(n)*2 > int64(len(r.b)) {
		r.fail("%s: %d chars exceed the %d bytes left", what, n, len(r.b))
		return ""
	}
	units := make([]uint16, n)
	for i := range units {
		units[i] = uint16(r.uint16(what))
	}
	return string(utf16.Decode(units))
}

// writer builds big-endian output.
type writer struct{ b []byte }

func (w *writer) int8(v int8)   { w.b = append(w.b, byte(v)) }
func (w *writer) int16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *writer) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *writer) int64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }
func (w *writer) count(n int)   { w.int32(int32(n)) }

func (w *writer) kbytes(p []byte) { w.int32(int32(len(p))); w.b = append(w.b, p...) }

func (w *writer) kstring(s string, null bool) {
	if null {
		w.int16(-1)
		return
	}
	w.int16(int16(len(s)))
	w.b = append(w.b, s...)
}

// utf writes Java's DataOutput.writeUTF; Java refuses strings over 65535 encoded bytes.
func (w *writer) utf(s, what string) error {
	m := toModifiedUTF8(s)
	if len(m) > 0xFFFF {
		return fmt.Errorf("%s is %d bytes in modified UTF-8; the limit is 65535", what, len(m))
	}
	w.b = binary.BigEndian.AppendUint16(w.b, uint16(len(m)))
	w.b = append(w.b, m...)
	return nil
}

func (w *writer) javaChars(s string) {
	units := utf16.Encode([]rune(s))
	w.int32(int32(len(units)))
	for _, u := range units {
		w.b = binary.BigEndian.AppendUint16(w.b, u)
	}
}

// toModifiedUTF8 is Java's modified UTF-8: U+0000 as C0 80 and characters outside the BMP as
// two 3-byte surrogates; identical to UTF-8 for every other string.
func toModifiedUTF8(s string) []byte {
	plain := true
	for _, c := range s {
		if c == 0 || c > 0xFFFF || c == utf8.RuneError {
			plain = false
			break
		}
	}
	if plain {
		return []byte(s)
	}
	out := make([]byte, 0, len(s)+8)
	for _, c := range s {
		switch {
		case c == 0:
			out = append(out, 0xC0, 0x80)
		case c > 0xFFFF:
			hi, lo := utf16.EncodeRune(c)
			out = appendUnit(out, uint16(hi))
			out = appendUnit(out, uint16(lo))
		default:
			out = appendUnit(out, uint16(c))
		}
	}
	return out
}

func appendUnit(out []byte, u uint16) []byte {
	switch {
	case u != 0 && u < 0x80:
		return append(out, byte(u))
	case u < 0x800:
		return append(out, 0xC0|byte(u>>6), 0x80|byte(u&0x3F))
	default:
		return append(out, 0xE0|byte(u>>12), 0x80|byte((u>>6)&0x3F), 0x80|byte(u&0x3F))
	}
}

func fromModifiedUTF8(p []byte) (string, bool) {
	units := make([]uint16, 0, len(p))
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c < 0x80:
			units = append(units, uint16(c))
			i++
		case c&0xE0 == 0xC0:
			if i+1 >= len(p) || p[i+1]&0xC0 != 0x80 {
				return "", false
			}
			units = append(units, uint16(c&0x1F)<<6|uint16(p[i+1]&0x3F))
			i += 2
		case c&0xF0 == 0xE0:
			if i+2 >= len(p) || p[i+1]&0xC0 != 0x80 || p[i+2]&0xC0 != 0x80 {
				return "", false
			}
			units = append(units, uint16(c&0x0F)<<12|uint16(p[i+1]&0x3F)<<6|uint16(p[i+2]&0x3F))
			i += 3
		default:
			return "", false
		}
	}
	return string(utf16.Decode(units)), true
}
