package e2e

// Gateway checks of spec gateway.md §9 written at the wire level: frames at exact versions
// on every port of the gateway (coordinatord's own and each upstream broker's), answers
// decoded with kmsg, and the raw answer bytes searched for the upstream's address.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wireConn is one client connection that writes requests at the version it is told.
type wireConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialWire(t *testing.T, addr string) *wireConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &wireConn{t: t, c: c}
}

// send writes req at version with the next correlation id and returns that id.
func (w *wireConn) send(req kmsg.Request, version int16) int32 {
	w.t.Helper()
	req.SetVersion(version)
	w.corr++
	frame := w.header(req.Key(), version, req.IsFlexible())
	frame = req.AppendTo(frame)
	w.write(frame)
	return w.corr
}

// sendRaw writes a request header for key/version followed by body as it is.
func (w *wireConn) sendRaw(key, version int16, flexible bool, body []byte) int32 {
	w.t.Helper()
	w.corr++
	w.write(append(w.header(key, version, flexible), body...))
	return w.corr
}

func (w *wireConn) header(key, version int16, flexible bool) []byte {
	b := make([]byte, 4, 64) // size, filled in by write
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(w.corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len("e2e-wire")))
	b = append(b, "e2e-wire"...)
	if flexible {
		b = append(b, 0) // no header tags
	}
	return b
}

