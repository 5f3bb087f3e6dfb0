package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testGateway maps upstream node n to port 40000+n on gw.example, without binding anything.
func testGateway(t testing.TB) *Gateway {
	t.Helper()
	g, err := New(Options{NodeID: 100, SelfHost: "coord.example", SelfPort: 9092, AdvertisedHost: "gw.example",
		ListenHost: "127.0.0.1", DataDir: t.TempDir(), WriteFileDurable: writeFile, Serve: func(string, net.Listener, wire.Handler) {}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 5} {
		g.listeners[id] = 40000 + id
	}
	return g
}

func frameOf(corr int32, resp kmsg.Response) []byte {
	return wire.AppendResponse(nil, corr, resp)
}

func fetchWithRecords(version int16, records []byte, brokers ...kmsg.FetchResponseBroker) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	resp.SessionID = 77
	topic := kmsg.NewFetchResponseTopic()
	topic.TopicID = [16]byte{1, 2, 3}
	for p := int32(0); p < 3; p++ {
		part := kmsg.NewFetchResponseTopicPartition()
		part.Partition, part.HighWatermark, part.RecordBatches = p, 1000+int64(p), records
		if p == 1 {
			part.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
			part.CurrentLeader.LeaderID, part.CurrentLeader.LeaderEpoch = 2, 9
			part.RecordBatches = nil
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID = 5
			part.AbortedTransactions = append(part.AbortedTransactions, at)
		}
		topic.Partitions = append(topic.Partitions, part)
	}
	resp.Topics = append(resp.Topics, topic)
	resp.Brokers = brokers
	return resp
}

func TestFetchLeaderHintsRewrittenWithoutTouchingRecords(t *testing.T) {
	g := testGateway(t)
	records := bytes.Repeat([]byte("record-bytes-"), 500)
	rack := "rack-a"
	hint := kmsg.NewFetchResponseBroker()
	hint.NodeID, hint.Host, hint.Port, hint.Rack = 2, "10.1.2.3", 9093, &rack
	for _, v := range []int16{16, 17, 18} {
		in := frameOf(42, fetchWithRecords(v, records, hint))
		out, err := g.rewrite(wire.Header{Key: 1, Version: v, CorrelationID: 42}, append([]byte(nil), in...))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("v%d: size prefix %d for a %d byte frame", v, binary.BigEndian.Uint32(out), len(out))
		}
		got := kmsg.NewPtrFetchResponse()
		got.SetVersion(v)
		if err := got.ReadFrom(out[9:]); err != nil {
			t.Fatalf("v%d: rewritten answer does not decode: %v", v, err)
		}
		if len(got.Brokers) != 1 || got.Brokers[0].Host != "gw.example" || got.Brokers[0].Port != 40002 ||
			got.Brokers[0].NodeID != 2 || got.Brokers[0].Rack == nil || *got.Brokers[0].Rack != rack {
			t.Fatalf("v%d: leader hint %+v, want node 2 at gw.example:40002 rack %s", v, got.Brokers, rack)
		}
		if bytes.Contains(out, []byte("10.1.2.3")) {
			t.Fatalf("v%d: the upstream host is still in the answer", v)
		}
		want := fetchWithRecords(v, records)
		want.Brokers = got.Brokers
		if !bytes.Equal(frameOf(42, want), out) {
			t.Fatalf("v%d: the answer changed beyond its leader hints", v)
		}
	}
}

func TestFetchWithoutHintsIsPassedOnUncopied(t *testing.T) {
	g := testGateway(t)
	in := frameOf(7, fetchWithRecords(17, []byte("abc")))
	out, err := g.rewrite(wire.Header{Key: 1, Version: 17, CorrelationID: 7}, in)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &in[0] || len(out) != len(in) {
		t.Fatal("an answer without leader hints was copied")
	}
}

func TestTruncatedFetchAnswerIsAnError(t *testing.T) {
	g := testGateway(t)
	hint := kmsg.NewFetchResponseBroker()
	hint.NodeID = 1
	in := frameOf(7, fetchWithRecords(16, []byte("abcdef"), hint))
	for cut := 10; cut < len(in)-1; cut += 7 {
		short := append([]byte(nil), in[:cut]...)
		binary.BigEndian.PutUint32(short, uint32(len(short)-4))
		if _, err := g.rewrite(wire.Header{Key: 1, Version: 16}, short); err == nil {
			t.Fatalf("a fetch answer cut at %d of %d bytes was accepted", cut, len(in))
		}
	}
}

