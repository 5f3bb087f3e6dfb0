package segment

// Tests named after ARCHITECTURE.md sections: §5.1 the Log contract, §5.2 the segmented log,
// §4.6 group commit, §4.7 failures, §6.4 crash points.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

func TestS51_AppendLoadRoundTrip(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			e := newMemEnv(t)
			if name == "os" {
				e = newOSEnv(t)
			}
			o := e.open(1)
			if got, next := o.load(t); len(got) != 0 || next != 0 {
				t.Fatalf("empty log loaded %v next %d", got, next)
			}
			batches := [][]log.Record{
				{rec("a", "1")},
				{rec("b", "2"), rec("c", ""), tombstone("a")},
				{{Key: []byte{}, Value: []byte{0, 1, 2}}},
				{rec("b", strings.Repeat("x", 5000))},
			}
			var want []entry
			var off int64
			for _, b := range batches {
				last := o.mustAppend(t, b...)
				if last != off+int64(len(b))-1 {
					t.Fatalf("append returned %d, want %d", last, off+int64(len(b))-1)
				}
				for _, r := range b {
					en := entry{off: off, key: string(r.Key)}
					if r.Value != nil {
						v := string(r.Value)
						en.val = &v
					}
					want = append(want, en)
					off++
				}
			}
			o.rec.waitDurable(t, off-1)
			o.close(t)

			got, next := e.reload(1)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("replayed %v, want %v", got, want)
			}
			if next != off {
				t.Fatalf("next %d, want %d", next, off)
			}
		})
	}
}

func TestS51_LoadKeepsEmptyValueDistinctFromTombstone(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	o.load(t)
	o.mustAppend(t, rec("k", ""), tombstone("t"))
	o.rec.waitDurable(t, 1)
	o.close(t)
	o = e.open(0)
	defer o.close(t)
	var recs []log.Record
	o.log.Load(func(_ int64, r log.Record) error { recs = append(recs, r); return nil })
	if recs[0].Tombstone() || recs[0].Value == nil || !recs[1].Tombstone() {
		t.Fatalf("empty value and tombstone confused: %#v", recs)
	}
}

func TestS51_ReopenAfterCloseContinuesOffsets(t *testing.T) {
	e := newMemEnv(t)
	for round := 0; round < 3; round++ {
		o := e.open(2)
		got, next := o.load(t)
		if len(got) != round*10 || next != int64(round*10) {
			t.Fatalf("round %d: loaded %d records next %d", round, len(got), next)
		}
		for i := 0; i < 10; i++ {
			o.mustAppend(t, rec(fmt.Sprintf("k%d", round*10+i), "v"))
		}
		// Close waits for what is pending: no waiting for Durable here.
		o.close(t)
		if o.rec.durableOffset() != int64(round*10+9) {
			t.Fatalf("close returned before %d was durable (durable %d)", round*10+9, o.rec.durableOffset())
		}
	}
	got, _ := e.reload(2)
	for i, en := range got {
		if en.off != int64(i) || en.key != fmt.Sprintf("k%d", i) {
			t.Fatalf("entry %d is %v", i, en)
		}
	}
}

func TestS51_LoadStopsWithCallbackError(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	o.load(t)
	o.mustAppend(t, rec("a", "1"), rec("b", "2"))
	o.close(t)
	o = e.open(0)
	defer o.close(t)
	stop := errors.New("stop")
	n := 0
	if _, err := o.log.Load(func(int64, log.Record) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("load returned %v after %d records", err, n)
	}
}

