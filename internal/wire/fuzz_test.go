package wire

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReadFrame: any byte stream yields frames no larger than the limit, or an error; never a
// panic, never more than the limit allocated.
func FuzzReadFrame(f *testing.F) {
	f.Add(sized(3, []byte{1, 2, 3}))
	f.Add(sized(-1, nil))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			fr, err := ReadFrame(r, 1<<16)
			if err != nil {
				return
			}
			if len(fr) > 1<<16 {
				t.Fatalf("frame of %d bytes over the limit", len(fr))
			}
		}
	})
}

// FuzzParseRequest runs a frame through the same steps the connection loop does: header, tags
// for flexible versions, body decode for any known key and version.
func FuzzParseRequest(f *testing.F) {
	id := "c"
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	f.Add(append(append(header(3, 12, 1, &id), 0), md.AppendTo(nil)...))
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorKeys = []string{"a", "b"}
	f.Add(append(append(header(10, 4, 1, &id), 0), fc.AppendTo(nil)...))
	f.Add(header(18, 127, 1, nil))
	f.Add([]byte{0, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, rest, err := ParseHeader(in)
		if err != nil {
			return
		}
		req := kmsg.RequestForKey(h.Key)
		if req == nil || h.Version < 0 || h.Version > req.MaxVersion() {
			return
		}
		req.SetVersion(h.Version)
		if req.IsFlexible() {
			if rest, err = SkipHeaderTags(rest); err != nil {
				return
			}
		}
		_ = req.ReadFrom(rest)
	})
}
