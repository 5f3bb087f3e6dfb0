package wire

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// keepingHandler keeps the protocol metadata of every JoinGroup, as a group keeps its members'
// subscriptions.
type keepingHandler struct{ kept [][]byte }

func (h *keepingHandler) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	req := kmsg.RequestForKey(key)
	return req, true, req != nil
}

func (h *keepingHandler) Handle(_ context.Context, r *Request) kmsg.Response {
	switch req := r.Body.(type) {
	case *kmsg.JoinGroupRequest:
		h.kept = append(h.kept, req.Protocols[0].Metadata)
	}
	return r.Body.ResponseKind()
}

func requestFrame(corr int32, req kmsg.Request) []byte {
	b := []byte{0, 0, 0, 0}
	b = kbin.AppendInt16(b, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, nil)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	n := len(b) - 4
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return b
}

// The connection reads a request into the previous one's buffer only when nothing decoded from
// that one can still point into it: a JoinGroup's metadata is a slice of its frame, kept by the
// group, and must not be overwritten by the requests that follow on the same connection.
func TestFrameReuseKeepsBytesHandlersHold(t *testing.T) {
	h := &keepingHandler{}
	srv := NewServer(Options{MaxRequestBytes: 1 << 20}, h)
	client, server := net.Pipe()
	srv.startConn(server)
	defer func() {
		client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	br := bufio.NewReader(client)
	roundTrip := func(corr int32, req kmsg.Request) {
		t.Helper()
		client.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := client.Write(requestFrame(corr, req)); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFrame(br, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	join := func(meta byte) *kmsg.JoinGroupRequest {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 5
		req.Group, req.ProtocolType = "g", "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", bytes.Repeat([]byte{meta}, 64)
		req.Protocols = append(req.Protocols, p)
		return req
	}
	hb := func() *kmsg.HeartbeatRequest {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = 4
		req.Group, req.MemberID = "g", "m-with-a-long-member-id-to-cover-the-metadata-bytes"
		return req
	}
	roundTrip(1, join('a'))
	roundTrip(2, join('b')) // same size: would land exactly on the first one's bytes
	roundTrip(3, hb())
	roundTrip(4, hb())
	for i, want := range []byte{'a', 'b'} {
		if !bytes.Equal(h.kept[i], bytes.Repeat([]byte{want}, 64)) {
			t.Fatalf("metadata of join %d became %q after later requests on the connection", i+1, h.kept[i])
		}
	}
}

// Requests without byte fields are the hot ones (commits, heartbeats): their frames are reused.
func TestAliasFreeRequests(t *testing.T) {
	for _, tc := range []struct {
		req  kmsg.Request
		want bool
	}{
		{kmsg.NewPtrOffsetCommitRequest(), true},
		{kmsg.NewPtrHeartbeatRequest(), true},
		{kmsg.NewPtrStreamsGroupHeartbeatRequest(), true},
		{kmsg.NewPtrConsumerGroupHeartbeatRequest(), true},
		{kmsg.NewPtrJoinGroupRequest(), false},
		{kmsg.NewPtrSyncGroupRequest(), false},
		{kmsg.NewPtrSASLAuthenticateRequest(), false},
	} {
		for range 2 { // worked out, then cached per key
			if got := aliasFree(tc.req); got != tc.want {
				t.Errorf("%s: aliasFree %v, want %v", kmsg.NameForKey(tc.req.Key()), got, tc.want)
			}
		}
	}
}