func TestMetadataNamesGatewayPortsAndSelf(t *testing.T) {
	g := testGateway(t)
	for _, v := range []int16{0, 1, 7, 12, 13} {
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(v)
		rack := "r1"
		for _, id := range []int32{1, 5} {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port, b.Rack = id, "kafka-"+string(rune('0'+id)), 9092, &rack
			resp.Brokers = append(resp.Brokers, b)
		}
		out, err := g.rewrite(wire.Header{Key: 3, Version: v, CorrelationID: 1}, frameOf(1, resp))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got := kmsg.NewPtrMetadataResponse()
		got.SetVersion(v)
		at := 8
		if got.IsFlexible() {
			at = 9
		}
		if err := got.ReadFrom(out[at:]); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		want := map[int32]string{1: "gw.example:40001", 5: "gw.example:40005", 100: "coord.example:9092"}
		if len(got.Brokers) != len(want) {
			t.Fatalf("v%d: brokers %+v", v, got.Brokers)
		}
		for _, b := range got.Brokers {
			if addr := net.JoinHostPort(b.Host, itoa(b.Port)); addr != want[b.NodeID] {
				t.Fatalf("v%d: node %d at %s, want %s", v, b.NodeID, addr, want[b.NodeID])
			}
			if v >= 1 && b.NodeID != 100 && (b.Rack == nil || *b.Rack != rack) {
				t.Fatalf("v%d: node %d lost its rack", v, b.NodeID)
			}
		}
	}
}

func TestTransactionCoordinatorRewrittenErrorsKept(t *testing.T) {
	g := testGateway(t)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.SetVersion(4)
	ok := kmsg.NewFindCoordinatorResponseCoordinator()
	ok.Key, ok.NodeID, ok.Host, ok.Port = "txn-a", 5, "kafka-5", 9092
	bad := kmsg.NewFindCoordinatorResponseCoordinator()
	bad.Key, bad.NodeID, bad.Host, bad.Port, bad.ErrorCode = "txn-b", -1, "", -1, 53
	resp.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{ok, bad}
	out, err := g.rewrite(wire.Header{Key: 10, Version: 4, CorrelationID: 3}, frameOf(3, resp))
	if err != nil {
		t.Fatal(err)
	}
	got := kmsg.NewPtrFindCoordinatorResponse()
	got.SetVersion(4)
	if err := got.ReadFrom(out[9:]); err != nil {
		t.Fatal(err)
	}
	if c := got.Coordinators[0]; c.Host != "gw.example" || c.Port != 40005 || c.NodeID != 5 {
		t.Fatalf("transaction coordinator %+v, want node 5 at gw.example:40005", c)
	}
	if c := got.Coordinators[1]; c.NodeID != -1 || c.Host != "" || c.Port != -1 || c.ErrorCode != 53 {
		t.Fatalf("Kafka's error shape was changed: %+v", c)
	}
}

func TestProduceAcksIsRead(t *testing.T) {
	for _, v := range []int16{3, 8, 9, 11, 13} {
		for _, acks := range []int16{0, 1, -1} {
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(v)
			tid := "tx"
			req.TransactionID, req.Acks = &tid, acks
			frame := requestFrame(req, 9)
			if got := produceAcks(v, frame); got != acks {
				t.Fatalf("v%d: acks %d read as %d", v, acks, got)
			}
		}
	}
	if got := produceAcks(9, []byte{0, 0}); got != -2 {
		t.Fatalf("a truncated produce request read as acks %d", got)
	}
}

func TestFindCoordinatorKeyType(t *testing.T) {
	for _, v := range []int16{0, 1, 2, 3, 4, 5, 6} {
		for _, kt := range []int8{0, 1} {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(v)
			req.CoordinatorKey, req.CoordinatorType = "k", kt
			req.CoordinatorKeys = []string{"k"}
			frame := requestFrame(req, 1)
			_, rest, err := wire.ParseHeader(frame)
			if err != nil {
				t.Fatal(err)
			}
			want := kt
			if v == 0 {
				want = 0
			}
			if got := findCoordinatorKeyType(v, rest); got != want {
				t.Fatalf("v%d: key type %d read as %d", v, kt, got)
			}
		}
	}
}

func requestFrame(req kmsg.Request, corr int32) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// Connection ids restart at 1 on every listener: two client connections with the same id on
// different ports must never share an upstream connection (their answers would cross).
func TestConnectionsWithEqualIDsGetTheirOwnUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	g := testGateway(t)
	addr := ln.Addr().(*net.TCPAddr)
	g.view = &upstream.View{Brokers: []upstream.Broker{{NodeID: 1, Host: "127.0.0.1", Port: int32(addr.Port)}}}
	self := &wire.Conn{ID: 1, Listener: "PLAINTEXT"}
	broker := &wire.Conn{ID: 1, Listener: "BROKER-1"}
	a, err := g.upstreamFor(context.Background(), self, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.upstreamFor(context.Background(), broker, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two client connections share one upstream connection")
	}
	g.closeConn(self)
	if again, _ := g.upstreamFor(context.Background(), broker, 1); again != b {
		t.Fatal("closing one client connection dropped another's upstream connection")
	}
}

