package gateway

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkForwardedProduce is one small Produce (acks=-1) forwarded through a broker port:
// the client's write, the wire server's read, routing, the upstream round trip over loopback
// TCP to an upstream that answers at once, the answer's write back, and every forwarding
// series (the added-latency histogram included). What it measures beyond the two loopback
// round trips is the gateway's own cost per request.
func BenchmarkForwardedProduce(b *testing.B) {
	answer := func() []byte {
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		return wire.AppendResponse(nil, 0, resp)
	}()
	up := fakeUpstream(b, 1, func(c net.Conn) {
		out := append([]byte(nil), answer...)
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			copy(out[4:8], frame[4:8]) // the request's correlation id
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	})
	g := testGateway(b)
	g.opts.Metrics = NewMetrics(prometheus.NewRegistry())
	g.view = &upstream.View{Brokers: []upstream.Broker{up}}
	c := dialBrokerPort(b, g)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 1000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "t"
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = make([]byte, 1000)
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	f := requestFrame(req, 1)
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := readRequest(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddedLatencyObservation is what coordinatord_gateway_added_latency_seconds costs a
// forwarded request on its own: the two clock reads it adds (answer read, answer written; the
// request's read and its write upstream reuse reads the forwarding path already made) and the
// observation.
func BenchmarkAddedLatencyObservation(b *testing.B) {
	g := testGateway(b)
	g.opts.Metrics = NewMetrics(prometheus.NewRegistry())
	c := &wire.Conn{ID: 1}
	cc := &clientConn{ups: map[int32]*upConn{}}
	g.conns.Store(c, cc)
	cc.sent = time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		cc.answered = time.Now()
		g.observeAdded(c, cc.sent, time.Now())
	}
}

// BenchmarkMetadataAnswerAgainstTheView is what every forwarded Metadata answer now costs on top
// of its rewrite: the look for topics the view lacks or has lost (lookIfViewDisagrees), here
// for an all-topics answer of 10 000 topics that agrees with a view of the same topics (the
// steady case; one that disagrees only adds a non-blocking signal).
func BenchmarkMetadataAnswerAgainstTheView(b *testing.B) {
	g := testGateway(b)
	g.refresh = func() { b.Fatal("an answer agreeing with the view asked for a look") }
	const n = 10000
	view := &upstream.View{Fetched: time.Now()}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	for i := range n {
		name := fmt.Sprintf("topic-%05d", i)
		id := [16]byte{byte(i), byte(i >> 8), 1}
		view.Topics = append(view.Topics, upstream.Topic{Name: name, ID: id, Partitions: 6})
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr(name), id
		for p := range int32(6) {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition, rp.Leader, rp.Replicas, rp.ISR = p, 1, []int32{1}, []int32{1}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	g.view = view
	b.Run("look", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			g.lookIfViewDisagrees(resp)
		}
	})
	// For scale: decoding the same answer, which the rewrite of every forwarded Metadata
	// answer does before the look.
	raw := resp.AppendTo(nil)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			r := kmsg.NewPtrMetadataResponse()
			r.SetVersion(12)
			if err := r.ReadFrom(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
