package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
)

// Sarama consumer groups are a client stack independent of franz-go. coordinatord serves no
// Fetch or ListOffsets, so sarama's partition consumers never start (it reports that on its
// Errors channel); the group protocol — join, sync, heartbeat, leave, commit — is what these
// tests drive, observing assignments through Setup/Cleanup.
type saramaMember struct {
	cg     sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	claims  []int32
	commits int
}

type saramaHandler struct {
	m      *saramaMember
	topic  string
	commit func(p int32) int64 // offset to commit for a claimed partition; nil: no commit
}

func (h saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	claims := append([]int32(nil), s.Claims()[h.topic]...)
	sort.Slice(claims, func(i, j int) bool { return claims[i] < claims[j] })
	if h.commit != nil && len(claims) > 0 {
		for _, p := range claims {
			s.MarkOffset(h.topic, p, h.commit(p), "")
		}
		s.Commit()
	}
	h.m.mu.Lock()
	h.m.claims = claims
	if h.commit != nil {
		h.m.commits++
	}
	h.m.mu.Unlock()
	return nil
}

func (h saramaHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.m.mu.Lock()
	h.m.claims = nil
	h.m.mu.Unlock()
	return nil
}

func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, _ sarama.ConsumerGroupClaim) error {
	<-s.Context().Done()
	return nil
}

func newSaramaMember(t *testing.T, d *daemon, group, topic, strategy string, commit func(int32) int64) *saramaMember {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.ClientID = "sarama"
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	switch strategy {
	case "range":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	case "sticky":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	}
	cg, err := sarama.NewConsumerGroup([]string{d.Addr}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{cg: cg, cancel: cancel, done: make(chan struct{})}
	go func() {
		for range cg.Errors() { // partition consumers fail: no Fetch/ListOffsets here
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, saramaHandler{m: m, topic: topic, commit: commit}); err != nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *saramaMember) close() {
	m.cancel()
	m.cg.Close() // sends LeaveGroup
	<-m.done
}

func (m *saramaMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.claims...)
}

func waitSaramaBalanced(t *testing.T, adm *kadm.Client, group string, members []*saramaMember, partitions int) kadm.DescribedGroup {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		owner := map[int32]int{}
		ok := true
		for i, m := range members {
			ps := m.partitions()
			if len(ps) != partitions/len(members) && len(ps) != (partitions+len(members)-1)/len(members) {
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
	t.Fatalf("sarama group never balanced over %d members: %s", len(members), last)
	return kadm.DescribedGroup{}
}

// The bar with a second client stack: ten sarama members rebalance correctly as
// members come and go (range and sticky strategies), spec coordinator-apis §2.
func TestClassicSaramaTenMembersComeAndGo(t *testing.T) {
	t.Parallel()
	for _, strategy := range []string{"range", "sticky"} {
		t.Run(strategy, func(t *testing.T) {
			d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
			adm := kadm.NewClient(d.client())
			createTopic(t, adm, "t", 20)
			var members []*saramaMember
			for i := 0; i < 10; i++ {
				members = append(members, newSaramaMember(t, d, "g", "t", strategy, nil))
			}
			g := waitSaramaBalanced(t, adm, "g", members, 20)
			if g.Protocol != strategy || g.Members[0].ClientID != "sarama" {
				t.Fatalf("protocol %q client %q", g.Protocol, g.Members[0].ClientID)
			}
			for _, m := range members[6:] {
				m.close()
			}
			members = members[:6]
			waitSaramaBalanced(t, adm, "g", members, 20)
			for i := 0; i < 2; i++ {
				members = append(members, newSaramaMember(t, d, "g", "t", strategy, nil))
			}
			waitSaramaBalanced(t, adm, "g", members, 20)
		})
	}
}

// Sarama members' commits (MarkOffset + Commit inside the generation) survive kill -9.
func TestClassicSaramaCommitsSurviveKill9(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 20)
	var members []*saramaMember
	for i := 0; i < 10; i++ {
		members = append(members, newSaramaMember(t, d, "g", "t", "range", func(p int32) int64 { return int64(500 + p) }))
	}
	waitSaramaBalanced(t, adm, "g", members, 20)
	// Setup commits synchronously before it records the claims; wait until the balanced
	// generation's commits are all acknowledged.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := adm.FetchOffsets(ctxT(t), "g")
		n := 0
		if err == nil {
			for p := int32(0); p < 20; p++ {
				if o, ok := got.Lookup("t", p); ok && o.At == int64(500+p) {
					n++
				}
			}
		}
		if n == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 20 sarama commits acknowledged", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.kill()
	d.start("group.initial.rebalance.delay.ms=0")
	got, err := kadm.NewClient(d.client()).FetchOffsets(ctxT(t), "g")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch after kill -9: %v %v", err, got.Error())
	}
	for p := int32(0); p < 20; p++ {
		if o, _ := got.Lookup("t", p); o.At != int64(500+p) {
			t.Fatalf("t/%d after kill -9: %+v", p, o)
		}
	}
}
