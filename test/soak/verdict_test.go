package soak

import (
	"encoding/binary"
	"io"
	"math/rand"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The soak is only worth running if it can fail: these tests aim the hostile connection at
// fake servers that hang, close or answer wrongly, and check each is reported.

// fakeServer serves one behaviour on every connection: it reads one frame and then acts.
func fakeServer(t *testing.T, act func(nc net.Conn, corr int32)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				var size [4]byte
				if _, err := io.ReadFull(nc, size[:]); err != nil {
					return
				}
				buf := make([]byte, binary.BigEndian.Uint32(size[:]))
				if _, err := io.ReadFull(nc, buf); err != nil {
					return
				}
				act(nc, int32(binary.BigEndian.Uint32(buf[4:])))
			}()
		}
	}()
	return ln.Addr().String()
}

func verdictOf(t *testing.T, addr string, class int, key int16) (int, []string) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var budget atomic.Int64
	budget.Store(1)
	h := &hostileConn{addr: addr, rng: rand.New(rand.NewSource(1)), stats: &hostileStats{perAPI: map[int16]int64{}},
		readTimeout: 300 * time.Millisecond, budget: &budget, nc: nc, maxReq: maxRequestBytes}
	e, ok := buildValid(h.rng, api{key: key, min: 0, max: 0}, 7, validNames, false)
	if !ok {
		t.Fatal("cannot build the request")
	}
	res := h.judge(class, e, e.frame, false, true, "")
	return res, h.stats.failed()
}

func TestSoakReportsAHang(t *testing.T) {
	addr := fakeServer(t, func(nc net.Conn, _ int32) { io.Copy(io.Discard, nc) }) // never answers
	for _, class := range []int{classValid, classBitFlip} {
		res, failures := verdictOf(t, addr, class, 3)
		if res != outFailed || len(failures) != 1 || !strings.Contains(failures[0], "hang") {
			t.Errorf("%s request left unanswered: outcome %d, failures %q; want a reported hang", classNames[class], res, failures)
		}
	}
	// A damaged JoinGroup may carry a long rebalance timeout: waiting is legitimate there...
	if res, failures := verdictOf(t, addr, classBitFlip, 11); res != outParked || len(failures) != 0 {
		t.Errorf("damaged JoinGroup parked: outcome %d, failures %q; want parked", res, failures)
	}
	// ...but not for a valid one, whose timeouts the soak keeps short.
	if res, _ := verdictOf(t, addr, classValid, 11); res != outFailed {
		t.Errorf("valid JoinGroup unanswered: outcome %d, want failed", res)
	}
}

func TestSoakReportsAValidRequestClosed(t *testing.T) {
	addr := fakeServer(t, func(net.Conn, int32) {}) // closes after reading
	if res, failures := verdictOf(t, addr, classValid, 3); res != outFailed || len(failures) != 1 {
		t.Errorf("valid request closed: outcome %d, failures %q; want failed", res, failures)
	}
	if res, failures := verdictOf(t, addr, classTruncated, 3); res != outClosed || len(failures) != 0 {
		t.Errorf("bad request closed: outcome %d, failures %q; want closed", res, failures)
	}
}

func TestSoakReportsAWrongAnswer(t *testing.T) {
	answer := func(corr int32, body []byte) []byte {
		b := kbin.AppendInt32(nil, corr)
		b = append(b, body...)
		return append(kbin.AppendInt32(nil, int32(len(b))), b...)
	}
	wrongCorr := fakeServer(t, func(nc net.Conn, corr int32) {
		nc.Write(answer(corr+1, kmsg.NewPtrMetadataResponse().AppendTo(nil)))
	})
	if res, failures := verdictOf(t, wrongCorr, classValid, 3); res != outFailed || len(failures) != 1 || !strings.Contains(failures[0], "correlation") {
		t.Errorf("wrong correlation id: outcome %d, failures %q", res, failures)
	}
	garbage := fakeServer(t, func(nc net.Conn, corr int32) { nc.Write(answer(corr, []byte{0, 0, 0, 9})) })
	if res, failures := verdictOf(t, garbage, classValid, 3); res != outFailed || len(failures) != 1 || !strings.Contains(failures[0], "undecodable") {
		t.Errorf("undecodable answer: outcome %d, failures %q", res, failures)
	}
	good := fakeServer(t, func(nc net.Conn, corr int32) {
		r := kmsg.NewPtrMetadataResponse()
		nc.Write(answer(corr, r.AppendTo(nil)))
	})
	if res, failures := verdictOf(t, good, classValid, 3); res != outResponse || len(failures) != 0 {
		t.Errorf("proper answer: outcome %d, failures %q", res, failures)
	}
}