func (w *wireConn) write(frame []byte) {
	w.t.Helper()
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	w.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := w.c.Write(frame); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

// readFrame returns the next answer's correlation id and the bytes after it.
func (w *wireConn) readFrame(wait time.Duration) (int32, []byte, error) {
	w.c.SetReadDeadline(time.Now().Add(wait))
	var size [4]byte
	if _, err := io.ReadFull(w.c, size[:]); err != nil {
		return 0, nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(w.c, buf); err != nil {
		return 0, nil, err
	}
	if len(buf) < 4 {
		return 0, nil, errors.New("answer shorter than its correlation id")
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// recv reads the answer to the request with id corr, decoded as resp at version.
func (w *wireConn) recv(corr int32, resp kmsg.Response, version int16) []byte {
	w.t.Helper()
	got, body, err := w.readFrame(15 * time.Second)
	if err != nil {
		w.t.Fatalf("reading the answer to %s v%d: %v", kmsg.NameForKey(resp.Key()), version, err)
	}
	if got != corr {
		w.t.Fatalf("answer to %s v%d has correlation id %d, want %d", kmsg.NameForKey(resp.Key()), version, got, corr)
	}
	resp.SetVersion(version)
	if resp.IsFlexible() && resp.Key() != 18 { // ApiVersions answers always use header v0
		if len(body) == 0 || body[0] != 0 {
			w.t.Fatalf("%s v%d: unexpected response header tags", kmsg.NameForKey(resp.Key()), version)
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		w.t.Fatalf("decoding %s v%d: %v", kmsg.NameForKey(resp.Key()), version, err)
	}
	return body
}

func (w *wireConn) roundTrip(req kmsg.Request, version int16) (kmsg.Response, []byte) {
	w.t.Helper()
	corr := w.send(req, version)
	resp := req.ResponseKind()
	body := w.recv(corr, resp, version)
	return resp, body
}

// expectClosed waits for the server to close the connection without answering.
func (w *wireConn) expectClosed(what string) {
	w.t.Helper()
	_, _, err := w.readFrame(10 * time.Second)
	var ne net.Error
	switch {
	case err == nil:
		w.t.Fatalf("%s: the gateway answered; want the connection closed without an answer", what)
	case errors.As(err, &ne) && ne.Timeout():
		w.t.Fatalf("%s: the connection stayed open; want it closed", what)
	}
}

// forwardedCount is how many requests the gateway has sent upstream for clients, succeeded or
// failed (its per-broker metrics).
func forwardedCount(t *testing.T, g *gateway) float64 {
	t.Helper()
	return metricSum(t, g, "coordinatord_gateway_forwarded_requests_total{", "coordinatord_gateway_forward_failures_total{")
}

// metricSum adds the values of coordinatord's series whose lines start with one of prefixes,
// read in one scrape.
func metricSum(t *testing.T, g *gateway, prefixes ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, line := range strings.Split(string(text), "\n") {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(line, p) }) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += v
	}
	return n
}

func assertNothingForwarded(t *testing.T, g *gateway, before float64, what string) {
	t.Helper()
	if after := forwardedCount(t, g); after != before {
		t.Fatalf("%s: %v requests went upstream, want none", what, after-before)
	}
}

// gatewayPorts returns coordinatord's address and each upstream node's gateway address, from
// a Metadata answer on coordinatord's port.
func gatewayPorts(t *testing.T, g *gateway) (self string, brokers map[int32]string) {
	t.Helper()
	c := dialWire(t, g.Addr)
	r, _ := c.roundTrip(kmsg.NewPtrMetadataRequest(), 12)
	brokers = map[int32]string{}
	for _, b := range r.(*kmsg.MetadataResponse).Brokers {
		if b.NodeID != nodeID {
			brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	if len(brokers) == 0 {
		t.Fatal("Metadata on coordinatord's port lists no upstream broker")
	}
	return g.Addr, brokers
}

func allPorts(t *testing.T, g *gateway) []string {
	self, brokers := gatewayPorts(t, g)
	out := []string{self}
	for _, a := range brokers {
		out = append(out, a)
	}
	return out
}

// assertNoUpstreamAddress fails when an answer's bytes carry the upstream's listener: its
// "host:port" text or its port as the int32 a broker entry holds.
func assertNoUpstreamAddress(t *testing.T, what string, body []byte) {
	t.Helper()
	_, portText, _ := net.SplitHostPort(upstreamAddr)
	port, _ := strconv.Atoi(portText)
	var portBytes [4]byte
	binary.BigEndian.PutUint32(portBytes[:], uint32(port))
	if bytes.Contains(body, []byte(upstreamAddr)) || bytes.Contains(body, portBytes[:]) {
		t.Fatalf("%s carries the upstream's address %s", what, upstreamAddr)
	}
}

// G1.1: Metadata at every version on every port lists each upstream broker at its gateway port
// and coordinatord at its own, and no answer carries the upstream's address.
func TestGateway_S1_MetadataEveryVersionEveryPort(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	self, brokers := gatewayPorts(t, g)
	want := map[int32]string{nodeID: self}
	for id, a := range brokers {
		want[id] = a
		if !g.isBrokerPort(a) {
			t.Fatalf("upstream node %d is listed at %s, outside the gateway's range", id, a)
		}
	}
	for _, port := range allPorts(t, g) {
		c := dialWire(t, port)
		for v := int16(0); v <= 13; v++ {
			req := kmsg.NewPtrMetadataRequest()
			if v == 0 {
				req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty means every topic
			}
			r, body := c.roundTrip(req, v)
			what := fmt.Sprintf("Metadata v%d on %s", v, port)
			assertNoUpstreamAddress(t, what, body)
			got := map[int32]string{}
			for _, b := range r.(*kmsg.MetadataResponse).Brokers {
				got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s lists brokers %v, want %v", what, got, want)
			}
		}
	}
}

// G1.2: DescribeCluster is rewritten as Metadata, lists coordinatord unfenced, and the
// upstream's error answer (MISMATCHED_ENDPOINT_TYPE) arrives as it came, with no brokers.
func TestGateway_S1_DescribeClusterRewrite(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	self, brokers := gatewayPorts(t, g)
	for _, port := range allPorts(t, g) {
		c := dialWire(t, port)
		for v := int16(0); v <= 2; v++ {
			for _, fenced := range []bool{false, true} {
				req := kmsg.NewPtrDescribeClusterRequest()
				req.IncludeFencedBrokers = fenced
				r, body := c.roundTrip(req, v)
				what := fmt.Sprintf("DescribeCluster v%d (fenced %v) on %s", v, fenced, port)
				assertNoUpstreamAddress(t, what, body)
				resp := r.(*kmsg.DescribeClusterResponse)
				if resp.ErrorCode != 0 {
					t.Fatalf("%s: %v", what, kerr.ErrorForCode(resp.ErrorCode))
				}
				got := map[int32]string{}
				for _, b := range resp.Brokers {
					got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
					if b.NodeID == nodeID && b.IsFenced {
						t.Fatalf("%s lists coordinatord as fenced", what)
					}
				}
				want := map[int32]string{nodeID: self}
				for id, a := range brokers {
					want[id] = a
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s lists brokers %v, want %v", what, got, want)
				}
			}
		}
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 2 // controllers: a broker listener refuses it
		r, _ := c.roundTrip(req, 1)
		resp := r.(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != kerr.MismatchedEndpointType.Code || len(resp.Brokers) != 0 {
			t.Fatalf("DescribeCluster EndpointType=2 on %s: error %v, brokers %+v; want MISMATCHED_ENDPOINT_TYPE and no brokers, as the upstream answers",
				port, kerr.ErrorForCode(resp.ErrorCode), resp.Brokers)
		}
	}
}

// G1.3: FindCoordinator for transactional ids is forwarded and answers the coordinator's
// gateway port, at every version, batched keys included.
func TestGateway_S1_FindTransactionCoordinator(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	_, brokers := gatewayPorts(t, g)
	c := dialWire(t, g.Addr)
	// The upstream answers COORDINATOR_NOT_AVAILABLE until __transaction_state exists.
	deadline := time.Now().Add(60 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorType = "e2e-warmup", 1
		r, _ := c.roundTrip(req, 3)
		if r.(*kmsg.FindCoordinatorResponse).ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no transaction coordinator within 60s: %v", kerr.ErrorForCode(r.(*kmsg.FindCoordinatorResponse).ErrorCode))
		}
		time.Sleep(200 * time.Millisecond)
	}
	check := func(what string, code int16, node int32, host string, port int32) {
		t.Helper()
		if code != 0 {
			t.Fatalf("%s: %v", what, kerr.ErrorForCode(code))
		}
		want, ok := brokers[node]
		if got := net.JoinHostPort(host, strconv.Itoa(int(port))); !ok || got != want {
			t.Fatalf("%s answers node %d at %s, want that node's gateway port %s", what, node, got, want)
		}
	}
	for v := int16(0); v <= 6; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1
		if v < 4 {
			req.CoordinatorKey = "e2e-txn"
		} else {
			req.CoordinatorKeys = []string{"e2e-txn", "e2e-txn-2", "e2e-txn-3"}
		}
		if v == 0 {
			continue // v0 has no key type: a group key, covered below
		}
		r, body := c.roundTrip(req, v)
		what := fmt.Sprintf("FindCoordinator TRANSACTION v%d", v)
		assertNoUpstreamAddress(t, what, body)
		resp := r.(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			check(what, resp.ErrorCode, resp.NodeID, resp.Host, resp.Port)
			continue
		}
		if len(resp.Coordinators) != 3 {
			t.Fatalf("%s: %d coordinators for 3 keys", what, len(resp.Coordinators))
		}
		for _, co := range resp.Coordinators {
			check(what+" key "+co.Key, co.ErrorCode, co.NodeID, co.Host, co.Port)
		}
	}
}

// G3.3: FindCoordinator for groups answers coordinatord on every port at every version, and
// batched keys are echoed as sent.
func TestGateway_S3_FindGroupCoordinatorEveryPort(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	host, portText, _ := net.SplitHostPort(g.Addr)
	port, _ := strconv.Atoi(portText)
	ports := allPorts(t, g)
	before := forwardedCount(t, g)
	defer assertNothingForwarded(t, g, before, "FindCoordinator GROUP")
	for _, addr := range ports {
		c := dialWire(t, addr)
		for v := int16(0); v <= 6; v++ {
			req := kmsg.NewPtrFindCoordinatorRequest()
			keys := []string{"grp-a", "", "grp-b"}
			if v < 4 {
				req.CoordinatorKey = "grp-a"
			} else {
				req.CoordinatorKeys = keys
			}
			r, _ := c.roundTrip(req, v)
			resp := r.(*kmsg.FindCoordinatorResponse)
			what := fmt.Sprintf("FindCoordinator GROUP v%d on %s", v, addr)
			if v < 4 {
				if resp.ErrorCode != 0 || resp.NodeID != nodeID || resp.Host != host || resp.Port != int32(port) {
					t.Fatalf("%s: %v node %d at %s:%d, want coordinatord (%d at %s)", what, kerr.ErrorForCode(resp.ErrorCode), resp.NodeID, resp.Host, resp.Port, nodeID, g.Addr)
				}
				continue
			}
			if len(resp.Coordinators) != len(keys) {
				t.Fatalf("%s: %d coordinators for %d keys", what, len(resp.Coordinators), len(keys))
			}
			for i, co := range resp.Coordinators {
				if co.Key != keys[i] || co.ErrorCode != 0 || co.NodeID != nodeID || co.Host != host || co.Port != int32(port) {
					t.Fatalf("%s: entry %d is %+v, want key %q answered by coordinatord", what, i, co, keys[i])
				}
			}
		}
	}
}

// G3.1: the group APIs answer the same on coordinatord's port and on a broker port (ListGroups
// aside: broker ports list nothing, see TestGateway_ListGroupsListsEachGroupOnce).
func TestGateway_S3_LocalAnswersIdenticalOnEveryPort(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ports := allPorts(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	topic := "gw-same-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	createTopic(t, ctx, cl, topic)
	group := "gw-same-group"
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = group, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 42
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	c := dialWire(t, g.Addr)
	if r, _ := c.roundTrip(commit, 9); r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode))
	}

	requests := []struct {
		req     func() kmsg.Request
		version int16
	}{
		{func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = group
			r.Groups = append(r.Groups, rg)
			return r
		}, 9},
		{func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{group, "gw-nope"}
			return r
		}, 5},
		{func() kmsg.Request {
			r := kmsg.NewPtrStreamsGroupDescribeRequest()
			r.Groups = []string{"gw-no-streams"}
			return r
		}, 0},
		{func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.Generation, r.MemberID = "gw-no-such-group", 1, "m"
			return r
		}, 4},
		{func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{"gw-no-such-group"}
			return r
		}, 2},
	}
	before := forwardedCount(t, g)
	defer assertNothingForwarded(t, g, before, "group APIs")
	for _, rq := range requests {
		var first []byte
		for i, addr := range ports {
			req := rq.req()
			_, body := dialWire(t, addr).roundTrip(req, rq.version)
			if i == 0 {
				first = body
				continue
			}
			if !bytes.Equal(body, first) {
				t.Fatalf("%s v%d answers differently on %s than on coordinatord's port %s", kmsg.NameForKey(req.Key()), rq.version, addr, ports[0])
			}
		}
	}
}