func TestDescribeClusterNamesGatewayPortsAndSelf(t *testing.T) {
	g := testGateway(t)
	for _, v := range []int16{0, 1, 2} {
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.SetVersion(v)
		b := kmsg.NewDescribeClusterResponseBroker()
		rack := "r2"
		b.NodeID, b.Host, b.Port, b.Rack = 2, "kafka-2.internal", 9092, &rack
		resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
		out, err := g.rewrite(wire.Header{Key: 60, Version: v, CorrelationID: 5}, frameOf(5, resp))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got := kmsg.NewPtrDescribeClusterResponse()
		got.SetVersion(v)
		if err := got.ReadFrom(out[9:]); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if len(got.Brokers) != 2 || got.Brokers[0].Host != "gw.example" || got.Brokers[0].Port != 40002 ||
			got.Brokers[1].NodeID != 100 || got.Brokers[1].Host != "coord.example" || got.Brokers[1].IsFenced {
			t.Fatalf("v%d: brokers %+v", v, got.Brokers)
		}
		if r := got.Brokers[0].Rack; r == nil || *r != "r2" {
			t.Fatalf("v%d: node 2 lost its rack (%v): rack-aware clients would fetch across racks", v, r)
		}
	}
}

func TestProduceLeaderHintsRewritten(t *testing.T) {
	g := testGateway(t)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(11)
	topic := kmsg.NewProduceResponseTopic()
	topic.Topic = "orders"
	part := kmsg.NewProduceResponseTopicPartition()
	part.ErrorCode = 6
	part.CurrentLeader.LeaderID, part.CurrentLeader.LeaderEpoch = 5, 3
	topic.Partitions = append(topic.Partitions, part)
	resp.Topics = append(resp.Topics, topic)
	hint := kmsg.NewProduceResponseBroker()
	hint.NodeID, hint.Host, hint.Port = 5, "kafka-5.internal", 9092
	resp.Brokers = []kmsg.ProduceResponseBroker{hint}
	out, err := g.rewrite(wire.Header{Key: 0, Version: 11, CorrelationID: 8}, frameOf(8, resp))
	if err != nil {
		t.Fatal(err)
	}
	got := kmsg.NewPtrProduceResponse()
	got.SetVersion(11)
	if err := got.ReadFrom(out[9:]); err != nil {
		t.Fatal(err)
	}
	if len(got.Brokers) != 1 || got.Brokers[0].Host != "gw.example" || got.Brokers[0].Port != 40005 {
		t.Fatalf("leader hint %+v, want node 5 at gw.example:40005", got.Brokers)
	}
	if got.Topics[0].Partitions[0].CurrentLeader.LeaderID != 5 {
		t.Fatal("the current leader's id changed")
	}
	// Without hints the answer passes as it came.
	resp.Brokers = nil
	in := frameOf(8, resp)
	if out, _ := g.rewrite(wire.Header{Key: 0, Version: 11, CorrelationID: 8}, in); &out[0] != &in[0] {
		t.Fatal("a produce answer without leader hints was re-encoded")
	}
}

