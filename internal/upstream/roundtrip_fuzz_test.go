package upstream

import (
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTripRequests are what RoundTrip sends: the gateway's own SASL login and transaction
// markers (non-flexible), and flexible versions of them, whose answers carry header tags.
func roundTripRequests() []kmsg.Request {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	auth1 := kmsg.NewPtrSASLAuthenticateRequest()
	auth1.Version, auth1.SASLAuthBytes = 1, []byte("\x00u\x00p")
	auth2 := kmsg.NewPtrSASLAuthenticateRequest()
	auth2.Version = 2
	markers1 := kmsg.NewPtrWriteTxnMarkersRequest()
	markers1.Version = 1
	markers0 := kmsg.NewPtrWriteTxnMarkersRequest()
	markers0.Version = 0
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	return []kmsg.Request{hs, auth1, auth2, markers1, markers0, av}
}

// FuzzRoundTripAnswer: whatever an upstream answers (a well-sized frame with the awaited
// correlation id and any body, or any bytes at all), RoundTrip returns an answer or an error in
// work proportional to the bytes read, never panics, never reads more than its 1 MiB bound.
func FuzzRoundTripAnswer(f *testing.F) {
	for i, req := range roundTripRequests() {
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		body := resp.AppendTo(nil)
		if resp.IsFlexible() && req.Key() != 18 {
			body = append([]byte{0}, body...)
		}
		f.Add(uint8(i), false, body)
	}
	f.Add(uint8(0), true, []byte{0x7f, 0xff, 0xff, 0xff})
	f.Add(uint8(0), true, []byte{0, 0, 0, 2, 0, 0})
	// A header claiming 2^32-1 tagged fields and holding none: skipped once per claimed tag
	// before the fix, some 2^32 turns of a loop over an empty reader (minutes of CPU).
	f.Add(uint8(2), false, []byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, pick uint8, raw bool, answer []byte) {
		reqs := roundTripRequests()
		req := reqs[int(pick)%len(reqs)]
		client, server := net.Pipe()
		served := make(chan struct{})
		go func() {
			defer close(served)
			defer server.Close()
			var size [4]byte
			if _, err := io.ReadFull(server, size[:]); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, server, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
				return
			}
			frame := answer
			if !raw {
				frame = binary.BigEndian.AppendUint32(nil, uint32(4+len(answer)))
				frame = binary.BigEndian.AppendUint32(frame, 1) // the first request's correlation id
				frame = append(frame, answer...)
			}
			server.Write(frame)
		}()
		var corr int32
		resp, err := RoundTrip(client, "c", &corr, req)
		client.Close()
		<-served
		if err == nil && resp.Key() != req.Key() {
			t.Fatalf("a %s answer for a %s request", kmsg.NameForKey(resp.Key()), kmsg.NameForKey(req.Key()))
		}
	})
}
