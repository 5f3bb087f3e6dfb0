package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceFrame is a Produce request frame (no size prefix) carrying n bytes of records.
func produceFrame(corr int32, acks int16, n int) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, 1000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "t"
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = make([]byte, n)
	for i := range part.Records {
		part.Records[i] = byte(i*7 + int(corr))
	}
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	return requestFrame(req, corr)
}

// servedBrokerPort serves g's port for upstream node 1 with a registry of its own and connects
// to it.
func servedBrokerPort(t *testing.T, g *Gateway, reg *prometheus.Registry) net.Conn {
	t.Helper()
	addr, _ := servePort(t, g, 1, wire.Options{ListenerName: "BROKER-1", MaxRequestBytes: 1 << 20,
		Metrics: wire.NewMetrics(reg), Budget: wire.NewBudget(4<<20, reg, nil)})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A Produce whose body goes from the client's socket to the upstream's (splice) reaches an
// upstream that takes it in small pieces (a small receive buffer, read a thousand bytes at
// a time, so the copy meets a full socket again and again) byte for byte, and its answer comes
// back; the bytes count as received from the client.
func TestProduceBodyReachesASlowReadingUpstreamIntact(t *testing.T) {
	frames := [][]byte{produceFrame(1, -1, 500<<10), produceFrame(2, 1, 64<<10), produceFrame(3, 1, 20<<10)}
	got := make(chan error, 1)
	b := fakeUpstream(t, 1, func(c net.Conn) {
		c.(*net.TCPConn).SetReadBuffer(16 << 10)
		r := &chunkedReader{r: c, max: 1000}
		for i, want := range frames {
			frame, err := readRequest(r)
			if err != nil {
				got <- err
				return
			}
			if !bytes.Equal(frame, want) {
				got <- errors.New("a request reached the upstream changed")
				return
			}
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			c.Write(wire.AppendResponse(nil, int32(i+1), resp))
		}
		got <- nil
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	reg := prometheus.NewRegistry()
	c := servedBrokerPort(t, g, reg)
	var all []byte
	for _, f := range frames {
		all = append(append(all, binary.BigEndian.AppendUint32(nil, uint32(len(f)))...), f...)
	}
	go c.Write(all) // pipelined: the next request's bytes follow the first's body at once
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := range frames {
		answer, err := readRequest(c)
		if err != nil {
			t.Fatalf("answer %d: %v", i+1, err)
		}
		if corr := int32(binary.BigEndian.Uint32(answer)); corr != int32(i+1) {
			t.Fatalf("answer for request %d where %d's was due", corr, i+1)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if in := counterValue(t, reg, "coordinatord_bytes_received_total", nil); in != float64(len(all)) {
		t.Fatalf("coordinatord_bytes_received_total %v, want %d", in, len(all))
	}
}

type chunkedReader struct {
	r   io.Reader
	max int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(p) > c.max {
		p = p[:c.max]
	}
	return c.r.Read(p)
}

// A client that closes its connection in the middle of a large Produce's body: the part that
// was already passed on never becomes a request upstream (the gateway closes that connection,
// the upstream reads a frame cut short), the connection is counted as closed for a truncated
// frame, and its budget share is given back.
func TestProduceBodyCutShortByTheClientNeverReachesTheUpstreamWhole(t *testing.T) {
	upstreamSaw := make(chan error, 1)
	b := fakeUpstream(t, 1, func(c net.Conn) {
		_, err := readRequest(c)
		upstreamSaw <- err
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	reg := prometheus.NewRegistry()
	c := servedBrokerPort(t, g, reg)
	frame := produceFrame(1, -1, 200<<10)
	c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame))))
	c.Write(frame[:100<<10]) // queued ahead of the close: the gateway reads it, then the end
	c.Close()
	awaitRequestCutShort(t, upstreamSaw, reg)
}

// awaitRequestCutShort waits for the upstream to read a request frame cut short (its
// connection closed by the gateway), the client's connection to be counted as closed for a
// truncated frame, and the budget to be whole again.
func awaitRequestCutShort(t *testing.T, upstreamSaw <-chan error, reg *prometheus.Registry) {
	t.Helper()
	select {
	case err := <-upstreamSaw:
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("the upstream read %v; want a frame cut short", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream connection stays open")
	}
	truncated := map[string]string{"reason": "truncated frame"}
	deadline := time.Now().Add(30 * time.Second)
	for counterValue(t, reg, "coordinatord_connections_closed_total", truncated) != 1 ||
		gaugeNamed(t, reg, "coordinatord_queued_request_bytes") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("closed for a truncated frame %v times, budget held %v",
				counterValue(t, reg, "coordinatord_connections_closed_total", truncated), gaugeNamed(t, reg, "coordinatord_queued_request_bytes"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A frame announced above socket.request.max.bytes closes the client's connection before
// anything of it is passed on: the upstream is never even connected to.
func TestOversizeProduceIsNeverForwarded(t *testing.T) {
	dialed := make(chan struct{}, 1)
	b := fakeUpstream(t, 1, func(c net.Conn) {
		dialed <- struct{}{}
		io.Copy(io.Discard, c)
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	reg := prometheus.NewRegistry()
	c := servedBrokerPort(t, g, reg)
	frame := produceFrame(1, -1, 1<<20) // just over MaxRequestBytes with its header
	go c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 64)); err == nil {
		t.Fatalf("the client got %d bytes; want its connection closed", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for counterValue(t, reg, "coordinatord_connections_closed_total", map[string]string{"reason": "bad frame"}) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the connection was not counted as closed for a bad frame")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-dialed:
		t.Fatal("the upstream was connected to for an oversize frame")
	default:
	}
}

// An upstream connection that is not a plain TCP socket (TLS) cannot be spliced to: the body
// is copied through a buffer, byte for byte, and a body the client cut short still fails with
// wire.ErrRequestCutShort.
func TestProduceBodyToANonTCPUpstreamIsCopied(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	body := bytes.Repeat([]byte("0123456789abcdef"), 10<<10) // 160 KiB
	for _, cut := range []bool{false, true} {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if cut {
				client.Write(body[:len(body)/2])
			} else {
				client.Write(body)
			}
			client.Close()
		}()
		up, upPeer := net.Pipe() // not a *net.TCPConn, as a TLS connection is not
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(upPeer); got <- b }()
		err = copyBody(up, &io.LimitedReader{R: server, N: int64(len(body))}, time.Time{})
		up.Close()
		received := <-got
		server.Close()
		if cut {
			if !errors.Is(err, wire.ErrRequestCutShort) {
				t.Fatalf("a body cut short copied with %v; want ErrRequestCutShort", err)
			}
			continue
		}
		if err != nil || !bytes.Equal(received, body) {
			t.Fatalf("copied %d of %d bytes intact=%v, %v", len(received), len(body), bytes.Equal(received, body), err)
		}
	}
}

// A client that stops sending in the middle of a large Produce's body is closed when its
// connection's idle timeout ends the wait, as a frame read whole would be, and that is the
// client's doing: the connection is counted as closed for a truncated frame, not as an upstream
// that failed to answer in time, and the upstream never gets the request whole.
func TestProduceBodyTheClientStallsOnIsTheClientsTimeout(t *testing.T) {
	upstreamSaw := make(chan error, 1)
	b := fakeUpstream(t, 1, func(c net.Conn) {
		_, err := readRequest(c)
		upstreamSaw <- err
	})
	g := testGateway(t)
	g.opts.RequestTimeout = time.Minute // the upstream's deadline is far off
	gwReg := prometheus.NewRegistry()
	g.opts.Metrics = NewMetrics(gwReg)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	reg := prometheus.NewRegistry()
	addr, _ := servePort(t, g, 1, wire.Options{ListenerName: "BROKER-1", MaxRequestBytes: 1 << 20, IdleTimeout: 300 * time.Millisecond,
		Metrics: wire.NewMetrics(reg), Budget: wire.NewBudget(4<<20, reg, nil)})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := produceFrame(1, -1, 200<<10)
	c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame))))
	c.Write(frame[:100<<10]) // and nothing more
	awaitRequestCutShort(t, upstreamSaw, reg)
	if n := counterValue(t, gwReg, "coordinatord_gateway_forward_timeouts_total", map[string]string{"node": "1", "api": "Produce"}); n != 0 {
		t.Fatalf("the client's stall was counted as %v upstream timeouts", n)
	}
}

// A Produce's body is streamed to the upstream only when the request is one the gateway
// forwards at all (not a version above its codec's) and its acks are in the bytes at hand: an
// acks=0 Produce whose acks lie beyond them (a long transactional id) is read whole instead,
// or the gateway would wait for an answer that never comes and close the client's connection.
func TestProduceBodyIsStreamedOnlyWhenForwardedWithItsAcksRead(t *testing.T) {
	p := &portHandler{g: testGateway(t), node: 1}
	conn := &wire.Conn{ID: 1}
	frame := produceFrame(1, 0, 64<<10)
	h, _, err := wire.ParseHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if !p.ForwardsBody(conn, h, frame[:256]) {
		t.Fatal("an ordinary Produce is not streamed")
	}
	tooNew := append([]byte(nil), frame...)
	binary.BigEndian.PutUint16(tooNew[2:], uint16(kmsg.NewPtrProduceRequest().MaxVersion()+1))
	h, _, _ = wire.ParseHeader(tooNew)
	if p.ForwardsBody(conn, h, tooNew[:256]) {
		t.Error("a Produce above the codec's newest version is streamed upstream")
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	tid := string(bytes.Repeat([]byte("t"), 300))
	req.TransactionID, req.Acks, req.TimeoutMillis = &tid, 0, 1000
	long := requestFrame(req, 2)
	h, _, _ = wire.ParseHeader(long)
	if p.ForwardsBody(conn, h, long[:64]) {
		t.Error("a Produce whose acks are not in the bytes at hand is streamed")
	}
}
