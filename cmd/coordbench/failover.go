package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
)

// failoverTarget is coordinatord on log.backend=kafka as two nodes sharing one shard on a Kafka
// broker of its own, so that every offset is in the shard that fails over. The first node owns
// it; stop kills the owner with SIGKILL after making sure a standby node is a member; restart
// hands back the standby's address, which serves once the killed node is out of the upstream
// group and the standby has loaded the shard (fence, load marker, replay of the partition). The
// standby's peer probes (log.kafka.peer.probe.interval.ms, 250 ms by default) find the killed
// node's port refused and remove it; without them (a coordinatord before them, or the probes
// off) the upstream drops it after log.kafka.session.timeout.ms, 6 s here: the broker's
// group.min.session.timeout.ms.
type failoverTarget struct {
	bin, work string
	upstream  *kafkaRestart
	log       io.Writer
	addr      string // the upstream broker
	owner     *failoverNode
	standby   *failoverNode
	next      int // node.id of the next node
	killed    time.Time
	// assigned: per round, from the kill until the standby's FindCoordinator names it (the
	// upstream dropped the killed node and the new generation gave the standby the shard).
	assigned []time.Duration
}

type failoverNode struct {
	id   int32
	addr string
	pid  int
	stop func()
}

const failoverSessionMs = 6000

func (f *failoverTarget) name() string { return "coordinatord-kafka-failover" }

func (f *failoverTarget) start(ctx context.Context) (string, int, error) {
	addr, _, err := f.upstream.start(ctx)
	if err != nil {
		return "", 0, err
	}
	f.addr, f.next = addr, 1001
	if f.owner, err = f.node(ctx); err != nil {
		return "", 0, err
	}
	if f.standby, err = f.node(ctx); err != nil {
		return "", 0, err
	}
	return f.owner.addr, f.owner.pid, nil
}

// node starts one more node and waits until it is ready: a member with its lease, every shard
// it owns loaded (none for a standby).
func (f *failoverTarget) node(ctx context.Context) (*failoverNode, error) {
	base, err := freePortRange(11)
	if err != nil {
		return nil, err
	}
	id := f.next
	f.next++
	sets := []string{
		"listeners=PLAINTEXT://127.0.0.1:" + strconv.Itoa(base),
		"node.id=" + strconv.Itoa(id),
		"upstream.bootstrap.servers=" + f.addr,
		fmt.Sprintf("gateway.broker.port.range=%d-%d", base+1, base+10),
		"log.backend=kafka", "cluster.id=coordbench-failover", "log.kafka.topic=coordbench-failover-state",
		"offsets.topic.num.partitions=1", "offsets.topic.replication.factor=1", "log.kafka.min.insync.replicas=1",
		"log.kafka.session.timeout.ms=" + strconv.Itoa(failoverSessionMs), "log.kafka.heartbeat.interval.ms=1000",
		"log.kafka.rebalance.timeout.ms=20000",
	}
	name := "node-" + strconv.Itoa(id)
	t, stop, err := startCoordinatordWith(ctx, f.bin, filepath.Join(f.work, name), f.log, name, sets)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f.log, "restart: %s: node %d at %s (pid %d)\n", f.name(), id, t.Addr, t.PID)
	return &failoverNode{id: int32(id), addr: t.Addr, pid: t.PID, stop: stop}, nil
}

// stop kills the owner (SIGKILL: no leave, no close), after starting a standby if the previous
// round used it up.
func (f *failoverTarget) stop() error {
	if f.owner == nil {
		return nil
	}
	if f.standby == nil {
		n, err := f.node(context.Background())
		if err != nil {
			return err
		}
		f.standby = n
	}
	if err := syscall.Kill(f.owner.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	f.killed = time.Now()
	f.owner.stop() // reaps it
	f.owner, f.standby = f.standby, nil
	return nil
}

// restart waits until the new owner's FindCoordinator names it, and hands back its address:
// the time to serving every sampled offset is measured from there on by the caller.
func (f *failoverTarget) restart(ctx context.Context) (string, int, error) {
	if f.owner == nil {
		return "", 0, errors.New("fail-over: no node left")
	}
	c, err := kconn.Dial(ctx, f.owner.addr, "coordbench-failover")
	if err != nil {
		return "", 0, err
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = restartGroup(0), []string{restartGroup(0)}
		resp, err := c.Request(ctx, req)
		if err != nil {
			return "", 0, err
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		if len(r.Coordinators) > 0 && r.Coordinators[0].ErrorCode == 0 && r.Coordinators[0].NodeID == f.owner.id {
			f.assigned = append(f.assigned, time.Since(f.killed))
			return f.owner.addr, f.owner.pid, nil
		}
		if time.Now().After(deadline) {
			return "", 0, errors.New("fail-over: the standby was not given the shard within 2 minutes of the kill")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// note splits each round's fail-over into the wait for the new assignment and the load, and
// gives the load rate of the shard.
func (f *failoverTarget) note(r restartResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s: kill -9 of the owner of the one shard holding all %d offsets (log.kafka.session.timeout.ms=%d);", r.target, r.offsets, failoverSessionMs)
	for i, total := range r.restartSeconds {
		if i >= len(f.assigned) {
			break
		}
		a := f.assigned[i].Seconds()
		load := total - a
		fmt.Fprintf(&b, " round %d: new assignment after %.2f s, then serving every sampled offset after %.2f s more (%.0fk offsets/s loaded);",
			i+1, a, load, float64(r.offsets)/load/1e3)
	}
	return strings.TrimSuffix(b.String(), ";") + "\n"
}

// close stops every node and the broker.
func (f *failoverTarget) close() {
	for _, n := range []*failoverNode{f.owner, f.standby} {
		if n != nil {
			n.stop()
		}
	}
	f.owner, f.standby = nil, nil
	f.upstream.stop()
}