func TestS51_AppendContract(t *testing.T) {
	e := newMemEnv(t)
	e.opts.MaxBatchBytes = 1024
	o := e.open(0)
	if _, err := o.log.Append([]log.Record{rec("a", "b")}); err == nil {
		t.Fatal("append before load succeeded")
	}
	o.load(t)
	if _, err := o.log.Append(nil); err == nil {
		t.Fatal("empty append succeeded")
	}
	if _, err := o.log.Append([]log.Record{rec("big", strings.Repeat("x", 2000))}); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("oversized batch: %v", err)
	}
	if last := o.mustAppend(t, rec("a", "b")); last != 0 {
		t.Fatalf("append after rejected batch got offset %d", last)
	}
	o.close(t)
	if _, err := o.log.Append([]log.Record{rec("a", "b")}); !errors.Is(err, log.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

// §4.6: batches handed during an fsync share the next one.
func TestS46_GroupCommitSharesOneFsync(t *testing.T) {
	e := newMemEnv(t)
	var syncs atomic.Int32
	hold := make(chan struct{})
	held := make(chan struct{})
	var once sync.Once
	o := e.open(0)
	o.load(t)
	// The group commit's fsync is the journal's: the segment is fsynced when it rolls or closes.
	e.mem.SetInject(func(op Op, path string) error {
		if op == OpSync && strings.HasSuffix(path, journalExt) {
			if syncs.Add(1) == 1 {
				once.Do(func() { close(held) })
				<-hold
			}
		}
		return nil
	})
	o.mustAppend(t, rec("first", "x"))
	<-held // the syncer is inside the first fsync
	var last int64
	for i := 0; i < 200; i++ {
		last = o.mustAppend(t, rec(fmt.Sprintf("k%d", i), "v"))
	}
	close(hold)
	o.rec.waitDurable(t, last)
	if n := syncs.Load(); n != 2 {
		t.Fatalf("%d fsyncs for 201 appends, want 2 (one held, one shared by the 200 behind it)", n)
	}
	if r := o.rec.reports; len(r) != 2 || r[0] != 0 || r[1] != last {
		t.Fatalf("durable reports %v, want [0 %d]", r, last)
	}
	o.close(t)
	got, _ := e.reload(0)
	if len(got) != 201 {
		t.Fatalf("reloaded %d records", len(got))
	}
}

func TestS46_UnsafeFlushIntervalReportsBeforeFsyncAndSyncsOnTimer(t *testing.T) {
	e := newMemEnv(t)
	e.opts.FlushInterval = 20 * time.Millisecond
	var syncs atomic.Int32
	o := e.open(0)
	o.load(t)
	e.mem.SetInject(func(op Op, path string) error {
		if op == OpSync && strings.HasSuffix(path, logExt) {
			syncs.Add(1)
		}
		return nil
	})
	o.mustAppend(t, rec("a", "1"))
	o.rec.waitDurable(t, 0)
	deadline := time.Now().Add(5 * time.Second)
	for syncs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if syncs.Load() == 0 {
		t.Fatal("timer never fsynced")
	}
	o.mustAppend(t, rec("b", "2"))
	o.close(t)
	if n := e.logs.FilterMessageSnippet("UNSAFE").Len(); n == 0 {
		t.Fatal("relaxed flush mode not logged as unsafe")
	}
	e.mem.Crash(nil) // close fsynced what was written
	if got, _ := e.reload(0); len(got) != 2 {
		t.Fatalf("reloaded %v", got)
	}
}

func TestS52_SegmentRoll(t *testing.T) {
	e := newMemEnv(t)
	e.opts.SegmentBytes = 4096
	o := e.open(3)
	o.load(t)
	val := strings.Repeat("v", 300)
	var last int64
	for i := 0; i < 100; i++ {
		last = o.mustAppend(t, rec(fmt.Sprintf("k%03d", i), val))
		o.rec.waitDurable(t, last)
	}
	o.close(t)
	names, _ := e.mem.ReadDir(filepath.Join(e.opts.Dir, "shard-3"))
	if len(names) < 5 {
		t.Fatalf("expected several segments, have %v", names)
	}
	// Every segment is named after the offset of its first record and not far over the limit.
	o = e.open(3)
	got, next := o.load(t)
	defer o.close(t)
	if len(got) != 100 || next != 100 {
		t.Fatalf("reloaded %d records, next %d", len(got), next)
	}
	for _, n := range names {
		base, _, ok := parseSegmentName(n)
		if !ok {
			continue
		}
		data, _ := e.mem.ReadFile(e.segFile(3, base))
		if int64(len(data)) > e.opts.SegmentBytes+400 {
			t.Fatalf("segment %s has %d bytes", n, len(data))
		}
		var b Batch
		if _, err := DecodeBatch(data[headerLen:], MaxFrameBytes, &b); err != nil || b.BaseOffset != base {
			t.Fatalf("segment %s starts with offset %d (%v)", n, b.BaseOffset, err)
		}
	}
}

// §5.2 recovery: a torn tail of the newest segment is cut at the last good batch (WARN) and
// everything before it is intact.
func TestS52_TornTailTruncated(t *testing.T) {
	shapes := []struct {
		name string
		tear func(good []byte, next []byte) []byte // returns the damaged file
	}{
		{"partial frame", func(good, next []byte) []byte { return append(good, next[:len(next)/2]...) }},
		{"partial length field", func(good, next []byte) []byte { return append(good, next[:2]...) }},
		{"zero filled", func(good, next []byte) []byte { return append(good, make([]byte, len(next))...) }},
		{"crc mismatch at end", func(good, next []byte) []byte {
			d := append(good, next...)
			d[len(d)-1] ^= 0xff
			return d
		}},
		{"length over limit", func(good, next []byte) []byte { return append(good, 0xff, 0xff, 0xff, 0xff, 1, 2, 3) }},
		{"garbage", func(good, next []byte) []byte { return append(good, []byte("not a batch at all, just bytes")...) }},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			e := newMemEnv(t)
			o := e.open(0)
			o.load(t)
			for i := 0; i < 5; i++ {
				o.rec.waitDurable(t, o.mustAppend(t, rec(fmt.Sprintf("k%d", i), "v"), rec("x", "y")))
			}
			o.close(t)
			path := e.segFile(0, 0)
			good, _ := e.mem.ReadFile(path)
			next := EncodeBatch(nil, 10, 0, []log.Record{rec("torn", "record"), rec("more", "data")})
			e.mem.WriteFile(path, s.tear(good, next))

			got, nextOff := e.reload(0)
			if len(got) != 10 || nextOff != 10 {
				t.Fatalf("loaded %d records next %d, want 10 and 10", len(got), nextOff)
			}
			if after, _ := e.mem.ReadFile(path); len(after) != len(good) {
				t.Fatalf("file is %d bytes after recovery, want %d", len(after), len(good))
			}
			if e.logs.FilterMessageSnippet("torn tail").Len() != 1 {
				t.Fatalf("no torn-tail warning: %v", e.logs.All())
			}
			// The log goes on from there.
			o = e.open(0)
			o.load(t)
			o.rec.waitDurable(t, o.mustAppend(t, rec("after", "recovery")))
			o.close(t)
			if got, _ := e.reload(0); len(got) != 11 || got[10].key != "after" {
				t.Fatalf("after recovery: %v", got)
			}
		})
	}
}

