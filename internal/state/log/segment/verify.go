package segment

// Offline inspection for `coordinatord log verify` and `coordinatord log dump`. Both read a log
// directory without changing it and judge it exactly as Load would: the same plan for
// interrupted compactions, the same checks, the same torn-tail rule.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// Report is the result of Verify.
type Report struct {
	Dir    string
	Shards int32 // shard count from meta.properties
	// ShardReports has one entry per shard directory present, by shard.
	ShardReports []ShardReport
}

// OK reports whether every shard would load.
func (r Report) OK() bool {
	for _, s := range r.ShardReports {
		if s.Err != nil {
			return false
		}
	}
	return true
}

// ShardReport describes one shard's log.
type ShardReport struct {
	Shard    int32
	Segments []SegmentReport
	Batches  int64
	Records  int64
	// Tombstones counts records that delete their key.
	Tombstones  int64
	FirstOffset int64 // -1 when the log holds no record
	LastOffset  int64 // -1 when the log holds no record
	// Recovery lists what opening the shard would repair: unfinished compaction outputs to
	// delete, compaction swaps to complete, replaced segments to delete, a segment left
	// incomplete by a crash during roll.
	Recovery []string
	// TornTail is the damaged end of the newest segment that Load would truncate, if any.
	TornTail *TornTail
	// Err is why the shard would not load (a *log.CorruptError for damaged data), or nil.
	Err error
}

// SegmentReport describes one segment file.
type SegmentReport struct {
	File        string
	BaseOffset  int64
	Bytes       int64
	Compacted   bool
	Batches     int64
	Records     int64
	FirstOffset int64 // -1 when the segment holds no record
	LastOffset  int64
}

// Verify checks every shard log under dir (a log.dirs directory) without changing anything. It
// takes the directory lock, so it fails with ErrLocked while a server uses the directory. The
// error is non-nil when the directory cannot be read or some shard would not load; the Report
// then says which.
func Verify(dir string) (Report, error) { return verifyFS(OSFS{}, dir) }

func verifyFS(fs FS, dir string) (Report, error) {
	rep := Report{Dir: dir}
	lock, err := fs.Lock(filepath.Join(dir, lockFileName))
	if err != nil {
		return rep, fmt.Errorf("verify %s: %w", dir, err)
	}
	defer lock.Close()
	m, err := readMeta(fs, dir)
	if err != nil {
		return rep, fmt.Errorf("verify %s: %w", dir, err)
	}
	rep.Shards = m.shards
	rfs, redos, err := newRedoFS(fs, dir, m.shards)
	if err != nil {
		return rep, fmt.Errorf("verify %s: %w", dir, err)
	}
	names, err := fs.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("verify %s: %w", dir, err)
	}
	var shards []int32
	for _, n := range names {
		if s, ok := strings.CutPrefix(n, "shard-"); ok {
			id, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				continue
			}
			shards = append(shards, int32(id))
		}
	}
	slices.Sort(shards)
	var errs []error
	for _, s := range shards {
		sr := verifyShard(rfs, dir, s, m.shards)
		for _, r := range redos {
			if r.shard == s {
				sr.Recovery = append(sr.Recovery, fmt.Sprintf("%s: %d groups written back from the journal", r.path, len(r.entries)))
			}
		}
		if sr.Err != nil {
			errs = append(errs, sr.Err)
		}
		rep.ShardReports = append(rep.ShardReports, sr)
	}
	return rep, errors.Join(errs...)
}

func verifyShard(fs FS, root string, shard, count int32) ShardReport {
	sr := ShardReport{Shard: shard, FirstOffset: -1, LastOffset: -1}
	if shard < 0 || shard >= count {
		sr.Err = fmt.Errorf("shard directory %s outside the shard count %d", shardDirName(shard), count)
		return sr
	}
	sr.Err = walkShard(fs, filepath.Join(root, shardDirName(shard)), shard, &sr, nil, nil)
	return sr
}