// A Produce answer is walked, not decoded, to learn whether it carries leader hints: every
// shape of answer Kafka sends (several topics and partitions, record errors, messages, a
// partition's CurrentLeader, a response header tag) is passed on as it came without hints and
// rewritten with them, at every flexible version with hints (v10-13), and the upstream's
// address never reaches the client.
func TestProduceAnswersAreWalkedForLeaderHints(t *testing.T) {
	g := testGateway(t)
	const upHost = "kafka-5.internal"
	build := func(v int16, hints bool) []byte {
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(v)
		resp.ThrottleMillis = 7
		for ti := 0; ti < 2; ti++ {
			topic := kmsg.NewProduceResponseTopic()
			topic.Topic, topic.TopicID = "orders-"+strconv.Itoa(ti), [16]byte{byte(ti + 1)}
			for p := int32(0); p < 3; p++ {
				part := kmsg.NewProduceResponseTopicPartition()
				part.Partition, part.BaseOffset = p, 100*int64(p)
				switch p {
				case 1:
					part.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER, with the new leader's id and epoch
					part.CurrentLeader.LeaderID, part.CurrentLeader.LeaderEpoch = 5, 3
					msg := "not the leader"
					part.ErrorMessage = &msg
				case 2:
					part.ErrorCode = 87 // INVALID_RECORD
					e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
					e.RelativeOffset = 4
					m := "bad record"
					e.ErrorMessage = &m
					part.ErrorRecords = append(part.ErrorRecords, e, kmsg.NewProduceResponseTopicPartitionErrorRecord())
				}
				topic.Partitions = append(topic.Partitions, part)
			}
			resp.Topics = append(resp.Topics, topic)
		}
		if hints {
			hint := kmsg.NewProduceResponseBroker()
			hint.NodeID, hint.Host, hint.Port = 5, upHost, 9092
			resp.Brokers = []kmsg.ProduceResponseBroker{hint}
		}
		return frameOf(8, resp)
	}
	for v := int16(10); v <= 13; v++ {
		h := wire.Header{Key: 0, Version: v, CorrelationID: 8}
		for _, in := range [][]byte{build(v, false), withHeaderTag(build(v, false))} {
			if produceHasTopLevelTags(v, in) {
				t.Fatalf("v%d: an answer without leader hints would be decoded", v)
			}
			if out, err := g.rewrite(h, in); err != nil || &out[0] != &in[0] {
				t.Fatalf("v%d: an answer without leader hints was not passed on as it came (%v)", v, err)
			}
		}
		for _, in := range [][]byte{build(v, true), withHeaderTag(build(v, true))} {
			out, err := g.rewrite(h, in)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			if bytes.Contains(out, []byte(upHost)) || !bytes.Contains(out, []byte("gw.example")) {
				t.Fatalf("v%d: the leader hint was not rewritten", v)
			}
		}
		// Cut short: still refused, as when it was decoded.
		in := build(v, false)
		if _, err := g.rewrite(h, in[:len(in)-3]); err == nil {
			t.Fatalf("v%d: a truncated answer was passed on", v)
		}
	}
}

// withHeaderTag puts one tagged field (tag 5, two bytes) into a flexible response frame's
// header, which wire.AppendResponse writes empty.
func withHeaderTag(frame []byte) []byte {
	out := append(append([]byte(nil), frame[:8]...), 1, 5, 2, 0xab, 0xcd)
	out = append(out, frame[9:]...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// Response header tagged fields are legal in every flexible version and ignored by clients
// that do not know them: an upstream that sends one must not get every rewritten answer
// refused (and every client connection closed). The tags are passed on as they came.
func TestResponseHeaderTagsArePassedOn(t *testing.T) {
	g := testGateway(t)
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(12)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "kafka-1", 9092
	md.Brokers = append(md.Brokers, b)
	hint := kmsg.NewFetchResponseBroker()
	hint.NodeID, hint.Host, hint.Port = 2, "10.1.2.3", 9093
	for _, tc := range []struct {
		h    wire.Header
		resp kmsg.Response
	}{
		{wire.Header{Key: 3, Version: 12, CorrelationID: 3}, md},
		{wire.Header{Key: 1, Version: 17, CorrelationID: 3}, fetchWithRecords(17, []byte("records"), hint)},
	} {
		in := withHeaderTag(frameOf(3, tc.resp))
		out, err := g.rewrite(tc.h, in)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(tc.h.Key), err)
		}
		if !bytes.Equal(out[8:13], []byte{1, 5, 2, 0xab, 0xcd}) {
			t.Fatalf("%s: header tags % x, want them passed on", kmsg.NameForKey(tc.h.Key), out[8:13])
		}
		got := kmsg.ResponseForKey(tc.h.Key)
		got.SetVersion(tc.h.Version)
		if err := got.ReadFrom(out[13:]); err != nil {
			t.Fatalf("%s: rewritten body does not decode: %v", kmsg.NameForKey(tc.h.Key), err)
		}
		if bytes.Contains(out, []byte("kafka-1")) || bytes.Contains(out, []byte("10.1.2.3")) {
			t.Fatalf("%s: an upstream host is left in the answer", kmsg.NameForKey(tc.h.Key))
		}
	}
}

// A leader hint naming a broker the view does not list yet binds its port and asks for the
// upstream's metadata at once: until the view has the broker's address, every request on its
// port fails and closes the client's connection.
func TestBrokerFirstSeenInALeaderHintRefreshesTheView(t *testing.T) {
	g := testGateway(t)
	g.opts.Serve = func(_ string, ln net.Listener, _ wire.Handler) { ln.Close() }
	refreshed := 0
	g.refresh = func() { refreshed++ }
	g.view = &upstream.View{Brokers: []upstream.Broker{{NodeID: 1}, {NodeID: 2}}}
	hint := kmsg.NewProduceResponseBroker()
	hint.NodeID, hint.Host, hint.Port = 7, "10.1.2.7", 9092
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(11)
	resp.Brokers = append(resp.Brokers, hint)
	out, err := g.rewrite(wire.Header{Key: 0, Version: 11, CorrelationID: 1}, frameOf(1, resp))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("10.1.2.7")) {
		t.Fatal("the new broker's upstream address is in the answer")
	}
	if _, ok := g.Ports()[7]; !ok || refreshed == 0 {
		t.Fatalf("node 7: listener %v, refreshes asked %d; want a listener and a refresh", g.Ports(), refreshed)
	}
}

