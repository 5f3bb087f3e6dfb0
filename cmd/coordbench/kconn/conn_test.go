package kconn

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeServer answers ApiVersions with the given ranges, then serves answer for every later
// request; answer returns the response and the correlation id to write back.
func fakeServer(t *testing.T, ranges map[int16][2]int16, answer func(key, version int16, corr int32) (kmsg.Response, int32, bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return
			}
			b := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, b); err != nil {
				return
			}
			key := int16(binary.BigEndian.Uint16(b))
			version := int16(binary.BigEndian.Uint16(b[2:]))
			corr := int32(binary.BigEndian.Uint32(b[4:]))
			var resp kmsg.Response
			flexHeader := false
			if key == 18 {
				av := kmsg.NewPtrApiVersionsResponse()
				av.SetVersion(version)
				for k, r := range ranges {
					ak := kmsg.NewApiVersionsResponseApiKey()
					ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, r[0], r[1]
					av.ApiKeys = append(av.ApiKeys, ak)
				}
				resp = av
			} else {
				var ok bool
				if resp, corr, ok = answer(key, version, corr); !ok {
					return // hang up
				}
				resp.SetVersion(version)
				flexHeader = resp.IsFlexible()
			}
			out := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(corr))
			if flexHeader {
				out = append(out, 0) // empty tag section
			}
			out = resp.AppendTo(out)
			binary.BigEndian.PutUint32(out, uint32(len(out)-4))
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

func TestNegotiatesAndPicksCommonVersion(t *testing.T) {
	var gotVersion int16
	addr := fakeServer(t, map[int16][2]int16{18: {0, 3}, 3: {0, 9}}, func(key, version int16, corr int32) (kmsg.Response, int32, bool) {
		gotVersion = version
		r := kmsg.NewPtrMetadataResponse()
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 7, "h", 1
		r.Brokers = []kmsg.MetadataResponseBroker{b}
		return r, corr, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Supports(3) || c.Supports(8) {
		t.Errorf("Supports: metadata %v, offset commit %v", c.Supports(3), c.Supports(8))
	}
	resp, err := c.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatal(err)
	}
	if gotVersion != 9 {
		t.Errorf("sent Metadata v%d, want v9 (the server's max, below kmsg's)", gotVersion)
	}
	if r := resp.(*kmsg.MetadataResponse); len(r.Brokers) != 1 || r.Brokers[0].NodeID != 7 {
		t.Errorf("decoded %+v", r.Brokers)
	}
	if _, err := c.RequestCapped(ctx, kmsg.NewPtrMetadataRequest(), 4); err != nil || gotVersion != 4 {
		t.Errorf("capped request: v%d, %v", gotVersion, err)
	}
	// The version picked per key is remembered: a cap applies to its own request only, and
	// an unusable key stays unusable.
	if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil || gotVersion != 9 {
		t.Errorf("request after a capped one: v%d, %v; want v9", gotVersion, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Request(ctx, kmsg.NewPtrOffsetCommitRequest()); !errors.Is(err, ErrUnsupported) {
			t.Errorf("unadvertised API (%d): %v, want ErrUnsupported", i, err)
		}
	}
}

func TestWrongCorrelationBreaksTheConnection(t *testing.T) {
	addr := fakeServer(t, map[int16][2]int16{18: {0, 3}, 10: {0, 6}}, func(key, version int16, corr int32) (kmsg.Response, int32, bool) {
		return kmsg.NewPtrFindCoordinatorResponse(), corr + 1, true
	})
	ctx := context.Background()
	c, err := Dial(ctx, addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Request(ctx, kmsg.NewPtrFindCoordinatorRequest()); !errors.Is(err, ErrBroken) {
		t.Fatalf("got %v, want ErrBroken", err)
	}
	if _, err := c.Request(ctx, kmsg.NewPtrFindCoordinatorRequest()); !errors.Is(err, ErrBroken) {
		t.Errorf("request after a broken one: %v, want ErrBroken at once", err)
	}
}

func TestHangUpIsBroken(t *testing.T) {
	addr := fakeServer(t, map[int16][2]int16{18: {0, 3}, 10: {0, 6}}, func(int16, int16, int32) (kmsg.Response, int32, bool) {
		return nil, 0, false
	})
	ctx := context.Background()
	c, err := Dial(ctx, addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Request(ctx, kmsg.NewPtrFindCoordinatorRequest()); !errors.Is(err, ErrBroken) {
		t.Fatalf("got %v, want ErrBroken", err)
	}
}

func TestSkipTags(t *testing.T) {
	// two tags: key 1 with 2 bytes, key 5 with 0 bytes, then the body "Z"
	b, err := skipTags([]byte{2, 1, 2, 'a', 'b', 5, 0, 'Z'})
	if err != nil || string(b) != "Z" {
		t.Errorf("got %q, %v", b, err)
	}
	if _, err := skipTags([]byte{1, 1, 9, 'a'}); err == nil {
		t.Error("tag longer than the buffer accepted")
	}
}
