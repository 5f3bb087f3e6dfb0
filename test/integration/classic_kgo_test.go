package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupMember is one kgo consumer-group member whose assignment is observed through its
// partition callbacks. coordinatord serves no Fetch, so the members never consume; group
// membership, rebalances and commits are what these tests drive.
type groupMember struct {
	cl    *kgo.Client
	mu    sync.Mutex
	owned map[int32]bool
	// pollErrs are the latest errors the polls returned: how a refused member (an ACL
	// denial) shows in the application.
	pollErrs []error
}

// maxPollErrs bounds pollErrs: a refused member retries, and fails again, for as long as it runs.
const maxPollErrs = 64

func (d *daemon) groupMember(t *testing.T, group, topic string, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{owned: map[int32]bool{}}
	update := func(parts map[string][]int32, add bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range parts[topic] {
			if add {
				m.owned[p] = true
			} else {
				delete(m.owned, p)
			}
		}
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(d.Addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.SessionTimeout(6 * time.Second),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { update(p, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { update(p, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, p map[string][]int32) { update(p, false) }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	// kgo runs the group while the application polls; the polls see only errors here: of the
	// group (kgo.ErrGroupSession) or of a topic's metadata.
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachError(func(_ string, _ int32, err error) {
				m.mu.Lock()
				defer m.mu.Unlock()
				if m.pollErrs = append(m.pollErrs, err); len(m.pollErrs) > maxPollErrs {
					m.pollErrs = m.pollErrs[1:]
				}
			})
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(cl.Close)
	return m
}

// polled reports whether a recent poll returned target (errors.Is).
func (m *groupMember) polled(target error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, err := range m.pollErrs {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func (m *groupMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.owned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// waitBalanced waits until every partition is owned by exactly one member, every member owns
// its fair share, and the group is Stable with exactly these members.
func waitBalanced(t *testing.T, adm *kadm.Client, group string, members []*groupMember, partitions int) kadm.DescribedGroup {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		owner := map[int32]int{}
		ok := true
		for i, m := range members {
			ps := m.partitions()
			if len(ps) < partitions/len(members) || len(ps) > (partitions+len(members)-1)/len(members) {
				ok = false
			}
			for _, p := range ps {
				if _, dup := owner[p]; dup {
					ok = false
				}
				owner[p] = i
			}
		}
		if ok && len(owner) == partitions {
			described, err := adm.DescribeGroups(ctxT(t), group)
			if err == nil {
				g := described[group]
				if g.State == "Stable" && len(g.Members) == len(members) {
					return g
				}
				last = fmt.Sprintf("state %s members %d", g.State, len(g.Members))
			}
		} else {
			last = fmt.Sprintf("owners %v", owner)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s never balanced over %d members: %s", group, len(members), last)
	return kadm.DescribedGroup{}
}

// The bar (spec coordinator-apis §2, §8.3): ten real kgo members rebalance correctly when
// members come and go, for the cooperative-sticky and the range balancers.
func TestClassicKgoTenMembersComeAndGo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		protocol string
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), "cooperative-sticky"},
		{"range", kgo.RangeBalancer(), "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
			adm := kadm.NewClient(d.client())
			createTopic(t, adm, "t", 20)
			var members []*groupMember
			for i := 0; i < 10; i++ {
				members = append(members, d.groupMember(t, "g", "t", kgo.Balancers(tc.balancer)))
			}
			g := waitBalanced(t, adm, "g", members, 20)
			if g.Protocol != tc.protocol || g.ProtocolType != "consumer" {
				t.Fatalf("protocol %q type %q", g.Protocol, g.ProtocolType)
			}
			// Five leave (kgo sends LeaveGroup on Close).
			for _, m := range members[5:] {
				m.cl.Close()
			}
			members = members[:5]
			waitBalanced(t, adm, "g", members, 20)
			// Three more come.
			for i := 0; i < 3; i++ {
				members = append(members, d.groupMember(t, "g", "t", kgo.Balancers(tc.balancer)))
			}
			waitBalanced(t, adm, "g", members, 20)
		})
	}
}

// Committed offsets of group members survive kill -9, and so does the Stable group itself
// (generation, members, assignments), spec coordinator-apis §2 / ARCHITECTURE §6.2.
func TestClassicKgoCommitsAndGroupSurviveKill9(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 20)
	var members []*groupMember
	for i := 0; i < 10; i++ {
		members = append(members, d.groupMember(t, "g", "t"))
	}
	before := waitBalanced(t, adm, "g", members, 20)
	for _, m := range members {
		offs := map[int32]kgo.EpochOffset{}
		for _, p := range m.partitions() {
			offs[p] = kgo.EpochOffset{Epoch: -1, Offset: int64(1000 + p)}
		}
		var commitErr error
		m.cl.CommitOffsetsSync(ctxT(t), map[string]map[int32]kgo.EpochOffset{"t": offs}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if err == nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if rp.ErrorCode != 0 {
							commitErr = fmt.Errorf("partition %d: code %d", rp.Partition, rp.ErrorCode)
						}
					}
				}
			}
		})
		if commitErr != nil {
			t.Fatalf("member commit: %v", commitErr)
		}
	}
	d.kill()
	for _, m := range members {
		m.cl.Close()
	}
	d.start("group.initial.rebalance.delay.ms=0")
	adm = kadm.NewClient(d.client())
	got, err := adm.FetchOffsets(ctxT(t), "g")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch: %v %v", err, got.Error())
	}
	for p := int32(0); p < 20; p++ {
		if o, _ := got.Lookup("t", p); o.At != int64(1000+p) {
			t.Fatalf("t/%d after kill -9: %+v", p, o)
		}
	}
	described, err := adm.DescribeGroups(ctxT(t), "g")
	if err != nil {
		t.Fatal(err)
	}
	after := described["g"]
	if after.State != "Stable" || len(after.Members) != 10 || after.Protocol != before.Protocol {
		t.Fatalf("group after kill -9: %s, %d members, protocol %q", after.State, len(after.Members), after.Protocol)
	}
	// Members and assignments come back as they were.
	if !reflect.DeepEqual(before.AssignedPartitions(), after.AssignedPartitions()) || len(after.AssignedPartitions()["t"]) != 20 {
		t.Fatalf("assignments before %v after %v", before.AssignedPartitions(), after.AssignedPartitions())
	}
	ids := func(g kadm.DescribedGroup) []string {
		var out []string
		for _, m := range g.Members {
			out = append(out, m.MemberID)
		}
		sort.Strings(out)
		return out
	}
	if !reflect.DeepEqual(ids(before), ids(after)) {
		t.Fatalf("members before %v after %v", ids(before), ids(after))
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Live kgo members ride through a kill -9 of the daemon (restarted on the same port): the group
// comes back from its records with the same members and assignments, their heartbeats find their
// sessions re-armed, and later membership changes still rebalance correctly (spec §2, §2.4).
func TestClassicKgoMembersRideThroughKill9(t *testing.T) {
	t.Parallel()
	listener := fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", freePort(t))
	d := startDaemon(t, listener, "group.initial.rebalance.delay.ms=0")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 12)
	var members []*groupMember
	for i := 0; i < 4; i++ {
		members = append(members, d.groupMember(t, "g", "t"))
	}
	before := waitBalanced(t, adm, "g", members, 12)
	_, gen := members[0].cl.GroupMetadata()
	d.kill()
	d.start(listener, "group.initial.rebalance.delay.ms=0")
	adm = kadm.NewClient(d.client())
	after := waitBalanced(t, adm, "g", members, 12)
	if !reflect.DeepEqual(before.AssignedPartitions(), after.AssignedPartitions()) {
		t.Fatalf("assignments changed across the restart: %v -> %v", before.AssignedPartitions(), after.AssignedPartitions())
	}
	// Several session timeouts later the members are still there: their heartbeats found them.
	time.Sleep(7 * time.Second)
	after = waitBalanced(t, adm, "g", members, 12)
	if _, gen2 := members[0].cl.GroupMetadata(); gen2 != gen {
		t.Fatalf("generation %d after the restart, want %d: the group rebalanced", gen2, gen)
	}
	members = append(members, d.groupMember(t, "g", "t"))
	waitBalanced(t, adm, "g", members, 12)
	members[0].cl.Close()
	waitBalanced(t, adm, "g", members[1:], 12)
}
