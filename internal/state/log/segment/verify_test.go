package segment

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

func TestVerifyAndDump(t *testing.T) {
	e := newOSEnv(t)
	e.opts.SegmentBytes = minSegmentBytes
	st, err := Open(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, shard := range []int32{0, 2} {
		r := newRecorder()
		l, err := st.Open(shard, r.callbacks())
		if err != nil {
			t.Fatal(err)
		}
		l.Load(func(int64, log.Record) error { return nil })
		var last int64
		for i := 0; i < 50; i++ {
			last, _ = l.Append([]log.Record{rec(fmt.Sprintf("k%d", i%7), strings.Repeat("v", 200)), tombstone("gone")})
			r.waitDurable(t, last)
		}
		l.Close()
	}
	st.Close()

	rep, err := Verify(e.opts.Dir)
	if err != nil || !rep.OK() {
		t.Fatalf("verify of a healthy log: %v", err)
	}
	if rep.Shards != 4 || len(rep.ShardReports) != 2 || rep.ShardReports[1].Shard != 2 {
		t.Fatalf("report %+v", rep)
	}
	sr := rep.ShardReports[0]
	if sr.Records != 100 || sr.Batches != 50 || sr.Tombstones != 50 || sr.FirstOffset != 0 || sr.LastOffset != 99 || len(sr.Segments) < 3 || sr.TornTail != nil {
		t.Fatalf("shard report %+v", sr)
	}

	var out bytes.Buffer
	if err := Dump(e.opts.Dir, 0, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"segment " + e.segFile(0, 0) + " base=0",
		"batch pos=40 base=0 last=1 count=2",
		"  offset=0 key=" + hex.EncodeToString([]byte("k0")) + " value=",
		"  offset=1 key=" + hex.EncodeToString([]byte("gone")) + " tombstone",
		"  offset=99 key=",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("dump lacks %q:\n%.2000s", want, out.String())
		}
	}
	if err := Dump(e.opts.Dir, 9, &out); err == nil {
		t.Fatal("dump of a shard outside the count succeeded")
	}

	// A torn tail: verify says what load would cut, and still passes.
	bases := segmentBases(t, e, 0)
	lastSeg := e.segFile(0, bases[len(bases)-1])
	f, _ := os.OpenFile(lastSeg, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{0, 0, 1, 0, 9, 9})
	f.Close()
	// An unfinished compaction output: verify lists it as recovery work.
	os.WriteFile(filepath.Join(e.opts.Dir, "shard-0", segmentName(0, cleanedExt)), []byte("partial"), 0o644)
	rep, err = Verify(e.opts.Dir)
	if err != nil || !rep.OK() {
		t.Fatalf("verify with a torn tail: %v", err)
	}
	if tt := rep.ShardReports[0].TornTail; tt == nil || tt.File != lastSeg || tt.Bytes != 6 {
		t.Fatalf("torn tail %+v", tt)
	}
	if r := rep.ShardReports[0].Recovery; len(r) != 1 || !strings.HasSuffix(r[0], cleanedExt) {
		t.Fatalf("recovery %v", r)
	}
	out.Reset()
	Dump(e.opts.Dir, 0, &out)
	if !strings.Contains(out.String(), "torn tail "+lastSeg) {
		t.Fatalf("dump does not show the torn tail:\n%s", out.String()[max(0, out.Len()-500):])
	}

	// Damage in a sealed segment: verify fails with the file and byte offset.
	sealed := e.segFile(0, bases[1])
	data, _ := os.ReadFile(sealed)
	data[headerLen+20] ^= 0xff
	os.WriteFile(sealed, data, 0o644)
	rep, err = Verify(e.opts.Dir)
	var ce *log.CorruptError
	if !errors.As(err, &ce) || ce.File != sealed || ce.Offset != headerLen || rep.OK() || rep.ShardReports[1].Err != nil {
		t.Fatalf("verify of a corrupt shard: %v", err)
	}
	out.Reset()
	if err := Dump(e.opts.Dir, 0, &out); !errors.As(err, &ce) || !strings.Contains(out.String(), "CORRUPT "+sealed) {
		t.Fatalf("dump of a corrupt shard: %v", err)
	}
	// Nothing was changed by verify or dump.
	if after, _ := os.ReadFile(sealed); !bytes.Equal(after, data) {
		t.Fatal("verify changed a file")
	}
	if _, err := os.Stat(filepath.Join(e.opts.Dir, "shard-0", segmentName(0, cleanedExt))); err != nil {
		t.Fatal("verify removed a file")
	}
}

func TestVerifyRequiresMeta(t *testing.T) {
	if _, err := Verify(t.TempDir()); err == nil {
		t.Fatal("verify of a directory without meta.properties succeeded")
	}
}
