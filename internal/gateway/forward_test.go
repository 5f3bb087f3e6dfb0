package gateway

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// fakeUpstream is an upstream broker on 127.0.0.1 that runs serve for every connection; it
// returns the broker as the gateway's view names it.
func fakeUpstream(t testing.TB, id int32, serve func(c net.Conn)) upstream.Broker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return upstream.Broker{NodeID: id, Host: "127.0.0.1", Port: int32(ln.Addr().(*net.TCPAddr).Port)}
}

// readRequest reads one request frame (without its size prefix) from a client.
func readRequest(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r, frame)
	return frame, err
}

// servePort serves node's broker port of g with a wire server on 127.0.0.1 and returns its
// address and the server.
func servePort(t testing.TB, g *Gateway, node int32, opts wire.Options) (string, *wire.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := wire.NewServer(opts, &portHandler{g: g, node: node})
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ln.Addr().String(), srv
}

// dialBrokerPort serves g's port for upstream node 1 and connects to it; the connection is
// closed when the test ends.
func dialBrokerPort(t testing.TB, g *Gateway) net.Conn {
	t.Helper()
	addr, _ := servePort(t, g, 1, wire.Options{ListenerName: "BROKER-1", MaxRequestBytes: 1 << 20})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func gaugeNamed(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

// An upstream answer that can never fit queued.max.request.bytes closes the client connection
// before anything is allocated for it: a 512 MiB Fetch answer must not be read into memory
// when the process may only hold 1 MiB of requests and answers.
func TestForwardedAnswerIsReservedBeforeItIsAllocated(t *testing.T) {
	const claimed = 512 << 20
	b := fakeUpstream(t, 1, func(c net.Conn) {
		frame, err := readRequest(c)
		if err != nil {
			return
		}
		var head [8]byte
		binary.BigEndian.PutUint32(head[:], claimed)
		copy(head[4:], frame[4:8]) // correlation id
		c.Write(head[:])           // and close: the body never comes
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	reg := prometheus.NewRegistry()
	addr, _ := servePort(t, g, 1, wire.Options{ListenerName: "BROKER-1", MaxRequestBytes: 1 << 20, Budget: wire.NewBudget(1<<20, reg, nil)})

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	frame := requestFrame(req, 7)
	c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame))))
	c.Write(frame)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := bufio.NewReader(c).Read(make([]byte, 1)); err == nil || n > 0 {
		t.Fatalf("the client got %d bytes of an answer that can never fit the budget, want its connection closed", n)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > claimed/2 {
		t.Fatalf("%d MiB allocated for an answer that does not fit the 1 MiB budget", grew>>20)
	}
	deadline := time.Now().Add(5 * time.Second)
	for gaugeNamed(t, reg, "coordinatord_queued_request_bytes") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("budget still holds %v bytes after the connection closed", gaugeNamed(t, reg, "coordinatord_queued_request_bytes"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A shutdown that runs out of time while a forwarded request waits for an upstream that never
// answers still ends: the upstream connection is closed and the connection's goroutine returns.
func TestShutdownEndsAForwardTheUpstreamNeverAnswers(t *testing.T) {
	received, upstreamClosed := make(chan struct{}), make(chan struct{})
	b := fakeUpstream(t, 1, func(c net.Conn) {
		if _, err := readRequest(c); err != nil {
			return
		}
		close(received)
		io.Copy(io.Discard, c) // never answer; returns when the gateway closes its side
		close(upstreamClosed)
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	addr, srv := servePort(t, g, 1, wire.Options{ListenerName: "BROKER-1", MaxRequestBytes: 1 << 20})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	frame := requestFrame(req, 7)
	c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	<-received

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { srv.Shutdown(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		g.Close(context.Background()) // unblock the connection so that the test can end
		t.Fatal("shutdown hangs on a forwarded request the upstream never answers")
	}
	select {
	case <-upstreamClosed:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream connection stays open after the shutdown")
	}
}

// A connection on coordinatord's own port sends all its forwarded requests to one upstream
// broker, even when the broker list changes meanwhile: a move would send its fetch session and
// producer state to another broker mid-connection.
func TestOwnPortKeepsItsUpstreamBrokerWhenTheClusterChanges(t *testing.T) {
	served := make(chan int32, 4)
	answer := func(id int32) func(net.Conn) {
		return func(c net.Conn) {
			for {
				frame, err := readRequest(c)
				if err != nil {
					return
				}
				served <- id
				resp := kmsg.NewPtrMetadataResponse()
				resp.SetVersion(12)
				c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
			}
		}
	}
	b1, b2, b3 := fakeUpstream(t, 1, answer(1)), fakeUpstream(t, 2, answer(2)), fakeUpstream(t, 3, answer(3))
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b1, b2}}
	conn := &wire.Conn{ID: 2, Listener: "PLAINTEXT"}
	defer g.closeConn(conn)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	reserve := func(int) error { return nil }
	if _, err := g.forward(context.Background(), -1, conn, wire.Header{Key: 3, Version: 12, CorrelationID: 1}, requestFrame(req, 1), reserve); err != nil {
		t.Fatal(err)
	}
	first := <-served
	g.view = &upstream.View{Brokers: []upstream.Broker{b1, b2, b3}}
	if _, err := g.forward(context.Background(), -1, conn, wire.Header{Key: 3, Version: 12, CorrelationID: 2}, requestFrame(req, 2), reserve); err != nil {
		t.Fatal(err)
	}
	if second := <-served; second != first {
		t.Fatalf("the connection's requests went to broker %d, then to broker %d after a broker joined", first, second)
	}
}

// What the upstream does wrong reaches the client as a closed connection, as a broker failure
// looks to it, and leaves nothing behind: the budget is whole again and the upstream connection
// is closed. A client that goes away closes its upstream connection too.
func TestUpstreamFailuresCloseTheClientAndLeaveNothingBehind(t *testing.T) {
	for name, misbehave := range map[string]func(c net.Conn, corr []byte){
		"closes mid-answer": func(c net.Conn, corr []byte) {
			c.Write(append([]byte{0, 0, 0, 100}, corr...)) // 100 bytes announced, 4 sent
		},
		"answers another request": func(c net.Conn, corr []byte) {
			c.Write([]byte{0, 0, 0, 5, 0, 0, 0, 99, 0})
			io.Copy(io.Discard, c)
		},
		"announces more than MaxResponseBytes": func(c net.Conn, corr []byte) {
			c.Write(append([]byte{0x7f, 0, 0, 0}, corr...))
			io.Copy(io.Discard, c)
		},
		"client goes away": nil,
	} {
		t.Run(name, func(t *testing.T) {
			upstreamClosed := make(chan struct{})
			b := fakeUpstream(t, 1, func(c net.Conn) {
				defer close(upstreamClosed)
				frame, err := readRequest(c)
				if err != nil {
					return
				}
				if misbehave != nil {
					misbehave(c, frame[4:8])
					return
				}
				resp := kmsg.NewPtrMetadataResponse()
				resp.SetVersion(12)
				c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
				io.Copy(io.Discard, c) // until the gateway closes its side
			})
			g := testGateway(t)
			g.opts.MaxResponseBytes = 1 << 20
			g.view = &upstream.View{Brokers: []upstream.Broker{b}}
			reg := prometheus.NewRegistry()
			addr, _ := servePort(t, g, 1, wire.Options{ListenerName: "BROKER-1", MaxRequestBytes: 1 << 20, Budget: wire.NewBudget(4<<20, reg, nil)})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(12)
			frame := requestFrame(req, 7)
			c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if misbehave == nil {
				if _, err := readRequest(c); err != nil { // the answer, read like a frame
					t.Fatal(err)
				}
				c.Close()
			} else if n, err := c.Read(make([]byte, 64)); err == nil {
				t.Fatalf("the client got %d bytes; want its connection closed", n)
			}
			select {
			case <-upstreamClosed:
			case <-time.After(30 * time.Second):
				t.Fatal("the upstream connection stays open")
			}
			deadline := time.Now().Add(30 * time.Second)
			for gaugeNamed(t, reg, "coordinatord_queued_request_bytes") != 0 {
				if time.Now().After(deadline) {
					t.Fatal("the budget is not whole again")
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// A validate-only CreateTopics changes nothing upstream: its answer is passed on at once, not
// held while the gateway polls the upstream's metadata for a topic that will never appear.
func TestValidateOnlyCreateTopicsIsNotHeldForMetadata(t *testing.T) {
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			resp := kmsg.NewPtrCreateTopicsResponse()
			resp.SetVersion(7)
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.NumPartitions = "validated", 3
			resp.Topics = append(resp.Topics, rt)
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
		}
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	waits := 0
	g.refreshUntil = func(context.Context, func(*upstream.View) bool) error { waits++; return nil }
	conn := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	defer g.closeConn(conn)
	for _, validate := range []bool{true, false} {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		req.ValidateOnly = validate
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "validated", 3, 1
		req.Topics = append(req.Topics, rt)
		waits = 0
		if _, err := g.forward(context.Background(), 1, conn, wire.Header{Key: 19, Version: 7, CorrelationID: 3}, requestFrame(req, 3), func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[validate]; waits != want {
			t.Fatalf("ValidateOnly=%v: the answer waited for the upstream's metadata %d times, want %d", validate, waits, want)
		}
	}
}

// An upstream broker that takes a request and never answers it costs the client its
// connection after upstream.request.timeout.ms, as a dead broker would, instead of holding it
// (and the answers queued behind it) forever; the gateway says so in a WARN line and a metric.
func TestUnansweredForwardClosesTheClientAfterTheRequestTimeout(t *testing.T) {
	upstreamClosed := make(chan struct{})
	b := fakeUpstream(t, 1, func(c net.Conn) {
		defer close(upstreamClosed)
		if _, err := readRequest(c); err != nil {
			return
		}
		io.Copy(io.Discard, c) // never answers; returns when the gateway closes its side
	})
	core, logs := observer.New(zapcore.WarnLevel)
	reg := prometheus.NewRegistry()
	g := testGateway(t)
	g.opts.RequestTimeout, g.opts.MaxResponseBytes = 100*time.Millisecond, 1<<20
	g.opts.Metrics, g.lg = NewMetrics(reg), zap.New(core)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	c := dialBrokerPort(t, g)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	frame := requestFrame(req, 7)
	c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 64)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v: want the client's connection closed by the gateway", n, err)
	}
	select {
	case <-upstreamClosed:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream connection stays open")
	}
	if n := counterValue(t, reg, "coordinatord_gateway_forward_timeouts_total", map[string]string{"node": "1", "api": "Metadata"}); n != 1 {
		t.Fatalf("timeouts counted: %v, want 1", n)
	}
	if l := logs.FilterMessageSnippet("did not answer a forwarded request in time").All(); len(l) != 1 || l[0].Level != zapcore.WarnLevel || l[0].ContextMap()["api"] != "Metadata" {
		t.Fatalf("WARN lines: %+v", logs.All())
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// The bound on an answer adds the wait the request itself asks of the broker, so a long poll
// or a produce waiting for replication is not cut short by the gateway.
func TestAnswerBoundAddsTheRequestsOwnWait(t *testing.T) {
	g := testGateway(t)
	g.opts.RequestTimeout = 30 * time.Second
	fetch := func(v int16) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.SetVersion(v)
		r.MaxWaitMillis, r.ReplicaID = 60000, -1
		return r
	}
	produce := func(v int16) kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.SetVersion(v)
		r.Acks, r.TimeoutMillis = -1, 45000
		return r
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	create.TimeoutMillis = 20000
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	for _, c := range []struct {
		req  kmsg.Request
		want time.Duration
	}{
		{fetch(4), 90 * time.Second}, {fetch(12), 90 * time.Second}, {fetch(15), 90 * time.Second}, {fetch(17), 90 * time.Second},
		{produce(3), 75 * time.Second}, {produce(9), 75 * time.Second}, {produce(12), 75 * time.Second},
		{create, 50 * time.Second}, {meta, 30 * time.Second},
	} {
		h := wire.Header{Key: c.req.Key(), Version: c.req.GetVersion(), CorrelationID: 1}
		if got := g.answerBound(h, requestFrame(c.req, 1)); got != c.want {
			t.Errorf("%s v%d: bound %s, want %s", kmsg.NameForKey(h.Key), h.Version, got, c.want)
		}
	}
	// A negative wait asks for none: it must not shorten the bound, or, large enough, take it
	// away (a bound of zero or less sets no deadline at all).
	negative := fetch(12).(*kmsg.FetchRequest)
	negative.MaxWaitMillis = math.MinInt32
	if got := g.answerBound(wire.Header{Key: 1, Version: 12}, requestFrame(negative, 1)); got != 30*time.Second {
		t.Errorf("fetch with MaxWaitMillis %d: bound %s, want the request timeout", negative.MaxWaitMillis, got)
	}
	if got := g.answerBound(wire.Header{Key: 1, Version: 12}, []byte{0, 1}); got != 30*time.Second {
		t.Errorf("unreadable fetch: bound %s, want the request timeout", got)
	}
	g.opts.RequestTimeout = 0
	if got := g.answerBound(wire.Header{Key: 1, Version: 12}, requestFrame(fetch(12), 1)); got != 0 {
		t.Errorf("no request timeout: bound %s, want none", got)
	}
}

// A topic created, deleted or given partitions through the gateway is answered only once the
// upstream's metadata shows the change (and the catalog has followed it): a client that
// creates a topic and commits offsets for it, or deletes one and lists offsets, must not be
// told the opposite of what it just did. Only the topics the upstream accepted are waited for,
// and a validate-only request, which changes nothing, is not held at all.
func TestTopicChangesAreAnsweredOnceTheMetadataShowsThem(t *testing.T) {
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
			var resp kmsg.Response
			switch key {
			case 19:
				r := kmsg.NewPtrCreateTopicsResponse()
				made, exists := kmsg.NewCreateTopicsResponseTopic(), kmsg.NewCreateTopicsResponseTopic()
				made.Topic, made.NumPartitions, made.TopicID = "made", 3, [16]byte{7}
				exists.Topic, exists.ErrorCode = "refused", 36 // TOPIC_ALREADY_EXISTS
				r.Topics = append(r.Topics, made, exists)
				resp = r
			case 20:
				r := kmsg.NewPtrDeleteTopicsResponse()
				gone, kept := kmsg.NewDeleteTopicsResponseTopic(), kmsg.NewDeleteTopicsResponseTopic()
				gone.Topic, kept.Topic = kmsg.StringPtr("gone"), kmsg.StringPtr("kept")
				kept.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED
				r.Topics = append(r.Topics, gone, kept)
				resp = r
			case 37:
				r := kmsg.NewPtrCreatePartitionsResponse()
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic = "made"
				r.Topics = append(r.Topics, rt)
				resp = r
			default:
				return
			}
			resp.SetVersion(version)
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
		}
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	var done func(*upstream.View) bool
	waits := 0
	g.refreshUntil = func(_ context.Context, d func(*upstream.View) bool) error { waits, done = waits+1, d; return nil }
	conn := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	defer g.closeConn(conn)
	forward := func(req kmsg.Request, wantWaits int) {
		t.Helper()
		waits, done = 0, nil
		h := wire.Header{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 3}
		if _, err := g.forward(context.Background(), 1, conn, h, requestFrame(req, 3), func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if waits != wantWaits {
			t.Fatalf("%s: the answer waited for the upstream's metadata %d times, want %d", kmsg.NameForKey(req.Key()), waits, wantWaits)
		}
	}
	view := func(topics ...string) *upstream.View {
		v := &upstream.View{}
		for _, name := range topics {
			v.Topics = append(v.Topics, upstream.Topic{Name: name, ID: [16]byte{7}})
		}
		return v
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	for _, name := range []string{"made", "refused"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 3, 1
		create.Topics = append(create.Topics, rt)
	}
	forward(create, 1)
	if done(view("refused")) || !done(view("made")) {
		t.Fatal("CreateTopics: the wait does not end exactly when the metadata shows the created topic")
	}
	// Deleted and created again: the view still showing the deleted topic is not the new one.
	if done(&upstream.View{Topics: []upstream.Topic{{Name: "made", ID: [16]byte{6}}}}) {
		t.Fatal("CreateTopics: the wait ends on a view that shows another topic of the name")
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(6)
	for _, name := range []string{"gone", "kept"} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		del.Topics = append(del.Topics, rt)
	}
	forward(del, 1)
	if done(view("gone", "kept")) || !done(view("kept")) {
		t.Fatal("DeleteTopics: the wait does not end exactly when the metadata no longer shows the deleted topic")
	}

	parts := kmsg.NewPtrCreatePartitionsRequest()
	parts.SetVersion(3)
	pt := kmsg.NewCreatePartitionsRequestTopic()
	pt.Topic, pt.Count = "made", 6
	parts.Topics = append(parts.Topics, pt)
	forward(parts, 1)
	parts.ValidateOnly = true // changes nothing: answered at once
	forward(parts, 0)
}

// MaxResponseBytes bounds every upstream answer, also the upstream part of a split config
// request, which no connection budget reserves: a larger answer fails the request (and closes
// the client's connection) instead of being read whole.
func TestAnswersAboveMaxResponseBytesAreRefused(t *testing.T) {
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			resp := kmsg.NewPtrDescribeConfigsResponse()
			resp.SetVersion(4)
			r := kmsg.NewDescribeConfigsResponseResource()
			r.ResourceName = strings.Repeat("t", 4000)
			resp.Resources = append(resp.Resources, r)
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
		}
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	g.opts.MaxResponseBytes = 1024
	conn := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	defer g.closeConn(conn)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	out, err := g.forward(context.Background(), 1, conn, wire.Header{Key: 32, Version: 4, CorrelationID: 3}, requestFrame(req, 3), func(int) error { return nil })
	if err == nil {
		t.Fatalf("a %d-byte answer passed a 1024-byte MaxResponseBytes", len(out))
	}
}

// An answer whose correlation id is not the request's is never passed on, whatever the API
// (a Produce or ListOffsets answer is relayed as bytes, not decoded): the client's connection
// closes, as when a broker's answers went astray, rather than the client getting an answer to
// something else.
func TestAnswerToAnotherRequestIsNotPassedOn(t *testing.T) {
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			resp := kmsg.NewPtrListOffsetsResponse()
			resp.SetVersion(int16(binary.BigEndian.Uint16(frame[2:])))
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8]))+1, resp))
		}
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	conn := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	defer g.closeConn(conn)
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(8)
	if _, err := g.forward(context.Background(), 1, conn, wire.Header{Key: 2, Version: 8, CorrelationID: 3}, requestFrame(req, 3), func(int) error { return nil }); err == nil {
		t.Fatal("an answer carrying correlation id 4 was passed on for request 3")
	}
}

// Connections on coordinatord's own port are spread over the upstream brokers (each keeps its
// broker for its life): bootstrapping clients must not all load one broker, nor all fail with
// it.
func TestOwnPortConnectionsAreSpreadOverTheBrokers(t *testing.T) {
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{{NodeID: 1}, {NodeID: 2}, {NodeID: 5}}}
	used := map[int32]int{}
	for id := uint64(1); id <= 30; id++ {
		b, ok := g.pinnedNode(id)
		if !ok {
			t.Fatal("no broker for a connection")
		}
		used[b.NodeID]++
	}
	if len(used) != 3 || used[1] != 10 || used[2] != 10 || used[5] != 10 {
		t.Fatalf("30 connections went to brokers %v, want 10 to each of 1, 2 and 5", used)
	}
}

// A Produce waits upstream up to its own TimeoutMillis (acks=all waiting for replication): the
// gateway's bound on its answer adds that wait to upstream.request.timeout.ms, as for any
// request, and does not cut the Produce short.
func TestProduceAnswerBoundAddsItsTimeout(t *testing.T) {
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			time.Sleep(time.Second) // replication takes a while, well within the Produce's 20 s
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
		}
	})
	g := testGateway(t)
	g.opts.RequestTimeout = 100 * time.Millisecond
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	conn := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	defer g.closeConn(conn)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 20000
	if _, err := g.forward(context.Background(), 1, conn, wire.Header{Key: 0, Version: 9, CorrelationID: 3}, requestFrame(req, 3), func(int) error { return nil }); err != nil {
		t.Fatalf("a Produce asking the broker to wait 20 s was cut short: %v", err)
	}
}

