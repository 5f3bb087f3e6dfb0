package gateway

import (
	"encoding/binary"
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
