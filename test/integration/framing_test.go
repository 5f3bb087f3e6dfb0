package integration

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// assertServing proves the daemon still answers a fresh connection.
func assertServing(t *testing.T, d *daemon) {
	t.Helper()
	c := dialRaw(t, d.Addr)
	c.write(frame(kmsg.NewPtrApiVersionsRequest(), 0, 1, strp("probe"), nil))
	resp := kmsg.NewPtrApiVersionsResponse()
	c.read(resp, 0, 1)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions after bad input: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

func sizePrefix(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "socket.request.max.bytes=1048576")
	healthy := dialRaw(t, d.Addr)

	metadataHeader := func(key, version int16) []byte {
		b := kbin.AppendInt16(nil, key)
		b = kbin.AppendInt16(b, version)
		b = kbin.AppendInt32(b, 9)
		return kbin.AppendNullableString(b, strp("c"))
	}
	withSize := func(body []byte) []byte { return append(sizePrefix(int32(len(body))), body...) }

	cases := []struct {
		name    string
		bytes   []byte
		halfway bool // close our write side after sending, so a short frame hits EOF
		reason  string
	}{
		{"negative size (spec T01)", sizePrefix(-2147483648), false, "negative frame size"},
		{"size above socket.request.max.bytes (T02)", sizePrefix(1048577), false, "exceeds socket.request.max.bytes"},
		{"zero size (T06)", sizePrefix(0), false, "truncated request header"},
		{"header shorter than minimum (T06)", withSize([]byte{0, 3, 0}), false, "truncated request header"},
		{"unknown api key 200 (T07)", withSize(metadataHeader(200, 0)), false, "api key 200 version 0 is not served"},
		{"produce is not served (T08)", withSize(metadataHeader(0, 9)), false, "api key 0 version 9 is not served"},
		{"metadata above advertised max", withSize(metadataHeader(3, 14)), false, "api key 3 version 14 is not served"},
		{"body cut short by EOF (T05)", append(sizePrefix(100), make([]byte, 60)...), true, "frame cut short"},
		{"size prefix cut short (T04)", []byte{0, 0, 1}, true, ""},
		{"required string with length -2 (T15)", withSize(append(metadataHeader(10, 1), 0xff, 0xfe, 0)), false, "undecodable FindCoordinator v1 body"},
		{"array count 2147483647 in a tiny body (T16)", withSize(append(metadataHeader(3, 1), 0x7f, 0xff, 0xff, 0xff, 1, 2, 3, 4)), false, "undecodable Metadata v1 body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, d.Addr)
			local := c.nc.LocalAddr().String()
			c.write(tc.bytes)
			if tc.halfway {
				c.nc.(*net.TCPConn).CloseWrite()
			}
			c.expectClosed()
			if tc.reason != "" {
				d.waitLogged("closing connection", func(l map[string]any) bool {
					return l["peer"] == local && bytes.Contains([]byte(l["reason"].(string)), []byte(tc.reason))
				})
			}
		})
	}
	// The connection opened before all of this is untouched.
	healthy.write(frame(kmsg.NewPtrMetadataRequest(), 12, 5, strp("c"), nil))
	healthy.read(kmsg.NewPtrMetadataResponse(), 12, 5)
	assertServing(t, d)
}

func TestHugeSizePrefixAllocatesNothing(t *testing.T) {
	t.Parallel()
	d := startPlainDaemon(t) // default socket.request.max.bytes = 100 MiB
	assertServing(t, d)
	before := d.rssBytes()
	// 200 MB claimed: over the limit, closed before reading. 90 MB claimed: under the limit, the
	// peer then goes silent; the server must not have reserved 90 MB for it.
	var conns []*rawConn
	for i := 0; i < 20; i++ {
		c := dialRaw(t, d.Addr)
		c.write(sizePrefix(200_000_000))
		c.expectClosed()
		c2 := dialRaw(t, d.Addr)
		c2.write(append(sizePrefix(90_000_000), 1, 2, 3))
		conns = append(conns, c2)
	}
	time.Sleep(200 * time.Millisecond)
	assertServing(t, d)
	grown := d.rssBytes() - before
	if grown > 64<<20 {
		t.Fatalf("RSS grew by %d MiB for 20 claimed 90 MB frames that never arrived", grown>>20)
	}
	_ = conns
}

func TestTenThousandGarbageConnections(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: 20 000 connections")
	}
	d := startPlainDaemon(t)
	assertServing(t, d)
	flood := func(seed int64) {
		var wg sync.WaitGroup
		work := make(chan int)
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func(seed int64) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(seed))
				garbage := make([]byte, 512)
				for range work {
					nc, err := net.DialTimeout("tcp", d.Addr, 5*time.Second)
					if err != nil {
						t.Errorf("dial: %v", err)
						return
					}
					rng.Read(garbage)
					nc.SetDeadline(time.Now().Add(5 * time.Second))
					nc.Write(garbage[:1+rng.Intn(len(garbage))])
					nc.Close()
				}
			}(seed*100 + int64(w))
		}
		for i := 0; i < 10000; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		assertServing(t, d)
	}
	// The first 10 000 connections let the heap and the runtime grow to their working size; the
	// second 10 000 must not grow it further: a leak per connection would show there.
	before := d.rssBytes()
	flood(1)
	afterFirst := d.rssBytes()
	flood(2)
	afterSecond := d.rssBytes()
	t.Logf("RSS %d MiB, after 10 000 garbage connections %d MiB, after 20 000 %d MiB", before>>20, afterFirst>>20, afterSecond>>20)
	if grown := afterSecond - afterFirst; grown > 32<<20 {
		t.Fatalf("RSS kept growing: %d MiB more after the second 10 000 garbage connections", grown>>20)
	}
}

