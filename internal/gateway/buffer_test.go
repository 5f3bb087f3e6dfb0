package gateway

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"

	"github.com/coordinatord/coordinatord/internal/wire"
)

// A recycled answer buffer must have the length asked for and a class capacity, and a buffer
// that did not come from the pool (a rewritten answer of another size) must not enter it, or a
// later answer could be handed a slice too short for its frame.
func TestAnswerBuffersAreRecycledByClass(t *testing.T) {
	for _, n := range []int{1, 4096, 4097, 65 << 10, 4 << 20} {
		b := getBuffer(n)
		if len(b) != n || cap(b)&(cap(b)-1) != 0 || cap(b) < n {
			t.Fatalf("getBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		putBuffer(b)
	}
	if b := getBuffer(4<<20 + 1); len(b) != 4<<20+1 {
		t.Fatalf("above the largest class: len %d", len(b))
	}
	odd := make([]byte, 10, 5000)
	putBuffer(odd)
	for range 100 {
		if b := getBuffer(4097); cap(b) != 8192 {
			t.Fatalf("class of 4097 bytes has capacity %d", cap(b))
		}
	}
}

// Relaying 64 KiB answers must not allocate a 64 KiB buffer per answer: that allocation (its
// zeroing and its collection) was a third of the gateway's CPU for large fetches. Counted in
// bytes allocated over many round trips, not timed.
func TestRelayingLargeAnswersReusesBuffers(t *testing.T) {
	g := testGateway(t)
	client, upstream := net.Pipe()
	defer client.Close()
	defer upstream.Close()
	const answerBytes = 64 << 10
	answer := make([]byte, 4+answerBytes)
	binary.BigEndian.PutUint32(answer, answerBytes)
	go func() { // the upstream broker: reads each request, answers it with 64 KiB
		br := bufio.NewReader(upstream)
		var size [4]byte
		for {
			if _, err := io.ReadFull(br, size[:]); err != nil {
				return
			}
			req := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(br, req); err != nil {
				return
			}
			copy(answer[4:8], req[4:8]) // correlation id
			if _, err := upstream.Write(answer); err != nil {
				return
			}
		}
	}()
	u := &upConn{nc: client, br: bufio.NewReaderSize(client, 32<<10)}
	h := wire.Header{Key: 1, Version: 4}
	trip := func(corr int32) {
		h.CorrelationID = corr
		frame := binary.BigEndian.AppendUint16(nil, 1)             // Fetch
		frame = binary.BigEndian.AppendUint16(frame, 4)            // v4
		frame = binary.BigEndian.AppendUint32(frame, uint32(corr)) // correlation id
		frame = binary.BigEndian.AppendUint16(frame, 0xffff)       // null client id
		out, err := g.roundTrip(u, h, frame, nil, func(int) error { return nil }, 0, true)
		if err != nil || len(out) != len(answer) {
			t.Fatalf("round trip %d: %d bytes, %v", corr, len(out), err)
		}
		putBuffer(out) // what the connection does once the answer is written
	}
	trip(0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const trips = 200
	for i := range trips {
		trip(int32(i + 1))
	}
	runtime.ReadMemStats(&after)
	// A fresh buffer per answer is at least answerBytes each time. With the pool it is near 0,
	// except under the race detector, where sync.Pool drops a quarter of what it is given (about
	// 32 KiB per answer on average here, as the 64 KiB + 4 answer takes the 128 KiB class).
	if per := (after.TotalAlloc - before.TotalAlloc) / trips; per > answerBytes*7/8 {
		t.Fatalf("%d bytes allocated per 64 KiB answer relayed", per)
	}
}
