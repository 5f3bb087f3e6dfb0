package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// Both echo servers of `coordbench wakeup`, the blocking one and the polling one, answer every
// message of the client, and the client reports its round trips; the server ends cleanly when
// the client goes.
func TestWakeupEchoRoundTrips(t *testing.T) {
	for _, spin := range []bool{false, true} {
		pr, pw := io.Pipe()
		served := make(chan error, 1)
		go func() { served <- serveEcho(3000, spin, pw) }()
		addr, err := bufio.NewReader(pr).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, pr)
		var out bytes.Buffer
		if err := pingEcho(strings.TrimSpace(addr), 3000, 50*time.Millisecond, &out); err != nil {
			t.Fatalf("spin=%v: %v", spin, err)
		}
		var r wakeupResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("spin=%v: output %q: %v", spin, out.String(), err)
		}
		if r.N == 0 || r.P50 <= 0 || r.P50 > r.P99 {
			t.Fatalf("spin=%v: got %+v", spin, r)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("spin=%v: server: %v", spin, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("spin=%v: server still running after its client left", spin)
		}
	}
}
