package integration

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

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
