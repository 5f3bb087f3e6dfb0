package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// history appends a mix of overwrites and deletes over a few segments and returns the entries
// appended, in order. The clock advances a minute per batch.
func history(t *testing.T, e *env, o *opened, batches int, seed uint64) []entry {
	t.Helper()
	all, _ := historyTimed(t, e, o, batches, seed)
	return all
}

// historyTimed is history that also returns each offset's batch append time (Unix ms).
func historyTimed(t *testing.T, e *env, o *opened, batches int, seed uint64) ([]entry, map[int64]int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	times := map[int64]int64{}
	var all []entry
	var last int64 = -1
	for i := 0; i < batches; i++ {
		n := 1 + rng.IntN(4)
		recs := make([]log.Record, n)
		for j := range recs {
			k := fmt.Sprintf("key-%02d", rng.IntN(30))
			if rng.IntN(5) == 0 {
				recs[j] = tombstone(k)
			} else {
				recs[j] = rec(k, fmt.Sprintf("v%d.%d-%s", i, j, strings.Repeat("x", rng.IntN(120))))
			}
		}
		last = o.mustAppend(t, recs...)
		for j, r := range recs {
			en := entry{off: last - int64(n-1-j), key: string(r.Key)}
			if r.Value != nil {
				v := string(r.Value)
				en.val = &v
			}
			all = append(all, en)
			times[en.off] = e.clock.Now().UnixMilli()
		}
		e.clock.Advance(time.Minute)
		// One write per batch keeps segment boundaries, and so the test, deterministic.
		o.rec.waitDurable(t, last)
	}
	o.rec.waitDurable(t, last)
	return all, times
}

func compactEnv(t *testing.T) *env {
	e := newMemEnv(t)
	e.opts.SegmentBytes = 4096
	e.opts.DeleteRetention = time.Hour
	return e
}

func segmentBases(t *testing.T, e *env, shard int32) []int64 {
	t.Helper()
	fs := e.opts.FS
	if fs == nil {
		fs = OSFS{}
	}
	names, err := fs.ReadDir(filepath.Join(e.opts.Dir, shardDirName(shard)))
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, n := range names {
		if b, ext, ok := parseSegmentName(n); ok {
			if ext != logExt {
				t.Fatalf("leftover %s", n)
			}
			bases = append(bases, b)
		}
	}
	return bases
}

// §5.2 compaction: newest record per key with its offset; old tombstones dropped, recent ones
// kept; the active segment untouched; the replayed live state unchanged.
func TestS52_CompactionKeepsNewestPerKeyAndOffsets(t *testing.T) {
	e := compactEnv(t)
	e.opts.DeleteRetention = 30 * time.Minute
	o := e.open(0)
	o.load(t)
	all, times := historyTimed(t, e, o, 300, 7)
	compactedAt := e.clock.Now()
	before := segmentBases(t, e, 0)
	if len(before) < 4 {
		t.Fatalf("want several segments, have %v", before)
	}
	active := before[len(before)-1]
	activeData, _ := e.mem.ReadFile(e.segFile(0, active))

	if err := o.log.Compact(); err != nil {
		t.Fatal(err)
	}
	after := segmentBases(t, e, 0)
	if !reflect.DeepEqual(after, []int64{before[0], active}) {
		t.Fatalf("segments after compaction %v, want [%d %d]", after, before[0], active)
	}
	if got, _ := e.mem.ReadFile(e.segFile(0, active)); string(got) != string(activeData) {
		t.Fatal("active segment changed")
	}
	// Appends go on after compaction.
	last := o.mustAppend(t, rec("post", "compaction"))
	o.rec.waitDurable(t, last)
	all = append(all, entry{off: last, key: "post", val: ptr("compaction")})
	o.close(t)

	got, next := e.reload(0)
	if next != last+1 {
		t.Fatalf("next %d, want %d", next, last+1)
	}
	if !reflect.DeepEqual(live(got), live(all)) {
		t.Fatalf("live state changed by compaction:\n got %v\nwant %v", live(got), live(all))
	}
	if !reflect.DeepEqual(liveOffsets(got), liveOffsets(all)) {
		t.Fatal("compaction changed offsets of live records")
	}
	// The compacted range holds exactly the newest record of each key among the sealed ones,
	// minus tombstones appended before the retention horizon. history advanced the clock a
	// minute per batch, so with a 30-minute retention the tombstones of the last 30 batches stay.
	newest := map[string]int64{}
	for _, en := range all {
		if en.off < active {
			newest[en.key] = en.off
		}
	}
	horizon := compactedAt.Add(-e.opts.DeleteRetention).UnixMilli()
	var want, have []string
	keptTombs, droppedTombs := 0, 0
	for _, en := range all {
		if en.off >= active || newest[en.key] != en.off {
			continue
		}
		if en.val == nil && times[en.off] < horizon {
			droppedTombs++
			continue
		}
		if en.val == nil {
			keptTombs++
		}
		want = append(want, en.String())
	}
	for _, en := range got {
		if en.off < active {
			have = append(have, en.String())
		}
	}
	if !reflect.DeepEqual(have, want) {
		t.Fatalf("compacted range:\n got %v\nwant %v", have, want)
	}
	if keptTombs == 0 || droppedTombs == 0 {
		t.Fatalf("history should exercise both retention outcomes: kept %d dropped %d tombstones", keptTombs, droppedTombs)
	}
}

