package segment

// Reading a shard directory: which files make up the log once interrupted compactions are
// settled (plan), and reading one segment's batches with the checks recovery relies on
// (scanSegment). Load, Compact, Verify and Dump share both, so the offline tools judge a
// directory exactly as the server would.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// plan is what a shard directory holds and what opening it will do to it.
type plan struct {
	cleaned []string     // compaction outputs never committed: deleted
	swaps   []swapAction // committed compactions to complete
	orphans []string     // segments a completed compaction replaced but a crash left behind
	segs    []int64      // base offsets of the log's segments once the above is done, ascending
	// readPath names the file holding each segment before the plan is applied (a .swap file
	// stands for the segment it will become); Verify reads these without changing anything.
	readPath map[int64]string
}

type swapAction struct {
	hdr  header
	swap string // X.swap
	dest string // X.log
	// Known only to the compaction that wrote it: the output's size and the append time of its
	// oldest tombstone (math.MaxInt64: none).
	size   int64
	tombMs int64
}

func (p *plan) changes() bool { return len(p.cleaned)+len(p.swaps)+len(p.orphans) > 0 }

// makePlan reads a shard directory. It reads the header of every .swap file and of every
// compacted .log file, so it fails with a *log.CorruptError when one of those is damaged.
func makePlan(fs FS, dir string, shard int32) (*plan, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	p := &plan{readPath: map[int64]string{}}
	logs := map[int64]string{}
	for _, n := range names {
		base, ext, ok := parseSegmentName(n)
		if !ok {
			continue
		}
		path := filepath.Join(dir, n)
		switch ext {
		case cleanedExt:
			p.cleaned = append(p.cleaned, path)
		case logExt:
			logs[base] = path
		case swapExt:
			h, err := readHeader(fs, path)
			if err != nil {
				return nil, &log.CorruptError{Shard: shard, File: path, Offset: 0, Reason: "compaction swap file: " + err.Error()}
			}
			if h.base != base || h.shard != shard || !h.compacted() || h.replacedFrom != base || h.replacedTo < base {
				return nil, &log.CorruptError{Shard: shard, File: path, Offset: 0,
					Reason: fmt.Sprintf("compaction swap header (shard %d base %d replaces %d..%d) does not match its name", h.shard, h.base, h.replacedFrom, h.replacedTo)}
			}
			p.swaps = append(p.swaps, swapAction{hdr: h, swap: path, dest: filepath.Join(dir, segmentName(base, logExt))})
		}
	}
	// A committed swap replaces every segment in its range; its own file takes the range's place.
	for _, s := range p.swaps {
		for base := range logs {
			if base >= s.hdr.replacedFrom && base <= s.hdr.replacedTo {
				if base != s.hdr.base {
					p.orphans = append(p.orphans, logs[base])
				}
				delete(logs, base)
			}
		}
		logs[s.hdr.base] = s.swap
	}
	// A compacted segment whose swap finished but whose deletions a crash lost leaves older
	// segments inside its replaced range: they are superseded, not part of the log.
	bases := slices.Sorted(mapsKeys(logs))
	for _, base := range bases {
		path, ok := logs[base]
		if !ok || filepath.Ext(path) == swapExt {
			continue
		}
		h, err := readHeader(fs, path)
		if err != nil || !h.compacted() {
			continue // judged when the segment is read
		}
		for other := range logs {
			if other > base && other <= h.replacedTo {
				p.orphans = append(p.orphans, logs[other])
				delete(logs, other)
			}
		}
	}
	slices.Sort(p.orphans)
	p.segs = slices.Sorted(mapsKeys(logs))
	p.readPath = logs
	return p, nil
}

