package segment

// The batch frame: the unit of atomicity on disk.
//
//	[u32 length][u32 crc32c][u8 magic][u8 flags][i64 baseOffset][i64 appendTimeMs][u32 count]
//	count x [varint offsetDelta][varint keyLen][key][varint valueLen, -1 = tombstone][value]
//
// Integers are big-endian; varints are zigzag (encoding/binary's Varint), as in Kafka records.
// length counts the bytes after the length field; the CRC-32C covers the bytes after the CRC
// field. The first record has offsetDelta 0 and deltas strictly increase; gaps are allowed (a
// compacted batch keeps the offsets its records had).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

const (
	batchMagic     = 1
	frameHeaderLen = 30 // length field through count
	minRecordLen   = 3  // three one-byte varints, empty key and value
	minFrameLen    = frameHeaderLen - 4 + minRecordLen

	// MaxFrameBytes is the hard cap on one batch frame, applied when reading before any buffer is
	// allocated: a length field above it is corruption (or a torn tail), never an allocation
	// request. Options.MaxBatchBytes may not exceed it, so every batch ever written can be read.
	MaxFrameBytes = 64 << 20

	// flagGroupEnd marks the last batch of one write call (one group commit). Recovery uses it to
	// tell a torn final write from damage to data that an fsync had already covered.
	flagGroupEnd = 1 << 0
	knownFlags   = flagGroupEnd
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Batch is one decoded batch frame. Record keys and values alias the frame buffer.
type Batch struct {
	BaseOffset   int64
	AppendTimeMs int64
	Flags        uint8
	Offsets      []int64
	Records      []log.Record
}

// LastOffset is the offset of the batch's last record.
func (b *Batch) LastOffset() int64 { return b.Offsets[len(b.Offsets)-1] }

// frameErrKind says how a frame failed, which decides torn tail versus corruption.
type frameErrKind int

const (
	frameShort     frameErrKind = iota // fewer bytes than the frame needs: a partial write
	frameBadLength                     // length field below the minimum or above the limit
	frameBadCRC                        // checksum mismatch
	frameMalformed                     // checksum fine, content invalid: never a torn write
)

type frameError struct {
	kind frameErrKind
	msg  string
}

func (e *frameError) Error() string { return e.msg }

func frameErr(kind frameErrKind, format string, args ...any) error {
	return &frameError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// frameErrorKind returns the kind of a decode error (frameMalformed for foreign errors).
func frameErrorKind(err error) frameErrKind {
	var fe *frameError
	if errors.As(err, &fe) {
		return fe.kind
	}
	return frameMalformed
}

// frameLen reads the length field of the frame starting at buf and checks it against limit and
// the minimum. It returns the total frame size (length field included).
func frameLen(buf []byte, limit int) (int, error) {
	if len(buf) < 4 {
		return 0, frameErr(frameShort, "partial length field: %d bytes", len(buf))
	}
	n := binary.BigEndian.Uint32(buf)
	if n < minFrameLen {
		return 0, frameErr(frameBadLength, "batch length %d below minimum %d", n, minFrameLen)
	}
	if uint64(n) > uint64(limit) {
		return 0, frameErr(frameBadLength, "batch length %d above limit %d", n, limit)
	}
	return int(n) + 4, nil
}

// DecodeBatch decodes the frame at the start of buf into b (reusing its slices) and returns the
// frame's size in bytes. limit caps the length field (see MaxFrameBytes); it is checked before
// anything is allocated, as is the record count against the bytes present.
func DecodeBatch(buf []byte, limit int, b *Batch) (int, error) {
	size, err := frameLen(buf, limit)
	if err != nil {
		return 0, err
	}
	if len(buf) < size {
		return 0, frameErr(frameShort, "partial batch: %d of %d bytes", len(buf), size)
	}
	frame := buf[:size]
	if want, got := binary.BigEndian.Uint32(frame[4:]), crc32.Checksum(frame[8:], crcTable); want != got {
		return 0, frameErr(frameBadCRC, "crc mismatch: stored %08x, computed %08x", want, got)
	}
	if frame[8] != batchMagic {
		return 0, frameErr(frameMalformed, "unknown batch magic %d", frame[8])
	}
	b.Flags = frame[9]
	if b.Flags&^knownFlags != 0 {
		return 0, frameErr(frameMalformed, "unknown batch flags %#x", b.Flags)
	}
	b.BaseOffset = int64(binary.BigEndian.Uint64(frame[10:]))
	b.AppendTimeMs = int64(binary.BigEndian.Uint64(frame[18:]))
	count := binary.BigEndian.Uint32(frame[26:])
	if b.BaseOffset < 0 {
		return 0, frameErr(frameMalformed, "negative base offset %d", b.BaseOffset)
	}
	body := frame[frameHeaderLen:]
	if count == 0 || uint64(count) > uint64(len(body)/minRecordLen) {
		return 0, frameErr(frameMalformed, "record count %d does not fit %d bytes", count, len(body))
	}
	b.Offsets = b.Offsets[:0]
	b.Records = b.Records[:0]
	if cap(b.Offsets) < int(count) {
		b.Offsets = make([]int64, 0, count)
		b.Records = make([]log.Record, 0, count)
	}
	pos := 0
	prev := int64(-1)
	for i := uint32(0); i < count; i++ {
		delta, n := binary.Varint(body[pos:])
		if n <= 0 {
			return 0, frameErr(frameMalformed, "record %d: bad offset delta", i)
		}
		pos += n
		if delta <= prev || (i == 0 && delta != 0) || delta > math.MaxInt64-b.BaseOffset {
			return 0, frameErr(frameMalformed, "record %d: offset delta %d after %d", i, delta, prev)
		}
		prev = delta
		klen, n := binary.Varint(body[pos:])
		if n <= 0 || klen < 0 || klen > int64(len(body)-pos-n) {
			return 0, frameErr(frameMalformed, "record %d: bad key length", i)
		}
		pos += n
		key := body[pos : pos+int(klen) : pos+int(klen)]
		pos += int(klen)
		vlen, n := binary.Varint(body[pos:])
		if n <= 0 || vlen < -1 || vlen > int64(len(body)-pos-n) {
			return 0, frameErr(frameMalformed, "record %d: bad value length", i)
		}
		pos += n
		var val []byte
		if vlen >= 0 {
			val = body[pos : pos+int(vlen) : pos+int(vlen)]
			pos += int(vlen)
		}
		b.Offsets = append(b.Offsets, b.BaseOffset+delta)
		b.Records = append(b.Records, log.Record{Key: key, Value: val})
	}
	if pos != len(body) {
		return 0, frameErr(frameMalformed, "%d trailing bytes after %d records", len(body)-pos, count)
	}
	return size, nil
}

// batchWriter appends batch frames to buf: begin, add records, end.
type batchWriter struct {
	buf   []byte
	start int
	base  int64
	count uint32
}

func (w *batchWriter) begin(base, appendTimeMs int64, flags uint8) {
	w.start = len(w.buf)
	w.base = base
	w.count = 0
	var hdr [frameHeaderLen]byte
	hdr[8] = batchMagic
	hdr[9] = flags
	binary.BigEndian.PutUint64(hdr[10:], uint64(base))
	binary.BigEndian.PutUint64(hdr[18:], uint64(appendTimeMs))
	w.buf = append(w.buf, hdr[:]...)
}

// add appends a record; offsets must strictly increase from the batch's base.
func (w *batchWriter) add(offset int64, r log.Record) {
	w.buf = binary.AppendVarint(w.buf, offset-w.base)
	w.buf = binary.AppendVarint(w.buf, int64(len(r.Key)))
	w.buf = append(w.buf, r.Key...)
	if r.Value == nil {
		w.buf = binary.AppendVarint(w.buf, -1)
	} else {
		w.buf = binary.AppendVarint(w.buf, int64(len(r.Value)))
		w.buf = append(w.buf, r.Value...)
	}
	w.count++
}

// size is the size of the open frame so far.
func (w *batchWriter) size() int { return len(w.buf) - w.start }

// end fills in length, count and CRC of the open frame.
func (w *batchWriter) end() {
	f := w.buf[w.start:]
	binary.BigEndian.PutUint32(f[0:], uint32(len(f)-4))
	binary.BigEndian.PutUint32(f[26:], w.count)
	binary.BigEndian.PutUint32(f[4:], crc32.Checksum(f[8:], crcTable))
}

// abort drops the open frame.
func (w *batchWriter) abort() { w.buf = w.buf[:w.start] }

// setFlags rewrites the flags of the complete frame at pos in buf and its CRC.
func setFlags(buf []byte, pos int, flags uint8) {
	f := buf[pos:]
	n := int(binary.BigEndian.Uint32(f)) + 4
	f = f[:n]
	f[9] = flags
	binary.BigEndian.PutUint32(f[4:], crc32.Checksum(f[8:], crcTable))
}

// EncodedSize is the size of the frame EncodeBatch would write for recs (offset deltas counted
// for consecutive offsets), computed without encoding.
func EncodedSize(recs []log.Record) int {
	n := frameHeaderLen
	var scratch [binary.MaxVarintLen64]byte
	for i, r := range recs {
		n += binary.PutVarint(scratch[:], int64(i))
		n += binary.PutVarint(scratch[:], int64(len(r.Key))) + len(r.Key)
		if r.Value == nil {
			n += binary.PutVarint(scratch[:], -1)
		} else {
			n += binary.PutVarint(scratch[:], int64(len(r.Value))) + len(r.Value)
		}
	}
	return n
}

// EncodeBatch appends the frame of recs, with consecutive offsets from base, to dst.
func EncodeBatch(dst []byte, base, appendTimeMs int64, recs []log.Record) []byte {
	w := batchWriter{buf: dst}
	w.begin(base, appendTimeMs, 0)
	for i, r := range recs {
		w.add(base+int64(i), r)
	}
	w.end()
	return w.buf
}
