package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// records is a record set of n bytes that differs in every position and from every other
// partition's, so that a byte moved, dropped or taken from another partition shows.
func records(partition int32, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i/251 + int(partition)*7)
	}
	return b
}

// fetchAnswer is a Fetch answer of version v: topics × partitions, each partition's records
// of size(partition) bytes (0: null); some partitions with aborted transactions, a
// CurrentLeader and a diverging epoch (partition-level tags), and leader hints when given.
func fetchAnswer(v int16, topics, partitions int, size func(int32) int, hints ...kmsg.FetchResponseBroker) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(v)
	resp.SessionID = 9
	for ti := 0; ti < topics; ti++ {
		topic := kmsg.NewFetchResponseTopic()
		topic.Topic = fmt.Sprintf("topic-%d", ti)
		topic.TopicID = [16]byte{byte(ti + 1), 7}
		for p := int32(0); p < int32(partitions); p++ {
			part := kmsg.NewFetchResponseTopicPartition()
			part.Partition, part.HighWatermark, part.LastStableOffset = p, 5000+int64(p), 4000
			id := int32(ti*100) + p
			if n := size(id); n > 0 {
				part.RecordBatches = records(id, n)
			}
			if p%3 == 1 {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = 11, 12
				part.AbortedTransactions = append(part.AbortedTransactions, at, at)
			}
			if p%4 == 2 && v >= 12 {
				part.DivergingEpoch.Epoch, part.DivergingEpoch.EndOffset = 3, 99
				part.CurrentLeader.LeaderID, part.CurrentLeader.LeaderEpoch = 1, 4
			}
			topic.Partitions = append(topic.Partitions, part)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	resp.Brokers = hints
	return resp
}

// fetchUpstream answers the Fetch requests of every connection, in order, with the frames
// answers gives for each request's correlation id; write sends a frame (nil: at once).
func fetchUpstream(t *testing.T, answers func(corr int32) []byte, write func(c net.Conn, frame []byte) error) upstream.Broker {
	t.Helper()
	if write == nil {
		write = func(c net.Conn, frame []byte) error { _, err := c.Write(frame); return err }
	}
	return fakeUpstream(t, 1, func(c net.Conn) {
		for {
			req, err := readRequest(c)
			if err != nil {
				return
			}
			if write(c, answers(int32(binary.BigEndian.Uint32(req[4:8])))) != nil {
				return
			}
		}
	})
}

// fetchFrame is a Fetch request frame of version v (its content does not matter to the fake).
func fetchFrame(v int16, corr int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.MaxBytes = 50 << 20
	b := requestFrame(req, corr)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// readAnswer reads one answer frame, size prefix included.
func readAnswer(c net.Conn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(frame, size[:])
	_, err := io.ReadFull(c, frame[4:])
	return frame, err
}

// servedFetchPort is a broker port of a gateway in front of b, with its own registry.
func servedFetchPort(t *testing.T, b upstream.Broker) (*Gateway, net.Conn, *prometheus.Registry, string) {
	g := testGateway(t)
	reg := prometheus.NewRegistry()
	g.opts.Metrics = NewMetrics(reg)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	addr, _ := servePort(t, g, 1, wire.Options{ListenerName: "BROKER-1", MaxRequestBytes: 1 << 20,
		Metrics: wire.NewMetrics(reg), Budget: wire.NewBudget(16<<20, reg, nil)})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return g, c, reg, addr
}

// Fetch answers of every shape reach the client as the rewrite makes them: byte for byte
// when they name no broker, with only the leader hints rewritten when they do; one partition
// or many, null record sets, aborted transactions and partition tags, response header tags,
// 1 KiB to 3 MiB, versions before and after leader hints, all on one connection, pipelined,
// so that an answer buffer given back too early, or bytes of one answer left for the next,
// would show. (Written for the splicing of Fetch answers, which was measured and left out:
// docs/benchmarks-gateway.md; any later change of how answers are relayed must pass it.)
func TestFetchAnswersReachTheClientAsRewritten(t *testing.T) {
	rack := "r1"
	hint := kmsg.NewFetchResponseBroker()
	hint.NodeID, hint.Host, hint.Port, hint.Rack = 1, "10.9.9.9", 9092, &rack
	type shape struct {
		name       string
		v          int16
		answer     *kmsg.FetchResponse
		headerTags bool
	}
	var shapes []shape
	for _, v := range []int16{4, 11, 12, 13, 15, 16, 17} {
		shapes = append(shapes,
			shape{"one 64 KiB partition", v, fetchAnswer(v, 1, 1, func(int32) int { return 64 << 10 }), false},
			shape{"3 topics of 5 partitions, some null", v, fetchAnswer(v, 3, 5, func(p int32) int { return int(p%3) * 9000 }), false},
			shape{"one 1 KiB partition", v, fetchAnswer(v, 1, 1, func(int32) int { return 1 << 10 }), false},
			shape{"above the pipe (3 MiB)", v, fetchAnswer(v, 1, 3, func(int32) int { return 1 << 20 }), false},
			shape{"small record sets between large ones", v, fetchAnswer(v, 2, 6, func(p int32) int { return []int{30000, 10, 2000, 0, 70000, 5}[p%6] }), false},
		)
		if v >= 12 {
			shapes = append(shapes, shape{"header tags", v, fetchAnswer(v, 1, 2, func(int32) int { return 40000 }), true})
		}
		if v >= 16 {
			shapes = append(shapes,
				shape{"leader hints after 64 KiB", v, fetchAnswer(v, 1, 1, func(int32) int { return 64 << 10 }, hint), false},
				shape{"leader hints after many partitions", v, fetchAnswer(v, 2, 4, func(p int32) int { return 20000 + int(p) }, hint, hint), false},
			)
		}
	}
	frames := make([][]byte, len(shapes))
	for i, s := range shapes {
		frames[i] = frameOf(int32(i+1), s.answer)
		if s.headerTags {
			frames[i] = withHeaderTag(frames[i])
		}
	}
	b := fetchUpstream(t, func(corr int32) []byte { return frames[corr-1] }, nil)
	g, c, reg, _ := servedFetchPort(t, b)
	var requests []byte
	for i, s := range shapes {
		requests = append(requests, fetchFrame(s.v, int32(i+1))...)
	}
	go c.Write(requests)
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	var total float64
	for i, s := range shapes {
		got, err := readAnswer(c)
		if err != nil {
			t.Fatalf("%s v%d: %v", s.name, s.v, err)
		}
		want, err := g.rewrite(wire.Header{Key: 1, Version: s.v, CorrelationID: int32(i + 1)}, append([]byte(nil), frames[i]...))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s v%d: the client got %d bytes that differ from the %d the in-memory path makes", s.name, s.v, len(got), len(want))
		}
		if len(s.answer.Brokers) > 0 && bytes.Contains(got, []byte("10.9.9.9")) {
			t.Fatalf("%s v%d: the upstream's address reached the client", s.name, s.v)
		}
		total += float64(len(got))
	}
	if out := counterValue(t, reg, "coordinatord_bytes_sent_total", nil); out != total {
		t.Fatalf("coordinatord_bytes_sent_total %v, want %v", out, total)
	}
}

// An upstream that fails in the middle of an answer (its connection closes, part of the
// records sent) closes the client's connection before the client is given a frame: nothing of
// a partial answer reaches it, and the next connection is answered whole.
func TestUpstreamFailingMidFetchAnswerClosesTheClient(t *testing.T) {
	frame := frameOf(1, fetchAnswer(17, 1, 2, func(int32) int { return 100 << 10 }))
	var calls int
	b := fetchUpstream(t, func(int32) []byte { return frame }, func(c net.Conn, f []byte) error {
		calls++
		if calls == 1 {
			c.Write(f[:len(f)/2])
			return errors.New("upstream fails")
		}
		_, err := c.Write(f)
		return err
	})
	_, c, reg, addr := servedFetchPort(t, b)
	c.Write(fetchFrame(17, 1))
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(c)
	if len(got) != 0 || err != nil {
		t.Fatalf("the client got %d bytes (%v) of an answer the upstream never finished; want its connection closed without any", len(got), err)
	}
	if n := counterValue(t, reg, "coordinatord_gateway_forward_failures_total", map[string]string{"node": "1", "api": "Fetch"}); n != 1 {
		t.Fatalf("forward failures %v, want 1", n)
	}
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Write(fetchFrame(17, 1))
	c2.SetReadDeadline(time.Now().Add(20 * time.Second))
	if got, err := readAnswer(c2); err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("the next connection's answer: %d bytes, %v", len(got), err)
	}
}

