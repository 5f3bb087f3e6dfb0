package scenario

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A broker rejects a batch whose length or CRC is off (CORRUPT_MESSAGE), which would make every
// produce window an error: the batch must read back with both right.
func TestBuildBatchIsValid(t *testing.T) {
	for _, n := range []int{1, 64} {
		raw := buildBatch(n)
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			t.Fatalf("%d records: %v", n, err)
		}
		if int(b.Length) != len(raw)-12 || b.NumRecords != int32(n) || b.LastOffsetDelta != int32(n-1) {
			t.Fatalf("%d records: length %d of %d bytes, %d records, last delta %d", n, b.Length, len(raw), b.NumRecords, b.LastOffsetDelta)
		}
		if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); crc != binary.BigEndian.Uint32(raw[17:]) {
			t.Fatalf("%d records: CRC %x, batch says %x", n, crc, uint32(b.CRC))
		}
		if len(raw) < n*dataRecordBytes {
			t.Fatalf("%d records in %d bytes", n, len(raw))
		}
	}
}

// The coordinator suite (`make bench`) must not grow the data-path scenarios, whose targets are
// brokers; the gateway suite lists exactly them.
func TestGatewayScenariosAreTheirOwnSuite(t *testing.T) {
	for _, s := range All() {
		if BatchBytes(s) != 0 {
			t.Errorf("default suite has %s", s.Name())
		}
	}
	got := map[string]bool{}
	for _, s := range InSuite(SuiteGateway) {
		got[s.Name()] = true
	}
	for _, n := range []string{"produce-1k", "produce-64k", "fetch-1k", "fetch-64k"} {
		if !got[n] || len(got) != 4 {
			t.Fatalf("gateway suite %v, want produce and fetch of 1k and 64k", got)
		}
	}
}
