package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848 consumer groups driven by franz-go's next-gen consumer (kgo.ServerSideBalancer):
// coordinatord computes the assignment, the members reconcile through ConsumerGroupHeartbeat.

// consumerKeys make the protocol fast enough for a test: short heartbeats, a short session.
var consumerKeys = []string{
	"group.consumer.min.heartbeat.interval.ms=100", "group.consumer.heartbeat.interval.ms=200",
	"group.consumer.min.session.timeout.ms=1000", "group.consumer.session.timeout.ms=8000",
}

// ownership records which member holds each partition, as the members' callbacks report it,
// under one lock so that a hand-over is seen in the order it happened: a partition assigned to
// a member while another still holds it is a violation.
type ownership struct {
	mu         sync.Mutex
	owner      map[int32]int
	violations []string
}

func (o *ownership) update(member int, parts []int32, add bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range parts {
		cur, held := o.owner[p]
		switch {
		case add && held && cur != member:
			o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to member %d while member %d holds it", p, member, cur))
			o.owner[p] = member
		case add:
			o.owner[p] = member
		case held && cur == member:
			delete(o.owner, p)
		}
	}
}

func (o *ownership) of(member int) []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int32
	for p, m := range o.owner {
		if m == member {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (o *ownership) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.violations) > 0 {
		t.Fatalf("a partition was held by two members at once: %v", o.violations)
	}
}

type nextGenMember struct {
	id int
	cl *kgo.Client
}

// nextGenMember starts a KIP-848 member; opts are added last (another listener, TLS, SASL).
func (d *daemon) nextGenMember(t *testing.T, own *ownership, id int, group, topic string, opts ...kgo.Opt) *nextGenMember {
	t.Helper()
	cb := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, p map[string][]int32) { own.update(id, p[topic], add) }
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(d.Addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(),
		kgo.DisableAutoCommit(),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.OnPartitionsAssigned(cb(true)),
		kgo.OnPartitionsRevoked(cb(false)),
		kgo.OnPartitionsLost(cb(false)),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(cl.Close)
	return &nextGenMember{id: id, cl: cl}
}

// waitConsumerBalanced waits until the members' callbacks show every partition owned once and
// evenly, and ConsumerGroupDescribe shows a Stable group of exactly these members.
func waitConsumerBalanced(t *testing.T, adm *kadm.Client, own *ownership, group string, members []*nextGenMember, partitions int) kadm.DescribedConsumerGroup {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		own.check(t)
		total, ok := 0, true
		for _, m := range members {
			n := len(own.of(m.id))
			total += n
			if n < partitions/len(members) || n > (partitions+len(members)-1)/len(members) {
				ok = false
			}
		}
		if ok && total == partitions {
			described, err := adm.DescribeConsumerGroups(ctxT(t), group)
			if err == nil {
				g := described[group]
				if g.Err == nil && g.State == "Stable" && len(g.Members) == len(members) {
					return g
				}
				last = fmt.Sprintf("state %s members %d err %v", g.State, len(g.Members), g.Err)
			} else {
				last = err.Error()
			}
		} else {
			last = fmt.Sprintf("owned total %d", total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s never balanced over %d members: %s", group, len(members), last)
	return kadm.DescribedConsumerGroup{}
}

func commitOwned(t *testing.T, m *nextGenMember, own *ownership, topic string, base int64) {
	t.Helper()
	offs := map[int32]kgo.EpochOffset{}
	for _, p := range own.of(m.id) {
		offs[p] = kgo.EpochOffset{Epoch: -1, Offset: base + int64(p)}
	}
	var commitErr error
	m.cl.CommitOffsetsSync(ctxT(t), map[string]map[int32]kgo.EpochOffset{topic: offs}, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						commitErr = fmt.Errorf("partition %d: code %d (epoch %d)", rp.Partition, rp.ErrorCode, req.Generation)
					}
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("member %d commit: %v", m.id, commitErr)
	}
}

// Three next-gen members share a topic, commit with their member epochs, and the group
// rebalances as members leave and join; then the daemon is killed (-9) while a join is being
// reconciled and restarted on the same port: the members ride through, the group settles, the
// offsets are there, and no partition was ever held by two members.
func TestConsumerProtocolKgoMembers(t *testing.T) {
	t.Parallel()
	listener := fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", freePort(t))
	sets := append([]string{listener}, consumerKeys...)
	d := startDaemon(t, sets...)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 12)
	own := &ownership{owner: map[int32]int{}}
	var members []*nextGenMember
	for i := 0; i < 3; i++ {
		members = append(members, d.nextGenMember(t, own, i, "g", "t"))
	}
	g := waitConsumerBalanced(t, adm, own, "g", members, 12)
	if g.AssignorName != "uniform" {
		t.Fatalf("assignor %q, want the default uniform", g.AssignorName)
	}
	for _, m := range members {
		commitOwned(t, m, own, "t", 100)
	}
	listed, err := adm.ListGroups(ctxT(t))
	if err != nil || listed["g"].ProtocolType != "consumer" || listed["g"].GroupType != "consumer" || listed["g"].State != "Stable" {
		t.Fatalf("ListGroups: %+v %v", listed["g"], err)
	}

	members[2].cl.Close() // leaves with epoch -1
	members = members[:2]
	waitConsumerBalanced(t, adm, own, "g", members, 12)
	members = append(members, d.nextGenMember(t, own, 3, "g", "t"))
	waitConsumerBalanced(t, adm, own, "g", members, 12)

	// A fourth member joins; the daemon dies while the others are revoking for it.
	members = append(members, d.nextGenMember(t, own, 4, "g", "t"))
	deadline := time.Now().Add(10 * time.Second)
	for len(own.of(4)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	d.kill()
	d.start(sets...)
	adm = kadm.NewClient(d.client())
	waitConsumerBalanced(t, adm, own, "g", members, 12)
	for _, m := range members {
		commitOwned(t, m, own, "t", 200)
	}
	got, err := adm.FetchOffsets(ctxT(t), "g")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, got.Error())
	}
	for p := int32(0); p < 12; p++ {
		if o, ok := got.Lookup("t", p); !ok || o.At != 200+int64(p) {
			t.Fatalf("partition %d offset %+v", p, o)
		}
	}
	own.check(t)
}

// A kill -9 loses nothing acknowledged: a group whose members stop heartbeating is emptied by
// its session timers re-armed after the restart, and DeleteGroups then deletes it.
func TestConsumerProtocolSessionExpiryAfterRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, consumerKeys...)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 4)
	own := &ownership{owner: map[int32]int{}}
	m := d.nextGenMember(t, own, 0, "g", "t")
	waitConsumerBalanced(t, adm, own, "g", []*nextGenMember{m}, 4)
	d.kill()
	m.cl.Close()
	d.start(consumerKeys...)
	adm = kadm.NewClient(d.client())
	deadline := time.Now().Add(30 * time.Second)
	for {
		described, err := adm.DescribeConsumerGroups(ctxT(t), "g")
		if err == nil && described["g"].State == "Empty" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group never emptied: %+v %v", described["g"], err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res, err := adm.DeleteGroups(ctxT(t), "g")
	if err != nil || res["g"].Err != nil {
		t.Fatalf("delete: %v %v", err, res["g"].Err)
	}
	described, _ := adm.DescribeConsumerGroups(ctxT(t), "g")
	if described["g"].Err == nil {
		t.Fatal("deleted group still described")
	}
}
