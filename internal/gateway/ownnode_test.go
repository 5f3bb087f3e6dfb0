package gateway

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/upstream"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTripRaw sends req on c and decodes its answer into resp.
func roundTripRaw(t *testing.T, c net.Conn, req kmsg.Request, corr int32, resp kmsg.Response) {
	t.Helper()
	frame := requestFrame(req, corr)
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	body, err := readRequest(c) // a response frame reads like a request frame
	if err != nil {
		t.Fatalf("%s v%d: no answer: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		body = body[1:] // empty header tag section
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
}

// Kafka's admin tools send ListTransactions (kafka-transactions.sh list) and DescribeLogDirs
// (kafka-log-dirs.sh --describe) to every broker Metadata lists, coordinatord's node included.
// Its own port answers them for coordinatord: no transactions, and one log directory with no
// topics (an answer without any directory is CLUSTER_AUTHORIZATION_FAILED to Kafka's admin
// client). Forwarded, they would list the pinned upstream broker's transactions twice and show
// its log directories under coordinatord's node id.
func TestOwnNodeAnswersListTransactionsAndDescribeLogDirsItself(t *testing.T) {
	forwarded := make(chan struct{}, 16)
	b := fakeUpstream(t, 1, func(c net.Conn) {
		if _, err := readRequest(c); err == nil {
			forwarded <- struct{}{}
		}
	})
	g := testGateway(t)
	g.view = &upstream.View{Brokers: []upstream.Broker{b}}
	addr, _ := servePort(t, g, -1, wire.Options{ListenerName: "PLAINTEXT", MaxRequestBytes: 1 << 20})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	corr := int32(0)
	for v := int16(0); v <= kmsg.NewPtrListTransactionsRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrListTransactionsRequest()
		req.SetVersion(v)
		req.StateFilters = []string{"Ongoing", "Bogus"}
		resp := kmsg.NewPtrListTransactionsResponse()
		corr++
		roundTripRaw(t, c, req, corr, resp)
		if resp.ErrorCode != 0 || len(resp.TransactionStates) != 0 || len(resp.UnknownStateFilters) != 1 || resp.UnknownStateFilters[0] != "Bogus" {
			t.Fatalf("ListTransactions v%d: %+v", v, resp)
		}
	}
	for v := int16(0); v <= kmsg.NewPtrDescribeLogDirsRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.SetVersion(v)
		resp := kmsg.NewPtrDescribeLogDirsResponse()
		corr++
		roundTripRaw(t, c, req, corr, resp)
		if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
			t.Fatalf("DescribeLogDirs v%d: %+v", v, resp)
		}
		d := resp.Dirs[0]
		if d.ErrorCode != 0 || d.Dir != g.opts.DataDir || len(d.Topics) != 0 {
			t.Fatalf("DescribeLogDirs v%d: dir %+v", v, d)
		}
		if v >= 4 && (d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes) {
			t.Fatalf("DescribeLogDirs v%d: total %d, usable %d bytes", v, d.TotalBytes, d.UsableBytes)
		}
	}
	select {
	case <-forwarded:
		t.Fatal("an own-node request reached the upstream broker")
	default:
	}
}

// On coordinatord's own port an own-node API is decoded at the versions the codec knows only:
// one above them closes the connection, as any version nobody advertised does, rather than
// getting an answer in a layout the client did not ask for.
func TestOwnNodeKeysAboveTheCodecsVersionsAreNotServed(t *testing.T) {
	p := &portHandler{g: testGateway(t), node: -1}
	for _, key := range []int16{35, 66} {
		newest := kmsg.RequestForKey(key).MaxVersion()
		if _, _, ok := p.NewRequest(key, newest); !ok {
			t.Errorf("%s v%d is not served on coordinatord's port", kmsg.NameForKey(key), newest)
		}
		if _, _, ok := p.NewRequest(key, newest+1); ok {
			t.Errorf("%s v%d, above the codec's versions, is served on coordinatord's port", kmsg.NameForKey(key), newest+1)
		}
	}
}