// The realistic torn write: power fails during a group write; part of the unsynced bytes reach
// the disk. Everything acknowledged survives, nothing half-written is replayed.
func TestS64_CrashDuringWriteKeepsAcknowledged(t *testing.T) {
	for keep := 0; keep <= 120; keep += 7 {
		for _, zero := range []bool{false, true} {
			e := newMemEnv(t)
			o := e.open(0)
			o.load(t)
			var acked int64
			for i := 0; i < 4; i++ {
				acked = o.mustAppend(t, rec(fmt.Sprintf("k%d", i), "v"))
				o.rec.waitDurable(t, acked)
			}
			// The next fsync never happens: the machine dies while it is under way.
			stop := make(chan struct{})
			e.mem.SetInject(func(op Op, path string) error {
				if op == OpSync {
					<-stop
					return errInjected
				}
				return nil
			})
			o.mustAppend(t, rec("unacked1", "v"), rec("unacked2", "w"))
			o.mustAppend(t, rec("unacked3", "v"))
			time.Sleep(time.Millisecond)
			k := keep
			e.mem.Crash(func(string, []byte) (int, bool) { return k, zero })
			e.mem.SetInject(nil)
			close(stop)
			o.store.Close()

			got, next := e.reload(0)
			if int64(len(got)) < acked+1 {
				t.Fatalf("keep %d zero %v: lost acknowledged records: %v", keep, zero, got)
			}
			for i, en := range got {
				if en.off != int64(i) {
					t.Fatalf("keep %d: offsets %v", keep, got)
				}
			}
			// A batch is all or nothing.
			if len(got) != 4 && len(got) != 6 && len(got) != 7 {
				t.Fatalf("keep %d zero %v: a partial batch was replayed: %v", keep, zero, got)
			}
			if next != int64(len(got)) {
				t.Fatalf("next %d after %d records", next, len(got))
			}
		}
	}
}