// A Metadata answer that shows a topic under another id than the gateway's view (deleted and
// re-created upstream since the last refresh) waits until the view, and with it the catalog,
// has the new id: a client that then commits by name must not have its commit taken for the
// old topic, whose offsets are dropped. Any other Metadata answer is passed on at once.
func TestMetadataShowingARecreatedTopicWaitsForTheView(t *testing.T) {
	oldID, newID := [16]byte{1}, [16]byte{2}
	var answered atomic.Value // the id the upstream names "recreated" under
	answered.Store(newID)
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			version := int16(binary.BigEndian.Uint16(frame[2:]))
			resp := kmsg.NewPtrMetadataResponse()
			for _, name := range []string{"recreated", "same", "new"} {
				rt := kmsg.NewMetadataResponseTopic()
				rt.Topic, rt.TopicID = kmsg.StringPtr(name), oldID
				if name == "recreated" {
					rt.TopicID = answered.Load().([16]byte)
				}
				if name == "new" {
					rt.TopicID = [16]byte{3}
				}
				resp.Topics = append(resp.Topics, rt)
			}
			resp.SetVersion(version)
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
		}
	})
	g := testGateway(t)
	view := func(recreatedID [16]byte) *upstream.View {
		return &upstream.View{Brokers: []upstream.Broker{b}, Topics: []upstream.Topic{
			{Name: "recreated", ID: recreatedID}, {Name: "same", ID: oldID},
		}}
	}
	var done func(*upstream.View) bool
	waits := 0
	g.refreshUntil = func(_ context.Context, d func(*upstream.View) bool) error { waits, done = waits+1, d; return nil }
	conn := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	defer g.closeConn(conn)
	forward := func(version int16) {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(version)
		if _, err := g.forward(context.Background(), 1, conn, wire.Header{Key: 3, Version: version, CorrelationID: 3}, requestFrame(req, 3), func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	g.view = view(oldID)
	forward(12)
	if waits != 1 {
		t.Fatalf("a Metadata answer showing a re-created topic waited for the upstream's metadata %d times, want 1", waits)
	}
	if done(view(oldID)) || !done(view(newID)) {
		t.Fatal("the wait does not end exactly when the view shows the re-created topic's new id")
	}
	g.view, waits = view(newID), 0
	forward(12)
	if waits != 0 {
		t.Fatal("a Metadata answer that agrees with the view waited for the upstream's metadata")
	}
	g.view = view(oldID)
	forward(9) // no topic ids before v10
	if waits != 0 {
		t.Fatal("a Metadata v9 answer waited for the upstream's metadata")
	}

	// A broker behind the view still names the old id once the view has the new one: its
	// answer is the older one, and waiting for the view to go back would only stall it.
	if err := g.OnView(view(newID)); err != nil {
		t.Fatal(err)
	}
	answered.Store(oldID)
	forward(12)
	if waits != 0 {
		t.Fatal("a Metadata answer naming the id the view replaced waited for the upstream's metadata")
	}

	// An id a wait gave up on is not waited for again: answers would queue a wait each.
	answered.Store([16]byte{4})
	g.refreshUntil = func(context.Context, func(*upstream.View) bool) error { waits++; return context.DeadlineExceeded }
	forward(12)
	forward(12)
	if waits != 1 {
		t.Fatalf("two answers naming an id the upstream's metadata never settled on waited %d times, want 1", waits)
	}
}

// A Metadata answer that shows a topic the view lacks (created upstream since the last look),
// or says a topic the view has does not exist (deleted upstream), makes the gateway look at
// the upstream's metadata: the catalog, which consumer groups assign from, follows the view,
// and a Java consumer subscribed by name says nothing in its heartbeats that would make it
// look. An answer that agrees with the view costs no look, and answers that disagree right
// after a look share one look once the interval is over.
func TestMetadataDisagreeingWithTheViewMakesTheGatewayLook(t *testing.T) {
	g := testGateway(t)
	looks := make(chan struct{}, 16)
	g.refresh = func() { looks <- struct{}{} }
	g.refreshUntil = nil // no re-created topic here: only the look is watched
	answer := func(topics map[string]int16, version int16) *kmsg.MetadataResponse {
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(version)
		for name, code := range topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), code
			if code == 0 {
				rt.TopicID = [16]byte{9}
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	lookedAt := func() int {
		n := 0
		for {
			select {
			case <-looks:
				n++
			default:
				return n
			}
		}
	}
	unknown := kerr.UnknownTopicOrPartition.Code
	g.view = &upstream.View{Topics: []upstream.Topic{{Name: "known", ID: [16]byte{9}}}, Fetched: time.Now().Add(-time.Minute)}
	for _, c := range []struct {
		what   string
		topics map[string]int16
		look   bool
	}{
		{"the view's topic", map[string]int16{"known": 0}, false},
		{"a topic neither has", map[string]int16{"never": unknown}, false},
		{"a topic created upstream", map[string]int16{"known": 0, "created": 0}, true},
		{"a topic deleted upstream", map[string]int16{"known": unknown}, true},
	} {
		for _, version := range []int16{4, 12} {
			g.afterMetadata(context.Background(), answer(c.topics, version))
			if n := lookedAt(); (n == 1) != c.look || n > 1 {
				t.Errorf("Metadata v%d answer naming %s: %d looks at the upstream, want look=%v", version, c.what, n, c.look)
			}
		}
	}

	// Right after a look: none now, one for all of them once the interval is over.
	g.view = &upstream.View{Topics: []upstream.Topic{{Name: "known", ID: [16]byte{9}}}, Fetched: time.Now()}
	for range 3 {
		g.afterMetadata(context.Background(), answer(map[string]int16{"created": 0}, 12))
	}
	if n := lookedAt(); n != 0 {
		t.Fatalf("%d looks at once right after the last one, want them put off", n)
	}
	select {
	case <-looks:
	case <-time.After(10 * time.Second):
		t.Fatal("the look put off for the interval never came")
	}
	time.Sleep(2 * viewLookMinInterval)
	if n := lookedAt(); n != 0 {
		t.Fatalf("three answers put off %d more looks, want one in all", n+1)
	}
}