func ptr(s string) *string { return &s }

func TestS52_CompactionTombstoneRetention(t *testing.T) {
	e := compactEnv(t)
	e.opts.SegmentBytes = minSegmentBytes
	o := e.open(0)
	o.load(t)
	pad := strings.Repeat("p", 3000)
	// One write per batch, so the segment layout is fixed: [0..5] [6] [7].
	step := func(recs ...log.Record) { o.rec.waitDurable(t, o.mustAppend(t, recs...)) }
	step(rec("old", "v"), rec("recent", "v"), rec("kept", "v"))
	step(tombstone("old"))
	e.clock.Advance(2 * time.Hour) // "old"'s tombstone is now past the one-hour retention
	step(tombstone("recent"))
	step(rec("pad1", pad))
	step(rec("pad2", pad)) // rolls
	step(rec("pad3", pad)) // rolls: everything above is sealed
	if err := o.log.Compact(); err != nil {
		t.Fatal(err)
	}
	o.close(t)
	got, _ := e.reload(0)
	var keys []string
	for _, en := range got {
		keys = append(keys, en.String()[:strings.Index(en.String(), "=")]+map[bool]string{true: "-", false: "+"}[en.val == nil])
	}
	// offset 0 "old" is superseded by its tombstone at 3, which is older than the retention:
	// both gone. "recent"'s tombstone at 4 is recent: kept, and its old value gone.
	want := "2:kept+ 4:recent- 5:pad1+ 6:pad2+ 7:pad3+"
	if strings.Join(keys, " ") != want {
		t.Fatalf("after compaction %s, want %s", strings.Join(keys, " "), want)
	}
	// Once the retention has passed for it too, the second tombstone goes at the next compaction.
	e.clock.Advance(2 * time.Hour)
	o = e.open(0)
	o.load(t)
	if err := o.log.Compact(); err != nil {
		t.Fatal(err)
	}
	o.close(t)
	got, _ = e.reload(0)
	for _, en := range got {
		if en.key == "recent" {
			t.Fatalf("expired tombstone kept: %v", got)
		}
	}
}

func TestS52_CompactionRepeatedKeepsLiveState(t *testing.T) {
	e := compactEnv(t)
	o := e.open(0)
	o.load(t)
	var all []entry
	for round := 0; round < 4; round++ {
		all = append(all, history(t, e, o, 80, uint64(round))...)
		if err := o.log.Compact(); err != nil {
			t.Fatal(err)
		}
		o.close(t)
		got, _ := e.reload(0)
		if !reflect.DeepEqual(live(got), live(all)) {
			t.Fatalf("round %d: live state changed", round)
		}
		o = e.open(0)
		o.load(t)
	}
	o.close(t)
}

func TestS52_CompactionWithNothingSealed(t *testing.T) {
	e := newMemEnv(t)
	o := e.open(0)
	defer o.close(t)
	if err := o.log.Compact(); err == nil {
		t.Fatal("compact before load succeeded")
	}
	o.load(t)
	o.rec.waitDurable(t, o.mustAppend(t, rec("a", "1"), rec("a", "2")))
	if err := o.log.Compact(); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(t, e, 0); len(got) != 1 {
		t.Fatalf("segments %v", got)
	}
}

// §6.4: a crash at every step of compaction leaves a log that loads with the same live state.
func TestS64_CrashAtEveryCompactionStep(t *testing.T) {
	base := compactEnv(t)
	o := base.open(0)
	o.load(t)
	all := history(t, base, o, 200, 42)
	o.close(t)
	want := live(all)
	wantOffsets := liveOffsets(all)
	dead := errors.New("process died")

	for k := 0; ; k++ {
		e := *base
		e.mem = base.mem.Clone()
		e.opts.FS = e.mem
		o := e.open(0)
		o.load(t)
		var ops atomic.Int32
		e.mem.SetInject(func(op Op, p string) error {
			if op.Mutating() && ops.Add(1) > int32(k) {
				return dead
			}
			return nil
		})
		err := o.log.Compact()
		e.mem.SetInject(nil)
		o.store.Close()
		for _, torn := range []bool{false, true} {
			c := &e
			if torn {
				// The same crash, but unsynced appended bytes partly reach the disk.
				c2 := e
				c2.mem = e.mem.Clone()
				c2.opts.FS = c2.mem
				c = &c2
				c.mem.Crash(func(_ string, b []byte) (int, bool) { return len(b) / 3, false })
			} else {
				c.mem.Crash(nil)
			}
			got, _ := c.reload(0)
			if !reflect.DeepEqual(live(got), want) || !reflect.DeepEqual(liveOffsets(got), wantOffsets) {
				t.Fatalf("crash after %d operations of compaction (torn %v, compact err %v): live state differs\nfiles:\n%s", k, torn, err, c.mem)
			}
			// Recovery left only segment files, and a second open finds nothing to repair.
			segmentBases(t, c, 0)
		}
		if err == nil {
			if k < 5 {
				t.Fatalf("compaction completed in %d mutating operations", k)
			}
			t.Logf("compaction takes %d mutating operations; crashed after each", k)
			return
		}
	}
}