func TestApiVersionsNewerThanServerFallsBackToV0(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d.Addr)
	// v127: the body format is unknown to the server, send a few arbitrary bytes (spec T10).
	hdr := kbin.AppendInt16(nil, 18)
	hdr = kbin.AppendInt16(hdr, 127)
	hdr = kbin.AppendInt32(hdr, 42)
	hdr = kbin.AppendNullableString(hdr, strp("future-client"))
	hdr = append(hdr, 0, 7, 7, 7)
	c.write(append(sizePrefix(int32(len(hdr))), hdr...))
	raw, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(raw)); corr != 42 {
		t.Fatalf("correlation %d", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	// Header v0: the body starts right after the correlation id (no tag byte).
	if err := resp.ReadFrom(raw[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error code %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 4 {
		t.Fatalf("fallback must carry ApiVersions' own range, got %+v", resp.ApiKeys)
	}
	// The connection stays usable at a version the server knows.
	retry := kmsg.NewPtrApiVersionsRequest()
	retry.ClientSoftwareName, retry.ClientSoftwareVersion = "future-client", "9.0"
	c.write(frame(retry, 3, 43, strp("c"), nil))
	ok := kmsg.NewPtrApiVersionsResponse()
	c.read(ok, 3, 43)
	if ok.ErrorCode != 0 {
		t.Fatalf("retry at v3 failed with %d", ok.ErrorCode)
	}
}

func TestPipelinedRequestsAnswerInOrder(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d.Addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	var all []byte
	all = append(all, frame(kmsg.NewPtrMetadataRequest(), 12, 7, strp("c"), nil)...)
	all = append(all, frame(fc, 4, 8, strp("c"), nil)...)
	all = append(all, frame(kmsg.NewPtrApiVersionsRequest(), 4, -5, strp("c"), nil)...)
	all = append(all, frame(kmsg.NewPtrMetadataRequest(), 1, 7, nil, nil)...) // repeated id, null client id
	c.write(all)
	c.read(kmsg.NewPtrMetadataResponse(), 12, 7)
	c.read(kmsg.NewPtrFindCoordinatorResponse(), 4, 8)
	c.read(kmsg.NewPtrApiVersionsResponse(), 4, -5)
	c.read(kmsg.NewPtrMetadataResponse(), 1, 7)
}

func TestHeaderVersionsAndTolerance(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := dialRaw(t, d.Addr)

	// T12: ApiVersions v4 answers with header v0 (checked in read), Metadata v12 with header v1.
	c.write(frame(kmsg.NewPtrApiVersionsRequest(), 4, 1, strp("c"), nil))
	c.read(kmsg.NewPtrApiVersionsResponse(), 4, 1)

	// T17: unknown tagged fields in the request header and body are ignored.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.UnknownTags.Set(99, []byte("ignored"))
	b := kbin.AppendInt16(nil, 3)
	b = kbin.AppendInt16(b, 12)
	b = kbin.AppendInt32(b, 2)
	b = kbin.AppendNullableString(b, strp("c"))
	b = append(b, 1, 77, 3, 'x', 'y', 'z') // one header tag: key 77, 3 bytes
	b = req.AppendTo(b)
	c.write(append(sizePrefix(int32(len(b))), b...))
	md := kmsg.NewPtrMetadataResponse()
	c.read(md, 12, 2)
	if len(md.Brokers) != 1 {
		t.Fatalf("brokers %+v", md.Brokers)
	}

	// T19: trailing bytes after a complete body are tolerated.
	c.write(frame(kmsg.NewPtrMetadataRequest(), 9, 3, strp("c"), []byte{1, 2, 3, 4, 5}))
	c.read(kmsg.NewPtrMetadataResponse(), 9, 3)
}

func TestInvalidClientSoftwareName(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for i, name := range []string{"", "bad name!", "-leading", "trailing."} {
		c := dialRaw(t, d.Addr)
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = name, "1.0"
		c.write(frame(req, 3, int32(i), strp("c"), nil))
		resp := kmsg.NewPtrApiVersionsResponse()
		c.read(resp, 3, int32(i))
		if resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("software name %q: error %d, want INVALID_REQUEST", name, resp.ErrorCode)
		}
	}
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "connections.max.idle.ms=300")
	c := dialRaw(t, d.Addr)
	c.write(frame(kmsg.NewPtrApiVersionsRequest(), 0, 1, strp("c"), nil))
	c.read(kmsg.NewPtrApiVersionsResponse(), 0, 1)
	c.expectClosed()
}

func TestMaxConnections(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "max.connections=2")
	a, b := dialRaw(t, d.Addr), dialRaw(t, d.Addr)
	for i, c := range []*rawConn{a, b} {
		c.write(frame(kmsg.NewPtrApiVersionsRequest(), 0, int32(i), strp("c"), nil))
		c.read(kmsg.NewPtrApiVersionsResponse(), 0, int32(i))
	}
	third := dialRaw(t, d.Addr)
	third.write(frame(kmsg.NewPtrApiVersionsRequest(), 0, 3, strp("c"), nil))
	third.expectClosed()
	d.waitLogged("closing connection: max.connections reached", nil)
	a.nc.Close()
	// Once a slot frees up, new connections are served again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialRaw(t, d.Addr)
		c.write(frame(kmsg.NewPtrApiVersionsRequest(), 0, 4, strp("c"), nil))
		if _, err := c.readFrame(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a freed connection slot was never reused")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