// counterSum adds up every series of a counter.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(fds)
}

// Clients that close their connection in the middle of a large answer: each connection is
// closed, and its upstream connection with it, so nothing is left open behind them.
func TestClientClosingMidFetchAnswerLeavesNothingOpen(t *testing.T) {
	frame := frameOf(1, fetchAnswer(17, 1, 1, func(int32) int { return 900 << 10 }))
	b := fetchUpstream(t, func(int32) []byte { return frame }, nil)
	_, c, reg, addr := servedFetchPort(t, b)
	// One whole answer first, so that the listener, the upstream and the pools are set up.
	c.Write(fetchFrame(17, 1))
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := readAnswer(c); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitClosed := func(n float64) {
		deadline := time.Now().Add(10 * time.Second)
		for counterSum(t, reg, "coordinatord_connections_closed_total") < n {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %v connections closed", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitClosed(1)
	time.Sleep(100 * time.Millisecond) // the upstream's side of the closed connection
	before := openFDs(t)
	const clients = 6
	for i := 0; i < clients; i++ {
		cc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cc.(*net.TCPConn).SetReadBuffer(4 << 10)
		cc.Write(fetchFrame(17, 1))
		head := make([]byte, 100)
		cc.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(cc, head); err != nil {
			t.Fatal(err)
		}
		cc.(*net.TCPConn).SetLinger(0) // a reset, with most of the answer unread
		cc.Close()
	}
	waitClosed(1 + clients)
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t) > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open after %d clients closed mid-answer, %d before", openFDs(t), clients, before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
