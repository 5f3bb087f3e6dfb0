package gateway

import (
	"bytes"
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

// Request frames are read into recycled buffers: a client that pipelines Produce requests of
// every size (pooled classes, the largest class, beyond it, acks=0 ones that get no answer)
// must have each one reach the upstream byte for byte and in order, and get each answer with
// its own correlation id. A buffer given back before its frame was written upstream, or reused
// while still in use, shows up here as a corrupted or reordered frame.
func TestPipelinedProducesReachTheUpstreamIntactAndInOrder(t *testing.T) {
	sizes := []int{100, 1 << 10, 4<<10 - 60, 64 << 10, 128<<10 - 200, 128 << 10, 300 << 10, 10, 64 << 10}
	var sent [][]byte
	var answered []int32
	for round := 0; round < 3; round++ {
		for i, n := range sizes {
			corr := int32(len(sent))
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(9)
			req.Acks = -1
			if i == 1 {
				req.Acks = 0 // no answer: the next frame is read at once into a recycled buffer
			} else {
				answered = append(answered, corr)
			}
			req.TimeoutMillis = 1000
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic = "t"
			part := kmsg.NewProduceRequestTopicPartition()
			part.Records = bytes.Repeat([]byte{byte(corr + 1)}, n)
			topic.Partitions = append(topic.Partitions, part)
			req.Topics = append(req.Topics, topic)
			sent = append(sent, requestFrame(req, corr))
		}
	}

	got := make(chan error, 1)
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for i, want := range sent {
			frame, err := readRequest(c)
			if err != nil {
				got <- fmt.Errorf("request %d: %v", i, err)
				return
			}
			if !bytes.Equal(frame, want) {
				got <- fmt.Errorf("request %d reached the upstream changed (%d bytes, want %d)", i, len(frame), len(want))
				return
			}
			if int16(binary.BigEndian.Uint16(frame[12:14])) == 0 { // acks, after a header with a null client id and a null transactional id
				continue
			}
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			c.Write(wire.AppendResponse(nil, int32(i), resp))
		}
		got <- nil
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	c := dialBrokerPort(t, g)
	go func() {
		for _, f := range sent {
			c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(f))))
			c.Write(f)
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for _, want := range answered {
		frame, err := readRequest(c) // an answer frame reads the same way
		if err != nil {
			t.Fatalf("answer to request %d: %v", want, err)
		}
		if corr := int32(binary.BigEndian.Uint32(frame)); corr != want {
			t.Fatalf("answer for request %d where request %d's was due", corr, want)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// coordinatord_gateway_added_latency_seconds leaves out the upstream's own time: with an
// upstream that takes 400 ms to answer, what the gateway adds is at most what the client saw
// minus those 400 ms, while the forwarding latency holds them. A Produce with acks=0, which
// gets no answer, is not counted.
func TestAddedLatencyLeavesOutTheUpstreamsTime(t *testing.T) {
	const upstreamTime = 400 * time.Millisecond
	b := fakeUpstream(t, 1, func(c net.Conn) {
		for {
			frame, err := readRequest(c)
			if err != nil {
				return
			}
			if int16(binary.BigEndian.Uint16(frame[12:14])) == 0 {
				continue // acks=0
			}
			time.Sleep(upstreamTime)
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			c.Write(wire.AppendResponse(nil, int32(binary.BigEndian.Uint32(frame[4:8])), resp))
		}
	})
	g := testGateway(t)
	reg := prometheus.NewRegistry()
	g.opts.Metrics = NewMetrics(reg)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	c := dialBrokerPort(t, g)
	produce := func(corr int32, acks int16) {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = acks, 1000
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = "t"
		topic.Partitions = append(topic.Partitions, kmsg.NewProduceRequestTopicPartition())
		req.Topics = append(req.Topics, topic)
		f := requestFrame(req, corr)
		c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...))
	}
	produce(1, 0)
	start := time.Now()
	produce(2, -1)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := readRequest(c); err != nil {
		t.Fatal(err)
	}
	seen := time.Since(start)

	histogram := func(name string) (count uint64, sum time.Duration) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				h := mf.GetMetric()[0].GetHistogram()
				return h.GetSampleCount(), time.Duration(h.GetSampleSum() * float64(time.Second))
			}
		}
		return 0, 0
	}
	// The answer's write returns before the Release that records it: wait for the observation.
	deadline := time.Now().Add(5 * time.Second)
	count, added := histogram("coordinatord_gateway_added_latency_seconds")
	for count == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		count, added = histogram("coordinatord_gateway_added_latency_seconds")
	}
	if count != 1 {
		t.Fatalf("added latency observed %d times, want 1 (the acks=0 Produce has no answer)", count)
	}
	if added <= 0 || added > seen-upstreamTime {
		t.Fatalf("added latency %v; the client waited %v of which the upstream took at least %v", added, seen, upstreamTime)
	}
	if _, forwarding := histogram("coordinatord_gateway_forward_duration_seconds"); forwarding < upstreamTime {
		t.Fatalf("forwarding latency %v, want at least the upstream's %v", forwarding, upstreamTime)
	}
	t.Logf("client saw %v, upstream took %v, the gateway added %v", seen, upstreamTime, added)
}