// A crash that made the final rename durable but lost the deletions (possible on a real file
// system) leaves replaced segments next to the compacted one: they are deleted on open.
func TestS52_OrphanedReplacedSegmentsDeleted(t *testing.T) {
	e := compactEnv(t)
	o := e.open(0)
	o.load(t)
	all := history(t, e, o, 150, 3)
	o.close(t)
	before := segmentBases(t, e, 0)
	saved := map[int64][]byte{}
	for _, b := range before[1 : len(before)-1] {
		saved[b], _ = e.mem.ReadFile(e.segFile(0, b))
	}
	o = e.open(0)
	o.load(t)
	if err := o.log.Compact(); err != nil {
		t.Fatal(err)
	}
	o.close(t)
	for b, data := range saved {
		e.mem.WriteFile(e.segFile(0, b), data)
	}
	got, _ := e.reload(0)
	if !reflect.DeepEqual(live(got), live(all)) {
		t.Fatal("live state differs")
	}
	if after := segmentBases(t, e, 0); len(after) != 2 {
		t.Fatalf("orphans not removed: %v", after)
	}
}

func TestS52_CompactionRacesSyncer(t *testing.T) {
	// Compaction on the shard goroutine while the syncer writes and rolls (run with -race).
	e := newOSEnv(t)
	e.opts.SegmentBytes = minSegmentBytes
	o := e.open(0)
	o.load(t)
	var all []entry
	for i := 0; i < 3000; i++ {
		k := fmt.Sprintf("k%d", i%40)
		v := fmt.Sprintf("v%d", i)
		off := o.mustAppend(t, rec(k, v))
		all = append(all, entry{off: off, key: k, val: &v})
		if i%300 == 299 {
			if err := o.log.Compact(); err != nil {
				t.Fatal(err)
			}
		}
	}
	o.close(t)
	got, _ := e.reload(0)
	if !reflect.DeepEqual(live(got), live(all)) {
		t.Fatal("live state differs")
	}
}

func TestS52_CompactionFailureBeforeCommitLeavesLogAsItWas(t *testing.T) {
	e := compactEnv(t)
	o := e.open(0)
	o.load(t)
	all := history(t, e, o, 120, 9)
	before := segmentBases(t, e, 0)
	e.mem.SetInject(func(op Op, p string) error {
		if op == OpWrite && strings.HasSuffix(p, cleanedExt) {
			return errors.New("no space left on device")
		}
		return nil
	})
	if err := o.log.Compact(); err == nil {
		t.Fatal("compaction succeeded without space")
	}
	e.mem.SetInject(nil)
	if after := segmentBases(t, e, 0); !reflect.DeepEqual(after, before) {
		t.Fatalf("segments %v, want %v", after, before)
	}
	// The log is unaffected: appends and a later compaction work.
	last := o.mustAppend(t, rec("more", "v"))
	o.rec.waitDurable(t, last)
	all = append(all, entry{off: last, key: "more", val: ptr("v")})
	if err := o.log.Compact(); err != nil {
		t.Fatal(err)
	}
	o.close(t)
	if got, _ := e.reload(0); !reflect.DeepEqual(live(got), live(all)) {
		t.Fatal("live state differs")
	}
}

func TestS52_CompactionFailureAfterCommitIsFinishedLater(t *testing.T) {
	e := compactEnv(t)
	o := e.open(0)
	o.load(t)
	all := history(t, e, o, 120, 11)
	e.mem.SetInject(func(op Op, p string) error {
		if op == OpRemove && strings.HasSuffix(p, logExt) {
			return errors.New("EIO")
		}
		return nil
	})
	if err := o.log.Compact(); err == nil {
		t.Fatal("compaction succeeded although replaced segments could not be deleted")
	}
	e.mem.SetInject(nil)
	// The next Compact first finishes the committed swap.
	if err := o.log.Compact(); err != nil {
		t.Fatal(err)
	}
	if b := segmentBases(t, e, 0); len(b) != 2 {
		t.Fatalf("segments %v", b)
	}
	o.close(t)
	if got, _ := e.reload(0); !reflect.DeepEqual(live(got), live(all)) {
		t.Fatal("live state differs")
	}
}