// §5.2: a bad batch anywhere but the torn tail fails the shard with file and byte offset.
func TestS52_CRCMismatchMidSegmentIsCorruption(t *testing.T) {
	build := func(t *testing.T, segBytes int64) (*env, []int64) {
		e := newMemEnv(t)
		if segBytes > 0 {
			e.opts.SegmentBytes = segBytes
		}
		o := e.open(0)
		o.load(t)
		for i := 0; i < 40; i++ {
			o.rec.waitDurable(t, o.mustAppend(t, rec(fmt.Sprintf("key-%02d", i), strings.Repeat("v", 200))))
		}
		o.close(t)
		names, _ := e.mem.ReadDir(filepath.Join(e.opts.Dir, "shard-0"))
		var bases []int64
		for _, n := range names {
			if b, ext, ok := parseSegmentName(n); ok && ext == logExt {
				bases = append(bases, b)
			}
		}
		return e, bases
	}
	batchPos := func(data []byte, n int) int64 {
		pos := headerLen
		var b Batch
		for i := 0; i < n; i++ {
			size, err := DecodeBatch(data[pos:], MaxFrameBytes, &b)
			if err != nil {
				t.Fatal(err)
			}
			pos += size
		}
		return int64(pos)
	}
	check := func(t *testing.T, e *env, path string, pos int64) {
		o := e.open(0)
		_, err := o.log.Load(func(int64, log.Record) error { return nil })
		o.close(t)
		var ce *log.CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("load returned %v, want *log.CorruptError", err)
		}
		if ce.File != path || ce.Offset != pos || ce.Shard != 0 {
			t.Fatalf("corruption reported at %s byte %d, want %s byte %d", ce.File, ce.Offset, path, pos)
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprint(pos)) {
			t.Fatalf("error does not name file and offset: %v", err)
		}
		rep, verr := verifyFS(e.mem, e.opts.Dir)
		var vce *log.CorruptError
		if !errors.As(verr, &vce) || rep.OK() || *vce != *ce {
			t.Fatalf("verify reported %v, load reported %v", verr, err)
		}
	}

	t.Run("sealed segment", func(t *testing.T) {
		e, bases := build(t, 4096)
		if len(bases) < 3 {
			t.Fatalf("want several segments, have %v", bases)
		}
		path := e.segFile(0, bases[1])
		data, _ := e.mem.ReadFile(path)
		pos := batchPos(data, 2)
		data[pos+40] ^= 0x01
		e.mem.WriteFile(path, data)
		check(t, e, path, pos)
	})
	t.Run("last batch of sealed segment", func(t *testing.T) {
		e, bases := build(t, 4096)
		path := e.segFile(0, bases[0])
		data, _ := e.mem.ReadFile(path)
		data = data[:len(data)-3] // a sealed segment is never torn
		e.mem.WriteFile(path, data)
		var b Batch
		pos := int64(headerLen)
		for {
			n, err := DecodeBatch(data[pos:], MaxFrameBytes, &b)
			if err != nil {
				break
			}
			pos += int64(n)
		}
		check(t, e, path, pos)
	})
	t.Run("newest segment with later writes intact", func(t *testing.T) {
		e, _ := build(t, 0)
		path := e.segFile(0, 0)
		data, _ := e.mem.ReadFile(path)
		pos := batchPos(data, 5)
		data[pos+35] ^= 0x80
		e.mem.WriteFile(path, data)
		check(t, e, path, pos)
	})
	t.Run("bad segment header", func(t *testing.T) {
		e, _ := build(t, 0)
		path := e.segFile(0, 0)
		data, _ := e.mem.ReadFile(path)
		data[13] ^= 0x01
		e.mem.WriteFile(path, data)
		check(t, e, path, 0)
	})
}

func TestS52_TornRollSegmentRemoved(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	o.load(t)
	o.rec.waitDurable(t, o.mustAppend(t, rec("a", "1"), rec("b", "2")))
	o.close(t)
	// A crash during roll left the next segment with a partial header.
	torn := e.segFile(0, 2)
	e.mem.WriteFile(torn, header{shard: 0, base: 2, replacedFrom: -1, replacedTo: -1}.encode()[:17])
	got, next := e.reload(0)
	if len(got) != 2 || next != 2 {
		t.Fatalf("loaded %v next %d", got, next)
	}
	if _, err := e.mem.ReadFile(torn); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("torn segment still there: %v", err)
	}
}