// Every rewritten key at every version the gateway advertises: the answer keeps its header form
// (v1 with tags for flexible versions, v0 otherwise), decodes at that version, and carries no
// upstream host.
func TestEveryRewrittenVersionKeepsItsHeaderAndLeaksNothing(t *testing.T) {
	g := testGateway(t)
	const upHost = "upstream-host.example"
	build := func(key, v int16) kmsg.Response {
		switch key {
		case 3:
			r := kmsg.NewPtrMetadataResponse()
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = 1, upHost, 9092
			r.Brokers = append(r.Brokers, b)
			return r
		case 60:
			r := kmsg.NewPtrDescribeClusterResponse()
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host, b.Port = 1, upHost, 9092
			r.Brokers = append(r.Brokers, b)
			return r
		case 10:
			r := kmsg.NewPtrFindCoordinatorResponse()
			r.NodeID, r.Host, r.Port = 1, upHost, 9092
			if v >= 4 {
				c := kmsg.NewFindCoordinatorResponseCoordinator()
				c.Key, c.NodeID, c.Host, c.Port = "txn", 1, upHost, 9092
				r.Coordinators = append(r.Coordinators, c)
			}
			return r
		case 0:
			r := kmsg.NewPtrProduceResponse()
			if v >= 10 {
				b := kmsg.NewProduceResponseBroker()
				b.NodeID, b.Host, b.Port = 1, upHost, 9092
				r.Brokers = append(r.Brokers, b)
			}
			return r
		default:
			return fetchWithRecords(v, []byte("records"), func() kmsg.FetchResponseBroker {
				b := kmsg.NewFetchResponseBroker()
				b.NodeID, b.Host, b.Port = 1, upHost, 9092
				return b
			}())
		}
	}
	for _, kv := range []struct{ key, min, max int16 }{{3, 0, 13}, {60, 0, 2}, {10, 0, 6}, {0, 3, 13}, {1, 16, 18}} {
		for v := kv.min; v <= kv.max; v++ {
			resp := build(kv.key, v)
			resp.SetVersion(v)
			out, err := g.rewrite(wire.Header{Key: kv.key, Version: v, CorrelationID: 9}, frameOf(9, resp))
			name := kmsg.NameForKey(kv.key) + " v" + strconv.Itoa(int(v))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if int(binary.BigEndian.Uint32(out)) != len(out)-4 || binary.BigEndian.Uint32(out[4:]) != 9 {
				t.Fatalf("%s: bad size prefix or correlation id", name)
			}
			got := kmsg.ResponseForKey(kv.key)
			got.SetVersion(v)
			at := 8
			if got.IsFlexible() {
				if out[8] != 0 {
					t.Fatalf("%s: header tags byte %d", name, out[8])
				}
				at = 9
			}
			if err := got.ReadFrom(out[at:]); err != nil {
				t.Fatalf("%s: rewritten answer does not decode: %v", name, err)
			}
			if bytes.Contains(out, []byte(upHost)) {
				t.Fatalf("%s: the upstream host is in the answer", name)
			}
		}
	}
}

