package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sized(n int32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(n)), body...)
}

func TestReadFrame(t *testing.T) {
	var fe *FrameError
	cases := []struct {
		name    string
		in      []byte
		max     int32
		want    []byte
		wantErr func(error) bool
	}{
		{"whole frame", sized(3, []byte{1, 2, 3}), 10, []byte{1, 2, 3}, nil},
		{"empty frame", sized(0, nil), 10, []byte{}, nil},
		{"negative", sized(-1, nil), 10, nil, func(err error) bool { return errors.As(err, &fe) }},
		{"over max", sized(11, make([]byte, 11)), 10, nil, func(err error) bool { return errors.As(err, &fe) }},
		{"clean eof", nil, 10, nil, func(err error) bool { return err == io.EOF }},
		{"short prefix", []byte{0, 0}, 10, nil, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"short body", sized(5, []byte{1, 2}), 10, nil, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tc.in), tc.max)
			if tc.wantErr != nil {
				if err == nil || !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("got %v %v", got, err)
			}
		})
	}
}

// A reader that trickles one byte at a time must still produce the whole frame, growing the
// buffer only as data comes.
func TestReadFrameTrickle(t *testing.T) {
	body := bytes.Repeat([]byte{7}, 3*initialFrameChunk+5)
	got, err := ReadFrame(io.MultiReader(oneByteReader{bytes.NewReader(sized(int32(len(body)), body))}), 1<<30)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("trickled frame: %v", err)
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// A huge claimed size within the limit allocates only the first chunk until bytes arrive.
func TestReadFrameDoesNotTrustClaimedSize(t *testing.T) {
	ms := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ReadFrame(bytes.NewReader(sized(90_000_000, []byte{1, 2, 3})), 100_000_000)
		}
	})
	if perOp := ms.AllocedBytesPerOp(); perOp > 2*initialFrameChunk {
		t.Fatalf("allocated %d bytes for a 3-byte frame claiming 90 MB", perOp)
	}
}

func header(key, version int16, corr int32, clientID *string) []byte {
	b := kbin.AppendInt16(nil, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, corr)
	return kbin.AppendNullableString(b, clientID)
}

func TestParseHeader(t *testing.T) {
	id := "client-1"
	h, rest, err := ParseHeader(append(header(3, 12, -9, &id), 0xAA))
	if err != nil || h.Key != 3 || h.Version != 12 || h.CorrelationID != -9 || h.ClientID != id || !bytes.Equal(rest, []byte{0xAA}) {
		t.Fatalf("%+v %v %v", h, rest, err)
	}
	h, _, err = ParseHeader(header(3, 1, 1, nil))
	if err != nil || h.ClientID != "" {
		t.Fatalf("null client id should read as empty: %+v %v", h, err)
	}
	for n := 0; n < 10; n++ {
		if _, _, err := ParseHeader(header(3, 1, 1, &id)[:n]); err == nil {
			t.Fatalf("%d-byte header accepted", n)
		}
	}
	rest, err = SkipHeaderTags([]byte{2, 1, 1, 'x', 9, 0, 0xBB})
	if err != nil || !bytes.Equal(rest, []byte{0xBB}) {
		t.Fatalf("skip tags: %v %v", rest, err)
	}
	if _, err := SkipHeaderTags([]byte{1, 5, 40, 1}); err == nil {
		t.Fatal("tag running past the frame accepted")
	}
}

// A connection's requests are parsed knowing the client id of its last one: an id that
// changes, becomes null or is cut short must still read as the frame says, never as the last.
func TestParseHeaderKnowingLastClientID(t *testing.T) {
	a, b, empty := "client-a", "client-b", ""
	for _, tc := range []struct {
		name  string
		frame []byte
		known string
		want  string
	}{
		{"same id", header(8, 9, 1, &a), a, a},
		{"id changed", header(8, 9, 2, &b), a, b},
		{"id became null", header(8, 9, 3, nil), a, ""},
		{"id became empty", header(8, 9, 4, &empty), a, ""},
		{"prefix of the last", header(8, 9, 5, &empty), "", ""},
		{"last was a prefix", append(header(8, 9, 6, &a), 0xAA), "client-", a},
	} {
		h, rest, err := parseHeader(tc.frame, tc.known)
		wantH, wantRest, _ := ParseHeader(tc.frame)
		if err != nil || h.ClientID != tc.want || h != wantH || !bytes.Equal(rest, wantRest) {
			t.Errorf("%s: got %+v rest %x err %v, want client id %q (%+v rest %x)", tc.name, h, rest, err, tc.want, wantH, wantRest)
		}
	}
	for n := 0; n < len(header(8, 9, 1, &a)); n++ {
		if _, _, err := parseHeader(header(8, 9, 1, &a)[:n], a); err == nil {
			t.Errorf("%d-byte header accepted knowing its id", n)
		}
	}
}

func TestAppendResponseHeaderVersions(t *testing.T) {
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(4) // flexible, yet header v0
	b := AppendResponse(nil, 5, av)
	if want := 4 + 4 + len(av.AppendTo(nil)); len(b) != want {
		t.Fatalf("ApiVersions v4 frame %d bytes, want %d (no tag byte)", len(b), want)
	}
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(12)
	b = AppendResponse(nil, 5, md)
	if want := 4 + 4 + 1 + len(md.AppendTo(nil)); len(b) != want || b[8] != 0 {
		t.Fatalf("Metadata v12 frame %d bytes, want %d with an empty tag section", len(b), want)
	}
	if size := binary.BigEndian.Uint32(b); int(size) != len(b)-4 {
		t.Fatalf("size prefix %d for %d bytes", size, len(b)-4)
	}
}

// A frame read into a recycled buffer reads like any other: its exact bytes, even from a
// buffer that held a longer frame before, and a frame cut short by the end of the stream is
// io.ErrUnexpectedEOF (the connection closes as "truncated frame"), never a short frame.
func TestPooledFrameBodyReadsExactlyOrFailsAsTruncated(t *testing.T) {
	for _, size := range []int32{0, 1, 4 << 10, 4<<10 + 1, maxPooledFrame, maxPooledFrame + 1} {
		long := bytes.Repeat([]byte{0xee}, int(size)+100)
		if f, pooled, err := readPooledFrameBody(bytes.NewReader(long), size+100); err == nil && pooled {
			putFrame(f) // leave a used buffer of the class behind
		}
		body := bytes.Repeat([]byte{byte(size)}, int(size))
		got, _, err := readPooledFrameBody(bytes.NewReader(body), size)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("size %d: read %d bytes, err %v; want the frame's own %d bytes", size, len(got), err, size)
		}
		if size == 0 {
			continue
		}
		_, _, err = readPooledFrameBody(bytes.NewReader(body[:size-1]), size)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("size %d cut one byte short: err %v, want io.ErrUnexpectedEOF", size, err)
		}
		_, _, err = readPooledFrameBody(bytes.NewReader(nil), size)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("size %d with no body at all: err %v, want io.ErrUnexpectedEOF", size, err)
		}
	}
}