// §4.7: a write error fails every pending append, cuts the segment back and the log goes on.
func TestS47_WriteErrorThenContinue(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	o.load(t)
	for i := 0; i < 3; i++ {
		o.rec.waitDurable(t, o.mustAppend(t, rec(fmt.Sprintf("ok%d", i), "v")))
	}
	path := e.segFile(0, 0)
	sizeBefore, _ := e.mem.ReadFile(path)

	// The next write runs out of space half way; appends made meanwhile are held back by
	// blocking that write until they are queued.
	e.mem.SetPartialWrites(true)
	release := make(chan struct{})
	var writes atomic.Int32
	e.mem.SetInject(func(op Op, p string) error {
		if op == OpWrite && writes.Add(1) == 1 {
			<-release
			return errors.New("no space left on device")
		}
		return nil
	})
	o.mustAppend(t, rec("lost1", "v"))
	// Let the syncer take that batch, then queue more behind it.
	time.Sleep(10 * time.Millisecond)
	o.mustAppend(t, rec("lost2", "v"), rec("lost3", "v"))
	close(release)
	werr := o.rec.waitLost(t, 1)
	if werr.First != 3 || werr.Last != 5 || !werr.Retriable() {
		t.Fatalf("lost %d..%d, want 3..5", werr.First, werr.Last)
	}
	if after, _ := e.mem.ReadFile(path); len(after) != len(sizeBefore) {
		t.Fatalf("segment is %d bytes after the failed write, want it cut back to %d", len(after), len(sizeBefore))
	}
	// Until the shard has dropped its speculative state, appends are refused with the same error.
	_, err := o.log.Append([]log.Record{rec("computed-from-lost-state", "v")})
	var got *log.WriteError
	if !errors.As(err, &got) || got != werr {
		t.Fatalf("append before resume: %v", err)
	}
	if d := o.rec.durableOffset(); d != 2 {
		t.Fatalf("durable %d, want 2: nothing lost may be reported durable", d)
	}
	o.rec.resume()
	last := o.mustAppend(t, rec("after", "v"))
	if last != 6 {
		t.Fatalf("offset after resume %d, want 6 (lost offsets are not reused)", last)
	}
	o.rec.waitDurable(t, last)
	o.close(t)
	e.mem.Crash(nil)
	entries, next := e.reload(0)
	var keys []string
	for _, en := range entries {
		keys = append(keys, fmt.Sprintf("%d:%s", en.off, en.key))
	}
	if want := "0:ok0 1:ok1 2:ok2 6:after"; strings.Join(keys, " ") != want {
		t.Fatalf("replayed %v, want %s", keys, want)
	}
	if next != 7 {
		t.Fatalf("next %d", next)
	}
}

