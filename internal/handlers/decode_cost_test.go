package handlers

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxDecodeBytesPerFrameByte is the most heap a request body may cost to decode, per byte of
// body. kmsg checks every array length against the bytes left (one byte per element) before
// it allocates, so the cost is bounded by the size of the largest element struct per byte of
// the smallest element encoding, times the nesting depth.
//
// Measured with kmsg v1.15.1 on 2 KiB bodies: at most 91 (Metadata v9), 120 under -race; the
// bound leaves room for a kmsg upgrade to move it a little, not for an allocation sized by a
// claim instead of by the bytes present (that is thousands per byte, see the harness check).
const maxDecodeBytesPerFrameByte = 160

// adversarialBodies yields bodies of n bytes for one request version that make decoders claim
// as much as they can: at each of the first offsets an array length (int32 and compact forms,
// at one or two nesting levels) claiming the remaining bytes as elements of m bytes each (kmsg
// refuses a claim above the remaining bytes divided by the element's smallest encoding, so the
// most expensive claim is at the element's own m), the rest filled with a byte that encodes the
// smallest possible element (0x00: empty or null in both encodings; 0x01: empty compact array or
// string).
func adversarialBodies(n int, yield func([]byte)) {
	for _, fill := range []byte{0x00, 0x01} {
		body := make([]byte, n)
		for i := range body {
			body[i] = fill
		}
		yield(body)
		for at := 0; at < 32; at++ {
			for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 8, 12, 16} {
				b := append([]byte(nil), body...)
				binary.BigEndian.PutUint32(b[at:], uint32((n-at-4)/m))
				yield(b)
				// A compact length is the count plus one, and its own two bytes are not elements.
				b = append([]byte(nil), body...)
				binary.PutUvarint(b[at:], uint64((n-at-2)/m+1))
				yield(b)
				// An outer compact array of one element whose next field claims the rest.
				b = append([]byte(nil), body...)
				binary.PutUvarint(b[at:], 2)
				binary.PutUvarint(b[at+1:], uint64((n-at-3)/m+1))
				yield(b)
			}
		}
	}
}

// Issue 10 defect 3: decoding a frame of any served API and version costs at most a small
// multiple of its size, whatever lengths the frame claims, so queued.max.request.bytes bounds
// memory. The figure is heap allocated by ReadFrom (runtime.MemStats), not time.
func TestDecodeCostIsBoundedByFrameSize(t *testing.T) {
	const n = 2048
	worst, worstWhat := 0.0, ""
	// ReadMemStats, not runtime/metrics: only it flushes the per-P caches, so that the delta is
	// exactly this decode's allocations.
	var ms runtime.MemStats
	allocated := func() uint64 { runtime.ReadMemStats(&ms); return ms.TotalAlloc }
	// The harness must be able to see the defect it guards against: a decoder that trusts a
	// claimed length.
	naive := binary.BigEndian.AppendUint32(nil, 1<<20)
	before := allocated()
	trusting := make([]int32, binary.BigEndian.Uint32(naive))
	perByte := float64(allocated()-before) / float64(len(naive))
	runtime.KeepAlive(trusting)
	if perByte <= maxDecodeBytesPerFrameByte {
		t.Fatalf("harness measured %.0f bytes per byte for a claim-sized allocation", perByte)
	}
	for _, v := range New(Deps{}).Versions() {
		for version := v.MinVersion; version <= v.MaxVersion; version++ {
			adversarialBodies(n, func(body []byte) {
				req := kmsg.RequestForKey(v.ApiKey)
				req.SetVersion(version)
				before := allocated()
				_ = req.ReadFrom(body)
				after := allocated()
				runtime.KeepAlive(req)
				perByte := float64(after-before) / n
				if perByte > worst {
					worst, worstWhat = perByte, kmsg.NameForKey(v.ApiKey)+" v"+itoa(int(version))
				}
				if perByte > maxDecodeBytesPerFrameByte {
					t.Errorf("%s v%d: %.0f bytes allocated per frame byte decoding %x...", kmsg.NameForKey(v.ApiKey), version, perByte, body[:16])
				}
			})
		}
	}
	t.Logf("worst decode cost: %.1f heap bytes per frame byte (%s)", worst, worstWhat)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