func mapsKeys(m map[int64]string) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// apply carries out the plan: the recovery of interrupted compactions. Every step can be
// repeated, so a crash during apply is settled by the next open.
func (p *plan) apply(fs FS, dir string) error {
	if !p.changes() {
		return nil
	}
	for _, c := range p.cleaned {
		if err := removeIfExists(fs, c); err != nil {
			return fmt.Errorf("delete unfinished compaction output %s: %w", c, err)
		}
	}
	for _, o := range p.orphans {
		if err := removeIfExists(fs, o); err != nil {
			return fmt.Errorf("delete replaced segment %s: %w", o, err)
		}
	}
	for _, s := range p.swaps {
		if err := fs.Rename(s.swap, s.dest); err != nil {
			return fmt.Errorf("complete compaction swap %s: %w", s.swap, err)
		}
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func removeIfExists(fs FS, path string) error {
	if err := fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func readHeader(fs FS, path string) (header, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return header{}, err
	}
	defer f.Close()
	b := make([]byte, headerLen)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return header{}, err
	}
	return decodeHeader(b[:n])
}

// isTornRoll reports whether the newest segment at path is the remains of a crash during a roll:
// no complete header and nothing after it (the header is fsynced before any batch is written).
// A damaged header on a longer file is a *log.CorruptError.
func isTornRoll(fs FS, shard int32, path string) (torn bool, size int64, err error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false, 0, err
	}
	defer f.Close()
	if size, err = f.Size(); err != nil {
		return false, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	b := make([]byte, headerLen)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return false, 0, fmt.Errorf("read %s: %w", path, err)
	}
	_, herr := decodeHeader(b[:n])
	switch {
	case herr == nil:
		return false, size, nil
	case size <= headerLen:
		return true, size, nil
	}
	return false, size, &log.CorruptError{Shard: shard, File: path, Offset: 0, Reason: herr.Error()}
}

// scanOpts say how to read one segment.
type scanOpts struct {
	shard    int32
	path     string
	base     int64 // from the file name
	last     bool  // the newest segment: a damaged tail there is a torn write
	after    int64 // every offset must exceed this (last offset of the previous segment, or -1)
	below    int64 // every offset must be below this (next segment's base), or -1
	fresh    bool  // give each batch its own buffer (records outlive the call)
	onBatch  func(pos int64, b *Batch) error
	maxFrame int
}

// scanResult describes one segment after reading it.
type scanResult struct {
	hdr     header
	size    int64 // file size
	end     int64 // byte offset just after the last good batch
	batches int64
	records int64
	tombs   int64
	first   int64 // first record offset, -1 if none
	lastOff int64 // last record offset, -1 if none
	torn    *TornTail
}

// TornTail is the damaged end of the newest segment that recovery cuts off: the remains of a
// write that a crash interrupted, never acknowledged.
type TornTail struct {
	File   string
	Offset int64 // byte offset of the first bad byte: the file is truncated here
	Bytes  int64 // how many bytes are dropped
	Reason string
}

// scanReaders hold the read buffers of segment scans: a start scans every shard's segments, a
// few at a time, and a buffer of its own per segment was a megabyte of garbage each (45 MB
// for 50 shards) that the heap grew by while the shards' state was being built.
var scanReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1<<20) }}