func TestS47_WriteErrorWithoutLostCallbackIsFatal(t *testing.T) {
	e := newMemEnv(t)
	st, err := Open(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := newRecorder()
	cb := r.callbacks()
	cb.Lost = nil
	l, err := st.Open(0, cb)
	if err != nil {
		t.Fatal(err)
	}
	l.Load(func(int64, log.Record) error { return nil })
	e.mem.SetInject(func(op Op, p string) error {
		if op == OpWrite {
			return errInjected
		}
		return nil
	})
	l.Append([]log.Record{rec("a", "b")})
	ferr := r.waitFailed(t)
	var werr *log.WriteError
	if !errors.As(ferr, &werr) {
		t.Fatalf("failure %v does not carry the write error", ferr)
	}
	if _, err := l.Append([]log.Record{rec("a", "b")}); !errors.Is(err, log.ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
}

func TestS47_WriteErrorAndCutBackFailsIsFatal(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	defer o.store.Close()
	o.load(t)
	e.mem.SetInject(func(op Op, p string) error {
		if op == OpWrite || op == OpTruncate {
			return errInjected
		}
		return nil
	})
	o.mustAppend(t, rec("a", "b"))
	if err := o.rec.waitFailed(t); !strings.Contains(err.Error(), "cutting") {
		t.Fatalf("failure: %v", err)
	}
}

// §4.7: an fsync error is fatal; nothing after the last Durable report is ever reported durable.
func TestS47_FsyncErrorIsFatal(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	o.load(t)
	var acked int64
	for i := 0; i < 5; i++ {
		acked = o.mustAppend(t, rec(fmt.Sprintf("k%d", i), "v"))
		o.rec.waitDurable(t, acked)
	}
	e.mem.SetInject(func(op Op, p string) error {
		if op == OpSync {
			return errors.New("EIO")
		}
		return nil
	})
	o.mustAppend(t, rec("never", "durable"))
	ferr := o.rec.waitFailed(t)
	if !strings.Contains(ferr.Error(), "fsync") {
		t.Fatalf("failure %v", ferr)
	}
	e.mem.SetInject(nil) // even with a healthy disk again, the log stays failed
	if _, err := o.log.Append([]log.Record{rec("later", "v")}); !errors.Is(err, log.ErrFailed) {
		t.Fatalf("append after fsync failure: %v", err)
	}
	if err := o.log.Compact(); !errors.Is(err, log.ErrFailed) {
		t.Fatalf("compact after fsync failure: %v", err)
	}
	o.close(t)
	if d := o.rec.durableOffset(); d != acked {
		t.Fatalf("durable reported up to %d, last acknowledged was %d", d, acked)
	}
	e.mem.Crash(nil)
	got, _ := e.reload(0)
	if int64(len(got)) != acked+1 {
		t.Fatalf("after crash: %v", got)
	}
}

func TestS52_ShardCountMismatchRefused(t *testing.T) {
	e := newMemEnv(t)
	e.open(0).close(t)
	e.opts.Shards = 8
	_, err := Open(e.opts)
	if err == nil || !strings.Contains(err.Error(), "4 shards") || !strings.Contains(err.Error(), "8") {
		t.Fatalf("open with another shard count: %v", err)
	}
	// The lock was released by the failed open.
	e.opts.Shards = 4
	e.open(0).close(t)
}

func TestS52_DirectoryWithoutMetaRefused(t *testing.T) {
	e := newMemEnv(t)
	e.mem.MkdirAll("/data/shard-0", 0o755)
	if _, err := Open(e.opts); err == nil || !strings.Contains(err.Error(), "meta.properties") {
		t.Fatalf("open of a directory with shards but no meta.properties: %v", err)
	}
}

func TestS52_LockHeld(t *testing.T) {
	e := newOSEnv(t)
	first, err := Open(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(e.opts); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open of a locked directory: %v", err)
	}
	if _, err := Verify(e.opts.Dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("verify of a directory in use: %v", err)
	}
	first.Close()
	second, err := Open(e.opts)
	if err != nil {
		t.Fatalf("open after the lock was released: %v", err)
	}
	second.Close()
}

func TestS51_ShardOpenOnce(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	defer o.close(t)
	if _, err := o.store.Open(0, newRecorder().callbacks()); err == nil {
		t.Fatal("shard opened twice")
	}
	if _, err := o.store.Open(4, newRecorder().callbacks()); err == nil {
		t.Fatal("shard outside the count opened")
	}
}

// §6.4: crash at every step of a segment roll: the log loads, with every acknowledged record
// and no partial batch.
func TestS64_CrashAtEveryRollStep(t *testing.T) {
	for k := 0; ; k++ {
		e := newMemEnv(t)
		e.opts.SegmentBytes = 4096
		o := e.open(0)
		o.load(t)
		val := strings.Repeat("v", 1500)
		o.rec.waitDurable(t, o.mustAppend(t, rec("a", val), rec("b", val)))
		var ops atomic.Int32
		dead := errors.New("process died")
		e.mem.SetInject(func(op Op, p string) error {
			if op.Mutating() && ops.Add(1) > int32(k) {
				return dead
			}
			return nil
		})
		o.mustAppend(t, rec("c", val), rec("d", val)) // forces a roll
		o.rec.wait(t, "durable or failure", func() bool { return o.rec.durable >= 3 || o.rec.failed != nil || len(o.rec.lost) > 0 })
		finished := o.rec.durableOffset() >= 3
		acked := o.rec.durableOffset()
		e.mem.Crash(nil)
		e.mem.SetInject(nil)
		o.store.Close()

		got, next := e.reload(0)
		if int64(len(got)) < acked+1 || (len(got) != 2 && len(got) != 4) {
			t.Fatalf("crash after %d ops: acked %d, replayed %v", k, acked, got)
		}
		if next < int64(len(got)) {
			t.Fatalf("next %d", next)
		}
		if finished {
			if k < 3 {
				t.Fatalf("roll finished in %d operations?", k)
			}
			return
		}
	}
}

func TestS52_ConcurrentCallersAreRaceFree(t *testing.T) {
	// Appends from the shard goroutine while the syncer writes, rolls and reports.
	e := newOSEnv(t)
	e.opts.SegmentBytes = 8192
	o := e.open(0)
	o.load(t)
	var last int64
	for i := 0; i < 2000; i++ {
		last = o.mustAppend(t, rec(fmt.Sprintf("k%d", i%50), strings.Repeat("v", i%100)))
		if i%500 == 0 {
			if err := o.log.Compact(); err != nil {
				t.Fatal(err)
			}
		}
	}
	o.rec.waitDurable(t, last)
	o.close(t)
	got, _ := e.reload(0)
	if len(live(got)) != 50 {
		t.Fatalf("live keys %d", len(live(got)))
	}
}

// The shard runtime's way out of a write error: close the log and load it again.
func TestS47_WriteErrorThenReload(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	o.load(t)
	o.rec.waitDurable(t, o.mustAppend(t, rec("a", "1"), rec("b", "2")))
	e.mem.SetInject(func(op Op, p string) error {
		if op == OpWrite {
			return errors.New("no space left on device")
		}
		return nil
	})
	o.mustAppend(t, rec("c", "3"))
	if werr := o.rec.waitLost(t, 1); werr.First != 2 || werr.Last != 2 {
		t.Fatalf("lost %v", werr)
	}
	e.mem.SetInject(nil)
	o.close(t)
	o = e.open(0)
	got, next := o.load(t)
	if len(got) != 2 || next != 2 {
		t.Fatalf("reloaded %v next %d", got, next)
	}
	o.rec.waitDurable(t, o.mustAppend(t, rec("c", "3")))
	o.close(t)
	if got, _ := e.reload(0); len(got) != 3 {
		t.Fatalf("reloaded %v", got)
	}
}

// §4.7 at a roll: failing to create the next segment is a write error (the log goes on in the
// current one); failing to fsync it or its directory is fatal like any fsync error.
func TestS47_RollFailures(t *testing.T) {
	for _, c := range []struct {
		op    Op
		fatal bool
	}{{OpCreate, false}, {OpWrite, false}, {OpSync, true}, {OpSyncDir, true}} {
		t.Run(c.op.String(), func(t *testing.T) {
			e := newMemEnv(t)
			e.opts.SegmentBytes = minSegmentBytes
			o := e.open(0)
			defer o.store.Close()
			o.load(t)
			big := strings.Repeat("v", 3000)
			o.rec.waitDurable(t, o.mustAppend(t, rec("a", big)))
			next := e.segFile(0, 1)
			e.mem.SetInject(func(op Op, p string) error {
				if op == c.op && (p == next || (op == OpSyncDir && p == filepath.Dir(next))) {
					return errInjected
				}
				return nil
			})
			o.mustAppend(t, rec("b", big)) // does not fit: rolls to segment 1
			if c.fatal {
				if err := o.rec.waitFailed(t); !errors.Is(err, errInjected) {
					t.Fatalf("failure %v", err)
				}
				return
			}
			if werr := o.rec.waitLost(t, 1); werr.First != 1 || werr.Last != 1 {
				t.Fatalf("lost %v", werr)
			}
			if _, err := e.mem.ReadFile(next); err == nil {
				t.Fatal("half-created segment left behind")
			}
			e.mem.SetInject(nil)
			o.rec.resume()
			o.rec.waitDurable(t, o.mustAppend(t, rec("c", big)))
			o.close(t)
			if got, _ := e.reload(0); len(got) != 2 || got[1].off != 2 {
				t.Fatalf("reloaded %v", got)
			}
		})
	}
}
