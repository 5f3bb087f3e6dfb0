package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 10 defect 3: what one request can make the server do is bounded before work starts.

// scrapeGauge reads one unlabelled series from /metrics; ok=false on any failure, so that it
// can run off the test goroutine.
func scrapeGauge(admin, name string) (float64, bool) {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// A WriteTxnMarkers naming 100 000 __consumer_offsets partitions is one shard write per shard,
// run by a few goroutines: it does not start a goroutine per partition entry. The goroutine
// gauge is sampled throughout the request; every entry still gets its answer.
func TestWriteTxnMarkersFanOutIsBounded(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	assertServing(t, d)
	base, ok := scrapeGauge(d.Admin, "go_goroutines")
	if !ok {
		t.Fatal("/metrics has no go_goroutines")
	}

	const entries = 100_000
	parts := make([]int32, entries)
	for i := range parts {
		parts[i] = int32(i % 50)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 4242, 0, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "__consumer_offsets", parts
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)

	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if v, ok := scrapeGauge(d.Admin, "go_goroutines"); ok && int64(v) > peak.Load() {
				peak.Store(int64(v))
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	// The sampler has seen the idle server at least once before the request goes out.
	waitFor(t, "a first goroutine sample", func() bool { return peak.Load() > 0 })

	// One request: the old code (a goroutine per entry) kept it in flight for seconds with
	// thousands of goroutines sampled; more at once only made it time out.
	const conns = 1
	answers := make([]*kmsg.WriteTxnMarkersResponse, conns)
	var reqs sync.WaitGroup
	for i := range conns {
		c := dialRaw(t, d.Addr)
		c.write(frame(req, 1, int32(i+1), strp("txn-coordinator"), nil))
		reqs.Go(func() {
			resp := kmsg.NewPtrWriteTxnMarkersResponse()
			c.read(resp, 1, int32(i+1))
			answers[i] = resp
		})
	}
	reqs.Wait()
	close(stop)
	wg.Wait()

	for i, resp := range answers {
		if resp == nil || len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 {
			t.Fatalf("connection %d: malformed answer", i)
		}
		got := resp.Markers[0].Topics[0].Partitions
		if len(got) != entries {
			t.Fatalf("connection %d: %d partitions answered, want %d", i, len(got), entries)
		}
		for j, p := range got {
			if p.Partition != parts[j] || p.ErrorCode != 0 {
				t.Fatalf("connection %d entry %d: partition %d code %s", i, j, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	// Each request may use a bounded worker pool; 100 000 entries must not show up here.
	if grown := peak.Load() - int64(base); grown > 500 {
		t.Fatalf("goroutines grew by %d during %d WriteTxnMarkers of %d entries each", grown, conns, entries)
	}
	t.Logf("goroutines: %v at rest, peak %d", base, peak.Load())
}

// Many connections each send a large valid request while the process-wide
// queued.max.request.bytes holds only a few of them: the server reads what fits and leaves
// the rest in the sockets (RSS stays near the budget, not near the sum of the frames), closes
// nobody, and answers every request once the bytes arrive. Every frame is sent but for its last
// byte first, so that each one the server has started to read stays in its memory.
func TestQueuedRequestBytesBoundMemoryWithoutDroppingAnyone(t *testing.T) {
	t.Parallel()
	const (
		conns     = 100
		frameSize = 4 << 20
		budget    = 32 << 20
	)
	d := startPlainDaemon(t, fmt.Sprintf("queued.max.request.bytes=%d", budget), fmt.Sprintf("socket.request.max.bytes=%d", frameSize))
	assertServing(t, d)
	before := d.rssBytes()

	// FindCoordinator v3 whose group key fills the frame: valid, and cheap to answer.
	req := kmsg.NewPtrFindCoordinatorRequest()
	probe := frame(req, 3, 0, strp("c"), nil)
	req.CoordinatorKey = strings.Repeat("g", frameSize-len(probe)+1) // +1: its length prefix grows from 1 to 4 bytes
	frames := make([][]byte, conns)
	for i := range frames {
		frames[i] = frame(req, 3, int32(i+1), strp("c"), nil)
		if len(frames[i]) != frameSize+4 {
			t.Fatalf("frame of %d bytes, want %d", len(frames[i]), frameSize+4)
		}
	}

	finish := make(chan struct{})
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		nc, err := net.DialTimeout("tcp", d.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		wg.Go(func() {
			nc.SetDeadline(time.Now().Add(2 * time.Minute))
			f := frames[i]
			if _, err := nc.Write(f[:len(f)-1]); err != nil {
				errs <- fmt.Errorf("connection %d: writing: %v", i, err)
				return
			}
			<-finish
			if _, err := nc.Write(f[len(f)-1:]); err != nil {
				errs <- fmt.Errorf("connection %d: writing the last byte: %v", i, err)
				return
			}
			var size [4]byte
			_, err := io.ReadFull(nc, size[:])
			b := make([]byte, int(size[0])<<24|int(size[1])<<16|int(size[2])<<8|int(size[3]))
			if err == nil {
				_, err = io.ReadFull(nc, b)
			}
			if err != nil {
				errs <- fmt.Errorf("connection %d was not answered: %v", i, err)
				return
			}
			resp := kmsg.NewPtrFindCoordinatorResponse()
			resp.SetVersion(3)
			if corr := int32(b[0])<<24 | int32(b[1])<<16 | int32(b[2])<<8 | int32(b[3]); corr != int32(i+1) {
				errs <- fmt.Errorf("connection %d: correlation id %d", i, corr)
			} else if err := resp.ReadFrom(b[5:]); err != nil || resp.ErrorCode != 0 {
				errs <- fmt.Errorf("connection %d: answer %v, error code %d", i, err, resp.ErrorCode)
			}
		})
	}
	// Settled: either the server has read (nearly) every frame, as it did without a budget, or
	// the connections that do not fit are waiting for it.
	received := float64(conns * (frameSize + 3))
	waitFor(t, "the server to read what it will read", func() bool {
		if w, ok := scrapeGauge(d.Admin, "coordinatord_connections_waiting_for_budget"); ok && w == conns-budget/frameSize {
			return true
		}
		r, _ := scrapeGauge(d.Admin, "coordinatord_bytes_received_total")
		return r >= received
	})
	time.Sleep(200 * time.Millisecond) // let the reading connections reach their last byte
	grown := d.rssBytes() - before
	t.Logf("RSS grew by %d MiB with %d frames of %d MiB against a %d MiB budget", grown>>20, conns, frameSize>>20, budget>>20)
	if limit := int64(3 * budget); grown > limit {
		t.Errorf("RSS grew by %d MiB, more than %d MiB (3 × queued.max.request.bytes) for %d MiB of requests", grown>>20, limit>>20, conns*frameSize>>20)
	}
	if q, ok := scrapeGauge(d.Admin, "coordinatord_queued_request_bytes"); !ok || q > budget {
		t.Errorf("coordinatord_queued_request_bytes %v (ok %v) with a budget of %d", q, ok, budget)
	}
	d.waitLogged("queued.max.request.bytes exhausted: connections wait before reading their next request", func(l map[string]any) bool {
		return l["queued_max_request_bytes"] == float64(budget)
	})

	start := time.Now()
	close(finish)
	wg.Wait()
	t.Logf("all answered %v after the last bytes were sent", time.Since(start))
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitFor(t, "the budget to drain", func() bool {
		q, ok1 := scrapeGauge(d.Admin, "coordinatord_queued_request_bytes")
		w, ok2 := scrapeGauge(d.Admin, "coordinatord_connections_waiting_for_budget")
		return ok1 && ok2 && q == 0 && w == 0
	})
	assertServing(t, d)
}

// A small request can ask for a large answer: DescribeGroups naming one group with a large
// member 2 000 times would need 2 000 copies of its metadata on the wire. The answer's bytes
// count against queued.max.request.bytes before its buffer is allocated; one that could never
// fit closes the connection (WARN "closing connection" naming the API) instead of growing the
// process by the size of the answer. Other connections are served throughout.
func TestOversizedAnswerIsRefusedBeforeItIsBuilt(t *testing.T) {
	t.Parallel()
	const (
		budget  = 64 << 20
		meta    = 256 << 10
		repeats = 2000 // 500 MiB of answer from a 10 KiB request
	)
	d := startPlainDaemon(t, fmt.Sprintf("queued.max.request.bytes=%d", budget), "socket.request.max.bytes=1048576", "group.initial.rebalance.delay.ms=0")
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "big", 30000, 30000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", make([]byte, meta)
	join.Protocols = append(join.Protocols, p)
	joined := call(t, d, join, 3).(*kmsg.JoinGroupResponse)
	if joined.ErrorCode != 0 {
		t.Fatalf("join: %s", kerr.ErrorForCode(joined.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = "big", joined.Generation, joined.MemberID
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = joined.MemberID, []byte{0, 0, 0, 0, 0, 0, 0, 0}
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	if synced := call(t, d, sync, 2).(*kmsg.SyncGroupResponse); synced.ErrorCode != 0 {
		t.Fatalf("sync: %s", kerr.ErrorForCode(synced.ErrorCode))
	}
	// One describe is answered in full: the large member is described with its metadata.
	one := kmsg.NewPtrDescribeGroupsRequest()
	one.Groups = []string{"big"}
	described := call(t, d, one, 4).(*kmsg.DescribeGroupsResponse)
	if len(described.Groups) != 1 || len(described.Groups[0].Members) != 1 || len(described.Groups[0].Members[0].ProtocolMetadata) != meta {
		t.Fatal("the group is not described with its member's metadata")
	}

	assertServing(t, d)
	before := d.rssBytes()
	many := kmsg.NewPtrDescribeGroupsRequest()
	for range repeats {
		many.Groups = append(many.Groups, "big")
	}
	c := dialRaw(t, d.Addr)
	local := c.nc.LocalAddr().String()
	c.write(frame(many, 4, 7, strp("c"), nil))
	c.expectClosed()
	d.waitLogged("closing connection", func(l map[string]any) bool {
		return l["peer"] == local && strings.Contains(l["reason"].(string), "DescribeGroups answer would exceed queued.max.request.bytes")
	})
	grown := d.rssBytes() - before
	t.Logf("RSS grew by %d MiB for a %d MiB answer", grown>>20, repeats*meta>>20)
	if grown > budget {
		t.Fatalf("RSS grew by %d MiB for an answer that was refused", grown>>20)
	}
	assertServing(t, d)
}

// A group named many times in one DescribeGroups is described once: every repeat is answered
// (the same description), but the server does not build a copy of the group's members per
// repeat, which for an answer too large to send would cost memory before it is refused.
func TestDescribeGroupsRepeatsCostOneDescription(t *testing.T) {
	t.Parallel()
	const members = 200
	d := startPlainDaemon(t, "queued.max.request.bytes=67108864", "socket.request.max.bytes=1048576", "group.initial.rebalance.delay.ms=2000")
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "wide", 60000, 60000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 1}
	join.Protocols = append(join.Protocols, p)
	conns := make([]*rawConn, members)
	for i := range conns {
		conns[i] = dialRaw(t, d.Addr)
		conns[i].write(frame(join, 3, int32(i), strp(fmt.Sprintf("client-%d", i)), nil))
	}
	for i, c := range conns {
		resp := kmsg.NewPtrJoinGroupResponse()
		c.read(resp, 3, int32(i))
		if resp.ErrorCode != 0 {
			t.Fatalf("member %d: join %s", i, kerr.ErrorForCode(resp.ErrorCode))
		}
	}

	// Repeats that fit are all answered with the whole group.
	some := kmsg.NewPtrDescribeGroupsRequest()
	for range 50 {
		some.Groups = append(some.Groups, "wide")
	}
	described := call(t, d, some, 4).(*kmsg.DescribeGroupsResponse)
	if len(described.Groups) != 50 {
		t.Fatalf("%d answers for 50 repeats", len(described.Groups))
	}
	for i, g := range described.Groups {
		if g.Group != "wide" || g.ErrorCode != 0 || len(g.Members) != members {
			t.Fatalf("answer %d: group %q code %d, %d members", i, g.Group, g.ErrorCode, len(g.Members))
		}
	}

	// 20 000 repeats: 4 million member entries, far beyond the budget. The connection is
	// closed, and the server did not build them first.
	before := d.rssBytes()
	many := kmsg.NewPtrDescribeGroupsRequest()
	for range 20_000 {
		many.Groups = append(many.Groups, "wide")
	}
	c := dialRaw(t, d.Addr)
	c.write(frame(many, 4, 9, strp("c"), nil))
	c.expectClosed()
	grown := d.rssBytes() - before
	t.Logf("RSS grew by %d MiB describing a %d-member group %d times", grown>>20, members, len(many.Groups))
	if grown > 64<<20 {
		t.Fatalf("RSS grew by %d MiB for an answer that was refused", grown>>20)
	}
	assertServing(t, d)
}

// OffsetFetch v8 asking for all of one group's offsets several times in one request: every
// repeat is answered in full (the server builds the answer once), and a repeat with explicit
// topics is answered on its own.
func TestOffsetFetchRepeatedAllTopicsGroup(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 3)
	var offs kadm.Offsets
	for p := int32(0); p < 3; p++ {
		offs.Add(kadm.Offset{Topic: "t", Partition: p, At: int64(10 + p), LeaderEpoch: -1})
	}
	if committed, err := adm.CommitOffsets(ctxT(t), "rep", offs); err != nil || committed.Error() != nil {
		t.Fatalf("commit: %v %v", err, committed.Error())
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	for i := range 4 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "rep"
		if i == 2 {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = "t", []int32{1}
			g.Topics = append(g.Topics, rt)
		}
		req.Groups = append(req.Groups, g)
	}
	resp := call(t, d, req, 8).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 4 {
		t.Fatalf("%d answers for 4 groups", len(resp.Groups))
	}
	for i, g := range resp.Groups {
		want := 3
		if i == 2 {
			want = 1
		}
		n := 0
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 || p.Offset != int64(10+p.Partition) {
					t.Fatalf("answer %d: t/%d offset %d code %d", i, p.Partition, p.Offset, p.ErrorCode)
				}
				n++
			}
		}
		if g.Group != "rep" || g.ErrorCode != 0 || n != want {
			t.Fatalf("answer %d: group %q code %d, %d partitions, want %d", i, g.Group, g.ErrorCode, n, want)
		}
	}
}

// A flood of connections beyond max.connections is counted in full but logged at most once per
// window (with the number closed since the last line), so it cannot flood the log.
func TestMaxConnectionsRejectionsAreLoggedRateLimited(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "max.connections=2")
	for i := range 2 {
		c := dialRaw(t, d.Addr)
		c.write(frame(kmsg.NewPtrApiVersionsRequest(), 0, int32(i), strp("c"), nil))
		c.read(kmsg.NewPtrApiVersionsResponse(), 0, int32(i))
	}
	const flood = 30
	for range flood {
		dialRaw(t, d.Addr).expectClosed()
	}
	if got, ok := scrapeGauge(d.Admin, "coordinatord_connections_rejected_total"); !ok || got != flood {
		t.Fatalf("coordinatord_connections_rejected_total %v, want %d", got, flood)
	}
	d.waitLogged("closing connection: max.connections reached", nil)
	// The window is 10 s: a slow run may cross one boundary, never thirty.
	if n := len(d.logged("closing connection: max.connections reached")); n > 2 {
		t.Fatalf("%d WARN lines for %d rejected connections", n, flood)
	}
}

// A partition is only a count in the catalog, but every Metadata answer lists each one: one
// CreateTopics or CreatePartitions may add at most 10 000 partitions, as Kafka's controller
// allows, and a request above that fails as a whole with POLICY_VIOLATION.
func TestPartitionsAddedPerRequestAreBounded(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	create := func(counts ...int32) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		for i, n := range counts {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("p%d-%d", len(counts), i), n, 1
			req.Topics = append(req.Topics, rt)
		}
		return call(t, d, req, 7).(*kmsg.CreateTopicsResponse)
	}
	for _, counts := range [][]int32{{2147483647}, {10_000, 1}} {
		resp := create(counts...)
		for _, st := range resp.Topics {
			if st.ErrorCode != kerr.PolicyViolation.Code || st.ErrorMessage == nil {
				t.Fatalf("%v partitions: topic %s got %v", counts, st.Topic, kerr.ErrorForCode(st.ErrorCode))
			}
		}
	}
	for _, st := range create(5_000, 5_000).Topics {
		if st.ErrorCode != 0 {
			t.Fatalf("10 000 partitions in one request refused: %s %v", st.Topic, kerr.ErrorForCode(st.ErrorCode))
		}
	}
	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.TimeoutMillis = 5000
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "p2-0", 5_000+10_001
	grow.Topics = append(grow.Topics, gt)
	if got := call(t, d, grow, 3).(*kmsg.CreatePartitionsResponse); len(got.Topics) != 1 || got.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("adding 10 001 partitions: %+v", got.Topics)
	}
	md := kmsg.NewPtrMetadataRequest()
	answered := call(t, d, md, 12).(*kmsg.MetadataResponse)
	total := 0
	for _, mt := range answered.Topics {
		total += len(mt.Partitions)
	}
	if total != 10_000 {
		t.Fatalf("Metadata lists %d partitions, want the 10 000 created", total)
	}
}
