package wire

import (
	"bufio"
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The idle deadline is moved only now and then (extendDeadline), yet a connection whose peer
// keeps sending is never closed as idle, and one that goes quiet is closed no sooner than
// IdleTimeout and no later than an eighth after it. Time is synctest's, so the test takes
// none.
func TestIdleDeadlineFollowsTheLastRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Minute
		srv := NewServer(Options{MaxRequestBytes: 1 << 20, IdleTimeout: idle}, &keepingHandler{})
		client, server := net.Pipe()
		srv.startConn(server)
		defer func() {
			client.Close()
			srv.Shutdown(context.Background())
		}()
		open := func() bool {
			synctest.Wait()
			srv.mu.Lock()
			defer srv.mu.Unlock()
			return len(srv.conns) == 1
		}
		br := bufio.NewReader(client)
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID = 4, "g", "m"
		// A request every 50 s for 10 minutes: each is within IdleTimeout of the one before.
		for i := range 12 {
			if _, err := client.Write(requestFrame(int32(i), hb)); err != nil {
				t.Fatalf("request %d at %v: %v", i, time.Duration(i)*50*time.Second, err)
			}
			if _, err := ReadFrame(br, 1<<20); err != nil {
				t.Fatalf("request %d at %v: the connection was closed as idle: %v", i, time.Duration(i)*50*time.Second, err)
			}
			time.Sleep(50 * time.Second)
		}
		// 50 s have passed since the last request.
		time.Sleep(idle - 50*time.Second - time.Second)
		if !open() {
			t.Fatal("closed as idle before IdleTimeout had passed since the last request")
		}
		time.Sleep(time.Second + idle/8 + time.Second)
		if open() {
			t.Fatal("still open more than IdleTimeout and an eighth after the last request")
		}
	})
}
