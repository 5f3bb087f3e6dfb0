package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
)

// The restart measurement runs against the real daemon: offsets committed before a graceful
// stop read back after the start, and a read-back that differs from what was committed is an
// error, not a slower restart.
func TestRestartReadsBackWhatWasCommitted(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "coordinatord")
	build := exec.Command("go", "build", "-o", bin, "./cmd/coordinatord")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building coordinatord: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &restartFlags{groups: 40, partitions: 4, clients: 3, rounds: 2, sample: 10, traffic: time.Second, trafficClients: 2}
	target := &coordRestart{bin: bin, data: filepath.Join(dir, "data"), log: io.Discard}
	defer target.stop()
	r, err := measureRestart(ctx, target, f, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.restartSeconds) != 2 || r.offsets != 160 || r.rssFul == 0 {
		t.Fatalf("result %+v: want two timed restarts of 160 offsets and a resident size", r)
	}
	if r.rssTraffic == 0 || r.trafficRate <= 0 {
		t.Fatalf("result %+v: want commits in the traffic window and a resident size after it", r)
	}
	if table := restartTable([]restartResult{r}, f); !strings.Contains(table, "| coordinatord | 160 |") || !strings.Contains(table, "of offset-commit (2 clients)") {
		t.Fatalf("table:\n%s", table)
	}

	addr, _, err := target.restart(ctx)
	if err == nil {
		t.Fatal("a second start on the running daemon's data succeeded")
	}
	addr, _, err = func() (string, int, error) { target.stop(); return target.restart(ctx) }()
	if err != nil {
		t.Fatal(err)
	}
	if err := waitServed(ctx, addr, "coordbench-restart", f); err != nil {
		t.Fatal(err)
	}
	conn, err := kconn.Dial(ctx, addr, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = restartGroup(7), -1
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = "coordbench-restart"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = 2, 5
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	if resp, err := conn.RequestCapped(ctx, req, 9); err != nil || resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("changing one offset: %v %+v", err, resp)
	}
	if _, err := servesGroup(ctx, conn, "coordbench-restart", 7, f.partitions); err == nil || !strings.Contains(err.Error(), "read back offset 5") {
		t.Fatalf("a changed offset read back as %v, want an error naming it", err)
	}
}