func createTopic(t *testing.T, ctx context.Context, cl interface {
	Request(context.Context, kmsg.Request) (kmsg.Response, error)
}, topic string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating %s: %v %v", topic, err, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
}

// neverServed are the keys a Kafka 4.4 broker listener never serves (spec gateway.md §2.1):
// ZooKeeper-era, controller and broker-to-controller APIs.
var neverServed = []int16{4, 5, 6, 7, 52, 53, 54, 56, 58, 59, 62, 63, 67, 70, 73, 82}

// G2.1, G2.2: no port advertises a key a client must never reach upstream (AddPartitionsToTxn
// only up to v3, no WriteTxnMarkers), and a client that sends a broker-only key anyway, or
// AddPartitionsToTxn v4, has its connection closed without an answer (docs/gateway.md), as a
// Kafka listener does for a key it does not serve: nothing is forwarded.
func TestGateway_S2_NeverForwardedKeys(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	hidden := append([]int16{27, 76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}, neverServed...)
	ports := allPorts(t, g)
	before := forwardedCount(t, g)
	defer assertNothingForwarded(t, g, before, "broker-only keys")
	for _, port := range ports {
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion = "e2e", "1.0"
		r, _ := dialWire(t, port).roundTrip(av, 4)
		keys := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range r.(*kmsg.ApiVersionsResponse).ApiKeys {
			keys[k.ApiKey] = k
		}
		for _, k := range hidden {
			if _, ok := keys[k]; ok {
				t.Fatalf("ApiVersions on %s advertises %s (%d), which a client must never reach upstream", port, kmsg.NameForKey(k), k)
			}
		}
		if k, ok := keys[24]; !ok || k.MaxVersion != 3 {
			t.Fatalf("ApiVersions on %s advertises AddPartitionsToTxn %+v, want max 3 (v4+ is broker-to-broker); keys %v", port, k, r.(*kmsg.ApiVersionsResponse).ApiKeys)
		}

		for _, k := range neverServed {
			c := dialWire(t, port)
			c.sendRaw(k, 0, false, []byte{0, 0, 0, 0})
			c.expectClosed(fmt.Sprintf("key %d on %s", k, port))
		}
		apt := kmsg.NewPtrAddPartitionsToTxnRequest()
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "e2e-tx", 1, 0, true
		apt.Transactions = append(apt.Transactions, tx)
		c := dialWire(t, port)
		c.send(apt, 4)
		c.expectClosed("AddPartitionsToTxn v4 on " + port)

	}
}