// walkShard reads one shard directory the way Load would, filling sr. The optional onSegment is
// called before a segment's batches, onBatch for every good batch.
func walkShard(fs FS, dir string, shard int32, sr *ShardReport,
	onSegment func(SegmentReport, header), onBatch func(pos int64, b *Batch) error) error {
	p, err := makePlan(fs, dir, shard)
	if err != nil {
		return err
	}
	sr.Recovery = append(sr.Recovery, p.cleaned...)
	sr.Recovery = append(sr.Recovery, p.orphans...)
	for _, s := range p.swaps {
		sr.Recovery = append(sr.Recovery, s.swap)
	}
	segs := p.segs
	if n := len(segs); n > 0 {
		torn, _, err := isTornRoll(fs, shard, p.readPath[segs[n-1]])
		if err != nil {
			return err
		}
		if torn {
			sr.Recovery = append(sr.Recovery, p.readPath[segs[n-1]])
			segs = segs[:n-1]
		}
	}
	after := int64(-1)
	for i, base := range segs {
		path := p.readPath[base]
		isLast := i == len(segs)-1
		f, err := fs.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("shard %d: open %s: %w", shard, path, err)
		}
		below := int64(-1)
		if !isLast {
			below = segs[i+1]
		}
		o := scanOpts{shard: shard, path: path, base: base, last: isLast, after: after, below: below,
			maxFrame: MaxFrameBytes, onBatch: onBatch}
		if onSegment != nil {
			if h, herr := readHeader(fs, path); herr == nil {
				size, _ := f.Size()
				onSegment(SegmentReport{File: path, BaseOffset: base, Bytes: size, Compacted: h.compacted()}, h)
			}
		}
		res, err := scanSegment(f, o)
		f.Close()
		if err != nil {
			return err
		}
		seg := SegmentReport{File: path, BaseOffset: base, Bytes: res.size, Compacted: res.hdr.compacted(),
			Batches: res.batches, Records: res.records, FirstOffset: res.first, LastOffset: res.lastOff}
		sr.Segments = append(sr.Segments, seg)
		sr.Batches += res.batches
		sr.Records += res.records
		sr.Tombstones += res.tombs
		if res.first >= 0 {
			if sr.FirstOffset < 0 {
				sr.FirstOffset = res.first
			}
			sr.LastOffset = res.lastOff
			after = res.lastOff
		}
		sr.TornTail = res.torn
	}
	return nil
}

// Dump writes a readable listing of one shard's log under dir to w: every segment, batch and
// record (keys and values in hex), in offset order, as Load would replay them. It stops with the
// error Load would give at corrupt data, after listing everything before it. It does not take
// the directory lock, so it can inspect the log of a running server; a write in progress may
// then show as a torn tail.
func Dump(dir string, shard int32, w io.Writer) error { return dumpFS(OSFS{}, dir, shard, w) }

func dumpFS(fs FS, dir string, shard int32, w io.Writer) error {
	m, err := readMeta(fs, dir)
	if err != nil {
		return fmt.Errorf("dump %s: %w", dir, err)
	}
	if shard < 0 || shard >= m.shards {
		return fmt.Errorf("dump %s: shard %d outside [0, %d)", dir, shard, m.shards)
	}
	fs, redos, err := newRedoFS(fs, dir, m.shards)
	if err != nil {
		return fmt.Errorf("dump %s: %w", dir, err)
	}
	var sr ShardReport
	for _, r := range redos {
		if r.shard == shard {
			sr.Recovery = append(sr.Recovery, fmt.Sprintf("%s: %d groups written back from the journal (shown written back)", r.path, len(r.entries)))
		}
	}
	var werr error
	printf := func(format string, args ...any) {
		if werr == nil {
			_, werr = fmt.Fprintf(w, format, args...)
		}
	}
	err = walkShard(fs, filepath.Join(dir, shardDirName(shard)), shard, &sr,
		func(s SegmentReport, h header) {
			printf("segment %s base=%d bytes=%d compacted=%t", s.File, s.BaseOffset, s.Bytes, s.Compacted)
			if h.compacted() {
				printf(" replaces=%d..%d", h.replacedFrom, h.replacedTo)
			}
			printf("\n")
		},
		func(pos int64, b *Batch) error {
			printf("batch pos=%d base=%d last=%d count=%d time=%s flags=%#x\n", pos, b.BaseOffset, b.LastOffset(),
				len(b.Records), time.UnixMilli(b.AppendTimeMs).UTC().Format(time.RFC3339Nano), b.Flags)
			for i, r := range b.Records {
				if r.Value == nil {
					printf("  offset=%d key=%s tombstone\n", b.Offsets[i], hex.EncodeToString(r.Key))
				} else {
					printf("  offset=%d key=%s value=%s\n", b.Offsets[i], hex.EncodeToString(r.Key), hex.EncodeToString(r.Value))
				}
			}
			return werr
		})
	if sr.TornTail != nil {
		printf("torn tail %s at byte %d (%d bytes, truncated on load): %s\n", sr.TornTail.File, sr.TornTail.Offset, sr.TornTail.Bytes, sr.TornTail.Reason)
	}
	for _, r := range sr.Recovery {
		printf("recovery on open: %s\n", r)
	}
	if err != nil {
		var ce *log.CorruptError
		if errors.As(err, &ce) {
			printf("CORRUPT %s at byte %d: %s\n", ce.File, ce.Offset, ce.Reason)
		}
		return err
	}
	return werr
}
