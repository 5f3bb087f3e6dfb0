package segment

// The segment header and file names.
//
//	[4]byte "CSEG" | u8 version | u8 flags | u16 reserved | i32 shard | i64 baseOffset
//	| i64 replacedFrom | i64 replacedTo | u32 crc32c of the preceding 36 bytes
//
// replacedFrom..replacedTo (inclusive base offsets, -1 when unused) name the segments a compacted
// segment replaces; recovery uses them to finish a compaction swap that a crash interrupted.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

const (
	headerLen     = 40
	headerVersion = 1

	headerFlagCompacted = 1 << 0

	logExt     = ".log"
	cleanedExt = ".cleaned" // compaction output being written; deleted on open
	swapExt    = ".swap"    // compaction output committed; completed on open
)

var headerMagic = [4]byte{'C', 'S', 'E', 'G'}

type header struct {
	flags        uint8
	shard        int32
	base         int64
	replacedFrom int64
	replacedTo   int64
}

func (h header) compacted() bool { return h.flags&headerFlagCompacted != 0 }

func (h header) encode() []byte {
	b := make([]byte, headerLen)
	copy(b, headerMagic[:])
	b[4] = headerVersion
	b[5] = h.flags
	binary.BigEndian.PutUint32(b[8:], uint32(h.shard))
	binary.BigEndian.PutUint64(b[12:], uint64(h.base))
	binary.BigEndian.PutUint64(b[20:], uint64(h.replacedFrom))
	binary.BigEndian.PutUint64(b[28:], uint64(h.replacedTo))
	binary.BigEndian.PutUint32(b[36:], crc32.Checksum(b[:36], crcTable))
	return b
}

func decodeHeader(b []byte) (header, error) {
	if len(b) < headerLen {
		return header{}, fmt.Errorf("partial segment header: %d of %d bytes", len(b), headerLen)
	}
	if want, got := binary.BigEndian.Uint32(b[36:]), crc32.Checksum(b[:36], crcTable); want != got {
		return header{}, fmt.Errorf("segment header crc mismatch: stored %08x, computed %08x", want, got)
	}
	if [4]byte(b[:4]) != headerMagic {
		return header{}, fmt.Errorf("bad segment magic %q", b[:4])
	}
	if b[4] != headerVersion {
		return header{}, fmt.Errorf("unsupported segment version %d", b[4])
	}
	h := header{
		flags:        b[5],
		shard:        int32(binary.BigEndian.Uint32(b[8:])),
		base:         int64(binary.BigEndian.Uint64(b[12:])),
		replacedFrom: int64(binary.BigEndian.Uint64(b[20:])),
		replacedTo:   int64(binary.BigEndian.Uint64(b[28:])),
	}
	if h.flags&^headerFlagCompacted != 0 {
		return header{}, fmt.Errorf("unknown segment flags %#x", h.flags)
	}
	if h.base < 0 {
		return header{}, fmt.Errorf("negative base offset %d", h.base)
	}
	return h, nil
}

// segmentName is the file name of the segment whose base offset is base, with extension ext.
func segmentName(base int64, ext string) string {
	return fmt.Sprintf("%020d%s", base, ext)
}

// parseSegmentName returns the base offset and extension of a segment file name; ok is false
// for names that are not segment files.
func parseSegmentName(name string) (base int64, ext string, ok bool) {
	for _, e := range []string{logExt, cleanedExt, swapExt} {
		if stem, found := strings.CutSuffix(name, e); found && len(stem) == 20 {
			n, err := strconv.ParseInt(stem, 10, 64)
			if err != nil || n < 0 {
				return 0, "", false
			}
			return n, e, true
		}
	}
	return 0, "", false
}

func shardDirName(shard int32) string { return "shard-" + strconv.Itoa(int(shard)) }
