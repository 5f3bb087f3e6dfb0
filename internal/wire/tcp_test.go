package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bigAnswerHandler answers every Metadata request with topics topics of long names: an answer
// larger than a loopback socket's buffers.
type bigAnswerHandler struct{ topics int }

func (h *bigAnswerHandler) NewRequest(key, version int16) (kmsg.Request, bool, bool) {
	req := kmsg.RequestForKey(key)
	return req, true, req != nil
}

func (h *bigAnswerHandler) Handle(_ context.Context, r *Request) kmsg.Response {
	resp := r.Body.ResponseKind().(*kmsg.MetadataResponse)
	for i := range h.topics {
		topic := kmsg.NewMetadataResponseTopic()
		name := fmt.Sprintf("topic-%06d-of-a-name-long-enough-to-make-the-answer-large", i)
		topic.Topic = &name
		resp.Topics = append(resp.Topics, topic)
	}
	return resp
}

// Over a real TCP connection (on Linux read and written with raw system calls: rawSocket),
// answers that together overfill the socket buffers arrive whole and in order while the client
// is slow to read them, requests sent together are each answered, and a client closing its end
// ends the connection as "peer closed".
func TestTCPAnswersArriveWholeAndInOrder(t *testing.T) {
	const topics, requests = 600, 200 // answers of about 45 KiB, 9 MiB in all
	metrics := NewMetrics(nil)
	srv := NewServer(Options{MaxRequestBytes: 1 << 20, IdleTimeout: time.Minute, Metrics: metrics}, &bigAnswerHandler{topics: topics})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	// A small receive buffer from the start (before the window is advertised), so that the
	// server's writes fill its socket and wait.
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<10) })
		return nil
	}}
	c, err := dialer.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))

	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	var frames []byte
	for corr := range requests {
		frames = append(frames, requestFrame(int32(corr), req)...)
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the server fills the socket buffers and waits to write the rest
	br := bufio.NewReader(c)
	for corr := range requests {
		frame, err := ReadFrame(br, 1<<30)
		if err != nil {
			t.Fatalf("answer %d: %v", corr, err)
		}
		if got := int32(binary.BigEndian.Uint32(frame)); got != int32(corr) {
			t.Fatalf("answer %d carries correlation id %d", corr, got)
		}
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 1
		if err := resp.ReadFrom(frame[4:]); err != nil {
			t.Fatalf("answer %d (%d bytes): %v", corr, len(frame), err)
		}
		if len(resp.Topics) != topics || *resp.Topics[topics-1].Topic != fmt.Sprintf("topic-%06d-of-a-name-long-enough-to-make-the-answer-large", topics-1) {
			t.Fatalf("answer %d has %d topics, want %d", corr, len(resp.Topics), topics)
		}
	}
	c.Close()
	closed := metrics.connectionsClosed.WithLabelValues("peer closed")
	for wait := time.Now().Add(10 * time.Second); counterOf(closed) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("the server did not close the connection as \"peer closed\" after the client closed it")
		}
	}
}

func counterOf(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}