// scanSegment reads every batch of the segment in f, checking CRCs, framing and offset order.
// It returns a *log.CorruptError for damage that is not a torn tail of the newest segment (a
// newest segment without a complete header is settled by isTornRoll first).
func scanSegment(f File, o scanOpts) (scanResult, error) {
	res := scanResult{first: -1, lastOff: -1}
	corrupt := func(pos int64, format string, args ...any) error {
		return &log.CorruptError{Shard: o.shard, File: o.path, Offset: pos, Reason: fmt.Sprintf(format, args...)}
	}
	size, err := f.Size()
	if err != nil {
		return res, fmt.Errorf("stat %s: %w", o.path, err)
	}
	res.size = size
	hb := make([]byte, headerLen)
	n, err := f.ReadAt(hb, 0)
	if err != nil && err != io.EOF {
		return res, fmt.Errorf("read %s: %w", o.path, err)
	}
	h, herr := decodeHeader(hb[:n])
	if herr != nil {
		return res, corrupt(0, "%v", herr)
	}
	if h.base != o.base || h.shard != o.shard {
		return res, corrupt(0, "header says shard %d base offset %d, file name says shard %d base offset %d", h.shard, h.base, o.shard, o.base)
	}
	res.hdr = h
	res.end = headerLen

	r := scanReaders.Get().(*bufio.Reader)
	r.Reset(io.NewSectionReader(f, headerLen, size-headerLen))
	defer func() {
		r.Reset(nil) // let go of the file
		scanReaders.Put(r)
	}()
	var reuse []byte
	var b Batch
	prev := o.after
	pos := int64(headerLen)
	for pos < size {
		lenBuf, _ := r.Peek(4)
		total, ferr := frameLen(lenBuf, o.maxFrame)
		if ferr == nil && int64(total) > size-pos {
			ferr = frameErr(frameShort, "partial batch: %d of %d bytes", size-pos, total)
		}
		var frame []byte
		if ferr == nil {
			if o.fresh {
				frame = make([]byte, total)
			} else {
				if cap(reuse) < total {
					reuse = make([]byte, total)
				}
				frame = reuse[:total]
			}
			if _, err := io.ReadFull(r, frame); err != nil {
				return res, fmt.Errorf("read %s at byte %d: %w", o.path, pos, err)
			}
			_, ferr = DecodeBatch(frame, o.maxFrame, &b)
		}
		if ferr != nil {
			kind := frameErrorKind(ferr)
			if !o.last || kind == frameMalformed {
				return res, corrupt(pos, "%v", ferr)
			}
			if kind == frameBadCRC && intactGroupFollows(f, pos+int64(total), size, o.maxFrame) {
				return res, corrupt(pos, "%v (intact batches from a later write follow, so this is not a torn write)", ferr)
			}
			res.torn = &TornTail{File: o.path, Offset: pos, Bytes: size - pos, Reason: ferr.Error()}
			return res, nil
		}
		if b.BaseOffset <= prev || b.BaseOffset < o.base {
			return res, corrupt(pos, "batch base offset %d not above previous offset %d and segment base %d", b.BaseOffset, prev, o.base)
		}
		if o.below >= 0 && b.LastOffset() >= o.below {
			return res, corrupt(pos, "batch last offset %d reaches the next segment's base offset %d", b.LastOffset(), o.below)
		}
		if res.first < 0 {
			res.first = b.BaseOffset
		}
		prev = b.LastOffset()
		res.lastOff = prev
		res.batches++
		res.records += int64(len(b.Records))
		for _, rec := range b.Records {
			if rec.Value == nil {
				res.tombs++
			}
		}
		if o.onBatch != nil {
			if err := o.onBatch(pos, &b); err != nil {
				return res, err
			}
		}
		pos += int64(total)
		res.end = pos
	}
	return res, nil
}

// intactGroupFollows reports whether, following batch lengths from pos, the file holds a whole
// write group (a batch flagged as the end of a write call) with more intact data after it. Only
// the last write group can be torn by a crash: a write starts only after the previous one was
// fsynced. So a bad batch followed by a complete later group is damage to synced data.
func intactGroupFollows(f File, pos, size int64, maxFrame int) bool {
	var b Batch
	lenBuf := make([]byte, 4)
	sawGroupEnd := false
	for pos < size {
		if _, err := f.ReadAt(lenBuf, pos); err != nil {
			return false
		}
		total, err := frameLen(lenBuf, maxFrame)
		if err != nil || int64(total) > size-pos {
			return false
		}
		frame := make([]byte, total)
		if _, err := f.ReadAt(frame, pos); err != nil {
			return false
		}
		if _, err := DecodeBatch(frame, maxFrame, &b); err != nil {
			return false
		}
		if sawGroupEnd {
			return true
		}
		sawGroupEnd = b.Flags&flagGroupEnd != 0
		pos += int64(total)
	}
	return false
}