// G4.1: ApiVersions v0..v4 answers on every port; v5 (KIP-1242, not advertised) and v127 get
// the v0 fallback behind header v0 with only key 18 at the gateway's range, and the
// connection stays usable.
func TestGateway_S4_ApiVersionsEveryVersionAndTooNew(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	for _, port := range allPorts(t, g) {
		c := dialWire(t, port)
		for v := int16(0); v <= 4; v++ {
			req := kmsg.NewPtrApiVersionsRequest()
			req.ClientSoftwareName, req.ClientSoftwareVersion = "e2e", "1.0"
			r, _ := c.roundTrip(req, v)
			resp := r.(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != 0 || len(resp.ApiKeys) < 10 {
				t.Fatalf("ApiVersions v%d on %s: %v with %d keys", v, port, kerr.ErrorForCode(resp.ErrorCode), len(resp.ApiKeys))
			}
		}
		for _, v := range []int16{5, 127} {
			corr := c.sendRaw(18, v, true, []byte{4, 'e', '2', 'e', 4, '1', '.', '0', 0})
			got, body, err := c.readFrame(15 * time.Second)
			if err != nil || got != corr {
				t.Fatalf("ApiVersions v%d on %s: answer %d (want %d): %v", v, port, got, corr, err)
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.SetVersion(0)
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("ApiVersions v%d on %s: the answer is not a v0 body behind header v0: %v", v, port, err)
			}
			if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion != 4 {
				t.Fatalf("ApiVersions v%d on %s: %v %+v, want UNSUPPORTED_VERSION and only key 18 up to v4", v, port, kerr.ErrorForCode(resp.ErrorCode), resp.ApiKeys)
			}
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "e2e", "1.0"
		if r, _ := c.roundTrip(req, 3); r.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
			t.Fatalf("ApiVersions v3 after the fallback on %s: %v", port, kerr.ErrorForCode(r.(*kmsg.ApiVersionsResponse).ErrorCode))
		}
	}
}

// G4.3, G4.4: every port reports the upstream's finalized features (transaction.version
// above all, which decides how producers run transactions, capped at 1) with coordinatord's
// streams.version and group.version;
// v3 leaves out supported features whose minimum is 0, v4 lists them.
func TestGateway_S4_FeaturesAreTheUpstreamsWithCoordinatordsGroupFeatures(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	apiVersions := func(addr string, v int16) *kmsg.ApiVersionsResponse {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "e2e", "1.0"
		r, _ := dialWire(t, addr).roundTrip(req, v)
		return r.(*kmsg.ApiVersionsResponse)
	}
	finalized := func(r *kmsg.ApiVersionsResponse) map[string]int16 {
		out := map[string]int16{}
		for _, f := range r.FinalizedFeatures {
			out[f.Name] = f.MaxVersionLevel
		}
		return out
	}
	up := finalized(apiVersions(upstreamAddr, 4))
	for _, port := range allPorts(t, g) {
		resp := apiVersions(port, 4)
		got := finalized(resp)
		for name, level := range up {
			if name == "group.version" || name == "streams.version" {
				continue
			}
			if name == "transaction.version" {
				// Capped at 1: the marker relay is argued for version 1 (docs/transactions.md).
				level = min(level, 1)
			}
			if got[name] != level {
				t.Fatalf("ApiVersions v4 on %s finalizes %s at %d, the upstream at %d", port, name, got[name], level)
			}
		}
		if _, ok := up["transaction.version"]; !ok {
			t.Fatal("the upstream finalizes no transaction.version: the test cannot tell")
		}
		if got["streams.version"] != 1 {
			t.Fatalf("ApiVersions v4 on %s finalizes streams.version at %d, want coordinatord's 1 (the upstream's is %d)", port, got["streams.version"], up["streams.version"])
		}
		// coordinatord serves KIP-848 consumer groups itself, so group.version is its own, whatever
		// the upstream finalizes.
		if got["group.version"] != 1 {
			t.Fatalf("ApiVersions v4 on %s finalizes group.version at %d, want coordinatord's 1 (the upstream's is %d)", port, got["group.version"], up["group.version"])
		}
		zeroMin := 0
		for _, f := range resp.SupportedFeatures {
			if f.MinVersion == 0 {
				zeroMin++
			}
		}
		if zeroMin == 0 {
			t.Fatalf("ApiVersions v4 on %s lists no supported feature with minimum 0: %+v", port, resp.SupportedFeatures)
		}
		for _, f := range apiVersions(port, 3).SupportedFeatures {
			if f.MinVersion == 0 {
				t.Fatalf("ApiVersions v3 on %s lists %s with minimum 0; Kafka leaves those out below v4 (KAFKA-17011)", port, f.Name)
			}
		}
	}
}

// G5.1: pipelined on a broker port, a Fetch that waits upstream, a FindCoordinator answered by
// coordinatord and a forwarded Metadata come back in request order with their own ids.
func TestGateway_S5_PipelinedRequestsAnsweredInOrder(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	_, brokers := gatewayPorts(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := "gw-pipe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	createTopic(t, ctx, newClient(t, g.Addr), topic)
	for _, port := range brokers {
		c := dialWire(t, port)
		fetch := kmsg.NewPtrFetchRequest()
		fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 500, 1, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorKey = "gw-pipe-group"
		meta := kmsg.NewPtrMetadataRequest()

		ids := []int32{c.send(fetch, 11), c.send(find, 3), c.send(meta, 12)}
		fr := kmsg.NewPtrFetchResponse()
		c.recv(ids[0], fr, 11)
		if fr.ErrorCode != 0 || len(fr.Topics) != 1 {
			t.Fatalf("Fetch on %s: %v, %d topics", port, kerr.ErrorForCode(fr.ErrorCode), len(fr.Topics))
		}
		fc := kmsg.NewPtrFindCoordinatorResponse()
		c.recv(ids[1], fc, 3)
		if fc.NodeID != nodeID {
			t.Fatalf("FindCoordinator on %s answers node %d, want coordinatord", port, fc.NodeID)
		}
		c.recv(ids[2], kmsg.NewPtrMetadataResponse(), 12)
	}
}

// G5.2: a Produce with acks=0 gets no answer, yet does not hold up the next request: the
// Metadata after it is answered, and the record was written.
func TestGateway_S5_AcksZeroProduceThenMetadata(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	_, brokers := gatewayPorts(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	topic := "gw-acks0-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	createTopic(t, ctx, cl, topic)
	var leader int32 = -1
	for leader < 0 && ctx.Err() == nil {
		for _, mt := range metadata(t, ctx, cl).Topics {
			if mt.Topic != nil && *mt.Topic == topic && len(mt.Partitions) == 1 {
				leader = mt.Partitions[0].Leader
			}
		}
	}
	c := dialWire(t, brokers[leader])
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis = 0, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = oneRecordBatch([]byte("fire-and-forget"))
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	c.send(produce, 9)
	corr := c.send(kmsg.NewPtrMetadataRequest(), 12)
	c.recv(corr, kmsg.NewPtrMetadataResponse(), 12) // an answer to the Produce would have the wrong id

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1 // latest
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	for {
		r, _ := c.roundTrip(lo, 7)
		p := r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode == 0 && p.Offset == 1 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the acks=0 record was not written: %v, high watermark %d", kerr.ErrorForCode(p.ErrorCode), p.Offset)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// oneRecordBatch is a v2 record batch holding one record with value v.
func oneRecordBatch(v []byte) []byte {
	rec := kmsg.Record{Value: v}
	body := rec.AppendTo(nil)
	rec.Length = int32(len(body) - 1) // the zero length took one byte
	raw := rec.AppendTo(nil)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: raw,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// G6.1: an OffsetCommit v10 names the topic by the upstream's id, as Streams and KIP-848
// clients do; OffsetFetch v10 gives the same id and offset back, and v9 by name agrees.
func TestGateway_S6_CommitByUpstreamTopicID(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := "gw-ids-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	createTopic(t, ctx, newClient(t, g.Addr), topic)
	var id [16]byte
	for _, mt := range metadata(t, ctx, newClient(t, upstreamAddr)).Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			id = mt.TopicID
		}
	}
	if id == ([16]byte{}) {
		t.Fatalf("the upstream has no id for %s", topic)
	}
	c := dialWire(t, g.Addr)
	group := "gw-ids-group"
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = group, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.TopicID = id
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 17
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	r, _ := c.roundTrip(commit, 10)
	if code := r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("OffsetCommit v10 by the upstream's topic id: %v", kerr.ErrorForCode(code))
	}
	fetch := func(v int16) (string, [16]byte, int64) {
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.TopicID, rt.Partitions = topic, id, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		r, _ := c.roundTrip(req, v)
		grp := r.(*kmsg.OffsetFetchResponse).Groups[0]
		if grp.ErrorCode != 0 || len(grp.Topics) != 1 || grp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("OffsetFetch v%d: %+v", v, grp)
		}
		return grp.Topics[0].Topic, grp.Topics[0].TopicID, grp.Topics[0].Partitions[0].Offset
	}
	if _, gotID, off := fetch(10); gotID != id || off != 17 {
		t.Fatalf("OffsetFetch v10 gives id %x offset %d, want %x and 17", gotID, off, id)
	}
	if name, _, off := fetch(9); name != topic || off != 17 {
		t.Fatalf("OffsetFetch v9 gives %s offset %d, want %s and 17", name, off, topic)
	}
}

// A forwarded Fetch answer counts against queued.max.request.bytes before it is read into
// memory. One that could never fit closes the client's connection (rather than being allocated
// and then waiting forever for room); a consumer whose fetch.max.bytes fits the budget reads
// every record through the same gateway.
func TestGateway_S5_FetchAnswerBoundedByQueuedMaxRequestBytes(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t, "socket.request.max.bytes=1048576", "queued.max.request.bytes=2097152")
	_, brokers := gatewayPorts(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr, kgo.ProducerBatchCompression(kgo.NoCompression())) // the answer must be as large as the records
	topic := "gw-budget-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	createTopic(t, ctx, cl, topic)
	const records, size = 3, 900 << 10
	for i := 0; i < records; i++ {
		value := bytes.Repeat([]byte{byte('a' + i)}, size)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatalf("producing record %d: %v", i, err)
		}
	}
	var leader int32 = -1
	for _, mt := range metadata(t, ctx, cl).Topics {
		if mt.Topic != nil && *mt.Topic == topic && len(mt.Partitions) == 1 {
			leader = mt.Partitions[0].Leader
		}
	}
	if brokers[leader] == "" {
		t.Fatalf("no gateway port for the leader %d of %s", leader, topic)
	}

	// All three records in one answer: about 2.7 MiB, more than the 2 MiB budget.
	c := dialWire(t, brokers[leader])
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 100, 1, 16<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 16 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	c.send(fetch, 12)
	c.expectClosed("a Fetch answer larger than queued.max.request.bytes")

	consumer := newClient(t, g.Addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(1<<20))
	got := 0
	for got < records {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, records, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != size || r.Value[0] != byte('a'+got) {
				t.Fatalf("record %d: %d bytes starting %q", got, len(r.Value), r.Value[:1])
			}
			got++
		})
	}
}