// A transaction coordinator no listener can be bound for (the port range is full) is not
// answered with its upstream address: the client gets COORDINATOR_NOT_AVAILABLE and retries.
func TestUnbindableTransactionCoordinatorIsNotLeaked(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	g, err := New(Options{NodeID: 100, ListenHost: "127.0.0.1", AdvertisedHost: "gw.example", PortMin: port, PortMax: port,
		DataDir: t.TempDir(), WriteFileDurable: writeFile, Serve: func(string, net.Listener, wire.Handler) {}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int16{1, 3, 4, 6} {
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.SetVersion(v)
		resp.NodeID, resp.Host, resp.Port = 7, "txn-host.example", 9092
		if v >= 4 {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Host, c.Port = "tx", 7, "txn-host.example", 9092
			resp.Coordinators = append(resp.Coordinators, c)
		}
		out, err := g.rewrite(wire.Header{Key: 10, Version: v, CorrelationID: 1}, frameOf(1, resp))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if bytes.Contains(out, []byte("txn-host.example")) {
			t.Fatalf("v%d: the answer carries the upstream coordinator's address", v)
		}
		got := kmsg.NewPtrFindCoordinatorResponse()
		got.SetVersion(v)
		at := 8
		if got.IsFlexible() {
			at = 9
		}
		if err := got.ReadFrom(out[at:]); err != nil {
			t.Fatal(err)
		}
		code, node := got.ErrorCode, got.NodeID
		if v >= 4 {
			code, node = got.Coordinators[0].ErrorCode, got.Coordinators[0].NodeID
		}
		if code != 15 || node != -1 {
			t.Fatalf("v%d: error %d node %d, want COORDINATOR_NOT_AVAILABLE (15) and -1", v, code, node)
		}
	}
}

// Kafka sends leader hints (top-level tag 0) from Produce v10 and Fetch v16 on, but a client's
// decoder (franz-go's) reads that tag as hints at every flexible version: an upstream that
// sent one earlier must not reach the client with its address (found by FuzzRewriteProduce).
func TestLeaderHintsOfEarlyFlexibleVersionsAreRewritten(t *testing.T) {
	g := testGateway(t)
	const upHost = "10.9.9.9"
	for v := int16(12); v <= 15; v++ {
		hint := kmsg.NewFetchResponseBroker()
		hint.NodeID, hint.Host, hint.Port = 2, upHost, 9092
		out, err := g.rewrite(wire.Header{Key: 1, Version: v, CorrelationID: 4}, frameOf(4, fetchWithRecords(v, []byte("rec"), hint)))
		if err != nil {
			t.Fatalf("Fetch v%d: %v", v, err)
		}
		if bytes.Contains(out, []byte(upHost)) || !bytes.Contains(out, []byte("gw.example")) {
			t.Fatalf("Fetch v%d: the leader hint was not rewritten", v)
		}
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	hint := kmsg.NewProduceResponseBroker()
	hint.NodeID, hint.Host, hint.Port = 5, upHost, 9092
	resp.Brokers = append(resp.Brokers, hint)
	out, err := g.rewrite(wire.Header{Key: 0, Version: 9, CorrelationID: 4}, frameOf(4, resp))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(upHost)) || !bytes.Contains(out, []byte("gw.example")) {
		t.Fatal("Produce v9: the leader hint was not rewritten")
	}
}

// Leader hints may name brokers the upstream's metadata does not list yet, and each gets a
// listener at once; but only so many: an upstream naming ever new node ids must not make the
// gateway bind ports without end. Past the bound a hint is left out (the client asks Metadata
// instead), listed brokers still get their listeners, and no upstream address leaks.
func TestListenersForUnlistedNodesAreBounded(t *testing.T) {
	g := testGateway(t) // nodes 1, 2 and 5 bound
	g.opts.Serve = func(_ string, ln net.Listener, _ wire.Handler) { ln.Close() }
	g.view = &upstream.View{Brokers: []upstream.Broker{{NodeID: 1}, {NodeID: 2}}}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(11)
	for id := int32(1000); id < 1100; id++ {
		hint := kmsg.NewProduceResponseBroker()
		hint.NodeID, hint.Host, hint.Port = id, "10.9.9."+strconv.Itoa(int(id-1000)), 9092
		resp.Brokers = append(resp.Brokers, hint)
	}
	listed := kmsg.NewProduceResponseBroker()
	listed.NodeID, listed.Host, listed.Port = 2, "10.9.8.2", 9092
	resp.Brokers = append(resp.Brokers, listed)
	out, err := g.rewrite(wire.Header{Key: 0, Version: 11, CorrelationID: 1}, frameOf(1, resp))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("10.9.")) {
		t.Fatal("an upstream address is in the answer")
	}
	got := kmsg.NewPtrProduceResponse()
	got.SetVersion(11)
	if err := got.ReadFrom(out[9:]); err != nil {
		t.Fatal(err)
	}
	unlisted, sawListed := 0, false
	for _, b := range got.Brokers {
		if b.NodeID == 2 {
			sawListed = b.Port == 40002
		} else {
			unlisted++
		}
	}
	if !sawListed {
		t.Fatalf("listed node 2 lost its hint: %+v", got.Brokers)
	}
	// Node 5 is bound and not listed: it takes one of the places.
	if want := maxUnlistedListeners - 1; unlisted != want || len(g.Ports()) != 3+want {
		t.Fatalf("%d unlisted hints passed on and %d listeners bound; want %d hints, %d listeners", unlisted, len(g.Ports()), want, 3+want)
	}
	// A broker the metadata lists is always served, even with every unlisted place taken.
	if err := g.OnView(&upstream.View{Brokers: []upstream.Broker{{NodeID: 1}, {NodeID: 2}, {NodeID: 3000}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Ports()[3000]; !ok {
		t.Fatal("a broker the upstream lists got no listener")
	}
}

// decodeAnswer decodes a response frame of key at version.
func decodeAnswer(t *testing.T, key, version int16, frame []byte) kmsg.Response {
	t.Helper()
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	at := 8
	if resp.IsFlexible() {
		at = 9
	}
	if err := resp.ReadFrom(frame[at:]); err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
	}
	return resp
}

// Kafka answers a request it refuses whole (Metadata naming a topic by id before v12,
// DescribeCluster on the wrong endpoint type) with no brokers. The answer stays that way: a
// broker list holding coordinatord alone would be taken for the cluster, and a client that
// adopted it would find no leader for any partition.
func TestRefusalsListingNoBrokersStayEmpty(t *testing.T) {
	g := testGateway(t)
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(11)
	topic := kmsg.NewMetadataResponseTopic()
	topic.ErrorCode = 87 // INVALID_REQUEST
	md.Topics = append(md.Topics, topic)
	out, err := g.rewrite(wire.Header{Key: 3, Version: 11, CorrelationID: 1}, frameOf(1, md))
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeAnswer(t, 3, 11, out).(*kmsg.MetadataResponse); len(got.Brokers) != 0 {
		t.Fatalf("a refused Metadata lists brokers %+v", got.Brokers)
	}
	dc := kmsg.NewPtrDescribeClusterResponse()
	dc.SetVersion(1)
	dc.ErrorCode = 114 // MISMATCHED_ENDPOINT_TYPE
	out, err = g.rewrite(wire.Header{Key: 60, Version: 1, CorrelationID: 1}, frameOf(1, dc))
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeAnswer(t, 60, 1, out).(*kmsg.DescribeClusterResponse); len(got.Brokers) != 0 {
		t.Fatalf("a refused DescribeCluster lists brokers %+v", got.Brokers)
	}
}

// An upstream broker no listener can be bound for (the port range is full) is left out of
// Metadata, DescribeCluster and the leader hints of Produce and Fetch, never listed with its
// upstream address; the brokers that have a port are listed as always.
func TestUnbindableBrokerIsLeftOutNotLeaked(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	g, err := New(Options{NodeID: 100, SelfHost: "coord.example", SelfPort: 9092, ListenHost: "127.0.0.1", AdvertisedHost: "gw.example",
		PortMin: port, PortMax: port, DataDir: t.TempDir(), WriteFileDurable: writeFile, Serve: func(string, net.Listener, wire.Handler) {}})
	if err != nil {
		t.Fatal(err)
	}
	g.listeners[1] = 40001
	const hidden = "kafka-7.internal"
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(12)
	dc := kmsg.NewPtrDescribeClusterResponse()
	dc.SetVersion(1)
	produce := kmsg.NewPtrProduceResponse()
	produce.SetVersion(11)
	for _, id := range []int32{1, 7} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "kafka-"+itoa(id)+".internal", 9092
		md.Brokers = append(md.Brokers, b)
		c := kmsg.NewDescribeClusterResponseBroker()
		c.NodeID, c.Host, c.Port = id, "kafka-"+itoa(id)+".internal", 9092
		dc.Brokers = append(dc.Brokers, c)
		p := kmsg.NewProduceResponseBroker()
		p.NodeID, p.Host, p.Port = id, "kafka-"+itoa(id)+".internal", 9092
		produce.Brokers = append(produce.Brokers, p)
	}
	f := kmsg.NewFetchResponseBroker()
	f.NodeID, f.Host, f.Port = 7, hidden, 9092
	fetch := fetchWithRecords(17, []byte("records"), f)
	for _, c := range []struct {
		key, version int16
		resp         kmsg.Response
		listed       func(kmsg.Response) map[int32]string
	}{
		{3, 12, md, func(r kmsg.Response) map[int32]string {
			return listedAddrs(r.(*kmsg.MetadataResponse).Brokers, func(b kmsg.MetadataResponseBroker) (int32, string, int32) { return b.NodeID, b.Host, b.Port })
		}},
		{60, 1, dc, func(r kmsg.Response) map[int32]string {
			return listedAddrs(r.(*kmsg.DescribeClusterResponse).Brokers, func(b kmsg.DescribeClusterResponseBroker) (int32, string, int32) { return b.NodeID, b.Host, b.Port })
		}},
		{0, 11, produce, func(r kmsg.Response) map[int32]string {
			return listedAddrs(r.(*kmsg.ProduceResponse).Brokers, func(b kmsg.ProduceResponseBroker) (int32, string, int32) { return b.NodeID, b.Host, b.Port })
		}},
		{1, 17, fetch, func(r kmsg.Response) map[int32]string {
			return listedAddrs(r.(*kmsg.FetchResponse).Brokers, func(b kmsg.FetchResponseBroker) (int32, string, int32) { return b.NodeID, b.Host, b.Port })
		}},
	} {
		name := kmsg.NameForKey(c.key)
		out, err := g.rewrite(wire.Header{Key: c.key, Version: c.version, CorrelationID: 1}, frameOf(1, c.resp))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if bytes.Contains(out, []byte(hidden)) {
			t.Fatalf("%s: the unbindable broker's upstream address is in the answer", name)
		}
		listed := c.listed(decodeAnswer(t, c.key, c.version, out))
		if _, ok := listed[7]; ok {
			t.Errorf("%s: the unbindable broker is listed: %v", name, listed)
		}
		if c.key != 1 && listed[1] != "gw.example:40001" {
			t.Errorf("%s: node 1 at %q, want gw.example:40001", name, listed[1])
		}
	}
}

// With other coordinatord nodes sharing the groups (log.backend=kafka), broker lists name each
// node once: this one first with its own address, then the others, even when the peer list
// includes this node. A node the map leaves out (refused for a node.id another node uses)
// lists the map's nodes only, the other node under the shared id.
func TestBrokerListsNameEachCoordinatordNodeOnce(t *testing.T) {
	for _, unlisted := range []bool{false, true} {
		t.Run(fmt.Sprintf("unlisted=%v", unlisted), func(t *testing.T) { testBrokerLists(t, unlisted) })
	}
}

func testBrokerLists(t *testing.T, unlisted bool) {
	g := testGateway(t)
	g.opts.Peers = func() []Peer {
		return []Peer{{ID: 100, Host: "stale.example", Port: 1}, {ID: 101, Host: "coord-b.example", Port: 9092}}
	}
	g.opts.Unlisted = func() bool { return unlisted }
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(12)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "kafka-1", 9092
	md.Brokers = append(md.Brokers, b)
	dc := kmsg.NewPtrDescribeClusterResponse()
	dc.SetVersion(1)
	c := kmsg.NewDescribeClusterResponseBroker()
	c.NodeID, c.Host, c.Port = 1, "kafka-1", 9092
	dc.Brokers = append(dc.Brokers, c)
	want := []string{"1 gw.example:40001", "100 coord.example:9092", "101 coord-b.example:9092"}
	if unlisted {
		want = []string{"1 gw.example:40001", "100 stale.example:1", "101 coord-b.example:9092"}
	}
	for _, tc := range []struct {
		key, version int16
		resp         kmsg.Response
	}{{3, 12, md}, {60, 1, dc}} {
		out, err := g.rewrite(wire.Header{Key: tc.key, Version: tc.version, CorrelationID: 1}, frameOf(1, tc.resp))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		switch r := decodeAnswer(t, tc.key, tc.version, out).(type) {
		case *kmsg.MetadataResponse:
			for _, b := range r.Brokers {
				got = append(got, itoa(b.NodeID)+" "+net.JoinHostPort(b.Host, itoa(b.Port)))
			}
		case *kmsg.DescribeClusterResponse:
			for _, b := range r.Brokers {
				got = append(got, itoa(b.NodeID)+" "+net.JoinHostPort(b.Host, itoa(b.Port)))
			}
		}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s lists %v, want %v", kmsg.NameForKey(tc.key), got, want)
		}
	}
}

// A transaction coordinator on upstream node 0 (Kafka's node ids commonly start there) is
// rewritten like any other: its upstream address must not reach the client, at any version.
func TestTransactionCoordinatorOnNodeZeroIsRewritten(t *testing.T) {
	g := testGateway(t)
	g.listeners[0] = 40000
	const upHost = "kafka-0.internal"
	for v := int16(1); v <= 6; v++ {
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.SetVersion(v)
		resp.NodeID, resp.Host, resp.Port = 0, upHost, 9092
		if v >= 4 {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Host, c.Port = "tx", 0, upHost, 9092
			resp.Coordinators = append(resp.Coordinators, c)
		}
		out, err := g.rewrite(wire.Header{Key: 10, Version: v, CorrelationID: 1}, frameOf(1, resp))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if bytes.Contains(out, []byte(upHost)) {
			t.Fatalf("v%d: the upstream coordinator's address reaches the client", v)
		}
		got := decodeAnswer(t, 10, v, out).(*kmsg.FindCoordinatorResponse)
		node, host, port := got.NodeID, got.Host, got.Port
		if v >= 4 {
			node, host, port = got.Coordinators[0].NodeID, got.Coordinators[0].Host, got.Coordinators[0].Port
		}
		if node != 0 || host != "gw.example" || port != 40000 {
			t.Fatalf("v%d: coordinator %d at %s:%d, want node 0 at gw.example:40000", v, node, host, port)
		}
	}
}

// listedAddrs maps each broker of an answer's list to the address it names.
func listedAddrs[B any](brokers []B, addr func(B) (int32, string, int32)) map[int32]string {
	out := map[int32]string{}
	for _, b := range brokers {
		id, host, port := addr(b)
		out[id] = net.JoinHostPort(host, itoa(port))
	}
	return out
}
