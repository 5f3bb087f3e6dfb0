package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkHeartbeatsBesideHungPlugin measures what issue #7 asks: a topology description
// plugin that takes 60 s per call must not raise the p99 of other groups' heartbeats. Eight
// members of group "live" heartbeat back to back, each on its own connection, while (in the
// hung variant) eight members of group "hang" each have a push stuck in an http plugin whose
// server sleeps 60 s. Both groups share the only shard. Compare p99-us between the variants:
//
//	go test -run '^$' -bench HeartbeatsBesideHungPlugin -benchtime 20000x ./test/integration
func BenchmarkHeartbeatsBesideHungPlugin(b *testing.B) {
	for _, hung := range []bool{false, true} {
		name := "plugin-idle"
		if hung {
			name = "plugin-hung-60s"
		}
		b.Run(name, func(b *testing.B) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPut {
					select {
					case <-release:
					case <-time.After(60 * time.Second):
					}
				}
				w.WriteHeader(http.StatusNotFound)
			}))
			defer srv.Close()
			defer close(release)
			d := startPlainDaemon(b, "offsets.topic.num.partitions=1", "group.streams.initial.rebalance.delay.ms=0",
				topoPluginKey+"class=http", topoPluginKey+"http.url="+srv.URL, topoPluginKey+"http.retries=0",
				topoPluginKey+"call.timeout.ms=60000", topoPluginKey+"http.request.timeout.ms=60000")
			createStreamsTopics(b, d.Addr, 8, "live-in-0", "hang-in-0")

			const members = 8
			if hung {
				stuck := make(chan struct{}, members)
				for i := 0; i < members; i++ {
					c, id, _ := benchJoin(b, d.Addr, "hang", i)
					go func() {
						req := kmsg.NewPtrStreamsGroupTopologyDescriptionUpdateRequest()
						req.Group, req.MemberID, req.TopologyEpoch, req.TopologyDescription = "hang", id, 0, sampleDescription("hang")
						c.write(frame(req, 0, 99, nil, nil))
						stuck <- struct{}{}
						c.readFrame() // answered only when the plugin gives up or the benchmark ends
					}()
				}
				for i := 0; i < members; i++ {
					<-stuck
				}
				time.Sleep(200 * time.Millisecond) // let the pushes reach the plugin
			}

			conns := make([]*rawConn, members)
			ids := make([]string, members)
			epochs := make([]int32, members)
			for i := range conns {
				conns[i], ids[i], epochs[i] = benchJoin(b, d.Addr, "live", i)
			}
			lat := make([][]time.Duration, members)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < members; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					for n := i; n < b.N; n += members {
						req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
						req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "live", ids[i], epochs[i], -1
						t0 := time.Now()
						conns[i].write(frame(req, 1, int32(n), nil, nil))
						resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
						conns[i].read(resp, 1, int32(n))
						lat[i] = append(lat[i], time.Since(t0))
						if resp.ErrorCode != 0 {
							b.Errorf("heartbeat: %d", resp.ErrorCode)
							return
						}
						epochs[i] = resp.MemberEpoch
					}
				}(i)
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-us")
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-us")
			}
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "heartbeats/s")
		})
	}
}

// benchJoin joins member i of group on its own connection and returns the connection, the
// member id and its epoch.
func benchJoin(b *testing.B, addr, group string, i int) (*rawConn, string, int32) {
	c := dialRaw(b, addr)
	id := fmt.Sprintf("%s-m%d", group, i)
	r := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.Topology = group, id, 1000, streamsTopology(group+"-in", 1)()
	r.ActiveTasks, r.StandbyTasks, r.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	c.write(frame(r, 1, 1, nil, nil))
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	c.read(resp, 1, 1)
	if resp.ErrorCode != 0 {
		b.Fatalf("join %s: %d %v", id, resp.ErrorCode, resp.ErrorMessage)
	}
	return c, id, resp.MemberEpoch
}
